//! Scheduling on this process: its turn slots (one semaphore for the process, one per
//! tenant sized by its concurrent-turn quota), the queue of turns waiting here (bounded
//! globally and per tenant), and the off switches of its queued and running turns. One owned
//! struct, so the engine's other parts ask it rather than share its locks.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use super::error::EngineError;
use crate::model::{Quota, QuotaExceeded, Quotas, TenantId, Turn, TurnError, TurnId};

/// The off switches of this process's queued and running turns.
pub(super) type Controls = Mutex<HashMap<TurnId, Arc<TurnControl>>>;

/// A running or queued turn's off switch, with the reason it was pulled.
#[derive(Debug)]
pub struct TurnControl {
    tenant: TenantId,
    token: CancellationToken,
    reason: Mutex<Option<TurnError>>,
    /// Cancelled once the turn's task ended (its `turn_stop` is durable).
    pub(super) ended: CancellationToken,
}

impl TurnControl {
    fn new(tenant: TenantId) -> Self {
        Self {
            tenant,
            token: CancellationToken::new(),
            reason: Mutex::new(None),
            ended: CancellationToken::new(),
        }
    }

    pub fn stop(&self, reason: TurnError) {
        self.reason
            .lock()
            .expect("turn control lock")
            .get_or_insert(reason);
        self.token.cancel();
    }

    pub fn token(&self) -> &CancellationToken {
        &self.token
    }

    pub fn reason(&self) -> TurnError {
        self.reason
            .lock()
            .expect("turn control lock")
            .clone()
            .unwrap_or_else(|| TurnError::new(TurnError::CANCELLED, "the turn was cancelled"))
    }
}

/// This process's slots, queue and turn controls.
#[derive(Debug)]
pub(super) struct Scheduler {
    global: Arc<Semaphore>,
    /// Each tenant's slots, sized by its concurrent-turn quota when they were made.
    tenants: Mutex<HashMap<TenantId, (usize, Arc<Semaphore>)>>,
    /// Turns waiting for a slot here, and the bound on them.
    queued: AtomicUsize,
    max_queued: usize,
    /// Turns waiting for a slot, per tenant (entries leave at zero).
    queued_by_tenant: Mutex<HashMap<TenantId, usize>>,
    controls: Arc<Controls>,
}

impl Scheduler {
    pub(super) fn new(max_concurrent: usize, max_queued: usize) -> Self {
        Self {
            global: Arc::new(Semaphore::new(max_concurrent)),
            tenants: Mutex::new(HashMap::new()),
            queued: AtomicUsize::new(0),
            max_queued,
            queued_by_tenant: Mutex::new(HashMap::new()),
            controls: Default::default(),
        }
    }

    /// The controls, shared with the event writer (which stops a turn it cannot store).
    pub(super) fn controls(&self) -> Arc<Controls> {
        self.controls.clone()
    }

    /// This process's slots.
    pub(super) fn global(&self) -> Arc<Semaphore> {
        self.global.clone()
    }

    /// The turn's off switch, where commands for it find it from now on.
    pub(super) fn register(&self, turn: &Turn) -> Arc<TurnControl> {
        let control = Arc::new(TurnControl::new(turn.tenant_id));
        self.controls
            .lock()
            .expect("controls lock")
            .insert(turn.id, control.clone());
        control
    }

    /// Forgets a registered turn's control (its turn ended without a task).
    pub(super) fn unregister(&self, turn: &TurnId) {
        self.controls.lock().expect("controls lock").remove(turn);
    }

    /// A slot of the tenant's and one of this process's, if both are free now.
    pub(super) fn try_permits(&self, tenant: &TenantId, quotas: Quotas) -> Option<Permits> {
        let tenant = self.tenant_limit(tenant, quotas).try_acquire_owned().ok()?;
        let global = self.global.clone().try_acquire_owned().ok()?;
        Some((Some(tenant), global))
    }

    /// A place in the queue, within the global bound and the tenant's share of it: the
    /// queue's new depth.
    pub(super) fn reserve_queue_slot(
        &self,
        tenant: &TenantId,
        quotas: Quotas,
    ) -> Result<usize, EngineError> {
        let max = self.max_queued;
        let mut by_tenant = self.queued_by_tenant.lock().expect("queue lock");
        let mine = by_tenant.get(tenant).copied().unwrap_or(0);
        check_tenant_queue(quotas, mine as u64)?;
        self.queued
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .map_err(|_| EngineError::QueueFull)?;
        by_tenant.insert(*tenant, mine + 1);
        Ok(self.queued.load(Ordering::Acquire))
    }

