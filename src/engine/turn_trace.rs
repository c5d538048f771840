//! What a turn's model calls and tool calls leave in the metrics and in the traces (GenAI
//! semantic conventions), secret options redacted.

use super::turn_tools::Call;
use crate::agents::Agent;
use crate::metrics::ProviderCall;
use crate::model::{HistoryMessage, StopReason, TurnError};

/// Counts a turn's model calls in the metrics, under its agent's provider and model.
pub(super) struct Meter<'a> {
    pub(super) metrics: &'a crate::metrics::Metrics,
    pub(super) provider: &'static str,
    pub(super) model: String,
    pub(super) tenant: &'a crate::model::TenantId,
}

impl Meter<'_> {
    /// One call that ended (its stream done, failed or abandoned).
    pub(super) fn record(
        &self,
        elapsed: std::time::Duration,
        failed: bool,
        input_tokens: u64,
        output_tokens: u64,
    ) {
        let call = ProviderCall {
            provider: self.provider,
            model: &self.model,
            elapsed,
            failed,
            input_tokens,
            output_tokens,
        };
        self.metrics.provider_call(call, self.tenant);
    }
}

/// What one model call produced.
pub(super) struct Step {
    pub(super) stop_reason: StopReason,
    pub(super) error: Option<TurnError>,
    pub(super) calls: Vec<Call>,
    /// The message's body as parts, for the agent's output schema.
    pub(super) reply: Vec<crate::model::Part>,
    /// Input tokens the provider reported for this call (0: none reported).
    pub(super) input_tokens: u64,
    /// Output tokens the provider reported for this call.
    pub(super) output_tokens: u64,
    /// The model that answered, as the provider named it.
    pub(super) response_model: Option<String>,
    /// From the call to the model's first output (text, thinking or a tool call).
    pub(super) first_output: Option<std::time::Duration>,
}

/// The span of one model call (GenAI semantic conventions); the response's attributes are
/// recorded by [`record_step`].
pub(super) fn step_span(agent: &Agent, meter: &Meter<'_>) -> tracing::Span {
    tracing::info_span!(
        target: crate::traces::TARGET,
        "chat",
        otel.name = %format_args!("chat {}", meter.model),
        otel.kind = "client",
        gen_ai.operation.name = "chat",
        gen_ai.provider.name = meter.provider,
        gen_ai.agent.name = %agent.settings().name,
        gen_ai.request.model = %meter.model,
        gen_ai.response.model = tracing::field::Empty,
        gen_ai.usage.input_tokens = tracing::field::Empty,
        gen_ai.usage.output_tokens = tracing::field::Empty,
        gen_ai.response.time_to_first_chunk = tracing::field::Empty,
        error.type = tracing::field::Empty,
    )
}

/// A model call's outcome on its span.
pub(super) fn record_step(
    span: &tracing::Span,
    step: &Step,
    agent: &Agent,
    options: &std::collections::BTreeMap<String, String>,
) {
    if span.is_disabled() {
        return;
    }
    if let Some(model) = &step.response_model {
        span.record("gen_ai.response.model", model.as_str());
    }
    span.record("gen_ai.usage.input_tokens", step.input_tokens);
    span.record("gen_ai.usage.output_tokens", step.output_tokens);
    if let Some(first) = step.first_output {
        span.record("gen_ai.response.time_to_first_chunk", first.as_secs_f64());
    }
    if let Some(error) = &step.error {
        span.record("error.type", error.code.as_str());
    }
    crate::traces::set_string_array(
        span,
        "gen_ai.response.finish_reasons",
        vec![finish_reason(step.stop_reason).to_owned()],
    );
    if crate::traces::record_content() {
        let reply = serde_json::to_string(&step.reply).unwrap_or_default();
        crate::traces::set_string(
            span,
            "gen_ai.output.messages",
            redact_secrets(reply, agent, options),
        );
    }
}

/// The prompt's messages on a model call's span (`telemetry.record_content`).
pub(super) fn record_prompt(
    span: &tracing::Span,
    agent: &Agent,
    options: &std::collections::BTreeMap<String, String>,
    messages: &[std::sync::Arc<HistoryMessage>],
) {
    let text = serde_json::to_string(messages).unwrap_or_default();
    crate::traces::set_string(
        span,
        "gen_ai.input.messages",
        redact_secrets(text, agent, options),
    );
}

/// `text` with the values of the session's secret options replaced by `***`.
fn redact_secrets(
    mut text: String,
    agent: &Agent,
    options: &std::collections::BTreeMap<String, String>,
) -> String {
    for (name, value) in options {
        let secret = agent
            .option(name)
            .is_none_or(|o| o.kind == crate::config::OptionKind::Secret);
        if secret && !value.is_empty() {
            text = text.replace(value.as_str(), "***");
        }
    }
    text
}

/// A stop reason as the GenAI conventions name finish reasons.
fn finish_reason(reason: StopReason) -> &'static str {
    match reason {
        StopReason::EndTurn => "stop",
        StopReason::ToolUse => "tool_calls",
        StopReason::MaxTokens => "length",
        StopReason::Refusal => "content_filter",
        StopReason::Error => "error",
    }
}
