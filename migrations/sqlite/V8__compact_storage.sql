-- Compact storage: ids as the 16 bytes of their UUID (the prefix lives only on the wire),
-- timestamps as microseconds since the Unix epoch, strict column types, and no tenant id
-- on rows whose session already names it (events, history). Events and history rows are
-- keyed by their session and position, without a separate rowid.
--
-- Each table is renamed aside, made again and copied; the old ones are dropped children
-- first, so no cascade reaches the new tables.

ALTER TABLE tenants RENAME TO old_tenants;
ALTER TABLE credentials RENAME TO old_credentials;
ALTER TABLE api_tokens RENAME TO old_api_tokens;
ALTER TABLE instance_keys RENAME TO old_instance_keys;
ALTER TABLE sessions RENAME TO old_sessions;
ALTER TABLE history RENAME TO old_history;
ALTER TABLE compacted_history RENAME TO old_compacted_history;
ALTER TABLE turns RENAME TO old_turns;
ALTER TABLE events RENAME TO old_events;
ALTER TABLE memory_notes RENAME TO old_memory_notes;
ALTER TABLE files RENAME TO old_files;
ALTER TABLE runs RENAME TO old_runs;
DROP INDEX credentials_tenant;
DROP INDEX api_tokens_tenant;
DROP INDEX sessions_tenant;
DROP INDEX sessions_alias;
DROP INDEX turns_session;
DROP INDEX turns_one_active;
DROP INDEX turns_idempotency;
DROP INDEX turns_active;
DROP INDEX turns_key;
DROP INDEX turns_run;
DROP INDEX events_turn;
DROP INDEX memory_notes_tenant;
DROP INDEX files_once;
DROP INDEX runs_session;

CREATE TABLE tenants (
    id          BLOB PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,
    status      TEXT NOT NULL CHECK (status IN ('active', 'suspended')),
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
) STRICT;

CREATE TABLE credentials (
    id           BLOB PRIMARY KEY,
    tenant_id    BLOB NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name         TEXT,
    secret_hash  TEXT NOT NULL,
    created_at   INTEGER NOT NULL
) STRICT;
CREATE INDEX credentials_tenant ON credentials (tenant_id, id);

CREATE TABLE api_tokens (
    id          BLOB PRIMARY KEY,
    tenant_id   BLOB NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name        TEXT,
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL,
    revoked_at  INTEGER
) STRICT;
CREATE INDEX api_tokens_tenant ON api_tokens (tenant_id, id);

CREATE TABLE instance_keys (
    purpose     TEXT PRIMARY KEY,
    secret      TEXT NOT NULL,
    created_at  INTEGER NOT NULL
) STRICT;

CREATE TABLE sessions (
    id                 BLOB PRIMARY KEY,
    tenant_id          BLOB NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    agent              TEXT NOT NULL,
    server_tools       TEXT NOT NULL,
    options            TEXT NOT NULL,
    sealed_options     TEXT NOT NULL,
    client_tools       TEXT NOT NULL,
    -- The last full-history position the compacted overlay stands for (NULL: none).
    compacted_through  INTEGER,
    alias              TEXT,
    token_ratio        REAL,
    created_at         INTEGER NOT NULL,
    updated_at         INTEGER NOT NULL
) STRICT;
CREATE INDEX sessions_tenant ON sessions (tenant_id, id);
CREATE UNIQUE INDEX sessions_alias ON sessions (tenant_id, alias) WHERE alias IS NOT NULL;

CREATE TABLE history (
    session_id  BLOB NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    position    INTEGER NOT NULL,
    turn_id     BLOB,
    message     TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (session_id, position)
) STRICT, WITHOUT ROWID;

CREATE TABLE compacted_history (
    session_id  BLOB NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    position    INTEGER NOT NULL,
    turn_id     BLOB,
    message     TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (session_id, position)
) STRICT, WITHOUT ROWID;

CREATE TABLE runs (
    id              BLOB PRIMARY KEY,
    tenant_id       BLOB NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    session_id      BLOB NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    status          TEXT NOT NULL CHECK (status IN ('created', 'running', 'awaiting',
                        'completed', 'failed', 'cancelled', 'interrupted')),
    -- When a client cancelled the run while it awaited answers, and the turn that
    -- answered its pending calls as cancelled.
    cancelled_at    INTEGER,
    cancel_turn_id  BLOB,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
) STRICT;
CREATE INDEX runs_session ON runs (tenant_id, session_id, status);

