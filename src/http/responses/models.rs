//! `GET /v1/models` and `GET /v1/models/{model}`: the agents the caller may use, as models
//! (a configured agent, or the tenant's own published one). `created` is 0: a model here
//! is an agent's name, whose versions have their own times (`GET /agents`).

use actix_web::{HttpResponse, web};
use serde_json::{Value, json};

use super::create::model_not_found;
use super::error::{ErrorBody, OpenAiError};
use super::parse::parse_model;
use crate::app::AppState;
use crate::http::TenantAuth;
use crate::http::error::ApiError;

fn model(name: &str) -> Value {
    json!({"id": name, "object": "model", "created": 0, "owned_by": "agentry"})
}

#[utoipa::path(get, path = "/v1/models", tag = "OpenAI", operation_id = "openai_list_models",
    security(("tenant" = [])),
    responses(
        (status = 200, description = "`{object: \"list\", data: [{id, object: \"model\", created, owned_by}]}`",
            body = crate::http::openapi::openai_schemas::OpenAiModelList),
    ))]
pub async fn list_models(
    auth: Result<TenantAuth, ApiError>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, OpenAiError> {
    let tenant = auth?.tenant_id;
    let agents = state.engine().visible_agents(Some(&tenant)).await?;
    let data: Vec<Value> = agents.iter().map(|agent| model(agent.name())).collect();
    Ok(HttpResponse::Ok().json(json!({"object": "list", "data": data})))
}

#[utoipa::path(get, path = "/v1/models/{model}", tag = "OpenAI", operation_id = "openai_get_model",
    security(("tenant" = [])),
    params(("model" = String, Path, description = "An agent's name (or `name@version`)")),
    responses(
        (status = 200, description = "The model", body = crate::http::openapi::openai_schemas::OpenAiModel),
        (status = 400, description = "The name is not a model name", body = ErrorBody),
        (status = 404, description = "No such agent for this tenant", body = ErrorBody),
    ))]
pub async fn get_model(
    auth: Result<TenantAuth, ApiError>,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, OpenAiError> {
    let tenant = auth?.tenant_id;
    let (name, _) = parse_model(&path)?;
    let engine = state.engine();
    let agent = engine
        .find_agent(Some(&tenant), &name)
        .await?
        .ok_or_else(|| model_not_found(&path, &engine.agents_listed(Some(&tenant))))?;
    Ok(HttpResponse::Ok().json(model(agent.name())))
}
