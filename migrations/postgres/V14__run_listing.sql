-- Runs listed across a tenant's sessions, newest status change first (a protocol's task
-- list), with a cursor on (updated_at, id).
CREATE INDEX runs_updated ON runs (tenant_id, updated_at, id);
