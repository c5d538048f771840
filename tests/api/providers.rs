//! The `openai` provider against a scripted OpenAI-compatible server.

use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::{TestApp, TestDb, captured_logs, spawn_app_on, user};
use crate::scripted::{Reply, ScriptedOpenAi, finish, reasoning, text, tool_fragment, usage};

async fn app_with_gpt(server: &ScriptedOpenAi) -> TestApp {
    spawn_app_on(Arc::new(TestDb::new().await), &gpt_config(server)).await
}

fn gpt_config(server: &ScriptedOpenAi) -> String {
    String::from("[[agents]]\nname = \"gpt\"\nprovider = \"openai\"\n")
        + "base_url = \""
        + &server.url
        + "\"\n"
        + r#"model = "{{options.model}}"
api_key = "{{options.api_key}}"
system_prompt = "Answer in {{options.language}}."
timeout_seconds = 1
max_retries = 2
max_steps = 3

[[agents.options]]
name = "model"
type = "select"
options = ["tiny", "big"]
default = "tiny"

[[agents.options]]
name = "language"
type = "text"
default = "English"

[[agents.options]]
name = "api_key"
type = "secret"
default = ""

[[agents.tools]]
name = "calculator"

[[agents.tools]]
name = "clock"

[[agents.tools]]
name = "memory"
expose = false
"#
}

fn hello() -> Reply {
    Reply::Stream(vec![
        reasoning("Let me "),
        reasoning("think."),
        text("Bon"),
        text("jour"),
        finish("stop"),
        usage(21, 4),
    ])
}

/// The same scripted reply in a turn of each AAP stream mode, in order: the `delta` frames,
/// the `message` frames and the body of a turn without a stream.
async fn a_turn_in_each_mode(
    app: &TestApp,
    token: &str,
    session: &str,
    server: &ScriptedOpenAi,
    reply: impl Fn() -> Reply,
) -> (
    Vec<crate::sse::Frame>,
    Vec<crate::sse::Frame>,
    crate::helpers::Reply,
) {
    let mut streamed = Vec::new();
    for (mode, text) in [("delta", "Hi"), ("message", "Again")] {
        server.push(reply());
        let frames = app
            .stream_turn(
                token,
                session,
                json!({"stream": mode, "messages": [user(text)]}),
            )
            .await
            .collect()
            .await;
        streamed.push(frames);
    }
    server.push(reply());
    let none = app
        .post(
            &format!("/sessions/{session}/turns"),
            token,
            json!({"messages": [user("Once more")]}),
        )
        .await;
    let message = streamed.pop().unwrap();
    let delta = streamed.pop().unwrap();
    (delta, message, none)
}

#[tokio::test]
async fn openai_streams_text_and_thinking_in_all_three_modes_with_options_applied() {
    let server = ScriptedOpenAi::start().await;
    let app = app_with_gpt(&server).await;
    let (_, token) = app.new_tenant().await;
    let key = format!("sk-tenant-{}", uuid::Uuid::new_v4().simple());
    let session = app
        .create_session(
            &token,
            json!({"agent": {"name": "gpt", "options": {"model": "big", "language": "French", "api_key": key}}}),
        )
        .await;

    let (delta, message, none) = a_turn_in_each_mode(&app, &token, &session, &server, hello).await;
    let names = crate::sse::names(&delta);
    assert_eq!(
        names,
        [
            "turn_start",
            "thinking_delta",
            "thinking_delta",
            "text_delta",
            "text_delta",
            "turn_stop"
        ]
    );
    assert_eq!(delta[3].data, json!({"delta": "Bon"}));
    assert_eq!(delta[5].data, json!({"stopReason": "end_turn"}));

    let names = crate::sse::names(&message);
    assert_eq!(names, ["turn_start", "thinking", "text", "turn_stop"]);
    assert_eq!(message[2].data, json!({"text": "Bonjour"}));

    assert_eq!(
        none.body,
        json!({"stopReason": "end_turn", "messages": [{"role": "assistant", "content": [
            {"type": "thinking", "thinking": "Let me think."},
            {"type": "text", "text": "Bonjour"}
        ]}]})
    );

    // What the provider received: the decrypted key, the option-picked model, the
    // templated system prompt, the history without thinking, and no traceparent.
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let last = &requests[2];
    assert_eq!(
        last.authorization.as_deref(),
        Some(format!("Bearer {key}").as_str())
    );
    assert_eq!(last.body["model"], "big");
    assert_eq!(last.body["stream"], true);
    // Traces are not exported here: nothing propagates them.
    assert!(requests.iter().all(|r| r.traceparent.is_none()));
    assert_eq!(
        last.body["messages"],
        json!([
            {"role": "system", "content": "Answer in French."},
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Bonjour"},
            {"role": "user", "content": "Again"},
            {"role": "assistant", "content": "Bonjour"},
            {"role": "user", "content": "Once more"}
        ])
    );

    // Usage is the provider's own count.
    let turn = none.headers["agentry-turn-id"].to_str().unwrap();
    let record = app
        .get(&format!("/sessions/{session}/turns/{turn}"), &token)
        .await;
    assert_eq!(record.body["usage"]["input_tokens"], 21);
    assert_eq!(record.body["usage"]["output_tokens"], 4);

    // The key is nowhere a client or an operator can read it.
    let replay = app
        .stream(&format!("/sessions/{session}/events"), &token, None)
        .await;
    let mut replay = replay;
    let mut frames = Vec::new();
    while frames.len() < delta.len() + message.len() {
        frames.push(replay.next().await.unwrap());
    }
    let history = app
        .get(&format!("/sessions/{session}/history?type=full"), &token)
        .await;
    let session_view = app.get(&format!("/sessions/{session}"), &token).await;
    for text in [
        format!("{frames:?}"),
        history.text,
        session_view.text,
        captured_logs(),
    ] {
        assert!(!text.contains(&key), "the key leaked");
    }
}

