-- What an attempt's process used, when the worker measured it (the `cairn work` manager does): wall-clock run
-- time and CPU time in milliseconds, peak resident memory in bytes. NULL when not reported.

ALTER TABLE job_attempts ADD COLUMN run_ms INTEGER;
ALTER TABLE job_attempts ADD COLUMN cpu_ms INTEGER;
ALTER TABLE job_attempts ADD COLUMN peak_memory INTEGER;
