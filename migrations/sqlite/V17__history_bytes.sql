-- Each history message's size as stored (its JSON text in bytes), kept by the database
-- itself: pages of a history are cut by count and by bytes, and a session's size is
-- limited, without reading the messages. The column sits before the message, so reading
-- it never reads a large message's overflow pages.
CREATE TABLE history_sized (
    session_id  BLOB NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    position    INTEGER NOT NULL,
    turn_id     BLOB,
    created_at  INTEGER NOT NULL,
    bytes       INTEGER GENERATED ALWAYS AS (length(CAST(message AS BLOB))) STORED,
    message     TEXT NOT NULL,
    PRIMARY KEY (session_id, position)
) STRICT, WITHOUT ROWID;
INSERT INTO history_sized (session_id, position, turn_id, created_at, message)
    SELECT session_id, position, turn_id, created_at, message FROM history;
DROP TABLE history;
ALTER TABLE history_sized RENAME TO history;

CREATE TABLE compacted_history_sized (
    session_id  BLOB NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    position    INTEGER NOT NULL,
    turn_id     BLOB,
    created_at  INTEGER NOT NULL,
    bytes       INTEGER GENERATED ALWAYS AS (length(CAST(message AS BLOB))) STORED,
    message     TEXT NOT NULL,
    PRIMARY KEY (session_id, position)
) STRICT, WITHOUT ROWID;
INSERT INTO compacted_history_sized (session_id, position, turn_id, created_at, message)
    SELECT session_id, position, turn_id, created_at, message FROM compacted_history;
DROP TABLE compacted_history;
ALTER TABLE compacted_history_sized RENAME TO compacted_history;
