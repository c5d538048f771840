//! Schedules and their occurrences (run history). An occurrence is claimed by the
//! transaction that moves its schedule's `next_at` past it and inserts its row under the
//! unique key of (schedule, planned time): of any number of processes, one claims it.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::Stamp;
use super::keyset::Keyset;
use super::{Page, Store, StoreError, with_db, with_writer};
use crate::model::{
    Content, MessageId, Occurrence, OccurrenceKind, OccurrenceReason, OccurrenceStatus, ProcessId,
    Schedule, ScheduleId, ScheduleRunId, ServerToolRef, SessionId, TenantId, TenantStatus, TurnId,
    TurnStatus, WebhookEvent,
};

const SCHEDULE_COLUMNS: &str = "id, tenant_id, name, agent, agent_version, cron, time_zone, \
     input, agent_config, session_policy, session_id, overlap, catch_up, catch_up_limit, \
     starts_at, ends_at, enabled, paused_reason, paused_at, next_at, created_at, updated_at";

const RUN_COLUMNS: &str = "id, schedule_id, kind, planned_at, status, reason, message, \
     session_id, turn_id, turn_status, started_at, finished_at, created_at";

/// Serializes the schedule writes of one tenant over every process (PostgreSQL): the limit
/// is counted and the row added under it.
const SCHEDULES_LOCK: &str = "SELECT pg_advisory_xact_lock(hashtextextended($1::text, 31))";

#[derive(Serialize, Deserialize)]
struct AgentConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tools: Option<Vec<ServerToolRef>>,
    #[serde(default)]
    options: BTreeMap<String, String>,
}

#[derive(sqlx::FromRow)]
struct ScheduleRow {
    id: ScheduleId,
    tenant_id: TenantId,
    name: Option<String>,
    agent: String,
    agent_version: Option<i64>,
    cron: String,
    time_zone: String,
    input: String,
    agent_config: String,
    session_policy: String,
    session_id: Option<SessionId>,
    overlap: String,
    catch_up: String,
    catch_up_limit: i32,
    starts_at: Option<Stamp>,
    ends_at: Option<Stamp>,
    enabled: bool,
    paused_reason: Option<String>,
    paused_at: Option<Stamp>,
    next_at: Option<Stamp>,
    created_at: Stamp,
    updated_at: Stamp,
}

impl TryFrom<ScheduleRow> for Schedule {
    type Error = StoreError;

    fn try_from(row: ScheduleRow) -> Result<Self, StoreError> {
        let config: AgentConfig = serde_json::from_str(&row.agent_config)?;
        let input: Content = serde_json::from_str(&row.input)?;
        Ok(Schedule {
            id: row.id,
            tenant_id: row.tenant_id,
            name: row.name,
            agent: row.agent,
            agent_version: row.agent_version,
            server_tools: config.tools,
            options: config.options,
            cron: row.cron,
            time_zone: row.time_zone,
            input,
            session_policy: row.session_policy.parse().map_err(StoreError::Corrupt)?,
            session_id: row.session_id,
            overlap: row.overlap.parse().map_err(StoreError::Corrupt)?,
            catch_up: row.catch_up.parse().map_err(StoreError::Corrupt)?,
            catch_up_limit: u32::try_from(row.catch_up_limit).unwrap_or(0),
            starts_at: row.starts_at.map(Into::into),
            ends_at: row.ends_at.map(Into::into),
            enabled: row.enabled,
            paused_reason: row.paused_reason,
            paused_at: row.paused_at.map(Into::into),
            next_at: row.next_at.map(Into::into),
            created_at: row.created_at.into(),
            updated_at: row.updated_at.into(),
        })
    }
}

#[derive(sqlx::FromRow)]
struct RunRow {
    id: ScheduleRunId,
    schedule_id: ScheduleId,
    kind: String,
    planned_at: Stamp,
    status: String,
    reason: Option<String>,
    message: Option<String>,
    session_id: Option<SessionId>,
    turn_id: Option<TurnId>,
    turn_status: Option<String>,
    started_at: Option<Stamp>,
    finished_at: Option<Stamp>,
    created_at: Stamp,
}

impl TryFrom<RunRow> for Occurrence {
    type Error = StoreError;

