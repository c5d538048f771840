//! The Agent Application Protocol v3 face, served at the root.

pub mod events;
pub mod history;
pub mod meta;
pub mod parts;
mod render;
pub mod sessions;
pub mod turns;
mod wire;

use crate::error::ApiError;
use crate::model::SessionId;

/// Parses a session id from the path; one that cannot exist is simply not found.
fn session_id(raw: &str) -> Result<SessionId, ApiError> {
    raw.parse().map_err(|_| ApiError::not_found("session"))
}
