//! Push notification configs of a task: endpoints of the webhook engine scoped to the
//! task's run (retried, ordered, SSRF-guarded, listed at `GET /webhooks`), whose messages
//! this face renders as A2A `StreamResponse`s: one status update each time the task stops
//! (input-required, completed, failed, canceled), signed with the config's token
//! (Standard Webhooks `webhook-signature`), which is also sent as `X-A2A-Notification-Token`,
//! with the `Authorization` the config asks for.

use serde_json::{Map, Value, json};

use super::error::{A2aError, Kind};
use super::ops::Call;
use super::params::{self, Params};
use super::tasks::load_task;
use super::version::Version;
use super::wire::{MessageOut, PartOut, Role, State, Status, StreamEvent};
use crate::engine::{
    Authorization, NewRunEndpoint, OutboundMessage, Payload, PayloadFormat, RunEndpoint,
    WebhookError,
};
use crate::model::{RunId, RunStatus};

/// The payload format of a version: registered with the webhook engine at start-up.
#[derive(Debug)]
pub struct PushFormat(pub Version);

impl PushFormat {
    pub fn name(version: Version) -> &'static str {
        match version {
            Version::V1 => "a2a/1.0",
            Version::V03 | Version::V03Rest => "a2a/0.3",
        }
    }
}

impl PayloadFormat for PushFormat {
    fn render(&self, outbound: &OutboundMessage<'_>, token: &str) -> Result<Payload, String> {
        let data = outbound.data;
        let text = |key: &str| data.get(key).and_then(Value::as_str);
        let task_id = text("run_id").ok_or("the message names no run")?;
        let context_id = text("session_id").ok_or("the message names no session")?;
        let status: RunStatus = text("status")
            .ok_or("the message has no status")?
            .parse()
            .map_err(|e: String| e)?;
        let (state, parts) = match status {
            RunStatus::Created => (State::Submitted, Vec::new()),
            RunStatus::Running => (State::Working, Vec::new()),
            RunStatus::Awaiting => (
                State::InputRequired,
                vec![PartOut::text(
                    "The agent needs input: GetTask shows the calls it waits for.",
                )],
            ),
            RunStatus::Completed => (State::Completed, Vec::new()),
            RunStatus::Cancelled => (State::Canceled, Vec::new()),
            RunStatus::Failed | RunStatus::Interrupted => {
                let error = data.get("error");
                let reason = error
                    .and_then(|e| e.get("message"))
                    .and_then(Value::as_str)
                    .unwrap_or("the task failed");
                let code = error
                    .and_then(|e| e.get("code"))
                    .and_then(Value::as_str)
                    .unwrap_or("failed");
                (
                    State::Failed,
                    vec![
                        PartOut::text(reason),
                        PartOut::data(json!({ "code": code })),
                    ],
                )
            }
        };
        let message = (!parts.is_empty()).then(|| MessageOut {
            message_id: format!("{task_id}-push-{}", outbound.message_id),
            context_id: context_id.to_owned(),
            task_id: Some(task_id.to_owned()),
            role: Role::Agent,
            parts,
        });
        let timestamp = text("finished_at")
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
            .map_or(outbound.created_at, |t| t.with_timezone(&chrono::Utc));
        let event = StreamEvent::Status {
            task_id: task_id.to_owned(),
            context_id: context_id.to_owned(),
            status: Status {
                state,
                message,
                timestamp,
            },
        };
        Ok(Payload {
            content_type: match self.0 {
                Version::V1 => "application/a2a+json",
                Version::V03 | Version::V03Rest => "application/json",
            },
            body: event.to_json(self.0).to_string(),
            headers: vec![("x-a2a-notification-token", token.to_owned())],
        })
    }
}

