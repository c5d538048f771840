//! The HTTP+JSON binding under `/a2a/{agent}`: 1.0's paths (`/message:send`,
//! `/tasks/{id}`, …; the version from `A2A-Version`, absent meaning 0.3's shapes) and 0.3's
//! under `/v1`. Bodies are the operation's request without its path fields; GET parameters
//! come from the query. Errors are `google.rpc.Status` bodies with their HTTP status.

use actix_web::{HttpRequest, HttpResponse, ResponseError, web};
use serde_json::{Map, Value};

use super::error::A2aError;
use super::ops::{Call, Reply};
use super::params::{self, Params};
use super::version::Version;
use super::{card, media, push, sse};
use crate::app::AppState;
use crate::http::TenantAuth;
use crate::http::error::ApiError;
use crate::http::openapi::schemas as doc;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Send,
    Stream,
    List,
    Get,
    Cancel,
    Subscribe,
    PushCreate,
    PushGet,
    PushList,
    PushDelete,
    ExtendedCard,
}

/// The request's version: 0.3 on `/v1` paths, else what `A2A-Version` says.
fn version_of(req: &HttpRequest) -> Result<Version, A2aError> {
    if req
        .match_pattern()
        .is_some_and(|p| p.starts_with("/a2a/{agent}/v1/"))
    {
        return Ok(Version::V03Rest);
    }
    Version::of(req).map(Version::over_rest)
}

/// The query string's parameters (a repeated one keeps its last value).
fn query(req: &HttpRequest) -> Result<Params, A2aError> {
    let pairs = web::Query::<Vec<(String, String)>>::from_query(req.query_string())
        .map_err(|e| A2aError::invalid("query", e.to_string()))?;
    let params: Params = pairs
        .into_inner()
        .into_iter()
        .map(|(k, v)| (k, Value::String(v)))
        .collect();
    params::proto_names(params)
}

/// The body as an object (empty: none).
fn body_object(body: Result<web::Bytes, actix_web::Error>) -> Result<Params, A2aError> {
    let body = body.map_err(|e| {
        let code = if e.as_response_error().status_code()
            == actix_web::http::StatusCode::PAYLOAD_TOO_LARGE
        {
            crate::http::error::ErrorCode::PayloadTooLarge
        } else {
            crate::http::error::ErrorCode::InvalidJson
        };
        A2aError::Http(ApiError::new(
            code,
            format!("cannot read the request body: {e}"),
        ))
    })?;
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    match serde_json::from_slice(&body) {
        Ok(Value::Object(object)) => params::proto_names(object),
        Ok(_) => Err(A2aError::invalid("body", "must be a JSON object")),
        Err(e) => Err(A2aError::new(
            super::error::Kind::ParseError,
            format!("the body is not JSON: {e}"),
        )),
    }
}

/// The operation's answer (an error too) as JSON of the type the request asked for.
async fn execute(
    auth: Result<TenantAuth, ApiError>,
    state: web::Data<AppState>,
    req: HttpRequest,
    agent: &str,
    op: Op,
    params: Result<Params, A2aError>,
) -> Result<HttpResponse, A2aError> {
    let a2a_json = media::asks_a2a_json(&req);
    let response = execute_op(auth, state, req, agent, op, params)
        .await
        .unwrap_or_else(|error| error.error_response());
    Ok(media::labelled(a2a_json, response))
}

