-- A tenant's own quotas; a NULL column (or no row) takes the configured default.
CREATE TABLE tenant_quotas (
    tenant_id uuid PRIMARY KEY REFERENCES tenants (id) ON DELETE CASCADE,
    requests_per_minute bigint,
    turns_per_minute bigint,
    concurrent_turns bigint,
    queued_turns bigint,
    tokens_per_day bigint,
    stored_sessions bigint
);

-- What each rate quota's current window has handed out, over every process. A process takes
-- a share at a time and counts it down in memory.
CREATE TABLE quota_windows (
    tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    quota text NOT NULL,
    window_start bigint NOT NULL,
    used bigint NOT NULL,
    PRIMARY KEY (tenant_id, quota, window_start)
);
