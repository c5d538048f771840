//! Schedules: a tenant's agent started on a cron expression in a time zone. The operations
//! faces call (create, read, change, delete, run now, run history), and the scheduler that
//! starts due occurrences through the engine's own turn admission (quotas, limits,
//! idempotency and webhooks all apply), each occurrence at most once over every process.

mod cron;
mod occurrence;
mod scheduler;

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{Engine, EngineError};
use crate::agents::SessionConfigRequest;
use crate::config::{OptionKind, SchedulesSettings};
use crate::model::{
    CatchUp, Content, FieldError, Occurrence, Overlap, Schedule, ScheduleId, ScheduleRunId,
    ServerToolRef, SessionPolicy, TenantId,
};
use crate::store::{Page, Store, StoreError};

pub use cron::CronSchedule;

/// The most missed occurrences `up_to` catches up.
pub const MAX_CATCH_UP: u32 = 100;

#[derive(Debug, thiserror::Error)]
pub enum ScheduleError {
    #[error(transparent)]
    Invalid(#[from] FieldError),
    #[error("{0} not found")]
    NotFound(&'static str),
    #[error("a tenant may have at most {0} schedules")]
    TooMany(u32),
    #[error(transparent)]
    Engine(EngineError),
    #[error(transparent)]
    Store(StoreError),
}

impl From<StoreError> for ScheduleError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::NotFound => ScheduleError::NotFound("schedule"),
            other => ScheduleError::Store(other),
        }
    }
}

impl From<EngineError> for ScheduleError {
    fn from(error: EngineError) -> Self {
        match error {
            EngineError::Invalid(field) => ScheduleError::Invalid(field),
            other => ScheduleError::Engine(other),
        }
    }
}

/// A schedule as a tenant asks for it.
#[derive(Debug, Clone)]
pub struct NewSchedule {
    pub name: Option<String>,
    pub agent: String,
    pub agent_version: Option<i64>,
    pub server_tools: Option<Vec<ServerToolRef>>,
    pub options: BTreeMap<String, String>,
    pub cron: String,
    pub time_zone: String,
    pub input: Content,
    pub session_policy: SessionPolicy,
    pub overlap: Overlap,
    pub catch_up: CatchUp,
    pub catch_up_limit: u32,
    pub starts_at: Option<DateTime<Utc>>,
    pub ends_at: Option<DateTime<Utc>>,
    pub enabled: bool,
}

/// What a PATCH changes (`None`: unchanged; `Some(None)`: removed).
#[derive(Debug, Clone, Default)]
pub struct SchedulePatch {
    pub name: Option<Option<String>>,
    pub cron: Option<String>,
    pub time_zone: Option<String>,
    pub input: Option<Content>,
    pub overlap: Option<Overlap>,
    pub catch_up: Option<CatchUp>,
    pub catch_up_limit: Option<u32>,
    pub starts_at: Option<Option<DateTime<Utc>>>,
    pub ends_at: Option<Option<DateTime<Utc>>>,
    pub enabled: Option<bool>,
}

/// The schedules' operations, and the scheduler of this process.
#[derive(Debug)]
pub struct Schedules {
    engine: Arc<Engine>,
    store: Store,
    settings: SchedulesSettings,
    /// Wakes the scheduler: a schedule changed, an occurrence ended.
    wake: Notify,
    stop: CancellationToken,
    tracker: TaskTracker,
}

impl Schedules {
    pub fn new(engine: Arc<Engine>, store: Store, settings: SchedulesSettings) -> Arc<Schedules> {
        Arc::new(Schedules {
            engine,
            store,
            settings,
            wake: Notify::new(),
            stop: CancellationToken::new(),
            tracker: TaskTracker::new(),
        })
    }

