//! The OpenAPI 3.1 description of every route, generated from the code and served at
//! `GET /openapi.json`.
//!
//! To describe a route (every route registered in `http/mod.rs` must be, and
//! `tests/api/openapi.rs` fails otherwise):
//! 1. Put `#[utoipa::path(...)]` on its handler with the method, the full `path` as the
//!    client sees it (scope prefix included, `{name}` placeholders as registered), `tag` (the
//!    face: `AAP`, `AgentScope`, `ACP`, `admin`, `authentication`, `operations`,
//!    `documentation`), a unique `operation_id` when the handler's name is not unique,
//!    `security(("tenant" = []))` or `security(("admin" = []))` (none for public routes),
//!    `params(...)` (path, query via an `IntoParams` type, and headers such as
//!    `Idempotency-Key` and `Last-Event-ID`), `request_body` (the type the handler really
//!    parses, even when it reads raw JSON: a schema of `openapi/schemas.rs` if no Rust type
//!    carries it) and `responses(...)` with every status the handler itself answers, their
//!    bodies (`schemas::ErrorBody` for agentry's errors, the face's own error type on ACP),
//!    response headers (`Agentry-Turn-Id`, `Location`, `Retry-After`) and, for streams,
//!    `content_type = "text/event-stream"` with the schema of one frame.
//! 2. Derive `utoipa::ToSchema` on the wire types it uses (`#[schema(as = …)]` when another
//!    face has a type of the same name).
//! 3. Add the handler to `paths(...)` of [`ApiDoc`] below.
//!
//! [`Conventions`] then adds what every route of a kind answers, so handlers do not repeat
//! it: 401 and 403 on authenticated routes and 413 on routes with a body, in the error
//! shape of the route's face.

pub mod openai_schemas;
pub mod schedule_schemas;
pub mod schemas;

use std::sync::LazyLock;

use actix_web::HttpResponse;
use utoipa::openapi::path::Operation;
use utoipa::openapi::schema::{AnyOf, Schema};
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::openapi::{Content, RefOr, ResponseBuilder};
use utoipa::{Modify, OpenApi, PartialSchema, ToSchema};

use super::{
    a2a, aap, acp, admin, agents, agentscope, docs, files, login, ops, responses, runs, schedules,
    usage, webhooks,
};

/// Untagged enums whose variants can describe the same value (a variant of optional
/// fields, or of any JSON): `anyOf`, since the value is whichever fits first.
const OVERLAPPING: &[&str] = &[
    "AgentScopeContentBody",
    "AcpPartMetadata",
    "AgentScopeEvent",
];

/// The security scheme of tenant tokens.
pub const TENANT: &str = "tenant";
/// The security scheme of the admin token.
pub const ADMIN: &str = "admin";
/// The security scheme of `metrics.bearer_token`.
pub const METRICS: &str = "metrics";

