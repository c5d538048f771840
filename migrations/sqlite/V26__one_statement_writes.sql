-- A turn's admission and a batch of the event writer are each one statement: an INSERT of
-- rows into `writes`, each row an operation (`op`) that the trigger of its kind performs,
-- in the order of the rows. A statement is atomic, so a row refused (`RAISE(ABORT, …)`)
-- undoes every row before it. Nothing is ever stored in `writes` itself.
--
-- The columns of each operation:
--   remembered  c1 session, c2 tenant, c3 updated_at, c4 compacted_through (-1: none),
--               c5 history length: refused ('agentry: stale') unless the session is still so
--   turn        c1 id, c2 tenant, c3 session, c4 run, c5 status, c6 stream, c7 usage,
--               c8 idempotency key, c9 request hash, c10 created_at, c11 owner,
--               c12 permissions, c13 trace parent: a new turn
--   history     c1 session, c2 tenant, c3 message, c4 created_at, c5 turn: a message after
--               the session's last (none if the session is not the tenant's)
--   fence       c1 turn, c2 process: refused ('agentry: fenced') unless the turn is queued or
--               running and owned by the process
--   unevent     c1 session, c2 first seq, c3 last seq: the events in that range removed
--   event       c1 session, c2 seq, c3 turn, c4 kind, c5 data, c6 created_at: an event
--   start       c1 turn, c2 tenant, c3 started_at, c4 seq: the turn started; refused
--               ('agentry: stale') unless it is the tenant's and queued or running
--   stop        c1 turn, c2 tenant, c3 status, c4 stop reason, c5 error, c6 usage,
--               c7 finished_at, c8 last seq, c9 started_at, c10 first seq: the turn ended;
--               refused ('agentry: stale') unless it is the tenant's and queued or running
CREATE VIEW writes (op, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13) AS
    SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
    WHERE 0;

CREATE TRIGGER writes_remembered INSTEAD OF INSERT ON writes WHEN NEW.op = 'remembered'
BEGIN
    SELECT RAISE(ABORT, 'agentry: stale') WHERE NOT EXISTS (
        SELECT 1 FROM sessions WHERE id = NEW.c1 AND tenant_id = NEW.c2
        AND updated_at = NEW.c3 AND COALESCE(compacted_through, -1) = NEW.c4
        AND (SELECT COALESCE(MAX(position) + 1, 0) FROM history WHERE session_id = NEW.c1)
            = NEW.c5);
END;

CREATE TRIGGER writes_turn INSTEAD OF INSERT ON writes WHEN NEW.op = 'turn'
BEGIN
    INSERT INTO turns (id, tenant_id, session_id, run_id, status, stream, usage,
        idempotency_key, request_hash, created_at, owner, permissions, trace_parent)
    VALUES (NEW.c1, NEW.c2, NEW.c3, NEW.c4, NEW.c5, NEW.c6, NEW.c7, NEW.c8, NEW.c9, NEW.c10,
        NEW.c11, NEW.c12, NEW.c13);
END;

CREATE TRIGGER writes_history INSTEAD OF INSERT ON writes WHEN NEW.op = 'history'
BEGIN
    INSERT INTO history (session_id, position, message, created_at, turn_id)
    SELECT s.id,
        (SELECT COALESCE(MAX(h.position) + 1, 0) FROM history h WHERE h.session_id = s.id),
        NEW.c3, NEW.c4, NEW.c5
    FROM sessions s WHERE s.id = NEW.c1 AND s.tenant_id = NEW.c2;
END;

CREATE TRIGGER writes_fence INSTEAD OF INSERT ON writes WHEN NEW.op = 'fence'
BEGIN
    SELECT RAISE(ABORT, 'agentry: fenced') WHERE NOT EXISTS (
        SELECT 1 FROM turns WHERE id = NEW.c1 AND owner = NEW.c2
        AND status IN ('queued', 'running'));
END;

CREATE TRIGGER writes_unevent INSTEAD OF INSERT ON writes WHEN NEW.op = 'unevent'
BEGIN
    DELETE FROM events WHERE session_id = NEW.c1 AND seq BETWEEN NEW.c2 AND NEW.c3;
END;

CREATE TRIGGER writes_event INSTEAD OF INSERT ON writes WHEN NEW.op = 'event'
BEGIN
    INSERT INTO events (session_id, seq, turn_id, kind, data, created_at)
    VALUES (NEW.c1, NEW.c2, NEW.c3, NEW.c4, NEW.c5, NEW.c6);
END;

CREATE TRIGGER writes_start INSTEAD OF INSERT ON writes WHEN NEW.op = 'start'
BEGIN
    SELECT RAISE(ABORT, 'agentry: stale') WHERE NOT EXISTS (
        SELECT 1 FROM turns WHERE id = NEW.c1 AND tenant_id = NEW.c2
        AND status IN ('queued', 'running'));
    UPDATE turns SET status = 'running', started_at = NEW.c3,
        first_seq = COALESCE(first_seq, NEW.c4)
    WHERE id = NEW.c1;
END;

CREATE TRIGGER writes_stop INSTEAD OF INSERT ON writes WHEN NEW.op = 'stop'
BEGIN
    SELECT RAISE(ABORT, 'agentry: stale') WHERE NOT EXISTS (
        SELECT 1 FROM turns WHERE id = NEW.c1 AND tenant_id = NEW.c2
        AND status IN ('queued', 'running'));
    UPDATE turns SET status = NEW.c3, stop_reason = NEW.c4, error = NEW.c5, usage = NEW.c6,
        finished_at = NEW.c7, last_seq = NEW.c8,
        first_seq = COALESCE(first_seq, NEW.c10, NEW.c8),
        started_at = COALESCE(started_at, NEW.c9)
    WHERE id = NEW.c1;
END;
