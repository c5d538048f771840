//! `POST /v1/responses/{id}/cancel` and `DELETE /v1/responses/{id}`.
//!
//! Cancelling stops a background response's turn (as any turn is cancelled) and answers
//! the Response once it ended; a response that already ended is answered as it is.
//! Deleting hides the response from this face: its turn stays in its session's history
//! (deleting the conversation erases it).

use actix_web::{HttpResponse, web};
use serde_json::json;

use super::error::{ErrorBody, OpenAiError};
use super::load::{load, snapshot};
use crate::app::AppState;
use crate::http::TenantAuth;
use crate::http::error::ApiError;

#[utoipa::path(post, path = "/v1/responses/{response_id}/cancel", tag = "OpenAI",
    operation_id = "openai_cancel_response",
    security(("tenant" = [])),
    params(("response_id" = String, Path, description = "A response id (`resp_…`)")),
    responses(
        (status = 200, description = "The Response: `cancelled`, or as it ended before",
            body = crate::http::openapi::openai_schemas::OpenAiResponse),
        (status = 400, description = "The response was not created with `background: true`", body = ErrorBody),
        (status = 404, description = "No such response of this tenant", body = ErrorBody),
    ))]
pub async fn cancel_response(
    auth: Result<TenantAuth, ApiError>,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, OpenAiError> {
    let tenant = auth?.tenant_id;
    let mut loaded = load(&state, &tenant, &path).await?;
    if !loaded.identity.background {
        return Err(OpenAiError::invalid(
            "response_id",
            "only a response created with background: true can be cancelled",
        ));
    }
    if !loaded.turn.status.is_terminal() {
        loaded.turn = state
            .engine()
            .cancel_turn(&tenant, &loaded.session.id, &loaded.turn.id)
            .await?;
    }
    Ok(HttpResponse::Ok().json(snapshot(&state, &loaded).await?))
}

#[utoipa::path(delete, path = "/v1/responses/{response_id}", tag = "OpenAI",
    operation_id = "openai_delete_response",
    security(("tenant" = [])),
    params(("response_id" = String, Path, description = "A response id (`resp_…`)")),
    responses(
        (status = 200, description = "`{id, object: \"response\", deleted: true}`",
            body = crate::http::openapi::openai_schemas::OpenAiDeleted),
        (status = 404, description = "No such response of this tenant", body = ErrorBody),
    ))]
pub async fn delete_response(
    auth: Result<TenantAuth, ApiError>,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, OpenAiError> {
    let tenant = auth?.tenant_id;
    let mut loaded = load(&state, &tenant, &path).await?;
    loaded.labels.deleted = true;
    state
        .engine()
        .set_turn_labels(&tenant, &loaded.turn.id, &loaded.labels.to_map())
        .await?;
    Ok(HttpResponse::Ok().json(json!({
        "id": loaded.identity.id, "object": "response", "deleted": true,
    })))
}
