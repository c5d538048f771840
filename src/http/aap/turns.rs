//! `POST /sessions/{id}/turns` and the turn routes agentry adds: list, read, follow, cancel.

use actix_web::{HttpRequest, HttpResponse, web};
use futures_util::{StreamExt, TryStreamExt};
use serde::Deserialize;
use serde_json::Value;
use utoipa::IntoParams;

use super::render::AapRenderer;
use super::wire::{PostTurnRequest, PostTurnResponse, TurnInfo, TurnList, parse_input_message};
use super::{PathSession, session_id};
use crate::agents::SessionConfigRequest;
use crate::app::AppState;
use crate::engine::Deltas;
use crate::engine::{Follow, Idempotency, TurnRequest, turn_messages};
use crate::http::Query;
use crate::http::TenantAuth;
use crate::http::cursor::{ResumeFrom, Seq};
use crate::http::error::{ApiError, OrNotFound};
use crate::http::openapi::schemas as doc;
use crate::http::pagination::{ListQuery, next_cursor};
use crate::http::{TURN_ID_HEADER, parse_json, sse};
use crate::model::{EventData, StopReason, StreamMode, TurnError, TurnId};

const IDEMPOTENCY_KEY: &str = "Idempotency-Key";

fn turn_id(raw: &str) -> Result<TurnId, ApiError> {
    let id = raw.parse().map_err(|_| ApiError::not_found("turn"))?;
    crate::telemetry::record_turn(&id);
    Ok(id)
}

/// Starts a turn: answers when it ends (`stream: "none"`) or streams its events.
#[utoipa::path(post, path = "/sessions/{session_id}/turns", tag = "AAP",
    security(("tenant" = [])),
    params(("session_id" = String, Path, description = "A session id (`sess_…`)"),
        ("Idempotency-Key" = Option<String>, Header, description = "1 to 255 visible ASCII characters: a retry with the same key and body gets the same turn")),
    request_body = PostTurnRequest,
    responses(
        (status = 200, description = "The turn's result (`stream: \"none\"`) or its events as SSE (`delta`, `message`)",
            content((PostTurnResponse = "application/json"), (doc::AapStream = "text/event-stream")),
            headers(("Agentry-Turn-Id" = String, description = "The turn this response belongs to"))),
        (status = 400, description = "The body is not valid JSON, or a field is wrong", body = doc::ErrorBody),
        (status = 404, description = "No such session of this tenant", body = doc::ErrorBody),
        (status = 409, description = "The session is running another turn, or its agent is gone", body = doc::ErrorBody, headers(("Retry-After" = u32, description = "Seconds before a retry may succeed"))),
        (status = 422, description = "The Idempotency-Key was used with another body", body = doc::ErrorBody),
        (status = 429, description = "Too many turns are waiting", body = doc::ErrorBody, headers(("Retry-After" = u32, description = "Seconds before a retry may succeed"))),
        (status = 503, description = "The server is shutting down", body = doc::ErrorBody, headers(("Retry-After" = u32, description = "Seconds before a retry may succeed"))),
    ))]
pub async fn post_turn(
    auth: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<String>,
    req: HttpRequest,
    body: web::Json<Value>,
) -> Result<HttpResponse, ApiError> {
    let session = session_id(&path)?;
    let body = body.into_inner();
    let idempotency = match req.headers().get(IDEMPOTENCY_KEY) {
        None => None,
        Some(value) => {
            let key = value
                .to_str()
                .ok()
                .filter(|k| !k.is_empty() && k.len() <= 255)
                .ok_or_else(|| {
                    ApiError::invalid(IDEMPOTENCY_KEY, "must be 1 to 255 visible ASCII characters")
                })?;
            // A digest of the request as sent, for a retry with the key to compare.
            Some(Idempotency::of(key.to_owned(), &body))
        }
    };
    let request: PostTurnRequest = parse_json(body)?;
    let messages = request
        .messages
        .iter()
        .enumerate()
        .map(|(i, m)| parse_input_message(m, &format!("messages[{i}]")))
        .collect::<Result<Vec<_>, _>>()?;
    let agent = request.agent.unwrap_or(super::wire::AgentOverride {
        name: None,
        tools: None,
        options: None,
    });
    let stream = request.stream.unwrap_or_default();
    let turn_request = TurnRequest {
        agent_name: agent.name,
        agent: SessionConfigRequest {
            server_tools: agent.tools,
            options: agent.options.unwrap_or_default(),
            client_tools: request.tools,
        },
        messages,
        stream,
        idempotency,
    };
    let started = state
        .engine()
        .start_turn(&auth.tenant_id, &session, turn_request)
        .await?;
    let turn = started.turn.id;
    let events = state.engine().follow_started(started);
    if stream == StreamMode::None {
        return wait_for_result(turn, events).await;
    }
    Ok(render_stream(&state, events, stream, Some(&turn)).await)
}

/// `stream: "none"`: waits for the turn to end and answers with what it produced.
async fn wait_for_result(
    turn: TurnId,
    events: impl futures_util::Stream<
        Item = Result<std::sync::Arc<crate::model::Event>, crate::engine::StoreError>,
    >,
) -> Result<HttpResponse, ApiError> {
    let events: Vec<std::sync::Arc<crate::model::Event>> = events.try_collect().await?;
    let data = || events.iter().map(|event| &event.data);
    let (stop_reason, error) = data()
        .rev()
        .find_map(|e| match e {
            EventData::TurnStop {
                stop_reason, error, ..
            } => Some((*stop_reason, error.clone())),
            _ => None,
        })
        .unwrap_or_else(|| {
            let ended = TurnError::new("internal", "the turn ended without its stop");
            (StopReason::Error, Some(ended))
        });
    Ok(HttpResponse::Ok()
        .insert_header((TURN_ID_HEADER, turn.to_string()))
        .json(PostTurnResponse {
            stop_reason,
            messages: turn_messages(data()),
            error,
        }))
}