CREATE TABLE turns (
    id               BLOB NOT NULL PRIMARY KEY,
    tenant_id        BLOB NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    session_id       BLOB NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    run_id           BLOB REFERENCES runs (id) ON DELETE CASCADE,
    status           TEXT NOT NULL CHECK (status IN
                         ('queued', 'running', 'completed', 'failed', 'cancelled', 'interrupted')),
    stream           TEXT NOT NULL CHECK (stream IN ('none', 'delta', 'message')),
    stop_reason      TEXT,
    error            TEXT,
    usage            TEXT NOT NULL,
    idempotency_key  TEXT,
    request_hash     TEXT,
    first_seq        INTEGER,
    last_seq         INTEGER,
    created_at       INTEGER NOT NULL,
    started_at       INTEGER,
    finished_at      INTEGER
) STRICT, WITHOUT ROWID;
CREATE INDEX turns_session ON turns (tenant_id, session_id, id);
CREATE UNIQUE INDEX turns_one_active ON turns (session_id) WHERE status IN ('queued', 'running');
CREATE UNIQUE INDEX turns_idempotency ON turns (session_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX turns_active ON turns (status) WHERE status IN ('queued', 'running');
CREATE INDEX turns_key ON turns (tenant_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX turns_run ON turns (run_id) WHERE run_id IS NOT NULL;

-- A turn's events are the seq range between its first_seq and last_seq (one turn of a
-- session runs at a time), so no index by turn is kept.
CREATE TABLE events (
    session_id  BLOB NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq         INTEGER NOT NULL,
    turn_id     BLOB NOT NULL,
    kind        TEXT NOT NULL,
    data        TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (session_id, seq)
) STRICT, WITHOUT ROWID;

CREATE TABLE memory_notes (
    id          TEXT PRIMARY KEY,
    tenant_id   BLOB NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    text        TEXT NOT NULL,
    created_at  INTEGER NOT NULL
) STRICT;
CREATE INDEX memory_notes_tenant ON memory_notes (tenant_id, id);

CREATE TABLE files (
    id            BLOB PRIMARY KEY,
    tenant_id     BLOB NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    session_id    BLOB NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    content_type  TEXT NOT NULL,
    sha256        TEXT NOT NULL,
    size          INTEGER NOT NULL,
    data          BLOB NOT NULL,
    created_at    INTEGER NOT NULL
) STRICT;
CREATE UNIQUE INDEX files_once ON files (tenant_id, session_id, sha256, content_type);

INSERT INTO tenants (id, name, status, created_at, updated_at)
SELECT unhex(substr(id, instr(id, '_') + 1)),
       name,
       status,
       CAST(ROUND(unixepoch(created_at, 'subsec') * 1000) AS INTEGER) * 1000,
       CAST(ROUND(unixepoch(updated_at, 'subsec') * 1000) AS INTEGER) * 1000
FROM old_tenants;
INSERT INTO credentials (id, tenant_id, name, secret_hash, created_at)
SELECT unhex(substr(id, instr(id, '_') + 1)),
       unhex(substr(tenant_id, instr(tenant_id, '_') + 1)),
       name,
       secret_hash,
       CAST(ROUND(unixepoch(created_at, 'subsec') * 1000) AS INTEGER) * 1000
FROM old_credentials;
INSERT INTO api_tokens (id, tenant_id, name, created_at, expires_at, revoked_at)
SELECT unhex(substr(id, instr(id, '_') + 1)),
       unhex(substr(tenant_id, instr(tenant_id, '_') + 1)),
       name,
       CAST(ROUND(unixepoch(created_at, 'subsec') * 1000) AS INTEGER) * 1000,
       CAST(ROUND(unixepoch(expires_at, 'subsec') * 1000) AS INTEGER) * 1000,
       CASE WHEN revoked_at IS NULL THEN NULL ELSE CAST(ROUND(unixepoch(revoked_at, 'subsec') * 1000) AS INTEGER) * 1000 END
FROM old_api_tokens;
INSERT INTO instance_keys (purpose, secret, created_at)
SELECT purpose,
       secret,
       CAST(ROUND(unixepoch(created_at, 'subsec') * 1000) AS INTEGER) * 1000
FROM old_instance_keys;
INSERT INTO sessions (id, tenant_id, agent, server_tools, options, sealed_options, client_tools, compacted_through, alias, token_ratio, created_at, updated_at)
SELECT unhex(substr(id, instr(id, '_') + 1)),
       unhex(substr(tenant_id, instr(tenant_id, '_') + 1)),
       agent,
       server_tools,
       options,
       sealed_options,
       client_tools,
       compacted_through,
       alias,
       token_ratio,
       CAST(ROUND(unixepoch(created_at, 'subsec') * 1000) AS INTEGER) * 1000,
       CAST(ROUND(unixepoch(updated_at, 'subsec') * 1000) AS INTEGER) * 1000
FROM old_sessions;
INSERT INTO history (session_id, position, turn_id, message, created_at)
SELECT unhex(substr(session_id, instr(session_id, '_') + 1)),
       position,
       CASE WHEN turn_id IS NULL THEN NULL ELSE unhex(substr(turn_id, instr(turn_id, '_') + 1)) END,
       message,
       CAST(ROUND(unixepoch(created_at, 'subsec') * 1000) AS INTEGER) * 1000
FROM old_history;
INSERT INTO compacted_history (session_id, position, turn_id, message, created_at)
SELECT unhex(substr(session_id, instr(session_id, '_') + 1)),
       position,
       CASE WHEN turn_id IS NULL THEN NULL ELSE unhex(substr(turn_id, instr(turn_id, '_') + 1)) END,
       message,
       CAST(ROUND(unixepoch(created_at, 'subsec') * 1000) AS INTEGER) * 1000
FROM old_compacted_history;
INSERT INTO runs (id, tenant_id, session_id, status, cancelled_at, cancel_turn_id, created_at, updated_at)
SELECT unhex(substr(id, instr(id, '_') + 1)),
       unhex(substr(tenant_id, instr(tenant_id, '_') + 1)),
       unhex(substr(session_id, instr(session_id, '_') + 1)),
       status,
       CASE WHEN cancelled_at IS NULL THEN NULL ELSE CAST(ROUND(unixepoch(cancelled_at, 'subsec') * 1000) AS INTEGER) * 1000 END,
       CASE WHEN cancel_turn_id IS NULL THEN NULL ELSE unhex(substr(cancel_turn_id, instr(cancel_turn_id, '_') + 1)) END,
       CAST(ROUND(unixepoch(created_at, 'subsec') * 1000) AS INTEGER) * 1000,
       CAST(ROUND(unixepoch(updated_at, 'subsec') * 1000) AS INTEGER) * 1000
FROM old_runs;
INSERT INTO turns (id, tenant_id, session_id, run_id, status, stream, stop_reason, error, usage, idempotency_key, request_hash, first_seq, last_seq, created_at, started_at, finished_at)
SELECT unhex(substr(id, instr(id, '_') + 1)),
       unhex(substr(tenant_id, instr(tenant_id, '_') + 1)),
       unhex(substr(session_id, instr(session_id, '_') + 1)),
       CASE WHEN run_id IS NULL THEN NULL ELSE unhex(substr(run_id, instr(run_id, '_') + 1)) END,
       status,
       stream,
       stop_reason,
       error,
       usage,
       idempotency_key,
       request_hash,
       first_seq,
       last_seq,
       CAST(ROUND(unixepoch(created_at, 'subsec') * 1000) AS INTEGER) * 1000,
       CASE WHEN started_at IS NULL THEN NULL ELSE CAST(ROUND(unixepoch(started_at, 'subsec') * 1000) AS INTEGER) * 1000 END,
       CASE WHEN finished_at IS NULL THEN NULL ELSE CAST(ROUND(unixepoch(finished_at, 'subsec') * 1000) AS INTEGER) * 1000 END
FROM old_turns;
INSERT INTO events (session_id, seq, turn_id, kind, data, created_at)
SELECT unhex(substr(session_id, instr(session_id, '_') + 1)),
       seq,
       unhex(substr(turn_id, instr(turn_id, '_') + 1)),
       kind,
       data,
       CAST(ROUND(unixepoch(created_at, 'subsec') * 1000) AS INTEGER) * 1000
FROM old_events;
INSERT INTO memory_notes (id, tenant_id, text, created_at)
SELECT id,
       unhex(substr(tenant_id, instr(tenant_id, '_') + 1)),
       text,
       CAST(ROUND(unixepoch(created_at, 'subsec') * 1000) AS INTEGER) * 1000
FROM old_memory_notes;
INSERT INTO files (id, tenant_id, session_id, content_type, sha256, size, data, created_at)
SELECT unhex(substr(id, instr(id, '_') + 1)),
       unhex(substr(tenant_id, instr(tenant_id, '_') + 1)),
       unhex(substr(session_id, instr(session_id, '_') + 1)),
       content_type,
       sha256,
       size,
       data,
       CAST(ROUND(unixepoch(created_at, 'subsec') * 1000) AS INTEGER) * 1000
FROM old_files;
DROP TABLE old_events;
DROP TABLE old_files;
DROP TABLE old_memory_notes;
DROP TABLE old_turns;
DROP TABLE old_runs;
DROP TABLE old_compacted_history;
DROP TABLE old_history;
DROP TABLE old_sessions;
DROP TABLE old_instance_keys;
DROP TABLE old_api_tokens;
DROP TABLE old_credentials;
DROP TABLE old_tenants;
