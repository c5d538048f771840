//! Agent cards: each configured agent is an A2A agent, its card public at
//! `/a2a/{agent}/.well-known/agent-card.json` (the default agent's also at
//! `/.well-known/agent-card.json`), with an ETag; the extended card takes a token.

use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse, web};
use serde_json::{Value, json};

use super::error::A2aError;
use crate::agents::Agent;
use crate::app::AppState;
use crate::http::error::ApiError;

/// How clients answer an input-required task (documented in README.md).
pub const INPUT_EXTENSION: &str = "urn:agentry:a2a:input-required:v1";
/// Subscribing with `Last-Event-ID` replays exactly the frames after it.
pub const REPLAY_EXTENSION: &str = "urn:agentry:a2a:replay:v1";

/// How long a client may cache a card, in seconds.
const CARD_MAX_AGE: u32 = 300;

/// The media types the agent's replies are made of.
pub fn output_modes(agent: &Agent) -> Vec<String> {
    let declared: Vec<String> = agent
        .settings()
        .output_schema
        .iter()
        .map(|p| p.content_type.clone())
        .collect();
    if declared.is_empty() {
        vec!["text/plain".into()]
    } else {
        declared
    }
}

fn input_modes(agent: &Agent) -> Vec<String> {
    let declared: Vec<String> = agent
        .settings()
        .input_schema
        .iter()
        .map(|p| p.content_type.clone())
        .collect();
    if declared.is_empty() {
        vec!["text/plain".into(), "*/*".into()]
    } else {
        declared
    }
}

/// The agent's card; `base` is the server's public URL. It declares the 1.0 and the 0.3
/// interfaces (both served at the same URL; 0.3's HTTP+JSON under `/v1`, where 0.3
/// clients put it) in 1.0's fields and, with `v03_fields`, in 0.3's too.
pub fn card(agent: &Agent, base: &str, v03_fields: bool) -> Value {
    let settings = agent.settings();
    let name = settings
        .title
        .clone()
        .unwrap_or_else(|| settings.name.clone());
    let description = settings
        .description
        .clone()
        .unwrap_or_else(|| format!("The {} agent, hosted by agentry.", settings.name));
    let url = format!("{base}/a2a/{}", settings.name);
    let mut skills = vec![json!({
        "id": settings.name,
        "name": name,
        "description": description,
        "tags": ["chat"],
    })];
    skills.extend(agent.exposed_tools().map(|tool| {
        json!({
            "id": format!("tool:{}", tool.name),
            "name": tool.title.clone().unwrap_or_else(|| tool.name.clone()),
            "description": tool.description,
            "tags": ["tool"],
        })
    }));
    let mut card = json!({
        "name": name,
        "description": description,
        "version": settings.version,
        "supportedInterfaces": [
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
            {"url": url, "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
            {"url": url, "protocolBinding": "HTTP+JSON", "protocolVersion": "0.3"},
        ],
        "capabilities": {
            "streaming": true,
            "pushNotifications": true,
            "extendedAgentCard": true,
            "extensions": [
                {"uri": INPUT_EXTENSION, "required": false,
                 "description": "An input-required task's status message lists the calls it waits for \
                    (data part {\"toolCalls\": [{id, name, arguments, answer}]}); answer them on the same \
                    taskId with data parts {\"toolResult\": {toolCallId, content}} or \
                    {\"toolPermission\": {toolCallId, granted, reason?}}."},
                {"uri": REPLAY_EXTENSION, "required": false,
                 "description": "Every stream frame has an SSE id; SubscribeToTask with the Last-Event-ID \
                    header replays exactly the frames after it from the durable log, then continues live."},
            ],
        },
        "securitySchemes": {"bearer": {
            "httpAuthSecurityScheme": {"scheme": "Bearer", "bearerFormat": "JWT"},
        }},
        "securityRequirements": [{"schemes": {"bearer": {}}}],
        "defaultInputModes": input_modes(agent),
        "defaultOutputModes": output_modes(agent),
        "skills": skills,
    });
    if v03_fields {
        // 0.3's own fields, merged in as the official SDK's server does: its first 0.3
        // interface, the others, and 0.3's forms of security and of the extended card.
        let legacy = json!({
            "url": url,
            "preferredTransport": "JSONRPC",
            "protocolVersion": "0.3",
            "additionalInterfaces": [{"url": url, "transport": "HTTP+JSON"}],
            "security": [{"bearer": []}],
            "supportsAuthenticatedExtendedCard": true,
        });
        if let (Some(card), Value::Object(legacy)) = (card.as_object_mut(), legacy) {
            card.extend(legacy);
        }
        let bearer = &mut card["securitySchemes"]["bearer"];
        bearer["type"] = json!("http");
        bearer["scheme"] = json!("Bearer");
        bearer["bearerFormat"] = json!("JWT");
    }
    card
}

/// The card as a cacheable response: `ETag`, `Cache-Control`, and 304 to a match.
fn card_response(req: &HttpRequest, card: &Value) -> HttpResponse {
    let body = card.to_string();
    let etag = format!("\"{}\"", &crate::model::sha256_hex(body.as_bytes())[..32]);
    let matches = req
        .headers()
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*"));
    let mut response = if matches {
        HttpResponse::NotModified()
    } else {
        HttpResponse::Ok()
    };
    response
        .insert_header((header::ETAG, etag))
        .insert_header((header::CACHE_CONTROL, format!("max-age={CARD_MAX_AGE}")));
    if matches {
        return response.finish();
    }
    response.content_type("application/json").body(body)
}

/// The agent at `/a2a/{name}`: a configured one, or (for its tenant only) a tenant's own
/// published agent. Another tenant's agent is not found.
pub async fn agent_for(
    state: &AppState,
    tenant: Option<&crate::model::TenantId>,
    name: &str,
) -> Result<std::sync::Arc<Agent>, A2aError> {
    state
        .engine()
        .find_agent(tenant, name)
        .await?
        .ok_or_else(|| A2aError::Http(ApiError::not_found("agent")))
}

/// The agent's card.
#[utoipa::path(get, path = "/a2a/{agent}/.well-known/agent-card.json", tag = "A2A",
    params(("agent" = String, Path, description = "A configured agent's name")),
    responses(
        (status = 200, description = "The agent's card", body = crate::http::openapi::schemas::A2aObject,
            headers(("ETag" = String, description = "The card's version"))),
        (status = 304, description = "The card matches `If-None-Match`"),
        (status = 404, description = "No such agent", body = crate::http::openapi::schemas::A2aStatus),
    ))]
