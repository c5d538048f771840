//! The admin API: tenants, their credentials and API keys. Every handler takes `AdminAuth`.

pub mod credentials;
pub mod quotas;
pub mod schedules;
pub mod tenants;
pub mod tokens;
pub mod usage;
pub mod webhooks;

use crate::http::error::{ApiError, OrNotFound};
use crate::model::TenantId;

/// Parses a tenant id from the path; one that cannot exist is simply not found.
fn tenant_id(raw: &str) -> Result<TenantId, ApiError> {
    raw.parse().map_err(|_| ApiError::not_found("tenant"))
}

/// The tenant must exist before anything of it is listed or changed.
pub(crate) async fn existing_tenant(
    state: &crate::app::AppState,
    raw: &str,
) -> Result<TenantId, ApiError> {
    let id = tenant_id(raw)?;
    state.admin().get_tenant(&id).await.or_not_found("tenant")?;
    Ok(id)
}
