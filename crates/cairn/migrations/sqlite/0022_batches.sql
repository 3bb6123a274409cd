-- Batches: a group of jobs with callbacks, `on_complete` when every job has reached a final state (completed,
-- failed or cancelled) and `on_success` when every job has completed (see ops/batches.rs).
CREATE TABLE batches (
    id            INTEGER PRIMARY KEY,
    description   TEXT,
    open          INTEGER NOT NULL,           -- held open: it cannot complete until closed
    total         INTEGER NOT NULL DEFAULT 0, -- jobs ever added
    completed     INTEGER NOT NULL DEFAULT 0, -- of them, those now completed,
    failed        INTEGER NOT NULL DEFAULT 0, -- failed,
    cancelled     INTEGER NOT NULL DEFAULT 0, -- and cancelled (a live job deleted counts here: it will never run)
    on_success    TEXT,                       -- the callbacks' jobs, as JSON (as a recurring template's job)
    on_complete   TEXT,
    due           INTEGER NOT NULL DEFAULT 0, -- its counts reached an end the writer has not acted on yet
    created_at    INTEGER NOT NULL,
    completed_at  INTEGER,                    -- when every job first reached a final state, closed
    succeeded_at  INTEGER,                    -- when every job first completed, closed
    complete_job  INTEGER,                    -- the jobs the callbacks created
    success_job   INTEGER
);
-- The writer reads the head of this after each batch of operations: empty but for the moments a batch ends.
CREATE INDEX batches_due ON batches (id) WHERE due;
-- Retention: ended batches by age.
CREATE INDEX batches_completed ON batches (completed_at) WHERE completed_at IS NOT NULL;

ALTER TABLE jobs ADD COLUMN batch_id INTEGER;
CREATE INDEX jobs_by_batch ON jobs (batch_id, id) WHERE batch_id IS NOT NULL;

-- The counts are kept by the database, so that every path that adds, ends, revives or deletes a job counts, the
-- ones to come included. `due` is set when the counts reach an end (every job final, or every job completed) that
-- the batch has not reached before; the writer then creates the callbacks in the same transaction.
CREATE TRIGGER batch_job_added AFTER INSERT ON jobs WHEN NEW.batch_id IS NOT NULL
BEGIN
    UPDATE batches SET total = total + 1,
        completed = completed + (NEW.state = 'completed'),
        failed = failed + (NEW.state = 'failed'),
        cancelled = cancelled + (NEW.state = 'cancelled')
    WHERE id = NEW.batch_id;
END;

-- Only a change into or out of a final state counts: a claim or a retry leaves the batch's row alone.
CREATE TRIGGER batch_job_moved AFTER UPDATE OF state ON jobs
WHEN NEW.batch_id IS NOT NULL AND OLD.state <> NEW.state
    AND (OLD.state IN ('completed', 'failed', 'cancelled') OR NEW.state IN ('completed', 'failed', 'cancelled'))
BEGIN
    UPDATE batches SET
        completed = completed + (NEW.state = 'completed') - (OLD.state = 'completed'),
        failed = failed + (NEW.state = 'failed') - (OLD.state = 'failed'),
        cancelled = cancelled + (NEW.state = 'cancelled') - (OLD.state = 'cancelled'),
        due = due OR (NOT open AND (
            (completed_at IS NULL AND completed + failed + cancelled
                + (NEW.state IN ('completed', 'failed', 'cancelled'))
                - (OLD.state IN ('completed', 'failed', 'cancelled')) = total)
            OR (succeeded_at IS NULL AND completed + (NEW.state = 'completed') - (OLD.state = 'completed') = total)))
    WHERE id = NEW.batch_id;
END;

-- A live job deleted will never run: it counts as cancelled. An ended one (retention) leaves its count as it was.
CREATE TRIGGER batch_job_deleted AFTER DELETE ON jobs
WHEN OLD.batch_id IS NOT NULL AND OLD.state NOT IN ('completed', 'failed', 'cancelled')
BEGIN
    UPDATE batches SET cancelled = cancelled + 1,
        due = due OR (NOT open AND completed_at IS NULL AND completed + failed + cancelled + 1 = total)
    WHERE id = OLD.batch_id;
END;