    fn try_from(row: RunRow) -> Result<Self, StoreError> {
        Ok(Occurrence {
            id: row.id,
            schedule_id: row.schedule_id,
            kind: row.kind.parse().map_err(StoreError::Corrupt)?,
            planned_at: row.planned_at.into(),
            status: row.status.parse().map_err(StoreError::Corrupt)?,
            reason: row
                .reason
                .map(|r| r.parse().map_err(StoreError::Corrupt))
                .transpose()?,
            message: row.message,
            session_id: row.session_id,
            turn_id: row.turn_id,
            turn_status: row
                .turn_status
                .map(|s| s.parse().map_err(StoreError::Corrupt))
                .transpose()?,
            started_at: row.started_at.map(Into::into),
            finished_at: row.finished_at.map(Into::into),
            created_at: row.created_at.into(),
        })
    }
}

/// An occurrence to record with a claim.
#[derive(Debug, Clone)]
pub struct NewOccurrence {
    pub id: ScheduleRunId,
    pub kind: OccurrenceKind,
    pub planned_at: DateTime<Utc>,
    pub status: OccurrenceStatus,
    pub reason: Option<OccurrenceReason>,
    pub message: Option<String>,
}

/// Which due occurrences of a schedule a process claims: those from `seen` (its `next_at`
/// as read), after which its next one is `next`.
#[derive(Debug, Clone, Copy)]
pub struct Claim<'a> {
    pub tenant: &'a TenantId,
    pub schedule: &'a ScheduleId,
    pub seen: DateTime<Utc>,
    pub next: Option<DateTime<Utc>>,
}

/// A webhook message an occurrence's change queues, in the change's transaction.
#[derive(Debug, Clone)]
pub struct ScheduleMessage {
    pub event: WebhookEvent,
    pub agent: String,
    /// JSON: the event's data.
    pub data: String,
}

/// An occurrence this process is to start (or finish), with what it needs to.
#[derive(Debug, Clone)]
pub struct OpenOccurrence {
    pub tenant: TenantId,
    pub schedule: ScheduleId,
    pub id: ScheduleRunId,
    pub kind: OccurrenceKind,
    pub planned_at: DateTime<Utc>,
    pub session: Option<SessionId>,
    pub turn: Option<TurnId>,
}

#[derive(sqlx::FromRow)]
struct OpenRow {
    tenant_id: TenantId,
    schedule_id: ScheduleId,
    id: ScheduleRunId,
    kind: String,
    planned_at: Stamp,
    session_id: Option<SessionId>,
    turn_id: Option<TurnId>,
}

impl TryFrom<OpenRow> for OpenOccurrence {
    type Error = StoreError;

    fn try_from(row: OpenRow) -> Result<Self, StoreError> {
        Ok(OpenOccurrence {
            tenant: row.tenant_id,
            schedule: row.schedule_id,
            id: row.id,
            kind: row.kind.parse().map_err(StoreError::Corrupt)?,
            planned_at: row.planned_at.into(),
            session: row.session_id,
            turn: row.turn_id,
        })
    }
}

/// Queues `message` to each enabled endpoint of the tenant's that takes its type.
const ENQUEUE: &str = "INSERT INTO webhook_deliveries (endpoint_id, message_id, tenant_id, \
     event_type, agent, data, status, attempts, queued_at, next_attempt_at, created_at) \
     SELECT e.id, $1, e.tenant_id, $2, $3, $4, 'pending', 0, $5, $5, $5 \
     FROM webhook_endpoints e WHERE e.tenant_id = $6 AND e.run_id IS NULL AND e.enabled \
     AND (e.event_mask & $7) <> 0";

/// Runs [`ENQUEUE`] in a transaction of either backend.
macro_rules! enqueue {
    ($tx:expr, $tenant:expr, $message:expr, $at:expr) => {
        sqlx::query(ENQUEUE)
            .bind(MessageId::generate())
            .bind($message.event.as_str())
            .bind($message.agent.as_str())
            .bind($message.data.as_str())
            .bind(Stamp($at))
            .bind(*$tenant)
            .bind($message.event.bit())
            .execute(&mut *$tx)
            .await
    };
}

