//! `/admin/tenants/{tenant_id}/schedules`: a tenant's schedules, managed by an admin
//! exactly as the tenant manages them at `/schedules`.

use actix_web::{HttpResponse, web};
use serde_json::Value;

use super::existing_tenant;
use crate::app::AppState;
use crate::http::AdminAuth;
use crate::http::Query;
use crate::http::error::ApiError;
use crate::http::pagination::ListQuery;
use crate::http::schedules::ops;

#[utoipa::path(post, path = "/admin/tenants/{tenant_id}/schedules", tag = "admin", operation_id = "admin_create_schedule",
    security(("admin" = [])),
    params(("tenant_id" = String, Path, description = "A tenant id (`ten_…`)")),
    request_body = crate::http::openapi::schedule_schemas::CreateSchedule,
    responses(
        (status = 201, description = "The schedule, with its next occurrence", body = crate::http::openapi::schedule_schemas::ScheduleView),
        (status = 400, description = "A field is wrong (named in `field`)", body = crate::http::openapi::schemas::ErrorBody),
        (status = 404, description = "No such tenant", body = crate::http::openapi::schemas::ErrorBody),
        (status = 409, description = "The tenant has as many schedules as allowed", body = crate::http::openapi::schemas::ErrorBody),
    ))]
pub async fn create_schedule(
    _: AdminAuth,
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: web::Json<Value>,
) -> Result<HttpResponse, ApiError> {
    let tenant = existing_tenant(&state, &path).await?;
    ops::create(&state, &tenant, body.into_inner()).await
}

#[utoipa::path(get, path = "/admin/tenants/{tenant_id}/schedules", tag = "admin", operation_id = "admin_list_schedules",
    security(("admin" = [])),
    params(("tenant_id" = String, Path, description = "A tenant id (`ten_…`)"), crate::http::pagination::ListQuery),
    responses(
        (status = 200, description = "The tenant's schedules, a page at a time", body = crate::http::openapi::schedule_schemas::ScheduleList),
        (status = 400, description = "A bad cursor or limit", body = crate::http::openapi::schemas::ErrorBody),
        (status = 404, description = "No such tenant", body = crate::http::openapi::schemas::ErrorBody),
    ))]
pub async fn list_schedules(
    _: AdminAuth,
    state: web::Data<AppState>,
    path: web::Path<String>,
    query: Query<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    let tenant = existing_tenant(&state, &path).await?;
    ops::list(&state, &tenant, &query).await
}

#[utoipa::path(get, path = "/admin/tenants/{tenant_id}/schedules/{schedule_id}", tag = "admin", operation_id = "admin_get_schedule",
    security(("admin" = [])),
    params(("tenant_id" = String, Path, description = "A tenant id (`ten_…`)"), ("schedule_id" = String, Path, description = "A schedule id (`sched_…`)")),
    responses(
        (status = 200, description = "The schedule", body = crate::http::openapi::schedule_schemas::ScheduleView),
        (status = 404, description = "No such schedule or tenant", body = crate::http::openapi::schemas::ErrorBody),
    ))]
pub async fn get_schedule(
    _: AdminAuth,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (tenant, id) = path.into_inner();
    let tenant = existing_tenant(&state, &tenant).await?;
    ops::get(&state, &tenant, &id).await
}

#[utoipa::path(patch, path = "/admin/tenants/{tenant_id}/schedules/{schedule_id}", tag = "admin", operation_id = "admin_update_schedule",
    security(("admin" = [])),
    params(("tenant_id" = String, Path, description = "A tenant id (`ten_…`)"), ("schedule_id" = String, Path, description = "A schedule id (`sched_…`)")),
    request_body = crate::http::openapi::schedule_schemas::UpdateSchedule,
    responses(
        (status = 200, description = "The schedule after the change", body = crate::http::openapi::schedule_schemas::ScheduleView),
        (status = 400, description = "A field is wrong (named in `field`)", body = crate::http::openapi::schemas::ErrorBody),
        (status = 404, description = "No such schedule or tenant", body = crate::http::openapi::schemas::ErrorBody),
    ))]
pub async fn update_schedule(
    _: AdminAuth,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    body: web::Json<Value>,
) -> Result<HttpResponse, ApiError> {
    let (tenant, id) = path.into_inner();
    let tenant = existing_tenant(&state, &tenant).await?;
    ops::update(&state, &tenant, &id, body.into_inner()).await
}

#[utoipa::path(delete, path = "/admin/tenants/{tenant_id}/schedules/{schedule_id}", tag = "admin", operation_id = "admin_delete_schedule",
    security(("admin" = [])),
    params(("tenant_id" = String, Path, description = "A tenant id (`ten_…`)"), ("schedule_id" = String, Path, description = "A schedule id (`sched_…`)")),
    responses(
        (status = 204, description = "Deleted, with its run history"),
        (status = 404, description = "No such schedule or tenant", body = crate::http::openapi::schemas::ErrorBody),
    ))]
pub async fn delete_schedule(
    _: AdminAuth,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (tenant, id) = path.into_inner();
    let tenant = existing_tenant(&state, &tenant).await?;
    ops::delete(&state, &tenant, &id).await
}

#[utoipa::path(post, path = "/admin/tenants/{tenant_id}/schedules/{schedule_id}/run", tag = "admin", operation_id = "admin_run_schedule",
    security(("admin" = [])),
    params(("tenant_id" = String, Path, description = "A tenant id (`ten_…`)"), ("schedule_id" = String, Path, description = "A schedule id (`sched_…`)")),
    responses(
        (status = 202, description = "The occurrence (kind `manual`)", body = crate::http::openapi::schedule_schemas::ScheduleRun),
        (status = 404, description = "No such schedule or tenant", body = crate::http::openapi::schemas::ErrorBody),
    ))]
pub async fn run_schedule(
    _: AdminAuth,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (tenant, id) = path.into_inner();
    let tenant = existing_tenant(&state, &tenant).await?;
    ops::run(&state, &tenant, &id).await
}

#[utoipa::path(get, path = "/admin/tenants/{tenant_id}/schedules/{schedule_id}/runs", tag = "admin", operation_id = "admin_list_schedule_runs",
    security(("admin" = [])),
    params(("tenant_id" = String, Path, description = "A tenant id (`ten_…`)"), ("schedule_id" = String, Path, description = "A schedule id (`sched_…`)"), crate::http::pagination::ListQuery),
    responses(
        (status = 200, description = "The schedule's occurrences, newest first", body = crate::http::openapi::schedule_schemas::ScheduleRunList),
        (status = 400, description = "A bad cursor or limit", body = crate::http::openapi::schemas::ErrorBody),
        (status = 404, description = "No such schedule or tenant", body = crate::http::openapi::schemas::ErrorBody),
    ))]
pub async fn list_schedule_runs(
    _: AdminAuth,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    query: Query<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    let (tenant, id) = path.into_inner();
    let tenant = existing_tenant(&state, &tenant).await?;
    ops::list_runs(&state, &tenant, &id, &query).await
}
