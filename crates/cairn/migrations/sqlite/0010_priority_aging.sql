-- Priority aging: a queue may let its ready jobs gain priority as they wait, so that a steady stream of
-- high-priority jobs cannot starve the low ones forever.
--
-- A job that has been ready since run_at, with priority p, in a queue where a job gains one point per aging_ms of
-- waiting, has at time t the priority p + (t - run_at) / aging_ms. Ordering by that, highest first, is ordering by
-- run_at - p * aging_ms, lowest first, which does not depend on t: it can be an index key, so aging costs a claim
-- nothing. Without aging (aging_ms NULL) the key is -p, and the index orders as before: priority, then run_at.

-- The queue's setting: one priority point per aging_ms of waiting; NULL for strict priority.
ALTER TABLE queues ADD COLUMN aging_ms INTEGER;

-- Every job carries its queue's aging_ms (written when it enters the queue, rewritten when the setting changes),
-- because an index key can only read the row.
ALTER TABLE jobs ADD COLUMN aging_ms INTEGER;
ALTER TABLE jobs ADD COLUMN claim_key INTEGER GENERATED ALWAYS AS
    (CASE WHEN aging_ms IS NULL THEN -priority ELSE run_at - priority * aging_ms END) VIRTUAL;

-- Serves SELECT_READY_JOBS (claim) and peek: only ready jobs are in it, in claim order.
DROP INDEX jobs_ready;
CREATE INDEX jobs_ready ON jobs (queue, claim_key, run_at, id) WHERE state = 'queued';
