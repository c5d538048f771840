//! `[[connections]]` and `[tenant_agents]`: the model APIs tenants' own agents may use
//! (the operator's base URL and key, the models tenants may pick) and what else a tenant
//! agent may have (built-in tools, MCP servers) and how many.

use serde::Deserialize;

use super::{ConfigError, McpServerSettings, ProviderKind, Secret, is_identifier};
use crate::model::Builtin;

/// A model API the operator lets tenant agents use, by name: a tenant never sets a base
/// URL or sees the key.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConnectionSettings {
    pub name: String,
    pub provider: ProviderKind,
    #[serde(default)]
    pub base_url: String,
    #[serde(default)]
    pub api_key: Secret,
    /// The models a tenant agent on this connection may name.
    #[serde(default)]
    pub models: Vec<String>,
    #[serde(default)]
    pub max_output_tokens: Option<u32>,
    #[serde(default = "default_timeout")]
    pub timeout_seconds: u64,
    #[serde(default = "default_retries")]
    pub max_retries: u32,
}

fn default_timeout() -> u64 {
    120
}

fn default_retries() -> u32 {
    2
}

/// What tenants' own agents may use, and how many of them a tenant keeps.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantAgentSettings {
    /// Agents one tenant may keep (archived ones count).
    pub max_per_tenant: u32,
    /// Versions kept per agent: older ones are dropped (never the published one).
    pub max_versions: u32,
    /// Longest system prompt, in bytes.
    pub max_prompt_bytes: usize,
    /// The built-in tools a tenant agent may list.
    pub allowed_tools: Vec<String>,
    /// The `[[mcp_servers]]` whose tools a tenant agent may list.
    pub allowed_mcp_servers: Vec<String>,
}

impl ConnectionSettings {
    pub(super) fn validate(&self, at: &str) -> Result<(), ConfigError> {
        if !is_identifier(&self.name) {
            return Err(ConfigError::new(
                format!("{at}.name"),
                "must be 1-64 characters of A-Z a-z 0-9 . _ -",
            ));
        }
        if self.provider != ProviderKind::Echo {
            if !(self.base_url.starts_with("http://") || self.base_url.starts_with("https://")) {
                return Err(ConfigError::new(
                    format!("{at}.base_url"),
                    "this provider needs an http:// or https:// base URL",
                ));
            }
            if self.models.is_empty() {
                return Err(ConfigError::new(
                    format!("{at}.models"),
                    "list the models tenants may pick",
                ));
            }
        }
        for (key, value) in [
            ("base_url", self.base_url.as_str()),
            ("api_key", self.api_key.expose()),
        ] {
            if value.contains("{{") {
                return Err(ConfigError::new(
                    format!("{at}.{key}"),
                    "a connection takes no option placeholders",
                ));
            }
        }
        if self.timeout_seconds == 0 {
            return Err(ConfigError::new(
                format!("{at}.timeout_seconds"),
                "must be at least 1",
            ));
        }
        Ok(())
    }
}

impl TenantAgentSettings {
    pub(super) fn validate(&self, mcp_servers: &[McpServerSettings]) -> Result<(), ConfigError> {
        for (key, value) in [
            ("tenant_agents.max_versions", self.max_versions as usize),
            ("tenant_agents.max_prompt_bytes", self.max_prompt_bytes),
        ] {
            if value == 0 {
                return Err(ConfigError::new(key, "must be at least 1"));
            }
        }
        for (i, tool) in self.allowed_tools.iter().enumerate() {
            if Builtin::named(tool).is_none() {
                return Err(ConfigError::new(
                    format!("tenant_agents.allowed_tools[{i}]"),
                    format!("`{tool}` is not a built-in tool"),
                ));
            }
        }
        for (i, server) in self.allowed_mcp_servers.iter().enumerate() {
            if !mcp_servers.iter().any(|s| s.name == *server) {
                return Err(ConfigError::new(
                    format!("tenant_agents.allowed_mcp_servers[{i}]"),
                    format!("`{server}` is not in [[mcp_servers]]"),
                ));
            }
        }
        Ok(())
    }
}
