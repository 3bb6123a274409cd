-- Failure groups and queue control.

-- Serves listing the failure groups with their counts, the jobs of one group, and unfail (the oldest failed jobs
-- of a group first).
CREATE INDEX jobs_failure_groups ON jobs (failure_group, id) WHERE state = 'failed';

-- Settings of a queue, one row per queue that has any; a queue without a row has the defaults.
CREATE TABLE queues (
    name   TEXT    PRIMARY KEY,
    paused INTEGER NOT NULL DEFAULT 0 -- 1: hands out nothing; everything else (enqueue, finish, …) works
) WITHOUT ROWID;
