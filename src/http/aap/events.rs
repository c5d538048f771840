//! `GET /sessions/{id}/events`: the session's whole log after a cursor, then live.

use actix_web::{HttpResponse, web};

use super::PathSession;
use super::turns::{EventsQuery, cursor, render_stream};
use crate::app::AppState;
use crate::engine::Follow;
use crate::error::ApiError;
use crate::http::cursor::ResumeFrom;
use crate::model::StreamMode;
use crate::store::Deltas;

pub async fn session_events(
    path: PathSession,
    state: web::Data<AppState>,
    query: web::Query<EventsQuery>,
    resume: ResumeFrom,
) -> Result<HttpResponse, ApiError> {
    let after = cursor(&resume)?;
    let events = state.engine.follow(Follow {
        tenant: path.tenant,
        session: path.session.id,
        turn: None,
        after,
        deltas: Deltas::Merged,
    });
    Ok(render_stream(&state, events, query.mode(), None))
}

impl EventsQuery {
    pub fn mode(&self) -> StreamMode {
        match self.stream {
            Some(StreamMode::Message) => StreamMode::Message,
            _ => StreamMode::Delta,
        }
    }
}
