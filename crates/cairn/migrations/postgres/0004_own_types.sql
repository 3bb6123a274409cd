-- PostgreSQL's own types where the first schema copied SQLite's: a job's data, its progress and a recurring
-- template are `json`, and flags are `boolean`. So `cairn sql` and a database's own users can read a job's data
-- with `data->>'customer'`, and index it (`CREATE INDEX ON jobs ((data->>'customer'))`).
--
-- `json`, not `jsonb`: `json` keeps the text as the client wrote it, so a job's data reads back with its keys in
-- their order, as on SQLite (and as Bedrock's clients see it); `jsonb` would sort them. Cast to `jsonb` where its
-- operators are wanted (`data::jsonb @> '{"plan": "pro"}'`).
--
-- Each ALTER rewrites its table once. The views and the one partial index that name these columns are dropped
-- first and made again, the same but for the flag they test.

DROP VIEW cairn_jobs;
DROP INDEX jobs_tracked;

ALTER TABLE jobs
    ALTER COLUMN data TYPE json USING data::json,
    ALTER COLUMN progress TYPE json USING progress::json,
    ALTER COLUMN awaits_parent DROP DEFAULT,
    ALTER COLUMN awaits_parent TYPE boolean USING awaits_parent <> 0,
    ALTER COLUMN awaits_parent SET DEFAULT false,
    ALTER COLUMN has_children DROP DEFAULT,
    ALTER COLUMN has_children TYPE boolean USING has_children <> 0,
    ALTER COLUMN has_children SET DEFAULT false,
    ALTER COLUMN has_dependents DROP DEFAULT,
    ALTER COLUMN has_dependents TYPE boolean USING has_dependents <> 0,
    ALTER COLUMN has_dependents SET DEFAULT false,
    ALTER COLUMN tracked DROP DEFAULT,
    ALTER COLUMN tracked TYPE boolean USING tracked <> 0,
    ALTER COLUMN tracked SET DEFAULT false;

ALTER TABLE queues
    ALTER COLUMN paused DROP DEFAULT,
    ALTER COLUMN paused TYPE boolean USING paused <> 0,
    ALTER COLUMN paused SET DEFAULT false;

ALTER TABLE recurring ALTER COLUMN template TYPE json USING template::json;

CREATE INDEX jobs_tracked ON jobs (id) WHERE tracked;

CREATE VIEW cairn_jobs AS SELECT
    id, queue, name, state, priority, weight, attempt, max_attempts, data, progress, error, failure_group,
    unique_key, parent_id, worker, schedule, time_zone, tracked,
    cairn_time(created_at) AS created_at, cairn_time(run_at) AS run_at, cairn_time(started_at) AS started_at,
    cairn_time(finished_at) AS finished_at, cairn_time(lease_expires_at) AS lease_expires_at,
    (SELECT string_agg(tag, ',' ORDER BY tag) FROM job_tags WHERE job_id = jobs.id) AS tags
FROM jobs;
