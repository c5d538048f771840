//! What this process can prove of its lease, on its own monotonic clock.
//!
//! A renewal sent at `t` (this process's clock) makes the database's record of the lease
//! run until the database's `now + lease`, and the database read its clock after `t`. So the
//! lease runs at least until `t + lease` as this process measures it, as long as the two
//! clocks advance at about the same rate; the margin covers their drift. A process that sees
//! `t + lease - margin` pass without a newer renewal can no longer prove that no other
//! process may take its turns: it writes nothing more and stops them (see `cluster.rs`).
//! On SQLite one process serves the database and the lease is always held.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

#[derive(Debug)]
pub struct Lease {
    /// How long a renewal holds, and how much of it is not relied upon.
    length: Duration,
    margin: Duration,
    /// Until when the lease is proven; `None`: never renewed yet. Always held when `alone`.
    proven_until: Mutex<Option<Instant>>,
    alone: bool,
    /// Woken at each renewal.
    renewed: Notify,
}

impl Lease {
    /// A lease of `length`, of which `margin` is not relied upon; `alone`: the process is
    /// the database's only one (SQLite), and no other may take its turns.
    pub fn new(length: Duration, margin: Duration, alone: bool) -> Self {
        Self {
            length,
            margin: margin.min(length),
            proven_until: Mutex::new(None),
            alone,
            renewed: Notify::new(),
        }
    }

    /// A renewal (or registration) sent at `sent` succeeded.
    pub fn renewed(&self, sent: Instant) {
        let until = sent + self.length - self.margin;
        let mut proven = self.proven_until.lock().expect("lease lock");
        if proven.is_none_or(|current| current < until) {
            *proven = Some(until);
        }
        drop(proven);
        self.renewed.notify_waiters();
    }

    /// Whether this process can prove now that its turns are still its own.
    pub fn is_held(&self) -> bool {
        self.alone
            || self
                .proven_until()
                .is_some_and(|until| Instant::now() < until)
    }

    /// Until when the lease is proven (`None`: not yet).
    pub fn proven_until(&self) -> Option<Instant> {
        *self.proven_until.lock().expect("lease lock")
    }

    /// Resolves at the next renewal.
    pub async fn next_renewal(&self) {
        self.renewed.notified().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_is_proven_until_its_last_renewal_plus_the_lease_minus_the_margin() {
        let lease = Lease::new(Duration::from_secs(5), Duration::from_secs(1), false);
        assert!(!lease.is_held(), "never renewed");
        let sent = Instant::now();
        lease.renewed(sent);
        assert!(lease.is_held());
        assert_eq!(lease.proven_until(), Some(sent + Duration::from_secs(4)));
        // An older renewal answered late does not shorten it.
        lease.renewed(sent - Duration::from_secs(2));
        assert_eq!(lease.proven_until(), Some(sent + Duration::from_secs(4)));
        let expired = Lease::new(Duration::from_secs(5), Duration::from_secs(1), false);
        expired.renewed(sent - Duration::from_secs(4));
        assert!(!expired.is_held());
        assert!(Lease::new(Duration::from_secs(5), Duration::ZERO, true).is_held());
    }
}
