//! A2A streams as server-sent events: one `data:` line of JSON per event, preceded by an
//! `id:` (the frame's id) when it has one, which `Last-Event-ID` names to resume after it.

use actix_web::{HttpRequest, HttpResponse};
use futures_util::StreamExt;

use super::error::A2aError;
use super::ops::Frames;
use crate::app::AppState;
use crate::http::frame_id::FrameId;
use crate::http::sse::{self, IdFrame};

pub async fn response(state: &AppState, frames: Frames) -> HttpResponse {
    let frames = frames.map(|(id, event)| IdFrame {
        id,
        data: event.to_string(),
    });
    sse::response(state, frames, None).await
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
