//! `POST /v1/responses`: a response is a turn. Without `previous_response_id` or
//! `conversation` it opens a new session of the agent `model` names, seeded with the
//! input's earlier messages; with one of them it is the next turn of that session. The
//! request waits for the turn to stop, streams its events (`stream`), or answers at once
//! (`background`).

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use futures_util::StreamExt;
use serde_json::Value;

use super::approvals::{Approval, named_for_approvals};
use super::error::{ErrorBody, OpenAiError};
use super::faults::input_fault;
use super::ids::{conversation_id, response_id};
use super::labels::ResponseLabels;
use super::load::{Loaded, identity, load, snapshot};
use super::parse::{
    CreateRequest, conversation_not_found, parse_create, parse_object, previous_not_found,
};
use super::render::Renderer;
use super::stream;
use crate::agents::SessionConfigRequest;
use crate::app::AppState;
use crate::engine::{
    Deltas, Follow, Idempotency, InputMessage, Page, TurnRequest, scoped_key, split_input,
};
use crate::http::TenantAuth;
use crate::http::error::ApiError;
use crate::model::{HistoryMessage, Session, StreamMode, TenantId, Turn};

/// The namespace of this face's idempotency keys (see `scoped_key`).
const KEY_SCOPE: &str = "openai";
const IDEMPOTENCY_KEY: &str = "Idempotency-Key";

pub fn model_not_found(model: &str, hint: &str) -> OpenAiError {
    OpenAiError::not_found(format!(
        "The model `{model}` does not exist or you do not have access to it; {hint}"
    ))
    .code("model_not_found")
    .param("model")
}

/// The session the response continues (or a new one), the turn's new messages and how
/// many input messages came before them (seeding a new session). A new session for a
/// request with an idempotency key (`keyed`, the key as the client sent it) is the one a
/// retry of it finds.
async fn session_for(
    state: &AppState,
    tenant: &TenantId,
    request: &CreateRequest,
    keyed: Option<&Idempotency>,
) -> Result<(Session, Vec<InputMessage>, usize), OpenAiError> {
    let engine = state.engine();
    let agent = engine
        .find_agent(Some(tenant), &request.agent)
        .await?
        .ok_or_else(|| model_not_found(&request.model, &engine.agents_listed(Some(tenant))))?;
    let continued = match (&request.previous_response, &request.conversation) {
        (Some((raw, turn)), _) => {
            let turn = engine
                .find_turn(tenant, turn)
                .await?
                .ok_or_else(|| previous_not_found(raw))?;
            let page = Page {
                after: None,
                limit: 1,
            };
            let (latest, _) = engine.list_turns(tenant, &turn.session_id, page).await?;
            if latest.first().map(|t| t.id) != Some(turn.id) {
                return Err(OpenAiError::invalid(
                    "previous_response_id",
                    format!(
                        "'{raw}' is not the latest response of its conversation: a response \
                         continues only from the latest one (forks are not supported)"
                    ),
                ));
            }
            Some(get_session(state, tenant, &turn.session_id, || previous_not_found(raw)).await?)
        }
        (None, Some((raw, session))) => {
            Some(get_session(state, tenant, session, || conversation_not_found(raw)).await?)
        }
        (None, None) => None,
    };
    let input = request.input.clone();
    let Some(session) = continued else {
        let (history, new) = split_turn(input, request)?;
        let seeded = history.len();
        let config = SessionConfigRequest {
            client_tools: request.tools.clone(),
            ..SessionConfigRequest::default()
        };
        let session = match keyed {
            Some(keyed) => {
                engine
                    .create_keyed_session(
                        tenant,
                        agent.name(),
                        request.version,
                        config,
                        history,
                        KEY_SCOPE,
                        keyed,
                    )
                    .await
            }
            None => {
                engine
                    .create_session_on_version(
                        tenant,
                        agent.name(),
                        request.version,
                        config,
                        history,
                    )
                    .await
            }
        }
        .map_err(|e| input_fault(e, "input", &request.input_items, 0))?;
        return Ok((session, new, seeded));
    };
    if session.agent != agent.name()
        || request
            .version
            .is_some_and(|v| session.agent_version.map(|(_, sv)| sv) != Some(v))
    {
        return Err(OpenAiError::invalid(
            "model",
            format!(
                "this conversation is with `{}`; its model cannot change",
                session.agent
            ),
        ));
    }
    let (history, new) = split_turn(input, request)?;
    if !history.is_empty() {
        return Err(OpenAiError::invalid(
            "input",
            "a response that continues a conversation brings only user messages, \
             function_call_output and mcp_approval_response items",
        ));
    }
    Ok((session, new, 0))
}

