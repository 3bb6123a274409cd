-- As SQLite's 0028: a step recorded counts itself on its job, so that recording one is a single statement, one round
-- trip from the writer (ops/step.rs).
CREATE FUNCTION cairn_count_step() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE jobs SET step_count = step_count + 1, step_bytes = step_bytes + octet_length(NEW.result)
    WHERE id = NEW.job_id;
    RETURN NULL;
END $$;

CREATE TRIGGER job_steps_counted AFTER INSERT ON job_steps FOR EACH ROW EXECUTE FUNCTION cairn_count_step();
