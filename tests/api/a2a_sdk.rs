//! The official A2A SDKs drive the A2A face: the Python `a2a-sdk` and the JS `@a2a-js/sdk`
//! clients run every operation through their own code (`tests/a2a/*_client.*`) against a real
//! app, and those drivers check every answer; a 0.3 release of the Python SDK resolves the
//! card and sends over the 0.3 interfaces it finds there.
//!
//! Each SDK is installed once per target directory, under `CARGO_TARGET_TMPDIR`: built in a
//! staging directory and renamed into place with a marker inside, so a half-made install is
//! never used and concurrent tests share one. A missing python3, node or registry fails the
//! test with what is missing: it never skips.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::helpers::{TestDb, spawn_app_on};

/// The Python SDK, as pip names it.
const PYTHON_SDK: &str = "a2a-sdk==1.3.0";
/// A release of the Python SDK that speaks only protocol 0.3.
const PYTHON_SDK_03: &str = "a2a-sdk==0.3.26";
/// The JS SDK and its dependencies, pinned by the lock file beside the driver.
const JS_PACKAGE: &str = include_str!("../a2a/package.json");
const JS_LOCK: &str = include_str!("../a2a/package-lock.json");

const DRIVERS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/a2a");
const INSTALLS: &str = env!("CARGO_TARGET_TMPDIR");

/// How long a driver may take: it needs about 10 s.
const DRIVER_TIMEOUT: Duration = Duration::from_secs(180);

/// `echo` answers at once (and is the default agent); `slow` takes 3 s for a 60-character
/// message, long enough to cancel or subscribe to a running task. Push configs may point at
/// the drivers' loopback receivers.
const CONFIG: &str = r#"
[[agents]]
name = "echo"
provider = "echo"

[[agents]]
name = "slow"
provider = "echo"
chunk_size = 1
delay_ms = 50

[webhooks]
allow_http = true
allow_targets = ["127.0.0.1"]

[a2a]
default_agent = "echo"
"#;

#[tokio::test]
async fn the_official_python_sdk_drives_every_operation() {
    let venv = tokio::task::spawn_blocking(python_sdk)
        .await
        .unwrap()
        .unwrap_or_else(|missing| panic!("the Python A2A SDK cannot be installed: {missing}"));
    let app = spawn_app_on(Arc::new(TestDb::new().await), CONFIG).await;
    let (_, token) = app.new_tenant().await;
    let mut driver = tokio::process::Command::new(venv.join("bin/python"));
    driver.arg(format!("{DRIVERS}/sdk_client.py")).args([
        app.address.as_str(),
        &token,
        "echo",
        "slow",
        "--task-prefix",
        "run_",
        "--context-prefix",
        "sess_",
        "--default-agent",
        "echo",
    ]);
    run_driver(driver, "sdk_client.py").await;
}

#[tokio::test]
async fn a_0_3_python_sdk_resolves_the_card_and_sends_over_its_0_3_interfaces() {
    let venv = tokio::task::spawn_blocking(|| python_venv("a2a-sdk-03-venv", PYTHON_SDK_03))
        .await
        .unwrap()
        .unwrap_or_else(|missing| panic!("the 0.3 Python A2A SDK cannot be installed: {missing}"));
    let app = spawn_app_on(Arc::new(TestDb::new().await), CONFIG).await;
    let (_, token) = app.new_tenant().await;
    let mut driver = tokio::process::Command::new(venv.join("bin/python"));
    driver
        .arg(format!("{DRIVERS}/sdk03_client.py"))
        .args([app.address.as_str(), &token, "echo"]);
    run_driver(driver, "sdk03_client.py").await;
}

