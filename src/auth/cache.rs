//! What the database says of a token (active, revoked, its tenant suspended), remembered for
//! a short time so that a request does not pay a query for it.
//!
//! An answer is kept for `auth.state_cache_ttl_ms` at most: a token revoked, a credential
//! deleted or a tenant suspended by any process is refused within that time. Changes made
//! through this process forget the tenant's answers at once.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::model::{CredentialId, TenantId, TokenId};
use crate::store::{AuthState, Store, StoreError};

/// Most answers kept; a full cache drops its expired answers, then all of them.
const MAX_ENTRIES: usize = 10_000;

type Key = (TenantId, TokenId, Option<CredentialId>);

#[derive(Debug)]
pub struct AuthCache {
    ttl: Duration,
    entries: Mutex<HashMap<Key, (AuthState, Instant)>>,
}

impl AuthCache {
    pub fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// The token's state: from memory while the answer is fresh, else from the store.
    pub async fn auth_state(
        &self,
        store: &Store,
        tenant: &TenantId,
        jti: &TokenId,
        credential: Option<&CredentialId>,
    ) -> Result<AuthState, StoreError> {
        let key = (*tenant, *jti, credential.cloned());
        if let Some((state, at)) = self.entries.lock().expect("auth cache lock").get(&key)
            && at.elapsed() < self.ttl
        {
            return Ok(*state);
        }
        let asked = Instant::now();
        let state = store.auth_state(tenant, jti, credential).await?;
        if !self.ttl.is_zero() {
            let mut entries = self.entries.lock().expect("auth cache lock");
            if entries.len() >= MAX_ENTRIES {
                let ttl = self.ttl;
                entries.retain(|_, (_, at)| at.elapsed() < ttl);
                if entries.len() >= MAX_ENTRIES {
                    entries.clear();
                }
            }
            // Dated from the question: an answer is never older than it looks.
            entries.insert(key, (state, asked));
        }
        Ok(state)
    }

    /// Forgets every answer about the tenant's tokens (after this process changed them).
    pub fn forget_tenant(&self, tenant: &TenantId) {
        self.entries
            .lock()
            .expect("auth cache lock")
            .retain(|(t, _, _), _| t != tenant);
    }
}
