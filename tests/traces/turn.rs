//! One turn with a tool call, as exported.

use std::sync::Arc;

use serde_json::json;

use crate::helpers::{TestApp, TestDb, spawn_app_on, user};
use crate::receiver::{Received, receiver};
use crate::scripted::{Reply, ScriptedOpenAi, finish, text, tool_fragment, usage};

const PROMPT: &str = "PROMPT-MARKER: what is 6 times 7?";
const COMPLETION: &str = "COMPLETION-MARKER 42";
const SECRET: &str = "SECRET-OPTION-VALUE-0b5e";

async fn app_with_model(server: &ScriptedOpenAi) -> TestApp {
    let config = format!(
        r#"
[[agents]]
name = "gpt"
provider = "openai"
base_url = "{}"
model = "m"
timeout_seconds = 5
max_retries = 0

[[agents.options]]
name = "token"
type = "secret"
default = ""

[[agents.tools]]
name = "calculator"
expose = false
"#,
        server.url
    );
    spawn_app_on(Arc::new(TestDb::new().await), &config).await
}

fn script_tool_then_answer(server: &ScriptedOpenAi) {
    server.push(Reply::Stream(vec![
        tool_fragment(0, Some("call_1"), Some("calculator"), "{\"expression\":"),
        tool_fragment(0, None, None, "\"6*7\"}"),
        finish("tool_calls"),
        usage(10, 5),
    ]));
    server.push(Reply::Stream(vec![
        text("COMPLETION-MARKER "),
        text("42"),
        finish("stop"),
        usage(20, 3),
    ]));
}

fn find(spans: &[Received], what: impl Fn(&Received) -> bool) -> Vec<&Received> {
    spans.iter().filter(|s| what(s)).collect()
}

