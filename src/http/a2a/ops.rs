//! A2A's task operations over the engine, whatever the binding: send (blocking, returning
//! at once, or streaming), get, list, cancel and subscribe. Each takes the operation's
//! parameters as ProtoJSON names and answers JSON in the caller's version, or a stream.

use std::sync::Arc;
use std::time::Duration;

use actix_web::web;
use futures_util::StreamExt;
use futures_util::stream::LocalBoxStream;
use serde_json::{Value, json};

use super::error::{A2aError, Kind};
use super::params::{self, Params};
use super::parse::{self, InMessage};
use super::tasks::{self, context_id, load_task};
use super::version::Version;
use super::wire::{Shown, StreamEvent, Task};
use crate::agents::{Agent, SessionConfigRequest};
use crate::app::AppState;
use crate::engine::{EngineError, Idempotency, InputMessage, SessionRef, TurnRequest, scoped_key};
use crate::http::frame_id::FrameId;
use crate::model::{Run, Session, StreamMode, TenantId};

/// Who calls, on which agent, in which version.
pub struct Call {
    pub state: web::Data<AppState>,
    pub tenant: TenantId,
    pub agent: Arc<Agent>,
    pub version: Version,
}

/// A stream's frames: an id (when the frame has one) and the event in the caller's version.
pub type Frames = LocalBoxStream<'static, (Option<FrameId>, Value)>;

pub enum Reply {
    Json(Value),
    Stream(Frames),
}

/// The namespace of A2A's message ids among turns' idempotency keys.
pub const KEY_SCOPE: &str = "a2a";

/// How long a cancel waits for the task's turn to stop before it answers.
const CANCEL_WAIT: Duration = Duration::from_secs(10);

impl Call {
    fn task_json(&self, task: &Task, shown: Shown) -> Value {
        task.to_json(self.version, shown)
    }

    /// SendMessage / SendStreamingMessage.
    pub async fn send_message(&self, params: &Params, streaming: bool) -> Result<Reply, A2aError> {
        params::check_tenant(params, &self.tenant)?;
        // 0.3's HTTP+JSON clients name the message `request` (its proto field) too.
        let sent = match (params.get("message"), self.version) {
            (None, Version::V03Rest) => params.get("request"),
            (sent, _) => sent,
        };
        let message = parse::parse_message(sent, self.version, "message")?;
        let configuration = match params.get("configuration") {
            None | Some(Value::Null) => Params::new(),
            Some(Value::Object(c)) if self.version == Version::V03Rest => parse::camel_keys(c),
            Some(Value::Object(c)) => c.clone(),
            Some(_) => return Err(A2aError::invalid("configuration", "must be an object")),
        };
        let history_length = params::history_length(&configuration)?;
        let return_immediately = match self.version {
            Version::V1 => params::boolean(&configuration, "returnImmediately")?.unwrap_or(false),
            Version::V03 | Version::V03Rest => {
                !params::boolean(&configuration, "blocking")?.unwrap_or(true)
            }
        };
        self.check_output_modes(&configuration)?;
        let push = match configuration
            .get("taskPushNotificationConfig")
            .or_else(|| configuration.get("pushNotificationConfig"))
        {
            None | Some(Value::Null) => None,
            Some(Value::Object(config)) => Some(config.clone()),
            Some(_) => {
                return Err(A2aError::invalid(
                    "configuration.taskPushNotificationConfig",
                    "must be an object",
                ));
            }
        };
        if let Some(config) = &push {
            // A config that would be refused is refused before any task starts.
            super::push::check(self, config).await?;
        }
        let (run, session) = match &message.task_id {
            Some(id) => self.continue_task(id, &message).await?,
            None => self.start_task(message).await?,
        };
        if let Some(config) = push {
            // Registered as the task starts: it gets every stop from the task's first on,
            // unless that stop came first (a reply within milliseconds).
            super::push::register(self, &run.id.to_string(), &config).await?;
        }
        if streaming {
            return Ok(Reply::Stream(
                self.stream_task(&run, &session, None, true).await?,
            ));
        }
        let engine = self.state.engine();
        let run = match return_immediately {
            // Until the turn stops: terminal, or waiting for the client.
            false => engine.wait_for_run(&run, None, None).await?,
            true => engine.get_run(&self.tenant, &run.id).await?,
        };
        let task = tasks::snapshot(&tasks::view(&self.state, run, session).await?);
        let shown = Shown {
            history_length,
            artifacts: true,
        };
        Ok(Reply::Json(if self.version.proto_json() {
            json!({ "task": self.task_json(&task, shown) })
        } else {
            self.task_json(&task, shown)
        }))
    }