async fn record_of(app: &TestApp, token: &str, session: &str, turn: String) -> serde_json::Value {
    app.get(&format!("/sessions/{session}/turns/{turn}"), token)
        .await
        .body
}

#[tokio::test]
async fn provider_failures_end_the_turn_with_a_clear_error_and_leave_the_session_usable() {
    let server = ScriptedOpenAi::start().await;
    let app = app_with_gpt(&server).await;
    let (_, token) = app.new_tenant().await;
    let key = "sk-leaky-key-0123456789";
    let session = app
        .create_session(
            &token,
            json!({"agent": {"name": "gpt", "options": {"api_key": key}}}),
        )
        .await;
    let path = format!("/sessions/{session}/turns");
    let turn = |text: &str| app.post(&path, &token, json!({"messages": [user(text)]}));
    let error_of = |reply: &crate::helpers::Reply| {
        let id = reply.headers["agentry-turn-id"]
            .to_str()
            .unwrap()
            .to_owned();
        record_of(&app, &token, &session, id)
    };

    // 5xx before the first token: retried, then a clear error.
    for _ in 0..3 {
        server.push(Reply::Status(
            503,
            json!({"error": {"message": "overloaded"}}),
        ));
    }
    let failed = turn("one").await;
    assert_eq!(failed.body["stopReason"], "error");
    // A `stream: "none"` answer says why, as the stream's turn_stop does.
    assert_eq!(
        failed.body["error"]["code"], "provider_error",
        "{}",
        failed.text
    );
    assert!(
        failed.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("503")
    );
    let record = error_of(&failed).await;
    assert_eq!(record["status"], "failed");
    assert_eq!(record["error"]["code"], "provider_error");
    let message = record["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("503") && message.contains("overloaded"),
        "{message}"
    );
    assert_eq!(server.requests().len(), 3, "two retries");

    // A client error is not retried, and its body is summarized without the key.
    server.push(Reply::Status(
        401,
        json!({"error": {"message": format!("Incorrect API key provided: {key}")}}),
    ));
    let rejected = turn("two").await;
    let record = error_of(&rejected).await;
    let message = record["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("401") && message.contains("Incorrect API key"),
        "{message}"
    );
    assert!(!message.contains(key));
    assert_eq!(server.requests().len(), 4);

    // After the first token: the stream breaks off; what arrived is kept.
    server.push(Reply::Break(vec![text("Partial ")]));
    let broken = turn("three").await;
    let record = error_of(&broken).await;
    assert_eq!(record["error"]["code"], "provider_error");
    assert_eq!(
        broken.body["messages"],
        json!([{"role": "assistant", "content": [{"type": "text", "text": "Partial "}]}])
    );

    // A provider that never answers times out (timeout_seconds = 1, two retries).
    for _ in 0..3 {
        server.push(Reply::Hang);
    }
    let started = Instant::now();
    let hung = turn("four").await;
    assert!(started.elapsed() < Duration::from_secs(10));
    let record = error_of(&hung).await;
    assert!(
        record["error"]["message"]
            .as_str()
            .unwrap()
            .contains("in time")
    );

    // 429 then success: retried, and the session still works.
    server.push(Reply::Status(
        429,
        json!({"error": {"message": "slow down"}}),
    ));
    server.push(hello());
    let ok = turn("five").await;
    assert_eq!(ok.status, StatusCode::OK);
    assert_eq!(ok.body["stopReason"], "end_turn");
    assert_eq!(ok.body["messages"][0]["content"][1]["text"], "Bonjour");
    assert!(!captured_logs().contains(key));
}

