-- A step recorded counts itself on its job (`step_count`, and `step_bytes` in bytes of JSON), so that recording
-- one is a single statement (ops/step.rs).
CREATE TRIGGER job_steps_counted AFTER INSERT ON job_steps
BEGIN
    UPDATE jobs SET step_count = step_count + 1, step_bytes = step_bytes + length(CAST(NEW.result AS BLOB))
    WHERE id = NEW.job_id;
END;
