//! The scheduler of one process: it sleeps until the earliest planned occurrence of any
//! schedule (woken sooner when a schedule changes here, and on PostgreSQL looking every
//! `schedules.poll_interval_ms` for other processes' changes), claims what is due, and
//! starts it. Claiming moves the schedule's `next_at` in the transaction that records the
//! occurrences, so of several processes one claims each.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::{CronSchedule, Schedules};
use crate::model::{
    CatchUp, OccurrenceKind, OccurrenceReason, OccurrenceStatus, Schedule, ScheduleRunId,
    TenantStatus,
};
use crate::store::{Backend, Claim, NewOccurrence, OpenOccurrence};

/// The most missed occurrences of one schedule recorded at once (the latest ones).
pub(super) const MAX_RECORDED_MISSES: usize = 100;
/// The most due occurrences of one schedule counted at once after downtime.
const MAX_COUNTED: usize = 10_000;
/// Due schedules claimed per pass.
const BATCH: i64 = 100;
/// How long a claim may stay pending before another process takes it over.
const STALE_CLAIM: Duration = Duration::from_secs(30);
/// On SQLite, the longest sleep (nothing changes behind this process's back).
const SQLITE_IDLE: Duration = Duration::from_secs(60);

impl Schedules {
    /// Starts the scheduler of this process, unless `schedules.enabled` is off.
    pub fn start(self: &Arc<Self>) {
        if !self.settings.enabled {
            tracing::info!("schedules.enabled is off: this process starts no scheduled turn");
            return;
        }
        let this = self.clone();
        self.tracker.spawn(async move { this.run().await });
    }

    /// Stops the scheduler (turns it started run on, as any).
    pub async fn shutdown(&self) {
        self.stop.cancel();
        self.tracker.close();
        self.tracker.wait().await;
    }

    async fn run(self: Arc<Self>) {
        // Whatever a stopped process left half started: on SQLite this process is the only
        // one, so every pending claim is a dead process's.
        let first_cutoff = match self.store.backend() {
            Backend::Sqlite => crate::model::now(),
            Backend::Postgres => crate::model::now() - STALE_CLAIM,
        };
        self.retake(first_cutoff).await;
        let mut last_sweep = tokio::time::Instant::now();
        loop {
            if self.stop.is_cancelled() {
                return;
            }
            let now = crate::model::now();
            if let Err(error) = self.fire_due(now).await {
                tracing::warn!(%error, "cannot start due scheduled occurrences");
            }
            self.start_waiting().await;
            let poll = self.poll_interval();
            if last_sweep.elapsed() >= poll {
                last_sweep = tokio::time::Instant::now();
                self.finish_ended().await;
                if self.store.backend() == Backend::Postgres {
                    self.retake(crate::model::now() - STALE_CLAIM).await;
                }
            }
            let sleep = match self.store.next_schedule_due().await {
                Ok(Some(next)) => (next - crate::model::now())
                    .to_std()
                    .unwrap_or(Duration::ZERO)
                    .min(poll),
                Ok(None) => poll,
                Err(error) => {
                    tracing::warn!(%error, "cannot read when the next schedule is due");
                    poll
                }
            };
            if sleep.is_zero() {
                continue;
            }
            tokio::select! {
                _ = tokio::time::sleep(sleep) => {}
                _ = self.wake.notified() => {}
                _ = self.stop.cancelled() => return,
            }
        }
    }

    fn poll_interval(&self) -> Duration {
        match self.store.backend() {
            Backend::Postgres => Duration::from_millis(self.settings.poll_interval_ms),
            Backend::Sqlite => SQLITE_IDLE,
        }
    }

