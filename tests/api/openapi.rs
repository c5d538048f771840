//! `GET /openapi.json` describes every route of `src/http/mod.rs` (read from its text, not
//! from the document), real responses match the schemas it gives, and `GET /docs` works
//! with nothing but this server.

use std::collections::BTreeSet;
use std::sync::Arc;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::helpers::{Reply, TestApp, TestDb, spawn_app, spawn_app_on, user};

const METHODS: [&str; 5] = ["get", "post", "put", "patch", "delete"];

/// The (method, path template) pairs `http::configure` registers, parsed from its source:
/// `web::scope("…")` prefixes the resources chained on it, `web::resource("…")` (or
/// `acp_resource("…")`) opens a resource, and `.get(`, `.post(`, … add its methods.
fn registered_routes() -> BTreeSet<(String, String)> {
    let source = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/http/mod.rs"))
        .expect("src/http/mod.rs is readable");
    let start = source
        .find("pub fn configure(")
        .expect("http::configure exists");
    let body = &source[start..];
    let end = body.find("\n}\n").expect("configure ends");
    let body = &body[..end];
    assert!(
        !body.contains(".route("),
        "this parser reads resources and their methods; teach it `.route(` before using it"
    );

    let mut routes = BTreeSet::new();
    let mut scopes: Vec<(String, usize)> = Vec::new();
    let mut resource: Option<String> = None;
    let mut depth = 0usize;
    let bytes = body.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let rest = &body[i..];
        let literal_after = |prefix: &str| -> Option<String> {
            // rustfmt puts a long path on a line of its own.
            let tail = rest.strip_prefix(prefix)?.trim_start();
            let tail = tail.strip_prefix('"')?;
            Some(tail[..tail.find('"')?].to_owned())
        };
        if let Some(prefix) = literal_after("web::scope(") {
            // What the scope serves is chained inside the parentheses it is an argument of.
            scopes.push((prefix, depth));
        } else if let Some(path) =
            literal_after("web::resource(").or_else(|| literal_after("acp_resource("))
        {
            let prefix: String = scopes.iter().map(|(p, _)| p.as_str()).collect();
            resource = Some(format!("{prefix}{path}"));
        } else if let Some(method) = METHODS.iter().find(|m| rest.starts_with(&format!(".{m}("))) {
            let path = resource
                .clone()
                .unwrap_or_else(|| panic!("`.{method}(` outside a resource"));
            routes.insert((method.to_string(), path));
        }
        match bytes[i] {
            b'(' => depth += 1,
            b')' => {
                depth -= 1;
                while scopes.last().is_some_and(|(_, at)| *at > depth) {
                    scopes.pop();
                }
            }
            _ => {}
        }
        i += 1;
    }
    routes
}

fn described_routes(document: &Value) -> BTreeSet<(String, String)> {
    document["paths"]
        .as_object()
        .expect("paths")
        .iter()
        .flat_map(|(path, item)| {
            METHODS
                .iter()
                .filter(|m| item.get(**m).is_some())
                .map(|m| (m.to_string(), path.clone()))
        })
        .collect()
}

pub async fn document(app: &TestApp) -> Value {
    let reply = app.request(Method::GET, "/openapi.json", None, None).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    assert!(
        reply.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/json")
    );
    reply.body
}

#[tokio::test]
async fn every_registered_route_is_described_and_nothing_else() {
    let app = spawn_app().await;
    let document = document(&app).await;
    let registered = registered_routes();
    assert!(
        registered.len() > 40,
        "the parser found too few routes: {registered:?}"
    );
    assert!(registered.contains(&("post".into(), "/acp/runs/{run_id}".into())));
    assert!(registered.contains(&("get".into(), "/admin/tenants/{tenant_id}/usage".into())));
    let described = described_routes(&document);
    let undescribed: Vec<_> = registered.difference(&described).collect();
    assert!(
        undescribed.is_empty(),
        "routes registered in src/http/mod.rs but missing from /openapi.json: {undescribed:?}"
    );
    let unregistered: Vec<_> = described.difference(&registered).collect();
    assert!(
        unregistered.is_empty(),
        "operations in /openapi.json that src/http/mod.rs does not register: {unregistered:?}"
    );
    let ids: Vec<&str> = described
        .iter()
        .map(|(m, p)| document["paths"][p][m]["operationId"].as_str().unwrap())
        .collect();
    let unique: BTreeSet<&str> = ids.iter().copied().collect();
    assert_eq!(unique.len(), ids.len(), "operation ids repeat: {ids:?}");
}

