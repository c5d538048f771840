-- Tokens a turn reserved of its tenant's daily token quota when it was admitted: counted
-- (or what it reported, if more) while the turn is queued or running, so that parallel
-- turns cannot all pass a quota only one of them fits; once it ends only what it reported
-- counts.
ALTER TABLE turns ADD COLUMN reserved_tokens BIGINT NOT NULL DEFAULT 0;