#[tokio::test]
async fn client_tools_stop_the_turn_and_their_results_resume_it() {
    let server = ScriptedOpenAi::start().await;
    let app = app_with_gpt(&server).await;
    let (_, token) = app.new_tenant().await;
    let lookup = json!({"name": "lookup", "description": "Looks things up.",
                        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}});
    let weather = json!({"name": "weather", "description": "Tells the weather.",
                         "parameters": {"type": "object"}});
    let session = app
        .create_session(
            &token,
            json!({"agent": {"name": "gpt"}, "tools": [lookup, weather]}),
        )
        .await;
    let meta = app.request(reqwest::Method::GET, "/meta", None, None).await;
    assert_eq!(
        meta.body["agents"][0]["capabilities"]["application"],
        json!({"tools": {}})
    );

    // Two parallel calls, their arguments split across fragments.
    server.push(Reply::Stream(vec![
        text("Checking."),
        tool_fragment(0, Some("call_a"), Some("lookup"), ""),
        tool_fragment(1, Some("call_b"), Some("weather"), "{}"),
        tool_fragment(0, None, None, "{\"q\":"),
        tool_fragment(0, None, None, "\"cats\"}"),
        finish("tool_calls"),
    ]));
    let frames = app
        .stream_turn(
            &token,
            &session,
            json!({"stream": "delta", "messages": [user("Cats?")]}),
        )
        .await
        .collect()
        .await;
    let names = crate::sse::names(&frames);
    assert_eq!(
        names,
        [
            "turn_start",
            "text_delta",
            "tool_call",
            "tool_call",
            "turn_stop"
        ]
    );
    assert_eq!(
        frames[2].data,
        json!({"toolCallId": "call_a", "name": "lookup", "input": {"q": "cats"}})
    );
    assert_eq!(
        frames[3].data,
        json!({"toolCallId": "call_b", "name": "weather", "input": {}})
    );
    assert_eq!(frames[4].data, json!({"stopReason": "tool_use"}));
    let sent = &server.requests()[0].body;
    assert_eq!(sent["tools"][0]["function"]["name"], "lookup");
    assert_eq!(
        sent["tools"][1]["function"]["parameters"],
        json!({"type": "object"})
    );

    // A client that forgot its state finds the calls in the history.
    let history = app
        .get(&format!("/sessions/{session}/history?type=full"), &token)
        .await;
    let asked = &history.body["history"]["full"][1]["content"];
    assert_eq!(asked[0], json!({"type": "text", "text": "Checking."}));
    assert_eq!(
        asked[1],
        json!({"type": "tool_use", "toolCallId": "call_a", "name": "lookup", "input": {"q": "cats"}})
    );

    // A user message while calls are pending, or a partial answer, is refused.
    let path = format!("/sessions/{session}/turns");
    let early = app
        .post(&path, &token, json!({"messages": [user("Well?")]}))
        .await;
    assert_eq!(early.status, StatusCode::BAD_REQUEST);
    assert!(
        early.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("call_a")
    );
    let partial = app
        .post(
            &path,
            &token,
            json!({"messages": [{"role": "tool", "toolCallId": "call_a", "content": "fluffy"}]}),
        )
        .await;
    assert_eq!(partial.status, StatusCode::BAD_REQUEST);
    assert!(
        partial.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("call_b")
    );

    // Both answers in one turn: the model continues to the end.
    server.push(Reply::Stream(vec![
        text("Cats are fluffy; it is sunny."),
        finish("stop"),
    ]));
    let done = app
        .post(
            &path,
            &token,
            json!({"messages": [
                {"role": "tool", "toolCallId": "call_a", "content": "fluffy"},
                {"role": "tool", "toolCallId": "call_b", "content": "sunny"}
            ]}),
        )
        .await;
    assert_eq!(done.status, StatusCode::OK, "{}", done.text);
    assert_eq!(done.body["stopReason"], "end_turn");
    let sent = &server.requests()[1].body["messages"];
    let sent = sent.as_array().unwrap();
    assert_eq!(
        sent[2]["tool_calls"][0]["function"]["arguments"],
        "{\"q\":\"cats\"}"
    );
    assert_eq!(
        sent[3],
        json!({"role": "tool", "tool_call_id": "call_a", "content": "fluffy"})
    );
    assert_eq!(
        sent[4],
        json!({"role": "tool", "tool_call_id": "call_b", "content": "sunny"})
    );
}

