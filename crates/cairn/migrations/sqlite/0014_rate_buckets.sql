-- A rate-limited queue's token bucket, as of rate_at (ms): on PostgreSQL, where several nodes start the queue's
-- jobs, the bucket lives in the row and a claim reads and writes it under the row's lock. SQLite's one writer keeps
-- it in memory and leaves these NULL (a full bucket). Kept here too so that the two schemas stay the same.
ALTER TABLE queues ADD COLUMN rate_tokens REAL;
ALTER TABLE queues ADD COLUMN rate_at INTEGER;
