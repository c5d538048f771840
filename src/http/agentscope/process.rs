//! `POST /agentscope/process` (and `/agentscope/agents/{agent}/process`): an AgentScope
//! `AgentRequest` becomes an engine turn; its events stream back as AgentScope objects.
//! `GET /agentscope/responses/{id}/events` replays or resumes a response.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError, web};
use futures_util::StreamExt;
use serde_json::{Map, Value, json};

use super::convert;
use super::render::{AgentScopeRenderer, ResponseIdentity};
use super::wire::{RefusalEvent, ResponseObject};
use crate::agents::SessionConfigRequest;
use crate::app::AppState;
use crate::config::HistoryType;
use crate::engine::Deltas;
use crate::engine::StoreError;
use crate::engine::{
    EngineError, Follow, Idempotency, SessionRef, TurnRequest, scoped_key, split_input,
    unscoped_key,
};
use crate::http::TenantAuth;
use crate::http::cursor::{ResumeFrom, Seq};
use crate::http::error::{ApiError, ErrorCode, OrNotFound};
use crate::http::history_page::{HistoryPageQuery, next_cursor};
use crate::http::openapi::schemas::AgentScopeStream;
use crate::http::sse::{self, Frame};
use crate::model::{
    Event, FieldError, HistoryMessage, Session, StreamMode, ToolSpec, Turn, TurnId,
};

/// The namespace of request ids, kept as the turn's idempotency key.
const SCOPE: &str = "agentscope";

/// Runs an `AgentRequest` on the agent it names in `model` (else the default agent).
#[utoipa::path(post, path = "/agentscope/process", tag = "AgentScope", operation_id = "agentscope_process",
    security(("tenant" = [])),
    request_body = crate::http::openapi::schemas::AgentScopeRequest,
    responses(
        (status = 200, description = "The response's objects as SSE (a refused request gets one refusal event), or with `stream: false` the final response",
            content((AgentScopeStream = "text/event-stream"), (ResponseObject = "application/json")),
            headers(("Agentry-Turn-Id" = String, description = "The turn answering the request (streams)"))),
        (status = 400, description = "A field is wrong (`stream: false`; a stream gets a refusal event)", body = crate::http::openapi::schemas::ErrorBody),
        (status = 404, description = "No such agent or session (`stream: false`)", body = crate::http::openapi::schemas::ErrorBody),
        (status = 409, description = "The session is running another turn (`stream: false`)", body = crate::http::openapi::schemas::ErrorBody, headers(("Retry-After" = u32, description = "Seconds before a retry may succeed"))),
        (status = 422, description = "The body is not JSON, or the request `id` was used with another body (`stream: false`)", body = crate::http::openapi::schemas::AgentScopeUnprocessable),
        (status = 429, description = "Too many turns are waiting (`stream: false`)", body = crate::http::openapi::schemas::ErrorBody, headers(("Retry-After" = u32, description = "Seconds before a retry may succeed"))),
        (status = 503, description = "The server is shutting down (`stream: false`)", body = crate::http::openapi::schemas::ErrorBody, headers(("Retry-After" = u32, description = "Seconds before a retry may succeed"))),
    ))]
pub async fn process(
    auth: TenantAuth,
    state: web::Data<AppState>,
    body: web::Bytes,
) -> HttpResponse {
    run(&state, &auth, None, &body).await
}

