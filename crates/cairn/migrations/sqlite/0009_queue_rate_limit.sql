-- A queue's rate limit: at most rate_jobs of its jobs start per rate_period_ms, across all workers (a token
-- bucket, kept in the writer's memory). NULL: no limit.
ALTER TABLE queues ADD COLUMN rate_jobs INTEGER;
ALTER TABLE queues ADD COLUMN rate_period_ms INTEGER;
