//! What happens to a tenant's turns when an operator suspends or deletes it: they end, each
//! with its terminal event, so no stream is left waiting.

use std::time::Duration;

use super::{Engine, EngineError};
use crate::model::{Tenant, TenantId, TenantStatus, TurnError};
use crate::store::StoreError;

/// How long suspending or deleting a tenant waits for its turns' ends.
const STOP_TURNS: Duration = Duration::from_secs(10);

impl Engine {
    /// Renames, suspends or reactivates a tenant. Suspending cancels its queued and running
    /// turns; its requests are refused from then on.
    pub async fn update_tenant(
        &self,
        tenant: &TenantId,
        name: Option<&str>,
        status: Option<TenantStatus>,
    ) -> Result<Tenant, EngineError> {
        let updated = self
            .store
            .update_tenant(tenant, name, status)
            .await
            .map_err(tenant_not_found)?;
        if updated.status == TenantStatus::Suspended {
            let reason = TurnError::new(TurnError::CANCELLED, "the tenant was suspended");
            self.stop_tenant_turns(tenant, reason, STOP_TURNS).await;
        }
        Ok(updated)
    }

    /// Deletes a tenant and everything it owns. It is suspended first (no new turn starts),
    /// its turns end with their terminal events, then its data goes and the live streams of
    /// its sessions end.
    pub async fn delete_tenant(&self, tenant: &TenantId) -> Result<(), EngineError> {
        self.store
            .update_tenant(tenant, None, Some(TenantStatus::Suspended))
            .await
            .map_err(tenant_not_found)?;
        let reason = TurnError::new(TurnError::CANCELLED, "the tenant was deleted");
        self.stop_tenant_turns(tenant, reason, STOP_TURNS).await;
        let sessions = self.store.list_session_ids(tenant).await?;
        self.store
            .delete_tenant(tenant)
            .await
            .map_err(tenant_not_found)?;
        self.close_sessions(&sessions);
        Ok(())
    }
}

fn tenant_not_found(error: StoreError) -> EngineError {
    match error {
        StoreError::NotFound => EngineError::NotFound("tenant"),
        other => other.into(),
    }
}
