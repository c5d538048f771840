//! Layered configuration: the embedded `config/default.toml`, an optional file, then
//! `AGENTRY__SECTION__KEY` environment variables; validated once after loading.

use std::net::SocketAddr;
use std::path::Path;

use figment::Figment;
use figment::providers::{Env, Format, Toml};
use serde::Deserialize;

mod agents;
mod auth;
mod connections;
mod console;
mod engine;
mod limits;
mod mcp;
mod metrics;
mod net;
mod options;
mod providers;
mod quotas;
mod schedules;
mod schema;
mod secret;
mod server;
mod telemetry;
mod template;
mod tenant_agent;
#[cfg(test)]
mod tests;
mod tools;
mod webhooks;

pub use crate::model::{CompactionStrategy, HistoryType};
pub use agents::{AgentSettings, HistorySettings, ImageInput};
pub use auth::{AuthSettings, MAX_TOKEN_TTL_SECONDS, SecretsSettings, parse_key};
pub use connections::{ConnectionSettings, TenantAgentSettings, unknown_connection};
pub use console::ConsoleSettings;
pub use engine::EngineSettings;
pub use limits::LimitsSettings;
pub use mcp::{McpServerSettings, is_server_name, split_tool_name};
pub use metrics::MetricsSettings;
pub use net::IpNet;
pub use options::{OptionKind, OptionSettings};
pub use providers::{EchoSettings, HttpProviderSettings, ProviderKind, ProviderSettings};
pub use quotas::QuotaSettings;
pub use schedules::SchedulesSettings;
pub use schema::SchemaPartSettings;
pub use secret::Secret;
pub use server::{
    A2aSettings, AgentScopeSettings, DatabaseSettings, LogFormat, LogSettings, ServerSettings,
};
pub use telemetry::{TelemetrySettings, TraceparentTrust};
pub use template::{option_placeholders, option_references, resolve_env};
pub use tenant_agent::{AgentPolicy, AgentSpec, pointer as agent_field_pointer};
pub use tools::{ToolSettings, ToolsSettings};
pub use webhooks::WebhooksSettings;

/// The configuration every key of which `config/default.toml` documents.
pub const DEFAULT_TOML: &str = include_str!("../../config/default.toml");

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    pub server: ServerSettings,
    pub database: DatabaseSettings,
    pub auth: AuthSettings,
    pub secrets: SecretsSettings,
    pub engine: EngineSettings,
    pub quotas: QuotaSettings,
    pub tools: ToolsSettings,
    pub log: LogSettings,
    pub metrics: MetricsSettings,
    pub telemetry: TelemetrySettings,
    pub agentscope: AgentScopeSettings,
    pub a2a: A2aSettings,
    pub webhooks: WebhooksSettings,
    pub schedules: SchedulesSettings,
    pub limits: LimitsSettings,
    pub console: ConsoleSettings,
    pub tenant_agents: TenantAgentSettings,
    #[serde(default)]
    pub connections: Vec<ConnectionSettings>,
    #[serde(default)]
    pub mcp_servers: Vec<McpServerSettings>,
    #[serde(default)]
    pub agents: Vec<AgentSettings>,
}

/// A configuration that could not be loaded or is invalid; `key` names the culprit.
#[derive(Debug, thiserror::Error)]
#[error("invalid configuration at `{key}`: {message}")]
pub struct ConfigError {
    pub key: String,
    pub message: String,
}

impl ConfigError {
    fn new(key: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            key: key.into(),
            message: message.into(),
        }
    }
}

impl From<figment::Error> for ConfigError {
    fn from(error: figment::Error) -> Self {
        let mut key = error.path.join(".");
        let mut message = error.kind.to_string();
        // An agent's provider and its keys are read past the agent's table: figment's path
        // stops at the agent.
        match &error.kind {
            figment::error::Kind::UnknownField(field, expected)
                if error.path.last() != Some(field) =>
            {
                key = format!("{key}.{field}");
                message = format!(
                    "unknown key `{field}`: neither an agent's key nor one of its provider's \
                     (`{}`)",
                    expected.join("`, `")
                );
            }
            figment::error::Kind::UnknownVariant(..)
                if error.path.len() == 2 && error.path[0] == "agents" =>
            {
                key = format!("{key}.provider");
            }
            _ => {}
        }
        let source = error
            .metadata
            .as_ref()
            .map(|m| format!(" (from {})", m.name))
            .unwrap_or_default();
        ConfigError::new(
            if key.is_empty() { "<root>".into() } else { key },
            format!("{message}{source}"),
        )
    }
}

