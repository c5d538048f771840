//! `/agents`: a tenant's own agents, their versions, publishing and archiving. The admin
//! API's `/admin/tenants/{tenant_id}/agents…` routes answer the same way (see `admin.rs`),
//! through the operations here. Every operation is the engine's.

pub mod admin;
pub mod routes;

use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::app::AppState;
use crate::engine::{AgentError, AgentWithVersion};
use crate::http::error::{ApiError, ErrorCode};
use crate::http::pagination::{ListQuery, next_cursor};
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

/// The operations behind both the tenant's and the admin's routes, once the tenant is known.
pub(crate) mod ops {
    use super::*;

    pub async fn create(
        state: &AppState,
        tenant: &TenantId,
        body: Value,
        by: &str,
    ) -> Result<HttpResponse, ApiError> {
        let made = state.engine().create_agent(tenant, body, by).await?;
        tracing::info!(tenant_id = %tenant, agent = %made.agent.name, "agent created");
        Ok(with_etag(HttpResponse::Created(), &made.agent).json(body_of(made)))
    }

    pub async fn list(
        state: &AppState,
        tenant: &TenantId,
        query: &ListQuery,
    ) -> Result<HttpResponse, ApiError> {
        let cursor = query.cursor()?;
        let (agents, more) = state.engine().list_agents(tenant, cursor.page()).await?;
        let next = next_cursor(&agents, more, |a| a.id.to_string());
        Ok(HttpResponse::Ok().json(AgentList { agents, next }))
    }

    pub async fn get(
        state: &AppState,
        tenant: &TenantId,
        name: &str,
    ) -> Result<HttpResponse, ApiError> {
        let found = state.engine().get_agent(tenant, name).await?;
        Ok(with_etag(HttpResponse::Ok(), &found.agent).json(body_of(found)))
    }

    pub async fn update(
        state: &AppState,
        req: &HttpRequest,
        tenant: &TenantId,
        name: &str,
        body: Value,
        by: &str,
    ) -> Result<HttpResponse, ApiError> {
        let expected = if_match(req)?;
        let made = state
            .engine()
            .update_agent(tenant, name, body, expected, by)
            .await?;
        tracing::info!(tenant_id = %tenant, agent = %name, version = made.version.version, "agent version made");
        Ok(with_etag(HttpResponse::Ok(), &made.agent).json(body_of(made)))
    }

    pub async fn versions(
        state: &AppState,
        tenant: &TenantId,
        name: &str,
        query: &ListQuery,
    ) -> Result<HttpResponse, ApiError> {
        let limit = query
            .limit
            .unwrap_or(crate::http::pagination::DEFAULT_LIMIT);
        if !(1..=crate::http::pagination::MAX_LIMIT).contains(&limit) {
            return Err(ApiError::new(
                ErrorCode::InvalidQuery,
                format!(
                    "limit: must be between 1 and {}",
                    crate::http::pagination::MAX_LIMIT
                ),
            ));
        }
        let after = match query.after.as_deref() {
            None | Some("") => None,
            Some(cursor) => Some(
                crate::http::pagination::decode(cursor)
                    .and_then(|v| v.parse::<i64>().ok())
                    .ok_or_else(|| {
                        ApiError::new(
                            ErrorCode::InvalidQuery,
                            "after: not a cursor this server issued",
                        )
                    })?,
            ),
        };
        let (agent, versions, more) = state
            .engine()
            .list_agent_versions(tenant, name, after, limit)
            .await?;
        let next = next_cursor(&versions, more, |v| v.version.to_string());
        Ok(with_etag(HttpResponse::Ok(), &agent).json(AgentVersionList { versions, next }))
    }

    pub async fn version(
        state: &AppState,
        tenant: &TenantId,
        name: &str,
        version: &str,
    ) -> Result<HttpResponse, ApiError> {
        let number = version_number(version)?;
        let found = state
            .engine()
            .get_agent_version(tenant, name, number)
            .await?;
        Ok(with_etag(HttpResponse::Ok(), &found.agent).json(body_of(found)))
    }

    pub async fn publish(
        state: &AppState,
        req: &HttpRequest,
        tenant: &TenantId,
        name: &str,
        body: Value,
    ) -> Result<HttpResponse, ApiError> {
        let expected = if_match(req)?;
        let request: PublishRequest = crate::http::parse_json(body)?;
        let agent = state
            .engine()
            .publish_agent(tenant, name, request.version, expected)
            .await?;
        tracing::info!(tenant_id = %tenant, agent = %name, version = request.version, "agent version published");
        Ok(with_etag(HttpResponse::Ok(), &agent).json(agent))
    }

    pub async fn archive(
        state: &AppState,
        req: &HttpRequest,
        tenant: &TenantId,
        name: &str,
        archived: bool,
    ) -> Result<HttpResponse, ApiError> {
        let expected = if_match(req)?;
        let agent = state
            .engine()
            .archive_agent(tenant, name, archived, expected)
            .await?;
        tracing::info!(tenant_id = %tenant, agent = %name, archived, "agent archive state set");
        Ok(with_etag(HttpResponse::Ok(), &agent).json(agent))
    }

    pub async fn delete(
        state: &AppState,
        tenant: &TenantId,
        name: &str,
    ) -> Result<HttpResponse, ApiError> {
        state.engine().delete_agent(tenant, name).await?;
        tracing::info!(tenant_id = %tenant, agent = %name, "agent deleted");
        Ok(HttpResponse::NoContent().finish())
    }

    fn body_of(found: AgentWithVersion) -> AgentBody {
        AgentBody {
            agent: found.agent,
            version: found.version,
        }
    }
}
