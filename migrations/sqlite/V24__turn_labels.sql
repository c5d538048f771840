-- Labels a client attached to a turn (a JSON object a face keeps with it: what its
-- protocol's request named that the engine does not, such as a caller's metadata).
ALTER TABLE turns ADD COLUMN labels TEXT;