#[tokio::test]
async fn a_turn_with_a_tool_call_is_one_trace_of_request_turn_steps_and_tool() {
    let receiver = receiver();
    let server = ScriptedOpenAi::start().await;
    let app = app_with_model(&server).await;
    let (_, token) = app.new_tenant().await;
    let session = app
        .create_session(
            &token,
            json!({"agent": {"name": "gpt", "options": {"token": SECRET}}}),
        )
        .await;
    script_tool_then_answer(&server);
    let frames = app
        .stream_turn(
            &token,
            &session,
            json!({"stream": "delta", "messages": [user(PROMPT)]}),
        )
        .await
        .until_turn_stop()
        .await;
    let turn_id = frames
        .iter()
        .find_map(|f| f.data["turnId"].as_str().or(f.data["turn_id"].as_str()))
        .map(str::to_owned);

    // The turn span ends last among its children: wait for it and the steps.
    let spans = receiver
        .wait_for("the turn's spans", |spans| {
            let turn = spans
                .iter()
                .find(|s| s.name == "turn" && s.attr("session_id") == Some(session.as_str()))?;
            let children = spans
                .iter()
                .filter(|s| s.parent_span_id == turn.span_id)
                .count();
            let request = spans.iter().any(|s| s.span_id == turn.parent_span_id);
            (children >= 3 && request).then(|| spans.to_vec())
        })
        .await;
    let turn = find(&spans, |s| {
        s.name == "turn" && s.attr("session_id") == Some(session.as_str())
    })[0];
    if let Some(id) = &turn_id {
        assert_eq!(turn.attr("turn_id"), Some(id.as_str()));
    }
    assert!(
        turn.attr("tenant_id")
            .is_some_and(|t| t.starts_with("ten_")),
        "{turn:?}"
    );
    assert_eq!(turn.attr("gen_ai.operation.name"), Some("invoke_agent"));
    assert_eq!(turn.attr("gen_ai.agent.name"), Some("gpt"));
    assert_eq!(turn.service, "agentry-test");

    // The writer's commits of the turn's events, as events on its span: together they
    // made durable each of the turn's events once, in order, from its `turn_start` to its
    // `turn_stop` (the first and last ids the client saw).
    let seen: Vec<i64> = frames.iter().filter_map(|f| f.id).collect();
    let ids: Vec<i64> = (seen[0]..=*seen.last().unwrap()).collect();
    let mut commits: Vec<(i64, i64)> = turn
        .events
        .iter()
        .filter(|(name, _)| name == "agentry.writer.commit")
        .map(|(_, attributes)| {
            let number = |key: &str| attributes[key].parse::<f64>().unwrap();
            assert!(
                number("agentry.writer.commit_seconds") >= 0.0,
                "{attributes:?}"
            );
            assert!(
                number("agentry.writer.batch_events") >= number("agentry.writer.events"),
                "{attributes:?}"
            );
            (
                number("agentry.writer.first_seq") as i64,
                number("agentry.writer.events") as i64,
            )
        })
        .collect();
    commits.sort();
    assert!(!commits.is_empty(), "{turn:?}");
    let covered: Vec<i64> = commits
        .iter()
        .flat_map(|(first, count)| *first..first + count)
        .collect();
    assert_eq!(covered, ids, "commits {commits:?}");

    // The request that admitted the turn is its parent, in the same trace.
    let request = find(&spans, |s| s.span_id == turn.parent_span_id)[0];
    assert_eq!(request.trace_id, turn.trace_id);
    assert_eq!(
        request.name, "POST /sessions/{session_id}/turns",
        "{request:?}"
    );
    assert_eq!(request.attr("http.request.method"), Some("POST"));
    assert_eq!(
        request.attr("http.route"),
        Some("/sessions/{session_id}/turns")
    );
    assert_eq!(request.attr("http.response.status_code"), Some("200"));
    assert_eq!(request.attr("session_id"), Some(session.as_str()));

    // One span per model step, GenAI attributes and the step's tokens.
    let mut steps = find(&spans, |s| {
        s.parent_span_id == turn.span_id && s.attr("gen_ai.operation.name") == Some("chat")
    });
    assert_eq!(steps.len(), 2, "{steps:#?}");
    steps.sort_by_key(|s| s.attr("gen_ai.usage.input_tokens").map(str::to_owned));
    for step in &steps {
        assert_eq!(step.trace_id, turn.trace_id);
        assert_eq!(step.name, "chat m");
        assert_eq!(step.attr("gen_ai.provider.name"), Some("openai"));
        assert_eq!(step.attr("gen_ai.request.model"), Some("m"));
        assert_eq!(step.attr("gen_ai.response.model"), Some("m"));
        let first = step.attr("gen_ai.response.time_to_first_chunk").unwrap();
        assert!(first.parse::<f64>().unwrap() > 0.0, "{step:?}");
    }
    assert_eq!(steps[0].attr("gen_ai.usage.input_tokens"), Some("10"));
    assert_eq!(steps[0].attr("gen_ai.usage.output_tokens"), Some("5"));
    assert_eq!(
        steps[0].attr("gen_ai.response.finish_reasons"),
        Some("tool_calls")
    );
    assert_eq!(steps[1].attr("gen_ai.usage.input_tokens"), Some("20"));
    assert_eq!(steps[1].attr("gen_ai.usage.output_tokens"), Some("3"));
    assert_eq!(
        steps[1].attr("gen_ai.response.finish_reasons"),
        Some("stop")
    );

    // The tool's run.
    let tools = find(&spans, |s| {
        s.parent_span_id == turn.span_id && s.attr("gen_ai.operation.name") == Some("execute_tool")
    });
    assert_eq!(tools.len(), 1, "{tools:#?}");
    let tool = tools[0];
    assert_eq!(tool.trace_id, turn.trace_id);
    assert_eq!(tool.name, "execute_tool calculator");
    assert_eq!(tool.attr("gen_ai.tool.name"), Some("calculator"));
    assert!(
        tool.attr("gen_ai.tool.call.id")
            .is_some_and(|id| !id.is_empty())
    );
    assert_eq!(tool.attr("agentry.tool.kind"), Some("builtin"));
    assert_eq!(tool.attr("agentry.tool.outcome"), Some("ok"));

    // By default no prompt, no completion and no secret option anywhere.
    for span in receiver.spans() {
        for (key, value) in &span.attributes {
            for forbidden in [PROMPT, "PROMPT-MARKER", COMPLETION, SECRET] {
                assert!(
                    !value.contains(forbidden),
                    "{key} of `{}` carries {forbidden:?}",
                    span.name
                );
            }
        }
    }
}

