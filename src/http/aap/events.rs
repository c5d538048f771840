//! `GET /sessions/{id}/events`: the session's whole log after a cursor, then live.

use actix_web::{HttpResponse, web};

use super::session_id;
use super::turns::{EventsQuery, cursor, render_stream};
use crate::app::AppState;
use crate::auth::TenantAuth;
use crate::engine::Follow;
use crate::error::{ApiError, OrNotFound};
use crate::http::cursor::ResumeFrom;
use crate::model::StreamMode;

pub async fn session_events(
    auth: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<String>,
    query: web::Query<EventsQuery>,
    resume: ResumeFrom,
) -> Result<HttpResponse, ApiError> {
    let session = session_id(&path)?;
    let after = cursor(&resume)?;
    state
        .store
        .get_session(&auth.tenant_id, &session)
        .await
        .or_not_found("session")?;
    let events = state.engine.follow(Follow {
        tenant: auth.tenant_id.clone(),
        session,
        turn: None,
        after,
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
