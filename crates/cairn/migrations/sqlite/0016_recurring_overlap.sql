-- What a recurring template does when its previous run is still queued or running at the next slot (`overlap`:
-- `allow` another run, the behaviour before this migration; `skip` the slot; `replace` the previous run), and which
-- job that previous run is (`last_job_id`, the last job the template created).
ALTER TABLE recurring ADD COLUMN overlap TEXT NOT NULL DEFAULT 'allow';
ALTER TABLE recurring ADD COLUMN last_job_id INTEGER;
