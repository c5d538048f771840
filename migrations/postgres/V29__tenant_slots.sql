-- A turn starts in one of its tenant's slots, numbered from 0 below the tenant's limit of
-- concurrent turns over every process. Until now a start counted the tenant's running
-- turns under one lock per tenant, held until the start's commit had reached the disk: a
-- tenant's turns started one at a time, however many processes and cores served them.
-- A slot is held by the running turn whose `slot` it is, and frees itself when the turn
-- leaves `running`. Two starts never take one slot: each takes the slot's advisory lock
-- first (held to its commit), and only tries it, skipping a slot another start holds
-- instead of waiting for that start's commit.
ALTER TABLE turns ADD COLUMN slot integer;
CREATE INDEX turns_running_slots ON turns (tenant_id, slot) WHERE status = 'running';

-- Starts the queued turn `turn` of `tenant` in a free slot below `within`, if fewer than
-- `within` of the tenant's turns run; with `claimer` set, only if no process owns the
-- turn, which becomes `claimer`'s. `false`: no free slot (or the turn is no longer queued).
-- A slot another start is taking is skipped: if that start fails, the turn is started on
-- a later ask, as a turn finding its tenant at its limit is.
CREATE FUNCTION agentry_claim_slot(tenant uuid, turn uuid, within bigint, claimer uuid)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    key integer := hashtext(tenant::text);
    running bigint;
    candidate integer;
BEGIN
    SELECT COUNT(*) INTO running FROM turns r WHERE r.tenant_id = tenant AND r.status = 'running';
    IF running >= within THEN
        RETURN false;
    END IF;
    -- Free slots as of now; more starts than that many at once are told there is none.
    FOR candidate IN
        SELECT s FROM generate_series(0, (LEAST(within, running + 64) - 1)::integer) AS s
        WHERE NOT EXISTS (SELECT 1 FROM turns r
                          WHERE r.tenant_id = tenant AND r.status = 'running' AND r.slot = s)
    LOOP
        IF pg_try_advisory_xact_lock(key, candidate) THEN
            -- A statement of its own: it sees every start that held this lock before.
            IF NOT EXISTS (SELECT 1 FROM turns r WHERE r.tenant_id = tenant
                           AND r.status = 'running' AND r.slot = candidate) THEN
                UPDATE turns t SET status = 'running', slot = candidate,
                    owner = COALESCE(claimer, t.owner)
                WHERE t.tenant_id = tenant AND t.id = turn AND t.status = 'queued'
                AND (claimer IS NULL OR t.owner IS NULL)
                AND (SELECT COUNT(*) FROM turns r
                     WHERE r.tenant_id = tenant AND r.status = 'running') < within;
                RETURN FOUND;
            END IF;
        END IF;
    END LOOP;
    RETURN false;
END;
$$;

-- A plain admission starts its turn in a slot (V28 took the tenant's lock).
CREATE OR REPLACE FUNCTION agentry_admit(
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
        started := agentry_claim_slot(tenant, turn_id, start_within, NULL);
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
