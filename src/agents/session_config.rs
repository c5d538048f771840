//! Validating what a client asks of an agent for a session: options, server tools, client
//! tools and seed messages. Errors name the request field at fault.

use std::collections::{BTreeMap, HashSet};

use super::Agent;
use crate::agents::template::{check_url_value, url_placeholders};
use crate::config::OptionKind;
use crate::model::{
    Content, FieldError, HistoryMessage, ImageSource, ServerToolRef, ToolSpec, check_no_nul,
    holds_nul,
};

/// A client's session configuration, parsed but not yet checked against the agent.
#[derive(Debug, Clone, Default)]
pub struct SessionConfigRequest {
    /// Server tools to enable; `None` keeps the current ones (every exposed tool off at
    /// creation).
    pub server_tools: Option<Vec<ServerToolRef>>,
    pub options: BTreeMap<String, String>,
    pub client_tools: Option<Vec<ToolSpec>>,
}

/// How every read shows a secret option's value. Sent back on an update it keeps the
/// stored secret; at creation it is refused (there is nothing to keep).
pub const REDACTED: &str = "***";

/// The configuration to store: options split into plain and secret values.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedSessionConfig {
    pub server_tools: Vec<ServerToolRef>,
    pub options: BTreeMap<String, String>,
    pub secret_options: BTreeMap<String, String>,
    pub client_tools: Vec<ToolSpec>,
}

impl Agent {
    /// Checks one option value; returns the option's kind.
    pub fn check_option(&self, name: &str, value: &str) -> Result<OptionKind, FieldError> {
        check_no_nul("agent.options", name)?;
        check_no_nul(format!("agent.options.{name}"), value)?;
        let option = self.option(name).ok_or_else(|| {
            FieldError::new(
                format!("agent.options.{name}"),
                format!("agent `{}` has no option `{name}`", self.name()),
            )
        })?;
        if let Some(api) = self.settings().provider.http() {
            for (_, part) in url_placeholders(&api.base_url)
                .into_iter()
                .filter(|(option, _)| *option == name)
            {
                check_url_value(part, value)
                    .map_err(|reason| FieldError::new(format!("agent.options.{name}"), reason))?;
            }
        }
        if option.kind == OptionKind::Select && !option.options.iter().any(|o| o == value) {
            return Err(FieldError::new(
                format!("agent.options.{name}"),
                format!("must be one of: {}", option.options.join(", ")),
            ));
        }
        Ok(option.kind)
    }

    /// Server tools to enable: exposed by the agent, each once.
    pub fn check_server_tools(&self, tools: &[ServerToolRef]) -> Result<(), FieldError> {
        let mut enabled = HashSet::new();
        for (i, tool) in tools.iter().enumerate() {
            let field = format!("agent.tools[{i}].name");
            if !self.is_exposed_tool(&tool.name) {
                return Err(FieldError::new(
                    field,
                    format!(
                        "agent `{}` exposes no server tool `{}`",
                        self.name(),
                        tool.name
                    ),
                ));
            }
            if !enabled.insert(tool.name.as_str()) {
                return Err(FieldError::new(
                    field,
                    format!("server tool `{}` is listed twice", tool.name),
                ));
            }
        }
        Ok(())
    }

    /// Client tools: uniquely named, not named like a server tool, and accepted at all.
    pub fn check_client_tools(&self, tools: &[ToolSpec]) -> Result<(), FieldError> {
        let mut names = HashSet::new();
        for (i, tool) in tools.iter().enumerate() {
            let field = format!("tools[{i}].name");
            if tool.name.is_empty() {
                return Err(FieldError::new(field, "must not be empty"));
            }
            if holds_nul(tool) {
                return Err(FieldError::new(
                    format!("tools[{i}]"),
                    "must not contain U+0000 (NUL) in its name, description or parameters",
                ));
            }
            if self.has_server_tool(&tool.name) {
                return Err(FieldError::new(
                    field,
                    format!(
                        "`{}` is also a server tool of agent `{}`; tool names must be unique",
                        tool.name,
                        self.name()
                    ),
                ));
            }
            if !names.insert(tool.name.as_str()) {
                return Err(FieldError::new(
                    field,
                    format!("client tool `{}` is declared twice", tool.name),
                ));
            }
            if !tool.parameters.is_object() {
                return Err(FieldError::new(
                    format!("tools[{i}].parameters"),
                    "must be a JSON Schema object",
                ));
            }
        }
        if !tools.is_empty() && !self.accepts_client_tools() {
            return Err(FieldError::new(
                "tools",
                format!("agent `{}` does not accept client tools", self.name()),
            ));
        }
        Ok(())
    }

