-- A queue's concurrency limit: at most this many of its jobs run at once, across all workers. NULL: no limit.
ALTER TABLE queues ADD COLUMN concurrency INTEGER;