/// The input's history and the turn's messages, the approval responses answering calls
/// after the trailing messages (an input of approvals only brings no message; one that
/// seeds a conversation may end with the calls they answer).
fn split_turn(
    input: Vec<HistoryMessage>,
    request: &CreateRequest,
) -> Result<(Vec<HistoryMessage>, Vec<InputMessage>), OpenAiError> {
    let (history, mut new) = match request.approvals.is_empty() {
        true => split_trailing(input)?,
        false => split_input(input.clone()).unwrap_or((input, Vec::new())),
    };
    new.extend(request.approvals.iter().map(Approval::to_input));
    Ok((history, new))
}

fn split_trailing(
    input: Vec<HistoryMessage>,
) -> Result<(Vec<HistoryMessage>, Vec<InputMessage>), OpenAiError> {
    split_input(input).ok_or_else(|| {
        OpenAiError::invalid(
            "input",
            "must end with a user message or function_call_output items",
        )
    })
}

async fn get_session(
    state: &AppState,
    tenant: &TenantId,
    session: &crate::model::SessionId,
    missing: impl FnOnce() -> OpenAiError,
) -> Result<Session, OpenAiError> {
    match state.engine().get_session(tenant, session).await {
        Err(e) if e.is_not_found() => Err(missing()),
        other => Ok(other?),
    }
}

/// Creates a response.
#[utoipa::path(post, path = "/v1/responses", tag = "OpenAI", operation_id = "openai_create_response",
    security(("tenant" = [])),
    params(("Idempotency-Key" = Option<String>, Header, description = "1 to 255 visible ASCII characters: a retry with the same key and body gets the same response (no second turn)")),
    request_body = crate::http::openapi::openai_schemas::OpenAiCreateResponse,
    responses(
        (status = 200, description = "The Response once it stopped (or at once, `queued`, with `background`); with `stream` its events as SSE ending with `data: [DONE]`",
            content((crate::http::openapi::openai_schemas::OpenAiResponse = "application/json"), (String = "text/event-stream"))),
        (status = 400, description = "The body is not a valid request (`param` names the field), or `previous_response_id` names no response", body = ErrorBody),
        (status = 401, description = "No valid API key (the tenant's bearer token)", body = ErrorBody),
        (status = 403, description = "The tenant is suspended", body = ErrorBody),
        (status = 404, description = "No such model (agent) or conversation", body = ErrorBody),
        (status = 409, description = "The conversation is running another response", body = ErrorBody),
        (status = 413, description = "The body is too large", body = ErrorBody),
        (status = 422, description = "The Idempotency-Key was used with another body", body = ErrorBody),
        (status = 429, description = "A quota or the queue is full (`Retry-After`)", body = ErrorBody,
            headers(("Retry-After" = u32, description = "Seconds before a retry may succeed"))),
        (status = 503, description = "The server is shutting down", body = ErrorBody),
    ))]
