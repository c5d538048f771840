-- A turn's plain admission and a batch of the event writer are each one statement: a call
-- of the function below, so one round trip (a statement alone is its own transaction)
-- where `BEGIN`, each statement and `COMMIT` were one each. Every value comes as a bound
-- parameter; rows come as arrays, one per column, whose i-th elements make the i-th row.
-- A check that fails raises 'agentry: stale', which undoes the whole statement.

-- A history message's size (`bytes`, see V27) is given by the functions below, which hold
-- the message's JSON text as agentry wrote it: its length is the size. Other inserts, and
-- a message changed in place, are measured from the JSONB by a trigger, as V27's
-- generated column measured every row (walking the JSONB, in a function planned again at
-- each statement: most of what an insert cost the server).
ALTER TABLE history ALTER COLUMN bytes DROP EXPRESSION;
ALTER TABLE compacted_history ALTER COLUMN bytes DROP EXPRESSION;

CREATE FUNCTION agentry_measure_message() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.bytes := agentry_json_text_bytes(NEW.message);
    RETURN NEW;
END;
$$;

CREATE TRIGGER history_measured BEFORE INSERT ON history
    FOR EACH ROW WHEN (NEW.bytes IS NULL) EXECUTE FUNCTION agentry_measure_message();
CREATE TRIGGER history_remeasured BEFORE UPDATE OF message ON history
    FOR EACH ROW EXECUTE FUNCTION agentry_measure_message();
CREATE TRIGGER compacted_history_measured BEFORE INSERT ON compacted_history
    FOR EACH ROW WHEN (NEW.bytes IS NULL) EXECUTE FUNCTION agentry_measure_message();
CREATE TRIGGER compacted_history_remeasured BEFORE UPDATE OF message ON compacted_history
    FOR EACH ROW EXECUTE FUNCTION agentry_measure_message();