pub async fn get_agent_card(
    state: web::Data<AppState>,
    path: web::Path<String>,
    req: HttpRequest,
) -> Result<HttpResponse, A2aError> {
    // The public card names configured agents only: a tenant's agent's card is its
    // extended card (`GET /a2a/{agent}/extendedAgentCard` with the tenant's token).
    let agent = agent_for(&state, None, &path).await?;
    let base = crate::http::forwarded::base_url(&req, state.settings());
    Ok(card_response(
        &req,
        &card(&agent, &base, state.settings().a2a.card_v03_fields),
    ))
}

/// The default agent's card: `a2a.default_agent`, else the first configured agent. The
/// card is public, so an agent limited to some tenants is never it: the first agent every
/// caller sees is, instead.
#[utoipa::path(get, path = "/.well-known/agent-card.json", tag = "A2A",
    responses(
        (status = 200, description = "The default agent's card", body = crate::http::openapi::schemas::A2aObject,
            headers(("ETag" = String, description = "The card's version"))),
        (status = 304, description = "The card matches `If-None-Match`"),
        (status = 404, description = "No configured agent is public (every one is limited to some tenants)", body = crate::http::openapi::schemas::A2aStatus),
    ))]
pub async fn get_default_card(
    state: web::Data<AppState>,
    req: HttpRequest,
) -> Result<HttpResponse, A2aError> {
    let agents = state.agents();
    let public = |agent: &&std::sync::Arc<Agent>| agent.visible_to(None);
    let agent = agents
        .get(&state.settings().a2a.default_agent)
        .filter(public)
        .or_else(|| agents.iter().find(public))
        .cloned()
        .ok_or_else(|| A2aError::Http(ApiError::not_found("agent")))?;
    let base = crate::http::forwarded::base_url(&req, state.settings());
    Ok(card_response(
        &req,
        &card(&agent, &base, state.settings().a2a.card_v03_fields),
    ))
}
