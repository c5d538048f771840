//! Liveness and readiness.

use actix_web::{HttpResponse, web};
use serde_json::json;

use crate::app::AppState;
use crate::error::{ApiError, ErrorCode};

/// The process is up.
pub async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(json!({"status": "ok"}))
}

/// The process can serve: its database answers.
pub async fn readyz(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
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
