-- Tracked jobs and the workers the queue has seen.

-- 1 for a job someone asked to keep an eye on.
ALTER TABLE jobs ADD COLUMN tracked INTEGER NOT NULL DEFAULT 0;

-- Serves listing the tracked jobs, newest first.
CREATE INDEX jobs_tracked ON jobs (id) WHERE tracked = 1;

-- Serves listing a worker's jobs, and counting them.
CREATE INDEX jobs_by_worker ON jobs (worker) WHERE state = 'running';

-- Every worker that took jobs or heartbeated, and when it was last seen (to a second: a worker seen again within a
-- second is not written again). Forgotten after QueueOptions::worker_max_age without a sign of life.
CREATE TABLE workers (
    id         TEXT    PRIMARY KEY,
    first_seen INTEGER NOT NULL,
    last_seen  INTEGER NOT NULL
) WITHOUT ROWID;

-- Serves forgetting the workers not seen for a while.
CREATE INDEX workers_last_seen ON workers (last_seen);
