-- The job table, its attempt history and its tags.
-- Times are integer milliseconds since the Unix epoch, UTC.

CREATE TABLE jobs (
    id                 INTEGER PRIMARY KEY AUTOINCREMENT, -- never reused, so a stale id never names a new job
    queue              TEXT    NOT NULL,
    name               TEXT    NOT NULL,
    state              TEXT    NOT NULL,                  -- scheduled, queued, waiting, running, completed, failed,
                                                          -- cancelled; written only by the engine. No CHECK: an IN
                                                          -- list costs an ephemeral table per insert.
    data               TEXT    NOT NULL,                  -- JSON the next attempt starts from; checkpoints replace it
    progress           TEXT,                              -- JSON the running attempt reported; cleared on claim
    priority           INTEGER NOT NULL,
    weight             INTEGER NOT NULL CHECK (weight >= 1),
    run_at             INTEGER NOT NULL,
    attempt            INTEGER NOT NULL DEFAULT 0,        -- attempts started so far (a released one does not count)
    claims             INTEGER NOT NULL DEFAULT 0,        -- times claimed, released ones included: numbers history rows
    max_attempts       INTEGER NOT NULL CHECK (max_attempts >= 1),
    backoff_initial_ms INTEGER NOT NULL,
    backoff_multiplier REAL    NOT NULL,
    backoff_max_ms     INTEGER NOT NULL,
    backoff_jitter     REAL    NOT NULL,
    lease_timeout_ms   INTEGER NOT NULL,
    unique_key         TEXT,
    parent_id          INTEGER,
    worker             TEXT,                              -- the current (or last) attempt's worker
    lease_token        INTEGER,                           -- set while running; fences late calls
    lease_expires_at   INTEGER,                           -- set while running
    attempt_started_at INTEGER,                           -- the current (or last) attempt's start
    created_at         INTEGER NOT NULL,
    started_at         INTEGER,                           -- first attempt's start
    finished_at        INTEGER,                           -- entry into completed, failed or cancelled
    error              TEXT,                              -- the last attempt's error message
    failure_group      TEXT,                              -- set when failed
    schedule           TEXT,                              -- a recurring job's schedule: Bedrock repeat spec or cron
    time_zone          TEXT,                              -- a cron schedule's IANA time zone
    slot_at            INTEGER NOT NULL                   -- when the current run was due (retries move run_at, not this)
);

-- Serves SELECT_READY_JOBS (claim): only ready jobs are in it, in claim order, so future and finished jobs cost nothing.
CREATE INDEX jobs_ready ON jobs (queue, priority DESC, run_at, id) WHERE state = 'queued';

-- Serves PROMOTE_DUE_JOBS and the writer's next-wake-up lookup.
CREATE INDEX jobs_scheduled ON jobs (run_at) WHERE state = 'scheduled';

-- Serves EXPIRE_LEASES and the writer's next-wake-up lookup.
CREATE INDEX jobs_leases ON jobs (lease_expires_at) WHERE state = 'running';

-- Serves the unique-key lookup of push, and makes two live jobs with one key impossible.
-- Predicates are OR chains, not IN lists: SQLite builds an ephemeral table for an IN list on every statement.
CREATE UNIQUE INDEX jobs_unique_live ON jobs (unique_key)
    WHERE unique_key IS NOT NULL AND (state = 'scheduled' OR state = 'queued' OR state = 'waiting' OR state = 'running');

-- Serves retention: the oldest finished jobs first.
CREATE INDEX jobs_finished ON jobs (finished_at) WHERE state = 'completed' OR state = 'cancelled';

-- Serves listing failed jobs, newest first. Other states are listed through their own partial indexes or by id;
-- a general (state, id) index would be rewritten on every state change, the hottest write there is.
CREATE INDEX jobs_failed ON jobs (id) WHERE state = 'failed';

-- One row per ended attempt. The running attempt lives on the job row (worker, attempt_started_at), so claiming
-- writes nothing here; the row is written once, when the attempt ends. No foreign key: the engine deletes a job's
-- history with the job, and a foreign key would cost a lookup of the job on every insert.
CREATE TABLE job_attempts (
    job_id      INTEGER NOT NULL,
    claim       INTEGER NOT NULL, -- the job's claims count when this attempt started: unique per job
    attempt     INTEGER NOT NULL, -- the job's attempt count when it started; a released attempt's number repeats
    worker      TEXT    NOT NULL,
    started_at  INTEGER NOT NULL,
    finished_at INTEGER NOT NULL,
    outcome     TEXT    NOT NULL,
    error       TEXT,
    PRIMARY KEY (job_id, claim)
) WITHOUT ROWID;

-- No foreign key, as for job_attempts.
CREATE TABLE job_tags (
    job_id INTEGER NOT NULL,
    tag    TEXT    NOT NULL,
    PRIMARY KEY (job_id, tag)
) WITHOUT ROWID;

-- Serves listing the jobs with a tag.
CREATE INDEX job_tags_by_tag ON job_tags (tag, job_id);
