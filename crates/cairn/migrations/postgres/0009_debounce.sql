-- As SQLite's 0017: debounced jobs' key and the end of their window, and an index of the pending ones.
ALTER TABLE jobs ADD COLUMN debounce_key TEXT;
ALTER TABLE jobs ADD COLUMN debounce_until BIGINT;
CREATE INDEX jobs_debounce ON jobs (debounce_key, id)
    WHERE debounce_key IS NOT NULL AND (state = 'scheduled' OR state = 'queued');
