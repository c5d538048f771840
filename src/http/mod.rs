//! The HTTP surface: every route is listed here; handlers live beside their face.

mod a2a;
mod aap;
mod acp;
mod admin;
pub mod agents;
mod agentscope;
mod body;
mod caller;
mod console;
pub mod cors;
mod cursor;
mod docs;
pub mod error;
mod files;
pub mod forwarded;
mod frame_id;
mod history_page;
mod limits;
mod login;
mod observe;
pub mod openapi;
mod ops;
mod pagination;
pub mod ratelimit;
mod responses;
mod runs;
mod schedules;
mod sse;
pub mod streams;
pub mod trace_header;
mod usage;
mod webhooks;

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::StatusCode;
use actix_web::middleware::{ErrorHandlerResponse, ErrorHandlers};
use actix_web::{HttpMessage, HttpResponse, ResponseError, web};
use tracing::Span;
use tracing_actix_web::RootSpanBuilder;

use crate::config::Settings;
use crate::http::error::{ApiError, ErrorCode};

pub use body::{Query, parse_json, parse_optional_json};
pub use caller::{AdminAuth, TenantAuth, authenticate};
pub use limits::{MAX_HEADER_BYTES, request_limits};
pub use observe::{REQUEST_ID_HEADER, observe};

/// The response header that names the turn a streamed response belongs to.
pub const TURN_ID_HEADER: &str = "Agentry-Turn-Id";

/// Registers the webhook payload formats the faces render (A2A's push notifications).
pub fn register_payload_formats(webhooks: &crate::engine::Webhooks) {
    a2a::register_formats(webhooks);
}