#[tokio::test]
async fn a_model_that_reuses_call_ids_turn_after_turn_is_awaited_each_time() {
    // Some OpenAI-compatible servers number calls per response (`call_0`, …).
    let server = ScriptedOpenAi::start().await;
    let app = app_with_gpt(&server).await;
    let (_, token) = app.new_tenant().await;
    let lookup = json!({"name": "lookup", "description": "Looks things up.",
                        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}});
    let session = app
        .create_session(&token, json!({"agent": {"name": "gpt"}, "tools": [lookup]}))
        .await;
    let path = format!("/sessions/{session}/turns");
    for (round, question) in ["Cats?", "Dogs?"].into_iter().enumerate() {
        server.push(Reply::Stream(vec![
            tool_fragment(0, Some("call_0"), Some("lookup"), "{\"q\":\"x\"}"),
            finish("tool_calls"),
        ]));
        let asked = app
            .post(&path, &token, json!({"messages": [user(question)]}))
            .await;
        assert_eq!(
            asked.status,
            StatusCode::OK,
            "round {round}: {}",
            asked.text
        );
        assert_eq!(asked.body["stopReason"], "tool_use", "round {round}");
        // The second `call_0` gets an id of its own: clients see a new, unanswered call.
        let id = asked.body["messages"][0]["content"][0]["toolCallId"]
            .as_str()
            .unwrap()
            .to_owned();
        if round == 0 {
            assert_eq!(id, "call_0");
        } else {
            assert!(id != "call_0" && id.starts_with("call_0"), "{id}");
        }

        // The call is pending: a user message is refused, naming it.
        let early = app
            .post(&path, &token, json!({"messages": [user("never mind")]}))
            .await;
        assert_eq!(early.status, StatusCode::BAD_REQUEST, "round {round}");
        assert!(early.text.contains(&id), "{}", early.text);

        server.push(Reply::Stream(vec![text("Done."), finish("stop")]));
        let answered = app
            .post(
                &path,
                &token,
                json!({"messages": [{"role": "tool", "toolCallId": id, "content": "found"}]}),
            )
            .await;
        assert_eq!(
            answered.status,
            StatusCode::OK,
            "round {round}: {}",
            answered.text
        );
        assert_eq!(answered.body["stopReason"], "end_turn");
    }
    assert_eq!(server.requests().len(), 4);
}

#[tokio::test]
async fn a_call_to_a_tool_that_does_not_exist_is_answered_for_the_model() {
    let server = ScriptedOpenAi::start().await;
    let app = app_with_gpt(&server).await;
    let (_, token) = app.new_tenant().await;
    let session = app
        .create_session(&token, json!({"agent": {"name": "gpt"}}))
        .await;
    server.push(Reply::Stream(vec![
        tool_fragment(0, Some("call_x"), Some("teleport"), "{}"),
        finish("tool_calls"),
    ]));
    server.push(Reply::Stream(vec![
        text("I cannot teleport."),
        finish("stop"),
    ]));
    let reply = app
        .post(
            &format!("/sessions/{session}/turns"),
            &token,
            json!({"messages": [user("Go")]}),
        )
        .await;
    assert_eq!(reply.body["stopReason"], "end_turn");
    let messages = reply.body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3);
    assert_eq!(messages[1]["role"], "tool");
    assert!(
        messages[1]["content"]
            .as_str()
            .unwrap()
            .contains("no tool named `teleport`")
    );
    assert_eq!(messages[2]["content"][0]["text"], "I cannot teleport.");
}

fn call(id: &str, name: &str, arguments: &str) -> serde_json::Value {
    tool_fragment(0, Some(id), Some(name), arguments)
}