impl Store {
    pub async fn count_schedules(&self, tenant: &TenantId) -> Result<i64, StoreError> {
        Ok(with_db!(self, |pool| {
            sqlx::query_scalar("SELECT COUNT(*) FROM schedules WHERE tenant_id = $1")
                .bind(tenant)
                .fetch_one(pool)
                .await
        })?)
    }

    /// Records a new schedule unless the tenant already has `max` (`false`): counted and
    /// written in one transaction.
    pub async fn insert_schedule(&self, schedule: &Schedule, max: u32) -> Result<bool, StoreError> {
        let postgres = matches!(self.db, super::Db::Postgres(_));
        let config = serde_json::to_string(&AgentConfig {
            tools: schedule.server_tools.clone(),
            options: schedule.options.clone(),
        })?;
        let input = serde_json::to_string(&schedule.input)?;
        let inserted = with_writer!(self, |pool| {
            let mut tx = pool.begin().await?;
            if postgres {
                sqlx::query(SCHEDULES_LOCK)
                    .bind(schedule.tenant_id.to_uuid().to_string())
                    .execute(&mut *tx)
                    .await?;
            }
            let inserted = sqlx::query(
                "INSERT INTO schedules (id, tenant_id, name, agent, agent_version, cron, \
                 time_zone, input, agent_config, session_policy, session_id, overlap, catch_up, \
                 catch_up_limit, starts_at, ends_at, enabled, paused_reason, paused_at, next_at, \
                 created_at, updated_at) \
                 SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, \
                 $17, NULL, $18, $19, $20, $20 \
                 WHERE (SELECT COUNT(*) FROM schedules WHERE tenant_id = $2) < $21",
            )
            .bind(schedule.id)
            .bind(schedule.tenant_id)
            .bind(&schedule.name)
            .bind(&schedule.agent)
            .bind(schedule.agent_version)
            .bind(&schedule.cron)
            .bind(&schedule.time_zone)
            .bind(&input)
            .bind(&config)
            .bind(schedule.session_policy.as_str())
            .bind(schedule.session_id)
            .bind(schedule.overlap.as_str())
            .bind(schedule.catch_up.as_str())
            .bind(schedule.catch_up_limit as i32)
            .bind(schedule.starts_at.map(Stamp))
            .bind(schedule.ends_at.map(Stamp))
            .bind(schedule.enabled)
            .bind(schedule.paused_at.map(Stamp))
            .bind(schedule.next_at.map(Stamp))
            .bind(Stamp(schedule.created_at))
            .bind(i64::from(max))
            .execute(&mut *tx)
            .await?
            .rows_affected();
            tx.commit().await?;
            Ok::<_, sqlx::Error>(inserted)
        })?;
        Ok(inserted == 1)
    }

    /// Writes a schedule's changeable fields as they are in `schedule`, if it still exists.
    pub async fn update_schedule(&self, schedule: &Schedule) -> Result<(), StoreError> {
        let config = serde_json::to_string(&AgentConfig {
            tools: schedule.server_tools.clone(),
            options: schedule.options.clone(),
        })?;
        let input = serde_json::to_string(&schedule.input)?;
        let updated = with_writer!(self, |pool| {
            sqlx::query(
                "UPDATE schedules SET name = $3, cron = $4, time_zone = $5, input = $6, \
                 agent_config = $7, overlap = $8, catch_up = $9, catch_up_limit = $10, \
                 starts_at = $11, ends_at = $12, enabled = $13, paused_reason = $14, \
                 paused_at = $15, next_at = $16, updated_at = $17, agent_version = $18 \
                 WHERE tenant_id = $1 AND id = $2",
            )
            .bind(schedule.tenant_id)
            .bind(schedule.id)
            .bind(&schedule.name)
            .bind(&schedule.cron)
            .bind(&schedule.time_zone)
            .bind(&input)
            .bind(&config)
            .bind(schedule.overlap.as_str())
            .bind(schedule.catch_up.as_str())
            .bind(schedule.catch_up_limit as i32)
            .bind(schedule.starts_at.map(Stamp))
            .bind(schedule.ends_at.map(Stamp))
            .bind(schedule.enabled)
            .bind(&schedule.paused_reason)
            .bind(schedule.paused_at.map(Stamp))
            .bind(schedule.next_at.map(Stamp))
            .bind(Stamp(schedule.updated_at))
            .bind(schedule.agent_version)
            .execute(pool)
            .await
            .map(|done| done.rows_affected())
        })?;
        if updated == 0 {
            return Err(StoreError::NotFound);
        }
        Ok(())
    }

