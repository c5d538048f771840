//! `GET /v1/responses/{id}`: the Response as it stands, or (`stream=true`) its events,
//! replayed from the log after `starting_after`, then live until the response ends.

use actix_web::{HttpRequest, HttpResponse, web};

use super::error::{ErrorBody, OpenAiError};
use super::load::{load, snapshot};
use super::stream;
use crate::app::AppState;
use crate::http::TenantAuth;
use crate::http::error::ApiError;

/// The query of a GET: `stream`, `starting_after`; `include[]` and `include_obfuscation`
/// are accepted and ignored.
pub struct ReadQuery {
    pub stream: bool,
    pub starting_after: Option<u64>,
}

pub fn parse_query(request: &HttpRequest) -> Result<ReadQuery, OpenAiError> {
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(request.query_string())
        .map_err(|e| OpenAiError::invalid("query", format!("cannot be read: {e}")))?;
    let mut query = ReadQuery {
        stream: false,
        starting_after: None,
    };
    for (key, value) in pairs {
        match key.as_str() {
            "stream" => {
                query.stream = match value.as_str() {
                    "true" => true,
                    "false" => false,
                    _ => return Err(OpenAiError::invalid("stream", "must be true or false")),
                }
            }
            "starting_after" => {
                query.starting_after = Some(value.parse().map_err(|_| {
                    OpenAiError::invalid("starting_after", "must be a sequence number (0 or more)")
                })?)
            }
            _ => {}
        }
    }
    Ok(query)
}

#[utoipa::path(get, path = "/v1/responses/{response_id}", tag = "OpenAI",
    operation_id = "openai_get_response",
    security(("tenant" = [])),
    params(
        ("response_id" = String, Path, description = "A response id (`resp_…`)"),
        ("stream" = Option<bool>, Query, description = "Stream the response's events (SSE)"),
        ("starting_after" = Option<u64>, Query, description = "With `stream`: only events with a greater sequence number"),
    ),
    responses(
        (status = 200, description = "The Response, or with `stream=true` its events as SSE ending with `data: [DONE]`",
            content((crate::http::openapi::openai_schemas::OpenAiResponse = "application/json"), (String = "text/event-stream"))),
        (status = 400, description = "A query parameter is not valid", body = ErrorBody),
        (status = 401, description = "No valid API key (the tenant's bearer token)", body = ErrorBody),
        (status = 403, description = "The tenant is suspended", body = ErrorBody),
        (status = 404, description = "No such response of this tenant", body = ErrorBody),
    ))]
pub async fn get_response(
    auth: Result<TenantAuth, ApiError>,
    state: web::Data<AppState>,
    request: HttpRequest,
    path: web::Path<String>,
) -> Result<HttpResponse, OpenAiError> {
    let tenant = auth?.tenant_id;
    let query = parse_query(&request)?;
    let loaded = load(&state, &tenant, &path).await?;
    if query.stream {
        let frames = stream::frames(
            &state,
            tenant,
            loaded.session.id,
            loaded.identity,
            query.starting_after,
        );
        return Ok(stream::response(&state, frames).await);
    }
    Ok(HttpResponse::Ok().json(snapshot(&state, &loaded).await?))
}