async fn execute_op(
    auth: Result<TenantAuth, ApiError>,
    state: web::Data<AppState>,
    req: HttpRequest,
    agent: &str,
    op: Op,
    params: Result<Params, A2aError>,
) -> Result<HttpResponse, A2aError> {
    let caller = auth.as_ref().ok().map(|a| a.tenant_id);
    let agent = card::agent_for(&state, caller.as_ref(), agent).await?;
    let tenant = auth.map_err(A2aError::Http)?.tenant_id;
    let version = version_of(&req)?;
    let params = params?;
    let call = Call {
        state: state.clone(),
        tenant,
        agent,
        version,
    };
    let reply = match op {
        Op::Send => call.send_message(&params, false).await?,
        Op::Stream => call.send_message(&params, true).await?,
        Op::List => Reply::Json(call.list_tasks(&params).await?),
        Op::Get => Reply::Json(call.get_task(&params).await?),
        Op::Cancel => Reply::Json(call.cancel_task(&params).await?),
        Op::Subscribe => Reply::Stream(call.subscribe(&params, sse::last_event_id(&req)?).await?),
        Op::PushCreate => Reply::Json(push::create(&call, params).await?),
        Op::PushGet => Reply::Json(push::get(&call, &params).await?),
        Op::PushList => Reply::Json(push::list(&call, &params).await?),
        Op::PushDelete => Reply::Json(push::delete(&call, &params).await?),
        Op::ExtendedCard => {
            params::check_tenant(&params, &call.tenant)?;
            let base = crate::http::forwarded::base_url(&req, state.settings());
            Reply::Json(card::card(
                &call.agent,
                &base,
                state.settings().a2a.card_v03_fields,
            ))
        }
    };
    Ok(match reply {
        Reply::Stream(frames) => sse::response(&state, frames).await,
        Reply::Json(value) => {
            // A deleted config answers `{}`.
            let value = if value.is_null() {
                Value::Object(Map::new())
            } else {
                value
            };
            HttpResponse::Ok()
                .content_type("application/json")
                .body(value.to_string())
        }
    })
}

fn respond(result: Result<HttpResponse, A2aError>) -> HttpResponse {
    result.unwrap_or_else(|error| error.error_response())
}

fn with(mut params: Params, pairs: &[(&str, &str)]) -> Params {
    for (key, value) in pairs {
        params.insert((*key).to_owned(), Value::String((*value).to_owned()));
    }
    params
}

macro_rules! rest_route {
    ($name:ident, $method:ident, $path:literal, $op:expr, $what:literal, body) => {
        #[doc = $what]
        #[utoipa::path($method, path = $path, tag = "A2A", security(("tenant" = [])),
            params(("agent" = String, Path, description = "A configured agent's name"),
                ("A2A-Version" = Option<String>, Header, description = "`1.0` or `0.3` (absent: 0.3)")),
            request_body = doc::A2aObject,
            responses(
                (status = 200, description = $what, content((doc::A2aObject = "application/a2a+json"), (doc::A2aObject = "application/json"), (doc::A2aStream = "text/event-stream"))),
                (status = 400, description = "Invalid parameters, or the operation does not apply", body = doc::A2aStatus),
                (status = 404, description = "No such agent or task", body = doc::A2aStatus),
                (status = 429, description = "A quota or the turn queue refused the request", body = doc::A2aStatus),
                (status = 503, description = "The server is shutting down", body = doc::A2aStatus),
            ))]
        pub async fn $name(
            auth: Result<TenantAuth, ApiError>,
            state: web::Data<AppState>,
            path: web::Path<String>,
            req: HttpRequest,
            body: Result<web::Bytes, actix_web::Error>,
        ) -> HttpResponse {
            respond(execute(auth, state, req, &path, $op, body_object(body)).await)
        }
    };
}

rest_route!(
    send_message,
    post,
    "/a2a/{agent}/message:send",
    Op::Send,
    "SendMessage: the task once it stopped (or at once with `returnImmediately`)",
    body
);
rest_route!(
    stream_message,
    post,
    "/a2a/{agent}/message:stream",
    Op::Stream,
    "SendStreamingMessage: the task, then its events, as SSE",
    body
);

/// ListTasks: the caller's tasks of this agent, newest status change first.
#[utoipa::path(get, path = "/a2a/{agent}/tasks", tag = "A2A", security(("tenant" = [])),
    params(("agent" = String, Path, description = "A configured agent's name"),
        ("A2A-Version" = Option<String>, Header, description = "`1.0` or `0.3` (absent: 0.3)"),
        ("contextId" = Option<String>, Query, description = "Only this context's tasks"),
        ("status" = Option<String>, Query, description = "Only tasks in this state (`TASK_STATE_WORKING`, …)"),
        ("pageSize" = Option<String>, Query, description = "1 to 100 (default 50)"),
        ("pageToken" = Option<String>, Query, description = "The `nextPageToken` of the page before"),
        ("historyLength" = Option<String>, Query, description = "At most this many history messages per task"),
        ("statusTimestampAfter" = Option<String>, Query, description = "Only tasks whose status changed at or after this RFC 3339 time"),
        ("includeArtifacts" = Option<String>, Query, description = "`true` to include artifacts")),
    responses(
        (status = 200, description = "A page of tasks", content((doc::A2aObject = "application/a2a+json"), (doc::A2aObject = "application/json"))),
        (status = 400, description = "Invalid parameters", body = doc::A2aStatus),
        (status = 404, description = "No such agent", body = doc::A2aStatus),
    ))]
