//! Tenants' own agents: versions, publish and rollback, sessions pinned to the version
//! they were opened on, optimistic concurrency, isolation on every face, and the rules of
//! `[[agents]]` and of the operator applied to them.

use std::sync::Arc;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::helpers::{TestApp, TestDb, spawn_app_on, user};
use crate::scripted::{Reply, ScriptedOpenAi, finish, text};

/// A connection to the scripted model API, and one that needs no network.
fn connections(server: &ScriptedOpenAi) -> String {
    format!(
        "[[connections]]\nname = \"scripted\"\nprovider = \"openai\"\nbase_url = \"{}\"\n\
         api_key = \"sk-operator-secret\"\nmodels = [\"m1\", \"m2\"]\ntimeout_seconds = 5\n\
         max_retries = 0\n\n\
         [[connections]]\nname = \"local\"\nprovider = \"echo\"\n",
        server.url
    )
}

async fn app_with(server: &ScriptedOpenAi) -> TestApp {
    spawn_app_on(Arc::new(TestDb::new().await), &connections(server)).await
}

fn helper(prompt: &str) -> Value {
    json!({
        "name": "helper",
        "title": "Helper",
        "connection": "scripted",
        "model": "m1",
        "system_prompt": prompt,
    })
}

fn answer() -> Reply {
    Reply::Stream(vec![text("ok"), finish("stop")])
}

