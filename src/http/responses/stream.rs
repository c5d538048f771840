//! A response's events as SSE: `event: <type>` and one line of JSON per event, each written
//! whole, then `data: [DONE]` once the terminal event was sent. Every stream renders the
//! turn's events from its first (replayed from the log, then live), so sequence numbers
//! are the same on every read; `starting_after` only chooses which are sent.

use futures_util::{Stream, StreamExt};

use super::render::{Identity, Renderer};
use crate::app::AppState;
use crate::engine::{Deltas, Follow};
use crate::http::sse;
use crate::model::{SessionId, TenantId};

pub enum OutFrame {
    Event { kind: &'static str, data: String },
    Done,
}

impl sse::Encode for OutFrame {
    fn encode(&self) -> String {
        match self {
            OutFrame::Event { kind, data } => format!("event: {kind}\ndata: {data}\n\n"),
            OutFrame::Done => "data: [DONE]\n\n".to_owned(),
        }
    }
}

/// The response's events with a sequence number greater than `after` (all when `None`).
pub fn frames(
    state: &AppState,
    tenant: TenantId,
    session: SessionId,
    identity: Identity,
    after: Option<u64>,
) -> impl Stream<Item = OutFrame> + 'static {
    let turn = identity.turn;
    let events = state.engine().follow(Follow {
        tenant,
        session,
        turn: Some(turn),
        after: -1,
        deltas: Deltas::AsStreamed,
    });
    let events = sse::until_failure(events, "response");
    async_stream::stream! {
        let wanted = |n: u64| after.is_none_or(|after| n > after);
        let mut renderer = Renderer::new(identity);
        for rendered in renderer.start() {
            if wanted(rendered.sequence_number) {
                yield frame(rendered);
            }
        }
        let mut events = std::pin::pin!(events);
        while let Some(event) = events.next().await {
            for rendered in renderer.render(&event) {
                if wanted(rendered.sequence_number) {
                    yield frame(rendered);
                }
            }
            if renderer.ended() {
                yield OutFrame::Done;
                break;
            }
        }
    }
}

fn frame(rendered: super::render::Rendered) -> OutFrame {
    OutFrame::Event {
        kind: rendered.kind,
        data: rendered.data.to_string(),
    }
}

pub async fn response(
    state: &AppState,
    frames: impl Stream<Item = OutFrame> + 'static,
) -> actix_web::HttpResponse {
    sse::response(state, frames, None).await
}
