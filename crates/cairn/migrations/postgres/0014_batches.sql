-- As SQLite's 0022: batches, a group of jobs with callbacks (see ops/batches.rs).
CREATE TABLE batches (
    id            BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    description   TEXT,
    open          BOOLEAN NOT NULL,
    total         BIGINT  NOT NULL DEFAULT 0,
    completed     BIGINT  NOT NULL DEFAULT 0,
    failed        BIGINT  NOT NULL DEFAULT 0,
    cancelled     BIGINT  NOT NULL DEFAULT 0,
    on_success    json,
    on_complete   json,
    due           BOOLEAN NOT NULL DEFAULT false,
    created_at    BIGINT  NOT NULL,
    completed_at  BIGINT,
    succeeded_at  BIGINT,
    complete_job  BIGINT,
    success_job   BIGINT
);
CREATE INDEX batches_due ON batches (id) WHERE due;
CREATE INDEX batches_completed ON batches (completed_at) WHERE completed_at IS NOT NULL;

ALTER TABLE jobs ADD COLUMN batch_id BIGINT;
CREATE INDEX jobs_by_batch ON jobs (batch_id, id) WHERE batch_id IS NOT NULL;

-- The counts, kept by the database as on SQLite: an added job, a job moving into or out of a final state, a live
-- job deleted (counted as cancelled). The batch's row is locked by the update until the transaction ends, so that
-- of two nodes ending a batch's last two jobs at once, the second sees the first's count and only it sets `due`.
-- A batch made due raises a notice, which tells the session's writer to make its callbacks before it commits.
CREATE FUNCTION cairn_count_batch_job() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    batch       bigint;
    d_total     bigint := 0;
    d_completed bigint := 0;
    d_failed    bigint := 0;
    d_cancelled bigint := 0;
    is_due      boolean;
BEGIN
    IF TG_OP = 'INSERT' THEN
        batch := NEW.batch_id;
        d_total := 1;
        d_completed := (NEW.state = 'completed')::int;
        d_failed := (NEW.state = 'failed')::int;
        d_cancelled := (NEW.state = 'cancelled')::int;
    ELSIF TG_OP = 'UPDATE' THEN
        batch := NEW.batch_id;
        d_completed := (NEW.state = 'completed')::int - (OLD.state = 'completed')::int;
        d_failed := (NEW.state = 'failed')::int - (OLD.state = 'failed')::int;
        d_cancelled := (NEW.state = 'cancelled')::int - (OLD.state = 'cancelled')::int;
    ELSE
        batch := OLD.batch_id;
        d_cancelled := 1;
    END IF;
    UPDATE batches AS b SET
        total = b.total + d_total,
        completed = b.completed + d_completed,
        failed = b.failed + d_failed,
        cancelled = b.cancelled + d_cancelled,
        due = b.due OR (NOT b.open AND TG_OP <> 'INSERT' AND (
            (b.completed_at IS NULL AND b.completed + b.failed + b.cancelled
                + d_completed + d_failed + d_cancelled = b.total + d_total)
            OR (b.succeeded_at IS NULL AND b.completed + d_completed = b.total + d_total)))
    WHERE b.id = batch
    RETURNING b.due INTO is_due;
    -- The writer looks for due batches only after this notice (ops/batches.rs), not after every statement.
    IF is_due THEN
        RAISE NOTICE 'cairn: a batch is due';
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER batch_job_added AFTER INSERT ON jobs
    FOR EACH ROW WHEN (NEW.batch_id IS NOT NULL) EXECUTE FUNCTION cairn_count_batch_job();
CREATE TRIGGER batch_job_moved AFTER UPDATE OF state ON jobs
    FOR EACH ROW WHEN (NEW.batch_id IS NOT NULL AND OLD.state <> NEW.state
        AND (OLD.state IN ('completed', 'failed', 'cancelled') OR NEW.state IN ('completed', 'failed', 'cancelled')))
    EXECUTE FUNCTION cairn_count_batch_job();
CREATE TRIGGER batch_job_deleted AFTER DELETE ON jobs
    FOR EACH ROW WHEN (OLD.batch_id IS NOT NULL AND OLD.state NOT IN ('completed', 'failed', 'cancelled'))
    EXECUTE FUNCTION cairn_count_batch_job();