fn operation<'a>(document: &'a Value, method: &str, path: &str) -> &'a Value {
    let operation = &document["paths"][path][method];
    assert!(operation.is_object(), "{method} {path} is not described");
    operation
}

fn security(operation: &Value) -> Vec<String> {
    operation["security"]
        .as_array()
        .map(|requirements| {
            requirements
                .iter()
                .map(|r| {
                    r.as_object()
                        .unwrap()
                        .keys()
                        .cloned()
                        .collect::<Vec<_>>()
                        .join("+")
                })
                .collect()
        })
        .unwrap_or_default()
}

fn parameter_names(operation: &Value, place: &str) -> Vec<String> {
    operation["parameters"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["in"] == place)
        .map(|p| p["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn the_document_names_who_may_call_each_route_and_the_headers_it_uses() {
    let app = spawn_app().await;
    let document = document(&app).await;
    assert_eq!(document["openapi"], "3.1.0");
    for scheme in ["tenant", "admin", "metrics"] {
        let scheme = &document["components"]["securitySchemes"][scheme];
        assert_eq!(scheme["type"], "http");
        assert_eq!(scheme["scheme"], "bearer");
    }

    for (method, path) in described_routes(&document) {
        let op = operation(&document, &method, &path);
        let needs = security(op);
        let public = [
            "/",
            "/docs/",
            "/healthz",
            "/readyz",
            "/auth/token",
            "/openapi.json",
            "/docs",
            "/docs/{asset}",
            "/agentscope/health",
            "/.well-known/agent-card.json",
            "/a2a/{agent}/.well-known/agent-card.json",
        ];
        if public.contains(&path.as_str()) {
            assert!(needs.is_empty(), "{method} {path} is public: {needs:?}");
        } else if path == "/meta" {
            assert!(needs.contains(&String::new()) && needs.contains(&"tenant".to_owned()));
        } else if path == "/metrics" {
            // Open unless the operator set metrics.bearer_token.
            assert_eq!(needs, ["", "metrics"], "{method} {path}");
            assert!(op["responses"]["401"]["headers"]["WWW-Authenticate"].is_object());
            assert!(op["responses"]["200"]["content"]["text/plain; version=0.0.4"].is_object());
            continue;
        } else if path.starts_with("/admin/") {
            assert_eq!(needs, ["admin"], "{method} {path}");
        } else {
            assert_eq!(needs, ["tenant"], "{method} {path}");
        }
        if !needs.is_empty() && path != "/meta" {
            for status in ["401", "403"] {
                let schema =
                    op["responses"][status]["content"]["application/json"]["schema"]["$ref"]
                        .as_str()
                        .unwrap_or_else(|| panic!("{method} {path} documents no {status}"));
                let expected = if path.starts_with("/acp/") {
                    "AcpError"
                } else if path.starts_with("/a2a/") {
                    "A2aStatus"
                } else {
                    "ErrorBody"
                };
                assert!(
                    schema.ends_with(expected),
                    "{method} {path} {status}: {schema}"
                );
            }
        }
    }

    let post_turn = operation(&document, "post", "/sessions/{session_id}/turns");
    assert_eq!(parameter_names(post_turn, "header"), ["Idempotency-Key"]);
    let create_response = operation(&document, "post", "/v1/responses");
    assert_eq!(
        parameter_names(create_response, "header"),
        ["Idempotency-Key"]
    );
    assert!(create_response["responses"]["422"].is_object());
    let input_items = operation(&document, "get", "/v1/responses/{response_id}/input_items");
    for status in ["200", "400", "401", "403", "404", "429"] {
        assert!(
            input_items["responses"][status].is_object(),
            "input_items documents {status}"
        );
    }
    let ok = &post_turn["responses"]["200"];
    assert!(ok["headers"]["Agentry-Turn-Id"].is_object());
    assert!(
        ok["content"]["text/event-stream"]["schema"]["$ref"]
            .as_str()
            .unwrap()
            .ends_with("AapStream")
    );
    assert!(ok["content"]["application/json"].is_object());
    assert!(post_turn["responses"]["409"]["headers"]["Retry-After"].is_object());
    assert!(post_turn["responses"]["429"]["headers"]["Retry-After"].is_object());

    for (path, event) in [
        ("/sessions/{session_id}/events", "AapStream"),
        ("/sessions/{session_id}/turns/{turn_id}/events", "AapStream"),
        (
            "/agentscope/responses/{response_id}/events",
            "AgentScopeStream",
        ),
        ("/acp/runs/{run_id}/events", "AcpStream"),
    ] {
        let op = operation(&document, "get", path);
        assert_eq!(parameter_names(op, "header"), ["Last-Event-ID"], "{path}");
        assert!(
            parameter_names(op, "query").contains(&"after".to_owned()),
            "{path}"
        );
        let stream = &op["responses"]["200"]["content"]["text/event-stream"]["schema"];
        assert!(stream["$ref"].as_str().unwrap().ends_with(event), "{path}");
    }
    for (method, path) in [
        ("get", "/sessions"),
        ("get", "/sessions/{session_id}/turns"),
        ("get", "/sessions/{session_id}/history"),
        ("get", "/admin/tenants"),
    ] {
        let query = parameter_names(operation(&document, method, path), "query");
        assert!(
            query.contains(&"limit".to_owned()) && query.contains(&"after".to_owned()),
            "{path}: {query:?}"
        );
    }
    let login = operation(&document, "post", "/auth/token");
    assert!(login["requestBody"]["content"]["application/x-www-form-urlencoded"].is_object());
    assert!(login["responses"]["429"]["headers"]["Retry-After"].is_object());
}

/// Checks a reply against the schema the document gives for its operation and status.
pub fn check(document: &Value, method: &str, path: &str, reply: &Reply) {
    let response = &operation(document, method, path)["responses"][reply.status.as_str()];
    assert!(
        response.is_object(),
        "{method} {path} answered {} which is not documented: {}",
        reply.status,
        reply.text
    );
    let content_type = reply.headers.get("content-type").map(|v| {
        v.to_str()
            .unwrap()
            .split(';')
            .next()
            .unwrap()
            .trim()
            .to_owned()
    });
    let Some(content_type) = content_type else {
        assert!(
            response["content"].is_null(),
            "{method} {path} {}: a body was documented",
            reply.status
        );
        return;
    };
    let schema = &response["content"][&content_type]["schema"];
    assert!(
        !schema.is_null(),
        "{method} {path} {}: {content_type} is not documented",
        reply.status
    );
    validate(
        document,
        schema,
        &reply.body,
        &format!("{method} {path} {}", reply.status),
    );
}

fn validate(document: &Value, schema: &Value, instance: &Value, what: &str) {
    let mut root = schema.clone();
    root["components"] = document["components"].clone();
    let validator = jsonschema::validator_for(&root).expect("the schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(instance)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "{what}: the body does not match its schema: {errors:?}\n{instance:#}"
    );
}

fn component(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

#[tokio::test]
async fn real_responses_match_the_documented_schemas() {
    let app = spawn_app().await;
    let document = document(&app).await;
    let admin = app.admin_token.clone();

    // administration
    let reply = app
        .post("/admin/tenants", &admin, json!({"name": "schema-check"}))
        .await;
    check(&document, "post", "/admin/tenants", &reply);
    let tenant = reply.body["id"].as_str().unwrap().to_owned();
    let tenant_path = format!("/admin/tenants/{tenant}");
    check(
        &document,
        "get",
        "/admin/tenants",
        &app.get("/admin/tenants?limit=1", &admin).await,
    );
    check(
        &document,
        "get",
        "/admin/tenants/{tenant_id}",
        &app.get(&tenant_path, &admin).await,
    );
    let reply = app
        .patch(&tenant_path, &admin, json!({"name": "schema-check-2"}))
        .await;
    check(&document, "patch", "/admin/tenants/{tenant_id}", &reply);
    let credentials = format!("{tenant_path}/credentials");
    let reply = app.post(&credentials, &admin, json!({"name": "ci"})).await;
    check(
        &document,
        "post",
        "/admin/tenants/{tenant_id}/credentials",
        &reply,
    );
    let (client_id, client_secret) = (
        reply.body["client_id"].as_str().unwrap().to_owned(),
        reply.body["client_secret"].as_str().unwrap().to_owned(),
    );
    check(
        &document,
        "get",
        "/admin/tenants/{tenant_id}/credentials",
        &app.get(&credentials, &admin).await,
    );
    let tokens = format!("{tenant_path}/tokens");
    let reply = app.post(&tokens, &admin, json!({"ttl_seconds": 600})).await;
    check(
        &document,
        "post",
        "/admin/tenants/{tenant_id}/tokens",
        &reply,
    );
    let token = reply.body["token"].as_str().unwrap().to_owned();
    check(
        &document,
        "get",
        "/admin/tenants/{tenant_id}/tokens",
        &app.get(&tokens, &admin).await,
    );
    let reply = app.get(&format!("{tenant_path}/usage"), &admin).await;
    check(&document, "get", "/admin/tenants/{tenant_id}/usage", &reply);
    let reply = app.get("/admin/tenants/ten_nothing", &admin).await;
    check(&document, "get", "/admin/tenants/{tenant_id}", &reply);
    let reply = app.get("/admin/tenants", &token).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN);
    check(&document, "get", "/admin/tenants", &reply);

    // authentication and operations
    let reply = app
        .request(
            Method::POST,
            "/auth/token",
            None,
            Some(&json!({"client_id": client_id, "client_secret": client_secret})),
        )
        .await;
    check(&document, "post", "/auth/token", &reply);
    let reply = app
        .request(
            Method::POST,
            "/auth/token",
            None,
            Some(&json!({"client_id": client_id, "client_secret": "wrong"})),
        )
        .await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
    check(&document, "post", "/auth/token", &reply);
    for path in ["/healthz", "/readyz", "/agentscope/health"] {
        check(
            &document,
            "get",
            path,
            &app.request(Method::GET, path, None, None).await,
        );
    }

    // AAP
    check(
        &document,
        "get",
        "/meta",
        &app.request(Method::GET, "/meta", None, None).await,
    );
    let reply = app
        .post(
            "/sessions",
            &token,
            json!({"agent": {"name": "echo", "options": {"style": "upper"}}}),
        )
        .await;
    check(&document, "post", "/sessions", &reply);
    let session = reply.body["sessionId"].as_str().unwrap().to_owned();
    let reply = app.get("/sessions", "not-a-token").await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
    check(&document, "get", "/sessions", &reply);
    let turns = format!("/sessions/{session}/turns");
    let reply = app
        .post(
            &turns,
            &token,
            json!({"stream": "none", "messages": [{"role": "user", "content": "hello"}]}),
        )
        .await;
    check(&document, "post", "/sessions/{session_id}/turns", &reply);
    let reply = app
        .post(
            &turns,
            &token,
            json!({"stream": "none", "messages": [{"role": "system"}]}),
        )
        .await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    check(&document, "post", "/sessions/{session_id}/turns", &reply);
    let mut stream = app
        .stream_turn(
            &token,
            &session,
            json!({"stream": "delta", "messages": [{"role": "user", "content": "again"}]}),
        )
        .await;
    let frames = stream.until_turn_stop().await;
    assert!(frames.len() >= 3, "{frames:?}");
    // An event is `{event, id, data}` with `data` a JSON text of the event's `contentSchema`.
    let events = document["components"]["schemas"]["AapStream"]["oneOf"]
        .as_array()
        .unwrap();
    for frame in &frames {
        let described = events
            .iter()
            .find(|e| e["properties"]["event"]["enum"][0] == frame.event.as_str())
            .unwrap_or_else(|| panic!("the AAP event `{}` is not described", frame.event));
        let id = frame.id.unwrap().to_string();
        let event = json!({"event": frame.event, "id": id, "data": frame.data.to_string()});
        validate(&document, &component("AapStream"), &event, "an AAP event");
        let payload = &described["properties"]["data"]["contentSchema"];
        validate(
            &document,
            payload,
            &frame.data,
            &format!("the data of `{}`", frame.event),
        );
    }
    check(
        &document,
        "get",
        "/sessions",
        &app.get("/sessions?limit=5", &token).await,
    );
    let reply = app.get(&turns, &token).await;
    check(&document, "get", "/sessions/{session_id}/turns", &reply);
    let turn = reply.body["turns"][0]["turnId"]
        .as_str()
        .unwrap()
        .to_owned();
    let reply = app.get(&format!("{turns}/{turn}"), &token).await;
    check(
        &document,
        "get",
        "/sessions/{session_id}/turns/{turn_id}",
        &reply,
    );
    let reply = app
        .post(&format!("{turns}/{turn}/cancel"), &token, json!({}))
        .await;
    check(
        &document,
        "post",
        "/sessions/{session_id}/turns/{turn_id}/cancel",
        &reply,
    );
    let reply = app.get(&format!("/sessions/{session}"), &token).await;
    check(&document, "get", "/sessions/{session_id}", &reply);
    let reply = app
        .get(
            &format!("/sessions/{session}/history?type=full&limit=1"),
            &token,
        )
        .await;
    check(&document, "get", "/sessions/{session_id}/history", &reply);
    let reply = app
        .get(&format!("/sessions/{session}/history"), &token)
        .await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    check(&document, "get", "/sessions/{session_id}/history", &reply);
    let reply = app.get(&format!("/sessions/{session}/parts"), &token).await;
    check(&document, "get", "/sessions/{session_id}/parts", &reply);
    let reply = app.get("/sessions/sess_missing/turns", &token).await;
    check(&document, "get", "/sessions/{session_id}/turns", &reply);

    // AgentScope
    let reply = app
        .post(
            "/agentscope/process",
            &token,
            json!({"input": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
                   "stream": false, "session_id": "schema-check"}),
        )
        .await;
    check(&document, "post", "/agentscope/process", &reply);
    let reply = app
        .get("/agentscope/sessions/schema-check/messages", &token)
        .await;
    check(
        &document,
        "get",
        "/agentscope/sessions/{session_id}/messages",
        &reply,
    );
    let reply = app
        .post(
            "/agentscope/agents/nobody/process",
            &token,
            json!({"input": [], "stream": false}),
        )
        .await;
    check(
        &document,
        "post",
        "/agentscope/agents/{agent}/process",
        &reply,
    );
    let reply = app
        .client
        .post(app.url("/agentscope/process"))
        .bearer_auth(&token)
        .body("{not json")
        .send()
        .await
        .unwrap();
    let status = reply.status();
    let headers = reply.headers().clone();
    let text = reply.text().await.unwrap();
    let reply = Reply {
        status,
        headers,
        body: serde_json::from_str(&text).unwrap(),
        text,
    };
    assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY);
    check(&document, "post", "/agentscope/process", &reply);

    // ACP
    check(
        &document,
        "get",
        "/acp/ping",
        &app.get("/acp/ping", &token).await,
    );
    check(
        &document,
        "get",
        "/acp/agents",
        &app.get("/acp/agents", &token).await,
    );
    check(
        &document,
        "get",
        "/acp/agents/{name}",
        &app.get("/acp/agents/echo", &token).await,
    );
    check(
        &document,
        "get",
        "/acp/agents/{name}",
        &app.get("/acp/agents/nobody", &token).await,
    );
    let reply = app
        .post(
            "/acp/runs",
            &token,
            json!({"agent_name": "echo", "input": [{"role": "user", "parts": [
                {"content_type": "text/plain", "content": "hello"}]}]}),
        )
        .await;
    check(&document, "post", "/acp/runs", &reply);
    let run = reply.body["run_id"].as_str().unwrap().to_owned();
    let acp_session = reply.body["session_id"].as_str().unwrap().to_owned();
    check(
        &document,
        "get",
        "/acp/runs/{run_id}",
        &app.get(&format!("/acp/runs/{run}"), &token).await,
    );
    let reply = app.get(&format!("/acp/runs/{run}/events"), &token).await;
    check(&document, "get", "/acp/runs/{run_id}/events", &reply);
    let reply = app
        .post(&format!("/acp/runs/{run}/cancel"), &token, json!({}))
        .await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN);
    check(&document, "post", "/acp/runs/{run_id}/cancel", &reply);
    let reply = app
        .post(
            &format!("/acp/runs/{run}"),
            &token,
            json!({"await_resume": {"message": {"parts": []}}}),
        )
        .await;
    check(&document, "post", "/acp/runs/{run_id}", &reply);
    let reply = app
        .get(&format!("/acp/sessions/{acp_session}"), &token)
        .await;
    check(&document, "get", "/acp/sessions/{session_id}", &reply);
    let reply = app
        .get(&format!("/acp/sessions/{acp_session}/history/0"), &token)
        .await;
    check(
        &document,
        "get",
        "/acp/sessions/{session_id}/history/{position}",
        &reply,
    );
    let reply = app.get("/acp/agents", "not-a-token").await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
    check(&document, "get", "/acp/agents", &reply);

    // deletions last
    let reply = app.delete(&format!("/sessions/{session}"), &token).await;
    check(&document, "delete", "/sessions/{session_id}", &reply);
    let reply = app.delete(&format!("{tokens}/tok_nothing"), &admin).await;
    check(
        &document,
        "delete",
        "/admin/tenants/{tenant_id}/tokens/{jti}",
        &reply,
    );
    let reply = app
        .delete(&format!("{credentials}/{client_id}"), &admin)
        .await;
    check(
        &document,
        "delete",
        "/admin/tenants/{tenant_id}/credentials/{client_id}",
        &reply,
    );
    check(
        &document,
        "delete",
        "/admin/tenants/{tenant_id}",
        &app.delete(&tenant_path, &admin).await,
    );
}

/// The `src` and `href` values of a page's tags.
fn references(html: &str) -> Vec<String> {
    let mut found = Vec::new();
    for attribute in ["src=\"", "href=\""] {
        let mut rest = html;
        while let Some(at) = rest.find(attribute) {
            let value = &rest[at + attribute.len()..];
            let end = value.find('"').expect("a closed attribute");
            found.push(value[..end].to_owned());
            rest = &value[end..];
        }
    }
    found
}

#[tokio::test]
async fn the_docs_page_loads_everything_from_this_server() {
    let app = spawn_app().await;
    let page = app.request(Method::GET, "/docs", None, None).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(
        page.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    let references = references(&page.text);
    assert!(
        references.iter().any(|r| r.ends_with(".js"))
            && references.iter().any(|r| r.ends_with(".css")),
        "{references:?}"
    );
    let base = reqwest::Url::parse(&app.url("/docs")).unwrap();
    let mut texts = vec![("/docs".to_owned(), page.text.clone())];
    for reference in &references {
        let url = base.join(reference).unwrap();
        assert_eq!(
            url.origin(),
            base.origin(),
            "/docs references {reference}, which is not on this server"
        );
        let response = app.client.get(url.clone()).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{url}");
        texts.push((url.path().to_owned(), response.text().await.unwrap()));
    }
    // The script loads the document relative to the page.
    let script = &texts
        .iter()
        .find(|(path, _)| path.ends_with(".js"))
        .unwrap()
        .1;
    assert!(script.contains("fetch(\"openapi.json\")"));
    assert_eq!(base.join("openapi.json").unwrap().path(), "/openapi.json");
    for (path, text) in &texts {
        for scheme in ["http://", "https://", "//cdn", "url("] {
            assert!(!text.contains(scheme), "{path} references `{scheme}…`");
        }
    }
    let missing = app
        .request(Method::GET, "/docs/nothing.js", None, None)
        .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert_eq!(missing.code(), "not_found");
}

#[tokio::test]
async fn webhook_responses_match_the_documented_schemas() {
    // Loopback targets allowed; nothing listens on the discard port, so deliveries wait.
    let app = spawn_app_on(
        Arc::new(TestDb::new().await),
        "[webhooks]\nallow_http = true\nallow_targets = [\"127.0.0.1\"]\n",
    )
    .await;
    let document = document(&app).await;
    let admin = app.admin_token.clone();
    let (tenant, token) = app.new_tenant().await;
    let url = "http://127.0.0.1:9/hook";

    // the tenant's routes
    let reply = app
        .post(
            "/webhooks",
            &token,
            json!({"url": url, "description": "schema check", "event_types": ["turn.completed"]}),
        )
        .await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text);
    check(&document, "post", "/webhooks", &reply);
    let endpoint = reply.body["id"].as_str().unwrap().to_owned();
    for refused in [
        json!({"url": "ftp://127.0.0.1/hook"}),
        json!({"url": url, "event_types": []}),
        json!({"url": url, "event_types": ["turn.exploded"]}),
        json!({"url": url, "secret": "mine"}),
    ] {
        let reply = app.post("/webhooks", &token, refused).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.text);
        check(&document, "post", "/webhooks", &reply);
    }
    let reply = app.get("/webhooks?limit=1", &token).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    check(&document, "get", "/webhooks", &reply);
    let reply = app.get("/webhooks?after=nonsense", &token).await;
    check(&document, "get", "/webhooks", &reply);
    let path = format!("/webhooks/{endpoint}");
    let reply = app.get(&path, &token).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    check(&document, "get", "/webhooks/{endpoint_id}", &reply);
    let reply = app.get("/webhooks/wh_nothing", &token).await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND, "{}", reply.text);
    check(&document, "get", "/webhooks/{endpoint_id}", &reply);
    let reply = app
        .patch(&path, &token, json!({"description": null, "enabled": true}))
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    check(&document, "patch", "/webhooks/{endpoint_id}", &reply);
    let reply = app
        .patch(&path, &token, json!({"url": "http://10.0.0.1/hook"}))
        .await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.text);
    check(&document, "patch", "/webhooks/{endpoint_id}", &reply);
    let reply = app
        .post(&format!("{path}/rotate-secret"), &token, json!({}))
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    check(
        &document,
        "post",
        "/webhooks/{endpoint_id}/rotate-secret",
        &reply,
    );

    let session = app
        .create_session(&token, json!({"agent": {"name": "echo"}}))
        .await;
    let reply = app
        .post(
            &format!("/sessions/{session}/turns"),
            &token,
            json!({"stream": "none", "messages": [user("hello")]}),
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    let deliveries = format!("{path}/deliveries");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let message = loop {
        let reply = app.get(&deliveries, &token).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
        check(
            &document,
            "get",
            "/webhooks/{endpoint_id}/deliveries",
            &reply,
        );
        if let Some(id) = reply.body["deliveries"][0]["id"].as_str() {
            break id.to_owned();
        }
        assert!(std::time::Instant::now() < deadline, "no delivery");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    let replay = "/webhooks/{endpoint_id}/deliveries/{message_id}/replay";
    let reply = app
        .post(&format!("{deliveries}/{message}/replay"), &token, json!({}))
        .await;
    assert_eq!(reply.status, StatusCode::ACCEPTED, "{}", reply.text);
    check(&document, "post", replay, &reply);
    let reply = app
        .post(
            &format!("{deliveries}/msg_nothing/replay"),
            &token,
            json!({}),
        )
        .await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND, "{}", reply.text);
    check(&document, "post", replay, &reply);

    // the admin's routes, on the same endpoint
    let base = "/admin/tenants/{tenant_id}/webhooks";
    let admin_path = format!("/admin/tenants/{tenant}/webhooks/{endpoint}");
    let reply = app
        .get(&format!("/admin/tenants/{tenant}/webhooks"), &admin)
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    check(&document, "get", base, &reply);
    let reply = app.get("/admin/tenants/ten_nothing/webhooks", &admin).await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND, "{}", reply.text);
    check(&document, "get", base, &reply);
    let reply = app.get(&admin_path, &admin).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    check(&document, "get", &format!("{base}/{{endpoint_id}}"), &reply);
    let reply = app
        .patch(&admin_path, &admin, json!({"enabled": false}))
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    check(
        &document,
        "patch",
        &format!("{base}/{{endpoint_id}}"),
        &reply,
    );
    let reply = app
        .post(
            &format!("{admin_path}/deliveries/{message}/replay"),
            &admin,
            json!({}),
        )
        .await;
    assert_eq!(reply.status, StatusCode::CONFLICT, "{}", reply.text);
    check(
        &document,
        "post",
        &format!("{base}/{{endpoint_id}}/deliveries/{{message_id}}/replay"),
        &reply,
    );
    let reply = app
        .get(&format!("{admin_path}/deliveries?limit=1"), &admin)
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    check(
        &document,
        "get",
        &format!("{base}/{{endpoint_id}}/deliveries"),
        &reply,
    );
    let reply = app
        .post(&format!("{admin_path}/rotate-secret"), &admin, json!({}))
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    check(
        &document,
        "post",
        &format!("{base}/{{endpoint_id}}/rotate-secret"),
        &reply,
    );
    let reply = app
        .post(
            &format!("/admin/tenants/{tenant}/webhooks"),
            &admin,
            json!({"url": url}),
        )
        .await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text);
    check(&document, "post", base, &reply);
    let second = reply.body["id"].as_str().unwrap().to_owned();
    let reply = app
        .delete(
            &format!("/admin/tenants/{tenant}/webhooks/{second}"),
            &admin,
        )
        .await;
    assert_eq!(reply.status, StatusCode::NO_CONTENT, "{}", reply.text);
    check(
        &document,
        "delete",
        &format!("{base}/{{endpoint_id}}"),
        &reply,
    );

    let reply = app.delete(&path, &token).await;
    assert_eq!(reply.status, StatusCode::NO_CONTENT, "{}", reply.text);
    check(&document, "delete", "/webhooks/{endpoint_id}", &reply);
    let reply = app.delete(&path, &token).await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND, "{}", reply.text);
    check(&document, "delete", "/webhooks/{endpoint_id}", &reply);
}

