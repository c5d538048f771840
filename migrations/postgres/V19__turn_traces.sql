-- The W3C traceparent of the span that admitted a turn (the admitting request's), kept
-- while traces are exported: the turn's span is its child in whichever process runs it,
-- and the turn's record names its trace.
ALTER TABLE turns ADD COLUMN trace_parent TEXT;
