//! `/admin/tenants/{id}/quotas`: the quotas a tenant is held to, and its own values.

use actix_web::{HttpResponse, web};
use serde::Serialize;
use serde_json::{Map, Value};

use super::existing_tenant;
use crate::app::AppState;
use crate::http::AdminAuth;
use crate::http::error::ApiError;
use crate::model::{QuotaOverrides, TenantId};

#[derive(Serialize)]
struct QuotaReport {
    tenant_id: TenantId,
    /// The limits in force (`null`: unlimited).
    quotas: Map<String, Value>,
    /// The tenant's own values (`null`: the configured default).
    own: QuotaOverrides,
}

fn report(state: &AppState, tenant: TenantId, own: QuotaOverrides) -> QuotaReport {
    let defaults = state.settings().quotas.defaults(&state.settings().engine);
    QuotaReport {
        tenant_id: tenant,
        quotas: crate::model::Quotas::resolve(&defaults, &own).to_map(),
        own,
    }
}

#[utoipa::path(get, path = "/admin/tenants/{tenant_id}/quotas", tag = "admin", operation_id = "admin_get_quotas",
    security(("admin" = [])),
    params(("tenant_id" = String, Path, description = "A tenant id (`ten_…`)")),
    responses(
        (status = 200, description = "The tenant's quotas", body = crate::http::openapi::schemas::QuotaReport),
        (status = 404, description = "No such tenant", body = crate::http::openapi::schemas::ErrorBody),
    ))]
pub async fn get_quotas(
    _: AdminAuth,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let tenant = existing_tenant(&state, &path).await?;
    let own = state.admin().get_quota_overrides(&tenant).await?;
    Ok(HttpResponse::Ok().json(report(&state, tenant, own)))
}

/// Sets some of the tenant's quotas (`null` returns one to its default). The change applies
/// at once in this process and within `auth.state_cache_ttl_ms` in the others.
#[utoipa::path(patch, path = "/admin/tenants/{tenant_id}/quotas", tag = "admin", operation_id = "admin_update_quotas",
    security(("admin" = [])),
    params(("tenant_id" = String, Path, description = "A tenant id (`ten_…`)")),
    request_body = crate::http::openapi::schemas::QuotaValues,
    responses(
        (status = 200, description = "The tenant's quotas after the change", body = crate::http::openapi::schemas::QuotaReport),
        (status = 400, description = "An unknown quota or a bad limit, named in `field`", body = crate::http::openapi::schemas::ErrorBody),
        (status = 404, description = "No such tenant", body = crate::http::openapi::schemas::ErrorBody),
    ))]
pub async fn update_quotas(
    _: AdminAuth,
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: web::Json<Value>,
) -> Result<HttpResponse, ApiError> {
    let tenant = existing_tenant(&state, &path).await?;
    let Value::Object(changes) = body.into_inner() else {
        return Err(ApiError::invalid(
            "body",
            "must be an object of quota names to limits",
        ));
    };
    let mut own = state.admin().get_quota_overrides(&tenant).await?;
    own.apply(&changes)?;
    state.admin().put_quota_overrides(&tenant, &own).await?;
    state.engine().quotas().observe(&tenant, own);
    state.auth_cache().forget_tenant(&tenant);
    tracing::info!(tenant_id = %tenant, ?own, "tenant quotas updated");
    Ok(HttpResponse::Ok().json(report(&state, tenant, own)))
}