pub async fn create_response(
    auth: Result<TenantAuth, ApiError>,
    state: web::Data<AppState>,
    http: HttpRequest,
    body: Result<web::Bytes, actix_web::Error>,
) -> Result<HttpResponse, OpenAiError> {
    let tenant = auth?.tenant_id;
    let object = parse_object(body)?;
    let key = idempotency_key(&http)?;
    // The key as the client sent it; stored in the face's namespace below.
    let keyed = key.map(|key| Idempotency::of(key, &Value::Object(object.clone())));
    let request = parse_create(&object)?;
    if let Some(keyed) = &keyed
        && let Some(turn) = state
            .engine()
            .retried_turn(&tenant, KEY_SCOPE, keyed)
            .await?
    {
        return answer_retry(&state, &tenant, &turn, &request).await;
    }
    let (session, messages, offset) =
        session_for(&state, &tenant, &request, keyed.as_ref()).await?;
    let started = state
        .engine()
        .start_turn(
            &tenant,
            &session.id,
            TurnRequest {
                agent_name: None,
                agent: SessionConfigRequest {
                    client_tools: request.tools.clone(),
                    ..SessionConfigRequest::default()
                },
                messages,
                stream: StreamMode::Delta,
                idempotency: keyed.map(|keyed| Idempotency {
                    key: scoped_key(KEY_SCOPE, &keyed.key),
                    ..keyed
                }),
            },
        )
        .await
        .map_err(|e| {
            // The engine's messages are the input's, then the approval responses.
            let origins: Vec<usize> = request
                .input_items
                .iter()
                .copied()
                .chain(request.approvals.iter().map(|a| a.item))
                .collect();
            named_for_approvals(
                input_fault(e, "input", &origins, offset),
                &request.approvals,
            )
        })?;
    if started.is_replay() {
        // The same request with the same key, admitted in this conversation meanwhile.
        let turn = started.turn;
        return answer_retry(&state, &tenant, &turn, &request).await;
    }
    let labels = ResponseLabels {
        model: Some(request.model.clone()),
        background: request.background,
        metadata: request.metadata.clone(),
        previous_response_id: request
            .previous_response
            .as_ref()
            .map(|(raw, _)| raw.clone()),
        conversation: request
            .conversation
            .as_ref()
            .map(|_| conversation_id(&session.id)),
        deleted: false,
    };
    state
        .engine()
        .set_turn_labels(&tenant, &started.turn.id, &labels.to_map())
        .await?;
    let turn = started.turn.clone();
    let identity = identity(&turn, &session, labels.clone(), request.tools.as_deref());
    if request.stream {
        let frames = stream::frames(&state, tenant, session.id, identity, None);
        return Ok(stream::response(&state, frames).await);
    }
    if request.background {
        let queued = Renderer::new(identity).snapshot();
        return Ok(HttpResponse::build(StatusCode::OK).json(queued));
    }
    state
        .engine()
        .follow_started(started)
        .for_each(|_| async {})
        .await;
    let turn = state
        .engine()
        .get_turn(&tenant, &session.id, &turn.id)
        .await?;
    let loaded = Loaded {
        turn,
        session,
        identity,
        labels,
    };
    Ok(HttpResponse::Ok().json(snapshot(&state, &loaded).await?))
}

/// The `Idempotency-Key` header: 1 to 255 visible ASCII characters.
fn idempotency_key(http: &HttpRequest) -> Result<Option<String>, OpenAiError> {
    let Some(value) = http.headers().get(IDEMPOTENCY_KEY) else {
        return Ok(None);
    };
    value
        .to_str()
        .ok()
        .filter(|k| !k.is_empty() && k.len() <= 255 && !k.chars().any(char::is_control))
        .map(|k| Some(k.to_owned()))
        .ok_or_else(|| {
            OpenAiError::invalid(IDEMPOTENCY_KEY, "must be 1 to 255 visible ASCII characters")
        })
}

/// A retried request gets the response its key started, answered as the request asks: its
/// events from the first (`stream`), the Response as it stands (`background`), or the
/// Response once it has ended.
async fn answer_retry(
    state: &AppState,
    tenant: &TenantId,
    turn: &Turn,
    request: &CreateRequest,
) -> Result<HttpResponse, OpenAiError> {
    let loaded = load(state, tenant, &response_id(&turn.id)).await?;
    if request.stream {
        let frames = stream::frames(state, *tenant, loaded.session.id, loaded.identity, None);
        return Ok(stream::response(state, frames).await);
    }
    if !request.background {
        state
            .engine()
            .follow(Follow {
                tenant: *tenant,
                session: loaded.session.id,
                turn: Some(turn.id),
                after: 0,
                deltas: Deltas::Merged,
            })
            .for_each(|_| async {})
            .await;
    }
    let loaded = load(state, tenant, &response_id(&turn.id)).await?;
    Ok(HttpResponse::Ok().json(snapshot(state, &loaded).await?))
}
