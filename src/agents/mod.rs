//! The agents this server hosts, as configured, and the rules a session's configuration
//! must follow to use one.

mod session_config;
pub mod template;

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::config::{
    AgentSettings, HistoryType, ImageInput, OptionKind, OptionSettings, ProviderKind, ToolSettings,
    split_tool_name,
};
use crate::model::{BodySchema, ImageSource, ToolSpec};
use crate::tools::mcp::{McpRegistry, McpTool};
use crate::tools::{ArgumentSchema, Builtin};

pub use session_config::{BodyFault, REDACTED, ResolvedSessionConfig, SessionConfigRequest};

/// What runs a server tool the agent is configured with.
#[derive(Debug, Clone, PartialEq)]
pub enum ServerTool {
    Builtin {
        spec: ToolSpec,
        builtin: Builtin,
    },
    /// A tool of an MCP server; its schema is whatever the server lists when it runs.
    Mcp {
        server: String,
        tool: String,
    },
}

fn tool_spec(settings: &ToolSettings) -> ToolSpec {
    let builtin = Builtin::named(&settings.name).expect("a built-in's settings");
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
    pub fn from_settings(settings: &[AgentSettings], mcp: &Arc<McpRegistry>) -> Self {
        Self {
            agents: settings
                .iter()
                .map(|s| Agent::from_settings(s.clone(), mcp))
                .collect(),
        }
    }

    pub fn get(&self, name: &str) -> Option<&Arc<Agent>> {
        self.agents.iter().find(|a| a.settings.name == name)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<Agent>> {
        self.agents.iter()
    }

    /// Why `name` names no agent, with the names that do (`unknown agent `x`; the agents
    /// here: `echo`, `assistant``).
    pub fn unknown(&self, name: &str) -> String {
        format!("unknown agent `{name}`; {}", self.listed())
    }

    /// The agents' names, for a message: `the agents here: `echo`, `assistant``.
    pub fn listed(&self) -> String {
        if self.agents.is_empty() {
            return "this server serves no agents".to_owned();
        }
        let names: Vec<String> = self
            .agents
            .iter()
            .map(|a| format!("`{}`", a.settings.name))
            .collect();
        format!("the agents here: {}", names.join(", "))
    }
}

/// One configured agent.
#[derive(Debug)]
pub struct Agent {
    settings: AgentSettings,
    /// The argument schemas of the built-in tools, compiled once.
    arguments: std::collections::HashMap<String, ArgumentSchema>,
    input_schema: BodySchema,
    output_schema: BodySchema,
    mcp: Arc<McpRegistry>,
}

impl Agent {
    /// An agent of checked settings (configured, or a tenant's version).
    pub fn from_settings(settings: AgentSettings, mcp: &Arc<McpRegistry>) -> Arc<Agent> {
        let compile = |parts: &[crate::config::SchemaPartSettings]| BodySchema {
            parts: parts
                .iter()
                .map(|p| p.compile().expect("schemas are checked with the settings"))
                .collect(),
        };
        let arguments = settings
            .tools
            .iter()
            .filter(|t| split_tool_name(&t.name).is_none())
            .map(|t| {
                let spec = tool_spec(t);
                (t.name.clone(), ArgumentSchema::compile(&spec.parameters))
            })
            .collect();
        Arc::new(Agent {
            arguments,
            input_schema: compile(&settings.input_schema),
            output_schema: compile(&settings.output_schema),
            settings,
            mcp: mcp.clone(),
        })
    }

    pub fn name(&self) -> &str {
        &self.settings.name
    }

    pub fn settings(&self) -> &AgentSettings {
        &self.settings
    }

    /// Whether a caller sees the agent: a configured agent limited to some tenants is
    /// visible to them only (never to an anonymous caller).
    pub fn visible_to(&self, tenant: Option<&crate::model::TenantId>) -> bool {
        let only = &self.settings.tenants;
        only.is_empty() || tenant.is_some_and(|t| only.iter().any(|o| *o == t.to_string()))
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

    /// The model a turn with these options calls, as a metrics label: filled in when the
    /// configured model refers only to select options (whose values are configured too),
    /// else the configured text itself, so what a client types never becomes a label.
    pub fn model_label(&self, options: &std::collections::BTreeMap<String, String>) -> String {
        let model = &self.settings.model;
        let bounded = crate::config::option_references(model).iter().all(|name| {
            self.option(name)
                .is_some_and(|o| o.kind == crate::config::OptionKind::Select)
        });
        if bounded {
            template::render_options(model, options)
        } else {
            model.clone()
        }
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
            self.settings.provider.kind(),
            ProviderKind::Openai | ProviderKind::Anthropic
        )
    }

    /// Server tools a client may enable for a session: built-ins, and the tools of
    /// connected MCP servers.
    pub fn exposed_tools(&self) -> impl Iterator<Item = ToolSpec> + use<> {
        self.server_tools(true).into_iter()
    }

    /// Internal server tools: always on and trusted.
    pub fn internal_tools(&self) -> impl Iterator<Item = ToolSpec> + use<> {
        self.server_tools(false).into_iter()
    }

    /// The configured server tools that exist now, in configuration order; an MCP server's
    /// tools are absent while it is down.
    fn server_tools(&self, exposed: bool) -> Vec<ToolSpec> {
        let mut specs = Vec::new();
        for settings in self.settings.tools.iter().filter(|t| t.expose == exposed) {
            let Some((server, tool)) = split_tool_name(&settings.name) else {
                specs.push(tool_spec(settings));
                continue;
            };
            let listed = self.mcp.tools(server);
            if tool == "*" {
                for found in listed.iter() {
                    let name = format!("{server}.{}", found.name);
                    if !self.settings.tools.iter().any(|t| t.name == name) {
                        specs.push(mcp_spec(name, found, None));
                    }
                }
            } else if let Some(found) = listed.iter().find(|t| t.name == tool) {
                specs.push(mcp_spec(settings.name.clone(), found, Some(settings)));
            }
        }
        specs
    }

    /// The configuration entry a server tool's name falls under: its own, or its MCP
    /// server's `<server>.*`.
    fn tool_settings(&self, name: &str) -> Option<&ToolSettings> {
        let tools = &self.settings.tools;
        let mcp = split_tool_name(name);
        if mcp.is_some_and(|(_, tool)| tool == "*") {
            return None;
        }
        if let Some(exact) = tools.iter().find(|t| t.name == name) {
            return Some(exact);
        }
        let (server, _) = mcp?;
        let wildcard = format!("{server}.*");
        tools.iter().find(|t| t.name == wildcard)
    }

    /// A server tool as configured, and whether it is exposed (or internal). An MCP tool is
    /// known by its configuration, whether or not its server is up.
    pub fn server_tool(&self, name: &str) -> Option<(ServerTool, bool)> {
        let settings = self.tool_settings(name)?;
        let tool = match split_tool_name(name) {
            Some((server, tool)) => ServerTool::Mcp {
                server: server.to_owned(),
                tool: tool.to_owned(),
            },
            None => ServerTool::Builtin {
                spec: tool_spec(settings),
                builtin: Builtin::named(name)?,
            },
        };
        Some((tool, settings.expose))
    }

    /// A built-in tool's compiled argument schema.
    pub fn builtin_arguments(&self, name: &str) -> Option<&ArgumentSchema> {
        self.arguments.get(name)
    }

    /// Whether the tool comes from an MCP server.
    pub fn is_mcp_tool(&self, name: &str) -> bool {
        matches!(self.server_tool(name), Some((ServerTool::Mcp { .. }, _)))
    }

    /// The agent's MCP tool entries as configured (`<server>.<tool>` or `<server>.*`).
    pub fn mcp_tool_patterns(&self) -> Vec<String> {
        self.settings
            .tools
            .iter()
            .filter(|t| split_tool_name(&t.name).is_some())
            .map(|t| t.name.clone())
            .collect()
    }

    pub fn has_server_tool(&self, name: &str) -> bool {
        self.tool_settings(name).is_some()
    }

    /// Whether a client may enable the tool: exposed, and either named in the configuration
    /// or listed now by its MCP server.
    pub fn is_exposed_tool(&self, name: &str) -> bool {
        let Some(settings) = self.tool_settings(name) else {
            return false;
        };
        if !settings.expose {
            return false;
        }
        match split_tool_name(name) {
            Some((server, tool)) if settings.name != name => {
                self.mcp.tools(server).iter().any(|t| t.name == tool)
            }
            _ => true,
        }
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

/// An MCP tool as a server tool of the agent: the server's schema, the configuration's
/// title and description when it gives them.
fn mcp_spec(name: String, tool: &McpTool, settings: Option<&ToolSettings>) -> ToolSpec {
    ToolSpec {
        name,
        title: settings
            .and_then(|s| s.title.clone())
            .or_else(|| tool.title.clone()),
        description: settings
            .and_then(|s| s.description.clone())
            .unwrap_or_else(|| tool.description.clone()),
        parameters: tool.input_schema.clone(),
    }
}
