-- ACP runs: a chain of engine turns in one session. A run is known by its first turn's id;
-- each resume adds a turn at the next position.
CREATE TABLE acp_runs (
    id            TEXT PRIMARY KEY,
    tenant_id     TEXT NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    session_id    TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    -- Set when a client cancelled the run while it awaited answers.
    cancelled_at  TIMESTAMPTZ,
    created_at    TIMESTAMPTZ NOT NULL
);
CREATE INDEX acp_runs_tenant ON acp_runs (tenant_id, id);

CREATE TABLE acp_run_turns (
    tenant_id   TEXT NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    run_id      TEXT NOT NULL REFERENCES acp_runs (id) ON DELETE CASCADE,
    position    BIGINT NOT NULL,
    turn_id     TEXT NOT NULL,
    PRIMARY KEY (run_id, position)
);
CREATE UNIQUE INDEX acp_run_turns_turn ON acp_run_turns (turn_id);
