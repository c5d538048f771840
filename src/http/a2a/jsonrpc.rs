//! The JSON-RPC 2.0 binding at `POST /a2a/{agent}`: 1.0 method names (`SendMessage`, which
//! need `A2A-Version: 1.0`) and 0.3's (`message/send`) on one endpoint. Results and A2A
//! errors answer HTTP 200; streams are SSE whose every `data` is a JSON-RPC response with
//! the request's id, and whose every event frame has an `id:`.

use actix_web::{HttpRequest, HttpResponse, ResponseError, web};
use futures_util::StreamExt;
use serde_json::{Value, json};

use super::error::{A2aError, Kind};
use super::ops::{Call, Frames, Reply};
use super::params::{self, Params};
use super::version::Version;
use super::{card, media, push, sse};
use crate::app::AppState;
use crate::http::TenantAuth;
use crate::http::error::ApiError;

/// A method: the operation, and the version whose names it uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Method {
    Send,
    Stream,
    Get,
    List,
    Cancel,
    Subscribe,
    PushCreate,
    PushGet,
    PushList,
    PushDelete,
    ExtendedCard,
}

fn method(name: &str) -> Option<(Method, Version)> {
    Some(match name {
        "SendMessage" => (Method::Send, Version::V1),
        "SendStreamingMessage" => (Method::Stream, Version::V1),
        "GetTask" => (Method::Get, Version::V1),
        "ListTasks" => (Method::List, Version::V1),
        "CancelTask" => (Method::Cancel, Version::V1),
        "SubscribeToTask" => (Method::Subscribe, Version::V1),
        "CreateTaskPushNotificationConfig" => (Method::PushCreate, Version::V1),
        "GetTaskPushNotificationConfig" => (Method::PushGet, Version::V1),
        "ListTaskPushNotificationConfigs" => (Method::PushList, Version::V1),
        "DeleteTaskPushNotificationConfig" => (Method::PushDelete, Version::V1),
        "GetExtendedAgentCard" => (Method::ExtendedCard, Version::V1),
        "message/send" => (Method::Send, Version::V03),
        "message/stream" => (Method::Stream, Version::V03),
        "tasks/get" => (Method::Get, Version::V03),
        "tasks/cancel" => (Method::Cancel, Version::V03),
        "tasks/resubscribe" => (Method::Subscribe, Version::V03),
        "tasks/pushNotificationConfig/set" => (Method::PushCreate, Version::V03),
        "tasks/pushNotificationConfig/get" => (Method::PushGet, Version::V03),
        "tasks/pushNotificationConfig/list" => (Method::PushList, Version::V03),
        "tasks/pushNotificationConfig/delete" => (Method::PushDelete, Version::V03),
        "agent/getAuthenticatedExtendedCard" => (Method::ExtendedCard, Version::V03),
        _ => return None,
    })
}

/// The largest request `id` (a string's bytes, a number's digits) answered with it: every
/// frame of a stream repeats the id, so a large one would multiply the response.
pub const MAX_ID_BYTES: usize = 256;

fn id_bytes(id: &Value) -> usize {
    match id {
        Value::String(s) => s.len(),
        Value::Number(n) => n.to_string().len(),
        _ => 0,
    }
}

fn rpc_result(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// An A2A error as a JSON-RPC response (HTTP 200), or the HTTP refusal A2A has no code for.
fn rpc_error(id: &Value, error: A2aError, version: Version) -> HttpResponse {
    match error.rpc_error(version) {
        Some(body) => HttpResponse::Ok().json(json!({"jsonrpc": "2.0", "id": id, "error": body})),
        None => error.error_response(),
    }
}

/// `POST /a2a/{agent}`: one JSON-RPC request.
#[utoipa::path(post, path = "/a2a/{agent}", tag = "A2A", operation_id = "a2a_json_rpc",
    security(("tenant" = [])),
    params(("agent" = String, Path, description = "A configured agent's name"),
        ("A2A-Version" = Option<String>, Header, description = "`1.0` or `0.3` (absent: 0.3); 1.0 method names need 1.0"),
        ("Last-Event-ID" = Option<String>, Header, description = "SubscribeToTask: replay the frames after this one")),
    request_body = crate::http::openapi::schemas::A2aObject,
    responses(
        (status = 200, description = "A JSON-RPC response (result or A2A error), as `application/a2a+json` when the request used that type; a request whose `Content-Type` is not JSON is -32005 (ContentTypeNotSupported); streaming methods answer SSE whose every `data` is one",
            content((crate::http::openapi::schemas::A2aObject = "application/json"), (crate::http::openapi::schemas::A2aStream = "text/event-stream"))),
        (status = 404, description = "No such agent", body = crate::http::openapi::schemas::A2aStatus),
        (status = 429, description = "A quota or the turn queue refused the request", body = crate::http::openapi::schemas::A2aStatus),
        (status = 503, description = "The server is shutting down", body = crate::http::openapi::schemas::A2aStatus),
    ))]
