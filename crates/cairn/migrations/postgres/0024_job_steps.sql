-- As SQLite's 0027: the steps recorded inside a handler's run (ops/step.rs), and each job's count of them.
CREATE TABLE job_steps (
    job_id      BIGINT NOT NULL,
    name        TEXT   NOT NULL,
    seq         BIGINT NOT NULL,
    result      TEXT   NOT NULL,
    attempt     BIGINT NOT NULL,
    recorded_at BIGINT NOT NULL,
    PRIMARY KEY (job_id, name)
);

ALTER TABLE jobs ADD COLUMN step_count BIGINT NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN step_bytes BIGINT NOT NULL DEFAULT 0;
