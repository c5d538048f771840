-- A session may also be known by a client's own key (AgentScope and ACP session ids).
ALTER TABLE sessions ADD COLUMN alias TEXT;
CREATE UNIQUE INDEX sessions_alias ON sessions (tenant_id, alias) WHERE alias IS NOT NULL;

-- Large inline part contents, stored once per session and served by URL.
CREATE TABLE files (
    id            TEXT PRIMARY KEY,
    tenant_id     TEXT NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    session_id    TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    content_type  TEXT NOT NULL,
    sha256        TEXT NOT NULL,
    size          BIGINT NOT NULL,
    data          BYTEA NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL
);
CREATE UNIQUE INDEX files_once ON files (tenant_id, session_id, sha256, content_type);

-- Turns found by a client-given response id (AgentScope `id`), tenant-wide.
CREATE INDEX turns_key ON turns (tenant_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
