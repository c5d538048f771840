//! Liveness and readiness.

use actix_web::{HttpResponse, web};
use serde_json::json;

use crate::app::AppState;
use crate::error::{ApiError, ErrorCode};

/// The process is up.
pub async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(json!({"status": "ok"}))
}

/// The process can serve: it takes new turns (it is not shutting down) and its database
/// answers. A load balancer takes a draining process out of rotation on the 503.
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
