//! `/webhooks`: a tenant's webhook endpoints and their deliveries. The admin API's
//! `/admin/tenants/{tenant_id}/webhooks` routes answer the same way (see
//! `admin/webhooks.rs`), through the operations here.

use actix_web::{HttpResponse, web};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::app::AppState;
use crate::engine::{EndpointPatch, NewEndpoint, WebhookError};
use crate::http::Query;
use crate::http::error::{ApiError, ErrorCode};
use crate::http::pagination::{ListQuery, next_cursor};
use crate::http::{TenantAuth, parse_json};
use crate::model::{Endpoint, EndpointId, MessageId, TenantId, WebhookDelivery};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateEndpoint {
    url: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    event_types: Option<Vec<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UpdateEndpoint {
    #[serde(default)]
    url: Option<String>,
    /// Absent: unchanged; `null`: removed.
    #[serde(default, deserialize_with = "present")]
    description: Option<Option<String>>,
    #[serde(default)]
    event_types: Option<Vec<String>>,
    #[serde(default)]
    enabled: Option<bool>,
}

/// A field that is present, `null` or not.
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

#[derive(Serialize)]
struct EndpointList {
    endpoints: Vec<Endpoint>,
    #[serde(skip_serializing_if = "Option::is_none")]
    next: Option<String>,
}

#[derive(Serialize)]
struct DeliveryList {
    deliveries: Vec<WebhookDelivery>,
    #[serde(skip_serializing_if = "Option::is_none")]
    next: Option<String>,
}

impl From<WebhookError> for ApiError {
    fn from(error: WebhookError) -> Self {
        match error {
            WebhookError::Invalid(field) => field.into(),
            WebhookError::NotFound(what) => ApiError::not_found(what),
            WebhookError::Disabled
            | WebhookError::TooMany(_)
            | WebhookError::TooManyForRun(_)
            | WebhookError::TooManyRunEndpoints(_)
            | WebhookError::RunEndpointToken => {
                ApiError::new(ErrorCode::Conflict, error.to_string())
            }
            WebhookError::Concurrent(what) => ApiError::new(ErrorCode::Conflict, what),
            WebhookError::Store(store) => store.into(),
            WebhookError::Sealed(sealed) => ApiError::internal(sealed),
        }
    }
}

fn endpoint_id(raw: &str) -> Result<EndpointId, ApiError> {
    raw.parse()
        .map_err(|_| ApiError::not_found("webhook endpoint"))
}

fn message_id(raw: &str) -> Result<MessageId, ApiError> {
    raw.parse().map_err(|_| ApiError::not_found("delivery"))
}

/// The operations behind both the tenant's and the admin's routes, once the tenant is known.
pub(super) mod ops {
    use super::*;

    pub async fn create(
        state: &AppState,
        tenant: &TenantId,
        body: Value,
    ) -> Result<HttpResponse, ApiError> {
        let request: CreateEndpoint = parse_json(body)?;
        let created = state
            .webhooks()
            .create_endpoint(
                tenant,
                NewEndpoint {
                    url: request.url,
                    description: request.description,
                    event_types: request.event_types,
                },
            )
            .await?;
        tracing::info!(tenant_id = %tenant, endpoint_id = %created.endpoint.id, "webhook endpoint created");
        Ok(HttpResponse::Created()
            .insert_header(("Cache-Control", "no-store"))
            .json(created))
    }

    pub async fn list(
        state: &AppState,
        tenant: &TenantId,
        query: &ListQuery,
    ) -> Result<HttpResponse, ApiError> {
        let cursor = query.cursor()?;
        let (endpoints, more) = state
            .webhooks()
            .list_endpoints(tenant, cursor.page())
            .await?;
        let next = next_cursor(&endpoints, more, |e| e.id.to_string());
        Ok(HttpResponse::Ok().json(EndpointList { endpoints, next }))
    }

    pub async fn get(
        state: &AppState,
        tenant: &TenantId,
        id: &str,
    ) -> Result<HttpResponse, ApiError> {
        let endpoint = state
            .webhooks()
            .get_endpoint(tenant, &endpoint_id(id)?)
            .await?;
        Ok(HttpResponse::Ok().json(endpoint))
    }

    pub async fn update(
        state: &AppState,
        tenant: &TenantId,
        id: &str,
        body: Value,
    ) -> Result<HttpResponse, ApiError> {
        let id = endpoint_id(id)?;
        let request: UpdateEndpoint = parse_json(body)?;
        let patch = EndpointPatch {
            url: request.url,
            description: request.description,
            event_types: request.event_types,
            enabled: request.enabled,
        };
        let endpoint = state.webhooks().update_endpoint(tenant, &id, patch).await?;
        tracing::info!(tenant_id = %tenant, endpoint_id = %id, "webhook endpoint updated");
        Ok(HttpResponse::Ok().json(endpoint))
    }

    pub async fn delete(
        state: &AppState,
        tenant: &TenantId,
        id: &str,
    ) -> Result<HttpResponse, ApiError> {
        let id = endpoint_id(id)?;
        state.webhooks().delete_endpoint(tenant, &id).await?;
        tracing::info!(tenant_id = %tenant, endpoint_id = %id, "webhook endpoint deleted");
        Ok(HttpResponse::NoContent().finish())
    }

    pub async fn rotate_secret(
        state: &AppState,
        tenant: &TenantId,
        id: &str,
    ) -> Result<HttpResponse, ApiError> {
        let id = endpoint_id(id)?;
        let rotated = state.webhooks().rotate_secret(tenant, &id).await?;
        tracing::info!(tenant_id = %tenant, endpoint_id = %id, "webhook secret rotated");
        Ok(HttpResponse::Ok()
            .insert_header(("Cache-Control", "no-store"))
            .json(rotated))
    }

    pub async fn list_deliveries(
        state: &AppState,
        tenant: &TenantId,
        id: &str,
        query: &ListQuery,
    ) -> Result<HttpResponse, ApiError> {
        let id = endpoint_id(id)?;
        let cursor = query.cursor()?;
        let (deliveries, more) = state
            .webhooks()
            .list_deliveries(tenant, &id, cursor.page())
            .await?;
        let next = next_cursor(&deliveries, more, |d| d.id.to_string());
        Ok(HttpResponse::Ok().json(DeliveryList { deliveries, next }))
    }

    pub async fn replay(
        state: &AppState,
        tenant: &TenantId,
        id: &str,
        message: &str,
    ) -> Result<HttpResponse, ApiError> {
        let id = endpoint_id(id)?;
        let message = message_id(message)?;
        let delivery = state
            .webhooks()
            .replay_delivery(tenant, &id, &message)
            .await?;
        tracing::info!(tenant_id = %tenant, endpoint_id = %id, message_id = %message, "webhook delivery replayed");
        Ok(HttpResponse::Accepted().json(delivery))
    }
}

#[utoipa::path(post, path = "/webhooks", tag = "webhooks", operation_id = "create_webhook",
    security(("tenant" = [])),
    request_body = crate::http::openapi::schemas::CreateWebhook,
    responses(
        (status = 201, description = "The endpoint, and its secret shown only here", body = crate::http::openapi::schemas::CreatedWebhook),
        (status = 400, description = "A field is wrong (named in `field`): the URL, its target or an event type", body = crate::http::openapi::schemas::ErrorBody),
        (status = 409, description = "The tenant has as many endpoints as allowed", body = crate::http::openapi::schemas::ErrorBody),
    ))]
