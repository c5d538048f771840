//! The turn loop: feed the model the compacted history, stream what it says into the turn's
//! log, resolve its tool calls, and call it again until it answers without tools, needs the
//! client, fails or runs out of steps. The log (`turn_log.rs`) always ends the turn.

use std::time::Instant;

use futures_util::{FutureExt, StreamExt};
use tracing::Instrument;

use super::assemble::MessageAssembler;
use super::call_ids::CallIds;
use super::compaction;
use super::error::EngineError;
use super::request::Permission;
use super::scheduler::TurnControl;
use super::sessions::open_secret_options;
use super::turn_log::TurnLog;
use super::turn_parts::TurnParts;
use super::turn_tools::{Call, Resolution, record_tool_result, resolve, run_traced_tool};
use super::turn_trace::{Meter, Step, record_prompt, record_step, step_span};
use super::writer::unstored;
use crate::agents::template::render_options;
use crate::model::ToolSpec;
use crate::model::{Content, EventData, Session, StopReason, Turn, TurnError, Usage};
use crate::providers::{self, ModelEvent, ModelRequest};
use crate::store::StoreError;

/// The error code of a turn the model's provider failed.
const PROVIDER_ERROR: &str = "provider_error";

/// Most events the model had ready that one append carries: a model that is never waited
/// for still has its output queued (and published) as it goes.
const MAX_UNQUEUED: usize = 64;

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
    parts: TurnParts<'_>,
    turn: &Turn,
    session: &Session,
    permissions: &[Permission],
    control: &TurnControl,
) {
    let started = Instant::now();
    let mut log = TurnLog::new(parts, turn, Some(&session.agent)).await;
    log.start(true).await;
    let mut outcome = match run_steps(parts, turn, session, permissions, control, &mut log).await {
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

/// The agent loop: call the model, resolve its tool calls, call it again, until it answers
/// without tools, needs the client, fails, or runs out of steps.
async fn run_steps(
    parts: TurnParts<'_>,
    turn: &Turn,
    session: &Session,
    permissions: &[Permission],
    control: &TurnControl,
    log: &mut TurnLog<'_>,
) -> Result<Outcome, EngineError> {
    let Some(agent) = parts.agent_of(session).await? else {
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
                run_traced_tool(parts, turn, agent, &call.id, &call.name, &call.input),
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
    // The answers are durable (and in the cached history) before the model reads them.
    // Nothing else waits here: the turn's start is committed with what follows it.
    if !permissions.is_empty() {
        log.sync().await?;
    }
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
    let options = std::sync::Arc::new(open_secret_options(parts.secrets, session)?);
    let provider = providers::for_agent(agent.settings(), parts.http);
    let meter = Meter {
        metrics: parts.metrics,
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
        parts
            .store
            .get_token_ratio(&turn.tenant_id, &turn.session_id)
            .await?
    } else {
        None
    };
    let mut call_ids = CallIds::new(parts.store, turn.tenant_id, turn.session_id);
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
            parts.store,
            parts.histories,
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
        let request = ModelRequest {
            system_prompt: system_prompt.clone(),
            messages: messages.messages,
            history_chars: messages.chars,
            options: options.clone(),
            tools: tools.clone(),
        };
        // What the correction compares the provider's count with; only a budget needs it.
        let estimated = if budgeted {
            request.estimated_tokens()
        } else {
            0
        };
        let span = step_span(agent, &meter);
        if crate::traces::record_content() {
            record_prompt(&span, agent, &options, &request.messages);
        }
        let stream = provider.stream(request);
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
            parts
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
                        run_traced_tool(parts, turn, agent, &call.id, &call.name, &call.input),
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
        TurnError::MAX_STEPS,
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
    // What the model said that is not queued yet: everything it has ready goes in one
    // append, queued before the turn waits for the model again.
    let mut unqueued: Vec<EventData> = Vec::new();
    loop {
        let ready = if control.token().is_cancelled() || unqueued.len() >= MAX_UNQUEUED {
            None
        } else {
            stream.next().now_or_never()
        };
        let next = match ready {
            Some(next) => next,
            None => {
                if !unqueued.is_empty() {
                    log.emit(std::mem::take(&mut unqueued), Vec::new()).await;
                }
                tokio::select! {
                    biased;
                    _ = control.token().cancelled() => {
                        step.stop_reason = StopReason::Error;
                        step.error = Some(control.reason());
                        break;
                    }
                    next = stream.next() => next,
                }
            }
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
                unqueued.push(EventData::TextDelta { delta });
            }
            Some(Ok(ModelEvent::ThinkingDelta(delta))) => {
                log.output();
                message.push_thinking(&delta);
                unqueued.push(EventData::ThinkingDelta { delta });
            }
            Some(Ok(ModelEvent::ToolCall { id, name, input })) => {
                log.output();
                if !unqueued.is_empty() {
                    log.emit(std::mem::take(&mut unqueued), Vec::new()).await;
                }
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
    unqueued.extend([
        EventData::MessageStop {},
        EventData::Usage {
            input_tokens: step_usage.0,
            output_tokens: step_usage.1,
        },
    ]);
    log.emit(unqueued, history).await;
    // A reply that calls tools is durable before they run; one that ends the turn is not
    // waited for: the turn's end is queued behind it (see `TurnLog::stop`).
    if !step.calls.is_empty() {
        log.sync().await?;
    }
    Ok(step)
}
