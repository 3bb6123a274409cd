-- Jobs that wait on other jobs: dependencies, and parents with children.
--
-- A job is `waiting` while any of these holds:
--   * it has a row in job_dependencies (a dependency that has not completed yet);
--   * awaits_parent = 1: a running job created it, and it starts only once that run finishes;
--   * it is a parent whose run finished while it had live children, which it waits for.
-- The engine moves a waiting job to queued (or scheduled) in the transaction that clears the last of these.

-- One row per dependency not yet met. The row goes when the dependency completes; a job with no rows left (and
-- nothing else to wait for) becomes ready. No foreign keys, as for job_attempts.
CREATE TABLE job_dependencies (
    job_id     INTEGER NOT NULL, -- the waiting job
    depends_on INTEGER NOT NULL, -- the job it waits for
    PRIMARY KEY (job_id, depends_on)
) WITHOUT ROWID;

-- Serves finding the jobs that wait for one that just completed, failed or went away.
CREATE INDEX job_dependents ON job_dependencies (depends_on, job_id);

-- Serves listing a parent's children and counting the live ones.
CREATE INDEX jobs_children ON jobs (parent_id, state) WHERE parent_id IS NOT NULL;

-- 1 while a child waits for the run of its parent that created it to finish.
ALTER TABLE jobs ADD COLUMN awaits_parent INTEGER NOT NULL DEFAULT 0;

-- Set once a job has children or dependents, so that ending a job that has neither costs no lookups.
ALTER TABLE jobs ADD COLUMN has_children INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN has_dependents INTEGER NOT NULL DEFAULT 0;