    /// Checks a new session's configuration and fills omitted options with their defaults.
    pub fn resolve_new_session(
        &self,
        request: SessionConfigRequest,
    ) -> Result<ResolvedSessionConfig, FieldError> {
        let mut options = BTreeMap::new();
        let mut secret_options = BTreeMap::new();
        let provided = request.options.into_iter().map(|(name, value)| {
            let kind = self.check_option(&name, &value)?;
            if kind == OptionKind::Secret && value == REDACTED {
                return Err(FieldError::new(
                    format!("agent.options.{name}"),
                    format!(
                        "`{REDACTED}` is how a secret reads back, not a secret: send the value \
                         itself, or omit the option for its default"
                    ),
                ));
            }
            Ok((name, (kind, value)))
        });
        let provided: BTreeMap<_, _> = provided.collect::<Result<_, FieldError>>()?;
        let mut all = self.default_options();
        all.extend(provided);
        for (name, (kind, value)) in all {
            match kind {
                OptionKind::Secret => secret_options.insert(name, value),
                OptionKind::Text | OptionKind::Select => options.insert(name, value),
            };
        }
        let server_tools = request.server_tools.unwrap_or_default();
        self.check_server_tools(&server_tools)?;
        let client_tools = request.client_tools.unwrap_or_default();
        self.check_client_tools(&client_tools)?;
        Ok(ResolvedSessionConfig {
            server_tools,
            options,
            secret_options,
            client_tools,
        })
    }

    /// Checks that the agent can read every block of the messages (images by source).
    pub fn check_messages(&self, messages: &[HistoryMessage]) -> Result<(), FieldError> {
        for (i, message) in messages.iter().enumerate() {
            let Some(content) = message.content() else {
                continue;
            };
            let path = format!("messages[{i}].content");
            self.check_content(content, &path)?;
            if let HistoryMessage::User { content } = message {
                self.check_input_body(content, &path)?;
            }
        }
        Ok(())
    }

    /// Checks a user message's body against the agent's input schema; the error names the
    /// offending part.
    pub fn check_input_body(&self, content: &Content, path: &str) -> Result<(), FieldError> {
        self.input_body_fault(content)
            .map_or(Ok(()), |f| Err(f.at(path)))
    }

    /// What of a user message's body the agent's input schema refuses, if anything.
    pub fn input_body_fault(&self, content: &Content) -> Option<BodyFault> {
        let violation = self.input_schema().check(&content.to_parts()).err()?;
        Some(BodyFault {
            part: violation
                .part
                .filter(|_| matches!(content, Content::Blocks(_))),
            suffix: "",
            reason: format!(
                "{} (input schema of agent `{}`)",
                violation.message,
                self.name()
            ),
            unsupported_type: violation.unsupported_type,
            detail: violation.message,
        })
    }

    /// Checks one message body at `path`.
    pub fn check_content(&self, content: &Content, path: &str) -> Result<(), FieldError> {
        self.content_fault(content)
            .map_or(Ok(()), |f| Err(f.at(path)))
    }

    /// The first block of a message body the agent cannot read (an image by source).
    pub fn content_fault(&self, content: &Content) -> Option<BodyFault> {
        for (j, block) in content.blocks().iter().enumerate() {
            if let Some(source) = block.image_source()
                && !self.accepts_image(source)
            {
                let reason = format!(
                    "agent `{}` does not accept {} images",
                    self.name(),
                    match source {
                        ImageSource::Https => "https://",
                        ImageSource::Data => "data:",
                    }
                );
                return Some(BodyFault {
                    part: Some(j),
                    suffix: ".url",
                    detail: reason.clone(),
                    reason,
                    unsupported_type: false,
                });
            }
        }
        None
    }
}

/// What an agent refuses in a message body: the block at fault (when one is), what follows
/// it in a field path (`.url`), and why: `reason` names the agent, `detail` is the fault
/// alone (for faces whose error already names what was refused).
#[derive(Debug, Clone, PartialEq)]
pub struct BodyFault {
    pub part: Option<usize>,
    pub suffix: &'static str,
    pub reason: String,
    pub detail: String,
    /// The block's content type is one the agent's input schema takes nowhere.
    pub unsupported_type: bool,
}

impl BodyFault {
    /// The fault as a field error of the body at `path` (`messages[0].content[2].url`).
    pub fn at(&self, path: &str) -> FieldError {
        let field = match self.part {
            Some(j) => format!("{path}[{j}]{}", self.suffix),
            None => path.to_owned(),
        };
        FieldError::new(field, self.reason.clone())
    }
}
