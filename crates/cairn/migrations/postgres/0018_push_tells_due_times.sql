-- A job the application's own transaction pushes with a time (`run_at`, `delay_ms`) due before the leader of the
-- timed work next renews its lead (every second) is told to it on `cairn_due`, as a node tells of the due times it
-- writes (`store/postgres/notify.rs`): otherwise the leader finds it at its renewal, up to a second late.

-- Tells the leader of job `job_id`'s time if it is scheduled and due within a second. No node is named
-- `cairn_enqueue`: the leader takes the time, the others leave it.
CREATE FUNCTION cairn_tell_due(job_id bigint) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_run_at bigint;
BEGIN
    SELECT j.run_at INTO v_run_at FROM jobs AS j WHERE j.id = job_id AND j.state = 'scheduled';
    IF v_run_at < floor(extract(epoch FROM clock_timestamp()) * 1000) + 1000 THEN
        PERFORM pg_notify('cairn_due', 'cairn_enqueue' || E'\n' || v_run_at);
    END IF;
END $$;

-- cairn_push tells it of the job it made: 0013's function again, with the call before each return that made a job.
CREATE OR REPLACE FUNCTION cairn_push(name text, data json DEFAULT '{}', options jsonb DEFAULT '{}',
                           OUT id bigint, OUT state text, OUT existing boolean)
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
#variable_conflict use_column
DECLARE
    opts     jsonb := CASE WHEN options IS NULL OR jsonb_typeof(options) = 'null' THEN '{}' ELSE options END;
    c        jsonb;
    field    text;
    v_key    text;
    v_limit  numeric;
    v_queue  text;
    v_keyed  boolean;
    v_aging  bigint;
    t        jsonb;
    v_trace  text;
BEGIN
    IF jsonb_typeof(opts) = 'object' THEN
        c := opts -> 'concurrency';
        t := opts -> 'trace_parent';
        opts := opts - 'concurrency' - 'trace_parent';
    END IF;
    SELECT p.id, p.state, p.existing INTO id, state, existing FROM cairn_push_without_key(name, data, opts) AS p;
    IF c IS NULL OR jsonb_typeof(c) = 'null' THEN
        IF t IS NOT NULL AND jsonb_typeof(t) <> 'null' THEN
            v_trace := cairn_check_trace_parent(t);
            IF NOT existing THEN
                UPDATE jobs SET trace_parent = v_trace WHERE jobs.id = cairn_push.id;
            END IF;
        END IF;
        IF NOT existing THEN
            PERFORM cairn_tell_due(cairn_push.id);
        END IF;
        RETURN;
    END IF;
    IF jsonb_typeof(c) <> 'object' THEN
        PERFORM cairn_invalid('concurrency', 'must be an object with a key and maybe a limit, got ' || c::text);
    END IF;
    FOR field IN SELECT jsonb_object_keys(c) LOOP
        IF field NOT IN ('key', 'limit') THEN
            PERFORM cairn_invalid('concurrency.' || field, 'is not a field; the fields are key and limit');
        END IF;
    END LOOP;
    v_key := cairn_check_text('concurrency.key', cairn_option_text(c -> 'key', 'concurrency.key'), 255);
    v_limit := cairn_option_integer(c -> 'limit', 'concurrency.limit', 0, 4294967295);
    IF v_limit < 1 OR v_limit > 1000000 THEN
        PERFORM cairn_invalid('concurrency.limit', format('must be between 1 and 1000000, got %s', v_limit));
    END IF;
    IF t IS NOT NULL AND jsonb_typeof(t) <> 'null' THEN
        v_trace := cairn_check_trace_parent(t);
    END IF;
    IF existing THEN
        -- The live job that holds the unique key is the answer, as it is.
        RETURN;
    END IF;
    SELECT j.queue INTO v_queue FROM jobs AS j WHERE j.id = cairn_push.id;
    SELECT q.keyed, q.aging_ms INTO v_keyed, v_aging FROM queues AS q WHERE q.name = v_queue;
    IF v_aging IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'object_not_in_prerequisite_state',
            MESSAGE = format('concurrency: queue %s has priority aging, and jobs with concurrency keys take turns '
                'by priority level, which aging makes one per job; turn aging off to use keys', v_queue);
    END IF;
    UPDATE jobs SET concurrency_key = v_key, concurrency_limit = v_limit, trace_parent = v_trace
        WHERE jobs.id = cairn_push.id;
    IF NOT coalesce(v_keyed, false) THEN
        INSERT INTO queues (name, keyed) VALUES (v_queue, true) ON CONFLICT (name) DO UPDATE SET keyed = true;
        -- No node is named this, so every node loads its settings again.
        PERFORM pg_notify('cairn_settings', 'cairn_enqueue');
    END IF;
    PERFORM cairn_tell_due(cairn_push.id);
END $$;
