-- The per-minute quotas are paced by a leaky bucket per tenant and quota (GCRA): `level` is
-- the units in the bucket at `updated_us` (unix microseconds); it drains at the quota's rate.
-- A process takes a few units at a time with one conditional write and counts them down in
-- memory. It replaces the fixed windows.
DROP TABLE quota_windows;

CREATE TABLE quota_buckets (
    tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    quota text NOT NULL,
    level double precision NOT NULL,
    updated_us bigint NOT NULL,
    PRIMARY KEY (tenant_id, quota)
);
