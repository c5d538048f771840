-- Turns, and the per-session event log they write. History rows remember their turn.

ALTER TABLE history ADD COLUMN turn_id TEXT;
ALTER TABLE compacted_history ADD COLUMN turn_id TEXT;

CREATE TABLE turns (
    id               TEXT PRIMARY KEY,
    tenant_id        TEXT NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    session_id       TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
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
    created_at       TEXT NOT NULL,
    started_at       TEXT,
    finished_at      TEXT
);
CREATE INDEX turns_session ON turns (tenant_id, session_id, id);
-- One active turn per session, whichever process started it.
CREATE UNIQUE INDEX turns_one_active ON turns (session_id) WHERE status IN ('queued', 'running');
CREATE UNIQUE INDEX turns_idempotency ON turns (session_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX turns_active ON turns (status) WHERE status IN ('queued', 'running');

-- The event log: `seq` is per session, strictly increasing and gap-free.
CREATE TABLE events (
    tenant_id   TEXT NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    session_id  TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq         INTEGER NOT NULL,
    turn_id     TEXT NOT NULL,
    kind        TEXT NOT NULL,
    data        TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
);
CREATE INDEX events_turn ON events (turn_id, seq);
