-- A rate-limited queue's token bucket, as of rate_at (ms), shared by the nodes: a claim on the queue locks its row,
-- reads the bucket, and writes back what it took. NULL: a full bucket (a new limit, or one just changed). The same
-- columns as SQLite's migration 0014, where the writer keeps the bucket in memory instead.
ALTER TABLE queues ADD COLUMN rate_tokens DOUBLE PRECISION, ADD COLUMN rate_at BIGINT;