#[derive(OpenApi)]
#[openapi(
    info(
        title = "agentry",
        description = "A self-hosted, persistent, multi-tenant agent platform. One set of \
            sessions speaks AAP v3 (at the root), the AgentScope Agent API (`/agentscope`), \
            ACP (`/acp`) and A2A 1.0 and 0.3 (`/a2a/{agent}`, its card at \
            `/a2a/{agent}/.well-known/agent-card.json`); `/admin` administers tenants.",
    ),
    paths(
        ops::healthz,
        ops::readyz,
        ops::get_metrics,
        login::issue_token,
        docs::get_index,
        docs::get_openapi,
        docs::get_docs,
        docs::redirect_to_docs,
        docs::get_docs_asset,
        admin::tenants::list_tenants,
        admin::tenants::create_tenant,
        admin::tenants::get_tenant,
        admin::tenants::update_tenant,
        admin::tenants::delete_tenant,
        admin::credentials::list_credentials,
        admin::credentials::create_credential,
        admin::credentials::delete_credential,
        admin::tokens::list_tokens,
        admin::tokens::issue_token,
        admin::tokens::revoke_token,
        admin::usage::get_usage,
        admin::quotas::get_quotas,
        admin::quotas::update_quotas,
        admin::webhooks::create_webhook,
        admin::webhooks::list_webhooks,
        admin::webhooks::get_webhook,
        admin::webhooks::update_webhook,
        admin::webhooks::delete_webhook,
        admin::webhooks::rotate_webhook_secret,
        admin::webhooks::list_webhook_deliveries,
        admin::webhooks::replay_webhook_delivery,
        webhooks::create_webhook,
        webhooks::list_webhooks,
        webhooks::get_webhook,
        webhooks::update_webhook,
        webhooks::delete_webhook,
        webhooks::rotate_webhook_secret,
        webhooks::list_webhook_deliveries,
        webhooks::replay_webhook_delivery,
        admin::schedules::create_schedule,
        admin::schedules::list_schedules,
        admin::schedules::get_schedule,
        admin::schedules::update_schedule,
        admin::schedules::delete_schedule,
        admin::schedules::run_schedule,
        admin::schedules::list_schedule_runs,
        schedules::create_schedule,
        schedules::list_schedules,
        schedules::get_schedule,
        schedules::update_schedule,
        schedules::delete_schedule,
        schedules::run_schedule,
        schedules::list_schedule_runs,
        agents::routes::create_agent,
        agents::routes::list_agents,
        agents::routes::get_agent,
        agents::routes::update_agent,
        agents::routes::delete_agent,
        agents::routes::list_agent_versions,
        agents::routes::get_agent_version,
        agents::routes::publish_agent,
        agents::routes::archive_agent,
        agents::routes::restore_agent,
        agents::admin::create_agent,
        agents::admin::list_agents,
        agents::admin::get_agent,
        agents::admin::update_agent,
        agents::admin::delete_agent,
        agents::admin::list_agent_versions,
        agents::admin::get_agent_version,
        agents::admin::publish_agent,
        agents::admin::archive_agent,
        agents::admin::restore_agent,
        aap::meta::get_meta,
        aap::sessions::list_sessions,
        aap::sessions::create_session,
        aap::sessions::get_session,
        aap::sessions::update_session,
        aap::sessions::delete_session,
        aap::history::get_history,
        aap::parts::list_parts,
        files::get_file,
        aap::turns::list_turns,
        aap::turns::post_turn,
        aap::turns::get_turn,
        aap::turns::turn_events,
        aap::turns::cancel_turn,
        aap::events::session_events,
        aap::log::get_turn_log,
        runs::list_runs,
        usage::get_usage,
        usage::get_quotas,
        agentscope::process::process,
        agentscope::process::process_with_agent,
        agentscope::process::response_events,
        agentscope::process::session_messages,
        agentscope::process::health,
        acp::agents::ping,
        acp::agents::list_agents,
        acp::agents::get_agent,
        acp::runs::create_run,
        acp::runs::get_run,
        acp::resume::resume_run,
        acp::cancel::cancel_run,
        acp::events::run_events,
        acp::sessions::get_session,
        acp::sessions::get_history_message,
        a2a::card::get_default_card,
        a2a::card::get_agent_card,
        a2a::jsonrpc::json_rpc,
        a2a::jsonrpc::json_rpc_slash,
        a2a::rest::send_message,
        a2a::rest::stream_message,
        a2a::rest::list_tasks,
        a2a::rest::get_task,
        a2a::rest::cancel_task,
        a2a::rest::subscribe_task,
        a2a::rest::subscribe_task_get,
        a2a::rest::create_push_config,
        a2a::rest::list_push_configs,
        a2a::rest::get_push_config,
        a2a::rest::delete_push_config,
        a2a::rest::get_extended_card,
        responses::create::create_response,
        responses::read::get_response,
        responses::manage::cancel_response,
        responses::manage::delete_response,
        responses::input_items::list_input_items,
        responses::chat::create_chat_completion,
        responses::models::list_models,
        responses::models::get_model,
        responses::conversations::create_conversation,
        responses::conversations::get_conversation,
        responses::conversations::update_conversation,
        responses::conversation_items::create_items,
        responses::conversation_items::delete_item,
        responses::conversations::delete_conversation,
        responses::conversation_items::list_items,
        responses::conversation_items::get_item,
    ),
    components(schemas(schemas::ErrorBody, acp::wire::ErrorObject, responses::error::ErrorBody,
        openai_schemas::OpenAiMcpApprovalRequest, openai_schemas::OpenAiMcpApprovalResponse)),
    modifiers(&Conventions),
    tags(
        (name = "AAP", description = "Agent Application Protocol v3, with agentry's extensions (turn records, events, cancel, idempotency)"),
        (name = "AgentScope", description = "The AgentScope Runtime Agent API"),
        (name = "ACP", description = "The Agent Communication Protocol; errors are `{code, message, data}`"),
        (name = "A2A", description = "The Agent2Agent protocol, 1.0 and 0.3: JSON-RPC at `/a2a/{agent}`, HTTP+JSON under it (0.3's under `/a2a/{agent}/v1`); REST errors are `google.rpc.Status` bodies"),
        (name = "OpenAI", description = "The OpenAI Responses API (Open Responses) and Chat Completions under `/v1`: a response or a chat completion is a turn, a conversation a session; errors are `{\"error\": {message, type, param, code}}`"),
        (name = "agents", description = "A tenant's own agents: immutable versions, publish, rollback, archive; sessions pin the version they were opened on"),
        (name = "tenant", description = "The calling tenant's own usage and quotas"),
        (name = "admin", description = "Tenants, their credentials and API tokens, usage"),
        (name = "schedules", description = "A tenant's schedules: agents started on cron expressions in a time zone, each occurrence at most once, with run history"),
        (name = "webhooks", description = "A tenant's webhook endpoints (Standard Webhooks signatures), their deliveries and replays"),
        (name = "authentication", description = "Tenant tokens from client credentials"),
        (name = "operations", description = "Liveness, readiness and Prometheus metrics"),
        (name = "documentation", description = "This document and its browsable page"),
    ),
)]
pub struct ApiDoc;

