//! The browser console in a real browser: `tests/console/console_test.mjs` drives Debian's
//! Chromium through Playwright (`playwright-core`, pinned by the lock file beside it) against
//! a real app, on whichever backend the suite runs on, and checks chat with streaming and
//! resume, permissions, the turn inspector, sessions, tenant agents (versions, publish, a
//! session keeping its version), runs, webhooks, usage, the admin pages,
//! markup shown as text, and accessibility (axe-core) of every page; it writes screenshots of
//! each page at 1280 and 390 px to `CARGO_TARGET_TMPDIR/console-screenshots/<backend>/`.
//! Without Chromium, node, npm or the npm registry the test fails: it never skips.
//!
//! Also here: how the binary serves the console (its policy, its assets, its path, off).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use reqwest::Method;
use serde_json::json;

use crate::a2a_sdk::{installed, run, write};
use crate::helpers::{ADMIN_SECRET, TestDb, spawn_app_on};
use crate::scripted::{Reply, ScriptedOpenAi, finish, text, tool_fragment};

const PACKAGE: &str = include_str!("../console/package.json");
const LOCK: &str = include_str!("../console/package-lock.json");
const DRIVER: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/console/console_test.mjs"
);
const CHROMIUM: &str = "/usr/bin/chromium";

/// How long the driver may take: about a minute on an idle machine.
const DRIVER_TIMEOUT: Duration = Duration::from_secs(600);

/// `echo` thinks aloud, then answers in a few deltas; `slow` streams one character every
/// 25 ms (a long turn to reload, disconnect or cancel in the middle of); `tooly` is a scripted
/// model that calls the `clock` and `calculator` server tools, then a client tool. Tenant
/// agents may use the `local` connection (echo). Webhooks may target loopback, so
/// deliveries are attempted (and fail).
fn config(model: &ScriptedOpenAi) -> String {
    format!(
        r#"
[[agents]]
name = "echo"
provider = "echo"
chunk_size = 4
delay_ms = 15
thinking = true

[[agents.options]]
name = "api_key"
type = "secret"
default = ""

[[agents]]
name = "slow"
provider = "echo"
chunk_size = 1
delay_ms = 25

[[agents]]
name = "tooly"
provider = "openai"
model = "m"
base_url = "{url}"
timeout_seconds = 20

[[agents.tools]]
name = "clock"

[[agents.tools]]
name = "calculator"

[[connections]]
name = "local"
provider = "echo"

[webhooks]
allow_http = true
allow_targets = ["127.0.0.1"]
"#,
        url = model.url
    )
}

#[tokio::test]
async fn the_console_works_in_a_real_browser() {
    assert!(
        Path::new(CHROMIUM).exists(),
        "{CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium)"
    );
    let packages = tokio::task::spawn_blocking(browser_packages)
        .await
        .unwrap()
        .unwrap_or_else(|missing| {
            panic!("the browser test packages cannot be installed: {missing}")
        });
    let model = ScriptedOpenAi::start().await;
    // The permission step's two turns: each calls a tool, then answers once it has an answer.
    model.push(Reply::Stream(vec![
        tool_fragment(0, Some("call_clock"), Some("clock"), "{}"),
        finish("tool_calls"),
    ]));
    model.push(Reply::Stream(vec![
        text("It is about now."),
        finish("stop"),
    ]));
    model.push(Reply::Stream(vec![
        tool_fragment(
            0,
            Some("call_calc"),
            Some("calculator"),
            r#"{"expression": "2+2"}"#,
        ),
        finish("tool_calls"),
    ]));
    model.push(Reply::Stream(vec![
        text("Fine, I will not."),
        finish("stop"),
    ]));
    // The client tool step's turns: a call the user answers by hand, then the answer.
    model.push(Reply::Stream(vec![
        tool_fragment(
            0,
            Some("call_order"),
            Some("lookup_order"),
            r#"{"number": "42"}"#,
        ),
        finish("tool_calls"),
    ]));
    model.push(Reply::Stream(vec![
        text("Order 42 has shipped."),
        finish("stop"),
    ]));

    let db = Arc::new(TestDb::new().await);
    let backend = if db.url().starts_with("sqlite") {
        "sqlite"
    } else {
        "postgres"
    };
    let app = spawn_app_on(db, &config(&model)).await;
    let (tenant, _) = app.new_tenant().await;
    let credential = app
        .post(
            &format!("/admin/tenants/{tenant}/credentials"),
            &app.admin_token,
            json!({"name": "console"}),
        )
        .await;
    assert_eq!(credential.status, 201, "{}", credential.text);
    let screenshots = screenshot_dir(backend);
    // The browser reaches the app through a proxy whose connections the driver can cut.
    let proxy = CuttingProxy::start(&app.address).await;
    let settings = json!({
        "cut": proxy.cut_url,
        "adminSecret": ADMIN_SECRET,
        "tenantId": tenant,
        "clientId": credential.body["client_id"],
        "clientSecret": credential.body["client_secret"],
        "screenshots": screenshots,
    });
    let mut driver = tokio::process::Command::new("node");
    driver
        .arg(DRIVER)
        .arg(&packages)
        .arg(&proxy.url)
        .arg(settings.to_string());
    run_driver(driver).await;
    println!("screenshots: {}", screenshots.display());
}

