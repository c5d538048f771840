-- Tenants, their credentials and API keys, instance keys, sessions and their histories.
-- Timestamps are RFC 3339 text; JSON documents are text.

CREATE TABLE tenants (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,
    status      TEXT NOT NULL CHECK (status IN ('active', 'suspended')),
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL
);

CREATE TABLE credentials (
    id           TEXT PRIMARY KEY,
    tenant_id    TEXT NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name         TEXT,
    secret_hash  TEXT NOT NULL,
    created_at   TEXT NOT NULL
);
CREATE INDEX credentials_tenant ON credentials (tenant_id, id);

CREATE TABLE api_tokens (
    id          TEXT PRIMARY KEY,
    tenant_id   TEXT NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name        TEXT,
    created_at  TEXT NOT NULL,
    expires_at  TEXT NOT NULL,
    revoked_at  TEXT
);
CREATE INDEX api_tokens_tenant ON api_tokens (tenant_id, id);

-- Keys agentry generated for itself when the configuration named none.
CREATE TABLE instance_keys (
    purpose     TEXT PRIMARY KEY,
    secret      TEXT NOT NULL,
    created_at  TEXT NOT NULL
);

CREATE TABLE sessions (
    id              TEXT PRIMARY KEY,
    tenant_id       TEXT NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    agent           TEXT NOT NULL,
    server_tools    TEXT NOT NULL,
    options         TEXT NOT NULL,
    sealed_options  TEXT NOT NULL,
    client_tools    TEXT NOT NULL,
    -- The last full-history position the compacted overlay stands for (NULL: none).
    compacted_through INTEGER,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL
);
CREATE INDEX sessions_tenant ON sessions (tenant_id, id);

-- The exact, append-only history of a session.
CREATE TABLE history (
    tenant_id   TEXT NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    session_id  TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    position    INTEGER NOT NULL,
    message     TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    PRIMARY KEY (session_id, position)
);

-- What compaction put in place of the full history up to sessions.compacted_through.
-- The compacted history is this overlay followed by the full history after that position
-- (the full history itself while nothing was compacted).
CREATE TABLE compacted_history (
    tenant_id   TEXT NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    session_id  TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    position    INTEGER NOT NULL,
    message     TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    PRIMARY KEY (session_id, position)
);