/// Runs an `AgentRequest` on the agent the path names.
#[utoipa::path(post, path = "/agentscope/agents/{agent}/process", tag = "AgentScope", operation_id = "agentscope_process_with_agent",
    security(("tenant" = [])),
    params(("agent" = String, Path, description = "An agent name")),
    request_body = crate::http::openapi::schemas::AgentScopeRequest,
    responses(
        (status = 200, description = "The response's objects as SSE (a refused request gets one refusal event), or with `stream: false` the final response",
            content((AgentScopeStream = "text/event-stream"), (ResponseObject = "application/json")),
            headers(("Agentry-Turn-Id" = String, description = "The turn answering the request (streams)"))),
        (status = 400, description = "A field is wrong (`stream: false`; a stream gets a refusal event)", body = crate::http::openapi::schemas::ErrorBody),
        (status = 404, description = "No such agent or session (`stream: false`)", body = crate::http::openapi::schemas::ErrorBody),
        (status = 409, description = "The session is running another turn (`stream: false`)", body = crate::http::openapi::schemas::ErrorBody, headers(("Retry-After" = u32, description = "Seconds before a retry may succeed"))),
        (status = 422, description = "The body is not JSON, or the request `id` was used with another body (`stream: false`)", body = crate::http::openapi::schemas::AgentScopeUnprocessable),
        (status = 429, description = "Too many turns are waiting (`stream: false`)", body = crate::http::openapi::schemas::ErrorBody, headers(("Retry-After" = u32, description = "Seconds before a retry may succeed"))),
        (status = 503, description = "The server is shutting down (`stream: false`)", body = crate::http::openapi::schemas::ErrorBody, headers(("Retry-After" = u32, description = "Seconds before a retry may succeed"))),
    ))]
pub async fn process_with_agent(
    auth: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: web::Bytes,
) -> HttpResponse {
    run(&state, &auth, Some(path.into_inner()), &body).await
}

/// How the request wants its answer, known once the body parsed.
#[derive(Clone, Copy)]
enum Answer {
    Stream,
    Json,
}

impl Answer {
    /// A refusal before the response started: an error event on a stream (as the
    /// reference answers), the error body otherwise.
    fn refuse(self, error: ApiError) -> HttpResponse {
        match self {
            // A quota's refusal is the transport's: 429 with its headers on either answer.
            _ if error.quota.is_some() => error.error_response(),
            Answer::Json => error.error_response(),
            Answer::Stream => {
                let code = serde_json::to_value(error.code)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default();
                let event = RefusalEvent {
                    error: error.message.clone(),
                    code,
                };
                let frame = Frame {
                    id: None,
                    event: None,
                    data: serde_json::to_string(&event).expect("refusals serialize"),
                };
                sse::one_frame(sse::UTF8_EVENT_STREAM, &frame)
            }
        }
    }
}

async fn run(
    state: &AppState,
    auth: &TenantAuth,
    path_agent: Option<String>,
    body: &[u8],
) -> HttpResponse {
    let request: Value = match serde_json::from_slice(body) {
        Ok(value) => value,
        Err(error) => {
            return HttpResponse::build(StatusCode::UNPROCESSABLE_ENTITY).json(json!({
                "detail": [{"type": "json_invalid", "loc": ["body"], "msg": "JSON decode error",
                            "ctx": {"error": error.to_string()}}]
            }));
        }
    };
    let answer = match request.get("stream") {
        Some(Value::Bool(false)) => Answer::Json,
        _ => Answer::Stream,
    };
    match start(state, auth, path_agent, &request).await {
        Ok((turn, identity, started)) => {
            let events = state.engine().follow_started(started);
            respond(state, answer, turn, identity, events, None).await
        }
        Err(error) => answer.refuse(error),
    }
}

