//! The Conversations API over sessions: `POST /v1/conversations`, and `GET`, `POST`
//! (metadata) and `DELETE /v1/conversations/{id}`. A conversation is a session (`conv_…`,
//! or the session's own `sess_…`); its items (see `conversation_items`) are its full
//! history. Its `metadata` is kept as the session's labels (`{"metadata": {…}}`, see
//! `Engine::set_session_labels`); `POST /v1/conversations/{id}` replaces it. Deleting a
//! conversation deletes its session.
//!
//! `POST /v1/conversations` opens a session: a session runs one agent, so the body names it
//! as a response does, with `model` (an agentry extension, required); `items` seed the
//! session's history (bounded as any seeded session).

use actix_web::{HttpResponse, web};
use serde_json::{Map, Value, json};

use super::create::model_not_found;
use super::error::{ErrorBody, OpenAiError};
use super::faults::input_fault;
use super::ids::{conversation_id, parse_conversation_id};
use super::input_items::items_from;
use super::parse::{parse_input_items, parse_metadata, parse_model, parse_object};
use crate::agents::SessionConfigRequest;
use crate::app::AppState;
use crate::http::TenantAuth;
use crate::http::error::ApiError;
use crate::model::{HistoryMessage, HistoryType, Session, TenantId};

/// How many history messages one read brings.
const PAGE: i64 = 1000;

pub(super) fn conversation_not_found(id: &str) -> OpenAiError {
    OpenAiError::not_found(format!("Conversation with id '{id}' not found."))
}

/// The tenant's session `id` names; another tenant's is not found.
pub(super) async fn load(
    state: &AppState,
    tenant: &TenantId,
    id: &str,
) -> Result<Session, OpenAiError> {
    let session = parse_conversation_id(id).ok_or_else(|| conversation_not_found(id))?;
    match state.engine().get_session(tenant, &session).await {
        Err(e) if e.is_not_found() => Err(conversation_not_found(id)),
        other => Ok(other?),
    }
}

fn conversation(session: &Session, metadata: Map<String, Value>) -> Value {
    json!({
        "id": conversation_id(&session.id),
        "object": "conversation",
        "created_at": session.created_at.timestamp(),
        "metadata": metadata,
    })
}

/// The conversation's metadata, kept in its session's labels.
async fn metadata(state: &AppState, session: &Session) -> Result<Map<String, Value>, OpenAiError> {
    let mut labels = state
        .engine()
        .session_labels(&session.tenant_id, &session.id)
        .await?;
    Ok(match labels.remove("metadata") {
        Some(Value::Object(metadata)) => metadata,
        _ => Map::new(),
    })
}

async fn set_metadata(
    state: &AppState,
    session: &Session,
    metadata: &Map<String, Value>,
) -> Result<(), OpenAiError> {
    let mut labels = state
        .engine()
        .session_labels(&session.tenant_id, &session.id)
        .await?;
    labels.insert("metadata".into(), Value::Object(metadata.clone()));
    state
        .engine()
        .set_session_labels(&session.tenant_id, &session.id, &labels)
        .await?;
    Ok(())
}

/// Every item of the session's full history, oldest first.
pub(super) async fn items(state: &AppState, session: &Session) -> Result<Vec<Value>, OpenAiError> {
    let hex = session.id.hex();
    let mut messages: Vec<HistoryMessage> = Vec::new();
    loop {
        let (page, more) = state
            .engine()
            .history_page(
                &session.tenant_id,
                &session.id,
                HistoryType::Full,
                messages.len() as i64,
                PAGE,
                state.settings().limits.history_page_bytes,
            )
            .await?;
        let empty = page.is_empty();
        messages.extend(page);
        if !more || empty {
            break;
        }
    }
    Ok(items_from(&messages, &hex, "", 0))
}

/// An error about `input` as one about `items`.
pub(super) fn as_items(mut error: OpenAiError) -> OpenAiError {
    if let Some(param) = error.param.as_mut().filter(|p| p.starts_with("input")) {
        *param = param.replacen("input", "items", 1);
        error.message = error.message.replacen("input", "items", 1);
    }
    error
}

#[utoipa::path(post, path = "/v1/conversations", tag = "OpenAI",
    operation_id = "openai_create_conversation",
    security(("tenant" = [])),
    request_body(content = Object, description = "`{model, items?, metadata?}`: `model` names the agent (an agentry extension, required); `items` (Responses input items) seed the history; `metadata` as a response's"),
    responses(
        (status = 200, description = "The new conversation (session)",
            body = crate::http::openapi::openai_schemas::OpenAiConversation),
        (status = 400, description = "The body is not valid (`param` names the field)", body = ErrorBody),
        (status = 401, description = "No valid API key (the tenant's bearer token)", body = ErrorBody),
        (status = 403, description = "The tenant is suspended", body = ErrorBody),
        (status = 404, description = "No such model (agent)", body = ErrorBody),
        (status = 413, description = "The body is too large", body = ErrorBody),
        (status = 429, description = "A quota is full (`Retry-After`)", body = ErrorBody),
    ))]
