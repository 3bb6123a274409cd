-- As SQLite's 0016: what a recurring template does when its previous run is still queued or running at the next
-- slot, and which job that previous run is.
ALTER TABLE recurring ADD COLUMN overlap TEXT NOT NULL DEFAULT 'allow';
ALTER TABLE recurring ADD COLUMN last_job_id BIGINT;
