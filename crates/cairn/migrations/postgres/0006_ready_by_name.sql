-- Ready jobs by queue and name, in claim order: a dequeue for some names reads those names' jobs only, however many
-- ready jobs of other names the queue holds, and the distinct ready names (for a GLOB) are found by skipping from
-- one name to the next along it. `jobs_ready` stays for dequeues of any name.
-- The name is in byte order (collation "C", as SQLite's BINARY): the names a GLOB's literal prefix allows are then
-- one range of the index, whatever the database's collation.
CREATE INDEX jobs_ready_by_name ON jobs (queue, name COLLATE "C", claim_key, run_at, id) WHERE state = 'queued';