pub async fn create_webhook(
    auth: TenantAuth,
    state: web::Data<AppState>,
    body: web::Json<Value>,
) -> Result<HttpResponse, ApiError> {
    ops::create(&state, &auth.tenant_id, body.into_inner()).await
}

#[utoipa::path(get, path = "/webhooks", tag = "webhooks", operation_id = "list_webhooks",
    security(("tenant" = [])),
    params(crate::http::pagination::ListQuery),
    responses(
        (status = 200, description = "The tenant's endpoints, a page at a time", body = crate::http::openapi::schemas::WebhookList),
        (status = 400, description = "A bad cursor or limit", body = crate::http::openapi::schemas::ErrorBody),
    ))]
pub async fn list_webhooks(
    auth: TenantAuth,
    state: web::Data<AppState>,
    query: Query<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    ops::list(&state, &auth.tenant_id, &query).await
}

#[utoipa::path(get, path = "/webhooks/{endpoint_id}", tag = "webhooks", operation_id = "get_webhook",
    security(("tenant" = [])),
    params(("endpoint_id" = String, Path, description = "A webhook endpoint id (`wh_…`)")),
    responses(
        (status = 200, description = "The endpoint", body = crate::http::openapi::schemas::WebhookEndpoint),
        (status = 404, description = "No such endpoint", body = crate::http::openapi::schemas::ErrorBody),
    ))]
