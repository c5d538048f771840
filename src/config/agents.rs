//! `[[agents]]`: an agent's identity, provider, prompt, tools, options and histories.

use serde::Deserialize;

use super::{
    CompactionStrategy, ConfigError, HistoryType, McpServerSettings, OptionKind, OptionSettings,
    ProviderSettings, SchemaPartSettings, ToolSettings, is_identifier, option_references,
    split_tool_name,
};
use crate::model::Builtin;

/// Unknown keys are denied by the provider's settings, which receive every key not named
/// here (serde denies none beside a flattened field).
#[derive(Debug, Clone, Deserialize)]
pub struct AgentSettings {
    pub name: String,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default = "default_agent_version")]
    pub version: String,
    #[serde(default)]
    pub description: Option<String>,
    /// `provider = "echo" | "openai" | "anthropic"`, and that provider's keys.
    #[serde(flatten)]
    pub provider: ProviderSettings,
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
    /// Most model calls in one turn; a model still calling tools then is stopped.
    #[serde(default = "default_max_steps")]
    pub max_steps: usize,
    /// The tenants (ids) that see and use the agent; empty: every tenant, and anonymous
    /// callers of `/meta` and the public A2A card.
    #[serde(default)]
    pub tenants: Vec<String>,
    /// The `[[connections]]` entry the agent's provider and its settings come from, in
    /// place of `provider` and its keys (see `Settings::resolve_connections`).
    #[serde(default)]
    pub connection: Option<String>,
}

fn default_max_steps() -> usize {
    16
}

fn default_agent_version() -> String {
    "0.1.0".to_owned()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ImageInput {
    Http,
    Data,
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

fn default_history_types() -> Vec<HistoryType> {
    vec![HistoryType::Full, HistoryType::Compacted]
}

impl AgentSettings {
    pub(super) fn validate(
        &self,
        at: &str,
        mcp_servers: &[McpServerSettings],
    ) -> Result<(), ConfigError> {
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
            if Builtin::named(&tool.name).is_none() {
                let known: Vec<&str> = Builtin::ALL.iter().map(|b| b.name()).collect();
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
        if let Some(api) = self.provider.http() {
            if !(api.base_url.starts_with("http://") || api.base_url.starts_with("https://")) {
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
            if api
                .base_url
                .split_once('#')
                .is_some_and(|(_, f)| f.contains("{{"))
            {
                return Err(ConfigError::new(
                    format!("{at}.base_url"),
                    "an option in the fragment is never sent: put it in the host, path or query",
                ));
            }
            if api.timeout_seconds == 0 {
                return Err(ConfigError::new(
                    format!("{at}.timeout_seconds"),
                    "must be at least 1",
                ));
            }
        }
        let (base_url, api_key) = self.provider.http().map_or(("", ""), |api| {
            (api.base_url.as_str(), api.api_key.expose())
        });
        for (key, value) in [
            ("base_url", base_url),
            ("api_key", api_key),
            ("model", self.model.as_str()),
            ("system_prompt", self.system_prompt.as_str()),
        ] {
            for name in option_references(value) {
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
        for (j, tenant) in self.tenants.iter().enumerate() {
            if tenant.parse::<crate::model::TenantId>().is_err() {
                return Err(ConfigError::new(
                    format!("{at}.tenants[{j}]"),
                    format!("`{tenant}` is not a tenant id (`ten_…`)"),
                ));
            }
        }
        if self.max_steps == 0 {
            return Err(ConfigError::new(
                format!("{at}.max_steps"),
                "must be at least 1",
            ));
        }
        if let ProviderSettings::Echo(echo) = &self.provider
            && echo.chunk_size == 0
        {
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