/// Registers every route.
pub fn configure(cfg: &mut web::ServiceConfig, settings: &Settings) {
    let limit = settings.server.max_body_bytes;
    cfg.app_data(body::json_config(limit))
        .app_data(web::PayloadConfig::new(limit))
        .app_data(body::query_config())
        .app_data(body::path_config())
        // operations
        .service(web::resource("/healthz").get(ops::healthz))
        .service(web::resource("/readyz").get(ops::readyz))
        .service(web::resource("/metrics").get(ops::get_metrics))
        // the API description
        .service(web::resource("/openapi.json").get(docs::get_openapi))
        .service(web::resource("/").get(docs::get_index))
        .service(web::resource("/docs").get(docs::get_docs))
        .service(web::resource("/docs/").get(docs::redirect_to_docs))
        .service(web::resource("/docs/{asset}").get(docs::get_docs_asset))
        // authentication
        .service(web::resource("/auth/token").post(login::issue_token))
        // administration
        .service(
            web::scope("/admin")
                .service(
                    web::resource("/tenants")
                        .get(admin::tenants::list_tenants)
                        .post(admin::tenants::create_tenant),
                )
                .service(
                    web::resource("/tenants/{tenant_id}")
                        .get(admin::tenants::get_tenant)
                        .patch(admin::tenants::update_tenant)
                        .delete(admin::tenants::delete_tenant),
                )
                .service(
                    web::resource("/tenants/{tenant_id}/credentials")
                        .get(admin::credentials::list_credentials)
                        .post(admin::credentials::create_credential),
                )
                .service(
                    web::resource("/tenants/{tenant_id}/credentials/{client_id}")
                        .delete(admin::credentials::delete_credential),
                )
                .service(
                    web::resource("/tenants/{tenant_id}/tokens")
                        .get(admin::tokens::list_tokens)
                        .post(admin::tokens::issue_token),
                )
                .service(
                    web::resource("/tenants/{tenant_id}/tokens/{jti}")
                        .delete(admin::tokens::revoke_token),
                )
                .service(
                    web::resource("/tenants/{tenant_id}/quotas")
                        .get(admin::quotas::get_quotas)
                        .patch(admin::quotas::update_quotas),
                )
                                .service(web::resource("/tenants/{tenant_id}/usage").get(admin::usage::get_usage))
                .service(
                    web::resource("/tenants/{tenant_id}/agents")
                        .get(agents::routes::list_agents)
                        .post(agents::routes::create_agent),
                )
                .service(
                    web::resource("/tenants/{tenant_id}/agents/{name}")
                        .get(agents::routes::get_agent)
                        .put(agents::routes::update_agent)
                        .delete(agents::routes::delete_agent),
                )
                .service(
                    web::resource("/tenants/{tenant_id}/agents/{name}/versions")
                        .get(agents::routes::list_agent_versions),
                )
                .service(
                    web::resource("/tenants/{tenant_id}/agents/{name}/versions/{version}")
                        .get(agents::routes::get_agent_version),
                )
                .service(
                    web::resource("/tenants/{tenant_id}/agents/{name}/publish")
                        .post(agents::routes::publish_agent),
                )
                .service(
                    web::resource("/tenants/{tenant_id}/agents/{name}/archive")
                        .post(agents::routes::archive_agent),
                )
                .service(
                    web::resource("/tenants/{tenant_id}/agents/{name}/restore")
                        .post(agents::routes::restore_agent),
                )
                .service(
                    web::resource("/tenants/{tenant_id}/webhooks")
                        .get(admin::webhooks::list_webhooks)
                        .post(admin::webhooks::create_webhook),
                )
                .service(
                    web::resource("/tenants/{tenant_id}/webhooks/{endpoint_id}")
                        .get(admin::webhooks::get_webhook)
                        .patch(admin::webhooks::update_webhook)
                        .delete(admin::webhooks::delete_webhook),
                )
                .service(
                    web::resource("/tenants/{tenant_id}/webhooks/{endpoint_id}/rotate-secret")
                        .post(admin::webhooks::rotate_webhook_secret),
                )
                .service(
                    web::resource("/tenants/{tenant_id}/webhooks/{endpoint_id}/deliveries")
                        .get(admin::webhooks::list_webhook_deliveries),
                )
                .service(
                    web::resource(
                        "/tenants/{tenant_id}/webhooks/{endpoint_id}/deliveries/{message_id}/replay",
                    )
                    .post(admin::webhooks::replay_webhook_delivery),
                )
                .service(
                    web::resource("/tenants/{tenant_id}/schedules")
                        .get(admin::schedules::list_schedules)
                        .post(admin::schedules::create_schedule),
                )
                .service(
                    web::resource("/tenants/{tenant_id}/schedules/{schedule_id}")
                        .get(admin::schedules::get_schedule)
                        .patch(admin::schedules::update_schedule)
                        .delete(admin::schedules::delete_schedule),
                )
                .service(
                    web::resource("/tenants/{tenant_id}/schedules/{schedule_id}/run")
                        .post(admin::schedules::run_schedule),
                )
                .service(
                    web::resource("/tenants/{tenant_id}/schedules/{schedule_id}/runs")
                        .get(admin::schedules::list_schedule_runs),
                ),
        )
        // schedules, at the root
        .service(
            web::resource("/schedules")
                .get(schedules::list_schedules)
                .post(schedules::create_schedule),
        )
        .service(
            web::resource("/schedules/{schedule_id}")
                .get(schedules::get_schedule)
                .patch(schedules::update_schedule)
                .delete(schedules::delete_schedule),
        )
        .service(web::resource("/schedules/{schedule_id}/run").post(schedules::run_schedule))
        .service(
            web::resource("/schedules/{schedule_id}/runs").get(schedules::list_schedule_runs),
        )
        // webhooks, at the root
        .service(
            web::resource("/webhooks")
                .get(webhooks::list_webhooks)
                .post(webhooks::create_webhook),
        )
        .service(
            web::resource("/webhooks/{endpoint_id}")
                .get(webhooks::get_webhook)
                .patch(webhooks::update_webhook)
                .delete(webhooks::delete_webhook),
        )
        .service(
            web::resource("/webhooks/{endpoint_id}/rotate-secret")
                .post(webhooks::rotate_webhook_secret),
        )
        .service(
            web::resource("/webhooks/{endpoint_id}/deliveries")
                .get(webhooks::list_webhook_deliveries),
        )
        .service(
            web::resource("/webhooks/{endpoint_id}/deliveries/{message_id}/replay")
                .post(webhooks::replay_webhook_delivery),
        )
        // the tenant's own agents
        .service(
            web::resource("/agents")
                .get(agents::routes::list_agents)
                .post(agents::routes::create_agent),
        )
        .service(
            web::resource("/agents/{name}")
                .get(agents::routes::get_agent)
                .put(agents::routes::update_agent)
                .delete(agents::routes::delete_agent),
        )
        .service(web::resource("/agents/{name}/versions").get(agents::routes::list_agent_versions))
        .service(
            web::resource("/agents/{name}/versions/{version}")
                .get(agents::routes::get_agent_version),
        )
        .service(web::resource("/agents/{name}/publish").post(agents::routes::publish_agent))
        .service(web::resource("/agents/{name}/archive").post(agents::routes::archive_agent))
        .service(web::resource("/agents/{name}/restore").post(agents::routes::restore_agent))
        // AAP v3, at the root
        .service(web::resource("/meta").get(aap::meta::get_meta))
        .service(
            web::resource("/sessions")
                .get(aap::sessions::list_sessions)
                .post(aap::sessions::create_session),
        )
        .service(
            web::resource("/sessions/{session_id}")
                .get(aap::sessions::get_session)
                .patch(aap::sessions::update_session)
                .delete(aap::sessions::delete_session),
        )
        .service(web::resource("/sessions/{session_id}/history").get(aap::history::get_history))
        .service(web::resource("/sessions/{session_id}/parts").get(aap::parts::list_parts))
        .service(web::resource("/files/{file_id}").get(files::get_file))
        .service(
            web::resource("/sessions/{session_id}/turns")
                .get(aap::turns::list_turns)
                .post(aap::turns::post_turn),
        )
        .service(web::resource("/sessions/{session_id}/turns/{turn_id}").get(aap::turns::get_turn))
        .service(
            web::resource("/sessions/{session_id}/turns/{turn_id}/events")
                .get(aap::turns::turn_events),
        )
        .service(
            web::resource("/sessions/{session_id}/turns/{turn_id}/cancel")
                .post(aap::turns::cancel_turn),
        )
        .service(web::resource("/sessions/{session_id}/events").get(aap::events::session_events))
        .service(
            web::resource("/sessions/{session_id}/turns/{turn_id}/log").get(aap::log::get_turn_log),
        )
        // the tenant's runs (ACP runs, A2A tasks), usage and quotas
        .service(web::resource("/runs").get(runs::list_runs))
        .service(web::resource("/usage").get(usage::get_usage))
        .service(web::resource("/quotas").get(usage::get_quotas))
        // the browser console, where `[console]` puts it
        .configure(|cfg| console::configure(cfg, &settings.console))
        // The AgentScope Runtime Agent API
        .service(
            web::scope("/agentscope")
                .service(web::resource("/process").post(agentscope::process::process))
                .service(
                    web::resource("/agents/{agent}/process")
                        .post(agentscope::process::process_with_agent),
                )
                .service(
                    web::resource("/responses/{response_id}/events")
                        .get(agentscope::process::response_events),
                )
                .service(
                    web::resource("/sessions/{session_id}/messages")
                        .get(agentscope::process::session_messages),
                )
                .service(web::resource("/health").get(agentscope::process::health)),
        )
        // the OpenAI Responses API (Open Responses)
        .service(
            web::scope("/v1")
                .service(
                    web::resource("/responses")
                        .post(responses::create::create_response)
                        .default_service(web::to(responses::error::method_not_allowed)),
                )
                .service(
                    web::resource("/responses/{response_id}")
                        .get(responses::read::get_response)
                        .delete(responses::manage::delete_response)
                        .default_service(web::to(responses::error::method_not_allowed)),
                )
                .service(
                    web::resource("/responses/{response_id}/cancel")
                        .post(responses::manage::cancel_response)
                        .default_service(web::to(responses::error::method_not_allowed)),
                )
                .service(
                    web::resource("/responses/{response_id}/input_items")
                        .get(responses::input_items::list_input_items)
                        .default_service(web::to(responses::error::method_not_allowed)),
                )
                .service(
                    web::resource("/conversations")
                        .post(responses::conversations::create_conversation)
                        .default_service(web::to(responses::error::method_not_allowed)),
                )
                .service(
                    web::resource("/conversations/{conversation_id}")
                        .get(responses::conversations::get_conversation)
                        .post(responses::conversations::update_conversation)
                        .delete(responses::conversations::delete_conversation)
                        .default_service(web::to(responses::error::method_not_allowed)),
                )
                .service(
                    web::resource("/conversations/{conversation_id}/items")
                        .get(responses::conversation_items::list_items)
                        .post(responses::conversation_items::create_items)
                        .default_service(web::to(responses::error::method_not_allowed)),
                )
                .service(
                    web::resource("/conversations/{conversation_id}/items/{item_id}")
                        .get(responses::conversation_items::get_item)
                        .delete(responses::conversation_items::delete_item)
                        .default_service(web::to(responses::error::method_not_allowed)),
                )
                .service(
                    web::resource("/chat/completions")
                        .post(responses::chat::create_chat_completion)
                        .default_service(web::to(responses::error::method_not_allowed)),
                )
                .service(
                    web::resource("/models")
                        .get(responses::models::list_models)
                        .default_service(web::to(responses::error::method_not_allowed)),
                )
                .service(
                    web::resource("/models/{model}")
                        .get(responses::models::get_model)
                        .default_service(web::to(responses::error::method_not_allowed)),
                )
                .default_service(web::to(responses::error::not_found)),
        )
        // ACP (BeeAI Agent Communication Protocol)
        .service(
            web::scope("/acp")
                .service(acp_resource("/ping").get(acp::agents::ping))
                .service(acp_resource("/agents").get(acp::agents::list_agents))
                .service(acp_resource("/agents/{name}").get(acp::agents::get_agent))
                .service(acp_resource("/runs").post(acp::runs::create_run))
                .service(
                    acp_resource("/runs/{run_id}")
                        .get(acp::runs::get_run)
                        .post(acp::resume::resume_run),
                )
                .service(acp_resource("/runs/{run_id}/cancel").post(acp::cancel::cancel_run))
                .service(acp_resource("/runs/{run_id}/events").get(acp::events::run_events))
                .service(acp_resource("/sessions/{session_id}").get(acp::sessions::get_session))
                .service(
                    acp_resource("/sessions/{session_id}/history/{position}")
                        .get(acp::sessions::get_history_message),
                )
                .default_service(web::to(acp::not_found)),
        )
        // A2A (Agent2Agent, 1.0 and 0.3): JSON-RPC at the agent's URL, HTTP+JSON under it
        .service(web::resource("/.well-known/agent-card.json").get(a2a::card::get_default_card))
        .service(
            web::scope("/a2a/{agent}")
                .service(web::resource("").post(a2a::jsonrpc::json_rpc))
                .service(web::resource("/").post(a2a::jsonrpc::json_rpc_slash))
                .service(
                    web::resource("/.well-known/agent-card.json").get(a2a::card::get_agent_card),
                )
                .service(web::resource("/message:send").post(a2a::rest::send_message))
                .service(web::resource("/message:stream").post(a2a::rest::stream_message))
                .service(web::resource("/tasks").get(a2a::rest::list_tasks))
                .service(web::resource("/tasks/{id}:cancel").post(a2a::rest::cancel_task))
                .service(
                    web::resource("/tasks/{id}:subscribe")
                        .post(a2a::rest::subscribe_task)
                        .get(a2a::rest::subscribe_task_get),
                )
                .service(web::resource("/tasks/{id}").get(a2a::rest::get_task))
                .service(
                    web::resource("/tasks/{id}/pushNotificationConfigs")
                        .post(a2a::rest::create_push_config)
                        .get(a2a::rest::list_push_configs),
                )
                .service(
                    web::resource("/tasks/{id}/pushNotificationConfigs/{config_id}")
                        .get(a2a::rest::get_push_config)
                        .delete(a2a::rest::delete_push_config),
                )
                .service(web::resource("/extendedAgentCard").get(a2a::rest::get_extended_card))
                .service(web::resource("/v1/message:send").post(a2a::rest::send_message))
                .service(web::resource("/v1/message:stream").post(a2a::rest::stream_message))
                .service(web::resource("/v1/tasks").get(a2a::rest::list_tasks))
                .service(web::resource("/v1/tasks/{id}:cancel").post(a2a::rest::cancel_task))
                .service(
                    web::resource("/v1/tasks/{id}:subscribe")
                        .post(a2a::rest::subscribe_task)
                        .get(a2a::rest::subscribe_task_get),
                )
                .service(web::resource("/v1/tasks/{id}").get(a2a::rest::get_task))
                .service(
                    web::resource("/v1/tasks/{id}/pushNotificationConfigs")
                        .post(a2a::rest::create_push_config)
                        .get(a2a::rest::list_push_configs),
                )
                .service(
                    web::resource("/v1/tasks/{id}/pushNotificationConfigs/{config_id}")
                        .get(a2a::rest::get_push_config)
                        .delete(a2a::rest::delete_push_config),
                )
                .service(web::resource("/v1/card").get(a2a::rest::get_extended_card)),
        )
        .default_service(web::to(not_found));
}

