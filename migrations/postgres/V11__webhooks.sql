-- Webhook endpoints a tenant registered, and the outbox of messages to deliver to them.
-- A delivery row is written in the transaction of the event that causes it; a sender takes
-- an endpoint's lease, then sends its pending deliveries one at a time, oldest first.
CREATE TABLE webhook_endpoints (
    id               uuid PRIMARY KEY,
    tenant_id        uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    url              text NOT NULL,
    description      text,
    -- The event types it receives, one bit each.
    event_mask       bigint NOT NULL,
    -- How deliveries prove they come from us: 'signature' (Standard Webhooks) or 'bearer'.
    auth             text NOT NULL CHECK (auth IN ('signature', 'bearer')),
    -- Sealed with the secrets key; the previous secret signs too until it expires.
    secret           text NOT NULL,
    previous_secret  text,
    previous_until   timestamptz,
    enabled          boolean NOT NULL,
    disabled_reason  text,
    -- When the oldest pending delivery is next tried (NULL: as soon as there is one).
    retry_at         timestamptz,
    -- The process sending its deliveries, until when.
    lease_owner      uuid,
    lease_until      timestamptz,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL
);

CREATE INDEX webhook_endpoints_tenant ON webhook_endpoints (tenant_id, id);
-- The senders' search for endpoints with due deliveries.
CREATE INDEX webhook_endpoints_due ON webhook_endpoints (retry_at) WHERE enabled;

CREATE TABLE webhook_deliveries (
    endpoint_id      uuid NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    -- The message id: the `webhook-id` of every attempt.
    message_id       uuid NOT NULL,
    tenant_id        uuid NOT NULL,
    event_type       text NOT NULL,
    agent            text NOT NULL,
    -- The event's data (JSON) without the agent.
    data             text NOT NULL,
    status           text NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts         integer NOT NULL,
    -- Since when it has been tried (its creation, or its last replay).
    queued_at        timestamptz NOT NULL,
    next_attempt_at  timestamptz,
    last_attempt_at  timestamptz,
    last_status      integer,
    last_error       text,
    created_at       timestamptz NOT NULL,
    PRIMARY KEY (endpoint_id, message_id)
);

CREATE INDEX webhook_deliveries_pending ON webhook_deliveries (endpoint_id, message_id)
    WHERE status = 'pending';
