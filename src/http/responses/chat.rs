//! `POST /v1/chat/completions`: a chat completion is a turn, run in the session
//! `chat_session` places it in; its events are rendered as a `chat.completion` or as
//! `chat.completion.chunk` frames (`chat_render`). Every answer names the session in
//! `Agentry-Session` and the turn in `Agentry-Turn-Id`.

use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::{HttpRequest, HttpResponse, ResponseError, web};
use futures_util::{Stream, StreamExt};
use serde_json::json;

use super::chat_parse::parse_chat;
use super::chat_render::{ChatIdentity, ChatRenderer, Ending, completion_id, failure_frame};
use super::chat_session::{place, session_key, turn_error};
use super::error::{ErrorBody, OpenAiError};
use super::labels::ResponseLabels;
use super::parse::parse_object;
use crate::agents::SessionConfigRequest;
use crate::app::AppState;
use crate::engine::TurnRequest;
use crate::http::error::ApiError;
use crate::http::{TURN_ID_HEADER, TenantAuth, sse};
use crate::model::StreamMode;

/// Creates a chat completion.
#[utoipa::path(post, path = "/v1/chat/completions", tag = "OpenAI", operation_id = "openai_create_chat_completion",
    security(("tenant" = [])),
    params(("Agentry-Session" = Option<String>, Header, description = "Continue this session (an agentry `sess_…` id, or a key of the caller's own that names a new session on first use); without it every request opens a new session seeded with the messages before the last user message")),
    request_body = crate::http::openapi::openai_schemas::OpenAiChatCompletionRequest,
    responses(
        (status = 200, description = "The `chat.completion` once the turn stopped; with `stream` its `chat.completion.chunk` objects as data-only SSE ending with `data: [DONE]`",
            content((crate::http::openapi::openai_schemas::OpenAiChatCompletion = "application/json"), (String = "text/event-stream")),
            headers(("Agentry-Session" = String, description = "The session the completion ran in"),
                ("Agentry-Turn-Id" = String, description = "The turn answering the request"))),
        (status = 400, description = "The body is not a valid request, or asks what an agent cannot honour (`param` names the field: `messages[i]…` for a message)", body = ErrorBody),
        (status = 401, description = "No valid API key (the tenant's bearer token)", body = ErrorBody),
        (status = 403, description = "The tenant is suspended", body = ErrorBody),
        (status = 404, description = "No such model (agent), or no session of this tenant with that id", body = ErrorBody),
        (status = 409, description = "The session is running another turn, or is full", body = ErrorBody),
        (status = 413, description = "The body is too large", body = ErrorBody),
        (status = 429, description = "A quota or the queue is full (`Retry-After`)", body = ErrorBody),
        (status = 500, description = "The agent's turn failed (`code` is the turn's error code; `x-should-retry: false`, as a retry would run the turn again)", body = ErrorBody,
            headers(("Agentry-Session" = String, description = "The session the turn ran in"),
                ("x-should-retry" = String, description = "`false`"))),
        (status = 503, description = "The server is shutting down", body = ErrorBody),
    ))]
