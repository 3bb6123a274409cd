-- Debounced jobs: the key their pushes share, and when the window the first push opened closes (its `max_wait`).
-- A push with the key lands in the newest pending (scheduled or queued) job holding it while the window is open;
-- the index holds only those pending jobs.
ALTER TABLE jobs ADD COLUMN debounce_key TEXT;
ALTER TABLE jobs ADD COLUMN debounce_until INTEGER;
CREATE INDEX jobs_debounce ON jobs (debounce_key, id)
    WHERE debounce_key IS NOT NULL AND (state = 'scheduled' OR state = 'queued');
