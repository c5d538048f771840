//! Which model API an agent talks to, and that API's settings: `provider = "…"` picks the
//! kind, and the keys of that kind sit beside it at the agent's level.

use serde::Deserialize;

use super::Secret;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    Echo,
    Openai,
    Anthropic,
}

impl ProviderKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::Echo => "echo",
            ProviderKind::Openai => "openai",
            ProviderKind::Anthropic => "anthropic",
        }
    }
}

/// An agent's provider and the settings only that provider reads. A key of another kind
/// is an unknown key.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "provider", rename_all = "lowercase")]
pub enum ProviderSettings {
    Echo(EchoSettings),
    Openai(HttpProviderSettings),
    Anthropic(HttpProviderSettings),
}

impl ProviderSettings {
    pub fn kind(&self) -> ProviderKind {
        match self {
            ProviderSettings::Echo(_) => ProviderKind::Echo,
            ProviderSettings::Openai(_) => ProviderKind::Openai,
            ProviderSettings::Anthropic(_) => ProviderKind::Anthropic,
        }
    }

    /// The settings of a provider reached over HTTP; `None` for the echo.
    pub fn http(&self) -> Option<&HttpProviderSettings> {
        match self {
            ProviderSettings::Echo(_) => None,
            ProviderSettings::Openai(api) | ProviderSettings::Anthropic(api) => Some(api),
        }
    }

    pub(super) fn http_mut(&mut self) -> Option<&mut HttpProviderSettings> {
        match self {
            ProviderSettings::Echo(_) => None,
            ProviderSettings::Openai(api) | ProviderSettings::Anthropic(api) => Some(api),
        }
    }
}

/// `echo` provider: answers with the user's own words, without any network.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EchoSettings {
    /// Characters per delta.
    #[serde(default = "default_chunk_size")]
    pub chunk_size: usize,
    /// Pause before each delta, in milliseconds.
    #[serde(default)]
    pub delay_ms: u64,
    /// Think aloud before answering.
    #[serde(default)]
    pub thinking: bool,
}

/// `openai` (Chat Completions) and `anthropic` (Messages) providers: an HTTP API.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpProviderSettings {
    /// The API's base URL (`…/v1`); `openai` appends `/chat/completions`, `anthropic`
    /// `/messages`.
    #[serde(default)]
    pub base_url: String,
    /// The API key (may be a template): a bearer token for `openai`, `x-api-key` for
    /// `anthropic`.
    #[serde(default)]
    pub api_key: Secret,
    /// The most tokens the model may write per step (`max_tokens`).
    #[serde(default)]
    pub max_output_tokens: Option<u32>,
    /// Seconds to wait for the response to start and between chunks.
    #[serde(default = "default_provider_timeout")]
    pub timeout_seconds: u64,
    /// Retries after connection errors, 429 and 5xx before the first token.
    #[serde(default = "default_provider_retries")]
    pub max_retries: u32,
    /// Whether a `base_url` whose host a tenant's option fills may reach an internal
    /// address (loopback, private, link-local, …). A host the operator wrote is trusted.
    #[serde(default)]
    pub allow_private_base_url: bool,
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
