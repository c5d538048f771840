//! Running one turn: feed the model the compacted history, stream what it says into the
//! event log, and always end with a `turn_stop`.

use std::time::Instant;

use futures_util::StreamExt;
use tracing::Instrument;

use super::assemble::{MessageAssembler, turn_messages};
use super::call_ids::CallIds;
use super::compaction;
use super::error::EngineError;
use super::runner::{Engine, Permission, TurnControl};
use super::sessions::open_secret_options;
use super::writer::{Append, Receipt, unstored};
use crate::agents::template::render_options;
use crate::agents::{Agent, ServerTool};
use crate::metrics::ProviderCall;
use crate::model::ToolSpec;
use crate::model::{
    Content, EventData, HistoryMessage, Session, StopReason, Turn, TurnError, Usage,
};
use crate::providers::{self, ModelEvent, ModelRequest};
use crate::store::Deltas;
use crate::store::StoreError;
use crate::tools;

/// Counts a turn's model calls in the metrics, under its agent's provider and model.
pub(super) struct Meter<'a> {
    metrics: &'a crate::metrics::Metrics,
    provider: &'static str,
    model: String,
    tenant: &'a crate::model::TenantId,
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

/// The error code of a turn the model's provider failed.
const PROVIDER_ERROR: &str = "provider_error";

/// Appends a turn's events in order; remembers the last receipt to learn of failures, and
/// the history messages not yet known durable, to add them to the session's cached history.
/// Counts the turn's start and end in the metrics.
struct TurnLog<'a> {
    engine: &'a Engine,
    turn: &'a Turn,
    last: Option<Receipt>,
    unsynced: Vec<HistoryMessage>,
    /// Whether an append of the turn failed: its end then closes what is durable of it.
    failed: bool,
    /// The turn's agent: a metrics label.
    agent: String,
    /// When the turn started running here (not set for one ended without running).
    running_since: Option<Instant>,
    /// Whether the model's first output was counted.
    first_output: bool,
    /// The span the writer records its commits of the turn's events on: the turn's, when
    /// traces are exported.
    span: tracing::Span,
}

impl<'a> TurnLog<'a> {
    /// The log of a turn of `agent`; `None` reads the agent from the turn's session.
    async fn new(engine: &'a Engine, turn: &'a Turn, agent: Option<&str>) -> Self {
        let agent = match agent {
            Some(agent) => agent.to_owned(),
            None => engine
                .store
                .get_session(&turn.tenant_id, &turn.session_id)
                .await
                .map_or_else(|_| "unknown".to_owned(), |session| session.agent),
        };
        Self {
            engine,
            turn,
            last: None,
            unsynced: Vec::new(),
            failed: false,
            agent,
            running_since: None,
            first_output: false,
            span: if crate::traces::enabled() {
                tracing::Span::current()
            } else {
                tracing::Span::none()
            },
        }
    }

    /// Appends the turn's `turn_start`; `running` when the turn now runs (its duration is
    /// measured from here).
    async fn start(&mut self, running: bool) {
        self.engine
            .metrics
            .turn_started(&self.agent, &self.turn.tenant_id);
        if running {
            self.running_since = Some(Instant::now());
        }
        self.emit(vec![EventData::TurnStart {}], Vec::new()).await;
    }

    /// The model said something for the first time in this turn.
    fn output(&mut self) {
        if self.first_output {
            return;
        }
        self.first_output = true;
        if let Some(since) = self.running_since {
            self.engine.metrics.turn_first_event(
                &self.agent,
                &self.turn.tenant_id,
                since.elapsed(),
            );
        }
    }

    async fn emit(&mut self, events: Vec<EventData>, history: Vec<HistoryMessage>) {
        // The previous append's outcome, if known already: a failure is remembered.
        if let Some(receipt) = self.last.as_mut()
            && let Ok(Err(_)) = receipt.try_recv()
        {
            self.failed = true;
            self.last = None;
        }
        self.unsynced.extend(history.iter().cloned());
        let receipt = self
            .engine
            .writer
            .append(Append {
                tenant: self.turn.tenant_id,
                session: self.turn.session_id,
                turn: self.turn.id,
                run: self.turn.run_id,
                events,
                history,
                span: self.span.clone(),
            })
            .await;
        self.last = Some(receipt);
    }