#[tokio::test]
async fn trusted_server_tools_run_inline_and_untrusted_ones_wait_for_permission() {
    let server = ScriptedOpenAi::start().await;
    let app = app_with_gpt(&server).await;
    let (_, token) = app.new_tenant().await;
    let session = app
        .create_session(
            &token,
            json!({"agent": {"name": "gpt", "tools": [{"name": "calculator", "trust": true}, {"name": "clock"}]}}),
        )
        .await;
    let path = format!("/sessions/{session}/turns");

    // Trusted: runs at once, its result streamed, and the model goes on.
    server.push(Reply::Stream(vec![
        call("c1", "calculator", r#"{"expression": "6 * 7"}"#),
        finish("tool_calls"),
    ]));
    server.push(Reply::Stream(vec![text("It is 42."), finish("stop")]));
    let frames = app
        .stream_turn(
            &token,
            &session,
            json!({"stream": "delta", "messages": [user("6 times 7?")]}),
        )
        .await
        .collect()
        .await;
    let names = crate::sse::names(&frames);
    assert_eq!(
        names,
        [
            "turn_start",
            "tool_call",
            "tool_result",
            "text_delta",
            "turn_stop"
        ]
    );
    assert_eq!(frames[2].data, json!({"toolCallId": "c1", "content": "42"}));
    assert_eq!(frames[4].data["stopReason"], "end_turn");
    let requests = server.requests();
    let offered: Vec<&str> = requests[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(offered, ["calculator", "clock", "memory"]);
    assert_eq!(
        server.requests()[1].body["messages"]
            .as_array()
            .unwrap()
            .last()
            .unwrap(),
        &json!({"role": "tool", "tool_call_id": "c1", "content": "42"})
    );

    // Invalid arguments become a result the model can read.
    server.push(Reply::Stream(vec![
        call("c2", "calculator", r#"{"expr": "1"}"#),
        finish("tool_calls"),
    ]));
    server.push(Reply::Stream(vec![text("Oops."), finish("stop")]));
    let reply = app
        .post(&path, &token, json!({"messages": [user("again")]}))
        .await;
    let result = reply.body["messages"][1]["content"].as_str().unwrap();
    assert!(result.starts_with("Error: invalid arguments"), "{result}");

    // Untrusted: the turn stops for permission.
    server.push(Reply::Stream(vec![
        call("c3", "clock", "{}"),
        finish("tool_calls"),
    ]));
    let asked = app
        .post(
            &path,
            &token,
            json!({"messages": [user("What time is it?")]}),
        )
        .await;
    assert_eq!(asked.body["stopReason"], "tool_use");
    assert_eq!(
        asked.body["messages"].as_array().unwrap().len(),
        1,
        "no result yet"
    );
    let wrong = app
        .post(
            &path,
            &token,
            json!({"messages": [{"role": "tool", "toolCallId": "c3", "content": "noon"}]}),
        )
        .await;
    assert_eq!(wrong.status, StatusCode::BAD_REQUEST);
    assert!(
        wrong.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("tool_permission")
    );

    // Granted: it runs exactly once.
    let requests_before = server.requests().len();
    server.push(Reply::Stream(vec![text("Noon-ish."), finish("stop")]));
    let granted = app
        .post(
            &path,
            &token,
            json!({"messages": [{"role": "tool_permission", "toolCallId": "c3", "granted": true}]}),
        )
        .await;
    assert_eq!(granted.status, StatusCode::OK, "{}", granted.text);
    assert_eq!(granted.body["stopReason"], "end_turn");
    let time = granted.body["messages"][0]["content"].as_str().unwrap();
    assert!(time.ends_with('Z') && time.contains('T'), "{time}");
    assert_eq!(server.requests().len(), requests_before + 1);

    // Denied, with and without a reason.
    for (id, reason, expected) in [
        ("c4", Some("not now"), "Tool call denied: not now"),
        ("c5", None, "Tool call denied"),
    ] {
        server.push(Reply::Stream(vec![
            call(id, "clock", "{}"),
            finish("tool_calls"),
        ]));
        app.post(&path, &token, json!({"messages": [user("time?")]}))
            .await;
        server.push(Reply::Stream(vec![text("Fine."), finish("stop")]));
        let mut permission = json!({"role": "tool_permission", "toolCallId": id, "granted": false});
        if let Some(reason) = reason {
            permission["reason"] = json!(reason);
        }
        let denied = app
            .post(&path, &token, json!({"messages": [permission]}))
            .await;
        assert_eq!(
            denied.body["messages"][0],
            json!({"role": "tool", "toolCallId": id, "content": expected})
        );
    }

    // Permissions never enter the history; results do.
    let history = app
        .get(&format!("/sessions/{session}/history?type=full"), &token)
        .await;
    let history = history.body["history"]["full"].as_array().unwrap().clone();
    assert!(history.iter().all(|m| m["role"] != "tool_permission"));
    assert!(
        history
            .iter()
            .any(|m| m["content"] == "Tool call denied: not now")
    );
}

#[tokio::test]
async fn parallel_client_trusted_and_untrusted_calls_are_answered_in_one_turn() {
    let server = ScriptedOpenAi::start().await;
    let app = app_with_gpt(&server).await;
    let (_, token) = app.new_tenant().await;
    let lookup = json!({"name": "lookup", "description": "d", "parameters": {"type": "object"}});
    let session = app
        .create_session(
            &token,
            json!({"agent": {"name": "gpt", "tools": [{"name": "calculator", "trust": true}, {"name": "clock"}]},
                   "tools": [lookup]}),
        )
        .await;
    server.push(Reply::Stream(vec![
        tool_fragment(0, Some("a"), Some("lookup"), "{}"),
        tool_fragment(1, Some("b"), Some("calculator"), r#"{"expression": "1+1"}"#),
        tool_fragment(2, Some("c"), Some("clock"), "{}"),
        finish("tool_calls"),
    ]));
    let frames = app
        .stream_turn(
            &token,
            &session,
            json!({"stream": "delta", "messages": [user("all at once")]}),
        )
        .await
        .collect()
        .await;
    let names = crate::sse::names(&frames);
    assert_eq!(
        names,
        [
            "turn_start",
            "tool_call",
            "tool_call",
            "tool_call",
            "tool_result",
            "turn_stop"
        ]
    );
    assert_eq!(frames[4].data, json!({"toolCallId": "b", "content": "2"}));
    assert_eq!(frames[5].data["stopReason"], "tool_use");

    server.push(Reply::Stream(vec![text("Done."), finish("stop")]));
    let done = app
        .post(
            &format!("/sessions/{session}/turns"),
            &token,
            json!({"messages": [
                {"role": "tool", "toolCallId": "a", "content": "found"},
                {"role": "tool_permission", "toolCallId": "c", "granted": false}
            ]}),
        )
        .await;
    assert_eq!(done.status, StatusCode::OK, "{}", done.text);
    assert_eq!(done.body["stopReason"], "end_turn");
    let sent = server.requests()[1].body["messages"]
        .as_array()
        .unwrap()
        .clone();
    let tool_messages: Vec<(&str, &str)> = sent
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            (
                m["tool_call_id"].as_str().unwrap(),
                m["content"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        tool_messages,
        [("b", "2"), ("a", "found"), ("c", "Tool call denied")]
    );
}

#[tokio::test]
async fn the_internal_memory_tool_keeps_notes_per_tenant_across_sessions() {
    let server = ScriptedOpenAi::start().await;
    let app = app_with_gpt(&server).await;
    let (_, alice) = app.new_tenant().await;
    let (_, bob) = app.new_tenant().await;
    let first = app
        .create_session(&alice, json!({"agent": {"name": "gpt"}}))
        .await;
    server.push(Reply::Stream(vec![
        call(
            "m1",
            "memory",
            r#"{"action": "save", "text": "Alice likes green tea"}"#,
        ),
        finish("tool_calls"),
    ]));
    server.push(Reply::Stream(vec![text("Noted."), finish("stop")]));
    let saved = app
        .post(
            &format!("/sessions/{first}/turns"),
            &alice,
            json!({"messages": [user("remember")]}),
        )
        .await;
    assert!(
        saved.body["messages"][1]["content"]
            .as_str()
            .unwrap()
            .contains("note_")
    );

    let search = r#"{"action": "search", "query": "TEA"}"#;
    for (token, found) in [(&alice, true), (&bob, false)] {
        let session = app
            .create_session(token, json!({"agent": {"name": "gpt"}}))
            .await;
        server.push(Reply::Stream(vec![
            call("m2", "memory", search),
            finish("tool_calls"),
        ]));
        server.push(Reply::Stream(vec![text("ok"), finish("stop")]));
        let reply = app
            .post(
                &format!("/sessions/{session}/turns"),
                token,
                json!({"messages": [user("recall")]}),
            )
            .await;
        let result = reply.body["messages"][1]["content"].as_str().unwrap();
        assert_eq!(result.contains("Alice likes green tea"), found, "{result}");
    }
}

#[tokio::test]
async fn a_model_that_keeps_calling_tools_is_stopped_after_max_steps() {
    let server = ScriptedOpenAi::start().await;
    let app = app_with_gpt(&server).await;
    let (_, token) = app.new_tenant().await;
    let session = app
        .create_session(
            &token,
            json!({"agent": {"name": "gpt", "tools": [{"name": "calculator", "trust": true}]}}),
        )
        .await;
    for i in 0..3 {
        server.push(Reply::Stream(vec![
            call(&format!("loop_{i}"), "calculator", r#"{"expression": "1"}"#),
            finish("tool_calls"),
        ]));
    }
    let reply = app
        .post(
            &format!("/sessions/{session}/turns"),
            &token,
            json!({"messages": [user("loop")]}),
        )
        .await;
    assert_eq!(reply.body["stopReason"], "error");
    let turn = reply.headers["agentry-turn-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let record = record_of(&app, &token, &session, turn).await;
    assert_eq!(record["error"]["code"], "max_steps");
    assert_eq!(record["usage"]["tool_calls"], 3);
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn anthropic_streams_thinking_text_and_tool_use() {
    let server = ScriptedOpenAi::start().await;
    let config = String::from("[[agents]]\nname = \"claude\"\nprovider = \"anthropic\"\n")
        + "base_url = \""
        + &server.url
        + "\"\n"
        + r#"model = "claude-test"
api_key = "{{options.api_key}}"
system_prompt = "Be exact."
timeout_seconds = 2

[[agents.options]]
name = "api_key"
type = "secret"
default = ""

[[agents.tools]]
name = "calculator"
"#;
    let app = spawn_app_on(Arc::new(TestDb::new().await), &config).await;
    let (_, token) = app.new_tenant().await;
    let session = app
        .create_session(
            &token,
            json!({"agent": {"name": "claude", "options": {"api_key": "sk-ant-secret"},
                             "tools": [{"name": "calculator", "trust": true}]}}),
        )
        .await;
    server.push(Reply::Events(vec![
        ("message_start", json!({"type": "message_start", "message": {"usage": {"input_tokens": 30, "output_tokens": 1}}})),
        ("content_block_start", json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}})),
        ("content_block_delta", json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Add them."}})),
        ("content_block_stop", json!({"type": "content_block_stop", "index": 0})),
        ("content_block_start", json!({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}})),
        ("content_block_delta", json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Computing."}})),
        ("content_block_start", json!({"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "tu_1", "name": "calculator", "input": {}}})),
        ("content_block_delta", json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "{\"expression\""}})),
        ("content_block_delta", json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": ": \"2+2\"}"}})),
        ("content_block_stop", json!({"type": "content_block_stop", "index": 2})),
        ("message_delta", json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 12}})),
        ("message_stop", json!({"type": "message_stop"})),
    ]));
    server.push(Reply::Events(vec![
        ("message_start", json!({"type": "message_start", "message": {"usage": {"input_tokens": 50, "output_tokens": 1}}})),
        ("content_block_delta", json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "It is 4."}})),
        ("message_delta", json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 5}})),
        ("message_stop", json!({"type": "message_stop"})),
    ]));
    let stream = app
        .stream_turn(
            &token,
            &session,
            json!({"stream": "delta", "messages": [user("2+2?")]}),
        )
        .await;
    let turn = stream.headers["agentry-turn-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let frames = stream.collect().await;
    let names = crate::sse::names(&frames);
    assert_eq!(
        names,
        [
            "turn_start",
            "thinking_delta",
            "text_delta",
            "tool_call",
            "tool_result",
            "text_delta",
            "turn_stop"
        ]
    );
    assert_eq!(
        frames[3].data,
        json!({"toolCallId": "tu_1", "name": "calculator", "input": {"expression": "2+2"}})
    );
    assert_eq!(
        frames[4].data,
        json!({"toolCallId": "tu_1", "content": "4"})
    );
    assert_eq!(frames[6].data, json!({"stopReason": "end_turn"}));

    let requests = server.requests();
    assert_eq!(requests[0].api_key.as_deref(), Some("sk-ant-secret"));
    assert_eq!(requests[0].anthropic_version.as_deref(), Some("2023-06-01"));
    assert_eq!(requests[0].body["system"], "Be exact.");
    assert_eq!(requests[0].body["max_tokens"], 4096);
    assert_eq!(
        requests[0].body["tools"][0]["input_schema"]["required"],
        json!(["expression"])
    );
    assert_eq!(
        requests[1].body["messages"],
        json!([
            {"role": "user", "content": [{"type": "text", "text": "2+2?"}]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Computing."},
                {"type": "tool_use", "id": "tu_1", "name": "calculator", "input": {"expression": "2+2"}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "tu_1", "content": [{"type": "text", "text": "4"}]}
            ]}
        ])
    );
    let record = record_of(&app, &token, &session, turn).await;
    assert_eq!(record["usage"]["input_tokens"], 80);
    assert_eq!(record["usage"]["output_tokens"], 17);
    assert_eq!(record["usage"]["tool_calls"], 1);
}

