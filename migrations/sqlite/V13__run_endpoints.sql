-- A run's own webhook endpoints: registered for one run (a client's URL under its own key,
-- unique within the run), told only of that run's status changes, and rendered by a payload
-- format a protocol face registered. They are webhook endpoints like a tenant's (the same
-- outbox, leases, retries and deliveries), so they live in the same table: `run_id` is NULL
-- for a tenant-wide endpoint. `secret` holds the client's token, sealed.
ALTER TABLE webhook_endpoints ADD COLUMN run_id BLOB REFERENCES runs (id) ON DELETE CASCADE;
ALTER TABLE webhook_endpoints ADD COLUMN run_key TEXT;
-- The name the payload format was registered under.
ALTER TABLE webhook_endpoints ADD COLUMN format TEXT;
-- Sent as `Authorization: <scheme> <credentials>`; the credentials are sealed.
ALTER TABLE webhook_endpoints ADD COLUMN authorization_scheme TEXT;
ALTER TABLE webhook_endpoints ADD COLUMN authorization_credentials TEXT;

CREATE UNIQUE INDEX webhook_endpoints_run_key ON webhook_endpoints (run_id, run_key);
-- A turn's stop looks for its tenant's tenant-wide endpoints without reading its runs' own.
CREATE INDEX webhook_endpoints_tenant_wide ON webhook_endpoints (tenant_id) WHERE run_id IS NULL;