    /// Claims and starts every occurrence due by `now`.
    async fn fire_due(
        self: &Arc<Self>,
        now: DateTime<Utc>,
    ) -> Result<(), crate::store::StoreError> {
        let due = self.store.due_schedules(now, BATCH).await?;
        for (schedule, tenant_status) in due {
            let Some(seen) = schedule.next_at else {
                continue;
            };
            let cron = match CronSchedule::parse(&schedule.cron, &schedule.time_zone) {
                Ok(cron) => cron,
                Err(error) => {
                    tracing::warn!(schedule_id = %schedule.id, message = %error.message, "a stored schedule no longer parses");
                    continue;
                }
            };
            let plan = plan(&cron, &schedule, seen, now, self.tolerance(), tenant_status);
            let claimed = self
                .store
                .claim_occurrences(
                    &Claim {
                        tenant: &schedule.tenant_id,
                        schedule: &schedule.id,
                        seen,
                        next: plan.next,
                    },
                    &plan.occurrences,
                    &self.engine.process,
                    now,
                )
                .await?;
            let Some(recorded) = claimed else {
                // Another process claimed them.
                continue;
            };
            let to_start: Vec<OpenOccurrence> = plan
                .occurrences
                .iter()
                .filter(|o| o.status == OccurrenceStatus::Pending && recorded.contains(&o.id))
                .map(|o| OpenOccurrence {
                    tenant: schedule.tenant_id,
                    schedule: schedule.id,
                    id: o.id,
                    kind: o.kind,
                    planned_at: o.planned_at,
                    session: None,
                    turn: None,
                })
                .collect();
            if to_start.is_empty() {
                continue;
            }
            let this = self.clone();
            self.tracker.spawn(async move {
                for open in to_start {
                    this.start_occurrence(&schedule, &open).await;
                }
            });
        }
        Ok(())
    }

    fn tolerance(&self) -> chrono::Duration {
        chrono::Duration::milliseconds(self.settings.misfire_tolerance_ms as i64)
    }

    /// Starts the waiting occurrences whose schedule's previous one has ended.
    async fn start_waiting(self: &Arc<Self>) {
        let claimed = match self
            .store
            .claim_waiting_occurrences(&self.engine.process, crate::model::now())
            .await
        {
            Ok(claimed) => claimed,
            Err(error) => {
                tracing::warn!(%error, "cannot claim waiting scheduled occurrences");
                return;
            }
        };
        self.start_claimed(claimed).await;
    }

    /// Takes over the occurrences pending since before `cutoff`, and starts them (their
    /// turn's idempotency key keeps each to one turn).
    async fn retake(self: &Arc<Self>, cutoff: DateTime<Utc>) {
        match self
            .store
            .take_stale_occurrences(&self.engine.process, cutoff, crate::model::now())
            .await
        {
            Ok(taken) => {
                if !taken.is_empty() {
                    tracing::info!(
                        count = taken.len(),
                        "took over scheduled occurrences a stopped process left pending"
                    );
                }
                self.start_claimed(taken).await;
            }
            Err(error) => tracing::warn!(%error, "cannot take over pending scheduled occurrences"),
        }
    }

    async fn start_claimed(self: &Arc<Self>, claimed: Vec<OpenOccurrence>) {
        for open in claimed {
            let schedule = match self
                .store
                .get_schedule_of(&open.tenant, &open.schedule)
                .await
            {
                Ok(Some(schedule)) => schedule,
                Ok(None) => continue,
                Err(error) => {
                    tracing::warn!(%error, "cannot read a scheduled occurrence's schedule");
                    continue;
                }
            };
            let this = self.clone();
            self.tracker.spawn(async move {
                this.start_occurrence(&schedule, &open).await;
            });
        }
    }
}

/// What a pass does with a due schedule.
#[derive(Debug)]
struct Plan {
    occurrences: Vec<NewOccurrence>,
    next: Option<DateTime<Utc>>,
}

