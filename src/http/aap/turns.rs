//! `POST /sessions/{id}/turns`.

use actix_web::web;

use super::session_id;
use crate::app::AppState;
use crate::auth::TenantAuth;
use crate::error::{ApiError, ErrorCode, OrNotFound};

/// Running turns is not available in this version: the session is checked (so another
/// tenant's still reads as not found) and the request refused with 501.
pub async fn post_turn(
    auth: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<actix_web::HttpResponse, ApiError> {
    let id = session_id(&path)?;
    state
        .store
        .get_session(&auth.tenant_id, &id)
        .await
        .or_not_found("session")?;
    Err(ApiError::new(
        ErrorCode::NotImplemented,
        "running turns is not available in this version",
    ))
}