/// An `/acp` resource: other methods get ACP's error body.
fn acp_resource(path: &str) -> actix_web::Resource {
    web::resource(path).default_service(web::to(acp::method_not_allowed))
}

async fn not_found() -> Result<HttpResponse, ApiError> {
    Err(ApiError::new(ErrorCode::NotFound, "no such route"))
}

/// Turns rejections produced outside our handlers (405, 413 from the payload extractor,
/// …) into the same JSON error body as everything else.
pub fn error_handlers<B: MessageBody + 'static>() -> ErrorHandlers<B> {
    ErrorHandlers::new().default_handler(|response: ServiceResponse<B>| {
        let is_json = response
            .headers()
            .get(actix_web::http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(crate::model::media_type)
            .is_some_and(|t| t == "application/json" || t.ends_with("+json"));
        if is_json {
            return Ok(ErrorHandlerResponse::Response(
                response.map_into_left_body(),
            ));
        }
        let status = response.status();
        let error = match status {
            StatusCode::METHOD_NOT_ALLOWED => ApiError::new(
                ErrorCode::MethodNotAllowed,
                "method not allowed on this route",
            ),
            StatusCode::PAYLOAD_TOO_LARGE => {
                ApiError::new(ErrorCode::PayloadTooLarge, "request body is too large")
            }
            StatusCode::NOT_FOUND => ApiError::new(ErrorCode::NotFound, "not found"),
            s if s.is_client_error() => ApiError::new(
                ErrorCode::InvalidRequest,
                s.canonical_reason().unwrap_or("bad request"),
            ),
            _ => ApiError::new(ErrorCode::Internal, "internal error"),
        };
        let (request, _) = response.into_parts();
        let mut replacement: HttpResponse<BoxBody> = error.error_response();
        *replacement.status_mut() = status;
        Ok(ErrorHandlerResponse::Response(
            ServiceResponse::new(request, replacement).map_into_right_body::<B>(),
        ))
    })
}

