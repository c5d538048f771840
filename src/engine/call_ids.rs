//! Naming a turn's tool calls so that no id repeats within the session: a call the model
//! sent without an id gets a new one, a call whose id the session already holds is renamed
//! (the provider gets its own id back with the history, see `model::provider_call_id`).

use std::collections::HashSet;

use crate::model::{SessionId, TenantId, new_call_id, repeated_call_id};
use crate::store::{Store, StoreError};

pub(super) struct CallIds<'a> {
    store: &'a Store,
    tenant: TenantId,
    session: SessionId,
    /// The ids given in this turn (not all durable in the history yet).
    given: HashSet<String>,
}

impl<'a> CallIds<'a> {
    pub(super) fn new(store: &'a Store, tenant: TenantId, session: SessionId) -> Self {
        Self {
            store,
            tenant,
            session,
            given: HashSet::new(),
        }
    }

    /// The session-unique id of a call the model named `id` (empty: unnamed).
    pub(super) async fn name(&mut self, id: String) -> Result<String, StoreError> {
        let id = if id.is_empty() {
            new_call_id()
        } else if self.given.contains(&id)
            || self
                .store
                .has_tool_call(&self.tenant, &self.session, &id)
                .await?
        {
            repeated_call_id(&id)
        } else {
            id
        };
        self.given.insert(id.clone());
        Ok(id)
    }
}
