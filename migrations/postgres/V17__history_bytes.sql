-- Each history message's size as stored (its JSON text in bytes), kept by the database
-- itself: pages of a history are cut by count and by bytes, and a session's size is
-- limited, without reading the messages.
ALTER TABLE history
    ADD COLUMN bytes BIGINT GENERATED ALWAYS AS (octet_length(message::text)) STORED;
ALTER TABLE compacted_history
    ADD COLUMN bytes BIGINT GENERATED ALWAYS AS (octet_length(message::text)) STORED;
