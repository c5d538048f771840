//! Tools from MCP servers: a real MCP server on stdio (`examples/mcp_fixture.rs`) started
//! by agentry, a scripted OpenAI-compatible model calling its tools under safe names.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{TestApp, TestDb, captured_logs, spawn_app_on, user};
use crate::scripted::{Reply, ScriptedOpenAi, finish, text, tool_fragment};

/// The fixture server `cargo test` builds beside the test binary (`cargo test --test api`
/// alone does not rebuild it; `cargo build --examples` does).
pub fn fixture() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let debug = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps");
    let fixture = debug.join("examples").join("mcp_fixture");
    assert!(
        fixture.is_file(),
        "{} is missing: `cargo test` builds it (or `cargo build --examples`)",
        fixture.display()
    );
    fixture
}

/// An MCP server `fx` (the fixture, counting into `count_file`), an openai agent `gpt` with
/// `fx.add`, `fx.count` and `fx.echo` exposed and `fx.fail` internal, and an agent `all`
/// with every tool of `fx` (`fx.fail` internal).
pub fn mcp_config(model_url: &str, count_file: &Path, pid_file: &Path) -> String {
    format!(
        r#"
[[mcp_servers]]
name = "fx"
command = '{}'
env = {{ MCP_FIXTURE_COUNT_FILE = '{}', MCP_FIXTURE_PID_FILE = '{}' }}
timeout_seconds = 5

[[agents]]
name = "gpt"
provider = "openai"
base_url = "{model_url}"
model = "m"
timeout_seconds = 5
max_retries = 0

[[agents.tools]]
name = "fx.add"

[[agents.tools]]
name = "fx.count"
description = "Counts, as configured."

[[agents.tools]]
name = "fx.echo"

[[agents.tools]]
name = "fx.fail"
expose = false

[[agents.tools]]
name = "calculator"

[[agents]]
name = "all"
provider = "openai"
base_url = "{model_url}"
model = "m"
max_retries = 0

[[agents.tools]]
name = "fx.*"

[[agents.tools]]
name = "fx.fail"
expose = false
"#,
        fixture().display(),
        count_file.display(),
        pid_file.display(),
    )
}

struct Setup {
    model: ScriptedOpenAi,
    app: TestApp,
    dir: tempfile::TempDir,
}

impl Setup {
    async fn start() -> Setup {
        Setup::start_with(|config, _, _| config).await
    }

    /// With more of the fixture's environment (`NAME = 'value', `, `{dir}` for its folder).
    async fn start_with_env(extra: &str) -> Setup {
        Setup::start_with(|config, _, dir| {
            let extra = extra.replace("{dir}", &dir.display().to_string());
            config.replacen("env = { ", &format!("env = {{ {extra}"), 1)
        })
        .await
    }

    /// With [`mcp_config`] edited by `edit` (given the model's URL and the fixture's folder).
    async fn start_with(edit: impl FnOnce(String, &str, &Path) -> String) -> Setup {
        let model = ScriptedOpenAi::start().await;
        let dir = tempfile::tempdir().unwrap();
        let config = mcp_config(
            &model.url,
            &dir.path().join("count"),
            &dir.path().join("pid"),
        );
        let config = edit(config, &model.url, dir.path());
        let app = spawn_app_on(Arc::new(TestDb::new().await), &config).await;
        assert!(
            app.state
                .mcp()
                .wait_for("fx", Duration::from_secs(30), |tools| tools.is_some())
                .await,
            "the fixture connects"
        );
        Setup { model, app, dir }
    }

    fn count_calls(&self) -> usize {
        std::fs::read_to_string(self.dir.path().join("count"))
            .map(|s| s.lines().count())
            .unwrap_or(0)
    }

    fn pid(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("pid")).unwrap()
    }
}

fn call(id: &str, name: &str, arguments: &str) -> Value {
    tool_fragment(0, Some(id), Some(name), arguments)
}

