-- The PostgreSQL schema: the same tables, columns, partial indexes and views as the SQLite migrations 0001 to 0013
-- (see them for what each column means), written as one first migration because a PostgreSQL database starts with
-- this version of Cairn. Later changes get their own numbered migrations here, as for SQLite.
--
-- Differences, each for a reason:
-- - Every integer is BIGINT and every flag a BIGINT 0 or 1, as SQLite stores them, so that the engine binds the same
--   values and its statements compare the same way (`has_children = 1`) on both.
-- - Ids come from identity columns, which never reuse a value, as SQLite's AUTOINCREMENT.
-- - `claim_key` is a STORED generated column (PostgreSQL has no virtual ones).
-- - `cairn_glob` gives GLOB's meaning (case-sensitive `*`, `?`, `[…]`), which PostgreSQL does not have.

CREATE TABLE jobs (
    id                 BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue              TEXT             NOT NULL,
    name               TEXT             NOT NULL,
    state              TEXT             NOT NULL,
    data               TEXT             NOT NULL,
    progress           TEXT,
    priority           BIGINT           NOT NULL,
    weight             BIGINT           NOT NULL CHECK (weight >= 1),
    run_at             BIGINT           NOT NULL,
    attempt            BIGINT           NOT NULL DEFAULT 0,
    claims             BIGINT           NOT NULL DEFAULT 0,
    max_attempts       BIGINT           NOT NULL CHECK (max_attempts >= 1),
    backoff_initial_ms BIGINT           NOT NULL,
    backoff_multiplier DOUBLE PRECISION NOT NULL,
    backoff_max_ms     BIGINT           NOT NULL,
    backoff_jitter     DOUBLE PRECISION NOT NULL,
    lease_timeout_ms   BIGINT           NOT NULL,
    unique_key         TEXT,
    parent_id          BIGINT,
    worker             TEXT,
    lease_token        BIGINT,
    lease_expires_at   BIGINT,
    attempt_started_at BIGINT,
    created_at         BIGINT           NOT NULL,
    started_at         BIGINT,
    finished_at        BIGINT,
    error              TEXT,
    failure_group      TEXT,
    schedule           TEXT,
    time_zone          TEXT,
    slot_at            BIGINT           NOT NULL,
    awaits_parent      BIGINT           NOT NULL DEFAULT 0,
    has_children       BIGINT           NOT NULL DEFAULT 0,
    has_dependents     BIGINT           NOT NULL DEFAULT 0,
    timeout_ms         BIGINT,
    tracked            BIGINT           NOT NULL DEFAULT 0,
    aging_ms           BIGINT,
    claim_key          BIGINT GENERATED ALWAYS AS
        (CASE WHEN aging_ms IS NULL THEN -priority ELSE run_at - priority * aging_ms END) STORED
);

CREATE INDEX jobs_ready ON jobs (queue, claim_key, run_at, id) WHERE state = 'queued';
CREATE INDEX jobs_scheduled ON jobs (run_at) WHERE state = 'scheduled';
CREATE INDEX jobs_leases ON jobs (lease_expires_at) WHERE state = 'running';
CREATE UNIQUE INDEX jobs_unique_live ON jobs (unique_key)
    WHERE unique_key IS NOT NULL AND (state = 'scheduled' OR state = 'queued' OR state = 'waiting' OR state = 'running');
CREATE INDEX jobs_finished ON jobs (finished_at) WHERE state = 'completed' OR state = 'cancelled';
CREATE INDEX jobs_failed ON jobs (id) WHERE state = 'failed';
CREATE INDEX jobs_children ON jobs (parent_id, state) WHERE parent_id IS NOT NULL;
CREATE INDEX jobs_failure_groups ON jobs (failure_group, id) WHERE state = 'failed';
CREATE INDEX jobs_tracked ON jobs (id) WHERE tracked = 1;
CREATE INDEX jobs_by_worker ON jobs (worker) WHERE state = 'running';

CREATE TABLE job_attempts (
    job_id      BIGINT NOT NULL,
    claim       BIGINT NOT NULL,
    attempt     BIGINT NOT NULL,
    worker      TEXT   NOT NULL,
    started_at  BIGINT NOT NULL,
    finished_at BIGINT NOT NULL,
    outcome     TEXT   NOT NULL,
    error       TEXT,
    run_ms      BIGINT,
    cpu_ms      BIGINT,
    peak_memory BIGINT,
    PRIMARY KEY (job_id, claim)
);

