//! The tool calls a model makes: who answers each (the client, a server tool at once, or a
//! server tool after the client's permission), running server tools in their own span, and
//! recording their results.

use tracing::Instrument;

use super::turn_log::TurnLog;
use super::turn_parts::TurnParts;
use crate::agents::{Agent, ServerTool};
use crate::model::{Content, EventData, HistoryMessage, Session, Turn};
use crate::tools;

/// A tool call the model made, as the loop resolves it.
pub(super) struct Call {
    pub(super) id: String,
    pub(super) name: String,
    pub(super) input: serde_json::Map<String, serde_json::Value>,
}

/// Who answers a tool call.
pub(super) enum Resolution {
    Client,
    RunNow,
    NeedsPermission,
    Unknown,
}

/// Client tools are the client's; internal and trusted server tools run at once; enabled
/// untrusted ones wait for the client's permission.
pub(super) fn resolve(agent: &Agent, session: &Session, name: &str) -> Resolution {
    if session.client_tools.iter().any(|t| t.name == name) {
        return Resolution::Client;
    }
    match agent.server_tool(name) {
        Some((_, false)) => Resolution::RunNow,
        Some(_) => match session.server_tools.iter().find(|t| t.name == name) {
            Some(enabled) if enabled.trust => Resolution::RunNow,
            Some(_) => Resolution::NeedsPermission,
            None => Resolution::Unknown,
        },
        None => Resolution::Unknown,
    }
}

/// Runs a server tool on validated arguments; the text is its result, errors included.
/// Its `tool_call` is already durable, so a crash never runs it twice.
async fn run_server_tool(
    parts: TurnParts<'_>,
    turn: &Turn,
    agent: &Agent,
    name: &str,
    input: &serde_json::Map<String, serde_json::Value>,
) -> String {
    let Some((tool, _)) = agent.server_tool(name) else {
        return format!("Error: there is no tool named `{name}`.");
    };
    match tool {
        ServerTool::Builtin { spec, builtin } => {
            let checked = match agent.builtin_arguments(name) {
                Some(arguments) => arguments.check(input),
                None => tools::validate_arguments(&spec.parameters, input),
            };
            if let Err(problem) = checked {
                return format!("Error: invalid arguments: {problem}");
            }
            tools::run(builtin, input, parts.store, &turn.tenant_id, parts.tools).await
        }
        ServerTool::Mcp { server, tool } => parts.mcp.run(&server, &tool, input).await,
    }
}

/// A tool's result: an event, and a tool message in the history.
pub(super) async fn record_tool_result(log: &mut TurnLog<'_>, call_id: &str, text: String) {
    let content = Content::Text(text);
    log.emit(
        vec![EventData::ToolResult {
            tool_call_id: call_id.to_owned(),
            content: content.clone(),
        }],
        vec![HistoryMessage::Tool {
            tool_call_id: call_id.to_owned(),
            content,
        }],
    )
    .await;
}

/// A tool call's run in a span of its own: tool, call id, kind (`builtin`, `mcp`), MCP
/// server, and outcome (`error` when its result is an `Error: …`).
pub(super) async fn run_traced_tool(
    parts: TurnParts<'_>,
    turn: &Turn,
    agent: &Agent,
    id: &str,
    name: &str,
    input: &serde_json::Map<String, serde_json::Value>,
) -> String {
    let (kind, server) = match agent.server_tool(name) {
        Some((ServerTool::Mcp { server, .. }, _)) => ("mcp", Some(server)),
        Some((ServerTool::Builtin { .. }, _)) => ("builtin", None),
        None => ("unknown", None),
    };
    let span = tracing::info_span!(
        target: crate::traces::TARGET,
        "execute_tool",
        otel.name = %format_args!("execute_tool {name}"),
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = name,
        gen_ai.tool.call.id = id,
        gen_ai.tool.type = if kind == "mcp" { "extension" } else { "function" },
        agentry.tool.kind = kind,
        agentry.mcp.server = server.as_deref(),
        agentry.tool.outcome = tracing::field::Empty,
        error.type = tracing::field::Empty,
    );
    let content = run_server_tool(parts, turn, agent, name, input)
        .instrument(span.clone())
        .await;
    if content.starts_with("Error:") {
        span.record("agentry.tool.outcome", "error");
        span.record("error.type", "tool_error");
    } else {
        span.record("agentry.tool.outcome", "ok");
    }
    content
}
