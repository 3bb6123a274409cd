-- Steps inside a handler's run (ops/step.rs): each step's result, recorded once under the job's lease and read back
-- by every later attempt instead of running the step again. `seq` keeps the order they were recorded in. The job
-- counts its steps and their bytes, so that a claim reads the steps only of a job that has some, and the limits
-- are checked without reading them.
CREATE TABLE job_steps (
    job_id      INTEGER NOT NULL,
    name        TEXT    NOT NULL,
    seq         INTEGER NOT NULL,
    result      TEXT    NOT NULL,
    attempt     INTEGER NOT NULL,
    recorded_at INTEGER NOT NULL,
    PRIMARY KEY (job_id, name)
) WITHOUT ROWID;

ALTER TABLE jobs ADD COLUMN step_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN step_bytes INTEGER NOT NULL DEFAULT 0;
