//! The agents this server hosts, as configured, and the rules a session's configuration
//! must follow to use one.

mod session_config;
pub mod template;

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::config::{
    AgentSettings, HistoryType, ImageInput, OptionKind, OptionSettings, ProviderKind,
};
use crate::model::{BodySchema, ImageSource, ToolSpec};
use crate::tools::Builtin;

pub use session_config::{ResolvedSessionConfig, SessionConfigRequest};

fn tool_spec(settings: &crate::config::ToolSettings) -> ToolSpec {
    let builtin = Builtin::named(&settings.name).expect("configuration names only built-ins");
    ToolSpec {
        name: settings.name.clone(),
        title: settings.title.clone(),
        description: settings
            .description
            .clone()
            .unwrap_or_else(|| builtin.description().to_owned()),
        parameters: settings
            .parameters
            .clone()
            .unwrap_or_else(|| builtin.parameters()),
    }
}

/// Every configured agent, in configuration order.
#[derive(Debug, Clone)]
pub struct Agents {
    agents: Vec<Arc<Agent>>,
}

impl Agents {
    pub fn from_settings(settings: &[AgentSettings]) -> Self {
        Self {
            agents: settings
                .iter()
                .map(|s| {
                    let compile = |parts: &[crate::config::SchemaPartSettings]| BodySchema {
                        parts: parts
                            .iter()
                            .map(|p| p.compile().expect("schemas are checked with the settings"))
                            .collect(),
                    };
                    Arc::new(Agent {
                        input_schema: compile(&s.input_schema),
                        output_schema: compile(&s.output_schema),
                        settings: s.clone(),
                    })
                })
                .collect(),
        }
    }

    pub fn get(&self, name: &str) -> Option<&Arc<Agent>> {
        self.agents.iter().find(|a| a.settings.name == name)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<Agent>> {
        self.agents.iter()
    }
}

/// One configured agent.
#[derive(Debug)]
pub struct Agent {
    settings: AgentSettings,
    input_schema: BodySchema,
    output_schema: BodySchema,
}

impl Agent {
    pub fn name(&self) -> &str {
        &self.settings.name
    }

    pub fn settings(&self) -> &AgentSettings {
        &self.settings
    }

    /// The message bodies the agent accepts (empty: any).
    pub fn input_schema(&self) -> &BodySchema {
        &self.input_schema
    }

    /// The message bodies the agent writes (empty: any).
    pub fn output_schema(&self) -> &BodySchema {
        &self.output_schema
    }

    pub fn option(&self, name: &str) -> Option<&OptionSettings> {
        self.settings.options.iter().find(|o| o.name == name)
    }

    pub fn declares_history(&self, kind: HistoryType) -> bool {
        self.settings.history.types.contains(&kind)
    }

    pub fn accepts_image(&self, source: ImageSource) -> bool {
        let wanted = match source {
            ImageSource::Https => ImageInput::Http,
            ImageSource::Data => ImageInput::Data,
        };
        self.settings.image_inputs.contains(&wanted)
    }

    /// Whether the agent's provider can call tools the client declares.
    pub fn accepts_client_tools(&self) -> bool {
        matches!(
            self.settings.provider,
            ProviderKind::Openai | ProviderKind::Anthropic
        )
    }

    /// Server tools a client may enable for a session.
    pub fn exposed_tools(&self) -> impl Iterator<Item = ToolSpec> + '_ {
        self.settings
            .tools
            .iter()
            .filter(|t| t.expose)
            .map(tool_spec)
    }

    /// Internal server tools: always on and trusted.
    pub fn internal_tools(&self) -> impl Iterator<Item = ToolSpec> + '_ {
        self.settings
            .tools
            .iter()
            .filter(|t| !t.expose)
            .map(tool_spec)
    }

    /// A server tool's declaration (the built-in's, with the configuration's overrides).
    pub fn server_tool(&self, name: &str) -> Option<(ToolSpec, Builtin, bool)> {
        let settings = self.settings.tools.iter().find(|t| t.name == name)?;
        let builtin = Builtin::named(name)?;
        Some((tool_spec(settings), builtin, settings.expose))
    }

    /// Whether the tool comes from an MCP server.
    pub fn is_mcp_tool(&self, _name: &str) -> bool {
        false
    }

    pub fn has_server_tool(&self, name: &str) -> bool {
        self.settings.tools.iter().any(|t| t.name == name)
    }

    pub fn is_exposed_tool(&self, name: &str) -> bool {
        self.settings
            .tools
            .iter()
            .any(|t| t.name == name && t.expose)
    }

    /// Every declared option at its default value, secret ones included.
    pub fn default_options(&self) -> BTreeMap<String, (OptionKind, String)> {
        self.settings
            .options
            .iter()
            .map(|o| (o.name.clone(), (o.kind, o.default.expose().to_owned())))
            .collect()
    }
}
