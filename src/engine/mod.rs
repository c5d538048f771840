//! The protocol-independent core: sessions (by id, UUID or client key), the turn runner,
//! runs (chains of turns a protocol answers one request with, kept with their status by
//! the event writer), the event log and its followers, tenants' turns when they are
//! suspended or deleted, recovery and shutdown. Faces parse their wire format, call these
//! operations and render the events; no protocol's state lives outside them.

mod admission;
mod assemble;
mod call_ids;
mod catalog;
mod cluster;
mod compaction;
mod contexts;
mod error;
mod fanout;
mod follow;
mod histories;
mod history_append;
mod input;
mod labels;
mod lease;
mod pager;
mod parts;
mod quotas;
mod reads;
mod relay;
mod request;
mod runner;
mod runs;
mod scheduler;
mod schedules;
mod session_agents;
mod sessions;
mod tenant_agents;
mod tenants;
#[cfg(test)]
pub(crate) mod testing;
mod transitions;
mod turn_control;
mod turn_log;
mod turn_loop;
mod turn_parts;
mod turn_task;
mod turn_tools;
mod turn_trace;
mod webhooks;
mod writer;

/// The store's values faces see through the engine's API: how a read gives deltas, pages
/// and keyset cursors, usage rows, and the store's error (an outage is told apart by kind).
pub use crate::store::{
    DayUsage, Deltas, ListedRun, Page, RunCursor, RunFilter, RunMessage, StoreError, UsageTotals,
    with_call_budget,
};
pub use assemble::{MessageAssembler, turn_messages};
pub use catalog::{AgentError, AgentWithVersion, TenantAgentPolicy};
pub use contexts::{ResumePart, RunView, ViewParts, resolve_answers};
pub use error::{EngineError, InputError};
pub use follow::Follow;
pub use input::{InputMessage, PendingCall, split_input};
pub use parts::file_url;
pub use quotas::QuotaBook;
pub use request::{Idempotency, StartedTurn, TurnRequest, scoped_key, unscoped_key};
pub use runner::Engine;
pub use runs::CANCELLED_CALL;
pub use schedules::{
    CronSchedule, MAX_CATCH_UP, NewSchedule, ScheduleError, SchedulePatch, Schedules,
};
pub use sessions::{REDACTED, SessionRef, SessionView, open_secret_options, redact, session_uuid};
pub use webhooks::{
    Authorization, CreatedEndpoint, CreatedRunEndpoint, EndpointPatch, NewEndpoint, NewRunEndpoint,
    OutboundMessage, Payload, PayloadFormat, RotatedSecret, RunEndpoint, WebhookError, Webhooks,
};
