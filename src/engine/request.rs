//! What a face asks of the engine to start a turn, and what it gets back.

use super::input::{InputMessage, PendingCall};
use crate::agents::SessionConfigRequest;
use crate::model::{RunId, StreamMode, Turn};

/// Which run a turn being admitted belongs to.
#[derive(Debug, Clone, Default)]
pub(super) enum RunPart {
    #[default]
    None,
    /// It starts a new run.
    New,
    /// It resumes this awaiting run.
    Resume(RunId),
}

/// A turn as a client asks for it, protocol aside.
#[derive(Debug, Clone)]
pub struct TurnRequest {
    /// The agent's name, if the client repeated it: it must not change.
    pub agent_name: Option<String>,
    /// Session overrides that persist: options merged by key, server tools replaced.
    pub agent: SessionConfigRequest,
    pub messages: Vec<InputMessage>,
    pub stream: StreamMode,
    /// The retry key the turn is started with, if any.
    pub idempotency: Option<Idempotency>,
}

/// A retry key, and what tells a retry sent with it from another request.
#[derive(Debug, Clone)]
pub struct Idempotency {
    /// The key: stored with a turn in its protocol's namespace (see [`scoped_key`]); the
    /// lookups that take a scope take it as the client sent it.
    pub key: String,
    /// What tells a retry from another request with the key: for most faces
    /// [`fingerprint_of`] the request as sent.
    pub fingerprint: String,
}

impl Idempotency {
    /// `key` for the request `body`.
    pub fn of(key: String, body: &serde_json::Value) -> Self {
        Idempotency {
            key,
            fingerprint: fingerprint_of(body),
        }
    }
}

/// A digest of a request as sent, to tell a retry from a different request.
fn fingerprint_of(body: &serde_json::Value) -> String {
    crate::model::sha256_hex(body.to_string().as_bytes())
}

/// An idempotency key as stored: in its protocol's namespace (`scope`), so the same key
/// sent over two protocols names two requests. AAP's keys, the engine's own, have none.
pub fn scoped_key(scope: &str, key: &str) -> String {
    if scope.is_empty() {
        key.to_owned()
    } else {
        format!("{scope}:{key}")
    }
}

/// The key a client sent, from a stored key of its protocol's namespace.
pub fn unscoped_key<'a>(scope: &str, stored: &'a str) -> Option<&'a str> {
    stored.strip_prefix(scope)?.strip_prefix(':')
}

/// A client's answer to a server tool call that waited for permission.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Permission {
    pub call: PendingCall,
    pub granted: bool,
    pub reason: Option<String>,
}

/// A turn `start_turn` accepted.
#[derive(Debug)]
pub struct StartedTurn {
    pub turn: Turn,
    /// For a new turn: subscribed before it could write, so following it needs no replay.
    pub(super) live: Option<super::fanout::Subscription>,
    /// An earlier turn its idempotency key names, not a new one.
    pub(super) replayed: bool,
}

impl StartedTurn {
    pub(super) fn replay(turn: Turn) -> Self {
        Self {
            turn,
            live: None,
            replayed: true,
        }
    }

    /// Whether the request was a retry, answered with the turn it started before.
    pub fn is_replay(&self) -> bool {
        self.replayed
    }
}