/// An Anthropic reply with a thinking block (its signature streamed apart) and text in two
/// deltas.
fn claude_hello() -> Reply {
    Reply::Events(vec![
        (
            "message_start",
            json!({"type": "message_start", "message": {"usage": {"input_tokens": 12, "output_tokens": 1}}}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Greet "}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "back."}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "c2ln"}}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Hel"}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "lo."}}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 1}),
        ),
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 6}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ])
}

#[tokio::test]
async fn anthropic_streams_text_in_all_three_modes() {
    let server = ScriptedOpenAi::start().await;
    let config = String::from("[[agents]]\nname = \"claude\"\nprovider = \"anthropic\"\n")
        + "base_url = \""
        + &server.url
        + "\"\nmodel = \"claude-test\"\ntimeout_seconds = 2\n";
    let app = spawn_app_on(Arc::new(TestDb::new().await), &config).await;
    let (_, token) = app.new_tenant().await;
    let session = app
        .create_session(&token, json!({"agent": {"name": "claude"}}))
        .await;

    let (delta, message, none) =
        a_turn_in_each_mode(&app, &token, &session, &server, claude_hello).await;
    assert_eq!(
        crate::sse::names(&delta),
        [
            "turn_start",
            "thinking_delta",
            "thinking_delta",
            "text_delta",
            "text_delta",
            "turn_stop"
        ]
    );
    assert_eq!(delta[1].data, json!({"delta": "Greet "}));
    assert_eq!(delta[4].data, json!({"delta": "lo."}));

    assert_eq!(
        crate::sse::names(&message),
        ["turn_start", "thinking", "text", "turn_stop"]
    );
    assert_eq!(message[1].data, json!({"thinking": "Greet back."}));
    assert_eq!(message[2].data, json!({"text": "Hello."}));
    assert_eq!(message[3].data, json!({"stopReason": "end_turn"}));

    assert_eq!(
        none.body,
        json!({"stopReason": "end_turn", "messages": [{"role": "assistant", "content": [
            {"type": "thinking", "thinking": "Greet back."},
            {"type": "text", "text": "Hello."}
        ]}]})
    );

    // Each request carried the whole conversation so far, alternating roles.
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let roles: Vec<&str> = requests[2].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant", "user"]);
}

