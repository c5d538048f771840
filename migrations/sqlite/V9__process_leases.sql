-- The processes serving the database, each with a lease it renews while it lives, and the
-- process that runs each turn. A turn left unfinished by a process whose lease expired is
-- ended by a living one.
CREATE TABLE processes (
    id BLOB PRIMARY KEY NOT NULL,
    host TEXT NOT NULL,
    started_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
) WITHOUT ROWID;

-- A queued turn no process has taken yet has no owner: any process with a free slot may
-- take it. The answers to permission requests it carries, for whichever process runs it.
ALTER TABLE turns ADD COLUMN owner BLOB;
ALTER TABLE turns ADD COLUMN permissions TEXT;
-- Why another process asked the owner to stop the turn; the owner checks at each renewal of
-- its lease, so a stop whose notification was lost still arrives.
ALTER TABLE turns ADD COLUMN stop_requested TEXT;

-- A tenant's active turns, counted against its limit over every process.
CREATE INDEX turns_tenant_active ON turns (tenant_id) WHERE status IN ('queued', 'running');
