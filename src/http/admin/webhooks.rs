//! `/admin/tenants/{tenant_id}/webhooks`: a tenant's webhook endpoints, managed by an admin
//! exactly as the tenant manages them at `/webhooks`.

use actix_web::{HttpResponse, web};
use serde_json::Value;

use super::existing_tenant;
use crate::app::AppState;
use crate::http::AdminAuth;
use crate::http::Query;
use crate::http::error::ApiError;
use crate::http::pagination::ListQuery;
use crate::http::webhooks::ops;

#[utoipa::path(post, path = "/admin/tenants/{tenant_id}/webhooks", tag = "admin", operation_id = "admin_create_webhook",
    security(("admin" = [])),
    params(("tenant_id" = String, Path, description = "A tenant id (`ten_…`)")),
    request_body = crate::http::openapi::schemas::CreateWebhook,
    responses(
        (status = 201, description = "The endpoint, and its secret shown only here", body = crate::http::openapi::schemas::CreatedWebhook),
        (status = 400, description = "A field is wrong (named in `field`): the URL, its target or an event type", body = crate::http::openapi::schemas::ErrorBody),
        (status = 404, description = "No such tenant", body = crate::http::openapi::schemas::ErrorBody),
        (status = 409, description = "The tenant has as many endpoints as allowed", body = crate::http::openapi::schemas::ErrorBody),
    ))]
pub async fn create_webhook(
    _: AdminAuth,
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: web::Json<Value>,
) -> Result<HttpResponse, ApiError> {
    let tenant = existing_tenant(&state, &path).await?;
    ops::create(&state, &tenant, body.into_inner()).await
}

#[utoipa::path(get, path = "/admin/tenants/{tenant_id}/webhooks", tag = "admin", operation_id = "admin_list_webhooks",
    security(("admin" = [])),
    params(("tenant_id" = String, Path, description = "A tenant id (`ten_…`)"), crate::http::pagination::ListQuery),
    responses(
        (status = 200, description = "The tenant's endpoints, a page at a time", body = crate::http::openapi::schemas::WebhookList),
        (status = 400, description = "A bad cursor or limit", body = crate::http::openapi::schemas::ErrorBody),
        (status = 404, description = "No such tenant", body = crate::http::openapi::schemas::ErrorBody),
    ))]
pub async fn list_webhooks(
    _: AdminAuth,
    state: web::Data<AppState>,
    path: web::Path<String>,
    query: Query<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    let tenant = existing_tenant(&state, &path).await?;
    ops::list(&state, &tenant, &query).await
}

#[utoipa::path(get, path = "/admin/tenants/{tenant_id}/webhooks/{endpoint_id}", tag = "admin", operation_id = "admin_get_webhook",
    security(("admin" = [])),
    params(("tenant_id" = String, Path, description = "A tenant id (`ten_…`)"), ("endpoint_id" = String, Path, description = "A webhook endpoint id (`wh_…`)")),
    responses(
        (status = 200, description = "The endpoint", body = crate::http::openapi::schemas::WebhookEndpoint),
        (status = 404, description = "No such endpoint or tenant", body = crate::http::openapi::schemas::ErrorBody),
    ))]
pub async fn get_webhook(
    _: AdminAuth,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (tenant, endpoint) = path.into_inner();
    let tenant = existing_tenant(&state, &tenant).await?;
    ops::get(&state, &tenant, &endpoint).await
}

#[utoipa::path(patch, path = "/admin/tenants/{tenant_id}/webhooks/{endpoint_id}", tag = "admin", operation_id = "admin_update_webhook",
    security(("admin" = [])),
    params(("tenant_id" = String, Path, description = "A tenant id (`ten_…`)"), ("endpoint_id" = String, Path, description = "A webhook endpoint id (`wh_…`)")),
    request_body = crate::http::openapi::schemas::UpdateWebhook,
    responses(
        (status = 200, description = "The endpoint after the change", body = crate::http::openapi::schemas::WebhookEndpoint),
        (status = 400, description = "A field is wrong (named in `field`): the URL, its target or an event type", body = crate::http::openapi::schemas::ErrorBody),
        (status = 404, description = "No such endpoint or tenant", body = crate::http::openapi::schemas::ErrorBody),
    ))]
pub async fn update_webhook(
    _: AdminAuth,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    body: web::Json<Value>,
) -> Result<HttpResponse, ApiError> {
    let (tenant, endpoint) = path.into_inner();
    let tenant = existing_tenant(&state, &tenant).await?;
    ops::update(&state, &tenant, &endpoint, body.into_inner()).await
}