#[tokio::test]
async fn a_clients_traceparent_is_the_turns_trace_and_reaches_the_provider() {
    let receiver = receiver();
    let server = ScriptedOpenAi::start().await;
    let app = app_with_model(&server).await;
    let (_, token) = app.new_tenant().await;
    let session = app
        .create_session(&token, json!({"agent": {"name": "gpt"}}))
        .await;
    script_tool_then_answer(&server);
    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let client_span = "00f067aa0ba902b7";
    let response = app
        .client
        .post(app.url(&format!("/sessions/{session}/turns")))
        .bearer_auth(&token)
        .header("traceparent", format!("00-{trace}-{client_span}-01"))
        .json(&json!({"stream": "delta", "messages": [user("hello")]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["agentry-trace-id"], trace);
    let turn_id = response.headers()["agentry-turn-id"]
        .to_str()
        .unwrap()
        .to_owned();
    crate::sse::SseReader::new(response).until_turn_stop().await;

    // The provider's two calls carried the trace, each from its model step's span.
    let calls = server.requests();
    assert_eq!(calls.len(), 2);
    for call in &calls {
        let sent = call
            .traceparent
            .as_deref()
            .expect("a traceparent to the provider");
        assert!(sent.starts_with(&format!("00-{trace}-")), "{sent}");
    }

    let spans = receiver
        .wait_for("the client's trace", |spans| {
            let turn = spans
                .iter()
                .find(|s| s.name == "turn" && s.attr("turn_id") == Some(turn_id.as_str()))?;
            let steps = spans
                .iter()
                .filter(|s| s.parent_span_id == turn.span_id && s.name == "chat m")
                .count();
            (steps == 2).then(|| spans.to_vec())
        })
        .await;
    let request = find(&spans, |s| {
        s.trace_id == trace && s.attr("http.route") == Some("/sessions/{session_id}/turns")
    });
    assert_eq!(request.len(), 1, "{request:#?}");
    assert_eq!(request[0].parent_span_id, client_span);
    let turn = find(&spans, |s| {
        s.attr("turn_id") == Some(turn_id.as_str()) && s.name == "turn"
    })[0];
    assert_eq!(turn.trace_id, trace);
    assert_eq!(turn.parent_span_id, request[0].span_id);
    let steps = find(&spans, |s| {
        s.parent_span_id == turn.span_id && s.name == "chat m"
    });
    for call in &calls {
        let sent = call.traceparent.as_deref().unwrap();
        assert!(
            steps
                .iter()
                .any(|s| sent == format!("00-{trace}-{}-01", s.span_id)),
            "{sent} names a model step's span"
        );
    }

    // The turn's record names its trace.
    let read = app
        .get(&format!("/sessions/{session}/turns/{turn_id}"), &token)
        .await;
    assert_eq!(read.body["traceId"], trace, "{}", read.text);
}

#[tokio::test]
async fn a_traceparent_without_credentials_is_not_taken() {
    let receiver = receiver();
    let app = crate::helpers::spawn_app().await;
    let trace = "0af7651916cd43dd8448eb211c80319c";
    let response = app
        .client
        .get(app.url("/sessions"))
        .header("traceparent", format!("00-{trace}-b7ad6b7169203331-01"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    let own = response.headers()["agentry-trace-id"]
        .to_str()
        .unwrap()
        .to_owned();
    assert_ne!(own, trace);
    receiver
        .wait_for("the refused request's span", |spans| {
            spans.iter().find(|s| s.trace_id == own).map(|_| ())
        })
        .await;
    assert!(receiver.spans().iter().all(|s| s.trace_id != trace));
}
