-- As SQLite's 0019: concurrency keys, the queue's limit per key, and the ready jobs split between two indexes.
-- Keys compare in byte order (collation "C"), as SQLite's do.
ALTER TABLE jobs ADD COLUMN concurrency_key TEXT COLLATE "C";
ALTER TABLE jobs ADD COLUMN concurrency_limit BIGINT;
ALTER TABLE queues ADD COLUMN key_concurrency BIGINT;
ALTER TABLE queues ADD COLUMN keyed BOOLEAN NOT NULL DEFAULT false;

DROP INDEX jobs_ready;
CREATE INDEX jobs_ready ON jobs (queue, claim_key, run_at, id) WHERE state = 'queued' AND concurrency_key IS NULL;
CREATE INDEX jobs_ready_by_key ON jobs (queue, claim_key, concurrency_key, run_at, id)
    WHERE state = 'queued' AND concurrency_key IS NOT NULL;
CREATE INDEX jobs_running_by_key ON jobs (queue, concurrency_key)
    WHERE state = 'running' AND concurrency_key IS NOT NULL;

CREATE TABLE concurrency_key_weights (
    queue  TEXT   NOT NULL,
    key    TEXT   COLLATE "C" NOT NULL,
    weight BIGINT NOT NULL,
    PRIMARY KEY (queue, key)
);