#[tokio::test]
async fn a_tool_with_a_looser_schema_gets_an_error_result_not_a_crash() {
    let server = ScriptedOpenAi::start().await;
    let config = String::from("[[agents]]\nname = \"gpt\"\nprovider = \"openai\"\nmodel = \"m\"\n")
        + "base_url = \""
        + &server.url
        + "\"\n"
        + "[[agents.tools]]\nname = \"calculator\"\nexpose = false\nparameters = { type = \"object\" }\n";
    let app = spawn_app_on(Arc::new(TestDb::new().await), &config).await;
    let (_, token) = app.new_tenant().await;
    let session = app
        .create_session(&token, json!({"agent": {"name": "gpt"}}))
        .await;
    server.push(Reply::Stream(vec![
        call("c1", "calculator", "{}"),
        finish("tool_calls"),
    ]));
    server.push(Reply::Stream(vec![text("Sorry."), finish("stop")]));
    let reply = app
        .post(
            &format!("/sessions/{session}/turns"),
            &token,
            json!({"messages": [user("compute")]}),
        )
        .await;
    assert_eq!(reply.body["stopReason"], "end_turn");
    let result = reply.body["messages"][1]["content"].as_str().unwrap();
    assert!(result.starts_with("Error:"), "{result}");
}

/// A page on loopback: the kind of address http_fetch must not reach unless allowed.
async fn local_page() -> String {
    use actix_web::{App, HttpResponse, HttpServer, web};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = HttpServer::new(|| {
        App::new().route(
            "/page",
            web::get().to(|| async {
                HttpResponse::Ok()
                    .content_type("text/plain")
                    .body("hello from a local page")
            }),
        )
    })
    .workers(1)
    .disable_signals()
    .listen(listener)
    .unwrap()
    .run();
    tokio::spawn(server);
    format!("http://127.0.0.1:{port}/page")
}

