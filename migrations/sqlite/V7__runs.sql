-- Runs belong to the engine: a chain of turns answering one request of a protocol whose
-- unit is bigger than a turn. The run's status is a column the event writer keeps with the
-- events that change it. ACP runs move here; their run id keeps the first turn's UUID.
CREATE TABLE runs (
    id              TEXT PRIMARY KEY,
    tenant_id       TEXT NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    session_id      TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    status          TEXT NOT NULL CHECK (status IN ('created', 'running', 'awaiting',
                        'completed', 'failed', 'cancelled', 'interrupted')),
    -- When a client cancelled the run while it awaited answers, and the turn that
    -- answered its pending calls as cancelled.
    cancelled_at    TEXT,
    cancel_turn_id  TEXT,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL
);
CREATE INDEX runs_session ON runs (tenant_id, session_id, status);

ALTER TABLE turns ADD COLUMN run_id TEXT REFERENCES runs (id) ON DELETE CASCADE;

INSERT INTO runs (id, tenant_id, session_id, status, cancelled_at, cancel_turn_id,
                  created_at, updated_at)
SELECT 'run_' || substr(r.id, 6), r.tenant_id, r.session_id,
       CASE
           WHEN r.cancelled_at IS NOT NULL THEN 'cancelled'
           WHEN t.status = 'queued' AND l.position = 0 THEN 'created'
           WHEN t.status IN ('queued', 'running') THEN 'running'
           WHEN t.status = 'completed' AND t.stop_reason = 'tool_use' THEN
               CASE WHEN EXISTS (SELECT 1 FROM turns later
                                 WHERE later.session_id = t.session_id AND later.id > t.id)
                    THEN 'completed' ELSE 'awaiting' END
           ELSE t.status
       END,
       r.cancelled_at, NULL, r.created_at,
       COALESCE(r.cancelled_at, t.finished_at, t.created_at)
FROM acp_runs r
JOIN acp_run_turns l ON l.run_id = r.id
    AND l.position = (SELECT MAX(m.position) FROM acp_run_turns m WHERE m.run_id = r.id)
JOIN turns t ON t.id = l.turn_id;

UPDATE turns SET run_id = (SELECT 'run_' || substr(x.run_id, 6) FROM acp_run_turns x
                           WHERE x.turn_id = turns.id)
WHERE id IN (SELECT turn_id FROM acp_run_turns);
CREATE INDEX turns_run ON turns (run_id) WHERE run_id IS NOT NULL;

DROP TABLE acp_run_turns;
DROP TABLE acp_runs;
