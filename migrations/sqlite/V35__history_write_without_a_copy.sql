-- A history message written through `writes` is inserted as one row of values. Inserted
-- with a SELECT that read `history` (the message's position) into `history`, SQLite copied
-- each row into a temporary table first, made and dropped for every message. The check
-- that the session is the tenant's moves to the trigger's WHEN clause: a message for
-- another tenant's session (or a session gone) is still not written, and no error.
DROP TRIGGER writes_history;

CREATE TRIGGER writes_history INSTEAD OF INSERT ON writes
WHEN NEW.op = 'history'
    AND EXISTS (SELECT 1 FROM sessions WHERE id = NEW.c1 AND tenant_id = NEW.c2)
BEGIN
    INSERT INTO history (session_id, position, message, created_at, turn_id)
    VALUES (NEW.c1,
        (SELECT COALESCE(MAX(position) + 1, 0) FROM history WHERE session_id = NEW.c1),
        NEW.c3, NEW.c4, NEW.c5);
END;