pub async fn json_rpc(
    auth: Result<TenantAuth, ApiError>,
    state: web::Data<AppState>,
    path: web::Path<String>,
    req: HttpRequest,
    body: Result<web::Bytes, actix_web::Error>,
) -> HttpResponse {
    let a2a_json = media::asks_a2a_json(&req);
    media::labelled(a2a_json, answer(auth, state, path, req, body).await)
}

async fn answer(
    auth: Result<TenantAuth, ApiError>,
    state: web::Data<AppState>,
    path: web::Path<String>,
    req: HttpRequest,
    body: Result<web::Bytes, actix_web::Error>,
) -> HttpResponse {
    let caller = auth.as_ref().ok().map(|a| a.tenant_id);
    let agent = match card::agent_for(&state, caller.as_ref(), &path).await {
        Ok(agent) => agent,
        Err(error) => return error.error_response(),
    };
    let tenant = match auth {
        Ok(auth) => auth.tenant_id,
        Err(error) => return A2aError::Http(error).error_response(),
    };
    let header_version = Version::of(&req);
    let body = match body {
        Ok(body) => body,
        Err(error) => {
            let status = error.as_response_error().status_code();
            let code = if status == actix_web::http::StatusCode::PAYLOAD_TOO_LARGE {
                crate::http::error::ErrorCode::PayloadTooLarge
            } else {
                crate::http::error::ErrorCode::InvalidJson
            };
            return A2aError::Http(ApiError::new(
                code,
                format!("cannot read the request body: {error}"),
            ))
            .error_response();
        }
    };
    if let Some(sent) = media::not_json(&req) {
        let id = serde_json::from_slice::<Value>(&body)
            .ok()
            .and_then(|request| request.get("id").cloned())
            .filter(|id| matches!(id, Value::String(_) | Value::Number(_)))
            .unwrap_or(Value::Null);
        let error = A2aError::new(
            Kind::ContentTypeNotSupported,
            format!(
                "Content-Type `{sent}` is not supported: a JSON-RPC request is \
                 `application/json` (or `application/a2a+json`)"
            ),
        );
        return rpc_error(&id, error, header_version.unwrap_or(Version::V03));
    }
    let request: Value = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(e) => {
            let error = A2aError::new(Kind::ParseError, format!("the body is not JSON: {e}"));
            return rpc_error(&Value::Null, error, header_version.unwrap_or(Version::V03));
        }
    };
    let id = request.get("id").cloned().unwrap_or(Value::Null);
    let version = header_version.as_ref().copied().unwrap_or(Version::V03);
    if id_bytes(&id) > MAX_ID_BYTES {
        let error = A2aError::new(
            Kind::InvalidRequest,
            format!("id: must be at most {MAX_ID_BYTES} bytes"),
        );
        return rpc_error(&Value::Null, error, version);
    }
    let valid_id = matches!(id, Value::Null | Value::String(_) | Value::Number(_));
    if request.get("jsonrpc") != Some(&json!("2.0")) || !valid_id {
        let error = A2aError::new(
            Kind::InvalidRequest,
            "a JSON-RPC 2.0 request: {\"jsonrpc\": \"2.0\", \"id\", \"method\", \"params\"}",
        );
        return rpc_error(&id, error, version);
    }
    let Some(name) = request.get("method").and_then(Value::as_str) else {
        return rpc_error(
            &id,
            A2aError::new(Kind::InvalidRequest, "method is required"),
            version,
        );
    };
    let Some((method, dialect)) = method(name) else {
        let error = A2aError::new(Kind::MethodNotFound, format!("method `{name}` not found"));
        return rpc_error(&id, error, version);
    };
    // 1.0 names need a 1.x version; 0.3 names are served as 0.3.
    let version = match (dialect, header_version) {
        (Version::V03 | Version::V03Rest, _) => Version::V03,
        (Version::V1, Ok(Version::V1)) => Version::V1,
        (Version::V1, Ok(Version::V03 | Version::V03Rest)) => {
            let raw = req
                .headers()
                .get(super::version::HEADER)
                .and_then(|v| v.to_str().ok());
            let error = A2aError::version_not_supported(raw.unwrap_or(""));
            return rpc_error(&id, error, Version::V1);
        }
        (Version::V1, Err(error)) => return rpc_error(&id, error, Version::V1),
    };
    let params = match params::object(request.get("params").cloned()) {
        Ok(params) => params,
        Err(error) => return rpc_error(&id, error, version),
    };
    let call = Call {
        state: state.clone(),
        tenant,
        agent,
        version,
    };
    let base = crate::http::forwarded::base_url(&req, state.settings());
    let reply = dispatch(&call, method, &params, &req, &base).await;
    match reply {
        Ok(Reply::Json(result)) => HttpResponse::Ok().json(rpc_result(&id, result)),
        Ok(Reply::Stream(frames)) => {
            let frames: Frames = frames
                .map(move |(frame, event)| (frame, rpc_result(&id, event)))
                .boxed_local();
            sse::response(&state, frames).await
        }
        Err(error) => rpc_error(&id, error, version),
    }
}

