//! Keeping what the model is fed within the agent's budget: the full history stays exact;
//! the compacted one is rewritten by the agent's strategy, never between a tool call and
//! its result, and each rewrite is recorded as a `compaction` event. Tokens are estimated
//! from text length, corrected by the session's ratio of reported to estimated tokens.

use std::sync::Arc;

use futures_util::StreamExt;

use super::error::EngineError;
use super::histories::{Histories, ModelHistory};
use crate::agents::Agent;
use crate::config::CompactionStrategy;
use crate::model::{Content, ContentBlock, EventData, HistoryMessage, Session, ToolSpec, Turn};
use crate::providers::{ModelEvent, ModelRequest, Provider, estimate_tokens};
use crate::store::Store;
use tracing::Instrument;

/// The bounds of a session's correction ratio: a few odd reports cannot make the estimate
/// absurd.
pub const MIN_TOKEN_RATIO: f64 = 0.25;
pub const MAX_TOKEN_RATIO: f64 = 10.0;

/// The session's ratio after the provider reported `reported` input tokens for a request
/// estimated at `estimated`: the mean of the old ratio and the new observation, bounded.
/// `None` when the report says nothing.
pub fn updated_token_ratio(previous: Option<f64>, reported: u64, estimated: u64) -> Option<f64> {
    if reported == 0 || estimated == 0 {
        return None;
    }
    let observed = (reported as f64 / estimated as f64).clamp(MIN_TOKEN_RATIO, MAX_TOKEN_RATIO);
    Some(match previous {
        None => observed,
        Some(previous) => ((previous + observed) / 2.0).clamp(MIN_TOKEN_RATIO, MAX_TOKEN_RATIO),
    })
}

/// What the model is fed, what it is told about, and how estimates are corrected.
pub struct ModelInput<'a> {
    pub system_prompt: &'a str,
    pub tools: &'a [ToolSpec],
    pub options: &'a std::collections::BTreeMap<String, String>,
    /// Reported tokens per estimated token (1 until the provider has reported).
    pub token_ratio: f64,
    /// Where a summary's model call is counted.
    pub meter: &'a super::turn_trace::Meter<'a>,
}

impl ModelInput<'_> {
    /// The corrected estimate of a request with these messages.
    pub fn tokens(&self, messages: &[HistoryMessage]) -> u64 {
        let raw = estimate_tokens(self.system_prompt, messages, self.tools);
        (raw as f64 * self.token_ratio).ceil() as u64
    }
}

/// The history to feed the model, compacted first if it is over budget. `Ok(None)` when it
/// still does not fit. The event to record comes with it.
pub async fn history_for_model(
    store: &Store,
    histories: &Histories,
    turn: &Turn,
    session: &Session,
    agent: &Agent,
    provider: &dyn Provider,
    input: &ModelInput<'_>,
) -> Result<(Option<ModelHistory>, Option<EventData>), EngineError> {
    let options = input.options;
    let settings = &agent.settings().history;
    if settings.budget_tokens == 0 {
        let tail_only = provider.reads_only_last_exchange();
        let messages = histories
            .compacted(store, session, &turn.id, tail_only)
            .await?;
        return Ok((Some(messages), None));
    }
    let view = store
        .get_compacted_view(&turn.tenant_id, &turn.session_id)
        .await?;
    let mut messages = view.overlay.clone();
    messages.extend(view.tail.iter().map(|(_, m)| m.clone()));
    let budget = settings.budget_tokens;
    let before = input.tokens(&messages);
    if before <= budget {
        return Ok((Some(shared(messages)), None));
    }
    if settings.strategy == CompactionStrategy::None {
        return Ok((None, None));
    }
    let Some(cut) = cut_point(&view.tail, settings.keep_last) else {
        return Ok((None, None));
    };
    let (older_tail, kept) = view.tail.split_at(cut);
    let through = older_tail
        .last()
        .map(|(p, _)| *p)
        .expect("cut is after one message");
    let mut older = view.overlay;
    older.extend(older_tail.iter().map(|(_, m)| m.clone()));
    // Lives until the compaction is recorded: the summary's model call runs inside it.
    let span = tracing::info_span!(
        target: crate::traces::TARGET,
        "compaction",
        agentry.compaction.strategy = settings.strategy.as_str(),
        agentry.compaction.tokens_before = before,
        agentry.compaction.tokens_after = tracing::field::Empty,
    );
    let overlay = match settings.strategy {
        CompactionStrategy::None | CompactionStrategy::Window => Vec::new(),
        CompactionStrategy::DropToolResults => older
            .into_iter()
            .map(|message| match message {
                HistoryMessage::Tool { tool_call_id, .. } => HistoryMessage::Tool {
                    tool_call_id,
                    content: Content::Text("[tool result omitted to save space]".into()),
                },
                other => other,
            })
            .collect(),
        CompactionStrategy::Summarize => {
            let summary = summarize(provider, older, options, input.meter)
                .instrument(span.clone())
                .await;
            vec![
                HistoryMessage::User {
                    content: Content::Text(format!(
                        "Summary of the earlier conversation:\n{summary}"
                    )),
                },
                HistoryMessage::Assistant {
                    content: Content::Blocks(vec![ContentBlock::Text {
                        text: "Understood.".into(),
                    }]),
                },
            ]
        }
    };
    store
        .replace_compaction(&turn.tenant_id, &turn.session_id, &overlay, through)
        .await?;
    let mut messages = overlay;
    messages.extend(kept.iter().map(|(_, m)| m.clone()));
    let after = input.tokens(&messages);
    span.record("agentry.compaction.tokens_after", after);
    let event = EventData::Compaction {
        strategy: settings.strategy,
        tokens_before: before,
        tokens_after: after,
        through,
    };
    tracing::info!(turn_id = %turn.id, before, after, through, "history compacted");
    Ok(((after <= budget).then(|| shared(messages)), Some(event)))
}