/// The events as AAP SSE in `mode`.
pub(super) async fn render_stream(
    state: &AppState,
    events: impl futures_util::Stream<
        Item = Result<std::sync::Arc<crate::model::Event>, crate::engine::StoreError>,
    > + 'static,
    mode: StreamMode,
    turn: Option<&TurnId>,
) -> HttpResponse {
    let mut renderer = AapRenderer::new(mode);
    let frames = sse::until_failure(events, "turn")
        .flat_map(move |event| futures_util::stream::iter(renderer.render(&event)));
    sse::response(state, frames, turn.copied()).await
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct EventsQuery {
    /// `delta` (the default) or `message` (whole blocks at each message's end).
    pub stream: Option<StreamMode>,
}

/// The cursor of a (re)connecting client: an event id, `Last-Event-ID` winning over
/// `?after=`; 0 (from the start) when neither is sent.
pub(super) fn cursor(resume: &ResumeFrom) -> Result<i64, ApiError> {
    match resume.parse::<Seq>() {
        Ok(seq) => Ok(seq.map_or(0, |Seq(seq)| seq)),
        Err(bad) => Err(ApiError::invalid(
            bad.field,
            "must be an event id (a non-negative integer)",
        )),
    }
}

/// The turn's events after the cursor, replayed from the log, then live until it ends.
#[utoipa::path(get, path = "/sessions/{session_id}/turns/{turn_id}/events", tag = "AAP",
    security(("tenant" = [])),
    params(("session_id" = String, Path, description = "A session id (`sess_…`)"), ("turn_id" = String, Path, description = "A turn id (`turn_…`)"), EventsQuery, ("after" = Option<u64>, Query, description = "Resume after this event id"), ("Last-Event-ID" = Option<String>, Header, description = "Resume after this event id (wins over `after`)")),
    responses(
        (status = 200, description = "The events as SSE", content_type = "text/event-stream", body = doc::AapStream, headers(("Agentry-Turn-Id" = String, description = "The turn this response belongs to"))),
        (status = 400, description = "A cursor that is not an event id", body = doc::ErrorBody),
        (status = 404, description = "No such turn of this tenant", body = doc::ErrorBody),
    ))]
pub async fn turn_events(
    auth: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    query: Query<EventsQuery>,
    resume: ResumeFrom,
) -> Result<HttpResponse, ApiError> {
    let (session, turn) = path.into_inner();
    let session = session_id(&session)?;
    let turn = turn_id(&turn)?;
    let after = cursor(&resume)?;
    let record = state
        .engine()
        .get_turn(&auth.tenant_id, &session, &turn)
        .await
        .or_not_found("turn")?;
    let events = state.engine().follow(Follow {
        tenant: auth.tenant_id,
        session,
        turn: Some(turn),
        after,
        deltas: Deltas::Merged,
    });
    Ok(render_stream(&state, events, query.mode(), Some(&record.id)).await)
}

/// The session's turns, newest first, a page at a time.
#[utoipa::path(get, path = "/sessions/{session_id}/turns", tag = "AAP",
    security(("tenant" = [])),
    params(("session_id" = String, Path, description = "A session id (`sess_…`)"), ListQuery),
    responses(
        (status = 200, description = "A page of turns", body = TurnList),
        (status = 400, description = "A bad `limit` or `after`", body = doc::ErrorBody),
        (status = 404, description = "No such session of this tenant", body = doc::ErrorBody),
    ))]
pub async fn list_turns(
    path: PathSession,
    state: web::Data<AppState>,
    query: Query<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    let cursor = query.cursor()?;
    let (turns, more) = state
        .engine()
        .list_turns(&path.tenant, &path.session.id, cursor.page())
        .await?;
    let next = next_cursor(&turns, more, |t| t.id.to_string());
    Ok(HttpResponse::Ok().json(TurnList {
        turns: turns.into_iter().map(TurnInfo::from).collect(),
        next,
    }))
}

#[utoipa::path(get, path = "/sessions/{session_id}/turns/{turn_id}", tag = "AAP",
    security(("tenant" = [])),
    params(("session_id" = String, Path, description = "A session id (`sess_…`)"), ("turn_id" = String, Path, description = "A turn id (`turn_…`)")),
    responses(
        (status = 200, description = "The turn's record", body = TurnInfo),
        (status = 404, description = "No such turn of this tenant", body = doc::ErrorBody),
    ))]
pub async fn get_turn(
    auth: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (session, turn) = path.into_inner();
    let turn = state
        .engine()
        .get_turn(&auth.tenant_id, &session_id(&session)?, &turn_id(&turn)?)
        .await
        .or_not_found("turn")?;
    Ok(HttpResponse::Ok().json(TurnInfo::from(turn)))
}

/// Stops the turn and answers with its record once it has ended; idempotent.
#[utoipa::path(post, path = "/sessions/{session_id}/turns/{turn_id}/cancel", tag = "AAP",
    security(("tenant" = [])),
    params(("session_id" = String, Path, description = "A session id (`sess_…`)"), ("turn_id" = String, Path, description = "A turn id (`turn_…`)")),
    responses(
        (status = 200, description = "The turn's record, once it has ended", body = TurnInfo),
        (status = 404, description = "No such turn of this tenant", body = doc::ErrorBody),
    ))]
pub async fn cancel_turn(
    auth: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (session, turn) = path.into_inner();
    let turn = state
        .engine()
        .cancel_turn(&auth.tenant_id, &session_id(&session)?, &turn_id(&turn)?)
        .await?;
    Ok(HttpResponse::Ok().json(TurnInfo::from(turn)))
}
