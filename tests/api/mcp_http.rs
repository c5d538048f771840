//! An MCP server over streamable HTTP, started by the test on loopback (rmcp's own server
//! side): agentry connects to its URL with the configured headers and calls its tool.

use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{RoleServer, ServerHandler};
use serde_json::{Value, json};

use crate::helpers::{TestDb, spawn_app_on, user};
use crate::scripted::{Reply, ScriptedOpenAi, finish, text, tool_fragment};

/// One tool, `whoami`: answers with the `Authorization` header of the request.
#[derive(Clone)]
struct Greeter;

impl ServerHandler for Greeter {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let schema = json!({"type": "object", "properties": {"greeting": {"type": "string"}}, "required": ["greeting"]});
        let Value::Object(schema) = schema else {
            unreachable!()
        };
        Ok(ListToolsResult::with_all_items(vec![Tool::new(
            "whoami",
            "Says who is asking.",
            schema,
        )]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let who = context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.headers.get("authorization"))
            .and_then(|v| v.to_str().ok())
            .unwrap_or("nobody")
            .to_owned();
        let greeting = request
            .arguments
            .and_then(|a| a.get("greeting").and_then(Value::as_str).map(str::to_owned))
            .unwrap_or_default();
        Ok(CallToolResult::success(vec![ContentBlock::text(format!("{greeting}, {who}"))]).into())
    }
}

/// Serves the MCP endpoint at `http://127.0.0.1:<port>/mcp`.
async fn start_server() -> String {
    let service = StreamableHttpService::new(
        || Ok(Greeter),
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
async fn an_http_mcp_server_is_reached_with_its_headers_and_its_tool_called() {
    let mcp_url = start_server().await;
    let model = ScriptedOpenAi::start().await;
    let config = format!(
        r#"
[[mcp_servers]]
name = "web"
url = "{mcp_url}"
headers = {{ Authorization = "Bearer agentry-test" }}

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
    let app = spawn_app_on(std::sync::Arc::new(TestDb::new().await), &config).await;
    assert!(
        app.state
            .mcp()
            .wait_for("web", Duration::from_secs(30), |tools| tools.is_some())
            .await,
        "the HTTP server connects"
    );
    let meta = app.get("/meta", &app.admin_token).await;
    assert_eq!(meta.body["agents"][0]["tools"][0]["name"], "web.whoami");

    let (_, token) = app.new_tenant().await;
    let session = app
        .create_session(
            &token,
            json!({"agent": {"name": "gpt", "tools": [{"name": "web.whoami", "trust": true}]}}),
        )
        .await;
    model.push(Reply::Stream(vec![
        tool_fragment(
            0,
            Some("c1"),
            Some("web_whoami"),
            r#"{"greeting": "Hello"}"#,
        ),
        finish("tool_calls"),
    ]));
    model.push(Reply::Stream(vec![text("Done."), finish("stop")]));
    let reply = app
        .post(
            &format!("/sessions/{session}/turns"),
            &token,
            json!({"messages": [user("who am I?")]}),
        )
        .await;
    assert_eq!(reply.body["stopReason"], "end_turn", "{}", reply.text);
    assert_eq!(
        reply.body["messages"][1],
        json!({"role": "tool", "toolCallId": "c1", "content": "Hello, Bearer agentry-test"})
    );
}