#[tokio::test]
async fn the_root_sends_browsers_to_the_console_and_answers_clients_with_an_index() {
    let app = spawn_app().await;
    let no_redirects = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let browser = no_redirects
        .get(app.url("/"))
        .header("Accept", "text/html,application/xhtml+xml,*/*;q=0.8")
        .send()
        .await
        .unwrap();
    assert_eq!(browser.status(), StatusCode::SEE_OTHER);
    assert_eq!(browser.headers()["location"], "console/");
    let followed = app
        .client
        .get(app.url("/"))
        .header("Accept", "text/html")
        .send()
        .await
        .unwrap();
    assert_eq!(followed.status(), StatusCode::OK);
    assert!(
        followed.url().path().ends_with("/console/"),
        "{}",
        followed.url()
    );

    let index = app.request(Method::GET, "/", None, None).await;
    assert_eq!(index.status, StatusCode::OK, "{}", index.text);
    assert_eq!(index.body["name"], "agentry");
    for (key, path) in [
        ("console", "/console/"),
        ("docs", "/docs"),
        ("openapi", "/openapi.json"),
    ] {
        assert_eq!(index.body[key], path);
        let reached = app.client.get(app.url(path)).send().await.unwrap();
        assert_eq!(reached.status(), StatusCode::OK, "{path}");
    }
    assert_eq!(index.body["protocols"]["a2a"], "/a2a/{agent}");

    let without_console = spawn_app_on(
        Arc::new(TestDb::new().await),
        "[console]\nenabled = false\n",
    )
    .await;
    let browser = no_redirects
        .get(without_console.url("/"))
        .header("Accept", "text/html")
        .send()
        .await
        .unwrap();
    assert_eq!(browser.status(), StatusCode::SEE_OTHER);
    assert_eq!(browser.headers()["location"], "docs");
    let index = without_console.request(Method::GET, "/", None, None).await;
    assert_eq!(index.body["console"], Value::Null);
}