    /// Waits until everything emitted so far is durable.
    async fn sync(&mut self) -> Result<(), StoreError> {
        let synced = match self.last.take() {
            None => Ok(()),
            Some(receipt) => match receipt.await {
                Ok(result) => result.map(|_| ()),
                Err(_) => Err(StoreError::Corrupt("the event writer stopped".into())),
            },
        };
        let histories = &self.engine.histories;
        let session = &self.turn.session_id;
        if synced.is_err() || self.failed {
            self.failed = true;
        }
        match &synced {
            Ok(()) if self.failed => histories.forget(session),
            Ok(()) if !self.unsynced.is_empty() => {
                histories.added(&self.turn.id, session, std::mem::take(&mut self.unsynced));
            }
            Ok(()) => {}
            // What is durable is unknown: the history is read again.
            Err(_) => histories.forget(session),
        }
        synced
    }

    /// Ends the turn with its terminal event and waits for it to be durable.
    async fn stop(&mut self, stop_reason: StopReason, error: Option<TurnError>, usage: Usage) {
        // Counted before the end is published: whoever sees the end sees it counted.
        self.engine.metrics.turn_ended(
            &self.agent,
            outcome_label(stop_reason, error.as_ref().map(|e| e.code.as_str())),
            &self.turn.tenant_id,
            self.running_since.map(|since| since.elapsed()),
        );
        // The tenant's tokens of the day are read again once this turn's usage is durable:
        // a client that sees the end and starts another turn is held to them.
        self.engine.quotas.turn_ended(&self.turn.tenant_id);
        let _ = self.sync().await;
        let stopped = if self.failed {
            // Some of its events are not stored: the end closes what is (the message it
            // left open, with what clients saw of it in the history) in one append.
            let error = error.unwrap_or_else(|| {
                TurnError::new("internal", "the turn's events could not be stored")
            });
            close_turn(self, error).await
        } else {
            self.emit(
                vec![EventData::TurnStop {
                    stop_reason,
                    error,
                    usage,
                }],
                Vec::new(),
            )
            .await;
            self.sync().await.map_err(EngineError::from)
        };
        match stopped.map_err(|error| match error {
            EngineError::Store(error) => error,
            other => StoreError::Corrupt(other.to_string()),
        }) {
            Ok(()) => {}
            // Another process ended it (this one lost its lease): nothing more to do.
            Err(StoreError::Fenced(_)) => {
                tracing::warn!(turn_id = %self.turn.id, "another process ended this turn");
            }
            Err(error) => {
                tracing::warn!(turn_id = %self.turn.id, error = %error, "could not record the end of a turn: it ends once the database takes writes again");
                self.engine.end_later(self.turn, unstored(&error));
            }
        }
    }
}

/// A turn's outcome as the metrics name it: the stop reason of one that completed, else
/// `cancelled`, `interrupted` or `failed`.
fn outcome_label(stop_reason: StopReason, error_code: Option<&str>) -> &'static str {
    let error = error_code.map(|code| TurnError::new(code, ""));
    match crate::model::TurnStatus::after_stop(stop_reason, error.as_ref()) {
        crate::model::TurnStatus::Cancelled => "cancelled",
        crate::model::TurnStatus::Interrupted => "interrupted",
        crate::model::TurnStatus::Failed => "failed",
        _ => stop_reason.as_str(),
    }
}

/// How a turn's work ended, before its `turn_stop` is written.
struct Outcome {
    stop_reason: StopReason,
    error: Option<TurnError>,
    usage: Usage,
}

impl Outcome {
    fn failed(code: &str, message: impl Into<String>) -> Self {
        Outcome {
            stop_reason: StopReason::Error,
            error: Some(TurnError::new(code, message)),
            usage: Usage::default(),
        }
    }
}