/// The document as served: built once.
pub fn document() -> &'static str {
    static JSON: LazyLock<String> = LazyLock::new(|| {
        ApiDoc::openapi()
            .to_json()
            .expect("the OpenAPI document serializes")
    });
    &JSON
}

pub fn json_response() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("application/json")
        .body(document())
}

/// A2A 0.3's HTTP+JSON paths: 1.0's under `/v1` (the extended card at `/v1/card`), served
/// by the same handlers, which answer them in 0.3's shapes.
fn a2a_v03_paths(openapi: &mut utoipa::openapi::OpenApi) {
    const PREFIX: &str = "/a2a/{agent}/";
    let copies: Vec<(String, utoipa::openapi::PathItem)> = openapi
        .paths
        .paths
        .iter()
        .filter_map(|(path, item)| {
            let rest = path.strip_prefix(PREFIX)?;
            if rest.is_empty() || rest.starts_with(".well-known") {
                return None;
            }
            let rest = if rest == "extendedAgentCard" {
                "card"
            } else {
                rest
            };
            let mut item = item.clone();
            for operation in operations(&mut item) {
                if let Some(id) = &mut operation.operation_id {
                    id.push_str("_v0_3");
                }
                operation.summary = Some(format!(
                    "{} (A2A 0.3)",
                    operation.summary.clone().unwrap_or_default()
                ));
            }
            Some((format!("{PREFIX}v1/{rest}"), item))
        })
        .collect();
    openapi.paths.paths.extend(copies);
}

/// Security schemes, and the responses every route of a kind shares.
struct Conventions;

impl Modify for Conventions {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            TENANT,
            SecurityScheme::Http(
                Http::builder()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("JWT")
                    .description(Some(
                        "A tenant token: from `POST /auth/token` (client credentials) or \
                         an API token an admin issued",
                    ))
                    .build(),
            ),
        );
        components.add_security_scheme(
            ADMIN,
            SecurityScheme::Http(
                Http::builder()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("JWT")
                    .description(Some("The admin token (`agentry admin-token`)"))
                    .build(),
            ),
        );
        components.add_security_scheme(
            METRICS,
            SecurityScheme::Http(
                Http::builder()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "`metrics.bearer_token`, when the operator set one; else `/metrics` \
                         needs none",
                    ))
                    .build(),
            ),
        );
        for name in OVERLAPPING {
            if let Some(RefOr::T(Schema::OneOf(one_of))) = components.schemas.get_mut(*name) {
                let mut any_of = AnyOf::new();
                any_of.items = std::mem::take(&mut one_of.items);
                any_of.description = one_of.description.take();
                components
                    .schemas
                    .insert((*name).to_owned(), RefOr::T(Schema::AnyOf(any_of)));
            }
        }
        a2a_v03_paths(openapi);
        for (path, item) in openapi.paths.paths.iter_mut() {
            let error = if path.starts_with("/acp/") {
                schema_ref::<acp::wire::ErrorObject>()
            } else if path.starts_with("/v1/") {
                schema_ref::<responses::error::ErrorBody>()
            } else if path.starts_with("/a2a/") || path.starts_with("/.well-known/") {
                schema_ref::<schemas::A2aStatus>()
            } else {
                schema_ref::<schemas::ErrorBody>()
            };
            for operation in operations(item) {
                optional_parameters_are_absent(operation);
                let secured = operation.security.as_ref().is_some_and(|requirements| {
                    requirements.iter().any(|r| {
                        let value = serde_json::to_value(r).unwrap_or_default();
                        value.get(TENANT).is_some() || value.get(ADMIN).is_some()
                    })
                });
                if secured {
                    add_error(
                        operation,
                        "401",
                        "No bearer token, or one that is invalid, expired or revoked",
                        &error,
                        true,
                    );
                    add_error(
                        operation,
                        "403",
                        "A token of the wrong kind (tenant or admin), or a suspended tenant",
                        &error,
                        false,
                    );
                }
                let tenant = operation.security.as_ref().is_some_and(|requirements| {
                    requirements.iter().any(|r| {
                        let value = serde_json::to_value(r).unwrap_or_default();
                        value.get(TENANT).is_some()
                    })
                });
                if tenant {
                    add_quota_refusal(operation, &error);
                }
                if operation.request_body.is_some() {
                    add_error(
                        operation,
                        "413",
                        "The body is larger than `server.max_body_bytes`",
                        &error,
                        false,
                    );
                }
            }
        }
    }
}

