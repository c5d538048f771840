//! `GET /v1/responses/{id}/input_items`: the items the response's turn brought (its user
//! messages and function call outputs), as a list page: `order` `desc` (the default) or
//! `asc`, `limit` 1–100 (20), `after` an item id.

use actix_web::{HttpRequest, HttpResponse, web};
use serde_json::{Value, json};

use super::error::{ErrorBody, OpenAiError};
use super::load::load;
use crate::app::AppState;
use crate::http::TenantAuth;
use crate::http::error::ApiError;
use crate::model::{Content, ContentBlock, HistoryMessage, TurnId};

/// A list page's query.
pub struct ListQuery {
    pub after: Option<String>,
    pub limit: usize,
    pub ascending: bool,
}

pub fn parse_list_query(request: &HttpRequest) -> Result<ListQuery, OpenAiError> {
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(request.query_string())
        .map_err(|e| OpenAiError::invalid("query", format!("cannot be read: {e}")))?;
    let mut query = ListQuery {
        after: None,
        limit: 20,
        ascending: false,
    };
    for (key, value) in pairs {
        match key.as_str() {
            "after" => query.after = Some(value),
            "limit" => {
                query.limit = value
                    .parse()
                    .ok()
                    .filter(|n| (1..=100).contains(n))
                    .ok_or_else(|| OpenAiError::invalid("limit", "must be from 1 to 100"))?
            }
            "order" => {
                query.ascending = match value.as_str() {
                    "asc" => true,
                    "desc" => false,
                    _ => return Err(OpenAiError::invalid("order", "must be asc or desc")),
                }
            }
            _ => {}
        }
    }
    Ok(query)
}

/// A page of `items` (each with an `id`) as the list envelope.
pub fn page(mut items: Vec<Value>, query: &ListQuery) -> Result<Value, OpenAiError> {
    if !query.ascending {
        items.reverse();
    }
    let start = match &query.after {
        None => 0,
        Some(after) => {
            items
                .iter()
                .position(|item| item["id"] == after.as_str())
                .ok_or_else(|| OpenAiError::invalid("after", format!("no item `{after}` here")))?
                + 1
        }
    };
    let rest = &items[start..];
    let data: Vec<Value> = rest.iter().take(query.limit).cloned().collect();
    Ok(json!({
        "object": "list",
        "first_id": data.first().map(|i| i["id"].clone()),
        "last_id": data.last().map(|i| i["id"].clone()),
        "has_more": rest.len() > data.len(),
        "data": data,
    }))
}

/// A history message as an item: messages with their parts, tool messages as
/// `function_call_output`, assistant tool calls as `function_call`.
pub fn items_of(messages: &[HistoryMessage], turn: &TurnId, tag: &str) -> Vec<Value> {
    items_from(messages, &turn.hex(), tag, 0)
}

/// [`items_of`] with ids `<prefix>_<hex>_<tag><first + place>`.
pub fn items_from(messages: &[HistoryMessage], hex: &str, tag: &str, first: usize) -> Vec<Value> {
    let mut items = Vec::new();
    for (k, message) in messages.iter().enumerate() {
        let k = first + k;
        let id = |prefix: &str| format!("{prefix}_{hex}_{tag}{k}");
        match message {
            HistoryMessage::System { content } => items.push(json!({
                "type": "message", "id": id("msg"), "status": "completed", "role": "system",
                "content": [{"type": "input_text", "text": content}],
            })),
            HistoryMessage::User { content } => items.push(json!({
                "type": "message", "id": id("msg"), "status": "completed", "role": "user",
                "content": parts(content, "input_text"),
            })),
            HistoryMessage::Assistant { content } => {
                let text = parts(content, "output_text");
                if !text.is_empty() {
                    items.push(json!({
                        "type": "message", "id": id("msg"), "status": "completed",
                        "role": "assistant", "content": text,
                    }));
                }
                for (j, block) in content.blocks().iter().enumerate() {
                    if let ContentBlock::ToolUse {
                        tool_call_id,
                        name,
                        input,
                    } = block
                    {
                        items.push(json!({
                            "type": "function_call", "id": format!("fc_{hex}_{tag}{k}_{j}"),
                            "call_id": tool_call_id, "name": name,
                            "arguments": Value::Object(input.clone()).to_string(),
                            "status": "completed",
                        }));
                    }
                }
            }
            HistoryMessage::Tool {
                tool_call_id,
                content,
            } => items.push(json!({
                "type": "function_call_output", "id": id("fco"), "call_id": tool_call_id,
                "output": match content {
                    Content::Text(text) => json!(text),
                    blocks => json!(parts(blocks, "input_text")),
                },
                "status": "completed",
            })),
        }
    }
    items
}

fn text_part(text: &str, text_type: &str) -> Value {
    if text_type == "output_text" {
        json!({"type": "output_text", "text": text, "annotations": []})
    } else {
        json!({"type": text_type, "text": text})
    }
}

fn parts(content: &Content, text_type: &str) -> Vec<Value> {
    match content {
        Content::Text(text) => vec![text_part(text, text_type)],
        Content::Blocks(blocks) => blocks
            .iter()
            .filter_map(|block| match block {
                ContentBlock::Text { text } => Some(text_part(text, text_type)),
                ContentBlock::Image { url } => {
                    Some(json!({"type": "input_image", "image_url": url, "detail": "auto"}))
                }
                ContentBlock::Part(part) => Some(json!({
                    "type": "input_file",
                    "file_url": part.content_url,
                    "filename": part.metadata.as_ref().and_then(|m| m.get("filename")),
                })),
                _ => None,
            })
            .collect(),
    }
}

#[utoipa::path(get, path = "/v1/responses/{response_id}/input_items", tag = "OpenAI",
    operation_id = "openai_list_input_items",
    security(("tenant" = [])),
    params(
        ("response_id" = String, Path, description = "A response id (`resp_…`)"),
        ("after" = Option<String>, Query, description = "An item id: the page starts after it"),
        ("limit" = Option<u32>, Query, description = "1 to 100 items (20)"),
        ("order" = Option<String>, Query, description = "`desc` (the default) or `asc`"),
    ),
    responses(
        (status = 200, description = "`{object: \"list\", data, first_id, last_id, has_more}`",
            body = crate::http::openapi::openai_schemas::OpenAiList),
        (status = 400, description = "A query parameter is not valid", body = ErrorBody),
        (status = 404, description = "No such response of this tenant", body = ErrorBody),
    ))]
pub async fn list_input_items(
    auth: Result<TenantAuth, ApiError>,
    state: web::Data<AppState>,
    request: HttpRequest,
    path: web::Path<String>,
) -> Result<HttpResponse, OpenAiError> {
    let tenant = auth?.tenant_id;
    let query = parse_list_query(&request)?;
    let loaded = load(&state, &tenant, &path).await?;
    let messages = state
        .engine()
        .turn_history(&tenant, &loaded.session.id, &loaded.turn.id)
        .await?;
    let input: Vec<HistoryMessage> = messages
        .into_iter()
        .filter(|m| matches!(m, HistoryMessage::User { .. } | HistoryMessage::Tool { .. }))
        .collect();
    let items = items_of(&input, &loaded.turn.id, "in");
    Ok(HttpResponse::Ok().json(page(items, &query)?))
}