#[tokio::test]
async fn http_fetch_refuses_internal_addresses_unless_allowed() {
    let page = local_page().await;
    let server = ScriptedOpenAi::start().await;
    let agent = String::from("[[agents]]\nname = \"gpt\"\nprovider = \"openai\"\nmodel = \"m\"\n")
        + "base_url = \""
        + &server.url
        + "\"\n[[agents.tools]]\nname = \"http_fetch\"\nexpose = false\n";
    for (allow, expected) in [
        ("", "internal address"),
        (
            "[tools]\nhttp_fetch_allow = [\"127.0.0.1\"]\n",
            "hello from a local page",
        ),
    ] {
        let app = spawn_app_on(Arc::new(TestDb::new().await), &format!("{agent}{allow}")).await;
        let (_, token) = app.new_tenant().await;
        let session = app
            .create_session(&token, json!({"agent": {"name": "gpt"}}))
            .await;
        let arguments = json!({"url": page}).to_string();
        server.push(Reply::Stream(vec![
            call("f1", "http_fetch", &arguments),
            finish("tool_calls"),
        ]));
        server.push(Reply::Stream(vec![text("ok"), finish("stop")]));
        let reply = app
            .post(
                &format!("/sessions/{session}/turns"),
                &token,
                json!({"messages": [user("fetch")]}),
            )
            .await;
        let result = reply.body["messages"][1]["content"].as_str().unwrap();
        assert!(result.contains(expected), "{result}");
    }
}

#[tokio::test]
async fn the_model_sees_every_message_of_the_session_also_those_another_process_added() {
    // The process keeps the histories it read and reads only what was added since.
    let server = ScriptedOpenAi::start().await;
    let db = Arc::new(TestDb::new().await);
    let first = spawn_app_on(db.clone(), &gpt_config(&server)).await;
    let (tenant, token) = first.new_tenant().await;
    let session = first
        .create_session(&token, json!({"agent": {"name": "gpt"}}))
        .await;
    let path = format!("/sessions/{session}/turns");
    let say = |text: &str| Reply::Stream(vec![crate::scripted::text(text), finish("stop")]);

    server.push(say("one"));
    let reply = first
        .post(&path, &token, json!({"messages": [user("1")]}))
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    // On PostgreSQL a second process on the same database runs the next turn (SQLite is
    // one process's database: there the same process runs it).
    let other;
    let second = if db.url().starts_with("sqlite:") {
        &first
    } else {
        other = spawn_app_on(db.clone(), &gpt_config(&server)).await;
        &other
    };
    let other_token = second.token_for(&tenant).await;
    server.push(say("two"));
    let reply = second
        .post(&path, &other_token, json!({"messages": [user("2")]}))
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    server.push(say("three"));
    let reply = first
        .post(&path, &token, json!({"messages": [user("3")]}))
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);

    let sent: Vec<(String, String)> = server.requests()[2].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] != "system")
        .map(|m| {
            (
                m["role"].as_str().unwrap().to_owned(),
                m["content"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let expected: Vec<(String, String)> = [
        ("user", "1"),
        ("assistant", "one"),
        ("user", "2"),
        ("assistant", "two"),
        ("user", "3"),
    ]
    .iter()
    .map(|(r, c)| (r.to_string(), c.to_string()))
    .collect();
    assert_eq!(sent, expected);
}
