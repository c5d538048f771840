//! Input-required tasks (a client tool's call, a server tool's permission), answered in the
//! next message to the task; one session continued across faces; schemas on A2A parts.

use std::sync::Arc;

use reqwest::Method;
use serde_json::{Value, json};

use super::{V1, artifact_text, message, rest, rpc_error, rpc_ok, send};
use crate::helpers::{TestApp, TestDb, spawn_app, spawn_app_on, user};
use crate::scripted::{Reply, ScriptedOpenAi, finish, text, tool_fragment};

async fn app_with_gpt(server: &ScriptedOpenAi) -> TestApp {
    let config = format!(
        r#"
[[agents]]
name = "gpt"
provider = "openai"
base_url = "{}"
model = "m"
timeout_seconds = 2
max_retries = 0

[[agents.tools]]
name = "clock"
"#,
        server.url
    );
    spawn_app_on(Arc::new(TestDb::new().await), &config).await
}

/// An AAP session of `gpt` with the client tool `lookup` and the untrusted server tool
/// `clock` (A2A cannot declare tools): its id is the context A2A continues.
async fn tool_context(app: &TestApp, token: &str) -> String {
    let lookup = json!({"name": "lookup", "description": "d", "parameters": {"type": "object"}});
    app.create_session(
        token,
        json!({"agent": {"name": "gpt", "tools": [{"name": "clock"}]}, "tools": [lookup]}),
    )
    .await
}

fn in_context(text: &str, context: &str) -> Value {
    let mut message = message(text);
    message["contextId"] = json!(context);
    json!({ "message": message })
}

fn answer(task: &Value, data: Value) -> Value {
    json!({"message": {"messageId": super::message_id(), "role": "ROLE_USER", "taskId": task["id"],
        "contextId": task["contextId"], "parts": [{"data": data, "mediaType": "application/json"}]}})
}

