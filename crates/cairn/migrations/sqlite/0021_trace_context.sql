-- The W3C trace context a job was pushed with (`traceparent`), handed to the worker that runs it, so that a trace
-- goes from the request that enqueued the job to the handler that ran it.
ALTER TABLE jobs ADD COLUMN trace_parent TEXT;
