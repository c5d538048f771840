//! `GET /sessions/{id}/events`: the session's whole log after a cursor, then live.

use actix_web::{HttpResponse, web};

use super::PathSession;
use super::turns::{EventsQuery, cursor, render_stream};
use crate::app::AppState;
use crate::engine::Deltas;
use crate::engine::Follow;
use crate::http::Query;
use crate::http::cursor::ResumeFrom;
use crate::http::error::ApiError;
use crate::http::openapi::schemas as doc;
use crate::model::StreamMode;

/// The session's events after the cursor, replayed from the log, then live.
#[utoipa::path(get, path = "/sessions/{session_id}/events", tag = "AAP",
    security(("tenant" = [])),
    params(("session_id" = String, Path, description = "A session id (`sess_…`)"), EventsQuery, ("after" = Option<u64>, Query, description = "Resume after this event id"), ("Last-Event-ID" = Option<String>, Header, description = "Resume after this event id (wins over `after`)")),
    responses(
        (status = 200, description = "The events as SSE", content_type = "text/event-stream", body = doc::AapStream),
        (status = 400, description = "A cursor that is not an event id", body = doc::ErrorBody),
        (status = 404, description = "No such session of this tenant", body = doc::ErrorBody),
    ))]
pub async fn session_events(
    path: PathSession,
    state: web::Data<AppState>,
    query: Query<EventsQuery>,
    resume: ResumeFrom,
) -> Result<HttpResponse, ApiError> {
    let after = cursor(&resume)?;
    let events = state.engine().follow(Follow {
        tenant: path.tenant,
        session: path.session.id,
        turn: None,
        after,
        deltas: Deltas::Merged,
    });
    Ok(render_stream(&state, events, query.mode(), None).await)
}

impl EventsQuery {
    pub fn mode(&self) -> StreamMode {
        match self.stream {
            Some(StreamMode::Message) => StreamMode::Message,
            _ => StreamMode::Delta,
        }
    }
}
