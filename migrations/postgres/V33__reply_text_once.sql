-- A packed row may leave its reply's text to the history message the same call wrote (see
-- src/store/packed.rs): `agentry_append` takes `event_refers`, whose rows it inserts with the
-- position of their session's last history message in front of their entries (refused, by
-- the NOT NULL of `data`, unless that message is of the row's turn; the batch's history
-- messages, appended before its events, end with the turn's reply). The last message is read
-- by one step back along the session's key, whatever the session's length. A release without this migration cannot read such rows; this
-- migration being applied makes it refuse to start on the database. Otherwise as V28:
--
-- Appends a batch of the event writer, if every turn of `turns` is still queued or running
-- and owned by `origin` (their rows stay locked until the commit, so another process's
-- claim of a turn either commits before, and the batch is refused, or waits for it);
-- else it writes nothing and `fenced` names the turns that are not. In order: the single
-- deltas coalesced rows replace are removed (`unevent_*`: session, first and last seq),
-- the history messages appended (each after its session's last, if the session is the
-- tenant's), the events inserted, the turns started (`start_*`) and ended (`stop_*`, each
-- queueing its webhook message `message_*` to the tenant's enabled endpoints that take
-- it), refused ('agentry: stale') where a turn is no longer queued or running; then the
-- notifications `payloads` are sent (at the commit). `queued`: the deliveries queued.
DROP FUNCTION agentry_append(uuid, uuid[], uuid[], bigint[], bigint[], uuid[], bigint[],
    uuid[], text[], text[], timestamptz[], uuid[], uuid[], text[], timestamptz[], uuid[],
    uuid[], uuid[], timestamptz[], bigint[], uuid[], uuid[], uuid[], text[], text[], text[],
    text[], timestamptz[], bigint[], timestamptz[], bigint[], uuid[], text[], text[],
    bigint[], text[]);

CREATE FUNCTION agentry_append(
    origin uuid, turns uuid[],
    unevent_sessions uuid[], unevent_first bigint[], unevent_last bigint[],
    event_sessions uuid[], event_seqs bigint[], event_turns uuid[], event_kinds text[],
    event_data text[], event_times timestamptz[], event_refers boolean[],
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
    FOR i IN 1 .. COALESCE(cardinality(history_sessions), 0) LOOP
        INSERT INTO history (session_id, position, message, created_at, turn_id, bytes)
        SELECT s.id,
            (SELECT COALESCE(MAX(h.position) + 1, 0) FROM history h WHERE h.session_id = s.id),
            history_messages[i]::jsonb, history_times[i], history_turns[i],
            octet_length(history_messages[i])
        FROM sessions s WHERE s.id = history_sessions[i] AND s.tenant_id = history_tenants[i];
    END LOOP;
    INSERT INTO events (session_id, seq, turn_id, kind, data, created_at)
    SELECT s, q, t, k,
        CASE WHEN r THEN
            ('[' || (SELECT last.position FROM (
                        SELECT h.position, h.turn_id FROM history h WHERE h.session_id = s
                        ORDER BY h.position DESC LIMIT 1) AS last
                     WHERE last.turn_id = t)
                 || ',' || substr(d, 2))::jsonb
        ELSE d::jsonb END,
        c
    FROM unnest(event_sessions, event_seqs, event_turns, event_kinds, event_data, event_times,
                event_refers)
        AS e (s, q, t, k, d, c, r);
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
