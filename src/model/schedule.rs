//! Schedules: a tenant's agent started on a cron expression in a time zone, and the
//! occurrences of each (its run history).

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::turn::text_enum;
use super::{
    Content, ScheduleId, ScheduleRunId, ServerToolRef, SessionId, TenantId, TurnId, TurnStatus,
};

/// Which session an occurrence's turn runs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SessionPolicy {
    /// A new session per occurrence.
    New,
    /// One session, opened with the schedule, that every occurrence continues.
    Fixed,
}

text_enum!(SessionPolicy {
    New = "new",
    Fixed = "fixed",
});

/// What an occurrence does while the schedule's previous one still runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Overlap {
    /// It does not start (recorded as skipped).
    Skip,
    /// It waits, and starts once the previous one ended.
    Queue,
}

text_enum!(Overlap {
    Skip = "skip",
    Queue = "queue",
});

/// Which occurrences missed while no process ran the schedule still run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum CatchUp {
    /// None of them.
    None,
    /// The latest missed one only.
    Latest,
    /// The latest `catch_up_limit` missed ones.
    UpTo,
}

text_enum!(CatchUp {
    None = "none",
    Latest = "latest",
    UpTo = "up_to",
});

/// A tenant's schedule.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Schedule {
    pub id: ScheduleId,
    pub tenant_id: TenantId,
    pub name: Option<String>,
    pub agent: String,
    /// The agent's version it is pinned to; `None`: the published one.
    pub agent_version: Option<i64>,
    pub server_tools: Option<Vec<ServerToolRef>>,
    pub options: std::collections::BTreeMap<String, String>,
    pub cron: String,
    pub time_zone: String,
    pub input: Content,
    pub session_policy: SessionPolicy,
    /// The session every occurrence continues, for `SessionPolicy::Fixed`.
    pub session_id: Option<SessionId>,
    pub overlap: Overlap,
    pub catch_up: CatchUp,
    pub catch_up_limit: u32,
    pub starts_at: Option<DateTime<Utc>>,
    pub ends_at: Option<DateTime<Utc>>,
    pub enabled: bool,
    /// Why the server paused it (`agent_missing`), when it did.
    pub paused_reason: Option<String>,
    #[serde(skip)]
    pub paused_at: Option<DateTime<Utc>>,
    /// The next planned occurrence; `None` when there is none (ended, or paused).
    pub next_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// How an occurrence came to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum OccurrenceKind {
    /// At its planned time.
    Scheduled,
    /// Missed while no process ran the schedule, run late by its catch-up policy.
    CatchUp,
    /// Asked for with `POST /schedules/{id}/run`.
    Manual,
}

text_enum!(OccurrenceKind {
    Scheduled = "scheduled",
    CatchUp = "catch_up",
    Manual = "manual",
});

/// pending → started → finished, or waiting → pending, or not_started (with a reason).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum OccurrenceStatus {
    /// Claimed; its turn is being started.
    Pending,
    /// Behind the schedule's running occurrence (overlap `queue`).
    Waiting,
    /// Its turn was started and has not ended.
    Started,
    /// Its turn ended (`turn_status` says how).
    Finished,
    /// No turn was started (`reason` says why).
    NotStarted,
}

text_enum!(OccurrenceStatus {
    Pending = "pending",
    Waiting = "waiting",
    Started = "started",
    Finished = "finished",
    NotStarted = "not_started",
});

/// Why an occurrence started no turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum OccurrenceReason {
    /// The previous occurrence still ran (overlap `skip`), or the fixed session was busy.
    Skipped,
    /// Missed while no process ran the schedule, and its catch-up policy dropped it.
    Missed,
    /// A quota of the tenant's refused the turn.
    Quota,
    /// The schedule was paused (or disabled) at its time.
    Paused,
    /// The tenant was suspended at its time.
    TenantSuspended,
    /// The schedule's agent (or its pinned version) no longer exists or is archived: the
    /// schedule was paused.
    AgentMissing,
    /// Too many occurrences already waited behind the running one (overlap `queue`).
    QueueFull,
    /// The turn was refused for another reason (`message` says which).
    Error,
}

text_enum!(OccurrenceReason {
    Skipped = "skipped",
    Missed = "missed",
    Quota = "quota",
    Paused = "paused",
    TenantSuspended = "tenant_suspended",
    AgentMissing = "agent_missing",
    QueueFull = "queue_full",
    Error = "error",
});

/// One occurrence of a schedule, as its run history shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Occurrence {
    pub id: ScheduleRunId,
    pub schedule_id: ScheduleId,
    pub kind: OccurrenceKind,
    pub planned_at: DateTime<Utc>,
    pub status: OccurrenceStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<OccurrenceReason>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    pub session_id: Option<SessionId>,
    pub turn_id: Option<TurnId>,
    /// How its turn ended, once it did.
    pub turn_status: Option<TurnStatus>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
}
