//! `[tools]` and an agent's `[[agents.tools]]`: the built-ins' settings, and which tools an
//! agent has.

use serde::Deserialize;

use super::{ConfigError, McpServerSettings};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolsSettings {
    /// Hosts (or host:port) `http_fetch` may reach although they are internal addresses.
    pub http_fetch_allow: Vec<String>,
    pub http_fetch_max_bytes: usize,
    pub http_fetch_timeout_seconds: u64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolSettings {
    /// A built-in tool (`clock`, `calculator`, `memory`, `http_fetch`), an MCP server's tool
    /// (`<server>.<tool>`), or all of an MCP server's tools (`<server>.*`).
    pub name: String,
    #[serde(default)]
    pub title: Option<String>,
    /// Overrides the built-in's description.
    #[serde(default)]
    pub description: Option<String>,
    /// Overrides the built-in's JSON Schema of arguments.
    #[serde(default)]
    pub parameters: Option<serde_json::Value>,
    #[serde(default = "default_true")]
    pub expose: bool,
}

fn default_true() -> bool {
    true
}

impl ToolSettings {
    /// An MCP tool reference: its server is configured; a wildcard overrides nothing, and
    /// the server's schema is the tool's.
    pub(super) fn validate_mcp(
        &self,
        at: &str,
        server: &str,
        tool: &str,
        mcp_servers: &[McpServerSettings],
    ) -> Result<(), ConfigError> {
        if !mcp_servers.iter().any(|s| s.name == server) {
            return Err(ConfigError::new(
                format!("{at}.name"),
                format!(
                    "`{}` names MCP server `{server}`, which is not in [[mcp_servers]]",
                    self.name
                ),
            ));
        }
        let plain = tool.len() <= 128
            && tool
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'/'));
        if !plain && tool != "*" {
            return Err(ConfigError::new(
                format!("{at}.name"),
                "an MCP tool name is 1-128 characters of A-Z a-z 0-9 . _ - /, or `*`",
            ));
        }
        if self.parameters.is_some() {
            return Err(ConfigError::new(
                format!("{at}.parameters"),
                "an MCP tool's parameters are the schema its server lists",
            ));
        }
        if tool == "*" && (self.title.is_some() || self.description.is_some()) {
            return Err(ConfigError::new(
                format!("{at}.description"),
                "`<server>.*` stands for several tools: give titles and descriptions per tool",
            ));
        }
        Ok(())
    }
}