#[utoipa::path(delete, path = "/admin/tenants/{tenant_id}/webhooks/{endpoint_id}", tag = "admin", operation_id = "admin_delete_webhook",
    security(("admin" = [])),
    params(("tenant_id" = String, Path, description = "A tenant id (`ten_…`)"), ("endpoint_id" = String, Path, description = "A webhook endpoint id (`wh_…`)")),
    responses(
        (status = 204, description = "Deleted, with its deliveries"),
        (status = 404, description = "No such endpoint or tenant", body = crate::http::openapi::schemas::ErrorBody),
    ))]
pub async fn delete_webhook(
    _: AdminAuth,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (tenant, endpoint) = path.into_inner();
    let tenant = existing_tenant(&state, &tenant).await?;
    ops::delete(&state, &tenant, &endpoint).await
}

#[utoipa::path(post, path = "/admin/tenants/{tenant_id}/webhooks/{endpoint_id}/rotate-secret", tag = "admin", operation_id = "admin_rotate_webhook_secret",
    security(("admin" = [])),
    params(("tenant_id" = String, Path, description = "A tenant id (`ten_…`)"), ("endpoint_id" = String, Path, description = "A webhook endpoint id (`wh_…`)")),
    responses(
        (status = 200, description = "The new secret, shown only here", body = crate::http::openapi::schemas::RotatedWebhookSecret),
        (status = 404, description = "No such endpoint or tenant", body = crate::http::openapi::schemas::ErrorBody),
        (status = 409, description = "Another rotation of the same secret won meanwhile (this one's secret was never valid), or the endpoint is a run's own, signed with its client's token", body = crate::http::openapi::schemas::ErrorBody),
    ))]
pub async fn rotate_webhook_secret(
    _: AdminAuth,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (tenant, endpoint) = path.into_inner();
    let tenant = existing_tenant(&state, &tenant).await?;
    ops::rotate_secret(&state, &tenant, &endpoint).await
}

#[utoipa::path(get, path = "/admin/tenants/{tenant_id}/webhooks/{endpoint_id}/deliveries", tag = "admin", operation_id = "admin_list_webhook_deliveries",
    security(("admin" = [])),
    params(("tenant_id" = String, Path, description = "A tenant id (`ten_…`)"), ("endpoint_id" = String, Path, description = "A webhook endpoint id (`wh_…`)"), crate::http::pagination::ListQuery),
    responses(
        (status = 200, description = "The endpoint's deliveries, newest first, a page at a time", body = crate::http::openapi::schemas::WebhookDeliveryList),
        (status = 400, description = "A bad cursor or limit", body = crate::http::openapi::schemas::ErrorBody),
        (status = 404, description = "No such endpoint or tenant", body = crate::http::openapi::schemas::ErrorBody),
    ))]
pub async fn list_webhook_deliveries(
    _: AdminAuth,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    query: Query<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    let (tenant, endpoint) = path.into_inner();
    let tenant = existing_tenant(&state, &tenant).await?;
    ops::list_deliveries(&state, &tenant, &endpoint, &query).await
}

#[utoipa::path(post, path = "/admin/tenants/{tenant_id}/webhooks/{endpoint_id}/deliveries/{message_id}/replay", tag = "admin", operation_id = "admin_replay_webhook_delivery",
    security(("admin" = [])),
    params(("tenant_id" = String, Path, description = "A tenant id (`ten_…`)"), ("endpoint_id" = String, Path, description = "A webhook endpoint id (`wh_…`)"), ("message_id" = String, Path, description = "A message id (`msg_…`)")),
    responses(
        (status = 202, description = "The delivery, pending again with the same message id", body = crate::http::openapi::schemas::WebhookDelivery),
        (status = 404, description = "No such endpoint, delivery or tenant", body = crate::http::openapi::schemas::ErrorBody),
        (status = 409, description = "The endpoint is disabled", body = crate::http::openapi::schemas::ErrorBody),
    ))]
pub async fn replay_webhook_delivery(
    _: AdminAuth,
    state: web::Data<AppState>,
    path: web::Path<(String, String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (tenant, endpoint, message) = path.into_inner();
    let tenant = existing_tenant(&state, &tenant).await?;
    ops::replay(&state, &tenant, &endpoint, &message).await
}
