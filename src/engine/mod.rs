//! The protocol-independent core: sessions, the turn runner, the event log and its
//! followers, recovery and shutdown.

mod agent_loop;
mod assemble;
mod compaction;
mod error;
mod fanout;
mod follow;
mod input;
mod parts;
mod runner;
mod runs;
mod sessions;
mod tenants;
mod writer;

pub use assemble::{MessageAssembler, turn_messages};
pub use error::EngineError;
pub use follow::Follow;
pub use input::{InputMessage, PendingCall, split_input};
pub use parts::file_url;
pub use runner::{Engine, StartedTurn, TurnRequest, scoped_key, unscoped_key};
pub use runs::CANCELLED_CALL;
pub use sessions::{REDACTED, SessionRef, SessionView, open_secret_options, redact, session_uuid};
