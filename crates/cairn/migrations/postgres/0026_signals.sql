-- As SQLite's 0029: signals kept until a job waits for their key, and the wait a suspended job registered
-- (ops/signal.rs).
CREATE TABLE signals (
    id      BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    key     TEXT   NOT NULL,
    data    TEXT   NOT NULL,
    sent_at BIGINT NOT NULL
);
CREATE INDEX signals_by_key ON signals (key, id);
CREATE INDEX signals_by_age ON signals (sent_at);

ALTER TABLE jobs ADD COLUMN signal_key TEXT;
ALTER TABLE jobs ADD COLUMN signal_step TEXT;
ALTER TABLE jobs ADD COLUMN signal_until BIGINT;
CREATE INDEX jobs_by_signal_key ON jobs (signal_key, id) WHERE signal_key IS NOT NULL;

-- Sends a signal in the application's own transaction, as `SendSignal` does (docs/workflows.md, "Signals"):
--
--     SELECT cairn_signal('order-42/packed', '{"parcel": "P-981"}');
--
-- The oldest live job waiting for the key receives `data` as its waiting step's result and is ready at once (the
-- answer is its id); with none waiting, the signal is kept for the first that waits (the answer is NULL). A key
-- that only a cancelled job waited for refuses the signal. Both happen when, and only if, the transaction commits.
-- It takes the key's advisory lock, as the servers do, so that a wait on a server and this signal never miss each
-- other; that needs READ COMMITTED (PostgreSQL's default), and a stricter transaction is refused.
CREATE FUNCTION cairn_signal(key text, data json) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    now_ms    bigint := floor(extract(epoch FROM clock_timestamp()) * 1000);
    v_key     text := cairn_check_text('key', key, 255);
    v_data    text;
    max_data  numeric := cairn_config_number('max_data_bytes', 1048576);
    v_result  text;
    waiter    record;
    cancelled bigint;
BEGIN
    IF data IS NULL THEN
        PERFORM cairn_invalid('data', 'must be JSON, got NULL (send ''null'' for JSON null)');
    END IF;
    v_data := data::jsonb::text;
    IF octet_length(v_data) > max_data THEN
        PERFORM cairn_invalid('data', format('must be at most %s bytes of JSON, got %s', max_data,
            octet_length(v_data)));
    END IF;
    -- A stricter isolation reads a snapshot taken before the lock, which may miss a wait registered meanwhile.
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION USING ERRCODE = 'object_not_in_prerequisite_state',
            MESSAGE = format('cairn_signal needs a READ COMMITTED transaction, got %s: a snapshot taken before its '
                             'lock could miss a job starting to wait', upper(current_setting('transaction_isolation')));
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended(v_key, 13));
    SELECT j.id, j.queue, j.name, j.state, j.signal_step, j.attempt, j.step_count, j.step_bytes INTO waiter
    FROM jobs AS j
    WHERE j.signal_key = v_key AND j.state IN ('scheduled', 'queued', 'waiting', 'running')
    ORDER BY j.id LIMIT 1 FOR UPDATE;
    IF FOUND THEN
        v_result := '{"signal": ' || v_data || '}';
        IF waiter.step_count >= 1000 THEN
            PERFORM cairn_invalid('step', format('a job records at most 1000 steps, and job %s has', waiter.id));
        END IF;
        IF waiter.step_bytes + octet_length(v_result) > max_data * 8 THEN
            PERFORM cairn_invalid('result', format('a job''s step results hold at most %s bytes of JSON in all, '
                'and this one would make %s', max_data * 8, waiter.step_bytes + octet_length(v_result)));
        END IF;
        INSERT INTO job_steps (job_id, name, seq, result, attempt, recorded_at)
        VALUES (waiter.id, waiter.signal_step, waiter.step_count, v_result, waiter.attempt, now_ms)
        ON CONFLICT (job_id, name) DO NOTHING;
        UPDATE jobs SET signal_key = NULL, signal_step = NULL, signal_until = NULL WHERE id = waiter.id;
        IF waiter.state = 'scheduled' THEN
            UPDATE jobs SET state = 'queued', run_at = now_ms, lease_token = NULL, lease_expires_at = NULL
            WHERE id = waiter.id;
            PERFORM pg_notify('cairn_ready', 'cairn_signal' || E'\n' || waiter.queue);
        END IF;
        INSERT INTO activity (at, event, job_id, queue, name, detail)
        VALUES (now_ms, 'signal_received', waiter.id, waiter.queue, waiter.name,
                format('step %s, key %s', waiter.signal_step, v_key));
        RETURN waiter.id;
    END IF;
    SELECT j.id INTO cancelled FROM jobs AS j WHERE j.signal_key = v_key AND j.state = 'cancelled'
    ORDER BY j.id LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'object_not_in_prerequisite_state',
            MESSAGE = format('job %s waited for signal "%s" and was cancelled: the signal is refused, not kept',
                             cancelled, v_key);
    END IF;
    INSERT INTO signals (key, data, sent_at) VALUES (v_key, v_data, now_ms);
    RETURN NULL;
END $$;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION cairn_signal(text, json) SECURITY DEFINER SET search_path = %I, pg_temp',
                   current_schema());
END $$;
REVOKE EXECUTE ON FUNCTION cairn_signal(text, json) FROM PUBLIC;
