-- A tenant's own quotas; a NULL column (or no row) takes the configured default.
CREATE TABLE tenant_quotas (
    tenant_id BLOB PRIMARY KEY NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    requests_per_minute INTEGER,
    turns_per_minute INTEGER,
    concurrent_turns INTEGER,
    queued_turns INTEGER,
    tokens_per_day INTEGER,
    stored_sessions INTEGER
) WITHOUT ROWID;

-- What each rate quota's current window has handed out, over every process. A process takes
-- a share at a time and counts it down in memory.
CREATE TABLE quota_windows (
    tenant_id BLOB NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    quota TEXT NOT NULL,
    window_start INTEGER NOT NULL,
    used INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, quota, window_start)
) WITHOUT ROWID;
