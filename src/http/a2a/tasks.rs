//! Tasks are engine runs, contexts sessions: finding them for a caller, and rendering a
//! task from its log (its state now, or its events as a stream, replayed then live).

use futures_util::{Stream, StreamExt};

use super::error::A2aError;
use super::ops::KEY_SCOPE;
use super::render::{TaskIdentity, TaskRenderer};
use super::wire::{Body, MessageOut, PartOut, Role, StreamEvent, Task};
use crate::agents::Agent;
use crate::app::AppState;
use crate::engine::{EngineError, RunView, ViewParts, unscoped_key};
use crate::http::frame_id::FrameId;
use crate::model::{
    Content, ContentBlock, ContentEncoding, HistoryMessage, Run, RunId, Session, TenantId, TurnId,
};

/// A context's id: the client's own id for the session when it named it, else the
/// session's id.
pub fn context_id(session: &Session) -> String {
    session
        .alias
        .clone()
        .unwrap_or_else(|| session.id.to_string())
}

/// The task a client names, with its session, if it is the tenant's and this agent's.
pub async fn load_task(
    state: &AppState,
    tenant: &TenantId,
    agent: &Agent,
    id: &str,
) -> Result<(Run, Session), A2aError> {
    let missing = || A2aError::task_not_found(id);
    let run_id: RunId = id.parse().map_err(|_| missing())?;
    match state
        .engine()
        .run_in_context(tenant, &run_id, Some(agent.name()))
        .await
    {
        Err(EngineError::NotFound(_) | EngineError::WrongAgent { .. }) => Err(missing()),
        other => Ok(other?),
    }
}

/// The run's view, with what a task shows (its events and its client's messages).
pub async fn view(state: &AppState, run: Run, session: Session) -> Result<RunView, A2aError> {
    Ok(state
        .engine()
        .run_view(run, Some(session), ViewParts::ALL)
        .await?)
}

pub fn identity(view: &RunView) -> TaskIdentity {
    TaskIdentity {
        task_id: view.run.id.to_string(),
        context_id: context_id(&view.session),
        cancel_turn: view.run.cancel_turn,
        created_at: view.run.created_at,
        agent: view.agent.clone(),
    }
}

/// The view's events rendered, those of the turns `before` holds (the run as it was
/// before its last turn, for a send's stream), or all of them: the renderer holds the task
/// as it stands.
pub fn replay(view: &RunView, before: Option<&Run>) -> TaskRenderer {
    let run = before.unwrap_or(&view.run);
    let mut renderer = TaskRenderer::new(identity(view));
    for event in view
        .events
        .iter()
        .filter(|e| before.is_none() || e.turn_id.is_some_and(|t| run.turns.contains(&t)))
    {
        renderer.render(event);
    }
    renderer.settle(run);
    renderer
}

/// The task as it stands, with its history.
pub fn snapshot(view: &RunView) -> Task {
    let mut task = replay(view, None).task();
    task.history = history(view);
    task
}

/// The client's messages of the run, one per turn it sent (its user message, then each of
/// its answers to the calls it was asked for), with the `messageId` it gave them. The
/// agent's replies are the task's artifacts; its tool activity and questions are status
/// messages.
pub fn history(view: &RunView) -> Vec<MessageOut> {
    let agent = view.agent.as_deref();
    let (run, session) = (&view.run, &view.session);
    let mut names = std::collections::HashMap::new();
    let mut out: Vec<MessageOut> = Vec::new();
    let mut current: Option<TurnId> = None;
    for entry in &view.messages {
        let parts = match &entry.message {
            HistoryMessage::User { content } => content_parts(content),
            // The agent's replies are the task's artifacts, its questions status messages.
            HistoryMessage::Assistant { content } => {
                if let Content::Blocks(blocks) = content {
                    for block in blocks {
                        if let ContentBlock::ToolUse {
                            tool_call_id, name, ..
                        } = block
                        {
                            names.insert(tool_call_id.clone(), name.clone());
                        }
                    }
                }
                continue;
            }
            HistoryMessage::Tool {
                tool_call_id,
                content,
            } => {
                let name = names.get(tool_call_id);
                if name.is_some_and(|n| agent.is_some_and(|a| a.has_server_tool(n))) {
                    continue;
                }
                vec![PartOut::data(serde_json::json!({"toolResult": {
                    "toolCallId": tool_call_id, "content": content,
                }}))]
            }
            HistoryMessage::System { .. } => continue,
        };
        if parts.is_empty() {
            continue;
        }
        match out.last_mut() {
            Some(message) if current == Some(entry.turn_id) => message.parts.extend(parts),
            _ => {
                current = Some(entry.turn_id);
                // The turn's key, read with the message: no query per message.
                let message_id = entry
                    .turn_key
                    .as_deref()
                    .and_then(|key| unscoped_key(KEY_SCOPE, key))
                    .map_or_else(|| format!("{}-h{}", run.id, entry.position), str::to_owned);
                out.push(MessageOut {
                    message_id,
                    context_id: context_id(session),
                    task_id: Some(run.id.to_string()),
                    role: Role::User,
                    parts,
                });
            }
        }
    }
    out
}

/// A history message's content as parts: text, tool calls as data, body parts by kind.
fn content_parts(content: &Content) -> Vec<PartOut> {
    let blocks = match content {
        Content::Text(text) => return vec![PartOut::text(text.clone())],
        Content::Blocks(blocks) => blocks,
    };
    blocks
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text { text } => Some(PartOut::text(text.clone())),
            ContentBlock::Thinking { .. } => None,
            ContentBlock::ToolUse { .. } => None,
            ContentBlock::Image { url } => Some(PartOut {
                body: Body::Url(url.clone()),
                media_type: None,
                filename: None,
                metadata: None,
            }),
            ContentBlock::Part(part) => {
                let body = match (&part.content, &part.content_url) {
                    (_, Some(url)) => Body::Url(url.clone()),
                    (Some(c), None) if part.content_encoding == ContentEncoding::Base64 => {
                        Body::Raw(c.clone())
                    }
                    (Some(c), None)
                        if crate::model::media_type(&part.content_type) == "application/json" =>
                    {
                        Body::Data(serde_json::from_str(c).unwrap_or_else(|_| serde_json::json!(c)))
                    }
                    (Some(c), None) => Body::Text(c.clone()),
                    (None, None) => Body::Text(String::new()),
                };
                Some(PartOut {
                    body,
                    media_type: Some(part.content_type.clone()),
                    filename: part
                        .name
                        .as_deref()
                        .map(|n| n.trim_start_matches('/').to_owned()),
                    metadata: part.metadata.clone(),
                })
            }
        })
        .collect()
}

/// The task's events after `after` as frames, from the log, then live until its last
/// turn stops. Deltas come as streamed, each with its own frame, live or replayed.
pub fn follow(
    state: &AppState,
    run: &Run,
    identity: TaskIdentity,
    after: FrameId,
) -> impl Stream<Item = (FrameId, StreamEvent)> + 'static {
    let events = crate::http::sse::until_failure(state.engine().follow_run(run, None), "task");
    let settled = run.clone();
    async_stream::stream! {
        let mut renderer = TaskRenderer::new(identity);
        let mut events = std::pin::pin!(events);
        while let Some(event) = events.next().await {
            for (id, rendered) in renderer.render(&event) {
                if id > after {
                    yield (id, rendered);
                }
            }
        }
        if settled.cancel_turn.is_none()
            && let Some((id, rendered)) = renderer.settle(&settled)
            && id > after
        {
            yield (id, rendered);
        }
    }
}
