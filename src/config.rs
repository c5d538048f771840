//! Layered configuration: the embedded `config/default.toml`, an optional file, then
//! `AGENTRY__SECTION__KEY` environment variables; validated once after loading.

use std::fmt;
use std::net::SocketAddr;
use std::path::Path;

use figment::Figment;
use figment::providers::{Env, Format, Toml};
use serde::{Deserialize, Deserializer};

mod mcp;
mod net;

pub use mcp::{McpServerSettings, is_server_name, split_tool_name};
pub use net::IpNet;

/// The configuration every key of which `config/default.toml` documents.
pub const DEFAULT_TOML: &str = include_str!("../config/default.toml");

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    pub server: ServerSettings,
    pub database: DatabaseSettings,
    pub auth: AuthSettings,
    pub secrets: SecretsSettings,
    pub engine: EngineSettings,
    pub tools: ToolsSettings,
    pub log: LogSettings,
    pub agentscope: AgentScopeSettings,
    #[serde(default)]
    pub mcp_servers: Vec<McpServerSettings>,
    #[serde(default)]
    pub agents: Vec<AgentSettings>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentScopeSettings {
    /// The agent `POST /agentscope/process` talks to when the request names none; empty:
    /// the first configured agent.
    pub default_agent: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSettings {
    pub bind: String,
    pub workers: usize,
    pub max_body_bytes: usize,
    /// Longest a request head may take to arrive (seconds).
    pub header_read_timeout_seconds: u64,
    /// Longest a request body may take to arrive after its head (seconds); then 408.
    pub body_read_timeout_seconds: u64,
    /// How long an idle keep-alive connection stays open (seconds); 0 closes it.
    pub keep_alive_seconds: u64,
    /// Peers whose forwarding headers (`Forwarded`, `X-Forwarded-*`) are believed.
    pub trusted_proxies: Vec<IpNet>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatabaseSettings {
    pub url: Secret,
    pub max_connections: u32,
    pub sqlite_busy_timeout_ms: u64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthSettings {
    pub admin_secret: Secret,
    pub jwt_secret: Secret,
    pub jwt_previous_secrets: Vec<Secret>,
    pub token_ttl_seconds: u64,
    pub api_key_ttl_seconds: u64,
    pub issuer: String,
    pub audience: String,
    pub public_meta: bool,
    /// Password verifications (argon2) running at once, over all clients.
    pub login_max_concurrent_checks: usize,
    /// How long a login waits for a verification slot before 429 (milliseconds).
    pub login_queue_timeout_ms: u64,
    /// Failed logins per `client_id`, and per client address, within the window.
    pub login_max_failures_per_client: u32,
    pub login_max_failures_per_address: u32,
    pub login_failure_window_seconds: u64,
    /// Most client ids and addresses the failure counters remember.
    pub login_tracked_keys: usize,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretsSettings {
    pub key: Secret,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineSettings {
    pub max_concurrent_turns: usize,
    pub max_concurrent_turns_per_tenant: usize,
    pub max_queued_turns: usize,
    pub shutdown_grace_seconds: u64,
    pub sse_keep_alive_seconds: u64,
    pub max_batch_events: usize,
    pub subscriber_buffer: usize,
    /// Inline part contents larger than this are stored once and passed as a URL.
    pub inline_part_max_bytes: usize,
}

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
pub struct LogSettings {
    pub format: LogFormat,
    pub level: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentSettings {
    pub name: String,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default = "default_agent_version")]
    pub version: String,
    #[serde(default)]
    pub description: Option<String>,
    pub provider: ProviderKind,
    #[serde(default)]
    pub model: String,
    #[serde(default)]
    pub system_prompt: String,
    #[serde(default)]
    pub image_inputs: Vec<ImageInput>,
    #[serde(default)]
    pub options: Vec<OptionSettings>,
    #[serde(default)]
    pub tools: Vec<ToolSettings>,
    #[serde(default)]
    pub history: HistorySettings,
    /// The message bodies the agent accepts; empty: any.
    #[serde(default)]
    pub input_schema: Vec<SchemaPartSettings>,
    /// The message bodies the agent writes; a reply outside it fails the turn.
    #[serde(default)]
    pub output_schema: Vec<SchemaPartSettings>,
    /// `openai` provider: the API's base URL (`…/v1`); `/chat/completions` is appended.
    #[serde(default)]
    pub base_url: String,
    /// `openai` provider: the API key, sent as a bearer token (may be a template).
    #[serde(default)]
    pub api_key: Secret,
    /// `openai` provider: the most tokens the model may write per step (`max_tokens`).
    #[serde(default)]
    pub max_output_tokens: Option<u32>,
    /// `openai` provider: seconds to wait for the response to start and between chunks.
    #[serde(default = "default_provider_timeout")]
    pub timeout_seconds: u64,
    /// `openai` provider: retries after connection errors, 429 and 5xx before the first token.
    #[serde(default = "default_provider_retries")]
    pub max_retries: u32,
    /// Most model calls in one turn; a model still calling tools then is stopped.
    #[serde(default = "default_max_steps")]
    pub max_steps: usize,
    /// `echo` provider: characters per delta.
    #[serde(default = "default_chunk_size")]
    pub chunk_size: usize,
    /// `echo` provider: pause before each delta, in milliseconds.
    #[serde(default)]
    pub delay_ms: u64,
    /// `echo` provider: think aloud before answering.
    #[serde(default)]
    pub thinking: bool,
}

fn default_max_steps() -> usize {
    16
}

fn default_provider_timeout() -> u64 {
    120
}

fn default_provider_retries() -> u32 {
    2
}

fn default_chunk_size() -> usize {
    8
}

fn default_agent_version() -> String {
    "0.1.0".to_owned()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    Echo,
    Openai,
    Anthropic,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ImageInput {
    Http,
    Data,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OptionSettings {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: OptionKind,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub default: Secret,
    #[serde(default)]
    pub options: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OptionKind {
    Text,
    Secret,
    Select,
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

/// One part of a message-body schema: globs (`*`, `**`, `{a,b}`) over part names and
/// content types.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchemaPartSettings {
    /// Matches named parts whose name fits; absent: matches only unnamed parts.
    #[serde(default)]
    pub name: Option<String>,
    pub content_type: String,
    #[serde(default)]
    pub required: bool,
}

impl SchemaPartSettings {
    pub fn compile(&self) -> Result<crate::model::SchemaPart, (&'static str, String)> {
        use crate::model::PartGlob;
        let name = match &self.name {
            Some(pattern) if !pattern.starts_with('/') => {
                return Err((
                    "name",
                    format!("`{pattern}` must start with `/`: part names are absolute paths"),
                ));
            }
            Some(pattern) => Some(PartGlob::new(pattern).map_err(|e| ("name", e))?),
            None => None,
        };
        Ok(crate::model::SchemaPart {
            name,
            content_type: PartGlob::new(&self.content_type).map_err(|e| ("content_type", e))?,
            required: self.required,
        })
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HistorySettings {
    #[serde(default = "default_history_types")]
    pub types: Vec<HistoryType>,
    /// How the compacted history shrinks when it exceeds `budget_tokens`.
    #[serde(default)]
    pub strategy: CompactionStrategy,
    /// Estimated tokens the model may be fed; 0: no limit.
    #[serde(default)]
    pub budget_tokens: u64,
    /// Messages kept as they are at the end of the history when compacting.
    #[serde(default = "default_keep_last")]
    pub keep_last: usize,
}

impl Default for HistorySettings {
    fn default() -> Self {
        Self {
            types: default_history_types(),
            strategy: CompactionStrategy::default(),
            budget_tokens: 0,
            keep_last: default_keep_last(),
        }
    }
}

fn default_keep_last() -> usize {
    20
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CompactionStrategy {
    #[default]
    None,
    Window,
    DropToolResults,
    Summarize,
}

fn default_history_types() -> Vec<HistoryType> {
    vec![HistoryType::Full, HistoryType::Compacted]
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum HistoryType {
    Full,
    Compacted,
}

impl HistoryType {
    pub fn as_str(self) -> &'static str {
        match self {
            HistoryType::Full => "full",
            HistoryType::Compacted => "compacted",
        }
    }
}

/// A configured secret: `Debug` prints `***`, so settings can be logged whole.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            f.write_str("\"\"")
        } else {
            f.write_str("\"***\"")
        }
    }
}

impl<'de> Deserialize<'de> for Secret {
    /// Environment variables are typed by their look: a numeric secret arrives as a number.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Scalar {
            Str(String),
            Int(i128),
            Float(f64),
            Bool(bool),
        }
        Ok(Secret(match Scalar::deserialize(deserializer)? {
            Scalar::Str(s) => s,
            Scalar::Int(i) => i.to_string(),
            Scalar::Float(f) => f.to_string(),
            Scalar::Bool(b) => b.to_string(),
        }))
    }
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
        let key = error.path.join(".");
        let message = error.kind.to_string();
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
        let mut settings: Settings = figment.extract()?;
        settings.resolve_environment(|name| std::env::var(name).ok())?;
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
        let mut settings: Settings = figment.extract()?;
        settings.resolve_environment(|name| std::env::var(name).ok())?;
        settings.validate()?;
        Ok(settings)
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
        for (i, agent) in self.agents.iter_mut().enumerate() {
            let resolve = |key: &str, value: &str| {
                crate::agents::template::resolve_env(value, &lookup).map_err(|name| {
                    ConfigError::new(
                        format!("agents[{i}].{key}"),
                        format!("environment variable `{name}` is not set"),
                    )
                })
            };
            agent.base_url = resolve("base_url", &agent.base_url)?;
            agent.api_key = Secret::new(resolve("api_key", agent.api_key.expose())?);
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
        self.auth.validate()?;
        self.engine.validate()?;
        if !self.secrets.key.is_empty() {
            crate::crypto::parse_key(self.secrets.key.expose())
                .map_err(|message| ConfigError::new("secrets.key", message))?;
        }
        tracing_subscriber::EnvFilter::try_new(&self.log.level)
            .map_err(|e| ConfigError::new("log.level", e.to_string()))?;
        self.validate_mcp_servers()?;
        self.validate_agents()
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
        let default = &self.agentscope.default_agent;
        if !default.is_empty() && !self.agents.iter().any(|a| a.name == *default) {
            return Err(ConfigError::new(
                "agentscope.default_agent",
                format!("`{default}` is not a configured agent"),
            ));
        }
        Ok(())
    }
}

impl AuthSettings {
    fn validate(&self) -> Result<(), ConfigError> {
        if !self.jwt_secret.is_empty() && self.jwt_secret.expose().len() < 32 {
            return Err(ConfigError::new(
                "auth.jwt_secret",
                "must be at least 32 bytes long",
            ));
        }
        if let Some(i) = self
            .jwt_previous_secrets
            .iter()
            .position(|s| s.expose().len() < 32)
        {
            return Err(ConfigError::new(
                format!("auth.jwt_previous_secrets[{i}]"),
                "must be at least 32 bytes long",
            ));
        }
        for (key, value) in [
            ("auth.token_ttl_seconds", self.token_ttl_seconds),
            ("auth.api_key_ttl_seconds", self.api_key_ttl_seconds),
        ] {
            if value == 0 || value > MAX_TOKEN_TTL_SECONDS {
                return Err(ConfigError::new(
                    key,
                    format!("must be between 1 and {MAX_TOKEN_TTL_SECONDS}"),
                ));
            }
        }
        if self.issuer.is_empty() {
            return Err(ConfigError::new("auth.issuer", "must not be empty"));
        }
        if self.audience.is_empty() {
            return Err(ConfigError::new("auth.audience", "must not be empty"));
        }
        for (key, value) in [
            (
                "auth.login_max_concurrent_checks",
                self.login_max_concurrent_checks as u64,
            ),
            (
                "auth.login_max_failures_per_client",
                u64::from(self.login_max_failures_per_client),
            ),
            (
                "auth.login_max_failures_per_address",
                u64::from(self.login_max_failures_per_address),
            ),
            (
                "auth.login_failure_window_seconds",
                self.login_failure_window_seconds,
            ),
            ("auth.login_tracked_keys", self.login_tracked_keys as u64),
        ] {
            if value == 0 {
                return Err(ConfigError::new(key, "must be at least 1"));
            }
        }
        Ok(())
    }
}

impl EngineSettings {
    fn validate(&self) -> Result<(), ConfigError> {
        for (key, value) in [
            ("engine.max_concurrent_turns", self.max_concurrent_turns),
            (
                "engine.max_concurrent_turns_per_tenant",
                self.max_concurrent_turns_per_tenant,
            ),
            ("engine.max_batch_events", self.max_batch_events),
            ("engine.subscriber_buffer", self.subscriber_buffer),
        ] {
            if value == 0 {
                return Err(ConfigError::new(key, "must be at least 1"));
            }
        }
        if self.sse_keep_alive_seconds == 0 {
            return Err(ConfigError::new(
                "engine.sse_keep_alive_seconds",
                "must be at least 1",
            ));
        }
        Ok(())
    }
}

/// Ten years: no token outlives this.
pub const MAX_TOKEN_TTL_SECONDS: u64 = 10 * 365 * 24 * 3600;

impl AgentSettings {
    fn validate(&self, at: &str, mcp_servers: &[McpServerSettings]) -> Result<(), ConfigError> {
        let mut option_names = std::collections::HashSet::new();
        for (j, option) in self.options.iter().enumerate() {
            let at = format!("{at}.options[{j}]");
            if !is_identifier(&option.name) {
                return Err(ConfigError::new(
                    format!("{at}.name"),
                    "must be 1-64 characters of A-Z a-z 0-9 . _ -",
                ));
            }
            if !option_names.insert(option.name.as_str()) {
                return Err(ConfigError::new(
                    format!("{at}.name"),
                    format!("option `{}` is declared twice", option.name),
                ));
            }
            match option.kind {
                OptionKind::Select => {
                    if option.options.is_empty() {
                        return Err(ConfigError::new(
                            format!("{at}.options"),
                            "a select option needs at least one value",
                        ));
                    }
                    if !option.options.iter().any(|o| o == option.default.expose()) {
                        return Err(ConfigError::new(
                            format!("{at}.default"),
                            "must be one of the option's values",
                        ));
                    }
                }
                OptionKind::Text | OptionKind::Secret => {
                    if !option.options.is_empty() {
                        return Err(ConfigError::new(
                            format!("{at}.options"),
                            "only select options list values",
                        ));
                    }
                }
            }
        }
        let mut tool_names = std::collections::HashSet::new();
        for (j, tool) in self.tools.iter().enumerate() {
            let at = format!("{at}.tools[{j}]");
            if !tool_names.insert(tool.name.as_str()) {
                return Err(ConfigError::new(
                    format!("{at}.name"),
                    format!("tool `{}` is declared twice", tool.name),
                ));
            }
            if let Some((server, name)) = split_tool_name(&tool.name) {
                tool.validate_mcp(&at, server, name, mcp_servers)?;
                continue;
            }
            if !is_identifier(&tool.name) {
                return Err(ConfigError::new(
                    format!("{at}.name"),
                    "must be 1-64 characters of A-Z a-z 0-9 . _ -",
                ));
            }
            if crate::tools::Builtin::named(&tool.name).is_none() {
                let known: Vec<&str> = crate::tools::Builtin::ALL
                    .iter()
                    .map(|b| b.name())
                    .collect();
                return Err(ConfigError::new(
                    format!("{at}.name"),
                    format!(
                        "unknown server tool `{}`; the built-ins are {}, and MCP tools are \
                         named `<server>.<tool>` or `<server>.*`",
                        tool.name,
                        known.join(", ")
                    ),
                ));
            }
            if let Some(parameters) = &tool.parameters
                && (!parameters.is_object() || jsonschema::validator_for(parameters).is_err())
            {
                return Err(ConfigError::new(
                    format!("{at}.parameters"),
                    "must be a valid JSON Schema object",
                ));
            }
        }
        if matches!(
            self.provider,
            ProviderKind::Openai | ProviderKind::Anthropic
        ) {
            if !(self.base_url.starts_with("http://") || self.base_url.starts_with("https://")) {
                return Err(ConfigError::new(
                    format!("{at}.base_url"),
                    "this provider needs an http:// or https:// base URL",
                ));
            }
            if self.model.is_empty() {
                return Err(ConfigError::new(
                    format!("{at}.model"),
                    "this provider needs a model",
                ));
            }
            if self.timeout_seconds == 0 {
                return Err(ConfigError::new(
                    format!("{at}.timeout_seconds"),
                    "must be at least 1",
                ));
            }
        }
        for (key, value) in [
            ("base_url", self.base_url.as_str()),
            ("api_key", self.api_key.expose()),
            ("model", self.model.as_str()),
            ("system_prompt", self.system_prompt.as_str()),
        ] {
            for name in crate::agents::template::option_references(value) {
                if !self.options.iter().any(|o| o.name == name) {
                    return Err(ConfigError::new(
                        format!("{at}.{key}"),
                        format!(
                            "refers to `{{{{options.{name}}}}}`, which is not an option of this agent"
                        ),
                    ));
                }
            }
        }
        if self.max_steps == 0 {
            return Err(ConfigError::new(
                format!("{at}.max_steps"),
                "must be at least 1",
            ));
        }
        if self.chunk_size == 0 {
            return Err(ConfigError::new(
                format!("{at}.chunk_size"),
                "must be at least 1",
            ));
        }
        if self.history.types.is_empty() {
            return Err(ConfigError::new(
                format!("{at}.history.types"),
                "must list at least one of \"full\", \"compacted\"",
            ));
        }
        for (key, schema) in [
            ("input_schema", &self.input_schema),
            ("output_schema", &self.output_schema),
        ] {
            for (j, part) in schema.iter().enumerate() {
                part.compile().map_err(|(field, message)| {
                    ConfigError::new(format!("{at}.{key}[{j}].{field}"), message)
                })?;
            }
        }
        Ok(())
    }
}

impl ToolSettings {
    /// An MCP tool reference: its server is configured; a wildcard overrides nothing, and
    /// the server's schema is the tool's.
    fn validate_mcp(
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

/// Names of agents, options and tools: short, printable, URL-safe.
pub fn is_identifier(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_defaults_are_valid() {
        let settings = Settings::from_toml("").expect("defaults load");
        assert_eq!(settings.server.bind, "127.0.0.1:8080");
        assert!(settings.database.url.expose().starts_with("sqlite:"));
        assert_eq!(settings.agents[0].name, "echo");
    }

    #[test]
    fn unknown_keys_are_named() {
        let err = Settings::from_toml("[server]\nbindd = \"x\"").unwrap_err();
        assert_eq!(err.key, "server.bindd");
        assert!(err.message.contains("bindd"), "{}", err.message);
    }

    #[test]
    fn invalid_values_name_their_key() {
        let err = Settings::from_toml("[server]\nbind = \"nowhere\"").unwrap_err();
        assert_eq!(err.key, "server.bind");
        let err = Settings::from_toml("[auth]\ntoken_ttl_seconds = \"soon\"").unwrap_err();
        assert_eq!(err.key, "auth.token_ttl_seconds");
        let err = Settings::from_toml(
            "[[agents]]\nname = \"a\"\nprovider = \"echo\"\n[[agents.options]]\nname = \"m\"\ntype = \"select\"\noptions = [\"x\"]\ndefault = \"y\"",
        )
        .unwrap_err();
        assert_eq!(err.key, "agents[0].options[0].default");
    }

    #[test]
    fn provider_placeholders_are_checked_at_load() {
        let agent = "[[agents]]\nname = \"a\"\nprovider = \"openai\"\nbase_url = \"http://x/v1\"\n";
        let err = Settings::from_toml(&format!("{agent}model = \"{{{{options.model}}}}\"\n"))
            .unwrap_err();
        assert_eq!(err.key, "agents[0].model");
        assert!(err.message.contains("options.model"), "{}", err.message);

        let err = Settings::from_toml(agent).unwrap_err();
        assert_eq!(err.key, "agents[0].model");

        let err = Settings::from_toml(&format!(
            "{agent}model = \"m\"\napi_key = \"${{AGENTRY_TEST_NEVER_SET}}\"\n"
        ))
        .unwrap_err();
        assert_eq!(err.key, "agents[0].api_key");
        assert!(err.message.contains("AGENTRY_TEST_NEVER_SET"));
        let mut ok = Settings::from_toml("").unwrap();
        ok.agents[0].system_prompt = "Hello ${WHO}".into();
        ok.resolve_environment(|name| (name == "WHO").then(|| "world".to_owned()))
            .unwrap();
        assert_eq!(ok.agents[0].system_prompt, "Hello world");
    }

    #[test]
    fn mcp_server_errors_name_their_key() {
        let agent = "[[agents]]\nname = \"a\"\nprovider = \"echo\"\n";
        let err = |toml: &str| Settings::from_toml(&format!("{toml}\n{agent}")).unwrap_err();
        let e = err("[[mcp_servers]]\nname = \"fs\"");
        assert_eq!(e.key, "mcp_servers[0].command");
        let e = err("[[mcp_servers]]\nname = \"fs\"\ncommand = \"x\"\nurl = \"http://h/mcp\"");
        assert_eq!(e.key, "mcp_servers[0].url");
        let e = err("[[mcp_servers]]\nname = \"Files.1\"\ncommand = \"x\"");
        assert_eq!(e.key, "mcp_servers[0].name");
        let e = err("[[mcp_servers]]\nname = \"fs\"\nurl = \"ftp://h\"");
        assert_eq!(e.key, "mcp_servers[0].url");
        let e = err("[[mcp_servers]]\nname = \"fs\"\ncommand = \"x\"\ntimeout_seconds = 0");
        assert_eq!(e.key, "mcp_servers[0].timeout_seconds");
        let e = err(
            "[[mcp_servers]]\nname = \"fs\"\ncommand = \"x\"\n[[mcp_servers]]\nname = \"fs\"\ncommand = \"y\"",
        );
        assert_eq!(e.key, "mcp_servers[1].name");
        let e = err("[[mcp_servers]]\nname = \"fs\"\ncommand = \"x\"\nbogus = 1");
        assert_eq!(e.key, "mcp_servers.0.bogus");
        let e = err("[[mcp_servers]]\nname = \"fs\"\ncommand = \"${AGENTRY_TEST_NEVER_SET}\"");
        assert_eq!(e.key, "mcp_servers[0].command");

        let server = "[[mcp_servers]]\nname = \"fs\"\ncommand = \"x\"\n";
        let tool = |name: &str, extra: &str| {
            Settings::from_toml(&format!(
                "{server}{agent}[[agents.tools]]\nname = \"{name}\"\n{extra}"
            ))
        };
        assert_eq!(
            tool("web.search", "").unwrap_err().key,
            "agents[0].tools[0].name"
        );
        assert!(tool("web.search", "").unwrap_err().message.contains("web"));
        assert_eq!(
            tool("fs.read", "parameters = { type = \"object\" }")
                .unwrap_err()
                .key,
            "agents[0].tools[0].parameters"
        );
        assert_eq!(
            tool("fs.*", "description = \"x\"").unwrap_err().key,
            "agents[0].tools[0].description"
        );
        assert!(tool("fs.read", "expose = false").is_ok());
        assert!(tool("fs.*", "").is_ok());
    }

    #[test]
    fn mcp_servers_read_the_environment() {
        let mut settings = Settings::from_toml(
            "[[mcp_servers]]\nname = \"gh\"\nurl = \"https://h/mcp\"\nheaders = { Authorization = \"Bearer x\" }",
        )
        .unwrap();
        settings.mcp_servers[0]
            .headers
            .insert("Authorization".into(), Secret::new("Bearer ${GH_TOKEN}"));
        settings
            .resolve_environment(|name| (name == "GH_TOKEN").then(|| "t0k".to_owned()))
            .unwrap();
        assert_eq!(
            settings.mcp_servers[0].headers["Authorization"].expose(),
            "Bearer t0k"
        );
        assert!(
            !format!("{settings:?}").contains("t0k"),
            "headers are secrets"
        );
    }

    #[test]
    fn secrets_never_print() {
        let secret = Secret::new("hunter2-hunter2");
        assert_eq!(format!("{secret:?}"), "\"***\"");
        let settings = Settings::from_toml("[auth]\nadmin_secret = \"hunter2-hunter2\"").unwrap();
        assert!(!format!("{settings:?}").contains("hunter2"));
    }
}
