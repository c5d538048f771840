//! A conversation's items: its session's full history, each message as the Responses API's
//! item, named by its place in the history (`msg_<hex>_<n>`, `fc_<hex>_<n>_<k>`,
//! `fco_<hex>_<n>`). `GET /v1/conversations/{id}/items` lists them (a list page), `GET
//! …/items/{item_id}` reads one, and `POST …/items` adds messages to the history between
//! responses (`Engine::append_history`): they are items of the conversation, and what the
//! next response reads, on every face.
//!
//! Deleting an item is refused: an item's id is its place in the history, which every later
//! item's id, the history's pages and its compacted overlay (which stands for the history
//! up to a place) count on, and a call's result must stay after its call. Removing one
//! would rename or orphan what follows it.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use serde_json::{Value, json};

use super::conversations::{as_items, conversation_not_found, items, load};
use super::error::{ErrorBody, OpenAiError};
use super::faults::input_fault;
use super::input_items::{items_from, page, parse_list_query};
use super::parse::{parse_input_items, parse_object};
use crate::app::AppState;
use crate::engine::EngineError;
use crate::http::TenantAuth;
use crate::http::error::ApiError;

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

#[utoipa::path(post, path = "/v1/conversations/{conversation_id}/items", tag = "OpenAI",
    operation_id = "openai_create_conversation_items",
    security(("tenant" = [])),
    params(("conversation_id" = String, Path, description = "A conversation id (`conv_…`) or a session id (`sess_…`)")),
    request_body(content = Object, description = "`{items}`: input items as `POST /v1/responses` takes them (messages of any role, `function_call` and `function_call_output` items), at most `max_seed_messages` messages"),
    responses(
        (status = 200, description = "`{object: \"list\", data, first_id, last_id, has_more: false}`: the items added, with their ids",
            body = crate::http::openapi::openai_schemas::OpenAiList),
        (status = 400, description = "The body is not valid (`param` names the item and field)", body = ErrorBody),
        (status = 401, description = "No valid API key (the tenant's bearer token)", body = ErrorBody),
        (status = 403, description = "The tenant is suspended", body = ErrorBody),
        (status = 404, description = "No such conversation of this tenant", body = ErrorBody),
        (status = 409, description = "The conversation is running a response, its function calls wait for their outputs, its agent is gone, or it is full", body = ErrorBody),
        (status = 413, description = "The body is too large", body = ErrorBody),
    ))]
pub async fn create_items(
    auth: Result<TenantAuth, ApiError>,
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: Result<web::Bytes, actix_web::Error>,
) -> Result<HttpResponse, OpenAiError> {
    let tenant = auth?.tenant_id;
    let object = parse_object(body)?;
    let (messages, origins) = match object.get("items") {
        Some(Value::Array(list)) if list.is_empty() => {
            return Err(OpenAiError::invalid(
                "items",
                "must bring at least one item",
            ));
        }
        Some(items @ Value::Array(_)) => parse_input_items(Some(items)).map_err(as_items)?,
        _ => {
            return Err(OpenAiError::invalid(
                "items",
                "is required: an array of input items",
            ));
        }
    };
    let session = load(&state, &tenant, &path).await?;
    let first = state
        .engine()
        .append_history(&tenant, &session.id, messages.clone())
        .await
        .map_err(|e| match e {
            e if e.is_not_found() => conversation_not_found(&path),
            EngineError::SessionBusy => OpenAiError::from(EngineError::SessionBusy),
            awaiting @ EngineError::AwaitingInput { .. } => OpenAiError::new(
                StatusCode::CONFLICT,
                format!(
                    "{awaiting}: send their function_call_output items with a response \
                     before adding items"
                ),
            )
            .code("conflict"),
            other => input_fault(other, "items", &origins, 0),
        })?;
    let first = usize::try_from(first).unwrap_or_default();
    let data = items_from(&messages, &session.id.hex(), "", first);
    Ok(HttpResponse::Ok().json(json!({
        "object": "list",
        "first_id": data.first().map(|i| i["id"].clone()),
        "last_id": data.last().map(|i| i["id"].clone()),
        "has_more": false,
        "data": data,
    })))
}

/// Deleting an item is refused (see the module's comment).
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
        (status = 405, description = "Not served: an item's id is its place in the history, so a conversation's items are never removed (delete the conversation instead)", body = ErrorBody),
    ))]
pub async fn delete_item(auth: Result<TenantAuth, ApiError>) -> Result<HttpResponse, OpenAiError> {
    auth?;
    Err(OpenAiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "a conversation's items cannot be deleted: each item's id is its place in the \
         history, which later items, pages and the compacted history count on \
         (DELETE /v1/conversations/{id} deletes the whole conversation)",
    )
    .code("method_not_allowed"))
}