/// A TCP proxy in front of the app: any connection to `cut_url` drops every connection open
/// through it at that moment, as a network that fails mid-stream does.
struct CuttingProxy {
    url: String,
    cut_url: String,
}

impl CuttingProxy {
    async fn start(target: &str) -> CuttingProxy {
        let target = target.trim_start_matches("http://").to_owned();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let control = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let proxy = CuttingProxy {
            url: format!("http://{}", listener.local_addr().unwrap()),
            cut_url: format!("http://{}/", control.local_addr().unwrap()),
        };
        let (cuts, _) = tokio::sync::watch::channel(0u64);
        let cuts = Arc::new(cuts);
        let cutter = cuts.clone();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = control.accept().await {
                cutter.send_modify(|generation| *generation += 1);
                let _ = tokio::io::AsyncWriteExt::write_all(
                    &mut socket,
                    b"HTTP/1.1 204 No Content\r\nAccess-Control-Allow-Origin: *\r\nConnection: close\r\n\r\n",
                )
                .await;
            }
        });
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let target = target.clone();
                let mut cut = cuts.subscribe();
                tokio::spawn(async move {
                    let Ok(mut outbound) = tokio::net::TcpStream::connect(&target).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = cut.changed() => {}
                    }
                });
            }
        });
        proxy
    }
}

fn screenshot_dir(backend: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("console-screenshots")
        .join(backend);
    std::fs::create_dir_all(&dir).expect("the screenshot directory");
    dir
}

/// `playwright-core` and `axe-core` as `npm ci` installs them from the lock file.
fn browser_packages() -> Result<PathBuf, String> {
    installed("console-browser-tests", LOCK, |dir| {
        write(&dir.join("package.json"), PACKAGE)?;
        write(&dir.join("package-lock.json"), LOCK)?;
        run(
            std::process::Command::new("npm")
                .args(["ci", "--no-audit", "--no-fund", "--prefix"])
                .arg(dir),
            "`npm ci` of playwright-core and axe-core (node and npm, and the npm registry, are needed)",
        )
    })
}

async fn run_driver(mut driver: tokio::process::Command) {
    driver
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let child = driver.spawn().expect("node starts the console driver");
    let output = tokio::time::timeout(DRIVER_TIMEOUT, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("the console driver did not finish in {DRIVER_TIMEOUT:?}"))
        .expect("the driver's output");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    assert!(
        output.status.success() && stdout.ends_with("all steps passed\n"),
        "the console driver failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
}

#[tokio::test]
async fn the_console_is_served_from_the_binary_with_a_strict_policy() {
    let app = spawn_app_on(Arc::new(TestDb::new().await), "").await;
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let bare = client.get(app.url("/console")).send().await.unwrap();
    assert_eq!(bare.status(), 308);
    assert_eq!(bare.headers()["location"], "console/");

    let page = app.request(Method::GET, "/console/", None, None).await;
    assert_eq!(page.status, 200);
    let policy = page.headers["content-security-policy"].to_str().unwrap();
    for directive in [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "connect-src 'self'",
        "frame-ancestors 'none'",
    ] {
        assert!(policy.contains(directive), "{policy} lacks {directive}");
    }
    assert!(!policy.contains("unsafe"), "{policy}");
    assert!(
        page.text
            .contains(r#"<meta name="agentry-api-base" content="../">"#),
        "{}",
        page.text
    );
    // Everything the page references is on this server, under the console's path.
    for asset in [
        "assets/console.js",
        "assets/console.css",
        "assets/favicon.svg",
    ] {
        assert!(page.text.contains(&format!("\"{asset}\"")), "{asset}");
        let served = app
            .request(Method::GET, &format!("/console/{asset}"), None, None)
            .await;
        assert_eq!(served.status, 200, "{asset}");
        assert_eq!(served.headers["x-content-type-options"], "nosniff");
    }
    assert!(!page.text.contains("http://") && !page.text.contains("https://"));
    let missing = app
        .request(Method::GET, "/console/assets/nothing.js", None, None)
        .await;
    assert_eq!(missing.status, 404);
    assert_eq!(missing.code(), "not_found");
}

#[tokio::test]
async fn the_console_moves_with_its_path_and_can_be_turned_off() {
    let moved = spawn_app_on(
        Arc::new(TestDb::new().await),
        "[console]\npath = \"/ops/ui\"\n",
    )
    .await;
    let page = moved.request(Method::GET, "/ops/ui/", None, None).await;
    assert_eq!(page.status, 200);
    assert!(page.text.contains(r#"content="../../""#), "{}", page.text);
    let old = moved.request(Method::GET, "/console/", None, None).await;
    assert_eq!(old.status, 404);

    let off = spawn_app_on(
        Arc::new(TestDb::new().await),
        "[console]\nenabled = false\n",
    )
    .await;
    for path in ["/console", "/console/", "/console/assets/console.js"] {
        let reply = off.request(Method::GET, path, None, None).await;
        assert_eq!(reply.status, 404, "{path}");
    }
}