impl Setup {
    /// A new session of agent `all` with `tool` trusted, and a turn in which the model calls
    /// it (by its safe name, without arguments) and then answers: the turn's reply.
    async fn call_trusted(&self, token: &str, tool: &str) -> crate::helpers::Reply {
        let session = self
            .app
            .create_session(
                token,
                json!({"agent": {"name": "all", "tools": [{"name": tool, "trust": true}]}}),
            )
            .await;
        self.model.push(Reply::Stream(vec![
            call("c", &tool.replace('.', "_"), "{}"),
            finish("tool_calls"),
        ]));
        self.model
            .push(Reply::Stream(vec![text("Done."), finish("stop")]));
        self.app
            .post(
                &format!("/sessions/{session}/turns"),
                token,
                json!({"messages": [user(tool)]}),
            )
            .await
    }
}

#[tokio::test]
async fn exposed_mcp_tools_are_listed_in_meta_with_the_servers_schema() {
    let setup = Setup::start().await;
    let meta = setup.app.get("/meta", &setup.app.admin_token).await;
    assert_eq!(meta.status, StatusCode::OK);
    let tools = meta.body["agents"][0]["tools"].as_array().unwrap().clone();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["fx.add", "fx.count", "fx.echo", "calculator"]);
    assert_eq!(
        tools[0],
        json!({
            "name": "fx.add",
            "description": "Adds two numbers.",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                "required": ["a", "b"],
                "additionalProperties": false
            }
        })
    );
    assert_eq!(tools[1]["description"], "Counts, as configured.");
    assert!(!names.contains(&"fx.fail"), "internal tools are not listed");

    // A client enables only what is exposed.
    let (_, token) = setup.app.new_tenant().await;
    let refused = setup
        .app
        .post(
            "/sessions",
            &token,
            json!({"agent": {"name": "gpt", "tools": [{"name": "fx.fail"}]}}),
        )
        .await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.text);
    assert!(refused.text.contains("fx.fail"));
}

