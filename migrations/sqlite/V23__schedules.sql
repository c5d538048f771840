-- Schedules: a tenant's agent started on a cron expression in a time zone, and the run
-- history of their occurrences. An occurrence is claimed by inserting its row in the
-- transaction that moves its schedule's `next_at` past it (under the unique key of the
-- schedule and planned time), so each one starts at most one turn however many processes
-- look for due schedules.
CREATE TABLE schedules (
    id              BLOB PRIMARY KEY,
    tenant_id       BLOB NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name            TEXT,
    agent           TEXT NOT NULL,
    -- The agent's version the schedule is pinned to; NULL: the published one.
    agent_version   INTEGER,
    cron            TEXT NOT NULL,
    time_zone       TEXT NOT NULL,
    -- JSON: the user message content each occurrence sends.
    input           TEXT NOT NULL,
    -- JSON: the agent's server tools and options for the sessions it opens.
    agent_config    TEXT NOT NULL,
    session_policy  TEXT NOT NULL CHECK (session_policy IN ('new', 'fixed')),
    -- The session every occurrence continues (session_policy 'fixed').
    session_id      BLOB,
    overlap         TEXT NOT NULL CHECK (overlap IN ('skip', 'queue')),
    catch_up        TEXT NOT NULL CHECK (catch_up IN ('none', 'latest', 'up_to')),
    catch_up_limit  INTEGER NOT NULL,
    starts_at       INTEGER,
    ends_at         INTEGER,
    enabled         INTEGER NOT NULL,
    -- Why the server paused it (its agent is gone), when it did.
    paused_reason   TEXT,
    paused_at       INTEGER,
    -- The next planned occurrence; NULL when there is none (ended, or paused).
    next_at         INTEGER,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
) STRICT;

CREATE INDEX schedules_tenant ON schedules (tenant_id, id);
CREATE INDEX schedules_due ON schedules (next_at) WHERE enabled AND next_at IS NOT NULL;

CREATE TABLE schedule_runs (
    id              BLOB PRIMARY KEY,
    tenant_id       BLOB NOT NULL,
    schedule_id     BLOB NOT NULL REFERENCES schedules (id) ON DELETE CASCADE,
    -- 'scheduled', 'catch_up' (missed while no process ran it) or 'manual' (run now).
    kind            TEXT NOT NULL CHECK (kind IN ('scheduled', 'catch_up', 'manual')),
    planned_at      INTEGER NOT NULL,
    -- pending (claimed, its turn being started) | waiting (behind a running occurrence)
    -- | started (its turn runs) | finished (its turn ended) | not_started (see reason).
    status          TEXT NOT NULL
        CHECK (status IN ('pending', 'waiting', 'started', 'finished', 'not_started')),
    reason          TEXT,
    message         TEXT,
    session_id      BLOB,
    turn_id         BLOB,
    turn_status     TEXT,
    -- The process that claimed it, and when (a claim left by a process that died is
    -- taken over; the turn's idempotency key keeps it to one turn).
    claimed_by      BLOB,
    claimed_at      INTEGER,
    started_at      INTEGER,
    finished_at     INTEGER,
    created_at      INTEGER NOT NULL
) STRICT;

CREATE UNIQUE INDEX schedule_runs_occurrence ON schedule_runs (schedule_id, planned_at)
    WHERE kind <> 'manual';
CREATE INDEX schedule_runs_schedule ON schedule_runs (tenant_id, schedule_id, id);
CREATE INDEX schedule_runs_open ON schedule_runs (status)
    WHERE status IN ('pending', 'waiting', 'started');