pub async fn list_tasks(
    auth: Result<TenantAuth, ApiError>,
    state: web::Data<AppState>,
    path: web::Path<String>,
    req: HttpRequest,
) -> HttpResponse {
    let params = query(&req);
    respond(execute(auth, state, req, &path, Op::List, params).await)
}

/// GetTask.
#[utoipa::path(get, path = "/a2a/{agent}/tasks/{id}", tag = "A2A", security(("tenant" = [])),
    params(("agent" = String, Path, description = "A configured agent's name"), ("id" = String, Path, description = "A task id"),
        ("A2A-Version" = Option<String>, Header, description = "`1.0` or `0.3` (absent: 0.3)"),
        ("historyLength" = Option<String>, Query, description = "At most this many history messages")),
    responses(
        (status = 200, description = "The task", content((doc::A2aObject = "application/a2a+json"), (doc::A2aObject = "application/json"))),
        (status = 400, description = "Invalid parameters", body = doc::A2aStatus),
        (status = 404, description = "No such agent or task", body = doc::A2aStatus),
    ))]
pub async fn get_task(
    auth: Result<TenantAuth, ApiError>,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    req: HttpRequest,
) -> HttpResponse {
    let (agent, id) = path.into_inner();
    let params = query(&req).map(|q| with(q, &[("id", &id)]));
    respond(execute(auth, state, req, &agent, Op::Get, params).await)
}

macro_rules! task_route {
    ($name:ident, $method:ident, $path:literal, $op:expr, $what:literal) => {
        #[doc = $what]
        #[utoipa::path($method, path = $path, tag = "A2A", security(("tenant" = [])),
            params(("agent" = String, Path, description = "A configured agent's name"), ("id" = String, Path, description = "A task id"),
                ("A2A-Version" = Option<String>, Header, description = "`1.0` or `0.3` (absent: 0.3)"),
                ("Last-Event-ID" = Option<String>, Header, description = "Subscribe: replay the frames after this one")),
            responses(
                (status = 200, description = $what, content((doc::A2aObject = "application/a2a+json"), (doc::A2aObject = "application/json"), (doc::A2aStream = "text/event-stream"))),
                (status = 400, description = "Invalid parameters, or the operation does not apply", body = doc::A2aStatus),
                (status = 404, description = "No such agent or task", body = doc::A2aStatus),
            ))]
        pub async fn $name(
            auth: Result<TenantAuth, ApiError>,
            state: web::Data<AppState>,
            path: web::Path<(String, String)>,
            req: HttpRequest,
            body: Result<web::Bytes, actix_web::Error>,
        ) -> HttpResponse {
            let (agent, id) = path.into_inner();
            let params = body_object(body).map(|b| with(b, &[("id", &id)]));
            respond(execute(auth, state, req, &agent, $op, params).await)
        }
    };
}

task_route!(
    cancel_task,
    post,
    "/a2a/{agent}/tasks/{id}:cancel",
    Op::Cancel,
    "CancelTask: the task once canceled"
);
task_route!(
    subscribe_task,
    post,
    "/a2a/{agent}/tasks/{id}:subscribe",
    Op::Subscribe,
    "SubscribeToTask: the task, then its events, as SSE"
);
task_route!(
    subscribe_task_get,
    get,
    "/a2a/{agent}/tasks/{id}:subscribe",
    Op::Subscribe,
    "SubscribeToTask (GET, as the protocol's HTTP annotation has it)"
);

/// Push configs of a task: create (POST) and list (GET).
#[utoipa::path(post, path = "/a2a/{agent}/tasks/{id}/pushNotificationConfigs", tag = "A2A", security(("tenant" = [])),
    params(("agent" = String, Path, description = "A configured agent's name"), ("id" = String, Path, description = "A task id"),
        ("A2A-Version" = Option<String>, Header, description = "`1.0` or `0.3` (absent: 0.3)")),
    request_body = doc::A2aObject,
    responses(
        (status = 200, description = "The config created", content((doc::A2aObject = "application/a2a+json"), (doc::A2aObject = "application/json"))),
        (status = 400, description = "Invalid parameters", body = doc::A2aStatus),
        (status = 404, description = "No such agent or task", body = doc::A2aStatus),
    ))]