#[tokio::test]
async fn a_model_calls_an_mcp_tool_by_its_safe_name_and_its_result_is_stored_and_sent_back() {
    let setup = Setup::start().await;
    let (app, model) = (&setup.app, &setup.model);
    let (_, token) = app.new_tenant().await;
    let session = app
        .create_session(
            &token,
            json!({"agent": {"name": "gpt", "tools": [{"name": "fx.add", "trust": true}]}}),
        )
        .await;
    model.push(Reply::Stream(vec![
        call("c1", "fx_add", r#"{"a": 2, "b": 3.5}"#),
        finish("tool_calls"),
    ]));
    model.push(Reply::Stream(vec![text("It is 5.5."), finish("stop")]));
    let frames = app
        .stream_turn(
            &token,
            &session,
            json!({"stream": "delta", "messages": [user("2 + 3.5?")]}),
        )
        .await
        .collect()
        .await;
    assert_eq!(
        crate::sse::names(&frames),
        [
            "turn_start",
            "tool_call",
            "tool_result",
            "text_delta",
            "turn_stop"
        ]
    );
    assert_eq!(
        frames[1].data,
        json!({"toolCallId": "c1", "name": "fx.add", "input": {"a": 2, "b": 3.5}})
    );
    assert_eq!(
        frames[2].data,
        json!({"toolCallId": "c1", "content": "5.5"})
    );

    // The model was offered safe names, the internal tool included, and got the result.
    let requests = model.requests();
    let offered: Vec<&str> = requests[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(offered, ["fx_add", "fx_fail"]);
    let sent = requests[1].body["messages"].as_array().unwrap();
    assert_eq!(
        sent[sent.len() - 2]["tool_calls"][0]["function"]["name"],
        "fx_add"
    );
    assert_eq!(
        sent[sent.len() - 1],
        json!({"role": "tool", "tool_call_id": "c1", "content": "5.5"})
    );

    // History keeps the real name and the result.
    let history = app
        .get(&format!("/sessions/{session}/history?type=full"), &token)
        .await;
    let full = history.body["history"]["full"].as_array().unwrap();
    assert_eq!(full[1]["content"][0]["name"], "fx.add");
    assert_eq!(
        full[2],
        json!({"role": "tool", "toolCallId": "c1", "content": "5.5"})
    );

    // An internal tool runs inline; an error result says so.
    model.push(Reply::Stream(vec![
        call("c2", "fx_fail", "{}"),
        finish("tool_calls"),
    ]));
    model.push(Reply::Stream(vec![text("It broke."), finish("stop")]));
    let reply = app
        .post(
            &format!("/sessions/{session}/turns"),
            &token,
            json!({"messages": [user("try the failing one")]}),
        )
        .await;
    assert_eq!(reply.body["stopReason"], "end_turn", "{}", reply.text);
    assert_eq!(
        reply.body["messages"][1],
        json!({"role": "tool", "toolCallId": "c2", "content": "Error: something broke"})
    );
}

#[tokio::test]
async fn an_anthropic_model_calls_an_mcp_tool_by_its_safe_name() {
    let setup = Setup::start_with(|config, model_url, _| {
        config
            + &format!(
                r#"
[[agents]]
name = "claude"
provider = "anthropic"
base_url = "{model_url}"
model = "claude-test"
max_retries = 0

[[agents.tools]]
name = "fx.add"
"#
            )
    })
    .await;
    let (app, model) = (&setup.app, &setup.model);
    let (_, token) = app.new_tenant().await;
    let session = app
        .create_session(
            &token,
            json!({"agent": {"name": "claude", "tools": [{"name": "fx.add", "trust": true}]}}),
        )
        .await;
    model.push(Reply::Events(vec![
        ("message_start", json!({"type": "message_start", "message": {"usage": {"input_tokens": 20, "output_tokens": 1}}})),
        ("content_block_start", json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "tu_1", "name": "fx_add", "input": {}}})),
        ("content_block_delta", json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{\"a\": 40,"}})),
        ("content_block_delta", json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": " \"b\": 2}"}})),
        ("content_block_stop", json!({"type": "content_block_stop", "index": 0})),
        ("message_delta", json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}})),
        ("message_stop", json!({"type": "message_stop"})),
    ]));
    model.push(Reply::Events(vec![
        ("message_start", json!({"type": "message_start", "message": {"usage": {"input_tokens": 30, "output_tokens": 1}}})),
        ("content_block_delta", json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "42."}})),
        ("message_delta", json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}})),
        ("message_stop", json!({"type": "message_stop"})),
    ]));
    let reply = app
        .post(
            &format!("/sessions/{session}/turns"),
            &token,
            json!({"messages": [user("40 + 2?")]}),
        )
        .await;
    assert_eq!(reply.body["stopReason"], "end_turn", "{}", reply.text);
    assert_eq!(
        reply.body["messages"][0]["content"][0],
        json!({"type": "tool_use", "toolCallId": "tu_1", "name": "fx.add", "input": {"a": 40, "b": 2}})
    );
    assert_eq!(
        reply.body["messages"][1],
        json!({"role": "tool", "toolCallId": "tu_1", "content": "42"})
    );

    let requests = model.requests();
    assert_eq!(requests[0].body["tools"][0]["name"], "fx_add");
    assert_eq!(
        requests[0].body["tools"][0]["input_schema"]["required"],
        json!(["a", "b"])
    );
    let sent = requests[1].body["messages"].as_array().unwrap();
    assert_eq!(sent[1]["content"][0]["name"], "fx_add");
    assert_eq!(
        sent[2]["content"][0],
        json!({"type": "tool_result", "tool_use_id": "tu_1", "content": [{"type": "text", "text": "42"}]})
    );
}