    pub async fn list_schedules(
        &self,
        tenant: &TenantId,
        page: Page,
    ) -> Result<(Vec<Schedule>, bool), StoreError> {
        let keyset = Keyset {
            columns: SCHEDULE_COLUMNS,
            table: "schedules",
            scope: &[("tenant_id", tenant.to_uuid())],
            key: "id",
        };
        let (rows, more): (Vec<ScheduleRow>, bool) = self.keyset_page(keyset, page).await?;
        let schedules = rows
            .into_iter()
            .map(Schedule::try_from)
            .collect::<Result<_, _>>()?;
        Ok((schedules, more))
    }

    pub async fn get_schedule(
        &self,
        tenant: &TenantId,
        id: &ScheduleId,
    ) -> Result<Schedule, StoreError> {
        let row: ScheduleRow = with_db!(self, |pool| {
            sqlx::query_as(sqlx::AssertSqlSafe(format!(
                "SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE tenant_id = $1 AND id = $2"
            )))
            .bind(tenant)
            .bind(id)
            .fetch_one(pool)
            .await
        })?;
        row.try_into()
    }

    /// Deletes a schedule with its run history.
    pub async fn delete_schedule(
        &self,
        tenant: &TenantId,
        id: &ScheduleId,
    ) -> Result<(), StoreError> {
        let deleted = with_writer!(self, |pool| {
            sqlx::query("DELETE FROM schedules WHERE tenant_id = $1 AND id = $2")
                .bind(tenant)
                .bind(id)
                .execute(pool)
                .await
                .map(|done| done.rows_affected())
        })?;
        if deleted == 0 {
            return Err(StoreError::NotFound);
        }
        Ok(())
    }

    /// Pauses the tenant's enabled schedules of `agent` (it is gone), saying why.
    pub async fn pause_agent_schedules(
        &self,
        tenant: &TenantId,
        agent: &str,
        reason: &str,
        at: DateTime<Utc>,
    ) -> Result<u64, StoreError> {
        Ok(with_writer!(self, |pool| {
            sqlx::query(
                "UPDATE schedules SET enabled = FALSE, paused_reason = $3, paused_at = $4, \
                 next_at = NULL, updated_at = $4 \
                 WHERE tenant_id = $1 AND agent = $2 AND enabled",
            )
            .bind(tenant)
            .bind(agent)
            .bind(reason)
            .bind(Stamp(at))
            .execute(pool)
            .await
            .map(|done| done.rows_affected())
        })?)
    }

    /// The earliest planned occurrence of any enabled schedule.
    pub async fn next_schedule_due(&self) -> Result<Option<DateTime<Utc>>, StoreError> {
        let next: Option<Stamp> = with_db!(self, |pool| {
            sqlx::query_scalar("SELECT MIN(next_at) FROM schedules WHERE enabled")
                .fetch_one(pool)
                .await
        })?;
        Ok(next.map(Into::into))
    }