    pub async fn create(
        &self,
        tenant: &TenantId,
        new: NewSchedule,
    ) -> Result<Schedule, ScheduleError> {
        let now = crate::model::now();
        check_name(new.name.as_deref())?;
        let cron = self.check_timing(&new.cron, &new.time_zone, now)?;
        check_window(new.starts_at, new.ends_at)?;
        check_catch_up(new.catch_up, new.catch_up_limit)?;
        let (agent, config) = self
            .check_agent(
                tenant,
                &new.agent,
                new.agent_version,
                new.server_tools.clone(),
                &new.options,
            )
            .await?;
        agent.check_content(&new.input, "input")?;
        agent.check_input_body(&new.input, "input")?;
        let count = self.store.count_schedules(tenant).await?;
        if count >= i64::from(self.settings.max_per_tenant) {
            return Err(ScheduleError::TooMany(self.settings.max_per_tenant));
        }
        let session_id = match new.session_policy {
            SessionPolicy::New => None,
            SessionPolicy::Fixed => Some(
                self.engine
                    .create_session_on_version(
                        tenant,
                        &new.agent,
                        new.agent_version,
                        config,
                        Vec::new(),
                    )
                    .await?
                    .id,
            ),
        };
        let mut schedule = Schedule {
            id: ScheduleId::generate(),
            tenant_id: *tenant,
            name: new.name,
            agent: new.agent,
            agent_version: new.agent_version,
            server_tools: new.server_tools,
            options: new.options,
            cron: new.cron,
            time_zone: new.time_zone,
            input: new.input,
            session_policy: new.session_policy,
            session_id,
            overlap: new.overlap,
            catch_up: new.catch_up,
            catch_up_limit: new.catch_up_limit,
            starts_at: new.starts_at,
            ends_at: new.ends_at,
            enabled: new.enabled,
            paused_reason: None,
            paused_at: (!new.enabled).then_some(now),
            next_at: None,
            created_at: now,
            updated_at: now,
        };
        schedule.next_at = first_occurrence(&cron, &schedule, now);
        if !self
            .store
            .insert_schedule(&schedule, self.settings.max_per_tenant)
            .await?
        {
            return Err(ScheduleError::TooMany(self.settings.max_per_tenant));
        }
        self.wake.notify_one();
        Ok(schedule)
    }

    pub async fn list(
        &self,
        tenant: &TenantId,
        page: Page,
    ) -> Result<(Vec<Schedule>, bool), ScheduleError> {
        Ok(self.store.list_schedules(tenant, page).await?)
    }

    pub async fn get(&self, tenant: &TenantId, id: &ScheduleId) -> Result<Schedule, ScheduleError> {
        Ok(self.store.get_schedule(tenant, id).await?)
    }

    /// Changes a schedule. Its next occurrence is computed again from now when its timing
    /// or state changed; resuming it records the occurrences it slept through as `paused`.
    pub async fn update(
        &self,
        tenant: &TenantId,
        id: &ScheduleId,
        patch: SchedulePatch,
    ) -> Result<Schedule, ScheduleError> {
        let now = crate::model::now();
        let mut schedule = self.store.get_schedule(tenant, id).await?;
        let was_enabled = schedule.enabled;
        if let Some(name) = patch.name {
            check_name(name.as_deref())?;
            schedule.name = name;
        }
        if let Some(cron) = patch.cron {
            schedule.cron = cron;
        }
        if let Some(zone) = patch.time_zone {
            schedule.time_zone = zone;
        }
        if let Some(input) = patch.input {
            let (agent, _) = self
                .engine
                .agent_for_new_session(tenant, &schedule.agent, schedule.agent_version)
                .await?;
            agent.check_content(&input, "input")?;
            agent.check_input_body(&input, "input")?;
            schedule.input = input;
        }
        if let Some(overlap) = patch.overlap {
            schedule.overlap = overlap;
        }
        if let Some(catch_up) = patch.catch_up {
            schedule.catch_up = catch_up;
        }
        if let Some(limit) = patch.catch_up_limit {
            schedule.catch_up_limit = limit;
        }
        if let Some(starts_at) = patch.starts_at {
            schedule.starts_at = starts_at;
        }
        if let Some(ends_at) = patch.ends_at {
            schedule.ends_at = ends_at;
        }
        if let Some(enabled) = patch.enabled {
            if enabled
                && let Err(EngineError::Invalid(refused)) = self
                    .engine
                    .agent_for_new_session(tenant, &schedule.agent, schedule.agent_version)
                    .await
            {
                return Err(FieldError::new(
                    "enabled",
                    format!("the schedule cannot run: {}", refused.message),
                )
                .into());
            }
            schedule.enabled = enabled;
        }
        let cron = self.check_timing(&schedule.cron, &schedule.time_zone, now)?;
        check_window(schedule.starts_at, schedule.ends_at)?;
        check_catch_up(schedule.catch_up, schedule.catch_up_limit)?;
        if schedule.enabled && !was_enabled {
            self.record_paused(&schedule, &cron, now).await?;
            schedule.paused_reason = None;
            schedule.paused_at = None;
        } else if !schedule.enabled && was_enabled {
            schedule.paused_at = Some(now);
        }
        schedule.next_at = first_occurrence(&cron, &schedule, now);
        schedule.updated_at = now;
        self.store.update_schedule(&schedule).await?;
        self.wake.notify_one();
        Ok(schedule)
    }

