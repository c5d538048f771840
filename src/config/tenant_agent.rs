//! A tenant's own agent as it sends it: the keys of an `[[agents]]` entry, with the model
//! API named by an operator's `[[connections]]` entry instead of a provider's keys. It is
//! checked by the same code as `[[agents]]` (the same message for the same mistake), then
//! by what the operator allows tenants; fields are named as JSON pointers.

use serde::Deserialize;
use serde_json::Value;

use super::{
    AgentSettings, ConfigError, ConnectionSettings, HistorySettings, ImageInput, McpServerSettings,
    OptionKind, OptionSettings, SchemaPartSettings, TenantAgentSettings, ToolSettings,
    is_identifier, split_tool_name, unknown_connection,
};
use crate::model::FieldError;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentSpec {
    /// Required when the agent is created; on an update, if given, the agent's own name.
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub title: Option<String>,
    /// A free version label shown in `/meta` (the version numbers are agentry's).
    #[serde(default)]
    pub version: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    /// The `[[connections]]` entry whose model API the agent calls.
    pub connection: String,
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
    #[serde(default)]
    pub input_schema: Vec<SchemaPartSettings>,
    #[serde(default)]
    pub output_schema: Vec<SchemaPartSettings>,
    #[serde(default)]
    pub max_steps: Option<usize>,
}

/// What the operator lets tenant agents use.
#[derive(Debug, Clone, Copy)]
pub struct AgentPolicy<'a> {
    pub connections: &'a [ConnectionSettings],
    pub limits: &'a TenantAgentSettings,
    pub mcp_servers: &'a [McpServerSettings],
}

/// A dotted key below an agent (`.options[0].name`, `input_schema[1].glob`) as a JSON
/// pointer (`/options/0/name`).
pub fn pointer(key: &str) -> String {
    let mut out = String::new();
    for segment in key.split('.').filter(|s| !s.is_empty()) {
        for piece in segment.split('[') {
            let piece = piece.trim_end_matches(']');
            if !piece.is_empty() {
                out.push('/');
                out.push_str(&piece.replace('~', "~0").replace('/', "~1"));
            }
        }
    }
    out
}

fn invalid(at: &str, message: impl Into<String>) -> FieldError {
    FieldError::new(at, message)
}

impl From<ConfigError> for FieldError {
    fn from(error: ConfigError) -> Self {
        FieldError::new(pointer(&error.key), error.message)
    }
}

impl AgentSpec {
    /// Reads a body: an unknown key or a value of the wrong type is named by its pointer.
    pub fn parse(body: Value) -> Result<AgentSpec, FieldError> {
        serde_path_to_error::deserialize(body).map_err(|error| {
            let path = error.path().to_string();
            let field = if path == "." {
                String::new()
            } else {
                pointer(&path)
            };
            let message = error.inner().to_string();
            FieldError::new(if field.is_empty() { "/" } else { &field }, message)
        })
    }

    /// The agent's settings, checked as `[[agents]]` is, then against the policy.
    pub fn settings(
        &self,
        name: &str,
        policy: AgentPolicy<'_>,
    ) -> Result<AgentSettings, FieldError> {
        if !is_identifier(name) {
            return Err(invalid(
                "/name",
                "must be 1-64 characters of A-Z a-z 0-9 . _ -",
            ));
        }
        let limit = policy.limits.max_prompt_bytes;
        if self.system_prompt.len() > limit {
            return Err(invalid(
                "/system_prompt",
                format!("is longer than tenant_agents.max_prompt_bytes ({limit} bytes)"),
            ));
        }
        let connection = policy
            .connections
            .iter()
            .find(|c| c.name == self.connection)
            .ok_or_else(|| {
                invalid(
                    "/connection",
                    unknown_connection(&self.connection, policy.connections),
                )
            })?;
        let provider = connection.provider_settings();
        let settings = AgentSettings {
            name: name.to_owned(),
            title: self.title.clone(),
            version: self.version.clone().unwrap_or_else(|| "0.1.0".to_owned()),
            description: self.description.clone(),
            provider,
            model: self.model.clone(),
            system_prompt: self.system_prompt.clone(),
            image_inputs: self.image_inputs.clone(),
            options: self.options.clone(),
            tools: self.tools.clone(),
            history: self.history.clone(),
            input_schema: self.input_schema.clone(),
            output_schema: self.output_schema.clone(),
            max_steps: self.max_steps.unwrap_or(16),
            tenants: Vec::new(),
            connection: Some(connection.name.clone()),
        };
        // The rules of `[[agents]]`, word for word.
        settings.validate("", policy.mcp_servers)?;
        self.check_policy(connection, policy)?;
        Ok(settings)
    }

    /// What only a tenant's agent must respect: the connection's models, the allowed tools
    /// and servers, and no stored secrets.
    fn check_policy(
        &self,
        connection: &ConnectionSettings,
        policy: AgentPolicy<'_>,
    ) -> Result<(), FieldError> {
        connection
            .check_model(&self.model, &self.options)
            .map_err(|message| invalid("/model", message))?;
        for (i, option) in self.options.iter().enumerate() {
            if option.kind == OptionKind::Secret && !option.default.is_empty() {
                return Err(invalid(
                    &format!("/options/{i}/default"),
                    "a tenant agent's secret option has no default: each session sets it",
                ));
            }
        }
        for (i, tool) in self.tools.iter().enumerate() {
            let at = format!("/tools/{i}/name");
            match split_tool_name(&tool.name) {
                Some((server, _)) => {
                    if !policy
                        .limits
                        .allowed_mcp_servers
                        .iter()
                        .any(|s| s == server)
                    {
                        return Err(invalid(
                            &at,
                            format!(
                                "MCP server `{server}` is not allowed for tenant agents \
                                 (tenant_agents.allowed_mcp_servers)"
                            ),
                        ));
                    }
                }
                None => {
                    if !policy.limits.allowed_tools.contains(&tool.name) {
                        return Err(invalid(
                            &at,
                            format!(
                                "tool `{}` is not allowed for tenant agents; allowed: {}",
                                tool.name,
                                if policy.limits.allowed_tools.is_empty() {
                                    "none".to_owned()
                                } else {
                                    format!("`{}`", policy.limits.allowed_tools.join("`, `"))
                                }
                            ),
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::pointer;

    #[test]
    fn keys_become_json_pointers() {
        assert_eq!(pointer(".options[0].name"), "/options/0/name");
        assert_eq!(pointer("input_schema[1].glob"), "/input_schema/1/glob");
        assert_eq!(pointer(".model"), "/model");
        assert_eq!(pointer("history.types"), "/history/types");
    }
}