pub async fn create_chat_completion(
    auth: Result<TenantAuth, ApiError>,
    state: web::Data<AppState>,
    req: HttpRequest,
    body: Result<web::Bytes, actix_web::Error>,
) -> Result<HttpResponse, OpenAiError> {
    let tenant = auth?.tenant_id;
    let object = parse_object(body)?;
    let request = parse_chat(&object)?;
    let key = session_key(&req)?;
    let placed = place(&state, &tenant, &request, key.as_deref()).await?;
    let tools = request.tools.clone().unwrap_or_default();
    let started = state
        .engine()
        .start_turn(
            &tenant,
            &placed.session.id,
            TurnRequest {
                agent_name: None,
                agent: SessionConfigRequest {
                    // A request's tools are all the client offers: a continued session's
                    // earlier ones do not stay.
                    client_tools: placed.continued.then(|| tools.clone()),
                    ..SessionConfigRequest::default()
                },
                messages: placed.messages,
                stream: StreamMode::Delta,
                idempotency: None,
            },
        )
        .await
        .map_err(|e| turn_error(e, placed.offset))?;
    let turn = started.turn.clone();
    let labels = ResponseLabels {
        model: Some(request.model.clone()),
        metadata: request.metadata.clone(),
        ..ResponseLabels::default()
    };
    state
        .engine()
        .set_turn_labels(&tenant, &turn.id, &labels.to_map())
        .await?;
    let identity = ChatIdentity {
        id: completion_id(&turn.id),
        created: turn.created_at.timestamp(),
        model: request.model.clone(),
        client_tools: tools.iter().map(|t| t.name.clone()).collect(),
        include_usage: request.include_usage,
    };
    let session_header = (
        HeaderName::from_static("agentry-session"),
        HeaderValue::from_str(&placed.session.id.to_string()).expect("an id is a header value"),
    );
    let events = state.engine().follow_started(started);
    if request.stream {
        let mut response = sse::response(&state, frames(identity, events), Some(turn.id)).await;
        response
            .headers_mut()
            .insert(session_header.0, session_header.1);
        return Ok(response);
    }
    let mut renderer = ChatRenderer::new(identity);
    let mut events = std::pin::pin!(events);
    while let Some(event) = events.next().await {
        match event {
            Ok(event) => {
                renderer.render(&event);
            }
            Err(error) => {
                tracing::error!(error = %error, "a chat completion's event stream failed");
                break;
            }
        }
        if renderer.ending().is_some() {
            break;
        }
    }
    match (renderer.ending(), renderer.completion()) {
        (_, Some(completion)) => Ok(HttpResponse::Ok()
            .insert_header(session_header)
            .insert_header((TURN_ID_HEADER, turn.id.to_string()))
            .json(completion)),
        (Some(Ending::Failed(error)), _) => {
            // OpenAI's SDKs retry a 5xx unless told not to, and a retry would run the
            // turn again.
            let mut response = super::chat_render::turn_failure(error).error_response();
            response.headers_mut().insert(
                HeaderName::from_static("x-should-retry"),
                HeaderValue::from_static("false"),
            );
            response
                .headers_mut()
                .insert(session_header.0, session_header.1);
            Ok(response)
        }
        _ => Err(OpenAiError::from(ApiError::internal(anyhow::anyhow!(
            "a chat completion's events ended before its turn stopped"
        )))),
    }
}

/// One SSE frame: data only, as Chat Completions streams are.
enum ChatFrame {
    Data(String),
    Done,
}

impl sse::Encode for ChatFrame {
    fn encode(&self) -> String {
        match self {
            ChatFrame::Data(data) => format!("data: {data}\n\n"),
            ChatFrame::Done => "data: [DONE]\n\n".to_owned(),
        }
    }
}

/// The completion's chunks as the turn's events come; a failed turn (or a log that cannot
/// be read) ends with an error frame, `data: {"error": {…}}`, as OpenAI sends one; every
/// stream ends with `data: [DONE]`.
fn frames(
    identity: ChatIdentity,
    events: impl Stream<Item = Result<std::sync::Arc<crate::model::Event>, crate::engine::StoreError>>
    + 'static,
) -> impl Stream<Item = ChatFrame> + 'static {
    async_stream::stream! {
        let mut renderer = ChatRenderer::new(identity);
        yield ChatFrame::Data(renderer.start().to_string());
        let mut events = std::pin::pin!(events);
        while let Some(event) = events.next().await {
            let event = match event {
                Ok(event) => event,
                Err(error) => {
                    tracing::error!(error = %error, "a chat completion's event stream failed");
                    let failure = crate::model::TurnError::new(
                        "internal_error",
                        "the turn's events could not be read",
                    );
                    yield ChatFrame::Data(json!(failure_frame(&failure)).to_string());
                    break;
                }
            };
            for chunk in renderer.render(&event) {
                yield ChatFrame::Data(chunk.to_string());
            }
            if let Some(Ending::Failed(error)) = renderer.ending() {
                yield ChatFrame::Data(json!(failure_frame(error)).to_string());
            }
            if renderer.ending().is_some() {
                break;
            }
        }
        yield ChatFrame::Done;
    }
}
