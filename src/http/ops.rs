//! Liveness and readiness.

use actix_web::{HttpResponse, web};
use serde_json::json;

use crate::app::AppState;
use crate::error::{ApiError, ErrorCode};
use crate::http::openapi::schemas as doc;

/// The process is up.
#[utoipa::path(get, path = "/healthz", tag = "operations",
    responses((status = 200, description = "The process is up", body = doc::Status)))]
pub async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(json!({"status": "ok"}))
}

/// The process can serve: it takes new turns (it is not shutting down) and its database
/// answers. A load balancer takes a draining process out of rotation on the 503.
#[utoipa::path(get, path = "/readyz", tag = "operations",
    responses(
        (status = 200, description = "The process can serve", body = doc::Status),
        (status = 503, description = "Shutting down, or the database does not answer", body = doc::ErrorBody),
    ))]
pub async fn readyz(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    if !state.engine.is_accepting() {
        return Err(ApiError::new(
            ErrorCode::Unavailable,
            "shutting down: new turns go to another process",
        ));
    }
    match state.store.ping().await {
        Ok(()) => Ok(HttpResponse::Ok().json(json!({"status": "ready"}))),
        Err(error) => {
            tracing::warn!(error = %error, "readiness check failed");
            Err(ApiError::new(
                ErrorCode::Unavailable,
                "database unreachable",
            ))
        }
    }
}
