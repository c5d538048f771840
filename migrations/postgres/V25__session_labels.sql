-- Labels a client attached to a session (a JSON object a face keeps with it: what its
-- protocol names of a conversation that the engine does not, such as a caller's metadata).
ALTER TABLE sessions ADD COLUMN labels TEXT;