fn webhook_error(error: WebhookError, task: &str) -> A2aError {
    match error {
        WebhookError::Invalid(field) => A2aError::invalid(field.field, field.message),
        WebhookError::NotFound("run") => A2aError::task_not_found(task),
        WebhookError::NotFound(what) => {
            A2aError::new(Kind::InvalidParams, format!("{what} not found"))
        }
        WebhookError::TooManyForRun(limit) => A2aError::unsupported(format!(
            "a task may have at most {limit} push notification configs"
        )),
        WebhookError::TooManyRunEndpoints(limit) => A2aError::unsupported(format!(
            "a tenant may have at most {limit} push notification configs over all its tasks"
        )),
        other => A2aError::Http(crate::http::error::ApiError::internal(anyhow::anyhow!(
            other.to_string()
        ))),
    }
}

/// A config as the caller's version writes it; the token only when it was just created.
fn config_json(version: Version, endpoint: &RunEndpoint, token: Option<&str>) -> Value {
    let task_id = endpoint.run.to_string();
    let mut config = Map::new();
    config.insert("id".into(), json!(endpoint.key));
    config.insert("url".into(), json!(endpoint.url));
    if let Some(token) = token {
        config.insert("token".into(), json!(token));
    }
    if let Some(scheme) = &endpoint.authorization_scheme {
        let authentication = match version {
            Version::V1 => json!({ "scheme": scheme }),
            Version::V03 | Version::V03Rest => json!({ "schemes": [scheme] }),
        };
        config.insert("authentication".into(), authentication);
    }
    match version {
        Version::V1 => {
            config.insert("taskId".into(), json!(task_id));
            Value::Object(config)
        }
        Version::V03 => json!({"taskId": task_id, "pushNotificationConfig": config}),
        Version::V03Rest => json!({
            "name": format!("tasks/{task_id}/pushNotificationConfigs/{}", endpoint.key),
            "pushNotificationConfig": config,
        }),
    }
}

/// The task a push operation names: `taskId` (1.0, REST), else `id` (0.3's JSON-RPC).
fn task_of(params: &Params) -> Result<&str, A2aError> {
    match params::string(params, "taskId")? {
        Some(task) => Ok(task),
        None => {
            params::required(params, "id").map_err(|_| A2aError::invalid("taskId", "is required"))
        }
    }
}

/// The config a get or delete names: 1.0's `id`, 0.3's `pushNotificationConfigId`; a task's
/// only config when 0.3 names none.
fn config_of<'a>(params: &'a Params, version: Version, task: &'a str) -> Result<&'a str, A2aError> {
    let named = match version {
        Version::V1 if params::string(params, "taskId")?.is_some() => params::string(params, "id")?,
        _ => params::string(params, "pushNotificationConfigId")?,
    };
    Ok(named.unwrap_or(task))
}

/// A config as the webhook engine takes it, for `run` (the key defaults to the task's id).
fn new_endpoint(
    call: &Call,
    run: RunId,
    task: &str,
    config: &Params,
) -> Result<NewRunEndpoint, A2aError> {
    let url = params::required(config, "url")?.to_owned();
    let key = params::string(config, "id")?.unwrap_or(task).to_owned();
    let token = params::string(config, "token")?.map(str::to_owned);
    let authorization = match config.get("authentication") {
        None | Some(Value::Null) => None,
        Some(Value::Object(auth)) => {
            let scheme = match params::string(auth, "scheme")? {
                Some(scheme) => Some(scheme.to_owned()),
                None => auth
                    .get("schemes")
                    .and_then(Value::as_array)
                    .and_then(|s| s.first())
                    .and_then(Value::as_str)
                    .map(str::to_owned),
            };
            let scheme =
                scheme.ok_or_else(|| A2aError::invalid("authentication.scheme", "is required"))?;
            let credentials = params::string(auth, "credentials")?.map(str::to_owned);
            Some(Authorization {
                scheme,
                credentials,
            })
        }
        Some(_) => return Err(A2aError::invalid("authentication", "must be an object")),
    };
    Ok(NewRunEndpoint {
        run,
        key,
        url,
        token,
        authorization,
        format: PushFormat::name(call.version).to_owned(),
    })
}

