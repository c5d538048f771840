//! `GET /admin/tenants/{id}/usage?from=&to=`: what a tenant's turns consumed.

use actix_web::{HttpResponse, web};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::existing_tenant;
use crate::app::AppState;
use crate::error::{ApiError, ErrorCode};
use crate::http::AdminAuth;
use crate::store::UsageTotals;

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct UsageQuery {
    from: Option<DateTime<Utc>>,
    to: Option<DateTime<Utc>>,
}

#[derive(Serialize)]
struct UsageReport {
    tenant_id: String,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    #[serde(flatten)]
    totals: UsageTotals,
}

/// Turns created in `[from, to)`; `from` defaults to the epoch, `to` to now.
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
    query: web::Query<UsageQuery>,
) -> Result<HttpResponse, ApiError> {
    let tenant = existing_tenant(&state, &path).await?;
    let from = query.from.unwrap_or(DateTime::UNIX_EPOCH);
    let to = query.to.unwrap_or_else(crate::model::now);
    if from >= to {
        return Err(ApiError::new(
            ErrorCode::InvalidQuery,
            "from: must be before to",
        ));
    }
    let totals = state.store.sum_usage(&tenant, from, to).await?;
    Ok(HttpResponse::Ok().json(UsageReport {
        tenant_id: tenant.to_string(),
        from,
        to,
        totals,
    }))
}
