//! `GET /acp/ping`, `GET /acp/agents`, `GET /acp/agents/{name}`: manifests from the
//! agents' configuration. Content types come from the declared message-body schemas
//! (`*/*` when an agent declares none); the schemas themselves are advertised under
//! `metadata.annotations.agentry`.

use actix_web::{HttpResponse, web};
use serde_json::json;

use super::error::AcpError;
use super::wire::{
    AgentList, AgentManifest, AgentMetadata, AgentryAnnotation, Annotations,
    ErrorObject as AcpErrorBody, SchemaPart,
};
use crate::agents::Agent;
use crate::app::AppState;
use crate::config::SchemaPartSettings;
use crate::http::TenantAuth;
use crate::http::error::ApiError;

#[utoipa::path(get, path = "/acp/ping", tag = "ACP", operation_id = "acp_ping",
    security(("tenant" = [])),
    responses((status = 200, description = "The face is up", body = crate::http::openapi::schemas::Empty)))]
pub async fn ping(auth: Result<TenantAuth, ApiError>) -> Result<HttpResponse, AcpError> {
    auth?;
    Ok(HttpResponse::Ok().json(json!({})))
}

#[utoipa::path(get, path = "/acp/agents", tag = "ACP", operation_id = "acp_list_agents",
    security(("tenant" = [])),
    responses((status = 200, description = "The agents' manifests", body = AgentList)))]
pub async fn list_agents(
    auth: Result<TenantAuth, ApiError>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, AcpError> {
    let tenant = auth?.tenant_id;
    let agents: Vec<AgentManifest> = state
        .engine()
        .visible_agents(Some(&tenant))
        .await?
        .iter()
        .map(|a| manifest(a))
        .collect();
    Ok(HttpResponse::Ok().json(AgentList { agents }))
}

#[utoipa::path(get, path = "/acp/agents/{name}", tag = "ACP", operation_id = "acp_get_agent",
    security(("tenant" = [])),
    params(("name" = String, Path, description = "An agent name")),
    responses(
        (status = 200, description = "The agent's manifest", body = AgentManifest),
        (status = 404, description = "No such agent", body = AcpErrorBody),
    ))]
pub async fn get_agent(
    auth: Result<TenantAuth, ApiError>,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, AcpError> {
    let tenant = auth?.tenant_id;
    let name = path.into_inner();
    let agent = state
        .engine()
        .find_agent(Some(&tenant), &name)
        .await?
        .ok_or_else(|| {
            AcpError::not_found(format!("Agent {name}"))
                .hint(&state.engine().agents_listed(Some(&tenant)))
        })?;
    Ok(HttpResponse::Ok().json(manifest(&agent)))
}

/// An agent's manifest.
pub fn manifest(agent: &Agent) -> AgentManifest {
    let settings = agent.settings();
    let description = settings
        .description
        .clone()
        .or_else(|| settings.title.clone())
        .unwrap_or_default();
    let schema = |parts: &[SchemaPartSettings]| -> Vec<SchemaPart> {
        parts
            .iter()
            .map(|p| SchemaPart {
                name: p.name.clone(),
                content_type: p.content_type.clone(),
                required: p.required,
            })
            .collect()
    };
    AgentManifest {
        name: agent.name().to_owned(),
        description,
        metadata: AgentMetadata {
            annotations: Some(Annotations {
                agentry: AgentryAnnotation {
                    title: settings.title.clone(),
                    version: settings.version.clone(),
                    input_schema: schema(&settings.input_schema),
                    output_schema: schema(&settings.output_schema),
                },
            }),
            ..AgentMetadata::default()
        },
        input_content_types: content_types(&settings.input_schema),
        output_content_types: content_types(&settings.output_schema),
    }
}

/// The content types a schema allows, in order, `{a,b}` alternations spelled out; `*/*`
/// for no schema.
fn content_types(parts: &[SchemaPartSettings]) -> Vec<String> {
    let mut types: Vec<String> = Vec::new();
    for part in parts {
        let pattern = part.content_type.trim();
        let expanded: Vec<String> =
            match pattern.strip_prefix('{').and_then(|p| p.strip_suffix('}')) {
                Some(inner) if !inner.contains(['{', '}']) => {
                    inner.split(',').map(|t| t.trim().to_owned()).collect()
                }
                _ => vec![pattern.to_owned()],
            };
        for content_type in expanded {
            if !types.contains(&content_type) {
                types.push(content_type);
            }
        }
    }
    if types.is_empty() {
        types.push("*/*".to_owned());
    }
    types
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(content_type: &str) -> SchemaPartSettings {
        SchemaPartSettings {
            name: None,
            content_type: content_type.to_owned(),
            required: false,
        }
    }

    #[test]
    fn content_types_come_from_the_schema() {
        assert_eq!(content_types(&[]), ["*/*"]);
        assert_eq!(
            content_types(&[
                part("text/plain"),
                part("{image/png,text/plain}"),
                part("application/*")
            ]),
            ["text/plain", "image/png", "application/*"]
        );
    }
}