#[tokio::test]
async fn the_official_js_sdk_drives_every_operation_in_protocol_1_0_and_0_3() {
    let sdk = tokio::task::spawn_blocking(js_sdk)
        .await
        .unwrap()
        .unwrap_or_else(|missing| panic!("the JS A2A SDK cannot be installed: {missing}"));
    let app = spawn_app_on(Arc::new(TestDb::new().await), CONFIG).await;
    let (_, token) = app.new_tenant().await;
    let mut driver = tokio::process::Command::new("node");
    driver
        .arg(format!("{DRIVERS}/js_client.mjs"))
        .arg(&sdk)
        .args([
            app.address.as_str(),
            &token,
            "echo",
            "slow",
            "run_",
            "sess_",
        ]);
    run_driver(driver, "js_client.mjs").await;
}

/// Runs a driver to its end and fails the test, with everything it printed, unless it
/// exited 0.
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
    println!("{stdout}");
    assert!(
        output.status.success(),
        "{name} failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    assert!(
        stdout.ends_with("all steps passed\n"),
        "{name} did not finish its steps:\n{stdout}\n{stderr}"
    );
}

/// A virtualenv with the Python SDK; its directory.
fn python_sdk() -> Result<PathBuf, String> {
    python_venv("a2a-sdk-venv", PYTHON_SDK)
}

/// A virtualenv `name` with `package` installed; its directory.
fn python_venv(name: &str, package: &str) -> Result<PathBuf, String> {
    installed(name, package, |dir| {
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
                package,
            ]),
            &format!("`pip install {package}` (PyPI must be reachable)"),
        )
    })
}

/// The JS SDK as `npm ci` installs the driver's package; the directory holding its
/// `node_modules`.
fn js_sdk() -> Result<PathBuf, String> {
    installed("a2a-js", JS_LOCK, |dir| {
        write(&dir.join("package.json"), JS_PACKAGE)?;
        write(&dir.join("package-lock.json"), JS_LOCK)?;
        run(
            Command::new("npm")
                .args(["ci", "--no-audit", "--no-fund", "--prefix"])
                .arg(dir),
            "`npm ci` of @a2a-js/sdk (node and npm, and the npm registry, are needed)",
        )?;
        run(
            Command::new("node").arg("--version"),
            "`node --version` (node is needed to run the driver)",
        )
    })
}

/// `INSTALLS/name`, filled by `install` unless a previous install of the same `version` is
/// complete there.
pub(crate) fn installed(
    name: &str,
    version: &str,
    install: impl FnOnce(&Path) -> Result<(), String>,
) -> Result<PathBuf, String> {
    static INSTALLING: Mutex<()> = Mutex::new(());
    let _one_at_a_time = INSTALLING.lock().unwrap_or_else(PoisonError::into_inner);
    let dir = Path::new(INSTALLS).join(name);
    let complete = |dir: &Path| {
        std::fs::read_to_string(dir.join(".installed")).is_ok_and(|found| found == version)
    };
    if complete(&dir) {
        return Ok(dir);
    }
    let staging = tempfile::Builder::new()
        .prefix(&format!(".{name}-"))
        .tempdir_in(INSTALLS)
        .map_err(|e| format!("cannot make a staging directory in {INSTALLS}: {e}"))?;
    install(staging.path())?;
    write(&staging.path().join(".installed"), version)?;
    if dir.exists() {
        std::fs::remove_dir_all(&dir)
            .map_err(|e| format!("cannot remove the stale {}: {e}", dir.display()))?;
    }
    match std::fs::rename(staging.path(), &dir) {
        Ok(()) => {
            let _ = staging.keep();
            Ok(dir)
        }
        // Another test process renamed its own install into place first.
        Err(_) if complete(&dir) => Ok(dir),
        Err(e) => Err(format!("cannot move the install to {}: {e}", dir.display())),
    }
}

pub(crate) fn write(path: &Path, contents: &str) -> Result<(), String> {
    std::fs::write(path, contents).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Runs an install step; `what` says what it needs when it fails.
pub(crate) fn run(command: &mut Command, what: &str) -> Result<(), String> {
    let output = command
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{what} failed to start: {e}"))?;
    if output.status.success() {
        return Ok(());
    }
    Err(format!(
        "{what} failed ({}):\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    ))
}
