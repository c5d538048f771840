//! The wire shapes of `/schedules` (`http/schedules.rs`), whose handlers parse raw JSON
//! into private types.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;

use crate::model::{
    CatchUp, Content, OccurrenceKind, OccurrenceReason, OccurrenceStatus, Overlap, ScheduleId,
    ScheduleRunId, ServerToolRef, SessionId, SessionPolicy, TurnId, TurnStatus,
};

/// The agent a schedule starts, and the configuration of the sessions it opens.
#[derive(Serialize, ToSchema)]
pub struct ScheduleAgent {
    /// An agent of `GET /meta`.
    pub name: String,
    /// A version to pin; absent: the published one. Agents declared in the server's
    /// configuration have none to pin.
    #[schema(required = false)]
    pub version: Option<i64>,
    /// Server tools enabled in its sessions, as `POST /sessions` takes them.
    #[schema(required = false)]
    pub tools: Option<Vec<ServerToolRef>>,
    /// Options of its sessions (`text` and `select` ones; a schedule stores no secret).
    #[schema(required = false)]
    pub options: Option<BTreeMap<String, String>>,
}

/// `POST /schedules`. Unknown fields are refused.
#[derive(Serialize, ToSchema)]
pub struct CreateSchedule {
    /// A label, at most 200 characters.
    #[schema(required = false)]
    pub name: Option<String>,
    pub agent: ScheduleAgent,
    /// Five fields (minute hour day-of-month month day-of-week), or six with a leading
    /// seconds field; `L`, `W` and `#` forms. Firing more often than
    /// `schedules.min_interval_seconds` is refused.
    #[schema(example = "0 9 * * 1-5")]
    pub cron: String,
    /// The IANA time zone the expression is read in; `UTC` when absent.
    #[schema(required = false, example = "Europe/Paris")]
    pub time_zone: Option<String>,
    /// The user message each occurrence sends.
    pub input: Content,
    /// `new` (default): a session per occurrence; `fixed`: one session, opened now, that
    /// every occurrence continues.
    #[schema(required = false)]
    pub session_policy: Option<SessionPolicy>,
    /// While the previous occurrence still runs: `skip` (default) or `queue`.
    #[schema(required = false)]
    pub overlap: Option<Overlap>,
    /// Missed occurrences after downtime: `latest` (default), `none`, or `up_to`
    /// `catch_up_limit` of the latest.
    #[schema(required = false)]
    pub catch_up: Option<CatchUp>,
    /// 1 to 100, for `up_to`.
    #[schema(required = false)]
    pub catch_up_limit: Option<u32>,
    /// No occurrence before this time.
    #[schema(required = false)]
    pub starts_at: Option<DateTime<Utc>>,
    /// No occurrence after this time.
    #[schema(required = false)]
    pub ends_at: Option<DateTime<Utc>>,
    /// `false` creates it paused.
    #[schema(required = false)]
    pub enabled: Option<bool>,
}

/// `PATCH /schedules/{schedule_id}`: the fields to change, the others unchanged; `null`
/// removes `name`, `starts_at` or `ends_at`. `enabled: false` pauses it, `true` resumes it
/// (the occurrences it slept through are recorded as `paused`). Unknown fields are refused.
#[derive(Serialize, ToSchema)]
pub struct UpdateSchedule {
    #[schema(required = false)]
    pub name: Option<String>,
    #[schema(required = false)]
    pub cron: Option<String>,
    #[schema(required = false)]
    pub time_zone: Option<String>,
    #[schema(required = false)]
    pub input: Option<Content>,
    #[schema(required = false)]
    pub overlap: Option<Overlap>,
    #[schema(required = false)]
    pub catch_up: Option<CatchUp>,
    #[schema(required = false)]
    pub catch_up_limit: Option<u32>,
    #[schema(required = false)]
    pub starts_at: Option<DateTime<Utc>>,
    #[schema(required = false)]
    pub ends_at: Option<DateTime<Utc>>,
    #[schema(required = false)]
    pub enabled: Option<bool>,
}

/// A schedule.
#[derive(Serialize, ToSchema)]
#[schema(as = Schedule)]
pub struct ScheduleView {
    pub id: ScheduleId,
    pub name: Option<String>,
    pub agent: ScheduleAgent,
    pub cron: String,
    pub time_zone: String,
    pub input: Content,
    pub session_policy: SessionPolicy,
    /// The session every occurrence continues (`fixed`).
    pub session_id: Option<SessionId>,
    pub overlap: Overlap,
    pub catch_up: CatchUp,
    pub catch_up_limit: u32,
    pub starts_at: Option<DateTime<Utc>>,
    pub ends_at: Option<DateTime<Utc>>,
    pub enabled: bool,
    /// Why the server paused it: `agent_missing` (its agent is gone).
    pub paused_reason: Option<String>,
    /// Its next planned occurrence; `null` when paused or ended.
    pub next_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

#[derive(Serialize, ToSchema)]
pub struct ScheduleList {
    pub schedules: Vec<ScheduleView>,
    /// The cursor of the next page, when there is one.
    #[schema(required = false)]
    pub next: Option<String>,
}

/// One occurrence of a schedule.
#[derive(Serialize, ToSchema)]
pub struct ScheduleRun {
    pub id: ScheduleRunId,
    pub schedule_id: ScheduleId,
    pub kind: OccurrenceKind,
    /// When it was planned (for `manual`: when it was asked for).
    pub planned_at: DateTime<Utc>,
    pub status: OccurrenceStatus,
    /// Why it started no turn (status `not_started`).
    #[schema(required = false)]
    pub reason: Option<OccurrenceReason>,
    /// What refused it, when something did.
    #[schema(required = false)]
    pub message: Option<String>,
    pub session_id: Option<SessionId>,
    pub turn_id: Option<TurnId>,
    /// How its turn ended (status `finished`).
    pub turn_status: Option<TurnStatus>,
    /// When its turn was started: `started_at - planned_at` is how late it fired.
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
}

#[derive(Serialize, ToSchema)]
pub struct ScheduleRunList {
    pub runs: Vec<ScheduleRun>,
    #[schema(required = false)]
    pub next: Option<String>,
}
