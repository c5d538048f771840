//! A2A streams as server-sent events: one `data:` line of JSON per event, preceded by an
//! `id:` (the frame's id) when it has one, which `Last-Event-ID` names to resume after it.

use actix_web::{HttpRequest, HttpResponse};
use futures_util::StreamExt;

use super::error::A2aError;
use super::ops::Frames;
use crate::app::AppState;
use crate::http::frame_id::FrameId;
use crate::http::sse::{self, Encode, Frame};

struct A2aFrame {
    id: Option<FrameId>,
    data: String,
}

impl Encode for A2aFrame {
    fn encode(&self) -> String {
        let body = Frame {
            id: None,
            event: None,
            data: self.data.clone(),
        }
        .encode();
        match self.id {
            Some(id) => format!("id: {id}\n{body}"),
            None => body,
        }
    }
}

pub fn response(state: &AppState, frames: Frames) -> HttpResponse {
    let keep_alive = std::time::Duration::from_secs(state.settings().engine.sse_keep_alive_seconds);
    let frames = frames.map(|(id, event)| A2aFrame {
        id,
        data: event.to_string(),
    });
    sse::response(frames, keep_alive, None)
}

/// The frame a client resumes after (`Last-Event-ID`), if it sent one.
pub fn last_event_id(req: &HttpRequest) -> Result<Option<FrameId>, A2aError> {
    let Some(value) = req.headers().get("last-event-id") else {
        return Ok(None);
    };
    value
        .to_str()
        .ok()
        .and_then(|v| v.parse::<FrameId>().ok())
        .map(Some)
        .ok_or_else(|| {
            A2aError::invalid(
                "Last-Event-ID",
                "must be the id of a frame this server sent (`<seq>` or `<seq>.<k>`)",
            )
        })
}