pub async fn create_conversation(
    auth: Result<TenantAuth, ApiError>,
    state: web::Data<AppState>,
    body: Result<web::Bytes, actix_web::Error>,
) -> Result<HttpResponse, OpenAiError> {
    let tenant = auth?.tenant_id;
    let object = parse_object(body)?;
    let model = match object.get("model") {
        Some(Value::String(model)) => model.as_str(),
        _ => {
            return Err(OpenAiError::invalid(
                "model",
                "is required: the name of the agent the conversation is with (a string)",
            ));
        }
    };
    let (agent, version) = parse_model(model)?;
    let metadata = parse_metadata(object.get("metadata"))?;
    let (history, origins) = match object.get("items") {
        None | Some(Value::Null) => (Vec::new(), Vec::new()),
        Some(items @ Value::Array(_)) => parse_input_items(Some(items)).map_err(as_items)?,
        Some(_) => return Err(OpenAiError::invalid("items", "must be an array of items")),
    };
    let engine = state.engine();
    let agent = engine
        .find_agent(Some(&tenant), &agent)
        .await?
        .ok_or_else(|| model_not_found(model, &engine.agents_listed(Some(&tenant))))?;
    let session = engine
        .create_session_on_version(
            &tenant,
            agent.name(),
            version,
            SessionConfigRequest::default(),
            history,
        )
        .await
        .map_err(|e| input_fault(e, "items", &origins, 0))?;
    if !metadata.is_empty() {
        set_metadata(&state, &session, &metadata).await?;
    }
    Ok(HttpResponse::Ok().json(conversation(&session, metadata)))
}

#[utoipa::path(post, path = "/v1/conversations/{conversation_id}", tag = "OpenAI",
    operation_id = "openai_update_conversation",
    security(("tenant" = [])),
    params(("conversation_id" = String, Path, description = "A conversation id (`conv_…`) or a session id (`sess_…`)")),
    request_body(content = Object, description = "`{metadata}`: replaces the conversation's metadata (`null` clears it)"),
    responses(
        (status = 200, description = "The conversation with its new metadata",
            body = crate::http::openapi::openai_schemas::OpenAiConversation),
        (status = 400, description = "The body is not valid (`param` names the field)", body = ErrorBody),
        (status = 401, description = "No valid API key (the tenant's bearer token)", body = ErrorBody),
        (status = 403, description = "The tenant is suspended", body = ErrorBody),
        (status = 404, description = "No such conversation of this tenant", body = ErrorBody),
        (status = 413, description = "The body is too large", body = ErrorBody),
    ))]
pub async fn update_conversation(
    auth: Result<TenantAuth, ApiError>,
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: Result<web::Bytes, actix_web::Error>,
) -> Result<HttpResponse, OpenAiError> {
    let tenant = auth?.tenant_id;
    let object = parse_object(body)?;
    if !object.contains_key("metadata") {
        return Err(OpenAiError::invalid(
            "metadata",
            "is required (null clears the conversation's metadata)",
        ));
    }
    let metadata = parse_metadata(object.get("metadata"))?;
    let session = load(&state, &tenant, &path).await?;
    match set_metadata(&state, &session, &metadata).await {
        Err(error) if error.status == actix_web::http::StatusCode::NOT_FOUND => {
            return Err(conversation_not_found(&path));
        }
        other => other?,
    }
    Ok(HttpResponse::Ok().json(conversation(&session, metadata)))
}

#[utoipa::path(get, path = "/v1/conversations/{conversation_id}", tag = "OpenAI",
    operation_id = "openai_get_conversation",
    security(("tenant" = [])),
    params(("conversation_id" = String, Path, description = "A conversation id (`conv_…`) or a session id (`sess_…`)")),
    responses(
        (status = 200, description = "`{id, object: \"conversation\", created_at, metadata}`",
            body = crate::http::openapi::openai_schemas::OpenAiConversation),
        (status = 401, description = "No valid API key (the tenant's bearer token)", body = ErrorBody),
        (status = 403, description = "The tenant is suspended", body = ErrorBody),
        (status = 404, description = "No such conversation of this tenant", body = ErrorBody),
    ))]
pub async fn get_conversation(
    auth: Result<TenantAuth, ApiError>,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, OpenAiError> {
    let tenant = auth?.tenant_id;
    let session = load(&state, &tenant, &path).await?;
    let metadata = metadata(&state, &session).await?;
    Ok(HttpResponse::Ok().json(conversation(&session, metadata)))
}

#[utoipa::path(delete, path = "/v1/conversations/{conversation_id}", tag = "OpenAI",
    operation_id = "openai_delete_conversation",
    security(("tenant" = [])),
    params(("conversation_id" = String, Path, description = "A conversation id (`conv_…`) or a session id (`sess_…`)")),
    responses(
        (status = 200, description = "`{id, object: \"conversation.deleted\", deleted: true}`; the session is deleted (a running response is cancelled first)",
            body = crate::http::openapi::openai_schemas::OpenAiDeleted),
        (status = 401, description = "No valid API key (the tenant's bearer token)", body = ErrorBody),
        (status = 403, description = "The tenant is suspended", body = ErrorBody),
        (status = 404, description = "No such conversation of this tenant", body = ErrorBody),
    ))]
pub async fn delete_conversation(
    auth: Result<TenantAuth, ApiError>,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, OpenAiError> {
    let tenant = auth?.tenant_id;
    let session = load(&state, &tenant, &path).await?;
    match state.engine().delete_session(&tenant, &session.id).await {
        Err(e) if e.is_not_found() => return Err(conversation_not_found(&path)),
        other => other?,
    }
    Ok(HttpResponse::Ok().json(json!({
        "id": conversation_id(&session.id), "object": "conversation.deleted", "deleted": true,
    })))
}