pub async fn get_webhook(
    auth: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    ops::get(&state, &auth.tenant_id, &path).await
}

#[utoipa::path(patch, path = "/webhooks/{endpoint_id}", tag = "webhooks", operation_id = "update_webhook",
    security(("tenant" = [])),
    params(("endpoint_id" = String, Path, description = "A webhook endpoint id (`wh_…`)")),
    request_body = crate::http::openapi::schemas::UpdateWebhook,
    responses(
        (status = 200, description = "The endpoint after the change", body = crate::http::openapi::schemas::WebhookEndpoint),
        (status = 400, description = "A field is wrong (named in `field`): the URL, its target or an event type", body = crate::http::openapi::schemas::ErrorBody),
        (status = 404, description = "No such endpoint", body = crate::http::openapi::schemas::ErrorBody),
    ))]
pub async fn update_webhook(
    auth: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: web::Json<Value>,
) -> Result<HttpResponse, ApiError> {
    ops::update(&state, &auth.tenant_id, &path, body.into_inner()).await
}

#[utoipa::path(delete, path = "/webhooks/{endpoint_id}", tag = "webhooks", operation_id = "delete_webhook",
    security(("tenant" = [])),
    params(("endpoint_id" = String, Path, description = "A webhook endpoint id (`wh_…`)")),
    responses(
        (status = 204, description = "Deleted, with its deliveries"),
        (status = 404, description = "No such endpoint", body = crate::http::openapi::schemas::ErrorBody),
    ))]
pub async fn delete_webhook(
    auth: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    ops::delete(&state, &auth.tenant_id, &path).await
}

#[utoipa::path(post, path = "/webhooks/{endpoint_id}/rotate-secret", tag = "webhooks", operation_id = "rotate_webhook_secret",
    security(("tenant" = [])),
    params(("endpoint_id" = String, Path, description = "A webhook endpoint id (`wh_…`)")),
    responses(
        (status = 200, description = "The new secret, shown only here", body = crate::http::openapi::schemas::RotatedWebhookSecret),
        (status = 404, description = "No such endpoint", body = crate::http::openapi::schemas::ErrorBody),
        (status = 409, description = "Another rotation of the same secret won meanwhile (this one's secret was never valid), or the endpoint is a run's own, signed with its client's token", body = crate::http::openapi::schemas::ErrorBody),
    ))]
pub async fn rotate_webhook_secret(
    auth: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    ops::rotate_secret(&state, &auth.tenant_id, &path).await
}

#[utoipa::path(get, path = "/webhooks/{endpoint_id}/deliveries", tag = "webhooks", operation_id = "list_webhook_deliveries",
    security(("tenant" = [])),
    params(("endpoint_id" = String, Path, description = "A webhook endpoint id (`wh_…`)"), crate::http::pagination::ListQuery),
    responses(
        (status = 200, description = "The endpoint's deliveries, newest first, a page at a time", body = crate::http::openapi::schemas::WebhookDeliveryList),
        (status = 400, description = "A bad cursor or limit", body = crate::http::openapi::schemas::ErrorBody),
        (status = 404, description = "No such endpoint", body = crate::http::openapi::schemas::ErrorBody),
    ))]
pub async fn list_webhook_deliveries(
    auth: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<String>,
    query: Query<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    ops::list_deliveries(&state, &auth.tenant_id, &path, &query).await
}

#[utoipa::path(post, path = "/webhooks/{endpoint_id}/deliveries/{message_id}/replay", tag = "webhooks", operation_id = "replay_webhook_delivery",
    security(("tenant" = [])),
    params(("endpoint_id" = String, Path, description = "A webhook endpoint id (`wh_…`)"), ("message_id" = String, Path, description = "A message id (`msg_…`)")),
    responses(
        (status = 202, description = "The delivery, pending again with the same message id", body = crate::http::openapi::schemas::WebhookDelivery),
        (status = 404, description = "No such endpoint or delivery", body = crate::http::openapi::schemas::ErrorBody),
        (status = 409, description = "The endpoint is disabled", body = crate::http::openapi::schemas::ErrorBody),
    ))]
pub async fn replay_webhook_delivery(
    auth: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (endpoint, message) = path.into_inner();
    ops::replay(&state, &auth.tenant_id, &endpoint, &message).await
}