pub async fn create_push_config(
    auth: Result<TenantAuth, ApiError>,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    req: HttpRequest,
    body: Result<web::Bytes, actix_web::Error>,
) -> HttpResponse {
    let (agent, id) = path.into_inner();
    let params = body_object(body).map(|b| with(b, &[("taskId", &id)]));
    respond(execute(auth, state, req, &agent, Op::PushCreate, params).await)
}

#[utoipa::path(get, path = "/a2a/{agent}/tasks/{id}/pushNotificationConfigs", tag = "A2A", security(("tenant" = [])),
    params(("agent" = String, Path, description = "A configured agent's name"), ("id" = String, Path, description = "A task id"),
        ("A2A-Version" = Option<String>, Header, description = "`1.0` or `0.3` (absent: 0.3)")),
    responses(
        (status = 200, description = "The task's configs", content((doc::A2aObject = "application/a2a+json"), (doc::A2aObject = "application/json"))),
        (status = 400, description = "Invalid parameters", body = doc::A2aStatus),
        (status = 404, description = "No such agent or task", body = doc::A2aStatus),
    ))]
pub async fn list_push_configs(
    auth: Result<TenantAuth, ApiError>,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    req: HttpRequest,
) -> HttpResponse {
    let (agent, id) = path.into_inner();
    let params = query(&req).map(|q| with(q, &[("taskId", &id), ("id", &id)]));
    respond(execute(auth, state, req, &agent, Op::PushList, params).await)
}

macro_rules! config_route {
    ($name:ident, $method:ident, $op:expr, $what:literal) => {
        #[doc = $what]
        #[utoipa::path($method, path = "/a2a/{agent}/tasks/{id}/pushNotificationConfigs/{config_id}", tag = "A2A",
            security(("tenant" = [])),
            params(("agent" = String, Path, description = "A configured agent's name"), ("id" = String, Path, description = "A task id"),
                ("config_id" = String, Path, description = "A push config's id"),
                ("A2A-Version" = Option<String>, Header, description = "`1.0` or `0.3` (absent: 0.3)")),
            responses(
                (status = 200, description = $what, content((doc::A2aObject = "application/a2a+json"), (doc::A2aObject = "application/json"))),
                (status = 400, description = "Invalid parameters", body = doc::A2aStatus),
                (status = 404, description = "No such agent, task or config", body = doc::A2aStatus),
            ))]
        pub async fn $name(
            auth: Result<TenantAuth, ApiError>,
            state: web::Data<AppState>,
            path: web::Path<(String, String, String)>,
            req: HttpRequest,
        ) -> HttpResponse {
            let (agent, id, config) = path.into_inner();
            let params = Ok(with(
                Map::new(),
                &[("taskId", &id), ("id", &config), ("pushNotificationConfigId", &config)],
            ));
            respond(execute(auth, state, req, &agent, $op, params).await)
        }
    };
}

config_route!(get_push_config, get, Op::PushGet, "The push config");
config_route!(
    delete_push_config,
    delete,
    Op::PushDelete,
    "The push config is deleted (`{}`)"
);

/// GetExtendedAgentCard.
#[utoipa::path(get, path = "/a2a/{agent}/extendedAgentCard", tag = "A2A", security(("tenant" = [])),
    params(("agent" = String, Path, description = "A configured agent's name")),
    responses(
        (status = 200, description = "The card as this caller sees it", content((doc::A2aObject = "application/a2a+json"), (doc::A2aObject = "application/json"))),
        (status = 404, description = "No such agent", body = doc::A2aStatus),
    ))]
pub async fn get_extended_card(
    auth: Result<TenantAuth, ApiError>,
    state: web::Data<AppState>,
    path: web::Path<String>,
    req: HttpRequest,
) -> HttpResponse {
    respond(execute(auth, state, req, &path, Op::ExtendedCard, Ok(Map::new())).await)
}