/// The occurrences due by `now` from `seen` (the schedule's `next_at`): those planned
/// within `tolerance` of now start; older ones were missed, and the catch-up policy picks
/// which of them start anyway. Then the schedule's next occurrence.
fn plan(
    cron: &CronSchedule,
    schedule: &Schedule,
    seen: DateTime<Utc>,
    now: DateTime<Utc>,
    tolerance: chrono::Duration,
    tenant: TenantStatus,
) -> Plan {
    let mut due = vec![seen];
    let mut last = seen;
    let mut next = None;
    while let Some(after) = cron.next_after(last) {
        if after > now {
            next = Some(after);
            break;
        }
        if due.len() >= MAX_COUNTED {
            // Far behind: the rest counts as missed without being listed.
            next = cron.next_after(now);
            break;
        }
        due.push(after);
        last = after;
    }
    let within = |at: &DateTime<Utc>| schedule.ends_at.is_none_or(|end| *at <= end);
    due.retain(within);
    let next = next.filter(within);
    let late_before = now - tolerance;
    let missed = due.iter().filter(|at| **at < late_before).count();
    let caught_up = match schedule.catch_up {
        CatchUp::None => 0,
        CatchUp::Latest => missed.min(1),
        CatchUp::UpTo => missed.min(schedule.catch_up_limit as usize),
    };
    let first_recorded = (missed - caught_up).saturating_sub(MAX_RECORDED_MISSES);
    let occurrences = due
        .iter()
        .enumerate()
        .skip(first_recorded)
        .map(|(i, planned)| {
            let (kind, starts) = if i < missed {
                (OccurrenceKind::CatchUp, i >= missed - caught_up)
            } else {
                (OccurrenceKind::Scheduled, true)
            };
            let (status, reason) = match (starts, tenant) {
                (false, _) => (OccurrenceStatus::NotStarted, Some(OccurrenceReason::Missed)),
                (true, TenantStatus::Suspended) => (
                    OccurrenceStatus::NotStarted,
                    Some(OccurrenceReason::TenantSuspended),
                ),
                (true, TenantStatus::Active) => (OccurrenceStatus::Pending, None),
            };
            NewOccurrence {
                id: ScheduleRunId::generate(),
                kind: if starts {
                    kind
                } else {
                    OccurrenceKind::Scheduled
                },
                planned_at: *planned,
                status,
                reason,
                message: None,
            }
        })
        .collect();
    Plan { occurrences, next }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schedule(catch_up: CatchUp, limit: u32) -> Schedule {
        let now = crate::model::now();
        Schedule {
            id: crate::model::ScheduleId::generate(),
            tenant_id: crate::model::TenantId::generate(),
            name: None,
            agent: "echo".into(),
            agent_version: None,
            server_tools: None,
            options: Default::default(),
            cron: "*/10 * * * *".into(),
            time_zone: "UTC".into(),
            input: crate::model::Content::Text("hi".into()),
            session_policy: crate::model::SessionPolicy::New,
            session_id: None,
            overlap: crate::model::Overlap::Skip,
            catch_up,
            catch_up_limit: limit,
            starts_at: None,
            ends_at: None,
            enabled: true,
            paused_reason: None,
            paused_at: None,
            next_at: None,
            created_at: now,
            updated_at: now,
        }
    }

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .unwrap()
            .with_timezone(&Utc)
    }

    /// Down from 10:00 to 10:35 with a schedule every ten minutes: 10:00, 10:10 and 10:20
    /// were missed, 10:30 is within the tolerance.
    fn after_downtime(catch_up: CatchUp, limit: u32) -> Vec<(String, &'static str, &'static str)> {
        let cron = CronSchedule::parse("*/10 * * * *", "UTC").unwrap();
        let plan = plan(
            &cron,
            &schedule(catch_up, limit),
            at("2026-05-01T10:00:00Z"),
            at("2026-05-01T10:35:00Z"),
            chrono::Duration::minutes(6),
            TenantStatus::Active,
        );
        assert_eq!(plan.next, Some(at("2026-05-01T10:40:00Z")));
        plan.occurrences
            .iter()
            .map(|o| {
                (
                    o.planned_at.format("%H:%M").to_string(),
                    o.kind.as_str(),
                    o.reason.map_or(o.status.as_str(), |r| r.as_str()),
                )
            })
            .collect()
    }

    #[test]
    fn catch_up_none_records_the_missed_ones_and_starts_the_current() {
        assert_eq!(
            after_downtime(CatchUp::None, 0),
            [
                ("10:00".into(), "scheduled", "missed"),
                ("10:10".into(), "scheduled", "missed"),
                ("10:20".into(), "scheduled", "missed"),
                ("10:30".into(), "scheduled", "pending"),
            ]
        );
    }

    #[test]
    fn catch_up_latest_starts_the_latest_missed_one() {
        assert_eq!(
            after_downtime(CatchUp::Latest, 0),
            [
                ("10:00".into(), "scheduled", "missed"),
                ("10:10".into(), "scheduled", "missed"),
                ("10:20".into(), "catch_up", "pending"),
                ("10:30".into(), "scheduled", "pending"),
            ]
        );
    }

    #[test]
    fn catch_up_up_to_starts_that_many_of_the_latest() {
        assert_eq!(
            after_downtime(CatchUp::UpTo, 2),
            [
                ("10:00".into(), "scheduled", "missed"),
                ("10:10".into(), "catch_up", "pending"),
                ("10:20".into(), "catch_up", "pending"),
                ("10:30".into(), "scheduled", "pending"),
            ]
        );
    }
}
