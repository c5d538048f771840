//! `POST /acp/runs` (mode sync, async or stream) and `GET /acp/runs/{id}`.
//!
//! A run is a chain of engine turns in one session: the first turn's id names it, each
//! resume adds a turn. `awaiting` is a turn's `tool_use` stop; a resume's parts answer
//! the pending calls.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use serde_json::Value;

use super::convert::{Origins, parse_input};
use super::error::AcpError;
use super::replay::{
    Cursor, identity, load_run, replay, run_uuid, set_run_id, sse_response, stream,
};
use super::sessions::check_session_key;
use super::wire::{ErrorObject as AcpErrorBody, RunObject};
use crate::agents::SessionConfigRequest;
use crate::app::AppState;
use crate::engine::{EngineError, InputMessage, SessionRef, StartedTurn, TurnRequest};
use crate::http::TenantAuth;
use crate::http::error::ApiError;
use crate::http::frame_id::FrameId;
use crate::model::Run;
use crate::model::StreamMode;

#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Mode {
    Sync,
    Async,
    Stream,
}

pub(super) fn parse_body(
    body: Result<web::Bytes, actix_web::Error>,
) -> Result<serde_json::Map<String, Value>, AcpError> {
    let body = body.map_err(|e| {
        let status = e.as_response_error().status_code();
        AcpError::new(status, format!("cannot read the request body: {e}"))
    })?;
    match serde_json::from_slice(&body) {
        Ok(Value::Object(object)) => Ok(object),
        Ok(_) => Err(AcpError::invalid("body", "must be a JSON object")),
        Err(e) => Err(AcpError::invalid("body", format!("is not valid JSON: {e}"))),
    }
}

pub(super) fn parse_mode(object: &serde_json::Map<String, Value>) -> Result<Mode, AcpError> {
    match object.get("mode") {
        None | Some(Value::Null) => Ok(Mode::Sync),
        Some(Value::String(mode)) => match mode.as_str() {
            "sync" => Ok(Mode::Sync),
            "async" => Ok(Mode::Async),
            "stream" => Ok(Mode::Stream),
            other => Err(AcpError::invalid(
                "mode",
                format!("`{other}`: expected sync, async or stream"),
            )),
        },
        Some(_) => Err(AcpError::invalid("mode", "must be a string")),
    }
}

fn optional_str<'a>(
    object: &'a serde_json::Map<String, Value>,
    key: &str,
    at: &str,
) -> Result<Option<&'a str>, AcpError> {
    match object.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if !s.is_empty() => Ok(Some(s)),
        Some(_) => Err(AcpError::invalid(at, "must be a non-empty string")),
    }
}

/// Engine refusals of a run's input, naming the part at fault.
fn input_error(error: EngineError, origins: &Origins) -> AcpError {
    match error {
        EngineError::InvalidInput(input) => AcpError::invalid(origins.at(input.part), input.reason),
        EngineError::Invalid(field) => AcpError::invalid(origins.at(None), field.message),
        awaiting @ EngineError::AwaitingInput { .. } => {
            AcpError::invalid(origins.at(None), awaiting.to_string())
        }
        other => other.into(),
    }
}

/// Starts a run (`mode`: `sync`, the default, `async` or `stream`).
#[utoipa::path(post, path = "/acp/runs", tag = "ACP", operation_id = "acp_create_run",
    security(("tenant" = [])),
    request_body = crate::http::openapi::schemas::AcpRunCreateRequest,
    responses(
        (status = 200, description = "`sync`: the run once it stopped; `stream`: its events as SSE",
            content((RunObject = "application/json"), (crate::http::openapi::schemas::AcpStream = "text/event-stream")), headers(("Run-ID" = String, description = "The run's UUID"))),
        (status = 202, description = "`async`: the run as it started", body = RunObject, headers(("Run-ID" = String, description = "The run's UUID"))),
        (status = 400, description = "The session ids disagree, or the body cannot be read", body = AcpErrorBody),
        (status = 404, description = "No such agent, session or run", body = AcpErrorBody),
        (status = 409, description = "The session is running another turn", body = AcpErrorBody),
        (status = 422, description = "The body is not a valid request", body = AcpErrorBody),
        (status = 429, description = "Too many turns are waiting", body = AcpErrorBody),
        (status = 503, description = "The server is shutting down", body = AcpErrorBody),
    ))]