-- Records a queued turn and the messages it brings (in order, after the session's last),
-- only if the session is the tenant's and, with `remembered_at` set, still as the caller
-- remembers it (its row's last change, its compaction point, -1 for none, and its
-- history's length). With `start_within` set, the turn starts at once (`running`) if its
-- tenant runs fewer turns than that over every process, under the tenant's slot lock.
-- `started`: whether it started; `last_seq`: the session's last event's seq (0 if none),
-- read once the turn is the session's active one, so the turn's first event follows it
-- (while the turn is active only its runner writes the session's events).
CREATE FUNCTION agentry_admit(
    turn_id uuid, tenant uuid, session uuid, status text, stream text, usage text,
    idempotency_key text, request_hash text, created_at timestamptz, owner uuid,
    permissions text, trace_parent text,
    remembered_at timestamptz, remembered_compacted bigint, remembered_length bigint,
    start_within bigint,
    messages text[],
    OUT started boolean, OUT last_seq bigint
) LANGUAGE plpgsql AS $$
BEGIN
    started := false;
    IF remembered_at IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM sessions s WHERE s.id = session AND s.tenant_id = tenant
        AND s.updated_at = remembered_at
        AND COALESCE(s.compacted_through, -1) = remembered_compacted
        AND (SELECT COALESCE(MAX(h.position) + 1, 0) FROM history h
             WHERE h.session_id = session) = remembered_length)
    THEN
        RAISE EXCEPTION 'agentry: stale';
    END IF;
    INSERT INTO turns (id, tenant_id, session_id, status, stream, usage, idempotency_key,
        request_hash, created_at, owner, permissions, trace_parent)
    VALUES (turn_id, tenant, session, status, stream, usage::jsonb, idempotency_key,
        request_hash, created_at, owner, permissions::jsonb, trace_parent);
    IF start_within IS NOT NULL THEN
        PERFORM pg_advisory_xact_lock(hashtextextended(tenant::text, 7));
        UPDATE turns t SET status = 'running'
        WHERE t.tenant_id = tenant AND t.id = turn_id AND t.status = 'queued'
        AND (SELECT COUNT(*) FROM turns r
             WHERE r.tenant_id = tenant AND r.status = 'running') < start_within;
        started := FOUND;
    END IF;
    FOR i IN 1 .. COALESCE(cardinality(messages), 0) LOOP
        INSERT INTO history (session_id, position, message, created_at, turn_id, bytes)
        SELECT s.id,
            (SELECT COALESCE(MAX(h.position) + 1, 0) FROM history h WHERE h.session_id = s.id),
            messages[i]::jsonb, agentry_admit.created_at, agentry_admit.turn_id,
            octet_length(messages[i])
        FROM sessions s WHERE s.id = session AND s.tenant_id = tenant;
    END LOOP;
    SELECT COALESCE(MAX(e.seq), 0) INTO last_seq FROM events e WHERE e.session_id = session;
END;
$$;

-- Appends a batch of the event writer, if every turn of `turns` is still queued or running
-- and owned by `origin` (their rows stay locked until the commit, so another process's
-- claim of a turn either commits before, and the batch is refused, or waits for it);
-- else it writes nothing and `fenced` names the turns that are not. In order: the single
-- deltas coalesced rows replace are removed (`unevent_*`: session, first and last seq),
-- the events inserted, the history messages appended (each after its session's last, if
-- the session is the tenant's), the turns started (`start_*`) and ended (`stop_*`, each
-- queueing its webhook message `message_*` to the tenant's enabled endpoints that take
-- it), refused ('agentry: stale') where a turn is no longer queued or running; then the
-- notifications `payloads` are sent (at the commit). `queued`: the deliveries queued.
CREATE FUNCTION agentry_append(
    origin uuid, turns uuid[],
    unevent_sessions uuid[], unevent_first bigint[], unevent_last bigint[],
    event_sessions uuid[], event_seqs bigint[], event_turns uuid[], event_kinds text[],
    event_data text[], event_times timestamptz[],
    history_sessions uuid[], history_tenants uuid[], history_messages text[],
    history_times timestamptz[], history_turns uuid[],
    start_turns uuid[], start_tenants uuid[], start_times timestamptz[], start_seqs bigint[],
    stop_turns uuid[], stop_tenants uuid[], stop_sessions uuid[], stop_statuses text[],
    stop_reasons text[], stop_errors text[], stop_usages text[], stop_times timestamptz[],
    stop_seqs bigint[], stop_started_times timestamptz[], stop_started_seqs bigint[],
    message_ids uuid[], message_types text[], message_data text[], message_bits bigint[],
    payloads text[],
    OUT fenced uuid[], OUT queued bigint
) LANGUAGE plpgsql AS $$
DECLARE
    held uuid[];
    added bigint;
BEGIN
    queued := 0;
    SELECT COALESCE(array_agg(t.id), '{}') INTO held FROM (
        SELECT id FROM turns
        WHERE id = ANY (agentry_append.turns) AND owner = origin
        AND status IN ('queued', 'running')
        FOR UPDATE) AS t;
    IF cardinality(held) < cardinality(agentry_append.turns) THEN
        fenced := ARRAY(SELECT t FROM unnest(agentry_append.turns) AS t
                        WHERE t <> ALL (held));
        RETURN;
    END IF;
    fenced := '{}';
    FOR i IN 1 .. COALESCE(cardinality(unevent_sessions), 0) LOOP
        DELETE FROM events
        WHERE session_id = unevent_sessions[i] AND seq BETWEEN unevent_first[i] AND unevent_last[i];
    END LOOP;
    INSERT INTO events (session_id, seq, turn_id, kind, data, created_at)
    SELECT s, q, t, k, d::jsonb, c
    FROM unnest(event_sessions, event_seqs, event_turns, event_kinds, event_data, event_times)
        AS e (s, q, t, k, d, c);
    FOR i IN 1 .. COALESCE(cardinality(history_sessions), 0) LOOP
        INSERT INTO history (session_id, position, message, created_at, turn_id, bytes)
        SELECT s.id,
            (SELECT COALESCE(MAX(h.position) + 1, 0) FROM history h WHERE h.session_id = s.id),
            history_messages[i]::jsonb, history_times[i], history_turns[i],
            octet_length(history_messages[i])
        FROM sessions s WHERE s.id = history_sessions[i] AND s.tenant_id = history_tenants[i];
    END LOOP;
    FOR i IN 1 .. COALESCE(cardinality(start_turns), 0) LOOP
        UPDATE turns SET status = 'running', started_at = start_times[i],
            first_seq = COALESCE(first_seq, start_seqs[i])
        WHERE id = start_turns[i] AND tenant_id = start_tenants[i]
        AND status IN ('queued', 'running');
        IF NOT FOUND THEN
            RAISE EXCEPTION 'agentry: stale';
        END IF;
    END LOOP;
    FOR i IN 1 .. COALESCE(cardinality(stop_turns), 0) LOOP
        UPDATE turns SET status = stop_statuses[i], stop_reason = stop_reasons[i],
            error = stop_errors[i]::jsonb, usage = stop_usages[i]::jsonb,
            finished_at = stop_times[i], last_seq = stop_seqs[i],
            first_seq = COALESCE(first_seq, stop_started_seqs[i], stop_seqs[i]),
            started_at = COALESCE(started_at, stop_started_times[i])
        WHERE id = stop_turns[i] AND tenant_id = stop_tenants[i]
        AND status IN ('queued', 'running');
        IF NOT FOUND THEN
            RAISE EXCEPTION 'agentry: stale';
        END IF;
        INSERT INTO webhook_deliveries (endpoint_id, message_id, tenant_id, event_type, agent,
            data, status, attempts, queued_at, next_attempt_at, created_at)
        SELECT e.id, message_ids[i], e.tenant_id, message_types[i], s.agent, message_data[i],
            'pending', 0, stop_times[i], stop_times[i], stop_times[i]
        FROM webhook_endpoints e JOIN sessions s ON s.id = stop_sessions[i]
            AND s.tenant_id = e.tenant_id
        WHERE e.tenant_id = stop_tenants[i] AND e.run_id IS NULL AND e.enabled
        AND (e.event_mask & message_bits[i]) <> 0;
        GET DIAGNOSTICS added = ROW_COUNT;
        queued := queued + added;
    END LOOP;
    PERFORM pg_notify('agentry_events', p) FROM unnest(payloads) AS p;
END;
$$;
