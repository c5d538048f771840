//! `GET /meta`: the agents this server hosts and what each can really do.

use actix_web::{HttpRequest, HttpResponse, web};
use serde_json::{Map, Value, json};

use super::wire::{AgentInfo, AgentOption, MetaResponse};
use crate::agents::Agent;
use crate::app::AppState;
use crate::config::{ImageInput, OptionKind};
use crate::engine::REDACTED;
use crate::http::error::ApiError;
use crate::http::openapi::schemas as doc;

/// The agents this server hosts. Public unless `auth.public_meta` is false, then it takes a
/// tenant or admin token. With a tenant's token, the tenant's own published agents follow
/// the configured ones; without one, only the configured ones are listed.
#[utoipa::path(get, path = "/meta", tag = "AAP",
    security((), ("tenant" = []), ("admin" = [])),
    responses(
        (status = 200, description = "The agents and their capabilities", body = MetaResponse),
        (status = 401, description = "A token is required (`auth.public_meta = false`) and none valid was sent", body = doc::ErrorBody),
        (status = 403, description = "The tenant is suspended", body = doc::ErrorBody),
    ))]
pub async fn get_meta(
    state: web::Data<AppState>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    // A tenant's token adds its own published agents; without one, the configured ones.
    // (A public `/meta` answers an unusable token as it answers none.)
    let principal = if !state.settings().auth.public_meta {
        Some(crate::http::authenticate(&state, &req).await?)
    } else if req
        .headers()
        .contains_key(actix_web::http::header::AUTHORIZATION)
    {
        crate::http::authenticate(&state, &req).await.ok()
    } else {
        None
    };
    let tenant = match principal {
        Some(crate::auth::Principal::Tenant { tenant_id, .. }) => Some(tenant_id),
        _ => None,
    };
    let agents = state
        .engine()
        .visible_agents(tenant.as_ref())
        .await?
        .iter()
        .map(|a| agent_info(a))
        .collect();
    Ok(HttpResponse::Ok().json(MetaResponse { version: 3, agents }))
}

fn agent_info(agent: &Agent) -> AgentInfo {
    let settings = agent.settings();
    AgentInfo {
        name: settings.name.clone(),
        title: settings.title.clone(),
        version: settings.version.clone(),
        description: settings.description.clone(),
        tools: agent.exposed_tools().collect(),
        options: settings
            .options
            .iter()
            .map(|o| AgentOption {
                kind: o.kind,
                name: o.name.clone(),
                title: o.title.clone(),
                description: o.description.clone(),
                options: (o.kind == OptionKind::Select).then(|| o.options.clone()),
                default: match o.kind {
                    OptionKind::Secret if !o.default.is_empty() => REDACTED.to_owned(),
                    _ => o.default.expose().to_owned(),
                },
            })
            .collect(),
        capabilities: capabilities(agent),
    }
}

/// Only what is true: the history types the agent declares and the image inputs it takes.
fn capabilities(agent: &Agent) -> Value {
    let settings = agent.settings();
    let mut capabilities = Map::new();
    let history: Map<String, Value> = settings
        .history
        .types
        .iter()
        .map(|t| (t.as_str().to_owned(), json!({})))
        .collect();
    capabilities.insert("history".into(), Value::Object(history));
    let image: Map<String, Value> = settings
        .image_inputs
        .iter()
        .map(|i| {
            let key = match i {
                ImageInput::Http => "http",
                ImageInput::Data => "data",
            };
            (key.to_owned(), json!({}))
        })
        .collect();
    if !image.is_empty() {
        capabilities.insert("image".into(), Value::Object(image));
    }
    capabilities.insert(
        "stream".into(),
        json!({"delta": {}, "message": {}, "none": {}}),
    );
    // agentry's extensions of AAP: replay and resume of a session's or a turn's events,
    // turn records, cancellation, and Idempotency-Key on POST /sessions/{id}/turns.
    let mut agentry = json!({"events": {}, "turns": {}, "cancel": {}, "idempotency": {}});
    // The message-body schemas the agent declares (its input is enforced).
    for (key, schema) in [
        ("inputSchema", &settings.input_schema),
        ("outputSchema", &settings.output_schema),
    ] {
        if !schema.is_empty() {
            agentry[key] = schema
                .iter()
                .map(|part| {
                    json!({"name": part.name, "contentType": part.content_type, "required": part.required})
                })
                .collect();
        }
    }
    capabilities.insert("agentry".into(), agentry);
    if agent.accepts_client_tools() {
        capabilities.insert("application".into(), json!({"tools": {}}));
    }
    Value::Object(capabilities)
}