pub(super) async fn run_turn(
    engine: &Engine,
    turn: &Turn,
    session: &Session,
    permissions: &[Permission],
    control: &TurnControl,
) {
    let started = Instant::now();
    let mut log = TurnLog::new(engine, turn, Some(&session.agent)).await;
    log.start(true).await;
    let mut outcome = match run_steps(engine, turn, session, permissions, control, &mut log).await {
        Ok(outcome) => outcome,
        // The turn's events could not be stored (or it is no longer this process's).
        Err(EngineError::Store(error))
            if error.is_outage()
                || matches!(error, StoreError::Fenced(_))
                || control.token().is_cancelled() =>
        {
            tracing::warn!(turn_id = %turn.id, error = %error, "turn stopped: its events could not be stored");
            // The writer stopped the turn with why its events could not be stored.
            let reason = if control.token().is_cancelled() {
                control.reason()
            } else {
                unstored(&error)
            };
            Outcome {
                stop_reason: StopReason::Error,
                error: Some(reason),
                usage: Usage::default(),
            }
        }
        Err(error) => {
            tracing::error!(error = %error, "turn failed");
            Outcome::failed("internal", "the turn failed inside the server")
        }
    };
    outcome.usage.wall_ms = started.elapsed().as_millis() as u64;
    let status = crate::model::TurnStatus::after_stop(outcome.stop_reason, outcome.error.as_ref());
    let wall_ms = outcome.usage.wall_ms;
    let error = outcome
        .error
        .as_ref()
        .map(|error| format!("{}: {}", error.code, error.message));
    log.stop(outcome.stop_reason, outcome.error, outcome.usage)
        .await;
    match error {
        Some(error) => tracing::info!(status = %status, wall_ms, error, "turn ended"),
        None => tracing::info!(status = %status, wall_ms, "turn ended"),
    }
}

/// A tool call the model made, as the loop resolves it.
struct Call {
    id: String,
    name: String,
    input: serde_json::Map<String, serde_json::Value>,
}

/// Who answers a tool call.
enum Resolution {
    Client,
    RunNow,
    NeedsPermission,
    Unknown,
}

/// Client tools are the client's; internal and trusted server tools run at once; enabled
/// untrusted ones wait for the client's permission.
fn resolve(agent: &Agent, session: &Session, name: &str) -> Resolution {
    if session.client_tools.iter().any(|t| t.name == name) {
        return Resolution::Client;
    }
    match agent.server_tool(name) {
        Some((_, false)) => Resolution::RunNow,
        Some(_) => match session.server_tools.iter().find(|t| t.name == name) {
            Some(enabled) if enabled.trust => Resolution::RunNow,
            Some(_) => Resolution::NeedsPermission,
            None => Resolution::Unknown,
        },
        None => Resolution::Unknown,
    }
}

/// Runs a server tool on validated arguments; the text is its result, errors included.
/// Its `tool_call` is already durable, so a crash never runs it twice.
async fn run_server_tool(
    engine: &Engine,
    turn: &Turn,
    agent: &Agent,
    name: &str,
    input: &serde_json::Map<String, serde_json::Value>,
) -> String {
    let Some((tool, _)) = agent.server_tool(name) else {
        return format!("Error: there is no tool named `{name}`.");
    };
    match tool {
        ServerTool::Builtin { spec, builtin } => {
            let checked = match agent.builtin_arguments(name) {
                Some(arguments) => arguments.check(input),
                None => tools::validate_arguments(&spec.parameters, input),
            };
            if let Err(problem) = checked {
                return format!("Error: invalid arguments: {problem}");
            }
            tools::run(
                builtin,
                input,
                &engine.store,
                &turn.tenant_id,
                &engine.tools,
            )
            .await
        }
        ServerTool::Mcp { server, tool } => engine.mcp.run(&server, &tool, input).await,
    }
}

/// Runs `work` unless the turn is stopped first (then it is abandoned: `None`).
async fn until_stopped<T>(
    control: &TurnControl,
    work: impl std::future::Future<Output = T>,
) -> Option<T> {
    tokio::select! {
        biased;
        _ = control.token().cancelled() => None,
        done = work => Some(done),
    }
}

/// The outcome of a turn stopped between its steps.
fn stopped(control: &TurnControl) -> Outcome {
    Outcome {
        stop_reason: StopReason::Error,
        error: Some(control.reason()),
        usage: Usage::default(),
    }
}

/// A tool's result: an event, and a tool message in the history.
async fn record_tool_result(log: &mut TurnLog<'_>, call_id: &str, text: String) {
    let content = Content::Text(text);
    log.emit(
        vec![EventData::ToolResult {
            tool_call_id: call_id.to_owned(),
            content: content.clone(),
        }],
        vec![HistoryMessage::Tool {
            tool_call_id: call_id.to_owned(),
            content,
        }],
    )
    .await;
}

