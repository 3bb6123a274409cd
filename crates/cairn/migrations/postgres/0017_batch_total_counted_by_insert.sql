-- As SQLite's 0025: a batch's total is counted by the code that inserts its jobs (ops/batches.rs, `count_added`), one
-- update per batch and statement rather than a function call and a new row version of the batch per job. The ends
-- stay counted by the triggers of 0014, whose function no longer sees inserts.
DROP TRIGGER batch_job_added ON jobs;

CREATE OR REPLACE FUNCTION cairn_count_batch_job() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    batch       bigint;
    d_completed bigint := 0;
    d_failed    bigint := 0;
    d_cancelled bigint := 0;
    is_due      boolean;
BEGIN
    IF TG_OP = 'UPDATE' THEN
        batch := NEW.batch_id;
        d_completed := (NEW.state = 'completed')::int - (OLD.state = 'completed')::int;
        d_failed := (NEW.state = 'failed')::int - (OLD.state = 'failed')::int;
        d_cancelled := (NEW.state = 'cancelled')::int - (OLD.state = 'cancelled')::int;
    ELSE
        batch := OLD.batch_id;
        d_cancelled := 1;
    END IF;
    UPDATE batches AS b SET
        completed = b.completed + d_completed,
        failed = b.failed + d_failed,
        cancelled = b.cancelled + d_cancelled,
        due = b.due OR (NOT b.open AND (
            (b.completed_at IS NULL AND b.completed + b.failed + b.cancelled
                + d_completed + d_failed + d_cancelled = b.total)
            OR (b.succeeded_at IS NULL AND b.completed + d_completed = b.total)))
    WHERE b.id = batch
    RETURNING b.due INTO is_due;
    -- The writer looks for due batches only after this notice (ops/batches.rs), not after every statement.
    IF is_due THEN
        RAISE NOTICE 'cairn: a batch is due';
    END IF;
    RETURN NULL;
END $$;