CREATE TABLE job_tags (
    job_id BIGINT NOT NULL,
    tag    TEXT   NOT NULL,
    PRIMARY KEY (job_id, tag)
);
CREATE INDEX job_tags_by_tag ON job_tags (tag, job_id);

CREATE TABLE job_dependencies (
    job_id     BIGINT NOT NULL,
    depends_on BIGINT NOT NULL,
    PRIMARY KEY (job_id, depends_on)
);
CREATE INDEX job_dependents ON job_dependencies (depends_on, job_id);

CREATE TABLE recurring (
    key          TEXT   PRIMARY KEY,
    cron         TEXT   NOT NULL,
    time_zone    TEXT   NOT NULL,
    missed       TEXT   NOT NULL,
    template     TEXT   NOT NULL,
    next_slot_at BIGINT,
    last_slot_at BIGINT,
    created_at   BIGINT NOT NULL
);
CREATE INDEX recurring_due ON recurring (next_slot_at) WHERE next_slot_at IS NOT NULL;

CREATE TABLE queues (
    name           TEXT   PRIMARY KEY,
    paused         BIGINT NOT NULL DEFAULT 0,
    concurrency    BIGINT,
    rate_jobs      BIGINT,
    rate_period_ms BIGINT,
    aging_ms       BIGINT
);

CREATE TABLE workers (
    id         TEXT   PRIMARY KEY,
    first_seen BIGINT NOT NULL,
    last_seen  BIGINT NOT NULL,
    status     TEXT   NOT NULL DEFAULT 'active'
);
CREATE INDEX workers_last_seen ON workers (last_seen);

CREATE TABLE config (
    key        TEXT   PRIMARY KEY,
    value      TEXT   NOT NULL,
    updated_at BIGINT NOT NULL
);

CREATE TABLE activity (
    id     BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at     BIGINT NOT NULL,
    event  TEXT   NOT NULL,
    job_id BIGINT,
    queue  TEXT,
    name   TEXT,
    worker TEXT,
    detail TEXT
);
CREATE INDEX activity_by_job ON activity (job_id, id) WHERE job_id IS NOT NULL;

CREATE TABLE stats_minute (
    minute        BIGINT           NOT NULL,
    queue         TEXT             NOT NULL,
    name          TEXT             NOT NULL,
    added         BIGINT           NOT NULL DEFAULT 0,
    started       BIGINT           NOT NULL DEFAULT 0,
    finished      BIGINT           NOT NULL DEFAULT 0,
    retried       BIGINT           NOT NULL DEFAULT 0,
    failed        BIGINT           NOT NULL DEFAULT 0,
    wait_count    BIGINT           NOT NULL DEFAULT 0,
    wait_sum      DOUBLE PRECISION NOT NULL DEFAULT 0,
    wait_sumsq    DOUBLE PRECISION NOT NULL DEFAULT 0,
    wait_min      BIGINT,
    wait_max      BIGINT,
    run_count     BIGINT           NOT NULL DEFAULT 0,
    run_sum       DOUBLE PRECISION NOT NULL DEFAULT 0,
    run_sumsq     DOUBLE PRECISION NOT NULL DEFAULT 0,
    run_min       BIGINT,
    run_max       BIGINT,
    service_count BIGINT           NOT NULL DEFAULT 0,
    service_sum   DOUBLE PRECISION NOT NULL DEFAULT 0,
    service_min   BIGINT,
    service_max   BIGINT,
    PRIMARY KEY (minute, queue, name)
);

CREATE TABLE stats_histogram (
    hour   BIGINT NOT NULL,
    queue  TEXT   NOT NULL,
    name   TEXT   NOT NULL,
    metric TEXT   NOT NULL,
    bucket BIGINT NOT NULL,
    count  BIGINT NOT NULL,
    PRIMARY KEY (hour, queue, name, metric, bucket)
);

CREATE TABLE worker_hour (
    hour       BIGINT NOT NULL,
    worker     TEXT   NOT NULL,
    queue      TEXT   NOT NULL,
    present_ms BIGINT NOT NULL DEFAULT 0,
    busy_ms    BIGINT NOT NULL DEFAULT 0,
    attempts   BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (hour, worker, queue)
);

-- GLOB's meaning: `*` any run, `?` one character, `[...]` a class (`[^...]` negated), everything else literal and
-- case-sensitive. Translated to an anchored regular expression.
CREATE FUNCTION cairn_glob(value TEXT, pattern TEXT) RETURNS BOOLEAN
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    re TEXT := '^';
    i INT := 1;
    c TEXT;
    in_class BOOLEAN := FALSE;
