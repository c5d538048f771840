-- A history message's size is the length of its JSON text as agentry writes it (no space
-- after `:` or `,`), the size SQLite stores and the one agentry counts for a message it
-- keeps in memory. JSONB's own text puts a space after each `:` and `,`; this function
-- takes them off, so a size read from the database and a size counted in memory agree
-- (a session's size limit, a page cut by bytes, a model request's estimated tokens).
CREATE FUNCTION agentry_json_text_bytes(j jsonb) RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT octet_length(j::text) - COALESCE((
        SELECT SUM(CASE jsonb_typeof(v)
            WHEN 'object' THEN GREATEST(2 * (SELECT count(*) FROM jsonb_object_keys(v)) - 1, 0)
            WHEN 'array' THEN GREATEST(jsonb_array_length(v) - 1, 0)
            ELSE 0 END)
        FROM jsonb_path_query(j, 'strict $.**') AS v), 0)
$$;

ALTER TABLE history DROP COLUMN bytes;
ALTER TABLE history
    ADD COLUMN bytes BIGINT GENERATED ALWAYS AS (agentry_json_text_bytes(message)) STORED;
ALTER TABLE compacted_history DROP COLUMN bytes;
ALTER TABLE compacted_history
    ADD COLUMN bytes BIGINT GENERATED ALWAYS AS (agentry_json_text_bytes(message)) STORED;