/// Runs a turn on the session and returns the system prompt the model was sent.
async fn prompt_of_turn(
    app: &TestApp,
    token: &str,
    session: &str,
    server: &ScriptedOpenAi,
) -> String {
    let before = server.requests().len();
    server.push(answer());
    let reply = app
        .post(
            &format!("/sessions/{session}/turns"),
            token,
            json!({"messages": [user("hi")]}),
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    let requests = server.requests();
    assert_eq!(requests.len(), before + 1);
    let body = &requests.last().unwrap().body;
    body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

async fn publish(app: &TestApp, token: &str, name: &str, version: i64) -> crate::helpers::Reply {
    app.post(
        &format!("/agents/{name}/publish"),
        token,
        json!({"version": version}),
    )
    .await
}

#[tokio::test]
async fn a_tenant_agent_lives_through_versions_publish_and_rollback() {
    let server = ScriptedOpenAi::start().await;
    let app = app_with(&server).await;
    let (_, token) = app.new_tenant().await;

    let created = app.post("/agents", &token, helper("prompt one")).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    assert_eq!(created.body["latest_version"], 1);
    assert_eq!(created.body["published_version"], Value::Null);
    assert!(
        created.body["version"]["created_by"]
            .as_str()
            .unwrap()
            .starts_with("tok_")
    );
    assert!(!created.text.contains("sk-operator-secret"));

    // A draft only: no session by name yet.
    let early = app
        .post("/sessions", &token, json!({"agent": {"name": "helper"}}))
        .await;
    assert_eq!(early.status, StatusCode::BAD_REQUEST, "{}", early.text);

    assert_eq!(
        publish(&app, &token, "helper", 1).await.status,
        StatusCode::OK
    );
    let first = app
        .create_session(&token, json!({"agent": {"name": "helper"}}))
        .await;
    assert_eq!(
        prompt_of_turn(&app, &token, &first, &server).await,
        "prompt one"
    );
    let read = app.get(&format!("/sessions/{first}"), &token).await;
    assert_eq!(read.body["agent"]["version"], 1, "{}", read.text);

    // v2 is a draft: the open session and new ones still run v1.
    let updated = app
        .request(
            Method::PUT,
            "/agents/helper",
            Some(&token),
            Some(&helper("prompt two")),
        )
        .await;
    assert_eq!(updated.status, StatusCode::OK, "{}", updated.text);
    assert_eq!(updated.body["latest_version"], 2);
    assert_eq!(updated.body["published_version"], 1);
    assert_eq!(
        prompt_of_turn(&app, &token, &first, &server).await,
        "prompt one"
    );

    // A draft may be tried explicitly.
    let trial = app
        .create_session(&token, json!({"agent": {"name": "helper", "version": 2}}))
        .await;
    assert_eq!(
        prompt_of_turn(&app, &token, &trial, &server).await,
        "prompt two"
    );

    // Publishing v2 changes new sessions only.
    assert_eq!(
        publish(&app, &token, "helper", 2).await.status,
        StatusCode::OK
    );
    let second = app
        .create_session(&token, json!({"agent": {"name": "helper"}}))
        .await;
    assert_eq!(
        prompt_of_turn(&app, &token, &second, &server).await,
        "prompt two"
    );
    assert_eq!(
        prompt_of_turn(&app, &token, &first, &server).await,
        "prompt one"
    );

    // Rollback: publish v1 again.
    assert_eq!(
        publish(&app, &token, "helper", 1).await.status,
        StatusCode::OK
    );
    let third = app
        .create_session(&token, json!({"agent": {"name": "helper"}}))
        .await;
    assert_eq!(
        prompt_of_turn(&app, &token, &third, &server).await,
        "prompt one"
    );
    assert_eq!(
        prompt_of_turn(&app, &token, &second, &server).await,
        "prompt two"
    );

    // The versions and one of them, read back.
    let versions = app.get("/agents/helper/versions", &token).await;
    assert_eq!(versions.status, StatusCode::OK, "{}", versions.text);
    let numbers: Vec<i64> = versions.body["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["version"].as_i64().unwrap())
        .collect();
    assert_eq!(numbers, [2, 1]);
    let v2 = app.get("/agents/helper/versions/2", &token).await;
    assert_eq!(v2.body["version"]["spec"]["system_prompt"], "prompt two");
    let listed = app.get("/agents", &token).await;
    assert_eq!(
        listed.body["agents"][0]["name"], "helper",
        "{}",
        listed.text
    );

    // Archived: no new sessions; the open ones go on.
    let archived = app.post("/agents/helper/archive", &token, json!({})).await;
    assert_eq!(archived.status, StatusCode::OK, "{}", archived.text);
    let refused = app
        .post("/sessions", &token, json!({"agent": {"name": "helper"}}))
        .await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.text);
    assert!(refused.text.contains("archived"), "{}", refused.text);
    assert_eq!(
        prompt_of_turn(&app, &token, &third, &server).await,
        "prompt one"
    );
    let restored = app.post("/agents/helper/restore", &token, json!({})).await;
    assert_eq!(restored.status, StatusCode::OK);

    // Deleted: gone, and its name is free again.
    assert_eq!(
        app.delete("/agents/helper", &token).await.status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        app.get("/agents/helper", &token).await.status,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn a_stale_if_match_is_refused_and_changes_nothing() {
    let server = ScriptedOpenAi::start().await;
    let app = app_with(&server).await;
    let (_, token) = app.new_tenant().await;
    let created = app.post("/agents", &token, helper("one")).await;
    let etag = created.headers["etag"].to_str().unwrap().to_owned();

    // Someone else changes the agent.
    let other = app
        .request(
            Method::PUT,
            "/agents/helper",
            Some(&token),
            Some(&helper("two")),
        )
        .await;
    assert_eq!(other.status, StatusCode::OK);

    let stale = app
        .client
        .put(app.url("/agents/helper"))
        .bearer_auth(&token)
        .header("If-Match", &etag)
        .json(&helper("three"))
        .send()
        .await
        .unwrap();
    assert_eq!(stale.status(), StatusCode::PRECONDITION_FAILED);
    let body: Value = stale.json().await.unwrap();
    assert_eq!(body["error"]["code"], "precondition_failed");
    let publish_stale = app
        .client
        .post(app.url("/agents/helper/publish"))
        .bearer_auth(&token)
        .header("If-Match", &etag)
        .json(&json!({"version": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(publish_stale.status(), StatusCode::PRECONDITION_FAILED);

    let read = app.get("/agents/helper", &token).await;
    assert_eq!(read.body["latest_version"], 2);
    assert_eq!(read.body["published_version"], Value::Null);
    assert_eq!(read.body["version"]["spec"]["system_prompt"], "two");

    // The current ETag is accepted.
    let current = read.headers["etag"].to_str().unwrap().to_owned();
    let fresh = app
        .client
        .put(app.url("/agents/helper"))
        .bearer_auth(&token)
        .header("If-Match", &current)
        .json(&helper("three"))
        .send()
        .await
        .unwrap();
    assert_eq!(fresh.status(), StatusCode::OK);
}

#[tokio::test]
async fn another_tenants_agent_is_not_found_on_every_face() {
    let server = ScriptedOpenAi::start().await;
    let app = app_with(&server).await;
    let (_, owner) = app.new_tenant().await;
    let (_, other) = app.new_tenant().await;
    let mut body = helper("mine");
    body["name"] = json!("private-one");
    assert_eq!(
        app.post("/agents", &owner, body).await.status,
        StatusCode::CREATED
    );
    assert_eq!(
        publish(&app, &owner, "private-one", 1).await.status,
        StatusCode::OK
    );

    // The owner sees it everywhere.
    let meta = app.get("/meta", &owner).await;
    assert!(meta.text.contains("private-one"), "{}", meta.text);
    assert!(
        app.get("/acp/agents", &owner)
            .await
            .text
            .contains("private-one")
    );
    assert_eq!(
        app.get("/acp/agents/private-one", &owner).await.status,
        StatusCode::OK
    );
    assert_eq!(
        app.get("/a2a/private-one/extendedAgentCard", &owner)
            .await
            .status,
        StatusCode::OK
    );

    // Nobody else does.
    let anonymous = app.request(Method::GET, "/meta", None, None).await;
    assert!(!anonymous.text.contains("private-one"));
    assert!(!app.get("/meta", &other).await.text.contains("private-one"));
    assert!(
        !app.get("/acp/agents", &other)
            .await
            .text
            .contains("private-one")
    );
    assert_eq!(
        app.get("/acp/agents/private-one", &other).await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        app.get("/agents/private-one", &other).await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        app.get("/agents/private-one/versions", &other).await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        publish(&app, &other, "private-one", 1).await.status,
        StatusCode::NOT_FOUND
    );
    assert!(
        !app.get("/agents", &other)
            .await
            .text
            .contains("private-one")
    );
    assert_eq!(
        app.request(
            Method::GET,
            "/a2a/private-one/.well-known/agent-card.json",
            None,
            None
        )
        .await
        .status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        app.get("/a2a/private-one/.well-known/agent-card.json", &owner)
            .await
            .status,
        StatusCode::NOT_FOUND,
        "the public card names configured agents only"
    );
    assert_eq!(
        app.get("/a2a/private-one/extendedAgentCard", &other)
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    let session = app
        .post(
            "/sessions",
            &other,
            json!({"agent": {"name": "private-one"}}),
        )
        .await;
    assert_eq!(session.status, StatusCode::BAD_REQUEST, "{}", session.text);
    assert!(session.text.contains("unknown agent"), "{}", session.text);
    let acp = app
        .post(
            "/acp/runs",
            &other,
            json!({"agent_name": "private-one", "input": [{"role": "user", "parts": [{"content_type": "text/plain", "content": "hi"}]}]}),
        )
        .await;
    assert_eq!(acp.status, StatusCode::NOT_FOUND, "{}", acp.text);
    let scope = app
        .post(
            "/agentscope/agents/private-one/process",
            &other,
            json!({"input": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}),
        )
        .await;
    // AgentScope answers an error in its own body.
    assert!(scope.text.contains("\"not_found\""), "{}", scope.text);
    let a2a = app
        .post(
            "/a2a/private-one/message:send",
            &other,
            json!({"message": {"role": "ROLE_USER", "messageId": "m1", "parts": [{"text": "hi"}]}}),
        )
        .await;
    assert_eq!(a2a.status, StatusCode::NOT_FOUND, "{}", a2a.text);

    // The owner reaches it through AgentScope too.
    server.push(answer());
    let mine = app
        .post(
            "/agentscope/agents/private-one/process",
            &owner,
            json!({"input": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}], "stream": false}),
        )
        .await;
    assert_eq!(mine.status, StatusCode::OK, "{}", mine.text);
}

#[tokio::test]
async fn a_configured_agents_name_cannot_be_taken() {
    let server = ScriptedOpenAi::start().await;
    let app = app_with(&server).await;
    let (_, token) = app.new_tenant().await;
    let mut body = helper("x");
    body["name"] = json!("echo");
    let reply = app.post("/agents", &token, body).await;
    assert_eq!(reply.status, StatusCode::CONFLICT, "{}", reply.text);
    assert!(reply.text.contains("configured agent"), "{}", reply.text);
    // Two of the tenant's own with one name: a conflict too.
    assert_eq!(
        app.post("/agents", &token, helper("x")).await.status,
        StatusCode::CREATED
    );
    assert_eq!(
        app.post("/agents", &token, helper("x")).await.status,
        StatusCode::CONFLICT
    );
    // Another tenant may use the name.
    let (_, other) = app.new_tenant().await;
    assert_eq!(
        app.post("/agents", &other, helper("x")).await.status,
        StatusCode::CREATED
    );
}

#[tokio::test]
async fn what_the_operator_does_not_allow_is_refused_naming_the_field() {
    let server = ScriptedOpenAi::start().await;
    let app = app_with(&server).await;
    let (_, token) = app.new_tenant().await;
    let cases = [
        (
            json!({"name": "a", "connection": "nope", "model": "m1"}),
            "/connection",
            "unknown connection `nope`",
        ),
        (
            json!({"name": "a", "connection": "scripted", "model": "gpt-9"}),
            "/model",
            "offers the models",
        ),
        (
            json!({"name": "a", "connection": "scripted", "model": "m1", "tools": [{"name": "http_fetch"}]}),
            "/tools/0/name",
            "not allowed for tenant agents",
        ),
        // A tenant never sets a URL or a key agentry uses.
        (
            json!({"name": "a", "connection": "scripted", "model": "m1", "base_url": "http://attacker.example"}),
            "/base_url",
            "unknown field `base_url`",
        ),
        (
            json!({"name": "a", "connection": "scripted", "model": "m1", "api_key": "x"}),
            "/api_key",
            "unknown field `api_key`",
        ),
        (
            json!({"name": "a", "provider": "openai", "connection": "scripted", "model": "m1"}),
            "/provider",
            "unknown field `provider`",
        ),
        (
            json!({"name": "a", "connection": "local", "options": [{"name": "k", "type": "secret", "default": "s3cret"}]}),
            "/options/0/default",
            "has no default",
        ),
        (
            json!({"name": "a", "connection": "local", "system_prompt": "x".repeat(40_000)}),
            "/system_prompt",
            "tenant_agents.max_prompt_bytes",
        ),
    ];
    for (body, field, message) in cases {
        let reply = app.post("/agents", &token, body.clone()).await;
        assert_eq!(
            reply.status,
            StatusCode::BAD_REQUEST,
            "{body}: {}",
            reply.text
        );
        assert_eq!(
            reply.body["error"]["field"], field,
            "{body}: {}",
            reply.text
        );
        assert!(reply.text.contains(message), "{body}: {}", reply.text);
    }
    // Nothing was stored.
    let listed = app.get("/agents", &token).await;
    assert_eq!(listed.body["agents"], json!([]), "{}", listed.text);
}

/// Invalid agents, each refused by `agentry config check` (as an `[[agents]]` entry) and
/// by the API (as a tenant agent) with the same message, naming the same field.
#[tokio::test]
async fn config_check_and_the_api_refuse_the_same_agents_alike() {
    let server = ScriptedOpenAi::start().await;
    let app = app_with(&server).await;
    let (_, token) = app.new_tenant().await;
    // (TOML keys of the agent, the same as JSON, the dotted key, the pointer)
    let cases: [(&str, Value, &str, &str); 6] = [
        (
            "system_prompt = \"Hi {{options.who}}\"",
            json!({"system_prompt": "Hi {{options.who}}"}),
            "agents[1].system_prompt",
            "/system_prompt",
        ),
        (
            "max_steps = 0",
            json!({"max_steps": 0}),
            "agents[1].max_steps",
            "/max_steps",
        ),
        (
            "history = { types = [] }",
            json!({"history": {"types": []}}),
            "agents[1].history.types",
            "/history/types",
        ),
        (
            "options = [{ name = \"s\", type = \"select\", options = [\"a\"], default = \"b\" }]",
            json!({"options": [{"name": "s", "type": "select", "options": ["a"], "default": "b"}]}),
            "agents[1].options[0].default",
            "/options/0/default",
        ),
        (
            "options = [{ name = \"t\", type = \"text\" }, { name = \"t\", type = \"text\" }]",
            json!({"options": [{"name": "t", "type": "text"}, {"name": "t", "type": "text"}]}),
            "agents[1].options[1].name",
            "/options/1/name",
        ),
        (
            "input_schema = [{ name = \"[bad\", content_type = \"text/plain\" }]",
            json!({"input_schema": [{"name": "[bad", "content_type": "text/plain"}]}),
            "agents[1].input_schema[0].name",
            "/input_schema/0/name",
        ),
    ];
    for (toml, json_keys, key, pointer) in cases {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(
            file.path(),
            format!(
                "[[agents]]\nname = \"echo\"\nprovider = \"echo\"\n\n\
                 [[agents]]\nname = \"bad\"\nprovider = \"echo\"\n{toml}\n"
            ),
        )
        .unwrap();
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_agentry"))
            .args(["config", "check", "--config"])
            .arg(file.path())
            .output()
            .unwrap();
        assert!(!output.status.success(), "{toml}");
        let printed = String::from_utf8_lossy(&output.stderr).into_owned()
            + &String::from_utf8_lossy(&output.stdout);
        let prefix = format!("invalid configuration at `{key}`: ");
        let start = printed
            .find(&prefix)
            .unwrap_or_else(|| panic!("{toml}: {printed}"));
        let config_message = printed[start + prefix.len()..]
            .lines()
            .next()
            .unwrap()
            .trim();

        let mut body = json!({"name": "bad", "connection": "local"});
        for (k, v) in json_keys.as_object().unwrap() {
            body[k] = v.clone();
        }
        let reply = app.post("/agents", &token, body).await;
        assert_eq!(
            reply.status,
            StatusCode::BAD_REQUEST,
            "{toml}: {}",
            reply.text
        );
        assert_eq!(
            reply.body["error"]["field"], pointer,
            "{toml}: {}",
            reply.text
        );
        assert_eq!(
            reply.body["error"]["message"],
            format!("{pointer}: {config_message}"),
            "{toml}"
        );
    }
}

#[tokio::test]
async fn an_admin_manages_a_tenants_agents_and_deleting_the_tenant_deletes_them() {
    let server = ScriptedOpenAi::start().await;
    let app = app_with(&server).await;
    let (tenant, token) = app.new_tenant().await;
    let admin = app.admin_token.clone();
    let base = format!("/admin/tenants/{tenant}/agents");
    let created = app.post(&base, &admin, helper("by admin")).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    assert_eq!(created.body["version"]["created_by"], "admin");
    let published = app
        .post(
            &format!("{base}/helper/publish"),
            &admin,
            json!({"version": 1}),
        )
        .await;
    assert_eq!(published.status, StatusCode::OK, "{}", published.text);
    // The tenant sees what the admin made.
    assert_eq!(
        app.get("/agents/helper", &token).await.status,
        StatusCode::OK
    );
    assert_eq!(
        app.get(&base, &admin).await.body["agents"][0]["name"],
        "helper"
    );

    assert_eq!(
        app.delete(&format!("/admin/tenants/{tenant}"), &admin)
            .await
            .status,
        StatusCode::NO_CONTENT
    );
    let left = app.db.scalar("SELECT COUNT(*) FROM tenant_agents").await;
    assert_eq!(left, "0");
}

/// Two `agentry serve` processes on one PostgreSQL database: a version published through
/// one is what the next session opened through the other runs, at once. (SQLite is one
/// process's database: PostgreSQL only.)
#[tokio::test]
async fn a_publish_through_one_process_is_used_by_the_next_session_of_another() {
    use crate::process::Deployment;
    let db = TestDb::new().await;
    if db.url().starts_with("sqlite:") {
        eprintln!("several processes need PostgreSQL: set TEST_POSTGRES_URL");
        return;
    }
    let server = ScriptedOpenAi::start().await;
    let deployment = Deployment::on(
        db,
        &format!(
            "[[agents]]\nname = \"echo\"\nprovider = \"echo\"\n\n{}",
            connections(&server)
        ),
    );
    let (_, token) = deployment.tenant_token("acme");
    let a = deployment.start(&[]);
    let b = deployment.start(&[]);
    let client = reqwest::Client::new();
    let send = |request: reqwest::RequestBuilder, body: Value| {
        let token = token.clone();
        async move {
            let reply = request.bearer_auth(token).json(&body).send().await.unwrap();
            let status = reply.status();
            let body: Value = reply.json().await.unwrap_or(Value::Null);
            (status, body)
        }
    };
    let turn_prompt = |session: String| {
        let client = client.clone();
        let url = b.url(&format!("/sessions/{session}/turns"));
        let token = token.clone();
        let server = &server;
        async move {
            let before = server.requests().len();
            server.push(answer());
            let reply = client
                .post(url)
                .bearer_auth(token)
                .json(&json!({"messages": [user("hi")]}))
                .send()
                .await
                .unwrap();
            assert_eq!(reply.status(), StatusCode::OK);
            let requests = server.requests();
            assert_eq!(requests.len(), before + 1);
            requests.last().unwrap().body["messages"][0]["content"]
                .as_str()
                .unwrap()
                .to_owned()
        }
    };

    let (status, _) = send(client.post(a.url("/agents")), helper("first")).await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, _) = send(
        client.post(a.url("/agents/helper/publish")),
        json!({"version": 1}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (status, created) = send(
        client.post(b.url("/sessions")),
        json!({"agent": {"name": "helper"}}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let first = created["sessionId"].as_str().unwrap().to_owned();
    assert_eq!(turn_prompt(first.clone()).await, "first");

    // B has built version 1; A makes and publishes version 2.
    let (status, _) = send(client.put(a.url("/agents/helper")), helper("second")).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = send(
        client.post(a.url("/agents/helper/publish")),
        json!({"version": 2}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let published = std::time::Instant::now();
    let (status, created) = send(
        client.post(b.url("/sessions")),
        json!({"agent": {"name": "helper"}}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert!(published.elapsed() < std::time::Duration::from_secs(1));
    let second = created["sessionId"].as_str().unwrap().to_owned();
    assert_eq!(turn_prompt(second).await, "second");
    // The session opened before goes on with its version.
    assert_eq!(turn_prompt(first).await, "first");
}

/// An operator manages a tenant's agents with `agentry agents …`, on the database.
#[tokio::test]
async fn an_operator_manages_a_tenants_agents_from_the_command_line() {
    use crate::process::{Deployment, run_ok};
    let deployment = Deployment::new(
        "[[agents]]\nname = \"echo\"\nprovider = \"echo\"\n\n\
         [[connections]]\nname = \"local\"\nprovider = \"echo\"\n",
    )
    .await;
    let (tenant, _) = deployment.tenant_token("acme");
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, prompt: &str| {
        let path = dir.path().join(name);
        std::fs::write(
            &path,
            json!({"name": "helper", "connection": "local", "system_prompt": prompt}).to_string(),
        )
        .unwrap();
        path
    };
    let agents = |args: &[&str]| -> Value {
        let mut command = deployment.command();
        command.arg("agents").args(args);
        serde_json::from_str(&run_ok(&mut command)).unwrap()
    };
    let one = file("one.json", "one");
    let created = agents(&["create", "acme", "--file", one.to_str().unwrap()]);
    assert_eq!(created["version"]["version"], 1);
    assert_eq!(created["version"]["created_by"], "admin");
    let two = file("two.json", "two");
    let updated = agents(&["update", &tenant, "helper", "--file", two.to_str().unwrap()]);
    assert_eq!(updated["agent"]["latest_version"], 2);
    let published = agents(&["publish", "acme", "helper", "2"]);
    assert_eq!(published["published_version"], 2);
    let rolled_back = agents(&["publish", "acme", "helper", "1"]);
    assert_eq!(rolled_back["published_version"], 1);
    let versions = agents(&["versions", "acme", "helper"]);
    assert_eq!(versions.as_array().unwrap().len(), 2);
    let first = agents(&["show", "acme", "helper", "--version", "1"]);
    assert_eq!(first["version"]["spec"]["system_prompt"], "one");
    assert_eq!(agents(&["archive", "acme", "helper"])["archived"], true);
    assert_eq!(agents(&["restore", "acme", "helper"])["archived"], false);
    assert_eq!(agents(&["list", "acme"])[0]["name"], "helper");

    // A stale revision and an invalid agent are refused, naming why.
    let mut stale = deployment.command();
    let output = stale
        .args([
            "agents",
            "update",
            "acme",
            "helper",
            "--if-match",
            "1",
            "--file",
        ])
        .arg(&two)
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("If-Match"));
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, r#"{"name": "x", "connection": "elsewhere"}"#).unwrap();
    let output = deployment
        .command()
        .args(["agents", "create", "acme", "--file"])
        .arg(&bad)
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("/connection: unknown connection"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );

    let mut delete = deployment.command();
    run_ok(delete.args(["agents", "delete", "acme", "helper", "--yes"]));
    assert_eq!(agents(&["list", "acme"]), json!([]));
}

/// A session on a tenant agent is served like any other: its history, and runs through
/// ACP and A2A.
#[tokio::test]
async fn a_tenant_agents_sessions_are_served_on_every_face() {
    let server = ScriptedOpenAi::start().await;
    let app = app_with(&server).await;
    let (_, token) = app.new_tenant().await;
    let body = json!({"name": "local-helper", "connection": "local",
                      "history": {"types": ["full"]}});
    assert_eq!(
        app.post("/agents", &token, body).await.status,
        StatusCode::CREATED
    );
    assert_eq!(
        publish(&app, &token, "local-helper", 1).await.status,
        StatusCode::OK
    );

    let session = app
        .create_session(&token, json!({"agent": {"name": "local-helper"}}))
        .await;
    let turn = app
        .post(
            &format!("/sessions/{session}/turns"),
            &token,
            json!({"messages": [user("hello there")]}),
        )
        .await;
    assert_eq!(turn.status, StatusCode::OK, "{}", turn.text);
    let full = app
        .get(&format!("/sessions/{session}/history?type=full"), &token)
        .await;
    assert_eq!(full.status, StatusCode::OK, "{}", full.text);
    assert!(full.text.contains("hello there"), "{}", full.text);
    let compacted = app
        .get(
            &format!("/sessions/{session}/history?type=compacted"),
            &token,
        )
        .await;
    assert_eq!(
        compacted.status,
        StatusCode::NOT_FOUND,
        "{}",
        compacted.text
    );

    let acp = app
        .post(
            "/acp/runs",
            &token,
            json!({"agent_name": "local-helper", "mode": "sync",
                   "input": [{"role": "user", "parts": [{"content_type": "text/plain", "content": "via acp"}]}]}),
        )
        .await;
    assert_eq!(acp.status, StatusCode::OK, "{}", acp.text);
    assert!(acp.text.contains("via acp"), "{}", acp.text);

    let a2a = app
        .post(
            "/a2a/local-helper/message:send",
            &token,
            json!({"message": {"role": "ROLE_USER", "messageId": "m-1", "parts": [{"text": "via a2a"}]}}),
        )
        .await;
    assert_eq!(a2a.status, StatusCode::OK, "{}", a2a.text);
    assert!(a2a.text.contains("via a2a"), "{}", a2a.text);
}

/// A configured agent the operator limits to some tenants (`tenants = […]`) is theirs
/// only: other tenants and anonymous callers never see it, and another tenant may name an
/// agent of its own so.
#[tokio::test]
async fn a_configured_agent_limited_to_some_tenants_is_theirs_only() {
    let app = spawn_app_on(Arc::new(TestDb::new().await), "").await;
    let (a, a_token) = app.new_tenant().await;
    let (_, b_token) = app.new_tenant().await;
    let db = app.stop().await;
    let config = format!(
        "[[agents]]\nname = \"echo\"\nprovider = \"echo\"\n\n\
         [[agents]]\nname = \"vip\"\nprovider = \"echo\"\ntenants = [\"{a}\"]\n\n\
         [[connections]]\nname = \"local\"\nprovider = \"echo\"\n"
    );
    let app = spawn_app_on(db, &config).await;

    assert!(app.get("/meta", &a_token).await.text.contains("\"vip\""));
    app.create_session(&a_token, json!({"agent": {"name": "vip"}}))
        .await;
    let mine = app
        .post(
            "/agents",
            &a_token,
            json!({"name": "vip", "connection": "local"}),
        )
        .await;
    assert_eq!(mine.status, StatusCode::CONFLICT, "{}", mine.text);

    assert!(!app.get("/meta", &b_token).await.text.contains("\"vip\""));
    let anonymous = app.request(Method::GET, "/meta", None, None).await;
    assert!(!anonymous.text.contains("\"vip\""), "{}", anonymous.text);
    assert!(anonymous.text.contains("\"echo\""), "{}", anonymous.text);
    let refused = app
        .post("/sessions", &b_token, json!({"agent": {"name": "vip"}}))
        .await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.text);
    let listing = refused
        .text
        .split("the agents here")
        .nth(1)
        .unwrap_or_default();
    assert!(!listing.contains("vip"), "{}", refused.text);
    assert_eq!(
        app.get("/acp/agents/vip", &b_token).await.status,
        StatusCode::NOT_FOUND
    );
    // B's own `vip` is B's.
    let own = app
        .post(
            "/agents",
            &b_token,
            json!({"name": "vip", "connection": "local"}),
        )
        .await;
    assert_eq!(own.status, StatusCode::CREATED, "{}", own.text);
    assert_eq!(
        publish(&app, &b_token, "vip", 1).await.status,
        StatusCode::OK
    );
    let session = app
        .create_session(&b_token, json!({"agent": {"name": "vip"}}))
        .await;
    let read = app.get(&format!("/sessions/{session}"), &b_token).await;
    assert_eq!(read.body["agent"]["version"], 1, "{}", read.text);
}

/// `PATCH /sessions/{id}` moves a session to another kept version: its next turns run it.
#[tokio::test]
async fn a_session_is_moved_to_another_version_explicitly() {
    let server = ScriptedOpenAi::start().await;
    let app = app_with(&server).await;
    let (_, token) = app.new_tenant().await;
    let (_, other) = app.new_tenant().await;
    assert_eq!(
        app.post("/agents", &token, helper("one")).await.status,
        StatusCode::CREATED
    );
    assert_eq!(
        publish(&app, &token, "helper", 1).await.status,
        StatusCode::OK
    );
    let updated = app
        .request(
            Method::PUT,
            "/agents/helper",
            Some(&token),
            Some(&helper("two")),
        )
        .await;
    assert_eq!(updated.status, StatusCode::OK);
    let session = app
        .create_session(&token, json!({"agent": {"name": "helper"}}))
        .await;
    assert_eq!(prompt_of_turn(&app, &token, &session, &server).await, "one");

    let path = format!("/sessions/{session}");
    let moved = app
        .patch(&path, &token, json!({"agent": {"version": 2}}))
        .await;
    assert_eq!(moved.status, StatusCode::OK, "{}", moved.text);
    assert_eq!(moved.body["agent"]["version"], 2);
    assert_eq!(prompt_of_turn(&app, &token, &session, &server).await, "two");
    assert_eq!(app.get(&path, &token).await.body["agent"]["version"], 2);

    let missing = app
        .patch(&path, &token, json!({"agent": {"version": 9}}))
        .await;
    assert_eq!(missing.status, StatusCode::BAD_REQUEST, "{}", missing.text);
    assert_eq!(missing.body["error"]["field"], "agent.version");
    assert_eq!(
        app.patch(&path, &other, json!({"agent": {"version": 1}}))
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    let echo = app
        .create_session(&token, json!({"agent": {"name": "echo"}}))
        .await;
    let configured = app
        .patch(
            &format!("/sessions/{echo}"),
            &token,
            json!({"agent": {"version": 1}}),
        )
        .await;
    assert_eq!(
        configured.status,
        StatusCode::BAD_REQUEST,
        "{}",
        configured.text
    );
}

/// A move is recorded in the session's log: an `agent_version_change` event between its
/// turns, in no turn, sent live to the session's stream and replayed by it (in both modes),
/// absent from the turns' streams and logs. A move while a turn runs is refused and
/// records nothing.
#[tokio::test]
async fn a_sessions_move_is_an_event_of_its_log_between_turns() {
    let server = ScriptedOpenAi::start().await;
    let app = app_with(&server).await;
    let (_, token) = app.new_tenant().await;
    assert_eq!(
        app.post("/agents", &token, helper("one")).await.status,
        StatusCode::CREATED
    );
    assert_eq!(
        publish(&app, &token, "helper", 1).await.status,
        StatusCode::OK
    );
    let updated = app
        .request(
            Method::PUT,
            "/agents/helper",
            Some(&token),
            Some(&helper("two")),
        )
        .await;
    assert_eq!(updated.status, StatusCode::OK, "{}", updated.text);
    let session = app
        .create_session(&token, json!({"agent": {"name": "helper"}}))
        .await;
    assert_eq!(prompt_of_turn(&app, &token, &session, &server).await, "one");

    // The session's stream: the first turn replayed, then live.
    let events = format!("/sessions/{session}/events");
    let mut live = app.stream(&events, &token, None).await;
    let first = live.until_turn_stop().await;
    let first_stop = first.last().unwrap().id.unwrap();

    // A move while a turn runs is refused: the turn's events take the next seqs.
    let gate = Arc::new(tokio::sync::Notify::new());
    server.push(Reply::Gated(gate.clone(), Box::new(answer())));
    let running = app
        .stream_turn(
            &token,
            &session,
            json!({"messages": [user("wait")], "stream": "delta"}),
        )
        .await;
    let path = format!("/sessions/{session}");
    let busy = app
        .patch(&path, &token, json!({"agent": {"version": 2}}))
        .await;
    assert_eq!(busy.status, StatusCode::CONFLICT, "{}", busy.text);
    assert_eq!(busy.code(), "session_busy");
    gate.notify_one();
    let second = running.collect().await;
    assert_eq!(second.last().unwrap().event, "turn_stop");
    let second_stop = second.last().unwrap().id.unwrap();
    assert_eq!(
        live.until_turn_stop().await.last().unwrap().id,
        Some(second_stop)
    );
    assert_eq!(app.get(&path, &token).await.body["agent"]["version"], 1);

    let moved = app
        .patch(&path, &token, json!({"agent": {"version": 2}}))
        .await;
    assert_eq!(moved.status, StatusCode::OK, "{}", moved.text);
    let change = live.next().await.expect("the move, live");
    assert_eq!(change.event, "agent_version_change");
    assert_eq!(change.data, json!({"agent": "helper", "from": 1, "to": 2}));
    assert_eq!(change.id, Some(second_stop + 1), "the next seq of the log");

    assert_eq!(prompt_of_turn(&app, &token, &session, &server).await, "two");
    let third = live.until_turn_stop().await;
    assert_eq!(third[0].event, "turn_start");
    assert_eq!(
        third[0].id,
        Some(second_stop + 2),
        "the next turn follows it"
    );

    // Replayed from the log, in delta and in message mode, between the turns.
    for mode in ["delta", "message"] {
        let mut replay = app
            .stream(&format!("{events}?stream={mode}"), &token, Some(first_stop))
            .await;
        let before = replay.until_turn_stop().await;
        assert_eq!(before.last().unwrap().id, Some(second_stop), "{mode}");
        let replayed = replay.next().await.expect("the move, replayed");
        assert_eq!(replayed, change, "{mode}");
        assert_eq!(replay.next().await.unwrap().event, "turn_start", "{mode}");
    }
    let resumed = app
        .stream(&events, &token, Some(second_stop))
        .await
        .next()
        .await
        .unwrap();
    assert_eq!(resumed, change, "a cursor just before it gets it first");

    // No turn has it: not the turns' streams, not their logs.
    let turns = app.get(&format!("/sessions/{session}/turns"), &token).await;
    let turns = turns.body["turns"].as_array().unwrap().clone();
    assert_eq!(turns.len(), 3, "the move is no turn");
    for turn in &turns {
        let turn = turn["turnId"].as_str().unwrap();
        let frames = app
            .stream(
                &format!("/sessions/{session}/turns/{turn}/events"),
                &token,
                None,
            )
            .await
            .collect()
            .await;
        assert!(
            frames.iter().all(|f| f.event != "agent_version_change"),
            "{frames:?}"
        );
        let log = app
            .get(&format!("/sessions/{session}/turns/{turn}/log"), &token)
            .await;
        assert!(!log.text.contains("agent_version_change"), "{}", log.text);
    }
}

/// A configured agent limited to some tenants and named as the default of A2A and of
/// AgentScope is the default for those tenants only: the public A2A card and another
/// tenant's AgentScope requests get the first agent they see instead, never naming it.
#[tokio::test]
async fn a_limited_default_agent_is_nobody_elses_default() {
    let app = spawn_app_on(Arc::new(TestDb::new().await), "").await;
    let (a, a_token) = app.new_tenant().await;
    let (_, b_token) = app.new_tenant().await;
    let db = app.stop().await;
    let config = format!(
        "[[agents]]\nname = \"vip\"\nprovider = \"echo\"\ntenants = [\"{a}\"]\n\n\
         [[agents]]\nname = \"echo\"\nprovider = \"echo\"\n\n\
         [a2a]\ndefault_agent = \"vip\"\n\n[agentscope]\ndefault_agent = \"vip\"\n"
    );
    let app = spawn_app_on(db, &config).await;

    let card = app
        .request(Method::GET, "/.well-known/agent-card.json", None, None)
        .await;
    assert_eq!(card.status, StatusCode::OK, "{}", card.text);
    assert_eq!(card.body["name"], "echo", "{}", card.text);
    assert!(!card.text.contains("vip"), "{}", card.text);

    let agent_of = |reply: &crate::helpers::Reply| {
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
        reply.body["session_id"].as_str().unwrap().to_owned()
    };
    let body = json!({"input": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
                      "stream": false});
    let b_reply = app
        .post("/agentscope/process", &b_token, body.clone())
        .await;
    assert!(!b_reply.text.contains("vip"), "{}", b_reply.text);
    let b_session = agent_of(&b_reply);
    let b_read = app.get(&format!("/sessions/{b_session}"), &b_token).await;
    assert_eq!(b_read.body["agent"]["name"], "echo", "{}", b_read.text);
    let a_session = agent_of(&app.post("/agentscope/process", &a_token, body).await);
    let a_read = app.get(&format!("/sessions/{a_session}"), &a_token).await;
    assert_eq!(a_read.body["agent"]["name"], "vip", "{}", a_read.text);
}

/// `agentry config check --config FILE`: whether it passed, and what it printed.
fn config_check(config: &str) -> (bool, String) {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), config).unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_agentry"))
        .args(["config", "check", "--config"])
        .arg(file.path())
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&output.stderr).into_owned()
        + &String::from_utf8_lossy(&output.stdout);
    (output.status.success(), printed)
}

/// An `[[agents]]` entry may name a `[[connections]]` entry in place of a provider: its
/// connection and model are checked by the code that checks a tenant agent's (the same
/// message for the same mistake), and it runs with the connection's URL and key.
#[tokio::test]
async fn a_configured_agent_on_a_connection_uses_the_operators_connection() {
    let server = ScriptedOpenAi::start().await;
    let app = app_with(&server).await;
    let (_, token) = app.new_tenant().await;
    let cases = [
        (
            "connection = \"nowhere\"",
            json!({"connection": "nowhere"}),
            "agents[1].connection",
            "/connection",
        ),
        (
            "connection = \"scripted\"\nmodel = \"m9\"",
            json!({"connection": "scripted", "model": "m9"}),
            "agents[1].model",
            "/model",
        ),
    ];
    for (toml, body, key, pointer) in cases {
        let (passed, printed) = config_check(&format!(
            "{}\n[[agents]]\nname = \"echo\"\nprovider = \"echo\"\n\n\
             [[agents]]\nname = \"bad\"\n{toml}\n",
            connections(&server)
        ));
        assert!(!passed, "{toml}: {printed}");
        let prefix = format!("invalid configuration at `{key}`: ");
        let start = printed
            .find(&prefix)
            .unwrap_or_else(|| panic!("{toml}: {printed}"));
        let message = printed[start + prefix.len()..]
            .lines()
            .next()
            .unwrap()
            .trim();
        let mut body = body;
        body["name"] = json!("bad");
        let reply = app.post("/agents", &token, body).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.text);
        assert_eq!(reply.body["error"]["field"], pointer, "{}", reply.text);
        assert_eq!(
            reply.body["error"]["message"],
            format!("{pointer}: {message}"),
            "{toml}"
        );
    }
    let (passed, printed) = config_check(&format!(
        "{}\n[[agents]]\nname = \"bad\"\nconnection = \"scripted\"\nmodel = \"m1\"\n\
         base_url = \"http://example.com/v1\"\n",
        connections(&server)
    ));
    assert!(!passed);
    assert!(
        printed.contains("invalid configuration at `agents[0].base_url`"),
        "{printed}"
    );

    let config = format!(
        "{}\n[[agents]]\nname = \"shared\"\nconnection = \"scripted\"\nmodel = \"m2\"\n\
         system_prompt = \"Shared.\"\n",
        connections(&server)
    );
    let (passed, printed) = config_check(&config);
    assert!(passed, "{printed}");
    let db = app.stop().await;
    let app = spawn_app_on(db, &config).await;
    assert!(app.get("/meta", &token).await.text.contains("\"shared\""));
    let session = app
        .create_session(&token, json!({"agent": {"name": "shared"}}))
        .await;
    assert_eq!(
        prompt_of_turn(&app, &token, &session, &server).await,
        "Shared."
    );
    let sent = server.requests().last().unwrap().clone();
    assert_eq!(sent.body["model"], "m2");
    assert_eq!(
        sent.authorization.as_deref(),
        Some("Bearer sk-operator-secret")
    );
}
