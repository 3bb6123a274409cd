-- A push's retry policy may set only some of its parts (`{"max_attempts": 1}`): the others are the default policy's
-- (the `default_retry.*` settings), as for a push through the engine (RetryOverrides in retry_policy.rs). 0007's
-- checks take a whole policy, so they move to cairn_push_whole_retry, and cairn_push_without_key first completes the
-- policy it is given; cairn_push calls it as before. A null part counts as unset.
ALTER FUNCTION cairn_push_without_key(text, json, jsonb) RENAME TO cairn_push_whole_retry;

CREATE FUNCTION cairn_push_without_key(name text, data json DEFAULT '{}', options jsonb DEFAULT '{}',
                                       OUT id bigint, OUT state text, OUT existing boolean)
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    retry jsonb := options -> 'retry';
BEGIN
    IF jsonb_typeof(options) = 'object' AND jsonb_typeof(retry) = 'object' THEN
        options := jsonb_set(options, '{retry}', jsonb_build_object(
            'max_attempts', cairn_config_number('default_retry.max_attempts', 5),
            'initial_delay_ms', cairn_config_number('default_retry.initial_delay', 5000),
            'multiplier', cairn_config_number('default_retry.multiplier', 2.0),
            'max_delay_ms', cairn_config_number('default_retry.max_delay', 3600000),
            'jitter', cairn_config_number('default_retry.jitter', 0.2)) || jsonb_strip_nulls(retry));
    END IF;
    SELECT p.id, p.state, p.existing INTO id, state, existing FROM cairn_push_whole_retry(name, data, options) AS p;
END $$;
