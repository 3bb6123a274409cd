-- When a job's handler suspended it (a sleep, a wait for a signal or for its children: ops/step.rs's `suspend`),
-- while it stays suspended: cleared when a worker takes it again. The queue's counts tell suspended jobs apart.
ALTER TABLE jobs ADD COLUMN suspended_at INTEGER;