    /// Deletes a schedule and its run history: it starts nothing more (a turn it started
    /// runs on).
    pub async fn delete(&self, tenant: &TenantId, id: &ScheduleId) -> Result<(), ScheduleError> {
        self.store.delete_schedule(tenant, id).await?;
        self.wake.notify_one();
        Ok(())
    }

    /// Stops the tenant's schedules of an agent that is gone (they are paused, saying so).
    pub async fn stop_agent_schedules(
        &self,
        tenant: &TenantId,
        agent: &str,
    ) -> Result<u64, ScheduleError> {
        let paused = self
            .store
            .pause_agent_schedules(tenant, agent, "agent_missing", crate::model::now())
            .await?;
        Ok(paused)
    }

    /// Starts an occurrence now, beside the planned ones; overlap and quotas apply as to
    /// any. The occurrence as recorded once its turn started or was refused.
    pub async fn run_now(
        self: &Arc<Self>,
        tenant: &TenantId,
        id: &ScheduleId,
    ) -> Result<Occurrence, ScheduleError> {
        let schedule = self.store.get_schedule(tenant, id).await?;
        let run = ScheduleRunId::generate();
        let now = crate::model::now();
        self.store
            .insert_manual_occurrence(tenant, id, &run, &self.engine.process, now)
            .await?;
        let open = crate::store::OpenOccurrence {
            tenant: *tenant,
            schedule: schedule.id,
            id: run,
            kind: crate::model::OccurrenceKind::Manual,
            planned_at: now,
            session: None,
            turn: None,
        };
        self.start_occurrence(&schedule, &open).await;
        Ok(self.store.get_occurrence(tenant, &run).await?)
    }

    /// A schedule's occurrences, newest first.
    pub async fn list_runs(
        &self,
        tenant: &TenantId,
        id: &ScheduleId,
        page: Page,
    ) -> Result<(Vec<Occurrence>, bool), ScheduleError> {
        // Another tenant's schedule is not found, even with no history.
        self.store.get_schedule(tenant, id).await?;
        Ok(self.store.list_occurrences(tenant, id, page).await?)
    }

    fn check_timing(
        &self,
        expression: &str,
        zone: &str,
        now: DateTime<Utc>,
    ) -> Result<CronSchedule, FieldError> {
        let cron = CronSchedule::parse(expression, zone)?;
        cron.check_interval(now, self.settings.min_interval_seconds)?;
        Ok(cron)
    }

