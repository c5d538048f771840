//! `/agents`: a tenant's own agents, their versions, publishing and archiving. The admin
//! API's `/admin/tenants/{tenant_id}/agents…` routes are the same handlers (`routes.rs`):
//! [`AgentOwner`] finds the tenant either way. Every operation is the engine's.

pub mod admin;
pub mod routes;

use actix_web::dev::Payload;
use actix_web::http::header;
use actix_web::{FromRequest, HttpRequest, web};
use futures_util::future::LocalBoxFuture;
use serde::{Deserialize, Serialize};

use crate::app::AppState;
use crate::engine::{AgentError, AgentWithVersion};
use crate::http::admin::existing_tenant;
use crate::http::error::{ApiError, ErrorCode};
use crate::http::{AdminAuth, TenantAuth};
use crate::model::{AgentVersion, TenantAgent, TenantId};

/// A tenant agent and one of its versions (the newest, or the one asked for).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct AgentBody {
    #[serde(flatten)]
    pub agent: TenantAgent,
    pub version: AgentVersion,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct AgentList {
    pub agents: Vec<TenantAgent>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct AgentVersionList {
    pub versions: Vec<AgentVersion>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

/// `POST /agents/{name}/publish`: the version new sessions run (an older one: a rollback).
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PublishRequest {
    pub version: i64,
}

impl From<AgentError> for ApiError {
    fn from(error: AgentError) -> Self {
        match error {
            AgentError::Invalid(field) => field.into(),
            AgentError::NotFound => ApiError::not_found("agent"),
            AgentError::VersionNotFound(_) => ApiError::new(ErrorCode::NotFound, error.to_string()),
            AgentError::Conflict(_) | AgentError::TooMany(_) => {
                ApiError::new(ErrorCode::Conflict, error.to_string())
            }
            AgentError::Stale => ApiError::new(ErrorCode::PreconditionFailed, error.to_string()),
            AgentError::Store(store) => store.into(),
        }
    }
}

/// The revision `If-Match` requires (`None`: absent or `*`).
fn if_match(req: &HttpRequest) -> Result<Option<i64>, ApiError> {
    let Some(value) = req.headers().get(header::IF_MATCH) else {
        return Ok(None);
    };
    let text = value.to_str().unwrap_or_default().trim();
    if text == "*" {
        return Ok(None);
    }
    text.trim_start_matches("W/")
        .trim_matches('"')
        .parse::<i64>()
        .map(Some)
        .map_err(|_| {
            ApiError::invalid(
                "If-Match",
                "must be an agent's ETag (as `ETag` sent it), or *",
            )
        })
}

fn with_etag(
    mut response: actix_web::HttpResponseBuilder,
    agent: &TenantAgent,
) -> actix_web::HttpResponseBuilder {
    response.insert_header((header::ETAG, agent.etag()));
    response
}

fn version_number(raw: &str) -> Result<i64, ApiError> {
    raw.parse::<i64>()
        .ok()
        .filter(|v| *v >= 1)
        .ok_or_else(|| ApiError::not_found("agent version"))
}

/// Whose agents a request reaches, and who its versions are made by: at `/agents…`, the
/// tenant of the tenant's token (versions by the token's id); at
/// `/admin/tenants/{tenant_id}/agents…`, that tenant, which must exist, for an admin's
/// token (versions by `admin`).
pub struct AgentOwner {
    pub tenant: TenantId,
    pub by: String,
}

impl FromRequest for AgentOwner {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let Some(tenant) = req.match_info().get("tenant_id").map(str::to_owned) else {
            let tenant = TenantAuth::from_request(req, payload);
            return Box::pin(async move {
                let auth = tenant.await?;
                Ok(AgentOwner {
                    tenant: auth.tenant_id,
                    by: auth.token_id.to_string(),
                })
            });
        };
        let admin = AdminAuth::from_request(req, payload);
        let state = req.app_data::<web::Data<AppState>>().cloned();
        Box::pin(async move {
            admin.await?;
            let state = state.expect("AppState is registered with the app");
            Ok(AgentOwner {
                tenant: existing_tenant(&state, &tenant).await?,
                by: "admin".to_owned(),
            })
        })
    }
}

/// `{name}` of an agent's routes (beside `{tenant_id}` on the admin's).
#[derive(Debug, Deserialize)]
pub struct AgentPath {
    pub name: String,
}

/// `{name}/versions/{version}`.
#[derive(Debug, Deserialize)]
pub struct VersionPath {
    pub name: String,
    pub version: String,
}

fn body_of(found: AgentWithVersion) -> AgentBody {
    AgentBody {
        agent: found.agent,
        version: found.version,
    }
}