/// The calls an input-required task's status message asks for.
fn asked(task: &Value) -> Value {
    assert_eq!(
        task["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{task}"
    );
    let parts = &task["status"]["message"]["parts"];
    assert_eq!(task["status"]["message"]["role"], "ROLE_AGENT");
    assert!(
        parts[0]["text"]
            .as_str()
            .unwrap()
            .starts_with("The agent needs"),
        "{parts}"
    );
    parts[1]["data"]["toolCalls"].clone()
}

#[tokio::test]
async fn a_client_tool_call_is_answered_in_the_next_message_and_the_task_completes() {
    let server = ScriptedOpenAi::start().await;
    let app = app_with_gpt(&server).await;
    let (_, token) = app.new_tenant().await;
    let context = tool_context(&app, &token).await;

    server.push(Reply::Stream(vec![
        tool_fragment(0, Some("a"), Some("lookup"), r#"{"q": "x"}"#),
        finish("tool_calls"),
    ]));
    let task = rpc_ok(
        &app,
        "gpt",
        &token,
        V1,
        "SendMessage",
        in_context("look it up", &context),
    )
    .await["task"]
        .clone();
    assert_eq!(task["contextId"], context.as_str());
    assert_eq!(
        asked(&task),
        json!([{"id": "a", "name": "lookup", "arguments": {"q": "x"}, "answer": "result"}])
    );
    // Still working on the calls: a second task in the context is refused, clearly.
    let busy = rpc_error(
        &app,
        "gpt",
        &token,
        V1,
        "SendMessage",
        in_context("again", &context),
    )
    .await;
    assert_eq!(busy["code"], -32004, "{busy}");

    server.push(Reply::Stream(vec![text("It is 42."), finish("stop")]));
    let done = rpc_ok(
        &app,
        "gpt",
        &token,
        V1,
        "SendMessage",
        answer(
            &task,
            json!({"toolResult": {"toolCallId": "a", "content": "42"}}),
        ),
    )
    .await["task"]
        .clone();
    assert_eq!(done["id"], task["id"], "the answer continues the same task");
    assert_eq!(done["status"]["state"], "TASK_STATE_COMPLETED", "{done}");
    assert_eq!(artifact_text(&done), "It is 42.");
    let history = done["history"].as_array().unwrap();
    assert_eq!(
        history.len(),
        2,
        "the user message and the answer: {history:?}"
    );
    assert_eq!(
        history[1]["parts"][0]["data"]["toolResult"]["toolCallId"],
        "a"
    );
    let model_saw = server.requests().last().unwrap().body["messages"].clone();
    let tool = model_saw
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap();
    assert_eq!(tool["content"], "42");
    assert_eq!(tool["tool_call_id"], "a");

    // An ended task takes no more messages.
    let ended = rpc_error(
        &app,
        "gpt",
        &token,
        V1,
        "SendMessage",
        answer(
            &done,
            json!({"toolResult": {"toolCallId": "a", "content": "1"}}),
        ),
    )
    .await;
    assert_eq!(ended["code"], -32004, "{ended}");
}

#[tokio::test]
async fn a_permission_request_is_approved_in_one_task_and_denied_in_another() {
    let server = ScriptedOpenAi::start().await;
    let app = app_with_gpt(&server).await;
    let (_, token) = app.new_tenant().await;
    let context = tool_context(&app, &token).await;
    let clock_call = || {
        Reply::Stream(vec![
            tool_fragment(0, Some("c"), Some("clock"), "{}"),
            finish("tool_calls"),
        ])
    };

    server.push(clock_call());
    let task = rpc_ok(
        &app,
        "gpt",
        &token,
        V1,
        "SendMessage",
        in_context("time?", &context),
    )
    .await["task"]
        .clone();
    assert_eq!(
        asked(&task),
        json!([{"id": "c", "name": "clock", "arguments": {}, "answer": "permission"}])
    );
    server.push(Reply::Stream(vec![text("Noon."), finish("stop")]));
    let approved = rpc_ok(
        &app,
        "gpt",
        &token,
        V1,
        "SendMessage",
        answer(
            &task,
            json!({"toolPermission": {"toolCallId": "c", "granted": true}}),
        ),
    )
    .await["task"]
        .clone();
    assert_eq!(
        approved["status"]["state"], "TASK_STATE_COMPLETED",
        "{approved}"
    );
    assert_eq!(artifact_text(&approved), "Noon.");
    // The clock ran: its result went to the model.
    let model_saw = server.requests().last().unwrap().body["messages"].clone();
    let result = model_saw
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap();
    assert!(
        !result["content"].as_str().unwrap().contains("denied"),
        "{result}"
    );

    server.push(clock_call());
    let task = rpc_ok(
        &app,
        "gpt",
        &token,
        V1,
        "SendMessage",
        in_context("time again?", &context),
    )
    .await["task"]
        .clone();
    // The model calls `c` again: the task asks for a call of its own, not the answered one.
    let again = asked(&task)[0]["id"].as_str().unwrap().to_owned();
    assert!(again != "c" && again.starts_with('c'), "{again}");
    server.push(Reply::Stream(vec![text("No clock then."), finish("stop")]));
    // Over REST this time.
    let denied = rest(
        &app,
        Method::POST,
        "/a2a/gpt/message:send",
        &token,
        V1,
        Some(answer(
            &task,
            json!({"toolPermission": {"toolCallId": again, "granted": false, "reason": "not now"}}),
        )),
    )
    .await;
    let denied = &denied.body["task"];
    assert_eq!(
        denied["status"]["state"], "TASK_STATE_COMPLETED",
        "{denied}"
    );
    let model_saw = server.requests().last().unwrap().body["messages"].clone();
    let refusal = model_saw
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "tool")
        .unwrap();
    assert!(
        refusal["content"].as_str().unwrap().contains("not now"),
        "{refusal}"
    );

    // An answer that names no pending call is refused, naming the parts.
    server.push(clock_call());
    let task = rpc_ok(
        &app,
        "gpt",
        &token,
        V1,
        "SendMessage",
        in_context("once more", &context),
    )
    .await["task"]
        .clone();
    let wrong = rpc_error(
        &app,
        "gpt",
        &token,
        V1,
        "SendMessage",
        answer(&task, json!({"something": "else"})),
    )
    .await;
    assert_eq!(wrong["code"], -32602, "{wrong}");
    let canceled = rpc_ok(
        &app,
        "gpt",
        &token,
        V1,
        "CancelTask",
        json!({"id": task["id"]}),
    )
    .await;
    assert_eq!(
        canceled["status"]["state"], "TASK_STATE_CANCELED",
        "an input-required task is canceled: {canceled}"
    );
}

#[tokio::test]
async fn one_session_is_continued_across_a2a_and_aap_both_ways() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;

    // Made over A2A, continued over AAP: the history holds both.
    let task = send(&app, "echo", &token, "from A2A").await;
    let context = task["contextId"].as_str().unwrap();
    let turn = app
        .post(
            &format!("/sessions/{context}/turns"),
            &token,
            json!({"messages": [user("from AAP")]}),
        )
        .await;
    assert_eq!(turn.body["stopReason"], "end_turn", "{}", turn.text);
    // And over ACP: its run is a task of the context too.
    let acp = app
        .post(
            "/acp/runs",
            &token,
            json!({"agent_name": "echo", "session_id": context,
                   "input": [{"role": "user", "parts": [{"content": "from ACP"}]}]}),
        )
        .await;
    assert_eq!(acp.body["status"], "completed", "{}", acp.text);
    let history = app
        .get(&format!("/sessions/{context}/history?type=full"), &token)
        .await;
    let text_of = |content: &Value| match content.as_str() {
        Some(text) => text.to_owned(),
        None => content[0]["text"].as_str().unwrap_or_default().to_owned(),
    };
    let texts: Vec<String> = history.body["history"]["full"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| text_of(&m["content"]))
        .collect();
    assert_eq!(
        texts,
        [
            "from A2A", "from A2A", "from AAP", "from AAP", "from ACP", "from ACP"
        ],
        "{}",
        history.text
    );
    let tasks_here = rpc_ok(
        &app,
        "echo",
        &token,
        V1,
        "ListTasks",
        json!({"contextId": context, "includeArtifacts": true}),
    )
    .await;
    assert_eq!(
        tasks_here["totalSize"], 2,
        "the A2A task and the ACP run: {tasks_here}"
    );
    assert_eq!(artifact_text(&tasks_here["tasks"][0]), "from ACP");

    // Made over AAP, continued over A2A: the task is in that context, and lists there.
    let session = app
        .create_session(&token, json!({"agent": {"name": "echo"}}))
        .await;
    let continued = rpc_ok(
        &app,
        "echo",
        &token,
        V1,
        "SendMessage",
        in_context("over A2A", &session),
    )
    .await["task"]
        .clone();
    assert_eq!(continued["contextId"], session.as_str());
    assert_eq!(artifact_text(&continued), "over A2A");
    let listed = rpc_ok(
        &app,
        "echo",
        &token,
        V1,
        "ListTasks",
        json!({"contextId": session}),
    )
    .await;
    assert_eq!(listed["tasks"][0]["id"], continued["id"]);
    // A context of another agent is refused, naming the field.
    let elsewhere = rpc_error(
        &app,
        "slow",
        &token,
        V1,
        "SendMessage",
        in_context("hi", &session),
    )
    .await;
    assert_eq!(elsewhere["code"], -32602);
    assert_eq!(
        elsewhere["data"][0]["metadata"]["field"], "message.contextId",
        "{elsewhere}"
    );
    // A client's own context id names a new session, continued by it.
    let own = rpc_ok(
        &app,
        "echo",
        &token,
        V1,
        "SendMessage",
        in_context("mine", "my-conversation-1"),
    )
    .await["task"]
        .clone();
    assert_eq!(own["contextId"], "my-conversation-1");
    let again = rpc_ok(
        &app,
        "echo",
        &token,
        V1,
        "SendMessage",
        in_context("mine again", "my-conversation-1"),
    )
    .await["task"]
        .clone();
    let listed = rpc_ok(
        &app,
        "echo",
        &token,
        V1,
        "ListTasks",
        json!({"contextId": "my-conversation-1"}),
    )
    .await;
    assert_eq!(listed["totalSize"], 2);
    assert_eq!(listed["tasks"][0]["id"], again["id"]);
}