    /// A client that names the media types it accepts must accept one the agent writes.
    fn check_output_modes(&self, configuration: &Params) -> Result<(), A2aError> {
        let accepted: Vec<&str> = match configuration.get("acceptedOutputModes") {
            Some(Value::Array(modes)) => modes.iter().filter_map(Value::as_str).collect(),
            _ => return Ok(()),
        };
        if accepted.is_empty() {
            return Ok(());
        }
        let produced = super::card::output_modes(&self.agent);
        let fits = |accepted: &str, produced: &str| {
            let glob = crate::model::PartGlob::new(accepted);
            glob.is_ok_and(|g| g.is_match(produced)) || accepted == "*/*"
        };
        if produced.iter().any(|p| accepted.iter().any(|a| fits(a, p))) {
            return Ok(());
        }
        Err(A2aError::Protocol {
            kind: Kind::ContentTypeNotSupported,
            message: format!(
                "configuration.acceptedOutputModes: the agent writes {}",
                produced.join(", ")
            ),
            field: Some("configuration.acceptedOutputModes".into()),
        })
    }

    /// A new task: a new run in the message's context (a new session when it names none).
    async fn start_task(&self, message: InMessage) -> Result<(Run, Session), A2aError> {
        let engine = self.state.engine();
        let reference = match &message.context_id {
            Some(key) => Some(SessionRef::parse(key).ok_or_else(|| context_missing(key))?),
            None => None,
        };
        let session = engine
            .open_context(&self.tenant, self.agent.name(), reference.as_ref())
            .await
            .map_err(|e| match (e, &message.context_id) {
                (EngineError::NotFound(_), Some(key)) => context_missing(key),
                (EngineError::Invalid(field), _) => {
                    A2aError::invalid("message.contextId", field.message)
                }
                (EngineError::WrongAgent { owner }, _) => A2aError::invalid(
                    "message.contextId",
                    format!("the context belongs to agent `{owner}`; send it there"),
                ),
                (other, _) => other.into(),
            })?;
        let content = parse::user_content(message.parts.clone());
        let request = self.turn_request(&message, vec![InputMessage::User { content }]);
        let started = engine.start_run(&self.tenant, &session.id, request).await;
        match started {
            Ok((run, _)) => Ok((run, session)),
            Err(EngineError::AwaitingInput { .. }) => Err(A2aError::unsupported(
                "the context has a task waiting for input: answer it (a message with its \
                     taskId) or cancel it first",
            )),
            Err(error) => Err(input_error(error, &message)),
        }
    }

    /// A message to an existing task: the answers an input-required task waits for.
    async fn continue_task(
        &self,
        id: &str,
        message: &InMessage,
    ) -> Result<(Run, Session), A2aError> {
        let (run, session) = load_task(&self.state, &self.tenant, &self.agent, id).await?;
        if let Some(context) = &message.context_id
            && *context != context_id(&session)
            && *context != session.id.to_string()
        {
            return Err(A2aError::invalid(
                "message.contextId",
                format!("task {id} belongs to another context"),
            ));
        }
        let answers = parse::parse_answers(&message.parts)?;
        let (run, _) = self
            .state
            .engine()
            .resume_with(
                &self.tenant,
                &run,
                answers,
                self.turn_request(message, Vec::new()),
            )
            .await
            .map_err(|e| match e {
                EngineError::RunNotAwaiting(status) if status.is_terminal() => {
                    A2aError::unsupported(format!(
                        "task {id} has ended ({status}); a follow-up is a new message in its \
                         context"
                    ))
                }
                EngineError::RunNotAwaiting(_) => A2aError::unsupported(format!(
                    "task {id} is working; send to it when it asks for input"
                )),
                EngineError::NoAnswer => A2aError::invalid(
                    "message.parts",
                    "answer each pending call with a data part {\"toolResult\": {\"toolCallId\", \
                     \"content\"}} or {\"toolPermission\": {\"toolCallId\", \"granted\"}}",
                ),
                EngineError::UnexpectedPart { part } => A2aError::invalid(
                    message
                        .parts
                        .get(part)
                        .map_or_else(|| "message.parts".to_owned(), |(at, _)| at.clone()),
                    "a message answering a task carries its answers only, or the text that \
                     answers its single pending call",
                ),
                EngineError::Invalid(field) => A2aError::invalid("message.parts", field.message),
                EngineError::InvalidInput(input) => {
                    A2aError::invalid("message.parts", input.reason)
                }
                EngineError::IdempotencyMismatch => A2aError::invalid(
                    "message.messageId",
                    "this context already has another message with this id",
                ),
                other => other.into(),
            })?;
        Ok((run, session))
    }

    /// The turn a message asks for, keyed by its `messageId`.
    fn turn_request(&self, message: &InMessage, messages: Vec<InputMessage>) -> TurnRequest {
        // The key is the context's: what the message says tells a retry from a reuse.
        let fingerprint = serde_json::to_value(&message.parts).unwrap_or_default();
        TurnRequest {
            agent_name: None,
            agent: SessionConfigRequest::default(),
            messages,
            stream: StreamMode::Delta,
            idempotency: Some(Idempotency::of(
                scoped_key(KEY_SCOPE, &message.message_id),
                &fingerprint,
            )),
        }
    }

