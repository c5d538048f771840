//! Tools from MCP servers: one supervisor task per configured server keeps a client
//! connected (reconnecting with backoff), keeps its tool list current, and calls its tools.
//! A server that is down has no tools; a call to it is answered with a result saying so.

mod connect;
mod group;
mod http;
mod result;
mod supervisor;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::model::{CallToolRequestParams, RequestParamsMeta};
use rmcp::service::Peer;
use serde_json::{Map, Value};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::McpServerSettings;

pub use result::result_text;

/// A tool an MCP server lists.
#[derive(Debug, Clone, PartialEq)]
pub struct McpTool {
    pub name: String,
    pub title: Option<String>,
    pub description: String,
    /// The JSON Schema of its arguments, as the server lists it.
    pub input_schema: Value,
    /// The same, compiled when the tool was listed.
    pub arguments: super::ArgumentSchema,
}

/// A connected server: its client and its latest tool list.
#[derive(Clone)]
struct Live {
    peer: Peer<RoleClient>,
    tools: Arc<Vec<McpTool>>,
}

struct Server {
    settings: McpServerSettings,
    live: RwLock<Option<Live>>,
    /// The tools listed now (`None` while down), for those who wait for a change.
    listed: watch::Sender<Option<Arc<Vec<McpTool>>>>,
}

impl Server {
    fn live(&self) -> Option<Live> {
        self.live.read().expect("MCP server lock").clone()
    }

    fn set_live(&self, live: Option<Live>) {
        let listed = live.as_ref().map(|l| l.tools.clone());
        *self.live.write().expect("MCP server lock") = live;
        self.listed.send_replace(listed);
    }

    fn set_tools(&self, tools: Vec<McpTool>) {
        let tools = Arc::new(tools);
        if let Some(live) = self.live.write().expect("MCP server lock").as_mut() {
            live.tools = tools.clone();
        }
        self.listed.send_replace(Some(tools));
    }
}

/// Every configured MCP server and its connection.
pub struct McpRegistry {
    servers: Vec<Arc<Server>>,
    started: AtomicBool,
    stop: CancellationToken,
    tasks: TaskTracker,
}

impl std::fmt::Debug for McpRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpRegistry")
            .field(
                "servers",
                &self
                    .servers
                    .iter()
                    .map(|s| s.settings.name.as_str())
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl McpRegistry {
    /// The servers, not yet connected: [`McpRegistry::start`] connects them.
    pub fn new(settings: &[McpServerSettings]) -> Arc<McpRegistry> {
        Arc::new(McpRegistry {
            servers: settings
                .iter()
                .map(|settings| {
                    Arc::new(Server {
                        settings: settings.clone(),
                        live: RwLock::new(None),
                        listed: watch::Sender::new(None),
                    })
                })
                .collect(),
            started: AtomicBool::new(false),
            stop: CancellationToken::new(),
            tasks: TaskTracker::new(),
        })
    }

    /// Starts one supervisor per server (once); they connect in the background.
    pub fn start(&self) {
        if self.started.swap(true, Ordering::AcqRel) {
            return;
        }
        for server in &self.servers {
            self.tasks
                .spawn(supervisor::supervise(server.clone(), self.stop.clone()));
        }
    }

    /// Disconnects every server and stops the programs agentry started.
    pub async fn shutdown(&self) {
        self.stop.cancel();
        self.tasks.close();
        if tokio::time::timeout(Duration::from_secs(15), self.tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!("MCP servers did not all stop in time");
        }
    }

    /// Each configured server's name and whether it is connected now.
    pub fn status(&self) -> Vec<(&str, bool)> {
        self.servers
            .iter()
            .map(|s| (s.settings.name.as_str(), s.live().is_some()))
            .collect()
    }

    fn server(&self, name: &str) -> Option<&Arc<Server>> {
        self.servers.iter().find(|s| s.settings.name == name)
    }

    /// The tools the server lists now; none while it is down.
    pub fn tools(&self, server: &str) -> Arc<Vec<McpTool>> {
        self.server(server)
            .and_then(|s| s.live())
            .map(|live| live.tools)
            .unwrap_or_default()
    }

    /// Waits until the server's tool list (`None` while it is down) satisfies `ready`, or
    /// `limit` passes; says which.
    pub async fn wait_for(
        &self,
        server: &str,
        limit: Duration,
        mut ready: impl FnMut(Option<&[McpTool]>) -> bool,
    ) -> bool {
        let Some(server) = self.server(server) else {
            return false;
        };
        let mut listed = server.listed.subscribe();
        let waited = listed.wait_for(|tools| ready(tools.as_deref().map(Vec::as_slice)));
        tokio::time::timeout(limit, waited)
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// Runs a tool: its arguments are checked against the schema its server lists, then it
    /// is called on the same connection. The text is the tool's result, failures included (a
    /// model reads them).
    pub async fn run(&self, server: &str, tool: &str, input: &Map<String, Value>) -> String {
        let Some((state, live)) = self.server(server).and_then(|s| Some((s, s.live()?))) else {
            return unavailable(server, tool);
        };
        let Some(listed) = live.tools.iter().find(|t| t.name == tool) else {
            return format!("Error: there is no tool named `{server}.{tool}`.");
        };
        if let Err(problem) = listed.arguments.check(input) {
            return format!("Error: invalid arguments: {problem}");
        }
        let limit = Duration::from_secs(state.settings.timeout_seconds);
        let mut params = CallToolRequestParams::new(tool.to_owned()).with_arguments(input.clone());
        // The tool span's trace context, in `_meta` (SEP-414); over HTTP also as the
        // request's `traceparent` header.
        if let Some(traceparent) = crate::traces::current_traceparent() {
            params.set_traceparent(&traceparent);
        }
        match tokio::time::timeout(limit, live.peer.call_tool(params)).await {
            Ok(Ok(result)) => result_text(&result),
            // The server's own answer is for the model; a transport's error may name the
            // server's URL (and what its query carries), so only the log has it, redacted.
            Ok(Err(rmcp::ServiceError::McpError(error))) => format!(
                "Error: the MCP server `{server}` could not run `{tool}`: {}",
                error.message
            ),
            Ok(Err(error)) => {
                let error = state.settings.redact(&error.to_string());
                tracing::warn!(server, tool, error = %error, "an MCP tool call failed");
                if live.peer.is_transport_closed() {
                    unavailable(server, tool)
                } else {
                    format!("Error: the MCP server `{server}` could not run `{tool}`.")
                }
            }
            Err(_) => {
                tracing::warn!(server, tool, "an MCP tool call timed out");
                format!(
                    "Error: `{server}.{tool}` did not answer within {} seconds.",
                    limit.as_secs()
                )
            }
        }
    }
}

fn unavailable(server: &str, tool: &str) -> String {
    format!(
        "Error: the MCP server `{server}` is unavailable right now, so `{server}.{tool}` could \
         not be called. Try again later."
    )
}
