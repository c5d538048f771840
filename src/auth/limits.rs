//! What bounds `POST /auth/token`: a few password verifications at a time, on threads of
//! their own, and failed attempts counted per client id and per client address.
//! In-process: each instance counts alone.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};

use super::AuthError;
use crate::config::AuthSettings;
use crate::crypto;

/// The login limits and the decoy hash, built once at start-up.
pub struct LoginLimits {
    checks: Arc<Semaphore>,
    checkers: mpsc::Sender<Check>,
    queue_timeout: Duration,
    decoy_hash: String,
    per_client: FailureCounter,
    per_address: FailureCounter,
}

impl std::fmt::Debug for LoginLimits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoginLimits")
            .field("free_checks", &self.checks.available_permits())
            .finish_non_exhaustive()
    }
}

impl LoginLimits {
    /// Hashes the decoy on the blocking pool, off the async threads.
    pub async fn new(settings: &AuthSettings) -> anyhow::Result<Self> {
        let decoy_hash =
            tokio::task::spawn_blocking(|| crypto::hash_password(&crypto::random_token(32)))
                .await?;
        let window = Duration::from_secs(settings.login_failure_window_seconds);
        let capacity = settings.login_tracked_keys;
        Ok(Self {
            checks: Arc::new(Semaphore::new(settings.login_max_concurrent_checks)),
            checkers: spawn_checkers(settings.login_max_concurrent_checks)?,
            queue_timeout: Duration::from_millis(settings.login_queue_timeout_ms),
            decoy_hash,
            per_client: FailureCounter::new(
                settings.login_max_failures_per_client,
                window,
                capacity,
            ),
            per_address: FailureCounter::new(
                settings.login_max_failures_per_address,
                window,
                capacity,
            ),
        })
    }

    /// A PHC string to verify against when the client does not exist, so that an unknown
    /// `client_id` costs the same as a wrong secret.
    pub fn decoy_hash(&self) -> &str {
        &self.decoy_hash
    }

    /// Refuses an attempt from a client id or address that failed too often lately, else
    /// counts it as a failure until [`LoginLimits::record_success`] says otherwise.
    pub fn begin_attempt(
        &self,
        client_id: Option<&str>,
        address: Option<IpAddr>,
    ) -> Result<(), AuthError> {
        let blocked = address
            .and_then(|a| self.per_address.blocked(&address_key(a)))
            .or_else(|| client_id.and_then(|c| self.per_client.blocked(c)));
        match blocked {
            Some(seconds) => Err(AuthError::TooManyAttempts {
                message: "too many failed login attempts; retry later",
                retry_after: seconds,
            }),
            None => {
                if let Some(address) = address {
                    self.per_address.record(&address_key(address));
                }
                if let Some(client_id) = client_id {
                    self.per_client.record(client_id);
                }
                Ok(())
            }
        }
    }

    /// The attempt succeeded: its client id starts afresh and its address is not charged.
    pub fn record_success(&self, client_id: &str, address: Option<IpAddr>) {
        self.per_client.clear(client_id);
        if let Some(address) = address {
            self.per_address.forgive(&address_key(address));
        }
    }

    /// Verifies `secret` against a PHC `hash` once one of the checker threads is free,
    /// waiting at most `login_queue_timeout_ms` for one. A client that leaves meanwhile
    /// does not free its slot before its verification ends.
    pub async fn verify(&self, secret: String, hash: String) -> Result<bool, AuthError> {
        let permit =
            match tokio::time::timeout(self.queue_timeout, self.checks.clone().acquire_owned())
                .await
            {
                Ok(Ok(permit)) => permit,
                _ => {
                    return Err(AuthError::TooManyAttempts {
                        message: "too many logins are being checked; retry shortly",
                        retry_after: 1,
                    });
                }
            };
        let (reply, verified) = oneshot::channel();
        self.checkers
            .send(Check {
                secret,
                hash,
                reply,
                _permit: permit,
            })
            .map_err(|_| AuthError::Internal("the password checkers stopped"))?;
        verified
            .await
            .map_err(|_| AuthError::Internal("a password check failed"))
    }
}

struct Check {
    secret: String,
    hash: String,
    reply: oneshot::Sender<bool>,
    _permit: OwnedSemaphorePermit,
}