    /// Gives back a place in the queue: the queue's new depth.
    pub(super) fn release_queue_slot(&self, tenant: &TenantId) -> usize {
        let left = self.queued.fetch_sub(1, Ordering::AcqRel) - 1;
        let mut by_tenant = self.queued_by_tenant.lock().expect("queue lock");
        if let Some(mine) = by_tenant.get_mut(tenant) {
            *mine -= 1;
            if *mine == 0 {
                by_tenant.remove(tenant);
            }
        }
        left
    }

    /// The tenant's slots in this process. A changed quota makes new slots: turns holding
    /// the old ones finish, new turns count against the new size.
    pub(super) fn tenant_limit(&self, tenant: &TenantId, quotas: Quotas) -> Arc<Semaphore> {
        let size = concurrent_quota(quotas);
        let mut tenants = self.tenants.lock().expect("tenant limits lock");
        match tenants.get(tenant) {
            Some((made_for, slots)) if *made_for == size => slots.clone(),
            _ => {
                let slots = Arc::new(Semaphore::new(size));
                tenants.insert(*tenant, (size, slots.clone()));
                slots
            }
        }
    }

    pub(super) fn control(&self, turn: &TurnId) -> Option<Arc<TurnControl>> {
        self.controls
            .lock()
            .expect("controls lock")
            .get(turn)
            .cloned()
    }

    pub(super) fn tenant_controls(&self, tenant: &TenantId) -> Vec<Arc<TurnControl>> {
        self.controls
            .lock()
            .expect("controls lock")
            .values()
            .filter(|control| control.tenant == *tenant)
            .cloned()
            .collect()
    }

    pub(super) fn all_controls(&self) -> Vec<Arc<TurnControl>> {
        self.controls
            .lock()
            .expect("controls lock")
            .values()
            .cloned()
            .collect()
    }

    /// Turns this process has queued or running.
    pub(super) fn running_turns(&self) -> usize {
        self.controls.lock().expect("controls lock").len()
    }
}

/// Refuses a turn that would wait beyond the tenant's queued-turn quota (named by its
/// concurrent-turn quota when the tenant may queue none).
pub(super) fn check_tenant_queue(quotas: Quotas, waiting: u64) -> Result<(), EngineError> {
    let allowed = quotas.limit(Quota::QueuedTurns).unwrap_or(0);
    if waiting < allowed {
        return Ok(());
    }
    let (quota, limit) = match allowed {
        0 => (
            Quota::ConcurrentTurns,
            quotas.limit(Quota::ConcurrentTurns).unwrap_or(0),
        ),
        _ => (Quota::QueuedTurns, allowed),
    };
    Err(EngineError::QuotaExceeded(QuotaExceeded {
        quota,
        limit,
        retry_after: 1,
    }))
}

/// The tenant's concurrent-turn quota.
pub(super) fn concurrent_quota(quotas: Quotas) -> usize {
    quotas
        .limit(Quota::ConcurrentTurns)
        .map_or(usize::MAX >> 4, |n| {
            usize::try_from(n).unwrap_or(usize::MAX >> 4)
        })
}

/// A turn's slots: its tenant's on this process (none for a turn taken from the queue,
/// whose claim counted its tenant's turns over every process) and one of this process's.
pub(super) type Permits = (Option<OwnedSemaphorePermit>, OwnedSemaphorePermit);

