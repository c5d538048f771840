//! `[[connections]]` and `[tenant_agents]`: the model APIs tenants' own agents may use
//! (the operator's base URL and key, the models tenants may pick) and what else a tenant
//! agent may have (built-in tools, MCP servers) and how many.

use serde::Deserialize;

use super::{
    ConfigError, EchoSettings, HttpProviderSettings, McpServerSettings, OptionKind, OptionSettings,
    ProviderKind, ProviderSettings, Secret, is_identifier, option_references,
};
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

/// Why `name` names no connection, with the names that do.
pub fn unknown_connection(name: &str, connections: &[ConnectionSettings]) -> String {
    let names: Vec<String> = connections
        .iter()
        .map(|c| format!("`{}`", c.name))
        .collect();
    if names.is_empty() {
        format!("unknown connection `{name}`; this server offers no connections")
    } else {
        format!(
            "unknown connection `{name}`; the connections here: {}",
            names.join(", ")
        )
    }
}

impl ConnectionSettings {
    /// The provider settings an agent on this connection runs with: the operator's base
    /// URL and key, never a host the agent chose.
    pub fn provider_settings(&self) -> ProviderSettings {
        match self.provider {
            ProviderKind::Echo => ProviderSettings::Echo(EchoSettings {
                chunk_size: 8,
                delay_ms: 0,
                thinking: false,
            }),
            kind => {
                let api = HttpProviderSettings {
                    base_url: self.base_url.clone(),
                    api_key: self.api_key.clone(),
                    max_output_tokens: self.max_output_tokens,
                    timeout_seconds: self.timeout_seconds,
                    max_retries: self.max_retries,
                    allow_private_base_url: false,
                };
                if kind == ProviderKind::Openai {
                    ProviderSettings::Openai(api)
                } else {
                    ProviderSettings::Anthropic(api)
                }
            }
        }
    }

    /// Whether an agent on this connection may name `model`: one of its `models` (any, when
    /// it lists none), or `{{options.x}}` of a select option whose every value is one.
    /// `Err` says what the connection offers.
    pub fn check_model(&self, model: &str, options: &[OptionSettings]) -> Result<(), String> {
        let models = &self.models;
        if models.is_empty() {
            return Ok(());
        }
        let references = option_references(model);
        let allowed = if references.is_empty() {
            models.iter().any(|m| m == model)
        } else {
            // A model chosen per session: a select option whose every value is allowed.
            model.trim() == format!("{{{{options.{}}}}}", references[0])
                && options.iter().any(|o| {
                    o.name == references[0]
                        && o.kind == OptionKind::Select
                        && o.options.iter().all(|v| models.contains(v))
                })
        };
        if allowed {
            Ok(())
        } else {
            Err(format!(
                "connection `{}` offers the models `{}` (or a select option whose values are \
                 among them)",
                self.name,
                models.join("`, `")
            ))
        }
    }

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