/// Validates the request, finds or makes the session, and starts the turn.
async fn start(
    state: &AppState,
    auth: &TenantAuth,
    path_agent: Option<String>,
    request: &Value,
) -> Result<(Turn, ResponseIdentity, crate::engine::StartedTurn), ApiError> {
    let object = request
        .as_object()
        .ok_or_else(|| ApiError::invalid("body", "must be an AgentRequest object"))?;
    if let Some(stream) = object.get("stream")
        && !stream.is_boolean()
        && !stream.is_null()
    {
        return Err(ApiError::invalid("stream", "must be true or false"));
    }
    let items = match object.get("input") {
        Some(Value::Array(input)) if !input.is_empty() => input
            .iter()
            .enumerate()
            .map(|(i, m)| convert::parse_item(m, &format!("input[{i}]")))
            .collect::<Result<Vec<_>, _>>()?,
        Some(Value::Array(_)) => return Err(ApiError::invalid("input", "must not be empty")),
        Some(_) => return Err(ApiError::invalid("input", "must be a list of messages")),
        None => return Err(FieldError::missing("input").into()),
    };
    let explicit_agent = choose_agent(state, &auth.tenant_id, path_agent, object).await?;
    let client_tools = parse_tools(object.get("tools"))?;
    let request_id = match object.get("id") {
        None | Some(Value::Null) => None,
        Some(Value::String(id))
            if !id.is_empty() && id.len() <= 200 && !id.chars().any(char::is_control) =>
        {
            Some(id.clone())
        }
        Some(_) => {
            return Err(ApiError::invalid(
                "id",
                "must be 1-200 characters, none of them control characters",
            ));
        }
    };
    let session_key = match object.get("session_id") {
        None | Some(Value::Null) => None,
        Some(Value::String(key)) if !key.is_empty() => Some(key.clone()),
        Some(_) => {
            return Err(ApiError::invalid(
                "session_id",
                "must be a non-empty string",
            ));
        }
    };

    let last = format!("input[{}]", items.len() - 1);
    let (seed, messages) = split_input(convert::to_history(&items)).ok_or_else(|| {
        ApiError::invalid(
            last,
            "the last message must be a user message or a tool call output",
        )
    })?;
    let agent_name = explicit_agent
        .clone()
        .unwrap_or_else(|| default_agent(state, &auth.tenant_id).to_owned());
    let reference = match &session_key {
        Some(key) => Some(SessionRef::parse(key).ok_or_else(|| ApiError::not_found("session"))?),
        None => None,
    };
    let comparable = |messages: &[HistoryMessage]| -> Vec<Value> {
        convert::from_history(messages)
            .iter()
            .map(|m| json!([m.kind, m.role, m.content]))
            .collect()
    };
    let session = state
        .engine()
        .session_with_history(
            &auth.tenant_id,
            reference.as_ref(),
            &agent_name,
            seed,
            comparable,
        )
        .await
        .map_err(|e| match e {
            // The history a new session brings is this request's `input`.
            EngineError::Invalid(field) if field.field == "messages" => {
                ApiError::invalid("input", field.message)
            }
            EngineError::HistoryMismatch => ApiError::invalid(
                "input",
                "the messages before the last one are not this session's stored history; \
                 send only the new message, or the history as it is stored",
            ),
            other => other.into(),
        })?;

    let started = state
        .engine()
        .start_turn(
            &auth.tenant_id,
            &session.id,
            TurnRequest {
                agent_name: explicit_agent,
                agent: SessionConfigRequest {
                    server_tools: None,
                    options: Default::default(),
                    client_tools,
                },
                messages,
                stream: StreamMode::Delta,
                idempotency: request_id
                    .as_ref()
                    .map(|id| Idempotency::of(scoped_key(SCOPE, id), request)),
            },
        )
        .await?;
    let turn = started.turn.clone();
    let identity = identity_of(state, &session, &turn);
    Ok((turn, identity, started))
}

/// The agent named by the path, else by `model` when it names one: a configured agent or
/// one of the tenant's own.
async fn choose_agent(
    state: &AppState,
    tenant: &crate::model::TenantId,
    path_agent: Option<String>,
    request: &Map<String, Value>,
) -> Result<Option<String>, ApiError> {
    if let Some(name) = path_agent {
        return match state.engine().find_agent(Some(tenant), &name).await? {
            Some(_) => Ok(Some(name)),
            None => Err(ApiError::new(
                crate::http::error::ErrorCode::NotFound,
                format!(
                    "agent `{name}` not found; {}",
                    state.engine().agents_listed(Some(tenant))
                ),
            )),
        };
    }
    let Some(model) = request.get("model").and_then(Value::as_str) else {
        return Ok(None);
    };
    Ok(state
        .engine()
        .find_agent(Some(tenant), model)
        .await?
        .map(|_| model.to_owned()))
}

/// `agentscope.default_agent` if the tenant sees it (an agent limited to other tenants is
/// neither used nor named for it), else the first configured agent the tenant sees.
fn default_agent<'a>(state: &'a AppState, tenant: &crate::model::TenantId) -> &'a str {
    let agents = state.agents();
    let sees = |agent: &&std::sync::Arc<crate::agents::Agent>| agent.visible_to(Some(tenant));
    agents
        .get(&state.settings().agentscope.default_agent)
        .filter(sees)
        .or_else(|| agents.iter().find(sees))
        .map(|a| a.name())
        .unwrap_or_default()
}

