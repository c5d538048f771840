//! What reading tasks costs the database: `GetTask` with a long history runs a bounded
//! number of SQL statements, whatever the number of the task's messages (its history is one
//! read, the client's message ids with it); `ListTasks` too, whatever the number of tasks
//! on its page (their runs, sessions, events and messages are one read each). Statements
//! are counted from the app's debug log (`sqlx::query` events) inside the request's span,
//! named by its `X-Request-Id`.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{V1, message, rpc_ok};
use crate::helpers::{TestApp, TestDb, captured_logs, spawn_app_on};
use crate::scripted::{Reply, ScriptedOpenAi, finish, text, tool_fragment};

/// The statements the request with this client request id ran.
fn statements_of(request_id: &str) -> usize {
    captured_logs()
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|event| event["target"] == "sqlx::query")
        .filter(|event| {
            event["spans"].as_array().is_some_and(|spans| {
                spans
                    .iter()
                    .any(|span| span["client_request_id"] == request_id)
            })
        })
        .count()
}

/// A JSON-RPC call made with a request id of its own; its result and statement count.
async fn counted(app: &TestApp, token: &str, method: &str, params: Value) -> (Value, usize) {
    let id = format!("count-{}", uuid::Uuid::new_v4().simple());
    let body = json!({"jsonrpc": "2.0", "id": "r1", "method": method, "params": params});
    let response = app
        .client
        .post(app.url("/a2a/gpt"))
        .bearer_auth(token)
        .header("A2A-Version", V1.unwrap())
        .header("X-Request-Id", &id)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success());
    let reply: Value = response.json().await.unwrap();
    assert!(reply.get("error").is_none(), "{reply}");
    (reply["result"].clone(), statements_of(&id))
}

/// A GET made with a request id of its own; its body and statement count.
async fn counted_get(app: &TestApp, token: &str, path: &str) -> (Value, usize) {
    let id = format!("count-{}", uuid::Uuid::new_v4().simple());
    let response = app
        .client
        .get(app.url(path))
        .bearer_auth(token)
        .header("X-Request-Id", &id)
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success());
    (response.json().await.unwrap(), statements_of(&id))
}

async fn app_with_gpt(server: &ScriptedOpenAi) -> TestApp {
    let config = format!(
        "[[agents]]\nname = \"gpt\"\nprovider = \"openai\"\nbase_url = \"{}\"\nmodel = \"m\"\n\
         timeout_seconds = 5\nmax_retries = 0\n",
        server.url
    );
    spawn_app_on(Arc::new(TestDb::new().await), &config).await
}

/// A task of `turns` turns: the model asks the client tool `lookup` each turn but the last,
/// and each answer continues the task. Its context, and the task.
async fn task_of_turns(
    app: &TestApp,
    server: &ScriptedOpenAi,
    token: &str,
    turns: usize,
) -> (String, String) {
    let lookup = json!({"name": "lookup", "description": "d", "parameters": {"type": "object"}});
    let context = app
        .create_session(token, json!({"agent": {"name": "gpt"}, "tools": [lookup]}))
        .await;
    let ask = |i: usize| {
        Reply::Stream(vec![
            tool_fragment(0, Some(&format!("c{i}")), Some("lookup"), "{}"),
            finish("tool_calls"),
        ])
    };
    let mut first = message("start");
    first["contextId"] = json!(context);
    server.push(if turns > 1 {
        ask(0)
    } else {
        Reply::Stream(vec![text("done"), finish("stop")])
    });
    let task = rpc_ok(
        app,
        "gpt",
        token,
        V1,
        "SendMessage",
        json!({"message": first}),
    )
    .await["task"]
        .clone();
    for i in 1..turns {
        server.push(if i + 1 < turns {
            ask(i)
        } else {
            Reply::Stream(vec![text("done"), finish("stop")])
        });
        let answer = json!({"message": {"messageId": super::message_id(), "role": "ROLE_USER",
            "taskId": task["id"], "contextId": context,
            "parts": [{"data": {"toolResult": {"toolCallId": format!("c{}", i - 1), "content": "r"}},
                       "mediaType": "application/json"}]}});
        rpc_ok(app, "gpt", token, V1, "SendMessage", answer).await;
    }
    (context, task["id"].as_str().unwrap().to_owned())
}

/// `tasks` more one-turn tasks in the context.
async fn more_tasks(
    app: &TestApp,
    server: &ScriptedOpenAi,
    token: &str,
    context: &str,
    tasks: usize,
) {
    for i in 0..tasks {
        server.push(Reply::Stream(vec![text("ok"), finish("stop")]));
        let mut followup = message(&format!("message {i}"));
        followup["contextId"] = json!(context);
        rpc_ok(
            app,
            "gpt",
            token,
            V1,
            "SendMessage",
            json!({"message": followup}),
        )
        .await;
    }
}

#[tokio::test]
async fn reading_tasks_runs_as_many_statements_whatever_their_history_or_number() {
    let server = ScriptedOpenAi::start().await;
    let app = app_with_gpt(&server).await;
    let mut counts = Vec::new();
    for (turns, tasks) in [(2, 3), (12, 30)] {
        let (_, token) = app.new_tenant().await;
        let (context, task) = task_of_turns(&app, &server, &token, turns).await;
        more_tasks(&app, &server, &token, &context, tasks - 1).await;
        let (got, get_count) = counted(
            &app,
            &token,
            "GetTask",
            json!({"id": task, "historyLength": 50}),
        )
        .await;
        assert_eq!(got["history"].as_array().unwrap().len(), turns, "{got}");
        let (listed, list_count) = counted(
            &app,
            &token,
            "ListTasks",
            json!({"contextId": context, "pageSize": 100, "historyLength": 50}),
        )
        .await;
        assert_eq!(listed["tasks"].as_array().unwrap().len(), tasks, "{listed}");
        // The same tasks as runs, listed across faces.
        let (runs, runs_count) = counted_get(&app, &token, "/runs?limit=100").await;
        assert_eq!(runs["runs"].as_array().unwrap().len(), tasks, "{runs}");
        counts.push((turns, tasks, get_count, list_count, runs_count));
    }
    eprintln!("statements (turns, tasks, GetTask, ListTasks, GET /runs): {counts:?}");
    for (turns, tasks, get_count, list_count, runs_count) in &counts {
        assert!(
            *runs_count <= LIST_BOUND,
            "GET /runs of {tasks} runs ran {runs_count} statements"
        );
        assert!(
            *get_count <= BOUND,
            "GetTask of a task of {turns} turns ran {get_count} statements"
        );
        assert!(
            *list_count <= LIST_BOUND,
            "ListTasks of {tasks} tasks ran {list_count} statements"
        );
    }
}

/// The most statements `GetTask` may run (authentication included).
const BOUND: usize = 8;

/// The most statements a page of `ListTasks` (or of `GET /runs`) may run (authentication included): the page
/// and its count, then one read each of its runs, their turns, sessions, events and
/// messages.
const LIST_BOUND: usize = 12;