/// An optional query or header parameter is left out, never sent as `null`: its schema
/// names the type alone.
fn optional_parameters_are_absent(operation: &mut Operation) {
    use utoipa::openapi::schema::{SchemaType, Type};
    for parameter in operation.parameters.iter_mut().flatten() {
        if let RefOr::T(parameter) = parameter
            && let Some(RefOr::T(Schema::Object(object))) = parameter.schema.as_mut()
            && let SchemaType::Array(types) = &object.schema_type
        {
            let types: Vec<Type> = types
                .iter()
                .filter(|t| **t != Type::Null)
                .cloned()
                .collect();
            if let [only] = types.as_slice() {
                object.schema_type = SchemaType::Type(only.clone());
            }
        }
    }
}

fn schema_ref<T: ToSchema>() -> RefOr<utoipa::openapi::schema::Schema> {
    RefOr::Ref(utoipa::openapi::Ref::from_schema_name(T::name()))
}

fn operations(item: &mut utoipa::openapi::PathItem) -> impl Iterator<Item = &mut Operation> {
    [
        item.get.as_mut(),
        item.put.as_mut(),
        item.post.as_mut(),
        item.delete.as_mut(),
        item.options.as_mut(),
        item.head.as_mut(),
        item.patch.as_mut(),
        item.trace.as_mut(),
    ]
    .into_iter()
    .flatten()
}

/// A tenant's quota refused the request (see the Quotas section of the README): `429
/// quota_exceeded` naming it, with `Retry-After` and the RateLimit headers.
fn add_quota_refusal(operation: &mut Operation, schema: &RefOr<utoipa::openapi::schema::Schema>) {
    if operation.responses.responses.contains_key("429") {
        return;
    }
    let header = |description: &str| {
        utoipa::openapi::HeaderBuilder::new()
            .schema(Some(String::schema()))
            .description(Some(description.to_owned()))
            .build()
    };
    let response = ResponseBuilder::new()
        .description("A tenant quota is used up (`quota_exceeded`, naming the quota)")
        .content("application/json", Content::new(Some(schema.clone())))
        .header(
            "Retry-After",
            header("Seconds until the quota may admit again"),
        )
        .header(
            "RateLimit-Policy",
            header("The quota that refused: `\"name\";q=LIMIT[;w=WINDOW]`"),
        )
        .header("RateLimit", header("`\"name\";r=0;t=SECONDS`"));
    operation
        .responses
        .responses
        .insert("429".to_owned(), response.build().into());
}

fn add_error(
    operation: &mut Operation,
    status: &str,
    description: &str,
    schema: &RefOr<utoipa::openapi::schema::Schema>,
    challenge: bool,
) {
    if operation.responses.responses.contains_key(status) {
        return;
    }
    let mut response = ResponseBuilder::new()
        .description(description)
        .content("application/json", Content::new(Some(schema.clone())));
    if challenge {
        response = response.header(
            "WWW-Authenticate",
            utoipa::openapi::HeaderBuilder::new()
                .schema(Some(String::schema()))
                .description(Some("`Bearer`"))
                .build(),
        );
    }
    operation
        .responses
        .responses
        .insert(status.to_owned(), response.build().into());
}
