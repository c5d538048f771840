-- History and events become tables with a rowid, kept in the order their rows were
-- written, each with an index by session. Keyed by session instead, every commit inserted
-- into the middle of their trees at one place per session it held, dirtying a leaf page per
-- session and rebalancing leaves there (about 2.5 pages written to the log per row); now a
-- commit's rows go on the tables' last pages together, and only the small index entries
-- are inserted in the middle of a tree.
--
-- history_session indexes each message's size as an expression, not as the `bytes`
-- column: SQLite reads a generated column from the table even when an index holds it, and
-- a session's size is summed at each turn it is not remembered (src/store/history.rs sums
-- this expression on SQLite). A trigger keeps each session's positions unique, which the
-- index, holding the size too, cannot.
--
-- Each new table is made, filled in session order, then takes the old one's name. The
-- triggers of the `writes` view name both tables: while an old table is dropped they name
-- no table, which a rename checks unless `legacy_alter_table` is on, so it is on for the
-- renames only (they leave triggers and views as written, naming `history` and `events`).
CREATE TABLE history_appended (
    session_id  BLOB NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    position    INTEGER NOT NULL,
    turn_id     BLOB,
    created_at  INTEGER NOT NULL,
    bytes       INTEGER GENERATED ALWAYS AS (length(CAST(message AS BLOB))) STORED,
    message     TEXT NOT NULL
) STRICT;
INSERT INTO history_appended (session_id, position, turn_id, created_at, message)
    SELECT session_id, position, turn_id, created_at, message FROM history
    ORDER BY session_id, position;
DROP TABLE history;

CREATE TABLE events_appended (
    session_id  BLOB NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq         INTEGER NOT NULL,
    turn_id     BLOB NOT NULL,
    kind        TEXT NOT NULL,
    data        TEXT NOT NULL,
    created_at  INTEGER NOT NULL
) STRICT;
INSERT INTO events_appended (session_id, seq, turn_id, kind, data, created_at)
    SELECT session_id, seq, turn_id, kind, data, created_at FROM events
    ORDER BY session_id, seq;
DROP TABLE events;

PRAGMA legacy_alter_table = ON;
ALTER TABLE history_appended RENAME TO history;
ALTER TABLE events_appended RENAME TO events;
PRAGMA legacy_alter_table = OFF;

CREATE INDEX history_session ON history (session_id, position, length(CAST(message AS BLOB)));
CREATE TRIGGER history_position_unique BEFORE INSERT ON history
WHEN EXISTS (SELECT 1 FROM history WHERE session_id = NEW.session_id AND position = NEW.position)
BEGIN
    SELECT RAISE(ABORT, 'UNIQUE constraint failed: history.session_id, history.position');
END;
CREATE UNIQUE INDEX events_session_seq ON events (session_id, seq);
