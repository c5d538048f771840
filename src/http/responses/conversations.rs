//! The Conversations API over sessions: `GET` and `DELETE /v1/conversations/{id}`, and the
//! conversation's items, `GET /v1/conversations/{id}/items` (a list page) and
//! `GET /v1/conversations/{id}/items/{item_id}`. A conversation is a session (`conv_…`, or
//! the session's own `sess_…`); its items are its full history, each message as the
//! Responses API's item, named by its place in the history (`msg_<hex>_<n>`,
//! `fc_<hex>_<n>_<k>`, `fco_<hex>_<n>`). Its `metadata` is kept as the session's labels
//! (`{"metadata": {…}}`, see `Engine::set_session_labels`); `POST /v1/conversations/{id}`
//! replaces it. Deleting a conversation deletes its session.
//!
//! `POST /v1/conversations` opens a session: a session runs one agent, so the body names it
//! as a response does, with `model` (an agentry extension, required); `items` seed the
//! session's history (bounded as any seeded session).

use actix_web::{HttpRequest, HttpResponse, web};
use serde_json::{Map, Value, json};

use super::create::model_not_found;
use super::error::{ErrorBody, OpenAiError};
use super::ids::{conversation_id, parse_conversation_id};
use super::input_items::{items_from, page, parse_list_query};
use super::parse::{parse_input, parse_metadata, parse_model, parse_object};
use crate::agents::SessionConfigRequest;
use crate::app::AppState;
use crate::engine::{EngineError, StoreError};
use crate::http::TenantAuth;
use crate::http::error::ApiError;
use crate::model::{HistoryMessage, HistoryType, Session, TenantId};

/// How many history messages one read brings.
const PAGE: i64 = 1000;

fn conversation_not_found(id: &str) -> OpenAiError {
    OpenAiError::not_found(format!("Conversation with id '{id}' not found."))
}

/// The tenant's session `id` names; another tenant's is not found.
async fn load(state: &AppState, tenant: &TenantId, id: &str) -> Result<Session, OpenAiError> {
    let session = parse_conversation_id(id).ok_or_else(|| conversation_not_found(id))?;
    match state.engine().get_session(tenant, &session).await {
        Err(EngineError::Store(StoreError::NotFound)) | Err(EngineError::NotFound(_)) => {
            Err(conversation_not_found(id))
        }
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
async fn items(state: &AppState, session: &Session) -> Result<Vec<Value>, OpenAiError> {
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
fn as_items(mut error: OpenAiError) -> OpenAiError {
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
    let history = match object.get("items") {
        None | Some(Value::Null) => Vec::new(),
        Some(items @ Value::Array(_)) => parse_input(Some(items)).map_err(as_items)?,
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
        .map_err(|e| match e {
            EngineError::Invalid(field) => {
                OpenAiError::invalid("items", format!("{}: {}", field.field, field.message))
            }
            other => other.into(),
        })?;
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
        Err(EngineError::Store(StoreError::NotFound)) | Err(EngineError::NotFound(_)) => {
            return Err(conversation_not_found(&path));
        }
        other => other?,
    }
    Ok(HttpResponse::Ok().json(json!({
        "id": conversation_id(&session.id), "object": "conversation.deleted", "deleted": true,
    })))
}

#[utoipa::path(get, path = "/v1/conversations/{conversation_id}/items", tag = "OpenAI",
    operation_id = "openai_list_conversation_items",
    security(("tenant" = [])),
    params(
        ("conversation_id" = String, Path, description = "A conversation id (`conv_…`) or a session id (`sess_…`)"),
        ("after" = Option<String>, Query, description = "An item id: the page starts after it"),
        ("limit" = Option<u32>, Query, description = "1 to 100 items (20)"),
        ("order" = Option<String>, Query, description = "`desc` (the default) or `asc`"),
    ),
    responses(
        (status = 200, description = "`{object: \"list\", data, first_id, last_id, has_more}`: the session's full history as items",
            body = crate::http::openapi::openai_schemas::OpenAiList),
        (status = 400, description = "A query parameter is not valid", body = ErrorBody),
        (status = 401, description = "No valid API key (the tenant's bearer token)", body = ErrorBody),
        (status = 403, description = "The tenant is suspended", body = ErrorBody),
        (status = 404, description = "No such conversation of this tenant", body = ErrorBody),
    ))]
pub async fn list_items(
    auth: Result<TenantAuth, ApiError>,
    state: web::Data<AppState>,
    request: HttpRequest,
    path: web::Path<String>,
) -> Result<HttpResponse, OpenAiError> {
    let tenant = auth?.tenant_id;
    let query = parse_list_query(&request)?;
    let session = load(&state, &tenant, &path).await?;
    let items = items(&state, &session).await?;
    Ok(HttpResponse::Ok().json(page(items, &query)?))
}

#[utoipa::path(get, path = "/v1/conversations/{conversation_id}/items/{item_id}", tag = "OpenAI",
    operation_id = "openai_get_conversation_item",
    security(("tenant" = [])),
    params(
        ("conversation_id" = String, Path, description = "A conversation id (`conv_…`) or a session id (`sess_…`)"),
        ("item_id" = String, Path, description = "An item id from the conversation's items"),
    ),
    responses(
        (status = 200, description = "The item", body = Object),
        (status = 401, description = "No valid API key (the tenant's bearer token)", body = ErrorBody),
        (status = 403, description = "The tenant is suspended", body = ErrorBody),
        (status = 404, description = "No such conversation of this tenant, or no such item in it", body = ErrorBody),
    ))]
