//! `GET /sessions/{session_id}/turns/{turn_id}/log`: a turn's stored events as JSON, each
//! with its id (the SSE `id:`), kind, time and data, a page at a time. Deltas are listed as
//! they were streamed, each with its own id, so any id here is a cursor the event streams
//! resume after.

use actix_web::{HttpResponse, web};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};

use super::session_id;
use crate::app::AppState;
use crate::engine::Deltas;
use crate::http::Query;
use crate::http::TenantAuth;
use crate::http::error::{ApiError, ErrorCode, OrNotFound};
use crate::http::openapi::schemas as doc;
use crate::model::{Event, TurnId};

const DEFAULT_LIMIT: u32 = 500;
const MAX_LIMIT: u32 = 1000;

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct LogQuery {
    /// Events with an id greater than this (0 when omitted).
    #[param(minimum = 0)]
    after: Option<i64>,
    /// Stored rows to read, 1 to 1000 (500 when omitted): events stored together (a
    /// message's deltas, a finished turn's events) count as one.
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<u32>,
}

/// One stored event.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StoredEvent {
    /// The event's id in its session's log (the SSE `id:`).
    id: i64,
    /// `turn_start`, `message_start`, `text_delta`, `thinking_delta`, `tool_call`,
    /// `message_stop`, `tool_result`, `usage`, `compaction` or `turn_stop`.
    kind: String,
    created_at: DateTime<Utc>,
    /// The event's fields, as stored.
    #[schema(value_type = Object)]
    data: Value,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TurnLog {
    events: Vec<StoredEvent>,
    /// The `after` of the next page: present while the turn has more stored events, and
    /// while it runs (more may come).
    #[serde(skip_serializing_if = "Option::is_none")]
    next: Option<i64>,
}

impl From<&Event> for StoredEvent {
    fn from(event: &Event) -> Self {
        StoredEvent {
            id: event.seq,
            kind: event.data.kind().to_owned(),
            created_at: event.created_at,
            data: serde_json::from_str(&event.data.to_data()).unwrap_or(Value::Null),
        }
    }
}

/// The turn's stored events after `after`, oldest first.
#[utoipa::path(get, path = "/sessions/{session_id}/turns/{turn_id}/log", tag = "AAP",
    security(("tenant" = [])),
    params(("session_id" = String, Path, description = "A session id (`sess_…`)"), ("turn_id" = String, Path, description = "A turn id (`turn_…`)"), LogQuery),
    responses(
        (status = 200, description = "A page of the turn's stored events", body = TurnLog),
        (status = 400, description = "A bad `after` or `limit`", body = doc::ErrorBody),
        (status = 404, description = "No such turn of this tenant", body = doc::ErrorBody),
    ))]
pub async fn get_turn_log(
    auth: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    query: Query<LogQuery>,
) -> Result<HttpResponse, ApiError> {
    let (session, turn) = path.into_inner();
    let session = session_id(&session)?;
    let turn: TurnId = turn.parse().map_err(|_| ApiError::not_found("turn"))?;
    let after = query.after.unwrap_or(0);
    if after < 0 {
        return Err(ApiError::new(
            ErrorCode::InvalidQuery,
            "after: must be an event id (a non-negative integer)",
        ));
    }
    let limit = query.limit.unwrap_or(DEFAULT_LIMIT);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(ApiError::new(
            ErrorCode::InvalidQuery,
            format!("limit: must be between 1 and {MAX_LIMIT}"),
        ));
    }
    let record = state
        .engine()
        .get_turn(&auth.tenant_id, &session, &turn)
        .await
        .or_not_found("turn")?;
    let events = state
        .engine()
        .list_events(
            &auth.tenant_id,
            &session,
            Some(&turn),
            after,
            i64::from(limit),
            Deltas::AsStreamed,
        )
        .await?;
    let last = events.last().map(|event| event.seq);
    let next = match (last, record.last_seq) {
        (Some(last), Some(end)) if last < end => Some(last),
        (Some(last), None) => Some(last),
        _ => None,
    };
    Ok(HttpResponse::Ok().json(TurnLog {
        events: events.iter().map(StoredEvent::from).collect(),
        next,
    }))
}