#[tokio::test]
async fn docs_with_a_trailing_slash_leads_to_the_page() {
    let app = spawn_app().await;
    let no_redirects = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let slash = no_redirects.get(app.url("/docs/")).send().await.unwrap();
    assert_eq!(slash.status(), StatusCode::PERMANENT_REDIRECT);
    assert_eq!(slash.headers()["location"], "../docs");
    let followed = app.client.get(app.url("/docs/")).send().await.unwrap();
    assert_eq!(followed.status(), StatusCode::OK);
    assert_eq!(followed.url().path(), "/docs");
    assert!(followed.text().await.unwrap().contains("docs/docs.js"));
}

#[tokio::test]
async fn the_description_names_every_face_and_describes_sessions_as_the_server_lists_them() {
    let app = spawn_app().await;
    let document = document(&app).await;
    let about = document["info"]["description"].as_str().unwrap();
    for face in ["AAP", "AgentScope", "ACP", "A2A"] {
        assert!(about.contains(face), "{face}: {about}");
    }
    for (method, path) in [("post", "/sessions"), ("get", "/sessions/{session_id}")] {
        let op = &document["paths"][path][method];
        let description = op["description"].as_str().unwrap_or_default();
        assert!(description.len() > 80, "{method} {path}: {op}");
    }
    for path in ["/sessions", "/sessions/{session_id}/turns"] {
        let op = document["paths"][path]["get"].to_string();
        assert!(op.contains("newest first"), "{path}: {op}");
    }
    assert!(!document.to_string().contains("oldest first, a page"));
}

