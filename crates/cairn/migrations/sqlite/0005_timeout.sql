-- The longest one attempt of a job may run, in milliseconds, heartbeats or not: its lease never reaches past
-- attempt_started_at + timeout_ms, so a worker that overruns loses the job to a retry. NULL: no limit beyond the
-- lease, which heartbeats extend.
ALTER TABLE jobs ADD COLUMN timeout_ms INTEGER;