/// A tool call's run in a span of its own: tool, call id, kind (`builtin`, `mcp`), MCP
/// server, and outcome (`error` when its result is an `Error: …`).
async fn run_traced_tool(
    engine: &Engine,
    turn: &Turn,
    agent: &Agent,
    id: &str,
    name: &str,
    input: &serde_json::Map<String, serde_json::Value>,
) -> String {
    let (kind, server) = match agent.server_tool(name) {
        Some((ServerTool::Mcp { server, .. }, _)) => ("mcp", Some(server)),
        Some((ServerTool::Builtin { .. }, _)) => ("builtin", None),
        None => ("unknown", None),
    };
    let span = tracing::info_span!(
        target: crate::traces::TARGET,
        "execute_tool",
        otel.name = %format_args!("execute_tool {name}"),
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = name,
        gen_ai.tool.call.id = id,
        gen_ai.tool.type = if kind == "mcp" { "extension" } else { "function" },
        agentry.tool.kind = kind,
        agentry.mcp.server = server.as_deref(),
        agentry.tool.outcome = tracing::field::Empty,
        error.type = tracing::field::Empty,
    );
    let content = run_server_tool(engine, turn, agent, name, input)
        .instrument(span.clone())
        .await;
    if content.starts_with("Error:") {
        span.record("agentry.tool.outcome", "error");
        span.record("error.type", "tool_error");
    } else {
        span.record("agentry.tool.outcome", "ok");
    }
    content
}

