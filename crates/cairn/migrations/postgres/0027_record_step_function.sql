-- Records a step of a running attempt in the application's own transaction, as `RecordStep` does
-- (docs/workflows.md, "A step in the application's transaction"), so that a change to the application's tables and
-- the step that says it was made commit together, or neither does:
--
--     BEGIN;
--     INSERT INTO payments (order_id, amount) VALUES (42, 1999);
--     SELECT * FROM cairn_record_step(17, 8613315912750731264, 'charge', '{"payment": 881}');
--     COMMIT;
--
-- The job must be held under the lease's token (SQLSTATE CN001 otherwise: the lease was lost). A step already
-- recorded keeps its first result, which the answer gives. The lease is extended, as a heartbeat does.
CREATE FUNCTION cairn_record_step(job_id bigint, token bigint, name text, result json)
RETURNS TABLE (stored text, attempt bigint, recorded_at bigint) LANGUAGE plpgsql AS $$
DECLARE
    now_ms   bigint := floor(extract(epoch FROM clock_timestamp()) * 1000);
    v_name   text := cairn_check_text('name', name, 255);
    max_data numeric := cairn_config_number('max_data_bytes', 1048576);
    v_result text;
    held     record;
    kept     record;
BEGIN
    IF result IS NULL THEN
        PERFORM cairn_invalid('result', 'must be JSON, got NULL (send ''null'' for JSON null)');
    END IF;
    v_result := result::jsonb::text;
    SELECT j.id, j.queue, j.name, j.worker, j.attempt, j.step_count, j.step_bytes INTO held
    FROM jobs AS j
    WHERE j.id = cairn_record_step.job_id AND j.state = 'running' AND j.lease_token = cairn_record_step.token
      AND j.lease_expires_at > now_ms
    FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'CN001',
            MESSAGE = format('job %s is no longer held under this lease', cairn_record_step.job_id);
    END IF;
    -- The lease is extended whether the step is new or not, as a heartbeat does.
    UPDATE jobs AS j SET lease_expires_at = CASE
        WHEN j.timeout_ms IS NULL THEN GREATEST(j.lease_expires_at, now_ms + j.lease_timeout_ms)
        ELSE LEAST(GREATEST(j.lease_expires_at, now_ms + j.lease_timeout_ms), j.attempt_started_at + j.timeout_ms)
    END
    WHERE j.id = held.id;
    -- Recorded already (a call sent again): the first result stands, whatever the limits say of this one.
    SELECT s.result, s.attempt, s.recorded_at INTO kept
    FROM job_steps AS s WHERE s.job_id = held.id AND s.name = v_name;
    IF FOUND THEN
        RETURN QUERY SELECT kept.result, kept.attempt, kept.recorded_at;
        RETURN;
    END IF;
    IF octet_length(v_result) > max_data THEN
        PERFORM cairn_invalid('result', format('must be at most %s bytes of JSON, got %s', max_data,
            octet_length(v_result)));
    END IF;
    IF held.step_count >= 1000 THEN
        PERFORM cairn_invalid('step', format('a job records at most 1000 steps, and job %s has', held.id));
    END IF;
    IF held.step_bytes + octet_length(v_result) > max_data * 8 THEN
        PERFORM cairn_invalid('result', format('a job''s step results hold at most %s bytes of JSON in all, and '
            'this one would make %s', max_data * 8, held.step_bytes + octet_length(v_result)));
    END IF;
    INSERT INTO job_steps (job_id, name, seq, result, attempt, recorded_at)
    VALUES (held.id, v_name, held.step_count, v_result, held.attempt, now_ms);
    INSERT INTO activity (at, event, job_id, queue, name, worker, detail)
    VALUES (now_ms, 'step_recorded', held.id, held.queue, held.name, held.worker, v_name);
    RETURN QUERY SELECT v_result, held.attempt::bigint, now_ms;
END $$;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION cairn_record_step(bigint, bigint, text, json) SECURITY DEFINER '
                   'SET search_path = %I, pg_temp', current_schema());
END $$;
REVOKE EXECUTE ON FUNCTION cairn_record_step(bigint, bigint, text, json) FROM PUBLIC;
