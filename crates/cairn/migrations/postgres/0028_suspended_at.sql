-- As SQLite's 0030: when a job's handler suspended it, until a worker takes it again.
ALTER TABLE jobs ADD COLUMN suspended_at BIGINT;
