-- As SQLite's 0018: the key that allows one job per period, and the index that finds a key's recent jobs.
ALTER TABLE jobs ADD COLUMN throttle_key TEXT;
CREATE INDEX jobs_throttle ON jobs (throttle_key, created_at) WHERE throttle_key IS NOT NULL;
