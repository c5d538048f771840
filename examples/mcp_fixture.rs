//! A small MCP server on stdio, for agentry's tests: `add` (two numbers), `echo`, `count`
//! (a `label`; appends a line to the file named by `MCP_FIXTURE_COUNT_FILE`, so a test can
//! tell how often it ran), `fail` (an error result), and `grow` (adds a tool `extra` and says the list
//! changed), `env` (the names of its environment variables), `sleep` (answers after `seconds`). It writes its process id to `MCP_FIXTURE_PID_FILE` when that is set, and with
//! `MCP_FIXTURE_GRANDCHILD_PID_FILE` starts a `sleep` of its own and writes that one's.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData,
    Implementation, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
    Tool,
};
use rmcp::service::RequestContext;
use rmcp::{RoleServer, ServerHandler, ServiceExt};
use serde_json::{Map, Value, json};

#[derive(Default)]
struct Fixture {
    grown: AtomicBool,
}

fn schema(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => unreachable!("schemas are objects"),
    }
}

impl Fixture {
    fn tools(&self) -> Vec<Tool> {
        let mut tools = vec![
            Tool::new(
                "add",
                "Adds two numbers.",
                schema(json!({
                    "type": "object",
                    "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                    "required": ["a", "b"],
                    "additionalProperties": false
                })),
            ),
            Tool::new(
                "echo",
                "Says the text back.",
                schema(json!({
                    "type": "object",
                    "properties": {"text": {"type": "string"}},
                    "required": ["text"]
                })),
            ),
            Tool::new(
                "count",
                "Counts its calls.",
                schema(json!({
                    "type": "object",
                    "properties": {"label": {"type": "string"}},
                    "required": ["label"]
                })),
            ),
            Tool::new(
                "fail",
                "Always fails.",
                schema(json!({"type": "object", "properties": {}})),
            ),
            Tool::new(
                "grow",
                "Adds the tool `extra`.",
                schema(json!({"type": "object", "properties": {}})),
            ),
            Tool::new(
                "env",
                "Names the environment variables it was started with.",
                schema(json!({"type": "object", "properties": {}})),
            ),
            Tool::new(
                "sleep",
                "Answers after `seconds`.",
                schema(json!({
                    "type": "object",
                    "properties": {"seconds": {"type": "number"}},
                    "required": ["seconds"]
                })),
            ),
        ];
        if self.grown.load(Ordering::Acquire) {
            tools.push(Tool::new(
                "extra",
                "Exists after `grow`.",
                schema(json!({"type": "object", "properties": {}})),
            ));
        }
        tools
    }
}

fn text(text: impl Into<String>) -> CallToolResponse {
    CallToolResult::success(vec![ContentBlock::text(text)]).into()
}

impl ServerHandler for Fixture {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new("mcp-fixture", "1.0.0"))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = request.arguments.unwrap_or_default();
        match request.name.as_ref() {
            "add" => {
                let number = |key: &str| arguments.get(key).and_then(Value::as_f64).unwrap_or(0.0);
                Ok(text(format!("{}", number("a") + number("b"))))
            }
            "echo" => Ok(text(
                arguments
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or_default(),
            )),
            "count" => {
                let path = std::env::var("MCP_FIXTURE_COUNT_FILE").unwrap_or_default();
                let mut file = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&path)
                    .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
                writeln!(file, "called")
                    .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
                let calls = std::fs::read_to_string(&path)
                    .unwrap_or_default()
                    .lines()
                    .count();
                Ok(text(format!("counted {calls}")))
            }
            "fail" => Ok(CallToolResult::error(vec![ContentBlock::text("something broke")]).into()),
            "grow" => {
                self.grown.store(true, Ordering::Release);
                let _ = context.peer.notify_tool_list_changed().await;
                Ok(text("grown"))
            }
            "extra" if self.grown.load(Ordering::Acquire) => Ok(text("extra!")),
            "env" => {
                let mut names: Vec<String> = std::env::vars_os()
                    .map(|(name, _)| name.to_string_lossy().into_owned())
                    .collect();
                names.sort();
                Ok(text(names.join(" ")))
            }
            "sleep" => {
                let seconds = arguments
                    .get("seconds")
                    .and_then(Value::as_f64)
                    .unwrap_or(0.0);
                tokio::time::sleep(std::time::Duration::from_secs_f64(seconds)).await;
                Ok(text("awake"))
            }
            other => Err(ErrorData::invalid_params(
                format!("no tool `{other}`"),
                None,
            )),
        }
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    if let Ok(path) = std::env::var("MCP_FIXTURE_PID_FILE") {
        std::fs::write(path, std::process::id().to_string()).expect("the pid file is writable");
    }
    // A program of its own that outlives it unless its whole process group is stopped.
    let _grandchild = match std::env::var("MCP_FIXTURE_GRANDCHILD_PID_FILE") {
        Ok(path) => {
            let child = std::process::Command::new("sleep")
                .arg("600")
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .expect("sleep starts");
            std::fs::write(path, child.id().to_string()).expect("the pid file is writable");
            Some(child)
        }
        Err(_) => None,
    };
    let running = Fixture::default()
        .serve(rmcp::transport::stdio())
        .await
        .expect("the MCP handshake");
    let _ = running.waiting().await;
}