BEGIN
    WHILE i <= length(pattern) LOOP
        c := substr(pattern, i, 1);
        IF in_class THEN
            IF c = ']' THEN
                re := re || ']';
                in_class := FALSE;
            ELSIF c = '\' THEN
                re := re || '\\';
            ELSE
                re := re || c;
            END IF;
        ELSIF c = '*' THEN
            re := re || '.*';
        ELSIF c = '?' THEN
            re := re || '.';
        ELSIF c = '[' THEN
            in_class := TRUE;
            re := re || '[';
            IF substr(pattern, i + 1, 1) = '^' THEN
                re := re || '^';
                i := i + 1;
            END IF;
            IF substr(pattern, i + 1, 1) = ']' THEN
                re := re || '\]';
                i := i + 1;
            END IF;
        ELSE
            re := re || regexp_replace(c, '([.^$+(){}|\\-])', '\\\1', 'g');
        END IF;
        i := i + 1;
    END LOOP;
    RETURN value ~ (re || '$');
END
$$;

-- Times as RFC 3339 text, as the SQLite views give them.
CREATE FUNCTION cairn_time(ms BIGINT) RETURNS TEXT
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT to_char(to_timestamp(ms / 1000.0) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
$$;

CREATE VIEW cairn_jobs AS SELECT
    id, queue, name, state, priority, weight, attempt, max_attempts, data, progress, error, failure_group,
    unique_key, parent_id, worker, schedule, time_zone, tracked,
    cairn_time(created_at) AS created_at, cairn_time(run_at) AS run_at, cairn_time(started_at) AS started_at,
    cairn_time(finished_at) AS finished_at, cairn_time(lease_expires_at) AS lease_expires_at,
    (SELECT string_agg(tag, ',' ORDER BY tag) FROM job_tags WHERE job_id = jobs.id) AS tags
FROM jobs;

CREATE VIEW cairn_attempts AS SELECT
    job_id, claim, attempt, worker, outcome, error,
    cairn_time(started_at) AS started_at, cairn_time(finished_at) AS finished_at,
    finished_at - started_at AS duration_ms, run_ms, cpu_ms, peak_memory
FROM job_attempts;

CREATE VIEW cairn_activity AS SELECT
    id, cairn_time(at) AS at, event, job_id, queue, name, worker, detail
FROM activity;

CREATE VIEW cairn_stats_minute AS SELECT
    to_char(to_timestamp(minute / 1000) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS minute, queue, name,
    added, started, finished, retried, failed,
    wait_count, CASE WHEN wait_count > 0 THEN wait_sum / wait_count END AS wait_mean_ms, wait_min AS wait_min_ms,
    wait_max AS wait_max_ms,
    run_count, CASE WHEN run_count > 0 THEN run_sum / run_count END AS run_mean_ms, run_min AS run_min_ms,
    run_max AS run_max_ms,
    service_count, CASE WHEN service_count > 0 THEN service_sum / service_count END AS service_mean_ms,
    service_min AS service_min_ms, service_max AS service_max_ms
FROM stats_minute;

CREATE VIEW cairn_stats_hour AS SELECT
    to_char(to_timestamp(minute / 3600000 * 3600) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:00:00"Z"') AS hour,
    queue, name,
    SUM(added)::BIGINT AS added, SUM(started)::BIGINT AS started, SUM(finished)::BIGINT AS finished,
    SUM(retried)::BIGINT AS retried, SUM(failed)::BIGINT AS failed,
    SUM(wait_count)::BIGINT AS wait_count, SUM(wait_sum) / NULLIF(SUM(wait_count), 0) AS wait_mean_ms,
    MIN(wait_min) AS wait_min_ms, MAX(wait_max) AS wait_max_ms,
    SUM(run_count)::BIGINT AS run_count, SUM(run_sum) / NULLIF(SUM(run_count), 0) AS run_mean_ms,
    MIN(run_min) AS run_min_ms, MAX(run_max) AS run_max_ms,
    SUM(service_count)::BIGINT AS service_count, SUM(service_sum) / NULLIF(SUM(service_count), 0) AS service_mean_ms
FROM stats_minute GROUP BY minute / 3600000, queue, name;

CREATE VIEW cairn_workers AS SELECT
    id, status, cairn_time(first_seen) AS first_seen, cairn_time(last_seen) AS last_seen
FROM workers;