#[tokio::test]
async fn invalid_arguments_are_answered_for_the_model_and_the_tool_is_not_called() {
    let setup = Setup::start().await;
    let (app, model) = (&setup.app, &setup.model);
    let (_, token) = app.new_tenant().await;
    let session = app
        .create_session(
            &token,
            json!({"agent": {"name": "gpt", "tools": [{"name": "fx.count", "trust": true}]}}),
        )
        .await;
    model.push(Reply::Stream(vec![
        call("c1", "fx_count", r#"{"label": 5}"#),
        finish("tool_calls"),
    ]));
    model.push(Reply::Stream(vec![text("Oops."), finish("stop")]));
    let reply = app
        .post(
            &format!("/sessions/{session}/turns"),
            &token,
            json!({"messages": [user("count")]}),
        )
        .await;
    let result = reply.body["messages"][1]["content"].as_str().unwrap();
    assert!(result.starts_with("Error: invalid arguments"), "{result}");
    assert!(result.contains("label"), "{result}");
    assert_eq!(setup.count_calls(), 0, "the tool was not called");

    // Arguments that fit run it.
    model.push(Reply::Stream(vec![
        call("c2", "fx_count", r#"{"label": "x"}"#),
        finish("tool_calls"),
    ]));
    model.push(Reply::Stream(vec![text("Counted."), finish("stop")]));
    let reply = app
        .post(
            &format!("/sessions/{session}/turns"),
            &token,
            json!({"messages": [user("count again")]}),
        )
        .await;
    assert_eq!(reply.body["messages"][1]["content"], "counted 1");
    assert_eq!(setup.count_calls(), 1);
}

#[tokio::test]
async fn an_untrusted_mcp_tool_waits_for_permission_and_runs_once_when_granted() {
    let setup = Setup::start().await;
    let (app, model) = (&setup.app, &setup.model);
    let (_, token) = app.new_tenant().await;
    let session = app
        .create_session(
            &token,
            json!({"agent": {"name": "gpt", "tools": [{"name": "fx.count"}]}}),
        )
        .await;
    let path = format!("/sessions/{session}/turns");
    model.push(Reply::Stream(vec![
        call("c1", "fx_count", r#"{"label": "once"}"#),
        finish("tool_calls"),
    ]));
    let asked = app
        .post(&path, &token, json!({"messages": [user("count")]}))
        .await;
    assert_eq!(asked.body["stopReason"], "tool_use", "{}", asked.text);
    assert_eq!(asked.body["messages"][0]["content"][0]["name"], "fx.count");
    assert_eq!(setup.count_calls(), 0, "not before permission");

    model.push(Reply::Stream(vec![text("Counted."), finish("stop")]));
    let granted = app
        .post(
            &path,
            &token,
            json!({"messages": [{"role": "tool_permission", "toolCallId": "c1", "granted": true}]}),
        )
        .await;
    assert_eq!(granted.status, StatusCode::OK, "{}", granted.text);
    assert_eq!(granted.body["stopReason"], "end_turn");
    assert_eq!(
        granted.body["messages"][0],
        json!({"role": "tool", "toolCallId": "c1", "content": "counted 1"})
    );
    assert_eq!(setup.count_calls(), 1, "exactly once");

    model.push(Reply::Stream(vec![
        call("c2", "fx_count", r#"{"label": "never"}"#),
        finish("tool_calls"),
    ]));
    app.post(&path, &token, json!({"messages": [user("count more")]}))
        .await;
    model.push(Reply::Stream(vec![text("Fine."), finish("stop")]));
    let denied = app
        .post(
            &path,
            &token,
            json!({"messages": [{"role": "tool_permission", "toolCallId": "c2", "granted": false, "reason": "enough"}]}),
        )
        .await;
    assert_eq!(
        denied.body["messages"][0],
        json!({"role": "tool", "toolCallId": "c2", "content": "Tool call denied: enough"})
    );
    assert_eq!(setup.count_calls(), 1, "a denied call never runs");
}

#[tokio::test]
async fn a_server_that_is_down_at_start_leaves_agentry_serving_and_its_tools_unavailable() {
    let model = ScriptedOpenAi::start().await;
    let config = format!(
        r#"
[[mcp_servers]]
name = "down"
command = "/nonexistent/agentry-test-mcp-server"

[[agents]]
name = "gpt"
provider = "openai"
base_url = "{}"
model = "m"
max_retries = 0

[[agents.tools]]
name = "down.search"

[[agents.tools]]
name = "calculator"
"#,
        model.url
    );
    let app = spawn_app_on(Arc::new(TestDb::new().await), &config).await;
    let meta = app.get("/meta", &app.admin_token).await;
    let names: Vec<&str> = meta.body["agents"][0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["calculator"], "the down server's tool is absent");

    // A session may still enable the configured tool; it is not offered to the model, and
    // a call to it is answered with a clear result.
    let (_, token) = app.new_tenant().await;
    let session = app
        .create_session(
            &token,
            json!({"agent": {"name": "gpt", "tools": [{"name": "down.search", "trust": true}]}}),
        )
        .await;
    model.push(Reply::Stream(vec![
        call("c1", "down.search", r#"{"q": "x"}"#),
        finish("tool_calls"),
    ]));
    model.push(Reply::Stream(vec![text("Unavailable."), finish("stop")]));
    let reply = app
        .post(
            &format!("/sessions/{session}/turns"),
            &token,
            json!({"messages": [user("search")]}),
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.body["stopReason"], "end_turn", "{}", reply.text);
    let result = reply.body["messages"][1]["content"].as_str().unwrap();
    assert!(
        result.contains("MCP server `down` is unavailable"),
        "{result}"
    );
    let offered = model.requests()[0].body["tools"].to_string();
    assert!(!offered.contains("down"), "{offered}");
    assert!(
        captured_logs().contains("MCP server unavailable"),
        "the outage is logged"
    );
}

#[tokio::test]
async fn a_server_whose_program_dies_loses_its_tools_until_it_is_restarted() {
    let setup = Setup::start().await;
    let (app, model) = (&setup.app, &setup.model);
    let (_, token) = app.new_tenant().await;
    let session = app
        .create_session(
            &token,
            json!({"agent": {"name": "gpt", "tools": [{"name": "fx.echo", "trust": true}]}}),
        )
        .await;
    let path = format!("/sessions/{session}/turns");

    // The program dies: its tools are gone until the supervisor brings it back.
    let first = setup.pid();
    let killed = std::process::Command::new("kill")
        .args(["-9", first.trim()])
        .status()
        .unwrap();
    assert!(killed.success());
    assert!(
        app.state
            .mcp()
            .wait_for("fx", Duration::from_secs(20), |tools| tools.is_none())
            .await,
        "the death is noticed"
    );
    let meta = app.get("/meta", &app.admin_token).await;
    assert!(!meta.text.contains("fx.echo"), "{}", meta.text);
    assert!(
        app.state
            .mcp()
            .wait_for("fx", Duration::from_secs(30), |tools| tools.is_some())
            .await,
        "reconnected"
    );
    assert_ne!(setup.pid(), first, "a new program");
    model.push(Reply::Stream(vec![
        call("c1", "fx_echo", r#"{"text": "back"}"#),
        finish("tool_calls"),
    ]));
    model.push(Reply::Stream(vec![text("It is back."), finish("stop")]));
    let reply = app
        .post(&path, &token, json!({"messages": [user("echo")]}))
        .await;
    assert_eq!(
        reply.body["messages"][1]["content"], "back",
        "{}",
        reply.text
    );
}

#[tokio::test]
async fn a_wildcard_takes_every_tool_and_follows_the_servers_notice_of_changed_tools() {
    let setup = Setup::start().await;
    let app = &setup.app;
    let listed = |meta: &Value| -> Vec<String> {
        meta["agents"][1]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let meta = app.get("/meta", &app.admin_token).await;
    assert_eq!(meta.body["agents"][1]["name"], "all");
    assert_eq!(
        listed(&meta.body),
        [
            "fx.add", "fx.echo", "fx.count", "fx.grow", "fx.env", "fx.sleep"
        ]
    );

    let (_, token) = app.new_tenant().await;
    let wildcard = app
        .post(
            "/sessions",
            &token,
            json!({"agent": {"name": "all", "tools": [{"name": "fx.*"}]}}),
        )
        .await;
    assert_eq!(
        wildcard.status,
        StatusCode::BAD_REQUEST,
        "tools are enabled by name"
    );
    let reply = setup.call_trusted(&token, "fx.grow").await;
    assert_eq!(
        reply.body["messages"][1]["content"], "grown",
        "{}",
        reply.text
    );
    assert!(
        app.state
            .mcp()
            .wait_for("fx", Duration::from_secs(20), |tools| {
                tools.is_some_and(|t| t.iter().any(|t| t.name == "extra"))
            })
            .await,
        "the new tool is listed"
    );
    let meta = app.get("/meta", &app.admin_token).await;
    assert_eq!(
        listed(&meta.body),
        [
            "fx.add", "fx.echo", "fx.count", "fx.grow", "fx.env", "fx.sleep", "fx.extra"
        ]
    );
    let agent = app.state.agents().get("all").unwrap();
    assert!(agent.is_mcp_tool("fx.extra"));
    assert!(
        !app.state
            .agents()
            .get("gpt")
            .unwrap()
            .is_mcp_tool("calculator")
    );
}

#[tokio::test]
async fn a_stdio_program_gets_its_own_environment_not_agentrys() {
    // cargo sets these for every test process, so agentry has them to pass on or not.
    assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some());
    assert!(std::env::var_os("PATH").is_some());
    let setup = Setup::start().await;
    let app = &setup.app;
    let (_, token) = app.new_tenant().await;
    let reply = setup.call_trusted(&token, "fx.env").await;
    let names: Vec<&str> = reply.body["messages"][1]["content"]
        .as_str()
        .unwrap_or_else(|| panic!("a tool result: {}", reply.text))
        .split(' ')
        .collect();
    assert!(names.contains(&"PATH"), "{names:?}");
    assert!(names.contains(&"MCP_FIXTURE_COUNT_FILE"), "{names:?}");
    assert!(names.contains(&"MCP_FIXTURE_PID_FILE"), "{names:?}");
    assert!(!names.contains(&"CARGO_MANIFEST_DIR"), "{names:?}");
    assert!(!names.contains(&"TEST_POSTGRES_URL"), "{names:?}");
}

#[tokio::test]
async fn graceful_shutdown_stops_the_servers_program_and_what_it_started() {
    /// Running, as opposed to gone or a zombie waiting for whoever adopted it.
    fn running(pid: &str) -> bool {
        std::fs::read_to_string(format!("/proc/{}/stat", pid.trim()))
            .ok()
            .and_then(|stat| {
                let (_, after_name) = stat.rsplit_once(") ")?;
                after_name.chars().next()
            })
            .is_some_and(|state| state != 'Z' && state != 'X')
    }
    let setup =
        Setup::start_with_env("MCP_FIXTURE_GRANDCHILD_PID_FILE = '{dir}/grandchild', ").await;
    let pid = setup.pid();
    let grandchild = std::fs::read_to_string(setup.dir.path().join("grandchild")).unwrap();
    assert!(running(&pid) && running(&grandchild));
    let Setup { app, dir, model } = setup;
    app.stop().await;
    assert!(!running(&pid), "the program is gone");
    // A signal to the process group reaches the grandchild at once; give the kernel a moment.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while running(&grandchild) && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!running(&grandchild), "the program's own child is gone too");
    drop((dir, model));
}

#[tokio::test]
async fn the_agentscope_face_renders_mcp_calls_as_mcp_call_and_mcp_call_output() {
    let setup = Setup::start().await;
    let (app, model) = (&setup.app, &setup.model);
    let (_, token) = app.new_tenant().await;
    model.push(Reply::Stream(vec![
        call("call_1", "fx_fail", "{}"),
        finish("tool_calls"),
    ]));
    model.push(Reply::Stream(vec![text("It failed."), finish("stop")]));
    let response = app
        .client
        .post(app.url("/agentscope/agents/gpt/process"))
        .bearer_auth(&token)
        .json(
            &json!({"input": [{"role": "user", "content": [{"type": "text", "text": "fail"}]}],
                      "session_id": "mcp"}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let frames = crate::sse::SseReader::new(response).collect().await;
    let messages: Vec<(&str, &Value)> = frames
        .iter()
        .filter(|f| f.data["object"] == "message" && f.data["status"] == "completed")
        .map(|f| {
            (
                f.data["type"].as_str().unwrap(),
                &f.data["content"][0]["data"],
            )
        })
        .collect();
    assert_eq!(messages.len(), 3, "{messages:?}");
    assert_eq!(messages[0].0, "mcp_call");
    assert_eq!(messages[0].1["name"], "fx.fail");
    assert_eq!(messages[1].0, "mcp_call_output");
    assert_eq!(messages[1].1["name"], "fx.fail");
    assert!(
        messages[1].1["output"]
            .as_str()
            .unwrap()
            .contains("Error: something broke"),
        "{:?}",
        messages[1].1
    );
    assert_eq!(messages[2].0, "message");
}

#[tokio::test]
async fn an_mcp_tool_whose_result_was_durable_is_not_called_again_after_a_crash() {
    use crate::process::{ServerProcess, agentry, run_ok};

    let model = ScriptedOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let count = dir.path().join("count");
    let config = dir.path().join("agentry.toml");
    std::fs::write(
        &config,
        mcp_config(&model.url, &count, &dir.path().join("pid")).replace(
            "name = \"fx.count\"\n",
            "name = \"fx.count\"\nexpose = false\n",
        ),
    )
    .unwrap();
    let db = TestDb::new().await;
    let command = || {
        let mut command = agentry(db.url());
        command.arg("--config").arg(&config);
        command
    };
    let tenant = run_ok(command().args(["admin", "create-tenant", "crash", "--raw"]));
    let token = run_ok(command().args(["admin", "issue-token", tenant.trim(), "--raw"]));
    let token = token.trim();
    let client = reqwest::Client::new();

    let server = ServerProcess::start(command());
    // MCP servers connect in the background: the tool must be there when the model calls it.
    server.logged("MCP server connected").await;
    let session = server.create_session(token, "gpt").await;

    // The model counts (an internal tool: it runs at once), then never answers: the server
    // dies there.
    model.push(Reply::Stream(vec![
        call("count_1", "fx_count", r#"{"label": "only once"}"#),
        finish("tool_calls"),
    ]));
    model.push(Reply::Hang);
    let response = client
        .post(server.url(&format!("/sessions/{session}/turns")))
        .bearer_auth(token)
        .json(&json!({"stream": "delta", "messages": [user("count")]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let mut stream = crate::sse::SseReader::new(response);
    let turn = stream.headers["agentry-turn-id"]
        .to_str()
        .unwrap()
        .to_owned();
    loop {
        let frame = stream.next().await.expect("the turn streams");
        if frame.event == "tool_result" {
            assert_eq!(frame.data["content"], "counted 1");
            break;
        }
    }
    model.wait_for_requests(2).await;
    server.kill();
    drop(stream);

    let server = ServerProcess::start(command());
    db.wait_for_no_unfinished_turns().await;
    let get = |path: String| {
        let request = client.get(server.url(&path)).bearer_auth(token);
        async move { request.send().await.unwrap().json::<Value>().await.unwrap() }
    };
    let record = get(format!("/sessions/{session}/turns/{turn}")).await;
    assert_eq!(record["status"], "interrupted");
    let history = get(format!("/sessions/{session}/history?type=full")).await;
    let results: Vec<&Value> = history["history"]["full"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .collect();
    assert_eq!(results.len(), 1, "the tool's result is in the history once");
    assert_eq!(results[0]["content"], "counted 1");

    // The session goes on; the tool ran exactly once, the model was not asked again.
    model.push(Reply::Stream(vec![text("Counted once."), finish("stop")]));
    let reply: Value = client
        .post(server.url(&format!("/sessions/{session}/turns")))
        .bearer_auth(token)
        .json(&json!({"messages": [user("did you count?")]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(reply["stopReason"], "end_turn", "{reply}");
    assert_eq!(model.requests().len(), 3);
    let calls = std::fs::read_to_string(&count).unwrap().lines().count();
    assert_eq!(calls, 1, "the MCP tool was called exactly once");
}

#[test]
fn config_check_names_the_key_of_a_bad_mcp_server() {
    use crate::process::agentry;

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.toml");
    for (toml, key) in [
        ("[[mcp_servers]]\nname = \"fs\"\n", "mcp_servers[0].command"),
        (
            "[[mcp_servers]]\nname = \"fs\"\nurl = \"http://127.0.0.1:1/mcp\"\nheaders = { Accept = \"x\" }\n",
            "mcp_servers[0].headers.Accept",
        ),
        (
            "[[agents]]\nname = \"a\"\nprovider = \"echo\"\n[[agents.tools]]\nname = \"nowhere.search\"\n",
            "agents[0].tools[0].name",
        ),
    ] {
        std::fs::write(&file, toml).unwrap();
        let output = agentry("sqlite://unused.db")
            .args(["config", "check", "--config"])
            .arg(&file)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(key), "{key}: {stderr}");
    }
}

#[tokio::test]
async fn a_call_that_outlasts_the_servers_timeout_is_answered_with_an_error() {
    let setup = Setup::start_with(|config, _, _| {
        config.replacen("timeout_seconds = 5", "timeout_seconds = 1", 1)
    })
    .await;
    let (app, model) = (&setup.app, &setup.model);
    let (_, token) = app.new_tenant().await;
    let session = app
        .create_session(
            &token,
            json!({"agent": {"name": "all", "tools": [{"name": "fx.sleep", "trust": true}]}}),
        )
        .await;
    model.push(Reply::Stream(vec![
        call("c1", "fx_sleep", r#"{"seconds": 10}"#),
        finish("tool_calls"),
    ]));
    model.push(Reply::Stream(vec![text("Too slow."), finish("stop")]));
    let started = std::time::Instant::now();
    let reply = app
        .post(
            &format!("/sessions/{session}/turns"),
            &token,
            json!({"messages": [user("sleep")]}),
        )
        .await;
    assert!(started.elapsed() < Duration::from_secs(8));
    assert_eq!(reply.body["stopReason"], "end_turn", "{}", reply.text);
    assert_eq!(
        reply.body["messages"][1]["content"],
        "Error: `fx.sleep` did not answer within 1 seconds."
    );
}

#[tokio::test]
async fn an_acp_run_asks_permission_for_an_mcp_tool_a_wildcard_names() {
    let setup = Setup::start().await;
    let (app, model) = (&setup.app, &setup.model);
    let (_, token) = app.new_tenant().await;
    // `fx.echo` is exposed through `fx.*` only, and enabled untrusted.
    let session = app
        .create_session(
            &token,
            json!({"agent": {"name": "all", "tools": [{"name": "fx.echo"}]}}),
        )
        .await;
    let uuid = uuid::Uuid::parse_str(session.trim_start_matches("sess_")).unwrap();
    model.push(Reply::Stream(vec![
        call("e", "fx_echo", r#"{"text": "hi"}"#),
        finish("tool_calls"),
    ]));
    let awaiting = crate::acp::run(
        app,
        &token,
        json!({"agent_name": "all", "session_id": uuid.to_string(),
               "input": [crate::acp::acp_user("echo hi")]}),
    )
    .await;
    assert_eq!(awaiting.body["status"], "awaiting", "{}", awaiting.text);
    let asked: Value = serde_json::from_str(
        awaiting.body["await_request"]["message"]["parts"][0]["content"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        asked,
        json!({"id": "e", "name": "fx.echo", "input": {"text": "hi"}, "answer": "permission"})
    );
}