async fn dispatch(
    call: &Call,
    method: Method,
    params: &Params,
    req: &HttpRequest,
    base: &str,
) -> Result<Reply, A2aError> {
    let _version = call.version;
    Ok(match method {
        Method::Send => call.send_message(params, false).await?,
        Method::Stream => call.send_message(params, true).await?,
        Method::Get => Reply::Json(call.get_task(params).await?),
        Method::List => Reply::Json(call.list_tasks(params).await?),
        Method::Cancel => Reply::Json(call.cancel_task(params).await?),
        Method::Subscribe => Reply::Stream(call.subscribe(params, sse::last_event_id(req)?).await?),
        Method::PushCreate => Reply::Json(push::create(call, params.clone()).await?),
        Method::PushGet => Reply::Json(push::get(call, params).await?),
        Method::PushList => Reply::Json(push::list(call, params).await?),
        Method::PushDelete => Reply::Json(push::delete(call, params).await?),
        Method::ExtendedCard => {
            params::check_tenant(params, &call.tenant)?;
            Reply::Json(card::card(
                &call.agent,
                base,
                call.state.settings().a2a.card_v03_fields,
            ))
        }
    })
}

/// `POST /a2a/{agent}/`: the same endpoint, for clients that join paths with a slash.
#[utoipa::path(post, path = "/a2a/{agent}/", tag = "A2A", operation_id = "a2a_json_rpc_slash",
    security(("tenant" = [])),
    params(("agent" = String, Path, description = "A configured agent's name"),
        ("A2A-Version" = Option<String>, Header, description = "`1.0` or `0.3` (absent: 0.3)"),
        ("Last-Event-ID" = Option<String>, Header, description = "SubscribeToTask: replay the frames after this one")),
    request_body = crate::http::openapi::schemas::A2aObject,
    responses(
        (status = 200, description = "As `POST /a2a/{agent}`",
            content((crate::http::openapi::schemas::A2aObject = "application/json"), (crate::http::openapi::schemas::A2aStream = "text/event-stream"))),
        (status = 404, description = "No such agent", body = crate::http::openapi::schemas::A2aStatus),
    ))]
pub async fn json_rpc_slash(
    auth: Result<TenantAuth, ApiError>,
    state: web::Data<AppState>,
    path: web::Path<String>,
    req: HttpRequest,
    body: Result<web::Bytes, actix_web::Error>,
) -> HttpResponse {
    json_rpc(auth, state, path, req, body).await
}