fn shared(messages: Vec<HistoryMessage>) -> ModelHistory {
    ModelHistory::whole(messages.into_iter().map(Arc::new).collect())
}

/// Where the kept part of the tail starts: about `keep_last` messages from the end, at a
/// user message, so that no tool result is separated from its call. `None` when nothing
/// older can go.
fn cut_point(tail: &[(i64, HistoryMessage)], keep_last: usize) -> Option<usize> {
    let is_user = |i: &usize| matches!(tail[*i].1, HistoryMessage::User { .. });
    let wanted = tail.len().saturating_sub(keep_last);
    let cut = (wanted..tail.len())
        .find(is_user)
        .or_else(|| (0..wanted).rev().find(is_user))?;
    (cut > 0).then_some(cut)
}

/// Asks the agent's own model for a summary of `older`; without one, nothing is kept.
async fn summarize(
    provider: &dyn Provider,
    mut older: Vec<HistoryMessage>,
    options: &std::collections::BTreeMap<String, String>,
    meter: &super::turn_trace::Meter<'_>,
) -> String {
    older.push(HistoryMessage::User {
        content: Content::Text(
            "Summarize the conversation so far in a few sentences: facts, decisions and \
             open questions. Answer with the summary only."
                .into(),
        ),
    });
    let history = shared(older);
    let mut stream = provider.stream(ModelRequest {
        system_prompt: "You write faithful, compact summaries of conversations.".into(),
        messages: history.messages,
        history_chars: history.chars,
        options: std::sync::Arc::new(options.clone()),
        tools: std::sync::Arc::from(Vec::new()),
    });
    let started = std::time::Instant::now();
    let mut tokens = (0, 0);
    let mut summary = String::new();
    while let Some(event) = stream.next().await {
        match event {
            Ok(ModelEvent::TextDelta(delta)) => summary.push_str(&delta),
            Ok(ModelEvent::Usage {
                input_tokens,
                output_tokens,
            }) => {
                tokens.0 += input_tokens;
                tokens.1 += output_tokens;
            }
            Ok(_) => {}
            Err(error) => {
                meter.record(started.elapsed(), true, tokens.0, tokens.1);
                tracing::warn!(error = %error, "the summary could not be made");
                return "(no summary could be made)".into();
            }
        }
    }
    meter.record(started.elapsed(), false, tokens.0, tokens.1);
    summary
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(text: &str) -> HistoryMessage {
        HistoryMessage::User {
            content: Content::Text(text.into()),
        }
    }

    fn tool(id: &str) -> HistoryMessage {
        HistoryMessage::Tool {
            tool_call_id: id.into(),
            content: Content::Text("r".into()),
        }
    }

    fn assistant() -> HistoryMessage {
        HistoryMessage::Assistant {
            content: Content::Text("a".into()),
        }
    }

    #[test]
    fn the_token_ratio_follows_reports_within_bounds() {
        assert_eq!(updated_token_ratio(None, 0, 100), None, "no report");
        assert_eq!(updated_token_ratio(None, 200, 100), Some(2.0));
        assert_eq!(updated_token_ratio(Some(2.0), 400, 100), Some(3.0));
        assert_eq!(
            updated_token_ratio(None, 100_000, 10),
            Some(MAX_TOKEN_RATIO)
        );
        assert_eq!(updated_token_ratio(None, 1, 1000), Some(MIN_TOKEN_RATIO));
    }

    #[test]
    fn the_cut_lands_on_a_user_message_never_between_a_call_and_its_result() {
        let tail: Vec<(i64, HistoryMessage)> = [
            user("1"),
            assistant(),
            tool("a"),
            assistant(),
            user("2"),
            assistant(),
            tool("b"),
            tool("c"),
            assistant(),
        ]
        .into_iter()
        .enumerate()
        .map(|(i, m)| (i as i64, m))
        .collect();
        assert_eq!(
            cut_point(&tail, 3),
            Some(4),
            "back to the last user message"
        );
        assert_eq!(cut_point(&tail, 5), Some(4));
        assert_eq!(cut_point(&tail, 7), Some(4), "forward to a user message");
        assert_eq!(
            cut_point(&tail, 100),
            None,
            "nothing older than the first user message"
        );
        assert_eq!(cut_point(&tail[..4], 1), None);
    }
}
