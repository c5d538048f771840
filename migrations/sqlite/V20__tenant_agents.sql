-- Agents tenants make through the API. Every change is a new immutable version; one
-- version is published (what new sessions run); an archived agent takes no new sessions.
CREATE TABLE tenant_agents (
    id                 BLOB PRIMARY KEY,
    tenant_id          BLOB NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name               TEXT NOT NULL,
    latest_version     INTEGER NOT NULL,
    published_version  INTEGER,
    archived           INTEGER NOT NULL,
    -- Raised by every write: the agent's ETag.
    revision           INTEGER NOT NULL,
    created_at         INTEGER NOT NULL,
    updated_at         INTEGER NOT NULL
) STRICT;
CREATE UNIQUE INDEX tenant_agents_name ON tenant_agents (tenant_id, name);

CREATE TABLE tenant_agent_versions (
    agent_id    BLOB NOT NULL REFERENCES tenant_agents (id) ON DELETE CASCADE,
    version     INTEGER NOT NULL,
    -- The agent as sent (JSON).
    spec        TEXT NOT NULL,
    -- The token that made it, or 'admin'.
    created_by  TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (agent_id, version)
) STRICT, WITHOUT ROWID;

-- The tenant agent and version a session runs (NULL: a configured agent, by name).
ALTER TABLE sessions ADD COLUMN agent_id BLOB;
ALTER TABLE sessions ADD COLUMN agent_version INTEGER;