pub async fn get_item(
    auth: Result<TenantAuth, ApiError>,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, OpenAiError> {
    let tenant = auth?.tenant_id;
    let (id, item_id) = path.into_inner();
    let session = load(&state, &tenant, &id).await?;
    items(&state, &session)
        .await?
        .into_iter()
        .find(|item| item["id"] == item_id.as_str())
        .map(|item| HttpResponse::Ok().json(item))
        .ok_or_else(|| {
            OpenAiError::not_found(format!(
                "Item with id '{item_id}' not found in conversation '{id}'."
            ))
        })
}

fn not_served(message: &str) -> OpenAiError {
    OpenAiError::new(actix_web::http::StatusCode::METHOD_NOT_ALLOWED, message)
        .code("method_not_allowed")
}

/// Adding items outside a response is not served: a session's history grows by its turns.
#[utoipa::path(post, path = "/v1/conversations/{conversation_id}/items", tag = "OpenAI",
    operation_id = "openai_create_conversation_items",
    security(("tenant" = [])),
    params(("conversation_id" = String, Path, description = "A conversation id (`conv_…`) or a session id (`sess_…`)")),
    responses(
        (status = 401, description = "No valid API key (the tenant's bearer token)", body = ErrorBody),
        (status = 403, description = "The tenant is suspended", body = ErrorBody),
        (status = 405, description = "Not served: items join a conversation with a response (`POST /v1/responses` with `conversation`)", body = ErrorBody),
    ))]
pub async fn create_items(auth: Result<TenantAuth, ApiError>) -> Result<HttpResponse, OpenAiError> {
    auth?;
    Err(not_served(
        "items cannot be added to a conversation on their own: send them as the input of a \
         response (POST /v1/responses with `conversation`), or seed a new conversation with \
         POST /v1/conversations `items`",
    ))
}

/// Deleting an item is not served: a session's history is not edited.
#[utoipa::path(delete, path = "/v1/conversations/{conversation_id}/items/{item_id}", tag = "OpenAI",
    operation_id = "openai_delete_conversation_item",
    security(("tenant" = [])),
    params(
        ("conversation_id" = String, Path, description = "A conversation id (`conv_…`) or a session id (`sess_…`)"),
        ("item_id" = String, Path, description = "An item id"),
    ),
    responses(
        (status = 401, description = "No valid API key (the tenant's bearer token)", body = ErrorBody),
        (status = 403, description = "The tenant is suspended", body = ErrorBody),
        (status = 405, description = "Not served: a conversation's history is not edited (delete the conversation instead)", body = ErrorBody),
    ))]
pub async fn delete_item(auth: Result<TenantAuth, ApiError>) -> Result<HttpResponse, OpenAiError> {
    auth?;
    Err(not_served(
        "a conversation's items cannot be deleted: its history is kept as it happened \
         (DELETE /v1/conversations/{id} deletes the whole conversation)",
    ))
}
