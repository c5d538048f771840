//! One task per MCP server: connect, list the tools, re-list them when the server says they
//! changed, and reconnect with backoff when the connection or the program dies.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::connect::{Client, Listener, connect, list_tools};
use super::{Live, Server};

const FIRST_RETRY: Duration = Duration::from_millis(500);
const LAST_RETRY: Duration = Duration::from_secs(30);
/// How long a stopping server's program gets to exit before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(10);
/// How long what the program started, still running once it is gone, gets to exit before
/// it is killed.
pub(super) const LEFTOVER_GRACE: Duration = Duration::from_secs(2);

pub(super) async fn supervise(server: Arc<Server>, stop: CancellationToken) {
    let name = server.settings.name.clone();
    let connect_limit = Duration::from_secs(server.settings.connect_timeout_seconds);
    let mut retry = FIRST_RETRY;
    loop {
        let changed = Arc::new(Notify::new());
        let attempt = async {
            let (client, leader) = connect(
                &server.settings,
                Listener {
                    changed: changed.clone(),
                },
            )
            .await?;
            let tools = list_tools(client.peer()).await?;
            Ok::<_, String>((client, leader, tools))
        };
        let attempt = tokio::select! {
            _ = stop.cancelled() => return,
            attempt = tokio::time::timeout(connect_limit, attempt) => attempt,
        };
        match attempt {
            Ok(Ok((client, leader, tools))) => {
                tracing::info!(mcp_server = %name, tools = tools.len(), "MCP server connected");
                retry = FIRST_RETRY;
                server.set_live(Some(Live {
                    peer: client.peer().clone(),
                    tools: Arc::new(tools),
                }));
                serve(&server, client, &changed, &stop).await;
                server.set_live(None);
                if let Some(leader) = leader {
                    super::group::stop(leader, LEFTOVER_GRACE).await;
                }
                if stop.is_cancelled() {
                    tracing::info!(mcp_server = %name, "MCP server stopped");
                    return;
                }
                tracing::warn!(mcp_server = %name, "MCP server disconnected: its tools are unavailable until it is back");
            }
            Ok(Err(error)) => {
                let error = server.settings.redact(&error);
                tracing::warn!(mcp_server = %name, error = %error, retry_in_ms = retry.as_millis() as u64, "MCP server unavailable: its tools are absent until it connects");
            }
            Err(_) => {
                tracing::warn!(mcp_server = %name, retry_in_ms = retry.as_millis() as u64, "MCP server did not connect in time: its tools are absent until it connects");
            }
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(retry) => {}
        }
        retry = (retry * 2).min(LAST_RETRY);
    }
}

/// Keeps the tool list current until the connection ends or agentry stops (then closes
/// the session, which stops the program).
async fn serve(server: &Server, client: Client, changed: &Notify, stop: &CancellationToken) {
    let peer = client.peer().clone();
    let cancel = client.cancellation_token();
    let ended = client.waiting();
    tokio::pin!(ended);
    loop {
        tokio::select! {
            _ = stop.cancelled() => {
                cancel.cancel();
                let _ = tokio::time::timeout(STOP_GRACE, ended).await;
                return;
            }
            _ = &mut ended => return,
            _ = changed.notified() => {
                // Bounded, so a server that never answers cannot hold up a stop.
                let limit = Duration::from_secs(server.settings.connect_timeout_seconds);
                match tokio::time::timeout(limit, list_tools(&peer)).await {
                    Ok(Ok(tools)) => {
                        tracing::info!(mcp_server = %server.settings.name, tools = tools.len(), "MCP server's tools changed");
                        server.set_tools(tools);
                    }
                    Ok(Err(error)) => tracing::warn!(mcp_server = %server.settings.name, error = %server.settings.redact(&error), "cannot re-list an MCP server's tools"),
                    Err(_) => tracing::warn!(mcp_server = %server.settings.name, "an MCP server did not list its tools in time"),
                }
            }
        }
    }
}