/// The span of one model call (GenAI semantic conventions); the response's attributes are
/// recorded by [`record_step`].
fn step_span(agent: &Agent, meter: &Meter<'_>) -> tracing::Span {
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
fn record_step(
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
fn record_prompt(
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

/// What one model call produced.
struct Step {
    stop_reason: StopReason,
    error: Option<TurnError>,
    calls: Vec<Call>,
    /// The message's body as parts, for the agent's output schema.
    reply: Vec<crate::model::Part>,
    /// Input tokens the provider reported for this call (0: none reported).
    input_tokens: u64,
    /// Output tokens the provider reported for this call.
    output_tokens: u64,
    /// The model that answered, as the provider named it.
    response_model: Option<String>,
    /// From the call to the model's first output (text, thinking or a tool call).
    first_output: Option<std::time::Duration>,
}

/// The agent loop: call the model, resolve its tool calls, call it again, until it answers
/// without tools, needs the client, fails, or runs out of steps.
async fn run_steps(
    engine: &Engine,
    turn: &Turn,
    session: &Session,
    permissions: &[Permission],
    control: &TurnControl,
    log: &mut TurnLog<'_>,
) -> Result<Outcome, EngineError> {
    let Some(agent) = engine.agent_of(session).await? else {
        return Ok(Outcome::failed(
            "agent_unavailable",
            format!("agent `{}` is no longer configured", session.agent),
        ));
    };
    let agent = &agent;
    // Answers to calls that waited for permission: run the granted ones.
    for permission in permissions {
        let call = &permission.call;
        let content = if permission.granted {
            match until_stopped(
                control,
                run_traced_tool(engine, turn, agent, &call.id, &call.name, &call.input),
            )
            .await
            {
                Some(content) => content,
                None => return Ok(stopped(control)),
            }
        } else {
            match permission.reason.as_deref().filter(|r| !r.is_empty()) {
                Some(reason) => format!("Tool call denied: {reason}"),
                None => "Tool call denied".to_owned(),
            }
        };
        record_tool_result(log, &call.id, content).await;
    }
    log.sync().await?;
    let tools: Vec<ToolSpec> = session
        .client_tools
        .iter()
        .cloned()
        .chain(
            agent
                .exposed_tools()
                .filter(|t| session.server_tools.iter().any(|s| s.name == t.name)),
        )
        .chain(agent.internal_tools())
        .collect();
    // Shared by the turn's steps, never copied per step.
    let tools: std::sync::Arc<[ToolSpec]> = tools.into();
    let options = std::sync::Arc::new(open_secret_options(&engine.secrets, session)?);
    let provider = providers::for_agent(agent.settings(), &engine.http);
    let meter = Meter {
        metrics: &engine.metrics,
        provider: agent.settings().provider.kind().as_str(),
        model: agent.model_label(&options),
        tenant: &turn.tenant_id,
    };
    let system_prompt: std::sync::Arc<str> =
        render_options(&agent.settings().system_prompt, &options).into();
    let mut outcome = Outcome {
        stop_reason: StopReason::EndTurn,
        error: None,
        usage: Usage::default(),
    };
    let max_steps = agent.settings().max_steps;
    let budgeted = agent.settings().history.budget_tokens > 0;
    let mut token_ratio = if budgeted {
        engine
            .store
            .get_token_ratio(&turn.tenant_id, &turn.session_id)
            .await?
    } else {
        None
    };
    let mut call_ids = CallIds::new(&engine.store, turn.tenant_id, turn.session_id);
    for _ in 0..max_steps {
        if control.token().is_cancelled() {
            return Ok(stopped(control));
        }
        let input = compaction::ModelInput {
            system_prompt: &system_prompt,
            tools: &tools,
            options: &options,
            token_ratio: token_ratio.unwrap_or(1.0),
            meter: &meter,
        };
        let (messages, compaction) = compaction::history_for_model(
            &engine.store,
            &engine.histories,
            turn,
            session,
            agent,
            provider.as_ref(),
            &input,
        )
        .await?;
        if let Some(event) = compaction {
            log.emit(vec![event], Vec::new()).await;
            log.sync().await?;
        }
        let Some(messages) = messages else {
            outcome.stop_reason = StopReason::MaxTokens;
            return Ok(outcome);
        };
        // What the correction compares the provider's count with; only a budget needs it.
        let estimated = if budgeted {
            providers::estimate_tokens(&system_prompt, &messages, &tools)
        } else {
            0
        };
        let span = step_span(agent, &meter);
        if crate::traces::record_content() {
            record_prompt(&span, agent, &options, &messages);
        }
        let stream = provider.stream(ModelRequest {
            system_prompt: system_prompt.clone(),
            messages,
            options: options.clone(),
            tools: tools.clone(),
        });
        let call_started = Instant::now();
        let before = outcome.usage;
        let step = stream_message(stream, control, log, &mut call_ids, &mut outcome.usage)
            .instrument(span.clone())
            .await?;
        record_step(&span, &step, agent, &options);
        meter.record(
            call_started.elapsed(),
            step.error
                .as_ref()
                .is_some_and(|e| e.code == PROVIDER_ERROR),
            outcome.usage.input_tokens - before.input_tokens,
            outcome.usage.output_tokens - before.output_tokens,
        );
        if budgeted
            && let Some(ratio) =
                compaction::updated_token_ratio(token_ratio, step.input_tokens, estimated)
        {
            token_ratio = Some(ratio);
            engine
                .store
                .update_token_ratio(&turn.tenant_id, &turn.session_id, ratio)
                .await?;
        }
        outcome.stop_reason = step.stop_reason;
        if step.error.is_some() {
            outcome.error = step.error;
            return Ok(outcome);
        }
        if step.calls.is_empty() {
            if let Err(violation) = agent.output_schema().check(&step.reply) {
                outcome.stop_reason = StopReason::Error;
                outcome.error = Some(TurnError::new(
                    "output_schema",
                    format!(
                        "the agent's reply does not fit its output schema: {}",
                        violation.message
                    ),
                ));
                return Ok(outcome);
            }
            if outcome.stop_reason == StopReason::ToolUse {
                outcome.stop_reason = StopReason::EndTurn;
            }
            return Ok(outcome);
        }
        outcome.usage.tool_calls += step.calls.len() as u64;
        let mut waiting = false;
        for call in &step.calls {
            match resolve(agent, session, &call.name) {
                // The client runs it, or must allow it first.
                Resolution::Client | Resolution::NeedsPermission => waiting = true,
                Resolution::RunNow => {
                    let Some(content) = until_stopped(
                        control,
                        run_traced_tool(engine, turn, agent, &call.id, &call.name, &call.input),
                    )
                    .await
                    else {
                        return Ok(stopped(control));
                    };
                    record_tool_result(log, &call.id, content).await;
                }
                // Not a tool of this session: say so, so the model can correct itself.
                Resolution::Unknown => {
                    let content = format!("Error: there is no tool named `{}`.", call.name);
                    record_tool_result(log, &call.id, content).await;
                }
            }
        }
        log.sync().await?;
        if waiting {
            outcome.stop_reason = StopReason::ToolUse;
            return Ok(outcome);
        }
    }
    outcome.stop_reason = StopReason::Error;
    outcome.error = Some(TurnError::new(
        "max_steps",
        format!("the model kept calling tools for {max_steps} steps"),
    ));
    Ok(outcome)
}

/// Streams one model answer into the log as one assistant message (its tool calls inside
/// it), and stores the message in the history with the event that completes it.
async fn stream_message(
    mut stream: futures_util::stream::BoxStream<
        'static,
        Result<ModelEvent, providers::ProviderError>,
    >,
    control: &TurnControl,
    log: &mut TurnLog<'_>,
    call_ids: &mut CallIds<'_>,
    usage: &mut Usage,
) -> Result<Step, EngineError> {
    log.emit(vec![EventData::MessageStart {}], Vec::new()).await;
    let mut message = MessageAssembler::default();
    let mut step = Step {
        stop_reason: StopReason::EndTurn,
        error: None,
        calls: Vec::new(),
        reply: Vec::new(),
        input_tokens: 0,
        output_tokens: 0,
        response_model: None,
        first_output: None,
    };
    let mut step_usage = (0, 0);
    let started = Instant::now();
    loop {
        let next = tokio::select! {
            biased;
            _ = control.token().cancelled() => {
                step.stop_reason = StopReason::Error;
                step.error = Some(control.reason());
                break;
            }
            next = stream.next() => next,
        };
        if step.first_output.is_none()
            && matches!(
                next,
                Some(Ok(ModelEvent::TextDelta(_)
                    | ModelEvent::ThinkingDelta(_)
                    | ModelEvent::ToolCall { .. }))
            )
        {
            step.first_output = Some(started.elapsed());
        }
        match next {
            None => break,
            Some(Ok(ModelEvent::ResponseModel(model))) => step.response_model = Some(model),
            Some(Ok(ModelEvent::TextDelta(delta))) => {
                log.output();
                message.push_text(&delta);
                log.emit(vec![EventData::TextDelta { delta }], Vec::new())
                    .await;
            }
            Some(Ok(ModelEvent::ThinkingDelta(delta))) => {
                log.output();
                message.push_thinking(&delta);
                log.emit(vec![EventData::ThinkingDelta { delta }], Vec::new())
                    .await;
            }
            Some(Ok(ModelEvent::ToolCall { id, name, input })) => {
                log.output();
                let id = call_ids.name(id).await?;
                message.push_tool_use(&id, &name, &input);
                step.calls.push(Call {
                    id: id.clone(),
                    name: name.clone(),
                    input: input.clone(),
                });
                log.emit(
                    vec![EventData::ToolCall {
                        tool_call_id: id,
                        name,
                        input,
                    }],
                    Vec::new(),
                )
                .await;
            }
            Some(Ok(ModelEvent::Usage {
                input_tokens,
                output_tokens,
            })) => {
                step_usage.0 += input_tokens;
                step_usage.1 += output_tokens;
            }
            Some(Ok(ModelEvent::Stop(reason))) => step.stop_reason = reason,
            Some(Err(error)) => {
                step.stop_reason = StopReason::Error;
                step.error = Some(TurnError::new(PROVIDER_ERROR, error.message));
                break;
            }
        }
    }
    usage.input_tokens += step_usage.0;
    usage.output_tokens += step_usage.1;
    step.input_tokens = step_usage.0;
    step.output_tokens = step_usage.1;
    step.reply = Content::Blocks(message.blocks().to_vec()).to_parts();
    let history = if message.blocks().is_empty() {
        Vec::new()
    } else {
        vec![message.finish()]
    };
    log.emit(
        vec![
            EventData::MessageStop {},
            EventData::Usage {
                input_tokens: step_usage.0,
                output_tokens: step_usage.1,
            },
        ],
        history,
    )
    .await;
    log.sync().await?;
    Ok(step)
}

/// A turn whose task failed unexpectedly: it still gets its end. `agent`: the turn's, if
/// known.
pub(super) async fn stop_failed(
    engine: &Engine,
    turn: &Turn,
    agent: Option<&str>,
    reason: TurnError,
) {
    TurnLog::new(engine, turn, agent)
        .await
        .stop(StopReason::Error, Some(reason), Usage::default())
        .await;
}

/// A turn stopped while it waited for a slot: it still gets a start and an end.
pub(super) async fn stop_unstarted(
    engine: &Engine,
    turn: &Turn,
    agent: Option<&str>,
    reason: TurnError,
) {
    let mut log = TurnLog::new(engine, turn, agent).await;
    log.start(false).await;
    log.stop(StopReason::Error, Some(reason), Usage::default())
        .await;
}

/// The turn that ends a run cancelled while it awaited answers: each pending call is
/// answered with `answer` (an event and a history message), then the turn stops cancelled.
pub(super) async fn answer_cancelled(
    engine: &Engine,
    turn: &Turn,
    calls: &[super::PendingCall],
    answer: &str,
) {
    let mut log = TurnLog::new(engine, turn, None).await;
    log.start(false).await;
    let (events, history) = calls
        .iter()
        .map(|call| {
            let content = Content::Text(answer.to_owned());
            (
                EventData::ToolResult {
                    tool_call_id: call.id.clone(),
                    content: content.clone(),
                },
                HistoryMessage::Tool {
                    tool_call_id: call.id.clone(),
                    content,
                },
            )
        })
        .unzip();
    log.emit(events, history).await;
    log.stop(
        StopReason::Error,
        Some(TurnError::new(
            TurnError::CANCELLED,
            "the run was cancelled while it awaited answers",
        )),
        Usage::default(),
    )
    .await;
}

/// The events of a turn that are durable, text deltas merged.
async fn durable_events(engine: &Engine, turn: &Turn) -> Result<Vec<EventData>, EngineError> {
    let mut events = Vec::new();
    let mut after = 0;
    loop {
        let page = engine
            .store
            .list_events(
                &turn.tenant_id,
                &turn.session_id,
                Some(&turn.id),
                after,
                1000,
                Deltas::Merged,
            )
            .await?;
        let full = page.len() >= 1000;
        if let Some(last) = page.last() {
            after = last.seq;
        }
        events.extend(page.into_iter().map(|e| e.data));
        if !full {
            break;
        }
    }
    Ok(events)
}

/// The start of the message a turn's durable events leave open, if any.
fn open_message(events: &[EventData]) -> Option<usize> {
    events
        .iter()
        .rposition(|e| matches!(e, EventData::MessageStart {}))
        .filter(|start| {
            !events[*start..]
                .iter()
                .any(|e| matches!(e, EventData::MessageStop {}))
        })
}

/// Ends a turn of this process whose events (or end) could not be stored, once the
/// database takes writes again (see [`close_turn`]).
pub(super) async fn end_unstored(
    engine: &Engine,
    turn: &Turn,
    reason: TurnError,
) -> Result<(), EngineError> {
    let mut log = TurnLog::new(engine, turn, Some("")).await;
    close_turn(&mut log, reason).await
}

/// Ends a turn after what is durable of it, in one append: the message it left open is
/// closed (the history holds what clients saw of it) and a `turn_stop` says why.
async fn close_turn(log: &mut TurnLog<'_>, reason: TurnError) -> Result<(), EngineError> {
    let events = durable_events(log.engine, log.turn).await?;
    let mut closing = Vec::new();
    let mut history = Vec::new();
    if events.is_empty() {
        closing.push(EventData::TurnStart {});
    }
    if let Some(start) = open_message(&events) {
        closing.push(EventData::MessageStop {});
        history = turn_messages(&events[start..]);
    }
    closing.push(EventData::TurnStop {
        stop_reason: StopReason::Error,
        error: Some(reason),
        usage: Usage::default(),
    });
    log.failed = false;
    log.emit(closing, history).await;
    log.sync().await?;
    Ok(())
}

/// Ends a turn a previous process left unfinished: closes the message it was writing
/// (so history holds what clients already saw) and appends an `interrupted` stop.
pub(super) async fn interrupt_orphan(engine: &Engine, turn: &Turn) -> Result<(), EngineError> {
    let mut log = TurnLog::new(engine, turn, None).await;
    if turn.started_at.is_none() {
        engine.metrics.turn_started(&log.agent, &turn.tenant_id);
    }
    engine.metrics.turn_ended(
        &log.agent,
        outcome_label(StopReason::Error, Some(TurnError::INTERRUPTED)),
        &turn.tenant_id,
        None,
    );
    engine.quotas.turn_ended(&turn.tenant_id);
    close_turn(
        &mut log,
        TurnError::new(
            TurnError::INTERRUPTED,
            "the server stopped before the turn finished",
        ),
    )
    .await?;
    tracing::warn!(turn_id = %turn.id, "recovered a turn left unfinished: interrupted");
    Ok(())
}
