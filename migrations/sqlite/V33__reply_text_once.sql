-- A packed row may leave its reply's text to the history message the same statement wrote
-- (see src/store/packed.rs): the writes operation `reply_event` inserts such a row with the
-- position of its session's last history message in front of its entries. A release without
-- this migration cannot read such rows; this migration being applied makes it refuse to
-- start on the database (refinery aborts on an applied migration it does not have).
--
--   reply_event  c1 session, c2 seq, c3 turn, c4 kind, c5 data (a JSON array), c6 created_at:
--                an event whose data takes first the position of the session's last
--                history message (refused, by the NOT NULL of `data`, unless that message
--                is of the turn c3: the batch's history rows, before its events, end with
--                the turn's reply)
CREATE TRIGGER writes_reply_event INSTEAD OF INSERT ON writes WHEN NEW.op = 'reply_event'
BEGIN
    INSERT INTO events (session_id, seq, turn_id, kind, data, created_at)
    VALUES (NEW.c1, NEW.c2, NEW.c3, NEW.c4,
        '[' || (SELECT last.position FROM (
                    SELECT position, turn_id FROM history WHERE session_id = NEW.c1
                    ORDER BY position DESC LIMIT 1) AS last
                WHERE last.turn_id = NEW.c3)
            || ',' || substr(NEW.c5, 2),
        NEW.c6);
END;