/// Refuses a send's config that registering would refuse, before the send starts a task.
pub async fn check(call: &Call, config: &Params) -> Result<(), A2aError> {
    // The task's id is not known yet: a placeholder stands for the default key.
    let placeholder = RunId::generate();
    let new = new_endpoint(call, placeholder, &placeholder.to_string(), config)?;
    call.state
        .webhooks()
        .check_run_endpoint(&call.tenant, &new)
        .await
        .map_err(|e| webhook_error(e, "(new)"))
}

/// Registers a config for a task (also from a send's configuration).
pub async fn register(call: &Call, task: &str, config: &Params) -> Result<Value, A2aError> {
    let (run, _) = load_task(&call.state, &call.tenant, &call.agent, task).await?;
    let new = new_endpoint(call, run.id, task, config)?;
    let created = call
        .state
        .webhooks()
        .create_run_endpoint(&call.tenant, new)
        .await
        .map_err(|e| webhook_error(e, task))?;
    Ok(config_json(
        call.version,
        &created.endpoint,
        Some(&created.token),
    ))
}

/// CreateTaskPushNotificationConfig: the config (1.0: flat; 0.3: in
/// `pushNotificationConfig`), with its token.
pub async fn create(call: &Call, params: Params) -> Result<Value, A2aError> {
    params::check_tenant(&params, &call.tenant)?;
    let task = params::required(&params, "taskId")?.to_owned();
    let config = match params.get("pushNotificationConfig") {
        Some(Value::Object(config)) => config.clone(),
        Some(_) => {
            return Err(A2aError::invalid(
                "pushNotificationConfig",
                "must be an object",
            ));
        }
        None => params.clone(),
    };
    register(call, &task, &config).await
}

pub async fn get(call: &Call, params: &Params) -> Result<Value, A2aError> {
    params::check_tenant(params, &call.tenant)?;
    let task = task_of(params)?;
    let key = config_of(params, call.version, task)?;
    let (run, _) = load_task(&call.state, &call.tenant, &call.agent, task).await?;
    let endpoint = call
        .state
        .webhooks()
        .get_run_endpoint(&call.tenant, &run.id, key)
        .await
        .map_err(|e| match e {
            WebhookError::NotFound("push config") => A2aError::new(
                Kind::TaskNotFound,
                format!("push notification config {key} of task {task} not found"),
            ),
            other => webhook_error(other, task),
        })?;
    Ok(config_json(call.version, &endpoint, None))
}

pub async fn list(call: &Call, params: &Params) -> Result<Value, A2aError> {
    params::check_tenant(params, &call.tenant)?;
    let task = task_of(params)?;
    let (run, _) = load_task(&call.state, &call.tenant, &call.agent, task).await?;
    let endpoints = call
        .state
        .webhooks()
        .list_run_endpoints(&call.tenant, &run.id)
        .await
        .map_err(|e| webhook_error(e, task))?;
    let configs: Vec<Value> = endpoints
        .iter()
        .map(|e| config_json(call.version, e, None))
        .collect();
    Ok(match call.version {
        Version::V1 | Version::V03Rest => json!({"configs": configs, "nextPageToken": ""}),
        Version::V03 => Value::Array(configs),
    })
}

/// Idempotent: deleting a config that is not there succeeds.
pub async fn delete(call: &Call, params: &Params) -> Result<Value, A2aError> {
    params::check_tenant(params, &call.tenant)?;
    let task = task_of(params)?;
    let key = config_of(params, call.version, task)?;
    let (run, _) = load_task(&call.state, &call.tenant, &call.agent, task).await?;
    call.state
        .webhooks()
        .delete_run_endpoint(&call.tenant, &run.id, key)
        .await
        .map_err(|e| webhook_error(e, task))?;
    Ok(Value::Null)
}
