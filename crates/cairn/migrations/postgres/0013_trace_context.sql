-- As SQLite's 0021: the W3C trace context a job was pushed with (`traceparent`).
ALTER TABLE jobs ADD COLUMN trace_parent TEXT;

-- The rules ops/push.rs holds a `trace_parent` to (W3C's, for version 00): `00-`, then 32 lowercase hex digits
-- (not all zero), `-`, 16 (not all zero), `-`, 2. Returns the text.
CREATE FUNCTION cairn_check_trace_parent(t jsonb) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    v text;
BEGIN
    IF jsonb_typeof(t) <> 'string' THEN
        PERFORM cairn_invalid('trace_parent', 'must be a string, got ' || t::text);
    END IF;
    v := t #>> '{}';
    IF v !~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$' THEN
        PERFORM cairn_invalid('trace_parent', format('must be a W3C traceparent of version 00 '
            '(00-<32 hex digits>-<16 hex digits>-<2 hex digits>, lowercase), got %s', to_json(v)));
    END IF;
    IF substr(v, 4, 32) = repeat('0', 32) OR substr(v, 37, 16) = repeat('0', 16) THEN
        PERFORM cairn_invalid('trace_parent', format('must not have an all-zero trace or parent id, got %s',
            to_json(v)));
    END IF;
    RETURN v;
END $$;

-- cairn_push takes it too (`"trace_parent": "00-…"`, the push body's): 0011's function again, which checks it after
-- the concurrency key (where ops/push.rs does) and gives it to the job it made (not to a live job answering for its
-- unique key).
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
END $$;