/// `tools: [{"type": "function", "function": {name, description, parameters}}]`.
fn parse_tools(value: Option<&Value>) -> Result<Option<Vec<ToolSpec>>, ApiError> {
    let items = match value {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Array(items)) if items.is_empty() => return Ok(None),
        Some(Value::Array(items)) => items,
        Some(_) => return Err(ApiError::invalid("tools", "must be a list of tools")),
    };
    items
        .iter()
        .enumerate()
        .map(|(i, tool)| {
            let at = format!("tools[{i}]");
            let function = tool
                .get("function")
                .and_then(Value::as_object)
                .ok_or_else(|| ApiError::invalid(format!("{at}.function"), "is required"))?;
            let name = function
                .get("name")
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
                .ok_or_else(|| ApiError::invalid(format!("{at}.function.name"), "is required"))?;
            Ok(ToolSpec {
                name: name.to_owned(),
                title: None,
                description: function
                    .get("description")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                parameters: function
                    .get("parameters")
                    .cloned()
                    .filter(Value::is_object)
                    .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

fn identity_of(state: &AppState, session: &Session, turn: &Turn) -> ResponseIdentity {
    let id = turn
        .idempotency_key
        .as_deref()
        .and_then(|k| unscoped_key(SCOPE, k))
        .map_or_else(|| turn.id.to_string(), str::to_owned);
    let mcp_tools = state
        .engine()
        .agent_at_hand(session)
        .map(|agent| agent.mcp_tool_patterns())
        .unwrap_or_default();
    ResponseIdentity {
        id,
        session_id: session
            .alias
            .clone()
            .unwrap_or_else(|| session.id.to_string()),
        created_at: turn.created_at.timestamp(),
        turn_key: turn.id.hex().to_owned(),
        mcp_tools,
    }
}

/// Streams the response's frames after `after`, or waits for its end and answers with the
/// final `AgentResponse`.
async fn respond(
    state: &AppState,
    answer: Answer,
    turn: Turn,
    identity: ResponseIdentity,
    events: impl futures_util::Stream<Item = Result<std::sync::Arc<Event>, StoreError>> + 'static,
    after: Option<i64>,
) -> HttpResponse {
    let mut renderer = AgentScopeRenderer::new(identity);
    let events = sse::until_failure(events, "response");
    match answer {
        Answer::Json => {
            let mut events = std::pin::pin!(events);
            while let Some(event) = events.next().await {
                renderer.render(&event);
            }
            match renderer.last {
                Some(response) => HttpResponse::Ok().json(response),
                None => {
                    ApiError::new(ErrorCode::Internal, "the response ended early").error_response()
                }
            }
        }
        Answer::Stream => {
            let after = after.unwrap_or(-1);
            let frames = events.flat_map(move |event| {
                let frames: Vec<Frame> = renderer
                    .render(&event)
                    .into_iter()
                    .filter(|f| f.id.is_some_and(|id| id > after))
                    .collect();
                futures_util::stream::iter(frames)
            });
            sse::response_as(state, sse::UTF8_EVENT_STREAM, frames, Some(turn.id)).await
        }
    }
}

/// `GET /agentscope/responses/{id}/events`: the response's frames after `Last-Event-ID`
/// (or `?after=`), replayed from the log and then live until it ends.
#[utoipa::path(get, path = "/agentscope/responses/{response_id}/events", tag = "AgentScope", operation_id = "agentscope_response_events",
    security(("tenant" = [])),
    params(("response_id" = String, Path, description = "The request `id`, or the turn id when the request had none"),
        ("after" = Option<u64>, Query, description = "Resume after this sequence number"), ("Last-Event-ID" = Option<String>, Header, description = "Resume after this frame (wins over `after`)")),
    responses(
        (status = 200, description = "The response's objects as SSE", content_type = "text/event-stream", body = AgentScopeStream,
            headers(("Agentry-Turn-Id" = String, description = "The turn answering the request"))),
        (status = 400, description = "A cursor that is not a sequence number", body = crate::http::openapi::schemas::ErrorBody),
        (status = 404, description = "No such response of this tenant", body = crate::http::openapi::schemas::ErrorBody),
    ))]
pub async fn response_events(
    auth: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<String>,
    resume: ResumeFrom,
) -> Result<HttpResponse, ApiError> {
    let id = path.into_inner();
    let turn = match id.parse::<TurnId>() {
        Ok(turn_id) => state.engine().find_turn(&auth.tenant_id, &turn_id).await?,
        Err(_) => {
            state
                .engine()
                .find_turn_by_key(&auth.tenant_id, SCOPE, &id)
                .await?
        }
    }
    .ok_or_else(|| ApiError::not_found("response"))?;
    let after = resume
        .parse::<Seq>()
        .map_err(|bad| ApiError::invalid(bad.field, "must be a sequence number"))?
        .map(|Seq(seq)| seq);
    let session = state
        .engine()
        .get_session(&auth.tenant_id, &turn.session_id)
        .await
        .or_not_found("session")?;
    let identity = identity_of(&state, &session, &turn);
    let events = state.engine().follow(Follow {
        tenant: auth.tenant_id,
        session: turn.session_id,
        turn: Some(turn.id),
        after: 0,
        deltas: Deltas::AsStreamed,
    });
    Ok(respond(&state, Answer::Stream, turn, identity, events, after).await)
}

/// `GET /agentscope/sessions/{id}/messages`: a page of a session's full history as
/// AgentScope messages (`next` names the page after it). `{id}` is the `session_id` the
/// client used, or an agentry session id.
#[utoipa::path(get, path = "/agentscope/sessions/{session_id}/messages", tag = "AgentScope", operation_id = "agentscope_session_messages",
    security(("tenant" = [])),
    params(("session_id" = String, Path, description = "The client's session key, or an agentry session id"), HistoryPageQuery),
    responses(
        (status = 200, description = "A page of the session's full history as AgentScope messages, with `next` when more follow", body = crate::http::openapi::schemas::AgentScopeMessages),
        (status = 400, description = "A bad `limit` or `after`", body = crate::http::openapi::schemas::ErrorBody),
        (status = 404, description = "No such session of this tenant", body = crate::http::openapi::schemas::ErrorBody),
    ))]