    /// Enabled schedules due by `now` (oldest first), with their tenant's status.
    pub async fn due_schedules(
        &self,
        now: DateTime<Utc>,
        limit: i64,
    ) -> Result<Vec<(Schedule, TenantStatus)>, StoreError> {
        #[derive(sqlx::FromRow)]
        struct Due {
            #[sqlx(flatten)]
            schedule: ScheduleRow,
            tenant_status: String,
        }
        let rows: Vec<Due> = with_db!(self, |pool| {
            sqlx::query_as(sqlx::AssertSqlSafe(format!(
                "SELECT {}, t.status AS tenant_status FROM schedules s \
                 JOIN tenants t ON t.id = s.tenant_id \
                 WHERE s.enabled AND s.next_at <= $1 ORDER BY s.next_at LIMIT $2",
                SCHEDULE_COLUMNS
                    .split(", ")
                    .map(|c| format!("s.{c}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )))
            .bind(Stamp(now))
            .bind(limit)
            .fetch_all(pool)
            .await
        })?;
        rows.into_iter()
            .map(|row| {
                let status = match row.tenant_status.as_str() {
                    "suspended" => TenantStatus::Suspended,
                    _ => TenantStatus::Active,
                };
                Ok((Schedule::try_from(row.schedule)?, status))
            })
            .collect()
    }

    /// Claims a schedule's occurrences: moves its `next_at` from `claim.seen` to
    /// `claim.next` and records `occurrences`, in one transaction, unless another process
    /// moved it first (`None`). The occurrences recorded (one already recorded is left out).
    pub async fn claim_occurrences(
        &self,
        claim: &Claim<'_>,
        occurrences: &[NewOccurrence],
        process: &ProcessId,
        now: DateTime<Utc>,
    ) -> Result<Option<Vec<ScheduleRunId>>, StoreError> {
        let Claim {
            tenant,
            schedule,
            seen,
            next,
        } = *claim;
        Ok(with_writer!(self, |pool| {
            let mut tx = pool.begin().await?;
            let moved = sqlx::query(
                "UPDATE schedules SET next_at = $4 \
                 WHERE tenant_id = $1 AND id = $2 AND next_at = $3 AND enabled",
            )
            .bind(tenant)
            .bind(schedule)
            .bind(Stamp(seen))
            .bind(next.map(Stamp))
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if moved == 0 {
                return Ok::<_, sqlx::Error>(None);
            }
            let mut recorded = Vec::new();
            for occurrence in occurrences {
                let id: Option<ScheduleRunId> = sqlx::query_scalar(
                    "INSERT INTO schedule_runs (id, tenant_id, schedule_id, kind, planned_at, \
                     status, reason, message, claimed_by, claimed_at, created_at, finished_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10, \
                     CASE WHEN $6 = 'not_started' THEN $10 END) \
                     ON CONFLICT (schedule_id, planned_at) WHERE kind <> 'manual' DO NOTHING \
                     RETURNING id",
                )
                .bind(occurrence.id)
                .bind(tenant)
                .bind(schedule)
                .bind(occurrence.kind.as_str())
                .bind(Stamp(occurrence.planned_at))
                .bind(occurrence.status.as_str())
                .bind(occurrence.reason.map(|r| r.as_str()))
                .bind(&occurrence.message)
                .bind(process)
                .bind(Stamp(now))
                .fetch_optional(&mut *tx)
                .await?;
                recorded.extend(id);
            }
            tx.commit().await?;
            Ok(Some(recorded))
        })?)
    }

    /// Records occurrences that started nothing (a paused schedule's), one already recorded
    /// left as it is.
    pub async fn insert_occurrences(
        &self,
        tenant: &TenantId,
        schedule: &ScheduleId,
        occurrences: &[NewOccurrence],
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        with_writer!(self, |pool| {
            let mut tx = pool.begin().await?;
            for occurrence in occurrences {
                sqlx::query(
                    "INSERT INTO schedule_runs (id, tenant_id, schedule_id, kind, planned_at, \
                     status, reason, message, created_at, finished_at) \
                     SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $9 \
                     WHERE EXISTS (SELECT 1 FROM schedules WHERE tenant_id = $2 AND id = $3) \
                     ON CONFLICT (schedule_id, planned_at) WHERE kind <> 'manual' DO NOTHING",
                )
                .bind(occurrence.id)
                .bind(tenant)
                .bind(schedule)
                .bind(occurrence.kind.as_str())
                .bind(Stamp(occurrence.planned_at))
                .bind(occurrence.status.as_str())
                .bind(occurrence.reason.map(|r| r.as_str()))
                .bind(&occurrence.message)
                .bind(Stamp(now))
                .execute(&mut *tx)
                .await?;
            }
            tx.commit().await
        })?;
        Ok(())
    }

    /// Whether occurrences of the schedule older than `before` wait behind a running one.
    pub async fn schedule_has_waiting(
        &self,
        tenant: &TenantId,
        schedule: &ScheduleId,
        before: &ScheduleRunId,
    ) -> Result<bool, StoreError> {
        let waiting: i64 = with_db!(self, |pool| {
            sqlx::query_scalar(
                "SELECT COUNT(*) FROM schedule_runs WHERE tenant_id = $1 AND schedule_id = $2 \
                 AND status = 'waiting' AND id < $3",
            )
            .bind(tenant)
            .bind(schedule)
            .bind(before)
            .fetch_one(pool)
            .await
        })?;
        Ok(waiting > 0)
    }

    /// Records an occurrence asked for now (`POST /schedules/{id}/run`), claimed by
    /// `process`.
    pub async fn insert_manual_occurrence(
        &self,
        tenant: &TenantId,
        schedule: &ScheduleId,
        id: &ScheduleRunId,
        process: &ProcessId,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        with_writer!(self, |pool| {
            sqlx::query(
                "INSERT INTO schedule_runs (id, tenant_id, schedule_id, kind, planned_at, \
                 status, claimed_by, claimed_at, created_at) \
                 SELECT $1, $2, $3, 'manual', $5, 'pending', $4, $5, $5 \
                 WHERE EXISTS (SELECT 1 FROM schedules WHERE tenant_id = $2 AND id = $3)",
            )
            .bind(id)
            .bind(tenant)
            .bind(schedule)
            .bind(process)
            .bind(Stamp(now))
            .execute(pool)
            .await
            .map(|done| done.rows_affected())
        })
        .and_then(|inserted| {
            if inserted == 0 {
                Err(sqlx::Error::RowNotFound)
            } else {
                Ok(())
            }
        })?;
        Ok(())
    }

    pub async fn get_occurrence(
        &self,
        tenant: &TenantId,
        id: &ScheduleRunId,
    ) -> Result<Occurrence, StoreError> {
        let row: RunRow = with_db!(self, |pool| {
            sqlx::query_as(sqlx::AssertSqlSafe(format!(
                "SELECT {RUN_COLUMNS} FROM schedule_runs WHERE tenant_id = $1 AND id = $2"
            )))
            .bind(tenant)
            .bind(id)
            .fetch_one(pool)
            .await
        })?;
        row.try_into()
    }

    /// A schedule's occurrences, newest first.
    pub async fn list_occurrences(
        &self,
        tenant: &TenantId,
        schedule: &ScheduleId,
        page: Page,
    ) -> Result<(Vec<Occurrence>, bool), StoreError> {
        let keyset = Keyset {
            columns: RUN_COLUMNS,
            table: "schedule_runs",
            scope: &[
                ("tenant_id", tenant.to_uuid()),
                ("schedule_id", schedule.to_uuid()),
            ],
            key: "id",
        };
        let (rows, more): (Vec<RunRow>, bool) = self.keyset_page(keyset, page).await?;
        let occurrences = rows
            .into_iter()
            .map(Occurrence::try_from)
            .collect::<Result<_, _>>()?;
        Ok((occurrences, more))
    }

    /// The session a pending occurrence's turn runs in: `session` unless one was set
    /// before (by an earlier attempt), which it then is.
    pub async fn set_occurrence_session(
        &self,
        tenant: &TenantId,
        id: &ScheduleRunId,
        session: &SessionId,
    ) -> Result<SessionId, StoreError> {
        Ok(with_writer!(self, |pool| {
            let mut tx = pool.begin().await?;
            sqlx::query(
                "UPDATE schedule_runs SET session_id = $3 \
                 WHERE tenant_id = $1 AND id = $2 AND session_id IS NULL",
            )
            .bind(tenant)
            .bind(id)
            .bind(session)
            .execute(&mut *tx)
            .await?;
            let set: SessionId = sqlx::query_scalar(
                "SELECT session_id FROM schedule_runs WHERE tenant_id = $1 AND id = $2",
            )
            .bind(tenant)
            .bind(id)
            .fetch_one(&mut *tx)
            .await?;
            tx.commit().await?;
            Ok::<_, sqlx::Error>(set)
        })?)
    }

    /// A pending occurrence started `turn` (`false`: it was not pending any more).
    pub async fn mark_occurrence_started(
        &self,
        tenant: &TenantId,
        id: &ScheduleRunId,
        session: &SessionId,
        turn: &TurnId,
        message: &ScheduleMessage,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        Ok(with_writer!(self, |pool| {
            let mut tx = pool.begin().await?;
            let done = sqlx::query(
                "UPDATE schedule_runs SET status = 'started', session_id = $3, turn_id = $4, \
                 started_at = $5 WHERE tenant_id = $1 AND id = $2 AND status = 'pending'",
            )
            .bind(tenant)
            .bind(id)
            .bind(session)
            .bind(turn)
            .bind(Stamp(now))
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if done == 1 {
                enqueue!(tx, tenant, message, now)?;
            }
            tx.commit().await?;
            Ok::<_, sqlx::Error>(done == 1)
        })?)
    }

    /// A pending or waiting occurrence starts no turn, for `reason` (with the failure's
    /// message queued when there is one). `false`: it was neither.
    pub async fn mark_occurrence_not_started(
        &self,
        tenant: &TenantId,
        id: &ScheduleRunId,
        reason: OccurrenceReason,
        detail: Option<&str>,
        message: Option<&ScheduleMessage>,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        Ok(with_writer!(self, |pool| {
            let mut tx = pool.begin().await?;
            let done = sqlx::query(
                "UPDATE schedule_runs SET status = 'not_started', reason = $3, message = $4, \
                 finished_at = $5 \
                 WHERE tenant_id = $1 AND id = $2 AND status IN ('pending', 'waiting')",
            )
            .bind(tenant)
            .bind(id)
            .bind(reason.as_str())
            .bind(detail)
            .bind(Stamp(now))
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if done == 1
                && let Some(message) = message
            {
                enqueue!(tx, tenant, message, now)?;
            }
            tx.commit().await?;
            Ok::<_, sqlx::Error>(done == 1)
        })?)
    }

    /// A pending occurrence waits behind a running one, unless `max` already do
    /// (`false`).
    pub async fn mark_occurrence_waiting(
        &self,
        tenant: &TenantId,
        schedule: &ScheduleId,
        id: &ScheduleRunId,
        max: u32,
    ) -> Result<bool, StoreError> {
        Ok(with_writer!(self, |pool| {
            sqlx::query(
                "UPDATE schedule_runs SET status = 'waiting' \
                 WHERE tenant_id = $1 AND id = $2 AND status = 'pending' \
                 AND (SELECT COUNT(*) FROM schedule_runs w WHERE w.tenant_id = $1 \
                      AND w.schedule_id = $3 AND w.status = 'waiting') < $4",
            )
            .bind(tenant)
            .bind(id)
            .bind(schedule)
            .bind(i64::from(max))
            .execute(pool)
            .await
            .map(|done| done.rows_affected())
        })? == 1)
    }

    /// Whether a turn one of the schedule's occurrences started is still queued or running.
    pub async fn schedule_has_active_turn(
        &self,
        tenant: &TenantId,
        schedule: &ScheduleId,
    ) -> Result<bool, StoreError> {
        let active: i64 = with_db!(self, |pool| {
            sqlx::query_scalar(
                "SELECT COUNT(*) FROM schedule_runs r JOIN turns t \
                 ON t.tenant_id = r.tenant_id AND t.id = r.turn_id \
                 WHERE r.tenant_id = $1 AND r.schedule_id = $2 AND r.status = 'started' \
                 AND t.status IN ('queued', 'running')",
            )
            .bind(tenant)
            .bind(schedule)
            .fetch_one(pool)
            .await
        })?;
        Ok(active > 0)
    }

    /// Claims, for `process`, the oldest waiting occurrence of each schedule with no
    /// occurrence pending or running any more.
    pub async fn claim_waiting_occurrences(
        &self,
        process: &ProcessId,
        now: DateTime<Utc>,
    ) -> Result<Vec<OpenOccurrence>, StoreError> {
        let candidates: Vec<OpenRow> = with_db!(self, |pool| {
            sqlx::query_as(
                "SELECT w.tenant_id, w.schedule_id, w.id, w.kind, w.planned_at, w.session_id, \
                 w.turn_id FROM schedule_runs w WHERE w.status = 'waiting' \
                 AND NOT EXISTS (SELECT 1 FROM schedule_runs o \
                    WHERE o.schedule_id = w.schedule_id AND o.status = 'waiting' \
                    AND o.id < w.id) \
                 AND NOT EXISTS (SELECT 1 FROM schedule_runs p \
                    WHERE p.schedule_id = w.schedule_id AND p.status = 'pending') \
                 AND NOT EXISTS (SELECT 1 FROM schedule_runs r JOIN turns t \
                    ON t.tenant_id = r.tenant_id AND t.id = r.turn_id \
                    WHERE r.schedule_id = w.schedule_id AND r.status = 'started' \
                    AND t.status IN ('queued', 'running')) \
                 LIMIT 100",
            )
            .fetch_all(pool)
            .await
        })?;
        let mut claimed = Vec::new();
        for row in candidates {
            let took = with_writer!(self, |pool| {
                sqlx::query(
                    "UPDATE schedule_runs SET status = 'pending', claimed_by = $3, \
                     claimed_at = $4 WHERE tenant_id = $1 AND id = $2 AND status = 'waiting'",
                )
                .bind(row.tenant_id)
                .bind(row.id)
                .bind(process)
                .bind(Stamp(now))
                .execute(pool)
                .await
                .map(|done| done.rows_affected())
            })?;
            if took == 1 {
                claimed.push(row.try_into()?);
            }
        }
        Ok(claimed)
    }

    /// Takes over, for `process`, pending occurrences claimed before `cutoff` (whose
    /// claimer stopped before it started their turn, or never could).
    pub async fn take_stale_occurrences(
        &self,
        process: &ProcessId,
        cutoff: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<Vec<OpenOccurrence>, StoreError> {
        let rows: Vec<OpenRow> = with_writer!(self, |pool| {
            sqlx::query_as(
                "UPDATE schedule_runs SET claimed_by = $1, claimed_at = $2 \
                 WHERE status = 'pending' AND claimed_at < $3 \
                 RETURNING tenant_id, schedule_id, id, kind, planned_at, session_id, turn_id",
            )
            .bind(process)
            .bind(Stamp(now))
            .bind(Stamp(cutoff))
            .fetch_all(pool)
            .await
        })?;
        rows.into_iter().map(OpenOccurrence::try_from).collect()
    }

    /// Started occurrences whose turn has ended, with how it did.
    pub async fn ended_occurrences(&self) -> Result<Vec<(OpenOccurrence, TurnStatus)>, StoreError> {
        #[derive(sqlx::FromRow)]
        struct Ended {
            #[sqlx(flatten)]
            open: OpenRow,
            turn_status: String,
        }
        let rows: Vec<Ended> = with_db!(self, |pool| {
            sqlx::query_as(
                "SELECT r.tenant_id, r.schedule_id, r.id, r.kind, r.planned_at, r.session_id, \
                 r.turn_id, t.status AS turn_status FROM schedule_runs r JOIN turns t \
                 ON t.tenant_id = r.tenant_id AND t.id = r.turn_id \
                 WHERE r.status = 'started' AND t.status NOT IN ('queued', 'running') \
                 LIMIT 100",
            )
            .fetch_all(pool)
            .await
        })?;
        rows.into_iter()
            .map(|row| {
                Ok((
                    row.open.try_into()?,
                    row.turn_status.parse().map_err(StoreError::Corrupt)?,
                ))
            })
            .collect()
    }

    /// A started occurrence's turn ended as `status` (`false`: it was recorded already).
    pub async fn finish_occurrence(
        &self,
        tenant: &TenantId,
        id: &ScheduleRunId,
        status: TurnStatus,
        message: &ScheduleMessage,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        Ok(with_writer!(self, |pool| {
            let mut tx = pool.begin().await?;
            let done = sqlx::query(
                "UPDATE schedule_runs SET status = 'finished', turn_status = $3, \
                 finished_at = $4 WHERE tenant_id = $1 AND id = $2 AND status = 'started'",
            )
            .bind(tenant)
            .bind(id)
            .bind(status.as_str())
            .bind(Stamp(now))
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if done == 1 {
                enqueue!(tx, tenant, message, now)?;
            }
            tx.commit().await?;
            Ok::<_, sqlx::Error>(done == 1)
        })?)
    }

    /// The schedule an occurrence belongs to, whoever's tenant: for a process finishing
    /// an occurrence it found.
    pub async fn get_schedule_of(
        &self,
        tenant: &TenantId,
        schedule: &ScheduleId,
    ) -> Result<Option<Schedule>, StoreError> {
        match self.get_schedule(tenant, schedule).await {
            Ok(schedule) => Ok(Some(schedule)),
            Err(StoreError::NotFound) => Ok(None),
            Err(e) => Err(e),
        }
    }
}
