//! `GET /admin/tenants/{id}/usage?from=&to=`: what a tenant's turns consumed.

use actix_web::{HttpResponse, web};

use super::existing_tenant;
use crate::app::AppState;
use crate::http::AdminAuth;
use crate::http::Query;
use crate::http::error::ApiError;
use crate::http::usage::{UsageQuery, usage_report};

/// Turns created in `[from, to)`, in total and per day; `from` defaults to the epoch, `to`
/// to now.
#[utoipa::path(get, path = "/admin/tenants/{tenant_id}/usage", tag = "admin", operation_id = "admin_get_usage",
    security(("admin" = [])),
    params(("tenant_id" = String, Path, description = "A tenant id (`ten_…`)"), UsageQuery),
    responses(
        (status = 200, description = "The tenant's consumption", body = crate::http::openapi::schemas::UsageReport),
        (status = 400, description = "A bad `from` or `to`", body = crate::http::openapi::schemas::ErrorBody),
        (status = 404, description = "No such tenant", body = crate::http::openapi::schemas::ErrorBody),
    ))]
pub async fn get_usage(
    _: AdminAuth,
    state: web::Data<AppState>,
    path: web::Path<String>,
    query: Query<UsageQuery>,
) -> Result<HttpResponse, ApiError> {
    let tenant = existing_tenant(&state, &path).await?;
    let report = usage_report(&state, tenant, &query).await?;
    Ok(HttpResponse::Ok().json(report))
}
