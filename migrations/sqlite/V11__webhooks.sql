-- Webhook endpoints a tenant registered, and the outbox of messages to deliver to them.
-- A delivery row is written in the transaction of the event that causes it; a sender takes
-- an endpoint's lease, then sends its pending deliveries one at a time, oldest first.
CREATE TABLE webhook_endpoints (
    id               BLOB PRIMARY KEY,
    tenant_id        BLOB NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    url              TEXT NOT NULL,
    description      TEXT,
    -- The event types it receives, one bit each.
    event_mask       INTEGER NOT NULL,
    -- How deliveries prove they come from us: 'signature' (Standard Webhooks) or 'bearer'.
    auth             TEXT NOT NULL CHECK (auth IN ('signature', 'bearer')),
    -- Sealed with the secrets key; the previous secret signs too until it expires.
    secret           TEXT NOT NULL,
    previous_secret  TEXT,
    previous_until   INTEGER,
    enabled          INTEGER NOT NULL,
    disabled_reason  TEXT,
    -- When the oldest pending delivery is next tried (NULL: as soon as there is one).
    retry_at         INTEGER,
    -- The process sending its deliveries, until when.
    lease_owner      BLOB,
    lease_until      INTEGER,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL
) STRICT;

CREATE INDEX webhook_endpoints_tenant ON webhook_endpoints (tenant_id, id);
-- The senders' search for endpoints with due deliveries.
CREATE INDEX webhook_endpoints_due ON webhook_endpoints (retry_at) WHERE enabled;

CREATE TABLE webhook_deliveries (
    endpoint_id      BLOB NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    -- The message id: the `webhook-id` of every attempt.
    message_id       BLOB NOT NULL,
    tenant_id        BLOB NOT NULL,
    event_type       TEXT NOT NULL,
    agent            TEXT NOT NULL,
    -- The event's data (JSON) without the agent.
    data             TEXT NOT NULL,
    status           TEXT NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts         INTEGER NOT NULL,
    -- Since when it has been tried (its creation, or its last replay).
    queued_at        INTEGER NOT NULL,
    next_attempt_at  INTEGER,
    last_attempt_at  INTEGER,
    last_status      INTEGER,
    last_error       TEXT,
    created_at       INTEGER NOT NULL,
    PRIMARY KEY (endpoint_id, message_id)
) STRICT, WITHOUT ROWID;

CREATE INDEX webhook_deliveries_pending ON webhook_deliveries (endpoint_id, message_id)
    WHERE status = 'pending';