pub async fn create_run(
    auth: Result<TenantAuth, ApiError>,
    state: web::Data<AppState>,
    body: Result<web::Bytes, actix_web::Error>,
) -> Result<HttpResponse, AcpError> {
    let tenant = auth?.tenant_id;
    let request = parse_body(body)?;
    let agent_name = optional_str(&request, "agent_name", "agent_name")?
        .ok_or_else(|| AcpError::invalid("agent_name", "is required"))?;
    let agent = state
        .engine()
        .find_agent(Some(&tenant), agent_name)
        .await?
        .ok_or_else(|| {
            AcpError::not_found(format!("Agent {agent_name}"))
                .hint(&state.engine().agents_listed(Some(&tenant)))
        })?;
    let mode = parse_mode(&request)?;
    let session_id = optional_str(&request, "session_id", "session_id")?;
    let forwarded = match request.get("session") {
        None | Some(Value::Null) => None,
        Some(Value::Object(session)) => optional_str(session, "id", "session.id")?,
        Some(_) => return Err(AcpError::invalid("session", "must be a session descriptor")),
    };
    if let Some(key) = session_id {
        check_session_key(key, "session_id")?;
    }
    if let Some(key) = forwarded {
        check_session_key(key, "session.id")?;
    }
    if let (Some(a), Some(b)) = (session_id, forwarded)
        && a != b
    {
        return Err(AcpError::new(
            StatusCode::BAD_REQUEST,
            "Session ID mismatch",
        ));
    }
    let (content, origins) = parse_input(request.get("input"))?;

    let reference = match session_id.or(forwarded) {
        Some(key) => Some(
            SessionRef::parse(key).ok_or_else(|| AcpError::not_found(format!("Session {key}")))?,
        ),
        None => None,
    };
    let session = state
        .engine()
        .open_context(&tenant, agent.name(), reference.as_ref())
        .await
        .map_err(|e| match (e, session_id.or(forwarded)) {
            (EngineError::NotFound(_), Some(key)) => AcpError::not_found(format!("Session {key}")),
            (EngineError::Invalid(field), _) => AcpError::invalid("session_id", field.message),
            (EngineError::WrongAgent { owner }, _) => AcpError::invalid(
                "agent_name",
                format!("this session belongs to agent `{owner}`; a session's agent cannot change"),
            ),
            (other, _) => other.into(),
        })?;
    let (run, started) = state
        .engine()
        .start_run(
            &tenant,
            &session.id,
            TurnRequest {
                agent_name: None,
                agent: SessionConfigRequest::default(),
                messages: vec![InputMessage::User { content }],
                stream: StreamMode::Delta,
                idempotency: None,
            },
        )
        .await
        .map_err(|e| input_error(e, &origins))?;
    let run_id = run_uuid(&run.id);
    let mut response = respond(&state, &run, started, mode, Cursor::After(FrameId::START)).await?;
    set_run_id(&mut response, &run_id);
    Ok(response)
}

/// Answers a request that started a turn of `run`, as `mode` asks.
pub(super) async fn respond(
    state: &AppState,
    run: &Run,
    started: StartedTurn,
    mode: Mode,
    cursor: Cursor,
) -> Result<HttpResponse, AcpError> {
    match mode {
        Mode::Stream => {
            let identity = identity(state, run).await?;
            let frames = stream(state, run, identity, Some(started), cursor);
            Ok(sse_response(state, frames).await)
        }
        // A new run is `created` as the reference answers, whether or not it started.
        Mode::Async if run.turns.len() == 1 => {
            let created = super::render::RunRenderer::new(identity(state, run).await?);
            Ok(HttpResponse::Accepted().json(created.run()))
        }
        Mode::Async => {
            let (renderer, _) = replay(state, run).await?;
            Ok(HttpResponse::Accepted().json(renderer.run()))
        }
        Mode::Sync => {
            // Until the turn stops: completed, failed, cancelled or awaiting.
            let run = state
                .engine()
                .wait_for_run(run, Some(started), None)
                .await?;
            let (renderer, _) = replay(state, &run).await?;
            Ok(HttpResponse::Ok().json(renderer.run()))
        }
    }
}

#[utoipa::path(get, path = "/acp/runs/{run_id}", tag = "ACP", operation_id = "acp_get_run",
    security(("tenant" = [])),
    params(("run_id" = String, Path, description = "A run id: its UUID, or `run_…`")),
    responses(
        (status = 200, description = "The run", body = RunObject),
        (status = 404, description = "No such run of this tenant", body = AcpErrorBody),
    ))]
pub async fn get_run(
    auth: Result<TenantAuth, ApiError>,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, AcpError> {
    let tenant = auth?.tenant_id;
    let run = load_run(&state, &tenant, &path).await?;
    let (renderer, _) = replay(&state, &run).await?;
    Ok(HttpResponse::Ok().json(renderer.run()))
}
