-- Notes the memory tool keeps for a tenant, across its sessions.

CREATE TABLE memory_notes (
    id          TEXT PRIMARY KEY,
    tenant_id   TEXT NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    text        TEXT NOT NULL,
    created_at  TEXT NOT NULL
);
CREATE INDEX memory_notes_tenant ON memory_notes (tenant_id, id);