pub(super) async fn acquire(tenant: Arc<Semaphore>, global: Arc<Semaphore>) -> Option<Permits> {
    let tenant = tenant.acquire_owned().await.ok()?;
    let global = global.acquire_owned().await.ok()?;
    Some((Some(tenant), global))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{QuotaOverrides, SessionId};

    fn quotas(concurrent: u64, queued: u64) -> Quotas {
        let mut own = QuotaOverrides::default();
        own.set(Quota::ConcurrentTurns, Some(concurrent));
        own.set(Quota::QueuedTurns, Some(queued));
        Quotas::resolve(&QuotaOverrides::default(), &own)
    }

    fn turn(tenant: TenantId) -> Turn {
        Turn::queued(
            TurnId::generate(),
            tenant,
            SessionId::generate(),
            Default::default(),
        )
    }

    #[test]
    fn a_tenant_gets_no_more_slots_than_its_quota_and_the_process_no_more_than_its_own() {
        let scheduler = Scheduler::new(3, 10);
        let (a, b) = (TenantId::generate(), TenantId::generate());
        let two = quotas(2, 5);
        let first = scheduler.try_permits(&a, two).expect("a first slot");
        let _second = scheduler.try_permits(&a, two).expect("a second slot");
        assert!(
            scheduler.try_permits(&a, two).is_none(),
            "the tenant's third"
        );
        let _other = scheduler
            .try_permits(&b, two)
            .expect("another tenant's slot");
        assert!(
            scheduler.try_permits(&b, two).is_none(),
            "the process's fourth"
        );
        drop(first);
        assert!(scheduler.try_permits(&a, two).is_some(), "a freed slot");
    }

    #[test]
    fn a_changed_concurrent_quota_makes_new_slots() {
        let scheduler = Scheduler::new(10, 10);
        let tenant = TenantId::generate();
        let _held = scheduler
            .try_permits(&tenant, quotas(1, 0))
            .expect("a slot");
        assert!(scheduler.try_permits(&tenant, quotas(1, 0)).is_none());
        // Raised: the held slot counts against the old size only.
        let _a = scheduler
            .try_permits(&tenant, quotas(2, 0))
            .expect("new slot");
        let _b = scheduler
            .try_permits(&tenant, quotas(2, 0))
            .expect("new slot");
        assert!(scheduler.try_permits(&tenant, quotas(2, 0)).is_none());
    }

    #[test]
    fn the_queue_is_bounded_per_tenant_and_for_the_process() {
        let scheduler = Scheduler::new(1, 3);
        let (a, b) = (TenantId::generate(), TenantId::generate());
        assert_eq!(scheduler.reserve_queue_slot(&a, quotas(1, 2)).unwrap(), 1);
        assert_eq!(scheduler.reserve_queue_slot(&a, quotas(1, 2)).unwrap(), 2);
        match scheduler.reserve_queue_slot(&a, quotas(1, 2)) {
            Err(EngineError::QuotaExceeded(refused)) => {
                assert_eq!(refused.quota, Quota::QueuedTurns);
                assert_eq!(refused.limit, 2);
            }
            other => panic!("expected the tenant's queued-turn quota, got {other:?}"),
        }
        assert_eq!(scheduler.reserve_queue_slot(&b, quotas(1, 5)).unwrap(), 3);
        assert!(matches!(
            scheduler.reserve_queue_slot(&b, quotas(1, 5)),
            Err(EngineError::QueueFull)
        ));
        assert_eq!(scheduler.release_queue_slot(&a), 2);
        assert_eq!(scheduler.reserve_queue_slot(&b, quotas(1, 5)).unwrap(), 3);
    }

    #[test]
    fn a_tenant_that_may_queue_nothing_is_refused_by_its_concurrent_quota() {
        let scheduler = Scheduler::new(1, 3);
        match scheduler.reserve_queue_slot(&TenantId::generate(), quotas(4, 0)) {
            Err(EngineError::QuotaExceeded(refused)) => {
                assert_eq!(refused.quota, Quota::ConcurrentTurns);
                assert_eq!(refused.limit, 4);
            }
            other => panic!("expected the concurrent-turn quota, got {other:?}"),
        }
    }

    #[test]
    fn controls_are_found_by_turn_and_tenant_and_keep_the_first_reason() {
        let scheduler = Scheduler::new(1, 1);
        let tenant = TenantId::generate();
        let (one, two, other) = (turn(tenant), turn(tenant), turn(TenantId::generate()));
        let control = scheduler.register(&one);
        scheduler.register(&two);
        scheduler.register(&other);
        assert_eq!(scheduler.running_turns(), 3);
        assert_eq!(scheduler.tenant_controls(&tenant).len(), 2);
        control.stop(TurnError::new(TurnError::CANCELLED, "first"));
        control.stop(TurnError::new(TurnError::INTERRUPTED, "second"));
        assert!(control.token().is_cancelled());
        assert_eq!(control.reason().message, "first");
        assert!(scheduler.control(&one.id).is_some());
        scheduler.unregister(&one.id);
        assert!(scheduler.control(&one.id).is_none());
        assert_eq!(scheduler.all_controls().len(), 2);
    }
}
