-- Provider-reported input tokens per estimated token, per session: corrects the
-- text-length estimate that keeps a compacted history within its budget. NULL: not yet known.
ALTER TABLE sessions ADD COLUMN token_ratio REAL;
