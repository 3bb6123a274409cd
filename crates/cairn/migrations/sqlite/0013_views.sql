-- Documented views for read-only SQL (`cairn sql`, `POST /v1/sql`): the same data as the tables, with times as
-- RFC 3339 text and names that say what they hold. The tables stay readable too (`SELECT * FROM jobs`).

CREATE VIEW cairn_jobs AS SELECT
    id, queue, name, state, priority, weight, attempt, max_attempts, data, progress, error, failure_group,
    unique_key, parent_id, worker, schedule, time_zone, tracked,
    strftime('%Y-%m-%dT%H:%M:%fZ', created_at / 1000.0, 'unixepoch') AS created_at,
    strftime('%Y-%m-%dT%H:%M:%fZ', run_at / 1000.0, 'unixepoch') AS run_at,
    strftime('%Y-%m-%dT%H:%M:%fZ', started_at / 1000.0, 'unixepoch') AS started_at,
    strftime('%Y-%m-%dT%H:%M:%fZ', finished_at / 1000.0, 'unixepoch') AS finished_at,
    strftime('%Y-%m-%dT%H:%M:%fZ', lease_expires_at / 1000.0, 'unixepoch') AS lease_expires_at,
    (SELECT group_concat(tag, ',') FROM job_tags WHERE job_id = jobs.id) AS tags
FROM jobs;

CREATE VIEW cairn_attempts AS SELECT
    job_id, claim, attempt, worker, outcome, error,
    strftime('%Y-%m-%dT%H:%M:%fZ', started_at / 1000.0, 'unixepoch') AS started_at,
    strftime('%Y-%m-%dT%H:%M:%fZ', finished_at / 1000.0, 'unixepoch') AS finished_at,
    finished_at - started_at AS duration_ms, run_ms, cpu_ms, peak_memory
FROM job_attempts;

CREATE VIEW cairn_activity AS SELECT
    id, strftime('%Y-%m-%dT%H:%M:%fZ', at / 1000.0, 'unixepoch') AS at, event, job_id, queue, name, worker, detail
FROM activity;

CREATE VIEW cairn_stats_minute AS SELECT
    strftime('%Y-%m-%dT%H:%M:%SZ', minute / 1000, 'unixepoch') AS minute, queue, name,
    added, started, finished, retried, failed,
    wait_count, CASE WHEN wait_count > 0 THEN wait_sum / wait_count END AS wait_mean_ms, wait_min AS wait_min_ms,
    wait_max AS wait_max_ms,
    run_count, CASE WHEN run_count > 0 THEN run_sum / run_count END AS run_mean_ms, run_min AS run_min_ms,
    run_max AS run_max_ms,
    service_count, CASE WHEN service_count > 0 THEN service_sum / service_count END AS service_mean_ms,
    service_min AS service_min_ms, service_max AS service_max_ms
FROM stats_minute;

CREATE VIEW cairn_stats_hour AS SELECT
    strftime('%Y-%m-%dT%H:00:00Z', minute / 1000, 'unixepoch') AS hour, queue, name,
    SUM(added) AS added, SUM(started) AS started, SUM(finished) AS finished, SUM(retried) AS retried,
    SUM(failed) AS failed,
    SUM(wait_count) AS wait_count, SUM(wait_sum) / NULLIF(SUM(wait_count), 0) AS wait_mean_ms,
    MIN(wait_min) AS wait_min_ms, MAX(wait_max) AS wait_max_ms,
    SUM(run_count) AS run_count, SUM(run_sum) / NULLIF(SUM(run_count), 0) AS run_mean_ms,
    MIN(run_min) AS run_min_ms, MAX(run_max) AS run_max_ms,
    SUM(service_count) AS service_count, SUM(service_sum) / NULLIF(SUM(service_count), 0) AS service_mean_ms
FROM stats_minute GROUP BY minute / 3600000, queue, name;

CREATE VIEW cairn_workers AS SELECT
    id, status,
    strftime('%Y-%m-%dT%H:%M:%fZ', first_seen / 1000.0, 'unixepoch') AS first_seen,
    strftime('%Y-%m-%dT%H:%M:%fZ', last_seen / 1000.0, 'unixepoch') AS last_seen
FROM workers;