/// The settings of a layered configuration. An error inside an agent that serde reports
/// at the agent's table (a provider's key has the wrong type: the flattened provider loses
/// the path) is traced to its key by reading the agent without each key in turn.
fn extract(figment: &Figment) -> Result<Settings, ConfigError> {
    let figment = &with_connection_providers(figment)?;
    let error = match figment.extract::<Settings>() {
        Ok(settings) => return Ok(settings),
        Err(error) => error,
    };
    let mut reported = ConfigError::from(error.clone());
    if let [agents, index] = error.path.as_slice()
        && agents == "agents"
        && !matches!(
            error.kind,
            figment::error::Kind::UnknownField(..) | figment::error::Kind::UnknownVariant(..)
        )
        && let Some(key) = agent_key_at_fault(figment, index, &error)
    {
        reported.key = format!("agents.{index}.{key}");
    }
    Err(reported)
}

/// Keys that say which model API an agent calls and how: an agent on a connection takes
/// them all from the connection.
const PROVIDER_KEYS: [&str; 10] = [
    "provider",
    "base_url",
    "api_key",
    "max_output_tokens",
    "timeout_seconds",
    "max_retries",
    "allow_private_base_url",
    "chunk_size",
    "delay_ms",
    "thinking",
];

/// An `[[agents]]` entry on a connection reads as an agent of the connection's provider
/// kind (its settings are the connection's: `Settings::resolve_connections`); one that also
/// sets a provider key is refused naming it.
fn with_connection_providers(figment: &Figment) -> Result<Figment, ConfigError> {
    use figment::value::Value;
    let Ok(Value::Array(_, agents)) = figment.find_value("agents") else {
        return Ok(figment.clone());
    };
    let connections = figment.find_value("connections").ok();
    let kind_of = |name: &str| -> Option<String> {
        connections
            .as_ref()?
            .as_array()?
            .iter()
            .filter_map(Value::as_dict)
            .find(|c| c.get("name").and_then(Value::as_str) == Some(name))?
            .get("provider")?
            .as_str()
            .map(str::to_owned)
    };
    let mut changed = false;
    let mut entries = Vec::with_capacity(agents.len());
    for (i, agent) in agents.into_iter().enumerate() {
        let name = agent
            .as_dict()
            .and_then(|d| d.get("connection"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        let (Some(name), Some(dict)) = (name, agent.as_dict()) else {
            entries.push(agent);
            continue;
        };
        if let Some(key) = PROVIDER_KEYS.iter().find(|k| dict.contains_key(**k)) {
            return Err(ConfigError::new(
                format!("agents[{i}].{key}"),
                format!(
                    "an agent on a connection (`{name}`) takes its provider and the provider's \
                     settings from the connection"
                ),
            ));
        }
        let mut dict = dict.clone();
        // An unknown connection is named by `resolve_connections`.
        let kind = kind_of(&name).unwrap_or_else(|| "echo".to_owned());
        dict.insert("provider".into(), Value::from(kind));
        entries.push(Value::from(dict));
        changed = true;
    }
    if !changed {
        return Ok(figment.clone());
    }
    Ok(figment
        .clone()
        .merge(figment::providers::Serialized::default("agents", entries)))
}

fn agent_key_at_fault(figment: &Figment, index: &str, error: &figment::Error) -> Option<String> {
    let agents = figment.find_value("agents").ok()?;
    let table = agents
        .as_array()?
        .get(index.parse::<usize>().ok()?)?
        .as_dict()?;
    table.keys().find_map(|key| {
        let mut without = table.clone();
        without.remove(key);
        let value = figment::value::Value::from(without);
        match value.deserialize::<AgentSettings>() {
            Err(other) if other.kind.to_string() == error.kind.to_string() => None,
            _ => Some(key.clone()),
        }
    })
}

impl Settings {
    /// Loads the embedded defaults, then `file` (which must exist if given), then the
    /// environment, and validates the result.
    pub fn load(file: Option<&Path>) -> Result<Settings, ConfigError> {
        let mut figment = Figment::from(Toml::string(DEFAULT_TOML));
        if let Some(file) = file {
            if !file.is_file() {
                return Err(ConfigError::new(
                    "--config",
                    format!("{} is not a readable file", file.display()),
                ));
            }
            figment = figment.merge(Toml::file_exact(file));
        }
        figment = figment.merge(Env::prefixed("AGENTRY__").split("__"));
        let mut settings = extract(&figment)?;
        settings.resolve_environment(|name| std::env::var(name).ok())?;
        settings.resolve_connections()?;
        settings.validate()?;
        Ok(settings)
    }

    /// Loads the embedded defaults with a TOML string layered on top, ignoring the
    /// environment. For tests and tools that build a configuration in code.
    pub fn from_toml(overrides: &str) -> Result<Settings, ConfigError> {
        Self::from_toml_layers(&[overrides])
    }

    /// Like [`Settings::from_toml`], with several layers applied in order.
    pub fn from_toml_layers(layers: &[&str]) -> Result<Settings, ConfigError> {
        let mut figment = Figment::from(Toml::string(DEFAULT_TOML));
        for layer in layers {
            figment = figment.merge(Toml::string(layer));
        }
        let mut settings = extract(&figment)?;
        settings.resolve_environment(|name| std::env::var(name).ok())?;
        settings.resolve_connections()?;
        settings.validate()?;
        Ok(settings)
    }

    /// Gives each `[[agents]]` entry on a connection (`connection = "name"`) the
    /// connection's provider settings, made and checked by the code that makes a tenant
    /// agent's: the same mistake gets the same message.
    pub fn resolve_connections(&mut self) -> Result<(), ConfigError> {
        for (i, agent) in self.agents.iter_mut().enumerate() {
            let Some(name) = &agent.connection else {
                continue;
            };
            let connection = self
                .connections
                .iter()
                .find(|c| c.name == *name)
                .ok_or_else(|| {
                    ConfigError::new(
                        format!("agents[{i}].connection"),
                        unknown_connection(name, &self.connections),
                    )
                })?;
            connection
                .check_model(&agent.model, &agent.options)
                .map_err(|message| ConfigError::new(format!("agents[{i}].model"), message))?;
            agent.provider = connection.provider_settings();
        }
        Ok(())
    }

    /// Replaces `${NAME}` in agents' provider settings and MCP servers' settings with
    /// environment variables, so operator secrets stay out of configuration files.
    pub fn resolve_environment(
        &mut self,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<(), ConfigError> {
        for (i, server) in self.mcp_servers.iter_mut().enumerate() {
            server.resolve_environment(&format!("mcp_servers[{i}]"), &lookup)?;
        }
        for (i, connection) in self.connections.iter_mut().enumerate() {
            let resolve = |key: &str, value: &str| {
                resolve_env(value, &lookup).map_err(|name| {
                    ConfigError::new(
                        format!("connections[{i}].{key}"),
                        format!("environment variable `{name}` is not set"),
                    )
                })
            };
            connection.base_url = resolve("base_url", &connection.base_url)?;
            connection.api_key = Secret::new(resolve("api_key", connection.api_key.expose())?);
        }
        for (i, agent) in self.agents.iter_mut().enumerate() {
            let resolve = |key: &str, value: &str| {
                resolve_env(value, &lookup).map_err(|name| {
                    ConfigError::new(
                        format!("agents[{i}].{key}"),
                        format!("environment variable `{name}` is not set"),
                    )
                })
            };
            if let Some(api) = agent.provider.http_mut() {
                api.base_url = resolve("base_url", &api.base_url)?;
                api.api_key = Secret::new(resolve("api_key", api.api_key.expose())?);
            }
            agent.model = resolve("model", &agent.model)?;
            agent.system_prompt = resolve("system_prompt", &agent.system_prompt)?;
        }
        Ok(())
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        self.server
            .bind
            .parse::<SocketAddr>()
            .map_err(|e| ConfigError::new("server.bind", format!("not a socket address: {e}")))?;
        self.server.validate_origins()?;
        self.server.validate_public_url()?;
        self.limits.validate()?;
        if self.server.max_body_bytes < 1024 {
            return Err(ConfigError::new(
                "server.max_body_bytes",
                "must be at least 1024",
            ));
        }
        for (key, value) in [
            (
                "server.header_read_timeout_seconds",
                self.server.header_read_timeout_seconds,
            ),
            (
                "server.body_read_timeout_seconds",
                self.server.body_read_timeout_seconds,
            ),
        ] {
            if value == 0 {
                return Err(ConfigError::new(key, "must be at least 1"));
            }
        }
        let url = self.database.url.expose();
        if !(url.starts_with("sqlite:")
            || url.starts_with("postgres://")
            || url.starts_with("postgresql://"))
        {
            return Err(ConfigError::new(
                "database.url",
                "must start with sqlite:, postgres:// or postgresql://",
            ));
        }
        if self.database.max_connections == 0 {
            return Err(ConfigError::new(
                "database.max_connections",
                "must be at least 1",
            ));
        }
        if !(1..=1024).contains(&self.database.sqlite_readers) {
            return Err(ConfigError::new(
                "database.sqlite_readers",
                "must be between 1 and 1024",
            ));
        }
        if !(100..=600_000).contains(&self.database.timeout_ms) {
            return Err(ConfigError::new(
                "database.timeout_ms",
                "must be between 100 and 600000",
            ));
        }
        if !(64..=1_048_576).contains(&self.database.sqlite_cache_kib) {
            return Err(ConfigError::new(
                "database.sqlite_cache_kib",
                "must be between 64 and 1048576",
            ));
        }
        if !(64..=1_048_576).contains(&self.database.sqlite_writer_cache_kib) {
            return Err(ConfigError::new(
                "database.sqlite_writer_cache_kib",
                "must be between 64 and 1048576",
            ));
        }
        if self.database.sqlite_checkpoint_delay_ms > 60_000 {
            return Err(ConfigError::new(
                "database.sqlite_checkpoint_delay_ms",
                "must be between 0 and 60000",
            ));
        }
        self.auth.validate()?;
        self.engine.validate()?;
        self.webhooks.validate()?;
        self.schedules.validate()?;
        self.console.validate()?;
        if !(1..=60).contains(&self.quotas.burst_seconds) {
            return Err(ConfigError::new(
                "quotas.burst_seconds",
                "must be between 1 and 60",
            ));
        }
        self.metrics.validate(&self.server.bind)?;
        self.telemetry.validate()?;
        if !self.secrets.key.is_empty() {
            parse_key(self.secrets.key.expose())
                .map_err(|message| ConfigError::new("secrets.key", message))?;
        }
        tracing_subscriber::EnvFilter::try_new(&self.log.level)
            .map_err(|e| ConfigError::new("log.level", e.to_string()))?;
        self.validate_mcp_servers()?;
        self.validate_connections()?;
        self.tenant_agents.validate(&self.mcp_servers)?;
        self.validate_agents()
    }

    fn validate_connections(&self) -> Result<(), ConfigError> {
        let mut names = std::collections::HashSet::new();
        for (i, connection) in self.connections.iter().enumerate() {
            let at = format!("connections[{i}]");
            connection.validate(&at)?;
            if !names.insert(connection.name.as_str()) {
                return Err(ConfigError::new(
                    format!("{at}.name"),
                    format!("connection `{}` is declared twice", connection.name),
                ));
            }
        }
        Ok(())
    }

    fn validate_mcp_servers(&self) -> Result<(), ConfigError> {
        let mut names = std::collections::HashSet::new();
        for (i, server) in self.mcp_servers.iter().enumerate() {
            let at = format!("mcp_servers[{i}]");
            server.validate(&at)?;
            if !names.insert(server.name.as_str()) {
                return Err(ConfigError::new(
                    format!("{at}.name"),
                    format!("MCP server `{}` is declared twice", server.name),
                ));
            }
        }
        Ok(())
    }

    fn validate_agents(&self) -> Result<(), ConfigError> {
        if self.agents.is_empty() {
            return Err(ConfigError::new("agents", "at least one agent is required"));
        }
        let mut names = std::collections::HashSet::new();
        for (i, agent) in self.agents.iter().enumerate() {
            let at = format!("agents[{i}]");
            if !is_identifier(&agent.name) {
                return Err(ConfigError::new(
                    format!("{at}.name"),
                    "must be 1-64 characters of A-Z a-z 0-9 . _ -",
                ));
            }
            if !names.insert(agent.name.as_str()) {
                return Err(ConfigError::new(
                    format!("{at}.name"),
                    format!("agent `{}` is declared twice", agent.name),
                ));
            }
            agent.validate(&at, &self.mcp_servers)?;
        }
        for (key, default) in [
            ("agentscope.default_agent", &self.agentscope.default_agent),
            ("a2a.default_agent", &self.a2a.default_agent),
        ] {
            if !default.is_empty() && !self.agents.iter().any(|a| a.name == *default) {
                return Err(ConfigError::new(
                    key,
                    format!("`{default}` is not a configured agent"),
                ));
            }
        }
        Ok(())
    }
}

/// Names of agents, options and tools: short, printable, URL-safe.
pub fn is_identifier(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}
