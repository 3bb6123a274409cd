-- Each node adds its statistics to rows of its own. Rows that every node added to were a lock that each commit
-- waited on, so the nodes took turns. The readers sum over nodes as they sum over minutes; rows from before this
-- migration keep the node ''.
ALTER TABLE stats_minute ADD COLUMN node TEXT NOT NULL DEFAULT '';
ALTER TABLE stats_minute DROP CONSTRAINT stats_minute_pkey, ADD PRIMARY KEY (minute, queue, name, node);
ALTER TABLE stats_histogram ADD COLUMN node TEXT NOT NULL DEFAULT '';
ALTER TABLE stats_histogram DROP CONSTRAINT stats_histogram_pkey,
    ADD PRIMARY KEY (hour, queue, name, metric, bucket, node);

-- One row per minute, queue and name, as on SQLite: the nodes' rows summed.
DROP VIEW cairn_stats_minute;
CREATE VIEW cairn_stats_minute AS SELECT
    to_char(to_timestamp(minute / 1000) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS minute, queue, name,
    SUM(added)::BIGINT AS added, SUM(started)::BIGINT AS started, SUM(finished)::BIGINT AS finished,
    SUM(retried)::BIGINT AS retried, SUM(failed)::BIGINT AS failed,
    SUM(wait_count)::BIGINT AS wait_count, SUM(wait_sum) / NULLIF(SUM(wait_count), 0) AS wait_mean_ms,
    MIN(wait_min) AS wait_min_ms, MAX(wait_max) AS wait_max_ms,
    SUM(run_count)::BIGINT AS run_count, SUM(run_sum) / NULLIF(SUM(run_count), 0) AS run_mean_ms,
    MIN(run_min) AS run_min_ms, MAX(run_max) AS run_max_ms,
    SUM(service_count)::BIGINT AS service_count,
    SUM(service_sum) / NULLIF(SUM(service_count), 0) AS service_mean_ms,
    MIN(service_min) AS service_min_ms, MAX(service_max) AS service_max_ms
FROM stats_minute GROUP BY minute, queue, name;
