-- The per-minute quotas are paced by a leaky bucket per tenant and quota (GCRA): `level` is
-- the units in the bucket at `updated_us` (unix microseconds); it drains at the quota's rate.
-- A process takes a few units at a time with one conditional write and counts them down in
-- memory. It replaces the fixed windows.
DROP TABLE quota_windows;

CREATE TABLE quota_buckets (
    tenant_id BLOB NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    quota TEXT NOT NULL,
    level REAL NOT NULL,
    updated_us INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, quota)
) WITHOUT ROWID;
