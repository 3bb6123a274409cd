-- As SQLite's 0019: concurrency keys, the queue's limit per key, and the ready jobs split between two indexes.
-- Keys compare in byte order (collation "C"), as SQLite's do.
ALTER TABLE jobs ADD COLUMN concurrency_key TEXT COLLATE "C";
ALTER TABLE jobs ADD COLUMN concurrency_limit BIGINT;
ALTER TABLE queues ADD COLUMN key_concurrency BIGINT;
ALTER TABLE queues ADD COLUMN keyed BOOLEAN NOT NULL DEFAULT false;

DROP INDEX jobs_ready;
CREATE INDEX jobs_ready ON jobs (queue, claim_key, run_at, id) WHERE state = 'queued' AND concurrency_key IS NULL;
CREATE INDEX jobs_ready_by_key ON jobs (queue, claim_key, concurrency_key, run_at, id)
    WHERE state = 'queued' AND concurrency_key IS NOT NULL;
CREATE INDEX jobs_running_by_key ON jobs (queue, concurrency_key)
    WHERE state = 'running' AND concurrency_key IS NOT NULL;

CREATE TABLE concurrency_key_weights (
    queue  TEXT   NOT NULL,
    key    TEXT   COLLATE "C" NOT NULL,
    weight BIGINT NOT NULL,
    PRIMARY KEY (queue, key)
);

-- cairn_push takes a concurrency key (`"concurrency": {"key": …, "limit": …}`, the push body's): 0007's function is
-- kept, under another name, for every other option; this one checks the key after them (where ops/push.rs does),
-- gives it to the job it made, and marks the queue keyed (telling the nodes to load their settings again), as the
-- engine's push does. A queue with priority aging refuses keys, as the engine does.
ALTER FUNCTION cairn_push(text, json, jsonb) RENAME TO cairn_push_without_key;

CREATE FUNCTION cairn_push(name text, data json DEFAULT '{}', options jsonb DEFAULT '{}',
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
BEGIN
    IF jsonb_typeof(opts) = 'object' THEN
        c := opts -> 'concurrency';
        opts := opts - 'concurrency';
    END IF;
    SELECT p.id, p.state, p.existing INTO id, state, existing FROM cairn_push_without_key(name, data, opts) AS p;
    IF c IS NULL OR jsonb_typeof(c) = 'null' THEN
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
    UPDATE jobs SET concurrency_key = v_key, concurrency_limit = v_limit WHERE jobs.id = cairn_push.id;
    IF NOT coalesce(v_keyed, false) THEN
        INSERT INTO queues (name, keyed) VALUES (v_queue, true) ON CONFLICT (name) DO UPDATE SET keyed = true;
        -- No node is named this, so every node loads its settings again.
        PERFORM pg_notify('cairn_settings', 'cairn_enqueue');
    END IF;
END $$;
