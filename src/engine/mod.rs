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
mod writer;

pub use assemble::{MessageAssembler, turn_messages};
pub use error::EngineError;
pub use follow::Follow;
pub use input::{InputMessage, PendingCall};
pub use parts::file_url;
pub use runner::{Engine, StartedTurn, TurnRequest};
pub use runs::CANCELLED_CALL;
pub use sessions::{
    REDACTED, SessionView, create_session, open_secret_options, redact, session_for_key,
};
