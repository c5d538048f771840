-- Agents tenants make through the API. Every change is a new immutable version; one
-- version is published (what new sessions run); an archived agent takes no new sessions.
CREATE TABLE tenant_agents (
    id                 uuid PRIMARY KEY,
    tenant_id          uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name               text NOT NULL,
    latest_version     bigint NOT NULL,
    published_version  bigint,
    archived           boolean NOT NULL,
    -- Raised by every write: the agent's ETag.
    revision           bigint NOT NULL,
    created_at         timestamptz NOT NULL,
    updated_at         timestamptz NOT NULL
);
CREATE UNIQUE INDEX tenant_agents_name ON tenant_agents (tenant_id, name);

CREATE TABLE tenant_agent_versions (
    agent_id    uuid NOT NULL REFERENCES tenant_agents (id) ON DELETE CASCADE,
    version     bigint NOT NULL,
    -- The agent as sent (JSON).
    spec        text NOT NULL,
    -- The token that made it, or 'admin'.
    created_by  text NOT NULL,
    created_at  timestamptz NOT NULL,
    PRIMARY KEY (agent_id, version)
);

-- The tenant agent and version a session runs (NULL: a configured agent, by name).
ALTER TABLE sessions ADD COLUMN agent_id uuid;
ALTER TABLE sessions ADD COLUMN agent_version bigint;