    /// The task as a stream: its snapshot first (with the id of the last frame it holds),
    /// then its events after that (or after `after`, with no snapshot), until its last
    /// turn stops. A send's stream (`sent`) starts with the task as it was before the turn
    /// the send started, then every event of that turn.
    async fn stream_task(
        &self,
        run: &Run,
        session: &Session,
        after: Option<FrameId>,
        sent: bool,
    ) -> Result<Frames, A2aError> {
        let version = self.version;
        let view = tasks::view(&self.state, run.clone(), session.clone()).await?;
        let identity = tasks::identity(&view);
        let mut first = None;
        let cursor = match after {
            Some(after) => after,
            None => {
                let mut before = run.clone();
                if sent {
                    before.turns.pop();
                }
                let renderer = tasks::replay(&view, Some(&before));
                let mut task = renderer.task();
                task.history = tasks::history(&view);
                let cursor = renderer.last_frame();
                // A task that holds no event yet is frame `0`: before every event, so
                // resuming after it replays them all.
                let id = if cursor == FrameId::START {
                    FrameId::new(0, 0)
                } else {
                    cursor
                };
                first = Some((Some(id), StreamEvent::Task(Box::new(task)).to_json(version)));
                cursor
            }
        };
        let events = tasks::follow(&self.state, run, identity, cursor)
            .map(move |(id, event)| (Some(id), event.to_json(version)));
        Ok(futures_util::stream::iter(first)
            .chain(events)
            .boxed_local())
    }

    /// GetTask.
    pub async fn get_task(&self, params: &Params) -> Result<Value, A2aError> {
        params::check_tenant(params, &self.tenant)?;
        let id = params::required(params, "id")?;
        let history_length = params::history_length(params)?;
        let (run, session) = load_task(&self.state, &self.tenant, &self.agent, id).await?;
        let task = tasks::snapshot(&tasks::view(&self.state, run, session).await?);
        Ok(self.task_json(
            &task,
            Shown {
                history_length,
                artifacts: true,
            },
        ))
    }

    /// CancelTask: the task once its turn stopped (or as it stands after a short wait).
    pub async fn cancel_task(&self, params: &Params) -> Result<Value, A2aError> {
        params::check_tenant(params, &self.tenant)?;
        let id = params::required(params, "id")?;
        let (run, session) = load_task(&self.state, &self.tenant, &self.agent, id).await?;
        let run = self
            .state
            .engine()
            .cancel_run(&self.tenant, &run.id)
            .await
            .map_err(|e| match e {
                EngineError::RunEnded(status) => A2aError::new(
                    Kind::TaskNotCancelable,
                    format!("task {id} has ended ({status}) and cannot be canceled"),
                ),
                other => other.into(),
            })?;
        let run = self
            .state
            .engine()
            .wait_for_run(&run, None, Some(CANCEL_WAIT))
            .await?;
        let task = tasks::snapshot(&tasks::view(&self.state, run, session).await?);
        Ok(self.task_json(&task, Shown::ALL))
    }

    /// SubscribeToTask: the snapshot then live events; with `Last-Event-ID`, exactly the
    /// frames after it (replayed, then live), also of a task that has ended.
    pub async fn subscribe(
        &self,
        params: &Params,
        after: Option<FrameId>,
    ) -> Result<Frames, A2aError> {
        params::check_tenant(params, &self.tenant)?;
        let id = params::required(params, "id")?;
        let (run, session) = load_task(&self.state, &self.tenant, &self.agent, id).await?;
        if after.is_none() && run.status.is_terminal() {
            return Err(A2aError::unsupported(format!(
                "task {id} has ended ({}); GetTask reads it, or subscribe with Last-Event-ID to \
                 replay what you missed",
                run.status
            )));
        }
        self.stream_task(&run, &session, after, false).await
    }

    /// ListTasks: the agent's tasks of this tenant, newest status change first.
    pub async fn list_tasks(&self, params: &Params) -> Result<Value, A2aError> {
        super::list::list_tasks(self, params).await
    }
}

fn context_missing(key: &str) -> A2aError {
    A2aError::new(Kind::TaskNotFound, format!("context {key} not found"))
}

/// Engine refusals of a message, naming the part at fault (the body's block `j` is
/// `message.parts[j]`).
fn input_error(error: EngineError, message: &InMessage) -> A2aError {
    match error {
        EngineError::IdempotencyMismatch => A2aError::invalid(
            "message.messageId",
            "this context already has another message with this id",
        ),
        // A part whose content type the agent takes nowhere is ContentTypeNotSupported, any
        // other misfit invalid params; both name the part.
        EngineError::InvalidInput(input) => {
            let at = input
                .part
                .and_then(|j| message.parts.get(j))
                .map_or("message.parts".to_owned(), |(at, _)| at.clone());
            if input.unsupported_type {
                return A2aError::Protocol {
                    kind: Kind::ContentTypeNotSupported,
                    message: format!("{at}: {}", input.detail),
                    field: Some(at),
                };
            }
            A2aError::invalid(at, input.detail)
        }
        EngineError::Invalid(field) => A2aError::invalid("message", field.message),
        other => other.into(),
    }
}
