-- Concurrency keys: a job may carry a key (`customer:42`); a queue may let at most N jobs of one key run at once,
-- and a job may carry its own N. Keyed jobs take turns by key (see ops/claim_keys.rs).
ALTER TABLE jobs ADD COLUMN concurrency_key TEXT;
ALTER TABLE jobs ADD COLUMN concurrency_limit INTEGER;
-- The queue's limit per key, and whether it has ever held a keyed job (its claims then look at keyed jobs too).
ALTER TABLE queues ADD COLUMN key_concurrency INTEGER;
ALTER TABLE queues ADD COLUMN keyed INTEGER NOT NULL DEFAULT 0;

-- A ready job is in exactly one of two indexes, so that a keyed job costs a write no more than another:
-- `jobs_ready` holds the jobs without a key, in claim order, as before;
DROP INDEX jobs_ready;
CREATE INDEX jobs_ready ON jobs (queue, claim_key, run_at, id) WHERE state = 'queued' AND concurrency_key IS NULL;
-- `jobs_ready_by_key` the jobs with one, by priority level, then key, then age: a claim steps from one key to the
-- next at a level (a step per key, however many jobs a key holds).
CREATE INDEX jobs_ready_by_key ON jobs (queue, claim_key, concurrency_key, run_at, id)
    WHERE state = 'queued' AND concurrency_key IS NOT NULL;
-- A key's running jobs, counted when a claim meets the key.
CREATE INDEX jobs_running_by_key ON jobs (queue, concurrency_key)
    WHERE state = 'running' AND concurrency_key IS NOT NULL;

-- Weighted turns: a key of weight N takes up to N jobs per turn (1 when absent).
CREATE TABLE concurrency_key_weights (
    queue  TEXT    NOT NULL,
    key    TEXT    NOT NULL,
    weight INTEGER NOT NULL,
    PRIMARY KEY (queue, key)
);
