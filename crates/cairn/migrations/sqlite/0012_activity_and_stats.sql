-- The activity log and the statistics, both written by the writer once per batch from what the batch did.

-- Every job and worker transition, newest last. Rows are appended in time order, so the oldest are the lowest ids:
-- pruning by age walks from the lowest id, and a time range is read from the newest back. A job's story is read
-- through activity_by_job. Queries by queue or worker filter a time range.
CREATE TABLE activity (
    id     INTEGER PRIMARY KEY,
    at     INTEGER NOT NULL,
    event  TEXT    NOT NULL, -- added, started, heartbeat_lost, retried, finished, failed, cancelled, released,
                             -- requeued, unfailed, worker_started, worker_stopped, worker_lost
    job_id INTEGER,
    queue  TEXT,
    name   TEXT,
    worker TEXT,
    detail TEXT              -- the error of a retry or failure, the reason of a cancel, …
);

CREATE INDEX activity_by_job ON activity (job_id, id) WHERE job_id IS NOT NULL;

-- Per minute, queue and job name: how many jobs were added, started, finished, retried and failed, and the wait,
-- run and service times of those that started or ended in it (count, sum, sum of squares for the variance, min,
-- max). Kept incrementally: the writer adds each batch's totals with one upsert per minute, queue and name.
CREATE TABLE stats_minute (
    minute        INTEGER NOT NULL, -- the minute's start
    queue         TEXT    NOT NULL,
    name          TEXT    NOT NULL,
    added         INTEGER NOT NULL DEFAULT 0,
    started       INTEGER NOT NULL DEFAULT 0,
    finished      INTEGER NOT NULL DEFAULT 0,
    retried       INTEGER NOT NULL DEFAULT 0,
    failed        INTEGER NOT NULL DEFAULT 0,
    wait_count    INTEGER NOT NULL DEFAULT 0,
    wait_sum      REAL    NOT NULL DEFAULT 0,
    wait_sumsq    REAL    NOT NULL DEFAULT 0,
    wait_min      INTEGER,
    wait_max      INTEGER,
    run_count     INTEGER NOT NULL DEFAULT 0,
    run_sum       REAL    NOT NULL DEFAULT 0,
    run_sumsq     REAL    NOT NULL DEFAULT 0,
    run_min       INTEGER,
    run_max       INTEGER,
    service_count INTEGER NOT NULL DEFAULT 0,
    service_sum   REAL    NOT NULL DEFAULT 0,
    service_min   INTEGER,
    service_max   INTEGER,
    PRIMARY KEY (minute, queue, name)
) WITHOUT ROWID;

-- Wait and run time histograms per hour, queue and name, with qless's resolution: one bucket per second under a
-- minute, per minute under an hour, per hour under a day, then per day. Only buckets that were hit have a row.
CREATE TABLE stats_histogram (
    hour   INTEGER NOT NULL, -- the hour's start
    queue  TEXT    NOT NULL,
    name   TEXT    NOT NULL,
    metric TEXT    NOT NULL, -- wait or run
    bucket INTEGER NOT NULL, -- the bucket's lower bound, in ms
    count  INTEGER NOT NULL,
    PRIMARY KEY (hour, queue, name, metric, bucket)
) WITHOUT ROWID;

-- Per hour and worker: how long it was there (the gaps between its signs of life, when short enough that it did not
-- count as lost), and per queue how long it ran that queue's jobs. Utilization is busy over present.
CREATE TABLE worker_hour (
    hour       INTEGER NOT NULL,
    worker     TEXT    NOT NULL,
    queue      TEXT    NOT NULL, -- '' for the worker's presence row
    present_ms INTEGER NOT NULL DEFAULT 0,
    busy_ms    INTEGER NOT NULL DEFAULT 0,
    attempts   INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (hour, worker, queue)
) WITHOUT ROWID;

-- active, stopped (it said goodbye) or lost (no sign of life for a while); the activity log has the transitions.
ALTER TABLE workers ADD COLUMN status TEXT NOT NULL DEFAULT 'active';
