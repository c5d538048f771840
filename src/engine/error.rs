//! What the engine can refuse, independent of any protocol's error shape.

use crate::model::{FieldError, QuotaExceeded, RunStatus};
use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Invalid(#[from] FieldError),
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
}

/// A store's `NotFound` as the engine names it (`what` was not found); any other error as is.
pub(super) fn not_found(error: StoreError, what: &'static str) -> EngineError {
    match error {
        StoreError::NotFound => EngineError::NotFound(what),
        other => other.into(),
    }
}
