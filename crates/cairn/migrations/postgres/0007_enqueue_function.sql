-- Enqueueing from SQL, inside the application's own transaction: the job exists if and only if that transaction
-- commits, whatever the language the application is written in.
--
--     SELECT cairn_enqueue('email.send', '{"to": "ada@example.com"}', '{"queue": "mail", "priority": 5}');
--     SELECT * FROM cairn_push('email.send', '{}', '{"unique_key": "welcome:42"}');  -- id, state, existing
--
-- The options are the HTTP API's push body without `name` and `data` (docs/http.md): queue, priority, weight,
-- run_at, delay_ms, retry, lease_timeout_ms, timeout_ms, unique_key, tags. They are checked by the same rules as
-- a push (crates/cairn/src/ops/push.rs; a test pushes the same generated jobs both ways and compares), and a bad
-- one raises SQLSTATE 22023 (invalid_parameter_value) with the field in the error's COLUMN and its message. The
-- defaults are the options set at run time (`cairn config set`), else Cairn's built-in ones. `parent`,
-- `depends_on` and `schedule` are refused: they need the engine (a schedule's parser, the dependency graph); so are
-- `debounce` and `throttle`, which land in or answer with a job that another open transaction may hold.
--
-- At commit, PostgreSQL delivers a `cairn_ready` notification, which wakes the workers waiting on every node. The
-- statistics go to rows of their own per database session (node `sql-<backend pid>`), so that applications
-- enqueueing at once never wait on each other's statistics row.

-- Raises Cairn's invalid-input error on `field`.
CREATE FUNCTION cairn_invalid(field text, rule text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', MESSAGE = field || ': ' || rule, COLUMN = field;
END $$;

-- The rules every identifier shares (names.rs): not empty, at most `max_bytes` bytes, no control characters.
CREATE FUNCTION cairn_check_text(field text, value text, max_bytes integer) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    bad text;
BEGIN
    IF value IS NULL OR value = '' THEN
        PERFORM cairn_invalid(field, 'must not be empty');
    END IF;
    IF octet_length(value) > max_bytes THEN
        PERFORM cairn_invalid(field, format('must be at most %s bytes, got %s', max_bytes, octet_length(value)));
    END IF;
    bad := substring(value FROM '[\x01-\x1f\x7f-\x9f]');
    IF bad IS NOT NULL THEN
        PERFORM cairn_invalid(field, format('must not contain control characters, got U+%s',
            lpad(upper(to_hex(ascii(bad))), 4, '0')));
    END IF;
    RETURN value;
END $$;

-- An option that must be a JSON string; NULL when absent or null.
CREATE FUNCTION cairn_option_text(value jsonb, field text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    IF value IS NULL OR jsonb_typeof(value) = 'null' THEN
        RETURN NULL;
    END IF;
    IF jsonb_typeof(value) <> 'string' THEN
        PERFORM cairn_invalid(field, 'must be a string, got ' || value::text);
    END IF;
    RETURN value #>> '{}';
END $$;

-- An option that must be a whole number from `lo` to `hi`; NULL when absent or null.
CREATE FUNCTION cairn_option_integer(value jsonb, field text, lo numeric, hi numeric) RETURNS numeric
LANGUAGE plpgsql AS $$
DECLARE
    n numeric;
BEGIN
    IF value IS NULL OR jsonb_typeof(value) = 'null' THEN
        RETURN NULL;
    END IF;
    IF jsonb_typeof(value) <> 'number' OR value::text !~ '^-?[0-9]+$' THEN
        PERFORM cairn_invalid(field, format('must be a whole number from %s to %s, got %s', lo, hi, value::text));
    END IF;
    n := value::text::numeric;
    IF n < lo OR n > hi THEN
        PERFORM cairn_invalid(field, format('must be a whole number from %s to %s, got %s', lo, hi, n));
    END IF;
    RETURN n;
END $$;

-- An option that must be a number; NULL when absent or null.
CREATE FUNCTION cairn_option_number(value jsonb, field text) RETURNS double precision LANGUAGE plpgsql AS $$
BEGIN
    IF value IS NULL OR jsonb_typeof(value) = 'null' THEN
        RETURN NULL;
    END IF;
    IF jsonb_typeof(value) <> 'number' THEN
        PERFORM cairn_invalid(field, 'must be a number, got ' || value::text);
    END IF;
    RETURN value::text::double precision;
END $$;

-- A number among the options set at run time (`config`, stored as JSON), or `otherwise`.
CREATE FUNCTION cairn_config_number(config_key text, otherwise double precision) RETURNS double precision
LANGUAGE sql STABLE AS $$
    SELECT coalesce((SELECT c.value::double precision FROM config c WHERE c.key = config_key), otherwise)
$$;

-- Enqueues one job in the current transaction: its id, its state, and whether a live job already held its unique
-- key (then `id` is that job's, and nothing was written).
CREATE FUNCTION cairn_push(name text, data json DEFAULT '{}', options jsonb DEFAULT '{}',
                           OUT id bigint, OUT state text, OUT existing boolean)
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
#variable_conflict use_column
DECLARE
    opts       jsonb := CASE WHEN options IS NULL OR jsonb_typeof(options) = 'null' THEN '{}' ELSE options END;
    key        text;
    now_ms     bigint := floor(extract(epoch FROM clock_timestamp()) * 1000);
    v_queue    text;
    v_name     text;
    v_data     json := coalesce(data, '{}'::json);
    v_priority bigint;
    v_weight   numeric;
    v_run_at   bigint;
    run_at_text text;
    delay      numeric;
    retry      jsonb;
    attempts   numeric;
    initial_ms numeric;
    multiplier double precision;
    max_ms     numeric;
    jitter     double precision;
    lease_ms   numeric;
    timeout_ms numeric;
    v_unique   text;
    tags       text[] := '{}';
    tag        jsonb;
    max_data   numeric;
    data_bytes integer;
    aging      bigint;
    bad        text;
    tries      integer := 0;
BEGIN
    IF jsonb_typeof(opts) <> 'object' THEN
        PERFORM cairn_invalid('options', 'must be a JSON object, got ' || opts::text);
    END IF;
    FOR key IN SELECT jsonb_object_keys(opts) LOOP
        IF key IN ('parent', 'depends_on', 'schedule', 'time_zone', 'debounce', 'throttle') THEN
            PERFORM cairn_invalid(key, 'is not taken by cairn_enqueue: push the job through the API instead');
        ELSIF key IN ('name', 'data') THEN
            PERFORM cairn_invalid(key, 'is an argument of cairn_enqueue, not an option');
        ELSIF key NOT IN ('queue', 'priority', 'weight', 'run_at', 'delay_ms', 'retry', 'lease_timeout_ms',
                          'timeout_ms', 'unique_key', 'tags') THEN
            PERFORM cairn_invalid(key, 'is not an option; the options are queue, priority, weight, run_at, '
                'delay_ms, retry, lease_timeout_ms, timeout_ms, unique_key and tags');
        END IF;
    END LOOP;

    -- In the order ops/push.rs checks them, so that the first bad field is the one named either way.
    v_queue := cairn_check_text('queue', coalesce(cairn_option_text(opts -> 'queue', 'queue'), 'default'), 128);
    bad := substring(v_queue FROM '[^A-Za-z0-9_.:-]');
    IF bad IS NOT NULL THEN
        PERFORM cairn_invalid('queue', format('may only contain letters, digits and _ - . :, got %L', bad));
    END IF;
    v_name := cairn_check_text('name', name, 255);
    v_priority := coalesce(cairn_option_integer(opts -> 'priority', 'priority', -2147483648, 2147483647), 0);
    v_weight := coalesce(cairn_option_integer(opts -> 'weight', 'weight', 0, 4294967295), 1);
    IF v_weight < 1 OR v_weight > 1000 THEN
        PERFORM cairn_invalid('weight', format('must be between 1 and 1000, got %s', v_weight));
    END IF;
    run_at_text := cairn_option_text(opts -> 'run_at', 'run_at');
    delay := cairn_option_integer(opts -> 'delay_ms', 'delay_ms', 0, 18446744073709551615);
    IF run_at_text IS NOT NULL AND delay IS NOT NULL THEN
        PERFORM cairn_invalid('run_at', 'cannot be combined with delay');
    END IF;
    IF run_at_text IS NOT NULL THEN
        -- RFC 3339, as the API takes it: PostgreSQL alone would also take dates without an offset, in the
        -- session's time zone.
        IF run_at_text !~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?([Zz]|[+-][0-9]{2}:[0-9]{2})$' THEN
            PERFORM cairn_invalid('run_at', 'must be an RFC 3339 time such as 2026-01-31T09:00:00Z, got '
                || quote_literal(run_at_text));
        END IF;
        BEGIN
            v_run_at := floor(extract(epoch FROM run_at_text::timestamptz) * 1000);
        EXCEPTION WHEN datetime_field_overflow OR invalid_datetime_format THEN
            PERFORM cairn_invalid('run_at', 'is not a valid time: ' || quote_literal(run_at_text));
        END;
    ELSIF delay IS NOT NULL THEN
        v_run_at := least(now_ms + delay, 9223372036854775807);
    ELSE
        v_run_at := now_ms;
    END IF;

    retry := opts -> 'retry';
    IF retry IS NULL OR jsonb_typeof(retry) = 'null' THEN
        attempts := cairn_config_number('default_retry.max_attempts', 5);
        initial_ms := cairn_config_number('default_retry.initial_delay', 5000);
        multiplier := cairn_config_number('default_retry.multiplier', 2.0);
        max_ms := cairn_config_number('default_retry.max_delay', 3600000);
        jitter := cairn_config_number('default_retry.jitter', 0.2);
    ELSE
        IF jsonb_typeof(retry) <> 'object' THEN
            PERFORM cairn_invalid('retry', 'must be an object, got ' || retry::text);
        END IF;
        FOR key IN SELECT jsonb_object_keys(retry) LOOP
            IF key NOT IN ('max_attempts', 'initial_delay_ms', 'multiplier', 'max_delay_ms', 'jitter') THEN
                PERFORM cairn_invalid('retry.' || key, 'is not a field of a retry policy; its fields are '
                    'max_attempts, initial_delay_ms, multiplier, max_delay_ms and jitter');
            END IF;
        END LOOP;
        FOREACH key IN ARRAY ARRAY['max_attempts', 'initial_delay_ms', 'multiplier', 'max_delay_ms', 'jitter'] LOOP
            IF NOT retry ? key THEN
                PERFORM cairn_invalid('retry.' || key, 'is missing');
            END IF;
        END LOOP;
        attempts := cairn_option_integer(retry -> 'max_attempts', 'retry.max_attempts', 0, 4294967295);
        initial_ms := cairn_option_integer(retry -> 'initial_delay_ms', 'retry.initial_delay_ms', 0,
            18446744073709551615);
        multiplier := cairn_option_number(retry -> 'multiplier', 'retry.multiplier');
        max_ms := cairn_option_integer(retry -> 'max_delay_ms', 'retry.max_delay_ms', 0, 18446744073709551615);
        jitter := cairn_option_number(retry -> 'jitter', 'retry.jitter');
        IF attempts IS NULL OR initial_ms IS NULL OR multiplier IS NULL OR max_ms IS NULL OR jitter IS NULL THEN
            PERFORM cairn_invalid('retry', 'must give max_attempts, initial_delay_ms, multiplier, max_delay_ms '
                'and jitter, none null');
        END IF;
    END IF;
    initial_ms := least(initial_ms, 9223372036854775807);
    max_ms := least(max_ms, 9223372036854775807);
    IF attempts < 1 THEN
        PERFORM cairn_invalid('retry.max_attempts', 'must be at least 1, got 0');
    END IF;
    IF NOT multiplier >= 1.0 THEN
        PERFORM cairn_invalid('retry.multiplier', format('must be at least 1.0, got %s', multiplier));
    END IF;
    IF NOT (jitter >= 0.0 AND jitter <= 1.0) THEN
        PERFORM cairn_invalid('retry.jitter', format('must be between 0.0 and 1.0, got %s', jitter));
    END IF;
    IF initial_ms > max_ms THEN
        PERFORM cairn_invalid('retry.initial_delay_ms',
            format('must not exceed max_delay_ms (%s), got %s', max_ms, initial_ms));
    END IF;

    lease_ms := coalesce(
        cairn_option_integer(opts -> 'lease_timeout_ms', 'lease_timeout_ms', 0, 18446744073709551615),
        cairn_config_number('default_lease_timeout', 60000));
    IF lease_ms < 100 OR lease_ms > 86400000 THEN
        PERFORM cairn_invalid('lease_timeout_ms', format('must be between 100 and 86400000 ms, got %s', lease_ms));
    END IF;
    timeout_ms := cairn_option_integer(opts -> 'timeout_ms', 'timeout_ms', 0, 18446744073709551615);
    IF timeout_ms < 100 OR timeout_ms > 86400000 THEN
        PERFORM cairn_invalid('timeout_ms', format('must be between 100 and 86400000 ms, got %s', timeout_ms));
    END IF;
    v_unique := cairn_option_text(opts -> 'unique_key', 'unique_key');
    IF v_unique IS NOT NULL THEN
        PERFORM cairn_check_text('unique_key', v_unique, 255);
    END IF;
    IF opts ? 'tags' AND jsonb_typeof(opts -> 'tags') <> 'null' THEN
        IF jsonb_typeof(opts -> 'tags') <> 'array' THEN
            PERFORM cairn_invalid('tags', 'must be an array of strings, got ' || (opts -> 'tags')::text);
        END IF;
        FOR tag IN SELECT jsonb_array_elements(opts -> 'tags') LOOP
            IF jsonb_typeof(tag) <> 'string' THEN
                PERFORM cairn_invalid('tags', 'must be an array of strings, got ' || tag::text);
            END IF;
            tags := tags || cairn_check_text('tags', tag #>> '{}', 128);
        END LOOP;
    END IF;
    max_data := cairn_config_number('max_data_bytes', 1048576);
    data_bytes := octet_length(v_data::text);
    IF data_bytes > max_data THEN
        PERFORM cairn_invalid('data', format('must be at most %s bytes of JSON, got %s', max_data, data_bytes));
    END IF;

    SELECT q.aging_ms INTO aging FROM queues q WHERE q.name = v_queue;
    state := CASE WHEN v_run_at <= now_ms THEN 'queued' ELSE 'scheduled' END;
    existing := false;
    LOOP
        -- A live job holding the key is the answer; one being inserted by another open transaction is waited
        -- for, then read once it commits.
        INSERT INTO jobs (queue, name, state, data, priority, weight, run_at, max_attempts, backoff_initial_ms,
                          backoff_multiplier, backoff_max_ms, backoff_jitter, lease_timeout_ms, unique_key,
                          created_at, slot_at, timeout_ms, aging_ms)
        VALUES (v_queue, v_name, state, v_data, v_priority, v_weight, v_run_at, attempts, initial_ms, multiplier,
                max_ms, jitter, lease_ms, v_unique, now_ms, v_run_at, timeout_ms, aging)
        ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL
            AND (state = 'scheduled' OR state = 'queued' OR state = 'waiting' OR state = 'running')
        DO NOTHING
        RETURNING jobs.id INTO id;
        EXIT WHEN id IS NOT NULL;
        SELECT j.id, j.state INTO id, state FROM jobs j WHERE j.unique_key = v_unique
            AND (j.state = 'scheduled' OR j.state = 'queued' OR j.state = 'waiting' OR j.state = 'running');
        IF id IS NOT NULL THEN
            existing := true;
            RETURN;
        END IF;
        -- The holder ended between the two statements, or this transaction's snapshot cannot see it (REPEATABLE
        -- READ and above): try again, then give the application a serialization failure to retry.
        tries := tries + 1;
        IF tries >= 3 THEN
            RAISE EXCEPTION USING ERRCODE = 'serialization_failure',
                MESSAGE = 'unique_key: held by a job this transaction cannot see; retry the transaction';
        END IF;
        state := CASE WHEN v_run_at <= now_ms THEN 'queued' ELSE 'scheduled' END;
    END LOOP;

    INSERT INTO job_tags (job_id, tag) SELECT DISTINCT id, t FROM unnest(tags) AS t;
    INSERT INTO activity (at, event, job_id, queue, name) VALUES (now_ms, 'added', id, v_queue, v_name);
    INSERT INTO stats_minute (minute, queue, name, node, added)
    VALUES (now_ms - mod(now_ms, 60000) - CASE WHEN now_ms < 0 AND mod(now_ms, 60000) <> 0 THEN 60000 ELSE 0 END,
            v_queue, v_name, 'sql-' || pg_backend_pid(), 1)
    ON CONFLICT (minute, queue, name, node) DO UPDATE SET added = stats_minute.added + 1;
    IF state = 'queued' THEN
        -- The first line names the sender, as a node's own notifications do (store/postgres/notify.rs); no node
        -- is named this, so every node hears it.
        PERFORM pg_notify('cairn_ready', 'cairn_enqueue' || E'\n' || v_queue);
    END IF;
END $$;

-- Enqueues one job in the current transaction and returns its id (that of the live job holding its unique key, if
-- one does). See cairn_push for the state and whether the job already existed.
CREATE FUNCTION cairn_enqueue(name text, data json DEFAULT '{}', options jsonb DEFAULT '{}') RETURNS bigint
LANGUAGE sql SET search_path FROM CURRENT AS $$
    SELECT p.id FROM cairn_push(name, data, options) AS p
$$;
