//! `/admin/tenants/{tenant_id}/webhooks`: a tenant's webhook endpoints, managed by an admin
//! exactly as the tenant manages them at `/webhooks`.

use actix_web::{HttpResponse, web};
use serde_json::Value;

use super::existing_tenant;
use crate::app::AppState;
use crate::error::ApiError;
use crate::http::AdminAuth;
use crate::http::pagination::ListQuery;
use crate::http::webhooks::ops;

pub async fn create_webhook(
    _: AdminAuth,
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: web::Json<Value>,
) -> Result<HttpResponse, ApiError> {
    let tenant = existing_tenant(&state, &path).await?;
    ops::create(&state, &tenant, body.into_inner()).await
}

pub async fn list_webhooks(
    _: AdminAuth,
    state: web::Data<AppState>,
    path: web::Path<String>,
    query: web::Query<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    let tenant = existing_tenant(&state, &path).await?;
    ops::list(&state, &tenant, &query).await
}

pub async fn get_webhook(
    _: AdminAuth,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (tenant, endpoint) = path.into_inner();
    let tenant = existing_tenant(&state, &tenant).await?;
    ops::get(&state, &tenant, &endpoint).await
}

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

pub async fn delete_webhook(
    _: AdminAuth,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (tenant, endpoint) = path.into_inner();
    let tenant = existing_tenant(&state, &tenant).await?;
    ops::delete(&state, &tenant, &endpoint).await
}

pub async fn rotate_webhook_secret(
    _: AdminAuth,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (tenant, endpoint) = path.into_inner();
    let tenant = existing_tenant(&state, &tenant).await?;
    ops::rotate_secret(&state, &tenant, &endpoint).await
}

pub async fn list_webhook_deliveries(
    _: AdminAuth,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    query: web::Query<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    let (tenant, endpoint) = path.into_inner();
    let tenant = existing_tenant(&state, &tenant).await?;
    ops::list_deliveries(&state, &tenant, &endpoint, &query).await
}

pub async fn replay_webhook_delivery(
    _: AdminAuth,
    state: web::Data<AppState>,
    path: web::Path<(String, String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (tenant, endpoint, message) = path.into_inner();
    let tenant = existing_tenant(&state, &tenant).await?;
    ops::replay(&state, &tenant, &endpoint, &message).await
}
