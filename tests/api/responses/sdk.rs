//! The official `openai` SDKs drive the face: the Python SDK (PyPI, pinned, in a virtualenv
//! made here) runs `tests/responses/sdk_client.py`, and the JS SDK (npm, pinned by the lock
//! file beside the driver, installed with `npm ci`) runs `tests/responses/js_client.mjs`,
//! against a real app; the drivers check every answer. A missing python3, node, npm or
//! registry fails the test with what is missing: it never skips.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use crate::a2a_sdk::{installed, run, write};
use crate::helpers::{TestDb, spawn_app_on};
use crate::scripted::{Reply, ScriptedOpenAi, finish, text, tool_fragment, usage};

/// The Python SDK, as pip names it.
const PYTHON_SDK: &str = "openai==3.57.0";
/// The JS SDK, pinned by the lock file beside the driver.
const JS_PACKAGE: &str = include_str!("../../responses/package.json");
const JS_LOCK: &str = include_str!("../../responses/package-lock.json");
const DRIVERS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/responses");
const DRIVER_TIMEOUT: Duration = Duration::from_secs(180);

fn config(model_url: &str) -> String {
    format!(
        r#"
[[agents]]
name = "echo"
provider = "echo"

[[agents]]
name = "slow"
provider = "echo"
chunk_size = 1
delay_ms = 50

[[agents]]
name = "gpt"
provider = "openai"
base_url = "{model_url}"
model = "m"
timeout_seconds = 5
max_retries = 0
"#
    )
}

fn python_sdk() -> Result<PathBuf, String> {
    installed("openai-python-venv", PYTHON_SDK, |dir| {
        run(
            Command::new("python3").args(["-m", "venv"]).arg(dir),
            "`python3 -m venv` (python3 with its venv module, Debian's python3-venv, is needed)",
        )?;
        run(
            Command::new(dir.join("bin/python")).args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                PYTHON_SDK,
            ]),
            &format!("`pip install {PYTHON_SDK}` (PyPI must be reachable)"),
        )
    })
}

/// The JS SDK as `npm ci` installs the driver's package; the directory holding its
/// `node_modules`.
fn js_sdk() -> Result<PathBuf, String> {
    installed("openai-js", JS_LOCK, |dir| {
        write(&dir.join("package.json"), JS_PACKAGE)?;
        write(&dir.join("package-lock.json"), JS_LOCK)?;
        run(
            Command::new("npm")
                .args(["ci", "--no-audit", "--no-fund", "--prefix"])
                .arg(dir),
            "`npm ci` of openai (node and npm, and the npm registry, are needed)",
        )?;
        run(
            Command::new("node").arg("--version"),
            "`node --version` (node is needed to run the driver)",
        )
    })
}

/// The scripted model's answers for one driver's function tool round trip: a call of
/// `get_weather`, then the answer to its output.
fn script_weather(model: &ScriptedOpenAi) {
    model.push(Reply::Stream(vec![
        tool_fragment(0, Some("call_1"), Some("get_weather"), "{\"city\":"),
        tool_fragment(0, None, None, "\"Paris\"}"),
        finish("tool_calls"),
        usage(10, 5),
    ]));
    model.push(Reply::Stream(vec![
        text("Sunny in Paris."),
        finish("stop"),
        usage(20, 4),
    ]));
}

/// Runs a driver to its end; fails the test with what it printed unless it passed.
async fn run_driver(mut driver: tokio::process::Command, name: &str) {
    driver
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let child = driver
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
    let output = tokio::time::timeout(DRIVER_TIMEOUT, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("{name} did not finish in {DRIVER_TIMEOUT:?}"))
        .expect("the driver's output");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.ends_with("all steps passed\n"),
        "{name} failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
}

/// The tool call's output reached the model in its `request`-th request.
fn assert_tool_output_sent(model: &ScriptedOpenAi, request: usize) {
    let sent = &model.requests()[request].body["messages"];
    assert!(
        sent.as_array()
            .unwrap()
            .iter()
            .any(|m| m["role"] == "tool" && m["content"] == "sunny"),
        "{sent}"
    );
}

#[tokio::test]
async fn the_official_js_sdk_drives_every_operation() {
    let sdk = tokio::task::spawn_blocking(js_sdk)
        .await
        .unwrap()
        .unwrap_or_else(|missing| panic!("the openai JS SDK cannot be installed: {missing}"));
    let model = ScriptedOpenAi::start().await;
    // Two calls at once: their two outputs are one response's input items, paged.
    model.push(Reply::Stream(vec![
        tool_fragment(
            0,
            Some("call_1"),
            Some("get_weather"),
            "{\"city\":\"Paris\"}",
        ),
        tool_fragment(
            1,
            Some("call_2"),
            Some("get_weather"),
            "{\"city\":\"Rome\"}",
        ),
        finish("tool_calls"),
        usage(10, 5),
    ]));
    model.push(Reply::Stream(vec![
        text("Sunny in Paris."),
        finish("stop"),
        usage(20, 4),
    ]));
    // A call and its answer through Chat Completions.
    script_weather(&model);
    let app = spawn_app_on(Arc::new(TestDb::new().await), &config(&model.url)).await;
    let (_, token) = app.new_tenant().await;
    let mut driver = tokio::process::Command::new("node");
    driver
        .arg(format!("{DRIVERS}/js_client.mjs"))
        .arg(&sdk)
        .args([app.address.as_str(), &token]);
    run_driver(driver, "js_client.mjs").await;
    assert_tool_output_sent(&model, 1);
    assert_tool_output_sent(&model, 3);
}

#[tokio::test]
async fn the_official_python_sdk_drives_every_operation() {
    let venv = tokio::task::spawn_blocking(python_sdk)
        .await
        .unwrap()
        .unwrap_or_else(|missing| panic!("the openai Python SDK cannot be installed: {missing}"));
    let model = ScriptedOpenAi::start().await;
    script_weather(&model);
    // The same call and answer again, through Chat Completions.
    script_weather(&model);
    let app = spawn_app_on(Arc::new(TestDb::new().await), &config(&model.url)).await;
    let (_, token) = app.new_tenant().await;
    let mut driver = tokio::process::Command::new(venv.join("bin/python"));
    driver
        .arg(format!("{DRIVERS}/sdk_client.py"))
        .args([app.address.as_str(), &token]);
    run_driver(driver, "sdk_client.py").await;
    // Through either API.
    assert_tool_output_sent(&model, 1);
    assert_tool_output_sent(&model, 3);
}
