//! Opening a client session with one MCP server: a child process on stdio, or streamable
//! HTTP; and listing its tools.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::Arc;

use rmcp::model::{ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use tokio::io::AsyncBufReadExt;
use tokio::sync::Notify;

use super::McpTool;
use super::http::TracedHttp;
use crate::config::McpServerSettings;

/// What a stdio server's program inherits from agentry's environment: enough to find and
/// run programs, and nothing of agentry's own (its secrets key, its database URL). Anything
/// else it needs is given in its `env`.
const INHERITED_ENV: [&str; 10] = [
    "HOME", "LANG", "LC_ALL", "LOGNAME", "PATH", "SHELL", "TERM", "TMPDIR", "TZ", "USER",
];

/// agentry's side of the session: it only listens for `notifications/tools/list_changed`.
pub(super) struct Listener {
    pub changed: Arc<Notify>,
}

impl ClientHandler for Listener {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.changed.notify_one();
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("agentry", env!("CARGO_PKG_VERSION")),
        )
    }
}

pub(super) type Client = RunningService<RoleClient, Listener>;

/// Starts the program (in a process group of its own, killed when dropped) or reaches the
/// URL, and completes the MCP handshake. With a program, its process id, which names its
/// process group.
pub(super) async fn connect(
    settings: &McpServerSettings,
    listener: Listener,
) -> Result<(Client, Option<u32>), String> {
    match (&settings.command, &settings.url) {
        (Some(command), _) => {
            let mut program = tokio::process::Command::new(command);
            program.args(&settings.args).env_clear();
            for name in INHERITED_ENV {
                if let Some(value) = std::env::var_os(name) {
                    program.env(name, value);
                }
            }
            for (name, value) in &settings.env {
                program.env(name, value.expose());
            }
            if let Some(cwd) = &settings.cwd {
                program.current_dir(cwd);
            }
            let mut wrapped = process_wrap::tokio::CommandWrap::from(program);
            #[cfg(unix)]
            wrapped.wrap(process_wrap::tokio::ProcessGroup::leader());
            wrapped.wrap(process_wrap::tokio::KillOnDrop);
            let (transport, stderr) = TokioChildProcess::builder(wrapped)
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| format!("cannot start `{command}`: {e}"))?;
            if let Some(stderr) = stderr {
                tokio::spawn(log_stderr(settings.name.clone(), stderr));
            }
            let leader = transport.id();
            match listener.serve(transport).await {
                Ok(client) => Ok((client, leader)),
                Err(error) => {
                    if let Some(leader) = leader {
                        super::group::stop(leader, super::supervisor::LEFTOVER_GRACE).await;
                    }
                    Err(format!("the MCP handshake failed: {error}"))
                }
            }
        }
        (None, Some(url)) => {
            let mut headers = HashMap::new();
            for (name, value) in &settings.headers {
                let name = reqwest::header::HeaderName::from_bytes(name.as_bytes())
                    .map_err(|e| format!("header `{name}`: {e}"))?;
                let value = reqwest::header::HeaderValue::from_str(value.expose())
                    .map_err(|_| format!("header `{name}` has an invalid value"))?;
                headers.insert(name, value);
            }
            let config =
                StreamableHttpClientTransportConfig::with_uri(url.as_str()).custom_headers(headers);
            let transport = StreamableHttpClientTransport::with_client(TracedHttp::new(), config);
            let client = listener
                .serve(transport)
                .await
                .map_err(|e| format!("the MCP handshake failed: {e}"))?;
            Ok((client, None))
        }
        (None, None) => Err("neither a command nor a URL is configured".into()),
    }
}

/// The server's tools, every page of them.
pub(super) async fn list_tools(
    client: &rmcp::service::Peer<RoleClient>,
) -> Result<Vec<McpTool>, String> {
    let tools = client
        .list_all_tools()
        .await
        .map_err(|e| format!("tools/list failed: {e}"))?;
    Ok(tools
        .into_iter()
        .map(|tool| {
            let input_schema = serde_json::Value::Object((*tool.input_schema).clone());
            McpTool {
                name: tool.name.into_owned(),
                title: tool.title,
                description: tool.description.map(|d| d.into_owned()).unwrap_or_default(),
                arguments: super::super::ArgumentSchema::compile(&input_schema),
                input_schema,
            }
        })
        .collect())
}

/// What the program writes to stderr goes to the log, line by line.
async fn log_stderr(server: String, stderr: tokio::process::ChildStderr) {
    let mut lines = tokio::io::BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        tracing::info!(mcp_server = %server, "{line}");
    }
}