    /// The agent a schedule's sessions open (a configured agent, or the tenant's own at
    /// `version` or its published one), and the session configuration it accepts.
    async fn check_agent(
        &self,
        tenant: &TenantId,
        name: &str,
        version: Option<i64>,
        server_tools: Option<Vec<ServerToolRef>>,
        options: &BTreeMap<String, String>,
    ) -> Result<(Arc<crate::agents::Agent>, SessionConfigRequest), ScheduleError> {
        let (agent, _) = self
            .engine
            .agent_for_new_session(tenant, name, version)
            .await?;
        for (option, value) in options {
            let kind = agent
                .check_option(option, value)
                .map_err(|e| FieldError::new(format!("agent.options.{option}"), e.message))?;
            if kind == OptionKind::Secret {
                return Err(FieldError::new(
                    format!("agent.options.{option}"),
                    "a schedule does not store secret options: use the session policy \
                     `fixed` with a session that holds it, or the option's default",
                )
                .into());
            }
        }
        let config = SessionConfigRequest {
            server_tools,
            options: options.clone(),
            client_tools: None,
        };
        agent.resolve_new_session(config.clone())?;
        Ok((agent, config))
    }

    /// Records the occurrences a paused schedule slept through (the latest ones) as not
    /// started, `paused`.
    async fn record_paused(
        &self,
        schedule: &Schedule,
        cron: &CronSchedule,
        now: DateTime<Utc>,
    ) -> Result<(), ScheduleError> {
        let Some(since) = schedule.paused_at else {
            return Ok(());
        };
        let mut times = Vec::new();
        let mut at = since;
        while let Some(next) = cron.next_after(at) {
            if next > now || schedule.ends_at.is_some_and(|end| next > end) {
                break;
            }
            if schedule.starts_at.is_none_or(|start| next >= start) {
                times.push(next);
            }
            at = next;
            if times.len() > 10_000 {
                break;
            }
        }
        let keep = times.len().saturating_sub(scheduler::MAX_RECORDED_MISSES);
        let occurrences: Vec<_> = times[keep..]
            .iter()
            .map(|planned| crate::store::NewOccurrence {
                id: ScheduleRunId::generate(),
                kind: crate::model::OccurrenceKind::Scheduled,
                planned_at: *planned,
                status: crate::model::OccurrenceStatus::NotStarted,
                reason: Some(crate::model::OccurrenceReason::Paused),
                message: None,
            })
            .collect();
        if !occurrences.is_empty() {
            self.store
                .insert_occurrences(&schedule.tenant_id, &schedule.id, &occurrences, now)
                .await?;
        }
        Ok(())
    }
}

/// The first occurrence of an enabled schedule from `now`, within its window.
fn first_occurrence(
    cron: &CronSchedule,
    schedule: &Schedule,
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    if !schedule.enabled {
        return None;
    }
    let next = match schedule.starts_at {
        Some(start) if start > now => cron.next_from(start)?,
        _ => cron.next_after(now)?,
    };
    match schedule.ends_at {
        Some(end) if next > end => None,
        _ => Some(next),
    }
}

fn check_name(name: Option<&str>) -> Result<(), FieldError> {
    match name {
        Some(name) if name.len() > 200 || name.chars().any(char::is_control) => Err(
            FieldError::new("name", "must be at most 200 printable characters"),
        ),
        _ => Ok(()),
    }
}

fn check_window(
    starts_at: Option<DateTime<Utc>>,
    ends_at: Option<DateTime<Utc>>,
) -> Result<(), FieldError> {
    for (field, at) in [("starts_at", starts_at), ("ends_at", ends_at)] {
        if let Some(at) = at
            && !crate::model::is_storable(&at)
        {
            return Err(FieldError::new(
                field,
                "must be between the years 1 and 9999",
            ));
        }
    }
    if let (Some(start), Some(end)) = (starts_at, ends_at)
        && end <= start
    {
        return Err(FieldError::new("ends_at", "must be after starts_at"));
    }
    Ok(())
}

fn check_catch_up(catch_up: CatchUp, limit: u32) -> Result<(), FieldError> {
    if catch_up == CatchUp::UpTo && !(1..=MAX_CATCH_UP).contains(&limit) {
        return Err(FieldError::new(
            "catch_up_limit",
            format!("must be between 1 and {MAX_CATCH_UP} with catch_up `up_to`"),
        ));
    }
    Ok(())
}
