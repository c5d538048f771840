//! The official `openai` SDKs drive the face: the Python SDK (PyPI, pinned, in a virtualenv
//! made here) runs `tests/responses/sdk_client.py` against a real app, which checks every
//! answer. A missing python3 or registry fails the test with what is missing: it never
//! skips.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use crate::a2a_sdk::{installed, run};
use crate::helpers::{TestDb, spawn_app_on};
use crate::scripted::{Reply, ScriptedOpenAi, finish, text, tool_fragment, usage};

/// The Python SDK, as pip names it.
const PYTHON_SDK: &str = "openai==3.57.0";
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

#[tokio::test]
async fn the_official_python_sdk_drives_every_operation() {
    let venv = tokio::task::spawn_blocking(python_sdk)
        .await
        .unwrap()
        .unwrap_or_else(|missing| panic!("the openai Python SDK cannot be installed: {missing}"));
    let model = ScriptedOpenAi::start().await;
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
    // The same call and answer again, through Chat Completions.
    model.push(Reply::Stream(vec![
        tool_fragment(
            0,
            Some("call_2"),
            Some("get_weather"),
            "{\"city\":\"Paris\"}",
        ),
        finish("tool_calls"),
        usage(10, 5),
    ]));
    model.push(Reply::Stream(vec![
        text("Sunny in Paris."),
        finish("stop"),
        usage(20, 4),
    ]));
    let app = spawn_app_on(Arc::new(TestDb::new().await), &config(&model.url)).await;
    let (_, token) = app.new_tenant().await;
    let mut driver = tokio::process::Command::new(venv.join("bin/python"));
    driver
        .arg(format!("{DRIVERS}/sdk_client.py"))
        .args([app.address.as_str(), &token])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let child = driver.spawn().expect("the driver starts");
    let output = tokio::time::timeout(DRIVER_TIMEOUT, child.wait_with_output())
        .await
        .expect("the driver finishes in time")
        .expect("the driver's output");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.ends_with("all steps passed\n"),
        "sdk_client.py failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    // The tool call's output reached the model, through either API.
    for answer in [1, 3] {
        let sent = &model.requests()[answer].body["messages"];
        assert!(
            sent.as_array()
                .unwrap()
                .iter()
                .any(|m| m["role"] == "tool" && m["content"] == "sunny"),
            "{sent}"
        );
    }
}
