//! A tool call to an MCP server over streamable HTTP carries the tool span's trace context:
//! as the HTTP request's `traceparent` header and in the call's `_meta` (SEP-414).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData,
    ListToolsResult, PaginatedRequestParams, RequestParamsMeta, ServerCapabilities, ServerConfig,
    Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{RoleServer, ServerHandler};
use serde_json::{Value, json};

use crate::helpers::{TestDb, spawn_app_on, user};
use crate::receiver::receiver;
use crate::scripted::{Reply, ScriptedOpenAi, finish, text, tool_fragment};

/// What one `tools/call` carried: its HTTP `traceparent` header and its `_meta.traceparent`.
#[derive(Debug, Clone, Default)]
struct Call {
    header: Option<String>,
    meta: Option<String>,
}

/// One tool, `ping`, remembering what each call carried.
#[derive(Clone)]
struct Pinger {
    calls: Arc<Mutex<Vec<Call>>>,
}

impl ServerHandler for Pinger {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let Value::Object(schema) = json!({"type": "object", "properties": {}}) else {
            unreachable!()
        };
        Ok(ListToolsResult::with_all_items(vec![Tool::new(
            "ping",
            "Answers pong.",
            schema,
        )]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let header = context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.headers.get("traceparent"))
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        // rmcp hands a request's `_meta` to the handler in its context.
        let meta = request
            .traceparent()
            .or_else(|| context.meta.get_traceparent())
            .map(str::to_owned);
        self.calls.lock().unwrap().push(Call { header, meta });
        Ok(CallToolResult::success(vec![ContentBlock::text("pong")]).into())
    }
}

/// Serves the MCP endpoint at `http://127.0.0.1:<port>/mcp`.
async fn start_server(calls: Arc<Mutex<Vec<Call>>>) -> String {
    let service = StreamableHttpService::new(
        move || {
            Ok(Pinger {
                calls: calls.clone(),
            })
        },
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let service = TowerToHyperService::new(service.clone());
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    format!("http://127.0.0.1:{port}/mcp")
}

#[tokio::test]
async fn an_mcp_call_over_http_carries_the_tool_spans_traceparent() {
    let receiver = receiver();
    let calls = Arc::new(Mutex::new(Vec::new()));
    let mcp_url = start_server(calls.clone()).await;
    let model = ScriptedOpenAi::start().await;
    let config = format!(
        r#"
[[mcp_servers]]
name = "web"
url = "{mcp_url}"

[[agents]]
name = "gpt"
provider = "openai"
base_url = "{}"
model = "m"
max_retries = 0

[[agents.tools]]
name = "web.*"
"#,
        model.url
    );
    let app = spawn_app_on(Arc::new(TestDb::new().await), &config).await;
    assert!(
        app.state
            .mcp()
            .wait_for("web", Duration::from_secs(30), |tools| tools.is_some())
            .await,
        "the HTTP server connects"
    );
    let (_, token) = app.new_tenant().await;
    let session = app
        .create_session(
            &token,
            json!({"agent": {"name": "gpt", "tools": [{"name": "web.ping", "trust": true}]}}),
        )
        .await;
    model.push(Reply::Stream(vec![
        tool_fragment(0, Some("c1"), Some("web_ping"), "{}"),
        finish("tool_calls"),
    ]));
    model.push(Reply::Stream(vec![text("Done."), finish("stop")]));
    let trace = "5cf92f3577b34da6a3ce929d0e0e4736";
    let response = app
        .client
        .post(app.url(&format!("/sessions/{session}/turns")))
        .bearer_auth(&token)
        .header("traceparent", format!("00-{trace}-00f067aa0ba902b7-01"))
        .json(&json!({"messages": [user("ping it")]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["stopReason"], "end_turn", "{body}");
    assert_eq!(body["messages"][1]["content"], "pong", "{body}");

    let calls = calls.lock().unwrap().clone();
    assert_eq!(calls.len(), 1, "{calls:?}");
    let header = calls[0].header.clone().expect("a traceparent header");
    assert!(header.starts_with(&format!("00-{trace}-")), "{header}");
    assert_eq!(calls[0].meta.as_deref(), Some(header.as_str()));

    // It names the tool call's span, in the turn's trace.
    let tool = receiver
        .wait_for("the MCP tool's span", |spans| {
            spans
                .iter()
                .find(|s| s.trace_id == trace && s.name == "execute_tool web.ping")
                .cloned()
        })
        .await;
    assert_eq!(header, format!("00-{trace}-{}-01", tool.span_id));
    assert_eq!(tool.attr("agentry.mcp.server"), Some("web"));
}