/// Registers the routes of the metrics listener (`metrics.bind`): `/metrics` alone.
pub fn configure_metrics(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/metrics").get(ops::serve_metrics))
        .default_service(web::to(not_found));
}

/// The longest client request id (`X-Request-Id`) the logs keep.
const MAX_CLIENT_REQUEST_ID: usize = 128;

/// The request span: the request's id (the `Agentry-Request-Id` response header), method,
/// route, status, the error's code and message when it failed, and, once known, the tenant,
/// session and turn; a client's own `X-Request-Id` (visible ASCII, at most 128 characters)
/// as `client_request_id`. Nothing else: one short line per request.
pub struct RequestSpan;

impl RootSpanBuilder for RequestSpan {
    fn on_request_start(request: &ServiceRequest) -> Span {
        let request_id = request
            .extensions()
            .get::<tracing_actix_web::RequestId>()
            .map(ToString::to_string)
            .unwrap_or_default();
        let route = observe::route_of(request);
        let span = tracing::info_span!(
            "request",
            method = %request.method(),
            route = %route.as_deref().unwrap_or("unmatched"),
            request_id = %request_id,
            tenant_id = tracing::field::Empty,
            session_id = tracing::field::Empty,
            turn_id = tracing::field::Empty,
            client_request_id = tracing::field::Empty,
            status = tracing::field::Empty,
            error = tracing::field::Empty,
            otel.name = tracing::field::Empty,
            otel.kind = tracing::field::Empty,
        );
        // Exported traces name the span by its route; logs without traces stay as they are.
        if crate::traces::enabled() {
            // A trusted caller's trace continues here (README "Tracing").
            if let Some(parent) = request
                .headers()
                .get("traceparent")
                .and_then(|v| v.to_str().ok())
                .filter(|_| {
                    crate::traces::trusts_traceparent(
                        request.headers().contains_key("authorization"),
                    )
                })
            {
                crate::traces::set_parent(&span, parent);
            }
            let route = route.as_deref().unwrap_or("unmatched");
            span.record("otel.name", format!("{} {route}", request.method()));
            span.record("otel.kind", "server");
            crate::traces::set_string(&span, "http.request.method", request.method().to_string());
            crate::traces::set_string(&span, "http.route", route.to_owned());
        }
        let client_id = request
            .headers()
            .get("x-request-id")
            .and_then(|v| v.to_str().ok())
            .filter(|id| {
                !id.is_empty()
                    && id.len() <= MAX_CLIENT_REQUEST_ID
                    && id.bytes().all(|b| b.is_ascii_graphic())
            });
        if let Some(id) = client_id {
            span.record("client_request_id", id);
        }
        span
    }

    fn on_request_end<B: MessageBody>(
        span: Span,
        outcome: &Result<ServiceResponse<B>, actix_web::Error>,
    ) {
        let (status, error) = match outcome {
            Ok(response) => (
                response.status(),
                response.response().error().map(ToString::to_string),
            ),
            Err(error) => (
                error.as_response_error().status_code(),
                Some(error.to_string()),
            ),
        };
        span.record("status", status.as_u16());
        if crate::traces::enabled() {
            use tracing_opentelemetry::OpenTelemetrySpanExt;
            span.set_attribute("http.response.status_code", i64::from(status.as_u16()));
        }
        if let Some(error) = error {
            span.record("error", error);
        }
    }
}
