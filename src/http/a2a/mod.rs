//! The A2A face (Agent2Agent protocol, v1.0 and 0.3): every configured agent is an A2A
//! agent with a card, served over JSON-RPC 2.0 (`POST /a2a/{agent}`) and HTTP+JSON
//! (`/a2a/{agent}/…`, 0.3's under `/a2a/{agent}/v1/…`). Tasks are engine runs and contexts
//! sessions, so a context continues over the other faces and the other way round; a task's
//! events are rendered from the durable log, live or replayed after `Last-Event-ID`.

pub mod card;
mod error;
pub mod jsonrpc;
mod list;
mod media;
mod ops;
mod params;
mod parse;
mod push;
mod render;
pub mod rest;
mod sse;
mod tasks;
mod version;
mod wire;

/// Registers the push payload formats (A2A 1.0 and 0.3) with the webhook engine.
pub fn register_formats(webhooks: &crate::engine::Webhooks) {
    for version in [version::Version::V1, version::Version::V03] {
        webhooks.register_format(
            push::PushFormat::name(version),
            std::sync::Arc::new(push::PushFormat(version)),
        );
    }
}
