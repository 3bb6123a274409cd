-- As SQLite's 0020: a job's result, apart from its data; the job keeps its last one, each completed attempt its
-- own. `json`, as a job's data is (see 0004).
ALTER TABLE jobs ADD COLUMN result json;
ALTER TABLE job_attempts ADD COLUMN result json;

-- Who waits for a job to end (`Queue::wait`, `GET /v1/jobs/{id}?wait_ms=`), so that the node that ends it tells the
-- node that waits (channel `cairn_job_ended`): one row per wait, until it ends or runs out. A commit that ended
-- jobs looks up only their ids here.
CREATE TABLE cairn_job_waits (
    job_id   BIGINT NOT NULL,
    waiter   BIGINT NOT NULL, -- a token of the wait's own: each wait takes back its row, not another's
    until_ms BIGINT NOT NULL
);
CREATE INDEX cairn_job_waits_by_job ON cairn_job_waits (job_id);
