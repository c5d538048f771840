//! Model providers: given the conversation so far, stream what the model says.

mod anthropic;
mod echo;
mod http;
mod openai;
pub mod tool_names;

use std::collections::BTreeMap;
use std::sync::Arc;

use futures_util::stream::BoxStream;

use crate::config::{AgentSettings, ProviderSettings};
use crate::model::{HistoryMessage, StopReason, ToolSpec};

pub use anthropic::AnthropicProvider;
pub use echo::EchoProvider;
pub use openai::OpenAiProvider;

/// What the agent loop asks of a model for one step.
#[derive(Debug, Clone)]
pub struct ModelRequest {
    /// Shared by every step of a turn, like the options and tools.
    pub system_prompt: Arc<str>,
    /// Shared with the session's cached history: a step copies pointers, not messages.
    /// The whole compacted history, or only its end from the last user message on for a
    /// provider that [reads no more](Provider::reads_only_last_exchange).
    pub messages: Vec<Arc<HistoryMessage>>,
    /// The JSON length of the whole compacted history, whatever `messages` holds: kept as
    /// the history grows, so estimating a request does not read every message again.
    pub history_chars: usize,
    /// The session's options, secrets decrypted: never log this.
    pub options: Arc<BTreeMap<String, String>>,
    /// Tools the model may call.
    pub tools: Arc<[ToolSpec]>,
}

/// One streamed piece of a model's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelEvent {
    /// The model that answers, as the provider names it (for traces).
    ResponseModel(String),
    ThinkingDelta(String),
    TextDelta(String),
    Usage {
        input_tokens: u64,
        output_tokens: u64,
    },
    /// A whole tool call, once its streamed fragments are complete.
    ToolCall {
        id: String,
        name: String,
        input: serde_json::Map<String, serde_json::Value>,
    },
    Stop(StopReason),
}

#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct ProviderError {
    /// Safe to show a client: no keys, no raw bodies.
    pub message: String,
}

impl ModelRequest {
    /// [`estimate_tokens`] of the whole request, from the history's kept length.
    pub fn estimated_tokens(&self) -> u64 {
        let chars = self.history_chars
            + self.tools.iter().map(crate::model::json_len).sum::<usize>()
            + self.system_prompt.len();
        chars.div_ceil(4) as u64
    }
}

pub trait Provider: Send + Sync {
    fn stream(
        &self,
        request: ModelRequest,
    ) -> BoxStream<'static, Result<ModelEvent, ProviderError>>;

    /// Whether the model reads only the end of the history, from its last user message on
    /// (the echo): its requests then carry only that end, and the history's length.
    fn reads_only_last_exchange(&self) -> bool {
        false
    }
}

/// The provider an agent's configuration names.
pub fn for_agent(settings: &AgentSettings, http: &reqwest::Client) -> Box<dyn Provider> {
    let model = &settings.model;
    match &settings.provider {
        ProviderSettings::Echo(echo) => Box::new(EchoProvider::new(echo)),
        ProviderSettings::Openai(api) => Box::new(OpenAiProvider::new(http.clone(), model, api)),
        ProviderSettings::Anthropic(api) => {
            Box::new(AnthropicProvider::new(http.clone(), model, api))
        }
    }
}

/// Tokens estimated from text length (about four characters a token): the system prompt,
/// the messages and the tool declarations the model is fed, before any correction by what
/// the provider reports.
pub fn estimate_tokens<M: std::borrow::Borrow<HistoryMessage>>(
    system_prompt: &str,
    messages: &[M],
    tools: &[ToolSpec],
) -> u64 {
    let chars: usize = messages
        .iter()
        .map(|m| crate::model::json_len(m.borrow()))
        .sum::<usize>()
        + tools.iter().map(crate::model::json_len).sum::<usize>()
        + system_prompt.len();
    chars.div_ceil(4) as u64
}

/// A tool call's streamed JSON arguments as an object. Anything else is kept as
/// `{"_invalid_arguments": "<what the model sent>"}` for the tool's result to explain.
pub(crate) fn parse_arguments(arguments: String) -> serde_json::Map<String, serde_json::Value> {
    if arguments.trim().is_empty() {
        return serde_json::Map::new();
    }
    match serde_json::from_str::<serde_json::Value>(&arguments) {
        Ok(serde_json::Value::Object(map)) => map,
        _ => serde_json::Map::from_iter([(
            "_invalid_arguments".to_owned(),
            serde_json::Value::String(arguments),
        )]),
    }
}

/// The HTTP client providers share.
pub fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .connect_timeout(std::time::Duration::from_secs(10))
        .tcp_nodelay(true)
        .build()
        .expect("the HTTP client builds")
}
