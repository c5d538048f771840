//! Liveness, readiness and metrics.

use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse, web};
use serde_json::json;

use crate::app::AppState;
use crate::crypto;
use crate::http::error::{ApiError, ErrorCode};
use crate::http::openapi::schemas as doc;

/// The process is up.
#[utoipa::path(get, path = "/healthz", tag = "operations",
    responses((status = 200, description = "The process is up", body = doc::Status)))]
pub async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(json!({"status": "ok"}))
}

/// How long `/readyz` waits for the database.
const READY_WITHIN: std::time::Duration = std::time::Duration::from_secs(1);

/// The process can serve: it takes new turns (it is not shutting down) and its database
/// takes a write, answered within a second. A load balancer takes a draining process (or
/// one whose database is full or unreachable) out of rotation on the 503.
#[utoipa::path(get, path = "/readyz", tag = "operations",
    responses(
        (status = 200, description = "The process can serve", body = doc::Status),
        (status = 503, description = "Shutting down, or the database does not take a write (full, unreachable, or not within a second)", body = doc::ErrorBody),
    ))]
pub async fn readyz(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    if !state.engine().is_accepting() {
        return Err(ApiError::new(
            ErrorCode::Unavailable,
            "shutting down: new turns go to another process",
        ));
    }
    match state.engine().can_write(READY_WITHIN).await {
        Ok(()) => Ok(HttpResponse::Ok().json(json!({"status": "ready"}))),
        Err(error) => {
            tracing::warn!(error = %error, "readiness check failed");
            let message = match error {
                crate::engine::StoreError::Full(_) => "the database's storage is full",
                _ => "the database does not take writes",
            };
            Err(ApiError::new(ErrorCode::DatabaseUnavailable, message)
                .retry_after(crate::http::error::DATABASE_RETRY_AFTER))
        }
    }
}

/// Prometheus metrics, in the text exposition format.
#[utoipa::path(get, path = "/metrics", tag = "operations",
    security((), ("metrics" = [])),
    responses(
        (status = 200, description = "Every metric family, in the Prometheus text exposition format 0.0.4",
            content_type = "text/plain; version=0.0.4", body = String),
        (status = 401, description = "`metrics.bearer_token` is set and the request does not send it as `Authorization: Bearer …`",
            body = doc::ErrorBody, headers(("WWW-Authenticate" = String, description = "`Bearer`"))),
        (status = 404, description = "Metrics are disabled (`metrics.enabled = false`) or served on an address of their own (`metrics.bind`)",
            body = doc::ErrorBody),
    ))]
pub async fn get_metrics(
    state: web::Data<AppState>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    if !state.settings().metrics.on_main_port() {
        return Err(ApiError::new(ErrorCode::NotFound, "no such route"));
    }
    serve_metrics(state, req).await
}

/// `/metrics` on the address of its own (`metrics.bind`).
pub async fn serve_metrics(
    state: web::Data<AppState>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    check_scrape_token(&state, &req)?;
    for (pool, in_use, idle) in state.engine().pool_connections() {
        state.metrics().set_db_pool(pool, in_use, idle);
    }
    if let Some((writes, statements)) = state.engine().committed_writes() {
        state.metrics().set_db_writes(writes, statements);
    }
    state.metrics().set_mcp_servers(state.mcp().status());
    Ok(HttpResponse::Ok()
        .content_type(crate::metrics::CONTENT_TYPE)
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .body(state.metrics().render()))
}

/// With `metrics.bearer_token` set, the request must send it as a bearer token, read as
/// every tenant token is and compared in constant time.
fn check_scrape_token(state: &AppState, req: &HttpRequest) -> Result<(), ApiError> {
    let expected = &state.settings().metrics.bearer_token;
    if expected.is_empty() {
        return Ok(());
    }
    let sent = super::caller::bearer_token(req).map_err(|error| match error.code {
        ErrorCode::MissingToken => ApiError::new(
            ErrorCode::MissingToken,
            "send `Authorization: Bearer <metrics.bearer_token>`",
        ),
        _ => error,
    })?;
    if crypto::constant_time_eq(sent.as_bytes(), expected.expose().as_bytes()) {
        Ok(())
    } else {
        Err(ApiError::new(ErrorCode::InvalidToken, "invalid token"))
    }
}