/// `n` threads that verify passwords, each in one argon2 buffer (~19 MiB) kept for its
/// life, so that a flood of logins allocates nothing: allocating and freeing the buffer
/// per verification on the blocking pool's threads left hundreds of MiB to the allocator.
/// They end once the limits are dropped.
fn spawn_checkers(n: usize) -> std::io::Result<mpsc::Sender<Check>> {
    let (sender, receiver) = mpsc::channel::<Check>();
    let receiver = Arc::new(Mutex::new(receiver));
    for i in 0..n {
        let receiver = receiver.clone();
        std::thread::Builder::new()
            .name(format!("password-check-{i}"))
            .spawn(move || {
                let mut memory = Vec::new();
                loop {
                    let next = receiver.lock().unwrap_or_else(|e| e.into_inner()).recv();
                    let Ok(check) = next else { break };
                    let verified =
                        crypto::verify_password_in(&check.secret, &check.hash, &mut memory);
                    let _ = check.reply.send(verified);
                }
            })?;
    }
    Ok(sender)
}

/// IPv6 clients usually hold a whole /64: they count as one.
fn address_key(address: IpAddr) -> String {
    match address {
        IpAddr::V6(v6) if v6.to_ipv4_mapped().is_none() => {
            let s = v6.segments();
            format!("{:x}:{:x}:{:x}:{:x}::/64", s[0], s[1], s[2], s[3])
        }
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map_or_else(String::new, |v4| v4.to_string()),
        IpAddr::V4(v4) => v4.to_string(),
    }
}

/// Failures per key in fixed windows, remembering at most `capacity` keys: when full,
/// expired windows are forgotten first, then the oldest.
struct FailureCounter {
    max: u32,
    window: Duration,
    capacity: usize,
    entries: Mutex<HashMap<String, Window>>,
}

#[derive(Clone, Copy)]
struct Window {
    started: Instant,
    failures: u32,
}

impl FailureCounter {
    fn new(max: u32, window: Duration, capacity: usize) -> Self {
        Self {
            max,
            window,
            capacity,
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// Seconds until `key` may try again, if it may not now.
    fn blocked(&self, key: &str) -> Option<u32> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let window = entries.get(key)?;
        let elapsed = window.started.elapsed();
        if window.failures < self.max || elapsed >= self.window {
            return None;
        }
        let left = (self.window - elapsed).as_secs_f64().ceil();
        Some((left as u32).max(1))
    }

    fn record(&self, key: &str) {
        let now = Instant::now();
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(window) = entries.get_mut(key) {
            if now.duration_since(window.started) >= self.window {
                *window = Window {
                    started: now,
                    failures: 1,
                };
            } else {
                window.failures = window.failures.saturating_add(1);
            }
            return;
        }
        if entries.len() >= self.capacity {
            let span = self.window;
            entries.retain(|_, w| now.duration_since(w.started) < span);
        }
        if entries.len() >= self.capacity
            && let Some(oldest) = entries
                .iter()
                .min_by_key(|(_, w)| w.started)
                .map(|(k, _)| k.clone())
        {
            entries.remove(&oldest);
        }
        entries.insert(
            key.to_owned(),
            Window {
                started: now,
                failures: 1,
            },
        );
    }

    /// Takes back one failure of `key`'s current window.
    fn forgive(&self, key: &str) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(window) = entries.get_mut(key) {
            window.failures = window.failures.saturating_sub(1);
        }
    }

    fn clear(&self, key: &str) {
        self.entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.lock().unwrap().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_blocked_after_its_limit_until_the_window_ends() {
        let counter = FailureCounter::new(3, Duration::from_secs(60), 100);
        for _ in 0..2 {
            counter.record("a");
        }
        assert_eq!(counter.blocked("a"), None);
        counter.record("a");
        let left = counter.blocked("a").expect("blocked after 3 failures");
        assert!((1..=60).contains(&left), "{left}");
        assert_eq!(counter.blocked("b"), None);
        counter.forgive("a");
        assert_eq!(counter.blocked("a"), None);
        counter.record("a");
        counter.clear("a");
        assert_eq!(counter.blocked("a"), None);
    }

    #[test]
    fn windows_expire() {
        let counter = FailureCounter::new(1, Duration::from_millis(20), 100);
        counter.record("a");
        assert!(counter.blocked("a").is_some());
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(counter.blocked("a"), None);
        counter.record("a");
        assert!(counter.blocked("a").is_some(), "a new window starts");
    }

    #[test]
    fn the_counter_remembers_at_most_its_capacity() {
        let counter = FailureCounter::new(1, Duration::from_secs(60), 50);
        for i in 0..1000 {
            counter.record(&format!("key-{i}"));
        }
        assert_eq!(counter.len(), 50);
        assert!(counter.blocked("key-999").is_some(), "the newest are kept");
        assert_eq!(counter.blocked("key-0"), None, "the oldest are forgotten");
    }

    #[test]
    fn ipv6_clients_count_per_64() {
        let a: IpAddr = "2001:db8:1:2::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:ffff::9".parse().unwrap();
        assert_eq!(address_key(a), address_key(b));
        let mapped: IpAddr = "::ffff:192.0.2.1".parse().unwrap();
        assert_eq!(address_key(mapped), "192.0.2.1");
    }
}
