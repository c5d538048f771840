//! A run rendered from the log: its current state, its events as a list, or its events
//! as an SSE stream (replayed from the log, then live).

use actix_web::http::header;
use futures_util::{Stream, StreamExt};

use super::error::{AcpError, OrAcpNotFound};
use super::render::{RunIdentity, RunRenderer};
use super::sessions::session_uuid;
use super::wire::EventObject;
use crate::app::AppState;
use crate::engine::{EngineError, RunView, StartedTurn, ViewParts};
use crate::http::frame_id::FrameId;
use crate::http::sse::{self, IdFrame};
use crate::model::{Run, RunId, TenantId, TurnId};

/// The response header naming a run.
pub const RUN_ID_HEADER: &str = "run-id";

/// A run as ACP writes its id: its UUID (that of its first turn).
pub fn run_uuid(run: &RunId) -> String {
    run.to_uuid().hyphenated().to_string()
}

/// The run named by a path: its UUID, or its id (`run_…`, or its first turn's `turn_…`).
pub async fn load_run(state: &AppState, tenant: &TenantId, id: &str) -> Result<Run, AcpError> {
    let run = match uuid::Uuid::parse_str(id) {
        Ok(uuid) => Some(RunId::from_uuid(uuid)),
        Err(_) => id
            .parse::<RunId>()
            .ok()
            .or_else(|| id.parse::<TurnId>().ok().map(|turn| Run::id_for(&turn))),
    };
    let missing = || AcpError::not_found(format!("Run {id}"));
    let run = run.ok_or_else(missing)?;
    match state.engine().get_run(tenant, &run).await {
        Err(EngineError::NotFound(_)) => Err(missing()),
        other => Ok(other?),
    }
}

/// The run's view (its session and agent; its events when `parts` asks for them).
pub async fn view(state: &AppState, run: &Run, parts: ViewParts) -> Result<RunView, AcpError> {
    state
        .engine()
        .run_view(run.clone(), None, parts)
        .await
        .or_acp_not_found("Session")
}

/// Who the run is, for rendering.
pub fn identity_of(view: &RunView) -> RunIdentity {
    RunIdentity {
        run_id: run_uuid(&view.run.id),
        first_turn: view.run.turns[0],
        cancel_turn: view.run.cancel_turn,
        agent_name: view.session.agent.clone(),
        session_id: session_uuid(&view.session),
        created_at: view.run.created_at,
        agent: view.agent.clone(),
    }
}

/// Who the run is, for rendering (its view without its events).
pub async fn identity(state: &AppState, run: &Run) -> Result<RunIdentity, AcpError> {
    Ok(identity_of(&view(state, run, ViewParts::AGENT).await?))
}

/// Every stored event of the run's turns, rendered: the renderer holds the run as it
/// stands, the list is every ACP event with its frame id.
pub async fn replay(
    state: &AppState,
    run: &Run,
) -> Result<(RunRenderer, Vec<(FrameId, EventObject)>), AcpError> {
    let view = view(state, run, ViewParts::EVENTS).await?;
    let mut renderer = RunRenderer::new(identity_of(&view));
    let mut rendered = Vec::new();
    for event in &view.events {
        rendered.extend(renderer.render(event));
    }
    rendered.extend(renderer.settle(run));
    Ok((renderer, rendered))
}

/// Which frames a stream sends.
#[derive(Debug, Clone)]
pub enum Cursor {
    /// Those after this frame.
    After(FrameId),
    /// Those of this turn's events (a resume's).
    Turn(TurnId),
}

/// The run's events as SSE frames (`id:` is the frame's id): earlier turns from the log,
/// the last one live (`started`, when this request started it) until it stops.
pub fn stream(
    state: &AppState,
    run: &Run,
    identity: RunIdentity,
    started: Option<StartedTurn>,
    cursor: Cursor,
) -> impl Stream<Item = AcpFrame> + 'static {
    let events = sse::until_failure(state.engine().follow_run(run, started), "run");
    let settled = run.clone();
    async_stream::stream! {
        let mut renderer = RunRenderer::new(identity);
        let mut events = std::pin::pin!(events);
        while let Some(event) = events.next().await {
            for (id, rendered) in renderer.render(&event) {
                let wanted = match &cursor {
                    Cursor::After(after) => id > *after,
                    Cursor::Turn(turn) => event.turn_id == Some(*turn),
                };
                if wanted {
                    yield frame(id, &rendered);
                }
            }
        }
        // A run cancelled while it awaited, before cancelling wrote a turn of its own.
        if settled.cancel_turn.is_none()
            && settled.status == crate::model::RunStatus::Cancelled
            && let Some((id, rendered)) = renderer.settle(&settled)
            && !matches!(cursor, Cursor::After(after) if id <= after)
        {
            yield frame(id, &rendered);
        }
    }
}

/// One ACP frame: `id: <frame id>`, then the event.
pub type AcpFrame = IdFrame<FrameId>;

fn frame(id: FrameId, event: &EventObject) -> AcpFrame {
    IdFrame {
        id: Some(id),
        data: serde_json::to_string(event).expect("events serialize"),
    }
}

/// An SSE response of `frames`, as the reference sends it.
pub async fn sse_response(
    state: &AppState,
    frames: impl Stream<Item = AcpFrame> + 'static,
) -> actix_web::HttpResponse {
    sse::response_as(state, sse::UTF8_EVENT_STREAM, frames, None).await
}

/// Names the run in the `Run-ID` header.
pub fn set_run_id(response: &mut actix_web::HttpResponse, run_id: &str) {
    if let Ok(value) = header::HeaderValue::from_str(run_id) {
        response
            .headers_mut()
            .insert(header::HeaderName::from_static(RUN_ID_HEADER), value);
    }
}
