//! The protocol-independent core: sessions now; turns, events and recovery as they come.

mod error;
mod sessions;

pub use error::EngineError;
pub use sessions::{REDACTED, SessionView, create_session, open_secret_options, redact};
