-- Bedrock::Jobs' own table, as a view of Cairn's jobs: what the Bedrock protocol's `Query: SELECT * FROM jobs;`
-- reads (the protocol names this view `jobs` for that query), with Bedrock's columns, states, priorities and
-- times (`YYYY-MM-DD HH:MM:SS`, UTC). Only the jobs the protocol sees: those of the `default` queue and the mocked
-- ones of `bedrock-mock`, without the standalone jobs that finished (Bedrock deletes them).

CREATE VIEW bedrock_jobs AS SELECT
    strftime('%Y-%m-%d %H:%M:%S', created_at / 1000, 'unixepoch') AS created,
    id AS jobID,
    CASE
        WHEN state = 'scheduled' OR state = 'queued' THEN 'QUEUED'
        WHEN state = 'running' AND retry_after IS NOT NULL THEN 'RUNQUEUED'
        WHEN state = 'running' THEN 'RUNNING'
        WHEN state = 'waiting' THEN 'PAUSED'
        WHEN state = 'failed' THEN 'FAILED'
        WHEN state = 'cancelled' THEN 'CANCELLED'
        ELSE 'FINISHED'
    END AS state,
    name,
    strftime('%Y-%m-%d %H:%M:%S',
        (CASE WHEN state = 'running' AND retry_after IS NOT NULL THEN lease_expires_at ELSE run_at END) / 1000,
        'unixepoch') AS nextRun,
    strftime('%Y-%m-%d %H:%M:%S', attempt_started_at / 1000, 'unixepoch') AS lastRun,
    COALESCE(schedule, '') AS repeat,
    data,
    priority + 500 AS priority,
    COALESCE(parent_id, 0) AS parentJobID,
    COALESCE(retry_after, '') AS retryAfter
FROM (
    SELECT jobs.*,
        (SELECT substr(tag, 20) FROM job_tags
         WHERE job_id = jobs.id AND substr(tag, 1, 19) = 'bedrock:retryAfter=') AS retry_after
    FROM jobs
    WHERE (queue = 'default' OR queue = 'bedrock-mock') AND (state != 'completed' OR parent_id IS NOT NULL)
);
