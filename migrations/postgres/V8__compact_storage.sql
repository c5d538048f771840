-- Compact storage: ids as native uuid (the prefix lives only on the wire), and no tenant id
-- on rows whose session already names it (events, history). Timestamps stay timestamptz.
-- Foreign keys are dropped while their columns change type, then made again.

ALTER TABLE credentials DROP CONSTRAINT credentials_tenant_id_fkey;
ALTER TABLE api_tokens DROP CONSTRAINT api_tokens_tenant_id_fkey;
ALTER TABLE sessions DROP CONSTRAINT sessions_tenant_id_fkey;
ALTER TABLE history DROP CONSTRAINT history_session_id_fkey;
ALTER TABLE compacted_history DROP CONSTRAINT compacted_history_session_id_fkey;
ALTER TABLE turns DROP CONSTRAINT turns_run_id_fkey;
ALTER TABLE turns DROP CONSTRAINT turns_tenant_id_fkey;
ALTER TABLE turns DROP CONSTRAINT turns_session_id_fkey;
ALTER TABLE events DROP CONSTRAINT events_session_id_fkey;
ALTER TABLE memory_notes DROP CONSTRAINT memory_notes_tenant_id_fkey;
ALTER TABLE files DROP CONSTRAINT files_tenant_id_fkey;
ALTER TABLE files DROP CONSTRAINT files_session_id_fkey;
ALTER TABLE runs DROP CONSTRAINT runs_tenant_id_fkey;
ALTER TABLE runs DROP CONSTRAINT runs_session_id_fkey;
ALTER TABLE history DROP COLUMN tenant_id;
ALTER TABLE compacted_history DROP COLUMN tenant_id;
ALTER TABLE events DROP COLUMN tenant_id;
DROP INDEX events_turn;
ALTER TABLE tenants
    ALTER COLUMN id TYPE uuid USING substr(id, strpos(id, '_') + 1)::uuid;
ALTER TABLE credentials
    ALTER COLUMN id TYPE uuid USING substr(id, strpos(id, '_') + 1)::uuid,
    ALTER COLUMN tenant_id TYPE uuid USING substr(tenant_id, strpos(tenant_id, '_') + 1)::uuid;
ALTER TABLE api_tokens
    ALTER COLUMN id TYPE uuid USING substr(id, strpos(id, '_') + 1)::uuid,
    ALTER COLUMN tenant_id TYPE uuid USING substr(tenant_id, strpos(tenant_id, '_') + 1)::uuid;
ALTER TABLE sessions
    ALTER COLUMN id TYPE uuid USING substr(id, strpos(id, '_') + 1)::uuid,
    ALTER COLUMN tenant_id TYPE uuid USING substr(tenant_id, strpos(tenant_id, '_') + 1)::uuid;
ALTER TABLE history
    ALTER COLUMN session_id TYPE uuid USING substr(session_id, strpos(session_id, '_') + 1)::uuid,
    ALTER COLUMN turn_id TYPE uuid USING substr(turn_id, strpos(turn_id, '_') + 1)::uuid;
ALTER TABLE compacted_history
    ALTER COLUMN session_id TYPE uuid USING substr(session_id, strpos(session_id, '_') + 1)::uuid,
    ALTER COLUMN turn_id TYPE uuid USING substr(turn_id, strpos(turn_id, '_') + 1)::uuid;
ALTER TABLE turns
    ALTER COLUMN id TYPE uuid USING substr(id, strpos(id, '_') + 1)::uuid,
    ALTER COLUMN tenant_id TYPE uuid USING substr(tenant_id, strpos(tenant_id, '_') + 1)::uuid,
    ALTER COLUMN session_id TYPE uuid USING substr(session_id, strpos(session_id, '_') + 1)::uuid,
    ALTER COLUMN run_id TYPE uuid USING substr(run_id, strpos(run_id, '_') + 1)::uuid;
ALTER TABLE events
    ALTER COLUMN session_id TYPE uuid USING substr(session_id, strpos(session_id, '_') + 1)::uuid,
    ALTER COLUMN turn_id TYPE uuid USING substr(turn_id, strpos(turn_id, '_') + 1)::uuid;
ALTER TABLE memory_notes
    ALTER COLUMN tenant_id TYPE uuid USING substr(tenant_id, strpos(tenant_id, '_') + 1)::uuid;
ALTER TABLE files
    ALTER COLUMN id TYPE uuid USING substr(id, strpos(id, '_') + 1)::uuid,
    ALTER COLUMN tenant_id TYPE uuid USING substr(tenant_id, strpos(tenant_id, '_') + 1)::uuid,
    ALTER COLUMN session_id TYPE uuid USING substr(session_id, strpos(session_id, '_') + 1)::uuid;
ALTER TABLE runs
    ALTER COLUMN id TYPE uuid USING substr(id, strpos(id, '_') + 1)::uuid,
    ALTER COLUMN tenant_id TYPE uuid USING substr(tenant_id, strpos(tenant_id, '_') + 1)::uuid,
    ALTER COLUMN session_id TYPE uuid USING substr(session_id, strpos(session_id, '_') + 1)::uuid,
    ALTER COLUMN cancel_turn_id TYPE uuid USING substr(cancel_turn_id, strpos(cancel_turn_id, '_') + 1)::uuid;
ALTER TABLE credentials ADD CONSTRAINT credentials_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenants (id) ON DELETE CASCADE;
ALTER TABLE api_tokens ADD CONSTRAINT api_tokens_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenants (id) ON DELETE CASCADE;
ALTER TABLE sessions ADD CONSTRAINT sessions_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenants (id) ON DELETE CASCADE;
ALTER TABLE history ADD CONSTRAINT history_session_id_fkey FOREIGN KEY (session_id) REFERENCES sessions (id) ON DELETE CASCADE;
ALTER TABLE compacted_history ADD CONSTRAINT compacted_history_session_id_fkey FOREIGN KEY (session_id) REFERENCES sessions (id) ON DELETE CASCADE;
ALTER TABLE turns ADD CONSTRAINT turns_run_id_fkey FOREIGN KEY (run_id) REFERENCES runs (id) ON DELETE CASCADE;
ALTER TABLE turns ADD CONSTRAINT turns_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenants (id) ON DELETE CASCADE;
ALTER TABLE turns ADD CONSTRAINT turns_session_id_fkey FOREIGN KEY (session_id) REFERENCES sessions (id) ON DELETE CASCADE;
ALTER TABLE events ADD CONSTRAINT events_session_id_fkey FOREIGN KEY (session_id) REFERENCES sessions (id) ON DELETE CASCADE;
ALTER TABLE memory_notes ADD CONSTRAINT memory_notes_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenants (id) ON DELETE CASCADE;
ALTER TABLE files ADD CONSTRAINT files_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenants (id) ON DELETE CASCADE;
ALTER TABLE files ADD CONSTRAINT files_session_id_fkey FOREIGN KEY (session_id) REFERENCES sessions (id) ON DELETE CASCADE;
ALTER TABLE runs ADD CONSTRAINT runs_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenants (id) ON DELETE CASCADE;
ALTER TABLE runs ADD CONSTRAINT runs_session_id_fkey FOREIGN KEY (session_id) REFERENCES sessions (id) ON DELETE CASCADE;
