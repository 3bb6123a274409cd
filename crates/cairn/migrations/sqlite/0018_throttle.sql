-- Throttled jobs: the key that allows one job per period, whatever became of it. The index finds a key's jobs
-- created since the period began.
ALTER TABLE jobs ADD COLUMN throttle_key TEXT;
CREATE INDEX jobs_throttle ON jobs (throttle_key, created_at) WHERE throttle_key IS NOT NULL;