#[tokio::test]
async fn an_agents_input_schema_is_enforced_on_parts_naming_the_offending_one() {
    let config = r#"
[[agents]]
name = "docs"
provider = "echo"

[[agents.input_schema]]
content_type = "text/plain"

[[agents.input_schema]]
name = "/**"
content_type = "application/pdf"
"#;
    let app = spawn_app_on(Arc::new(TestDb::new().await), config).await;
    let (_, token) = app.new_tenant().await;
    let params = |parts: Value| json!({"message": {"messageId": super::message_id(), "role": "ROLE_USER", "parts": parts}});
    let fine = rpc_ok(&app, "docs", &token, V1, "SendMessage", params(json!([
        {"text": "read this"},
        {"url": "https://example.com/a.pdf", "mediaType": "application/pdf", "filename": "a.pdf"},
    ])))
    .await;
    assert_eq!(
        fine["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{fine}"
    );
    let image = rpc_error(
        &app,
        "docs",
        &token,
        V1,
        "SendMessage",
        params(json!([
            {"text": "and this"},
            {"raw": "aGk=", "mediaType": "image/png"},
        ])),
    )
    .await;
    assert_eq!(image["code"], -32005, "{image}");
    assert_eq!(image["data"][0]["reason"], "CONTENT_TYPE_NOT_SUPPORTED");
    assert!(
        image["message"]
            .as_str()
            .unwrap()
            .starts_with("message.parts[1]"),
        "{image}"
    );
    let unnamed_pdf = rpc_error(
        &app,
        "docs",
        &token,
        V1,
        "SendMessage",
        params(json!([
            {"url": "https://example.com/b.pdf", "mediaType": "application/pdf"},
        ])),
    )
    .await;
    assert_eq!(
        unnamed_pdf["code"], -32602,
        "a pdf must be named: {unnamed_pdf}"
    );
    assert_eq!(
        unnamed_pdf["data"][0]["metadata"]["field"],
        "message.parts[0]"
    );
    let wants = rpc_error(
        &app,
        "docs",
        &token,
        V1,
        "SendMessage",
        json!({
            "message": {"messageId": super::message_id(), "role": "ROLE_USER", "parts": [{"text": "x"}]},
            "configuration": {"acceptedOutputModes": ["image/png"]},
        }),
    )
    .await;
    assert_eq!(wants["code"], -32005, "{wants}");
}

/// The rules every face with contexts shares: text answers the single pending client call
/// only when it is not empty and comes alone; a task that does not wait for input takes
/// no answer.
#[tokio::test]
async fn free_text_answers_the_single_client_call_only_when_not_empty_and_alone() {
    let server = ScriptedOpenAi::start().await;
    let app = app_with_gpt(&server).await;
    let (_, token) = app.new_tenant().await;
    let context = tool_context(&app, &token).await;
    server.push(Reply::Stream(vec![
        tool_fragment(0, Some("a"), Some("lookup"), "{}"),
        finish("tool_calls"),
    ]));
    let task = rpc_ok(
        &app,
        "gpt",
        &token,
        V1,
        "SendMessage",
        in_context("look it up", &context),
    )
    .await["task"]
        .clone();
    asked(&task);
    let with_parts = |parts: Value| {
        json!({"message": {"messageId": super::message_id(), "role": "ROLE_USER",
            "taskId": task["id"], "contextId": task["contextId"], "parts": parts}})
    };
    let field = |error: &Value| error["data"][0]["metadata"]["field"].clone();

    let empty = rpc_error(
        &app,
        "gpt",
        &token,
        V1,
        "SendMessage",
        with_parts(json!([{"text": ""}])),
    )
    .await;
    assert_eq!(empty["code"], -32602, "{empty}");
    assert_eq!(field(&empty), "message.parts", "{empty}");
    let beside = rpc_error(
        &app,
        "gpt",
        &token,
        V1,
        "SendMessage",
        with_parts(json!([
            {"data": {"toolResult": {"toolCallId": "a", "content": "42"}}, "mediaType": "application/json"},
            {"text": "and a remark"}
        ])),
    )
    .await;
    assert_eq!(beside["code"], -32602, "{beside}");
    assert_eq!(field(&beside), "message.parts[1]", "{beside}");

    server.push(Reply::Stream(vec![text("It is 42."), finish("stop")]));
    let done = rpc_ok(
        &app,
        "gpt",
        &token,
        V1,
        "SendMessage",
        with_parts(json!([{"text": "42"}])),
    )
    .await["task"]
        .clone();
    assert_eq!(done["status"]["state"], "TASK_STATE_COMPLETED", "{done}");
    let sent = server.requests()[1].body["messages"]
        .as_array()
        .unwrap()
        .clone();
    let tool = sent.iter().find(|m| m["role"] == "tool").unwrap();
    assert_eq!(tool["content"], "42");

    let ended = rpc_error(
        &app,
        "gpt",
        &token,
        V1,
        "SendMessage",
        with_parts(json!([{"text": "more"}])),
    )
    .await;
    assert_eq!(ended["code"], -32004, "{ended}");
    assert!(
        ended["message"].as_str().unwrap().contains("has ended"),
        "{ended}"
    );
}
