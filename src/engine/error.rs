//! What the engine can refuse, independent of any protocol's error shape.

use crate::model::{FieldError, QuotaExceeded, RunStatus};
use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Invalid(#[from] FieldError),
    /// A message of the request (by index) the engine refused, and its part when one is at
    /// fault: faces name them in their own terms.
    #[error("{}: {}", .0.field, .0.reason)]
    InvalidInput(InputError),
    #[error("{0} not found")]
    NotFound(&'static str),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("secret options cannot be decrypted: {0}")]
    Sealed(#[from] crate::crypto::SealError),
    #[error("the session is running another turn")]
    SessionBusy,
    #[error(
        "the session holds {messages} messages of {bytes} bytes; this turn's input would take \
         it past its limits ({max_messages} messages, {max_bytes} bytes)"
    )]
    SessionFull {
        messages: u64,
        bytes: u64,
        max_messages: u64,
        max_bytes: u64,
    },
    #[error("this Idempotency-Key was used for a different request")]
    IdempotencyMismatch,
    #[error("too many turns are waiting")]
    QueueFull,
    #[error("{0}")]
    QuotaExceeded(QuotaExceeded),
    #[error("the server is shutting down")]
    ShuttingDown,
    #[error("the session's agent is no longer configured")]
    AgentUnavailable,
    #[error("the run does not await answers (its status is {0})")]
    RunNotAwaiting(RunStatus),
    #[error("the run has ended (its status is {0})")]
    RunEnded(RunStatus),
    #[error("the history a request repeats is not the end of the session's stored history")]
    HistoryMismatch,
    /// A user message to a session whose tool calls (`calls`, by id) wait for answers.
    #[error("tool calls are pending and must be answered first: {}", .calls.join(", "))]
    AwaitingInput { calls: Vec<String> },
    /// The context (session) named belongs to another agent, `owner`.
    #[error("the session belongs to agent `{owner}`")]
    WrongAgent { owner: String },
    /// A resume that answers no pending call (see `contexts`).
    #[error("the resume answers no pending call")]
    NoAnswer,
    /// A resume's part (by index) that is neither an answer nor text answering the single
    /// pending call.
    #[error("part {part} of the resume is not an answer")]
    UnexpectedPart { part: usize },
}

impl EngineError {
    /// Whether what was asked for does not exist (for this tenant), whichever layer found
    /// it missing: faces answer it with their own not-found shape.
    pub fn is_not_found(&self) -> bool {
        matches!(
            self,
            EngineError::NotFound(_) | EngineError::Store(StoreError::NotFound)
        )
    }
}

/// A store's `NotFound` as the engine names it (`what` was not found); any other error as is.
pub(super) fn not_found(error: StoreError, what: &'static str) -> EngineError {
    match error {
        StoreError::NotFound => EngineError::NotFound(what),
        other => other.into(),
    }
}

/// Which message of a turn request (its index among the request's messages) and which part
/// of its content (a block's index) the engine refused, and why. `field` is the same place
/// as a path (`messages[0].content[2].url`), for faces that name fields so. `reason` says
/// why with the agent's name; `detail` says it alone.
#[derive(Debug, Clone, PartialEq)]
pub struct InputError {
    pub message: usize,
    pub part: Option<usize>,
    pub field: String,
    pub reason: String,
    pub detail: String,
    /// The part's content type is one the agent's input schema takes nowhere.
    pub unsupported_type: bool,
}

impl InputError {
    /// A fault an agent found in the content of message `message`.
    pub fn of_body(message: usize, fault: crate::agents::BodyFault) -> Self {
        let field = fault.at(&format!("messages[{message}].content")).field;
        InputError {
            message,
            part: fault.part,
            field,
            reason: fault.reason,
            detail: fault.detail,
            unsupported_type: fault.unsupported_type,
        }
    }
}