/// The `/docs` page at `base` as Chromium leaves it once its script ran.
fn rendered_docs(base: &str) -> String {
    let chromium = "/usr/bin/chromium";
    assert!(
        std::path::Path::new(chromium).exists(),
        "{chromium} is missing: install Debian's chromium (apt-get install -y chromium)"
    );
    let output = std::process::Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--virtual-time-budget=10000",
            "--dump-dom",
        ])
        .arg(format!("{base}/docs"))
        .output()
        .expect("chromium runs");
    String::from_utf8(output.stdout).unwrap()
}

#[tokio::test]
async fn the_docs_page_shows_code_as_code_and_no_glyph_a_plain_font_lacks() {
    let app = spawn_app().await;
    let base = app.url("");
    let dom = tokio::task::spawn_blocking(move || rendered_docs(&base))
        .await
        .unwrap();
    assert!(
        dom.contains("<details class=\"op\""),
        "the page rendered: {dom}"
    );
    assert!(dom.contains("<code>/acp</code>"), "{dom}");
    assert!(dom.contains("<code>sess_…</code>"), "{dom}");
    // Every backtick of the document became a code span.
    let text: String = dom
        .split('<')
        .filter_map(|chunk| chunk.split_once('>').map(|(_, text)| text))
        .collect();
    assert!(!text.contains('`'), "a backtick shows: {dom}");
    // Nothing outside the Basic Multilingual Plane (emoji), which plain fonts lack.
    assert!(
        dom.chars().all(|c| u32::from(c) <= 0xFFFF),
        "an emoji in the page"
    );
}