pub async fn session_messages(
    auth: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<String>,
    query: crate::http::Query<HistoryPageQuery>,
) -> Result<HttpResponse, ApiError> {
    let key = path.into_inner();
    let (offset, limit) = query.resolve()?;
    let reference = SessionRef::parse(&key).ok_or_else(|| ApiError::not_found("session"))?;
    let session = state
        .engine()
        .find_session(&auth.tenant_id, &reference)
        .await?
        .ok_or_else(|| ApiError::not_found("session"))?;
    let (history, more) = state
        .engine()
        .history_page(
            &auth.tenant_id,
            &session.id,
            HistoryType::Full,
            offset,
            limit,
            state.settings().limits.history_page_bytes,
        )
        .await?;
    let mut messages = convert::from_history(&history);
    // Ids follow history positions (stable from page to page): a message that reads as
    // several AgentScope messages numbers them after its position.
    let mut ids = Vec::with_capacity(messages.len());
    for (i, entry) in history.iter().enumerate() {
        let position = offset + i as i64;
        let count = convert::from_history(std::slice::from_ref(entry)).len();
        let hex = session.id.hex();
        match count {
            1 => ids.push(format!("msg_{hex}_{position}")),
            _ => ids.extend((0..count).map(|k| format!("msg_{hex}_{position}_{k}"))),
        }
    }
    for (message, id) in messages.iter_mut().zip(ids) {
        message.id = id;
    }
    let mut body = json!({
        "session_id": key,
        "messages": messages,
    });
    if more {
        body["next"] = json!(next_cursor(offset, history.len()));
    }
    Ok(HttpResponse::Ok().json(body))
}

#[utoipa::path(get, path = "/agentscope/health", tag = "AgentScope", operation_id = "agentscope_health",
    responses((status = 200, description = "The face is up", body = crate::http::openapi::schemas::Status)))]
pub async fn health() -> HttpResponse {
    HttpResponse::Ok().json(json!({"status": "healthy"}))
}
