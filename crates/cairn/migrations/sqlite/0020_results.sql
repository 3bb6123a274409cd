-- A job's result: what its worker finished it with, kept apart from its data (which a finish may replace and a
-- recurring job's next run starts from). The job keeps its last one; each completed attempt keeps its own.
ALTER TABLE jobs ADD COLUMN result TEXT;
ALTER TABLE job_attempts ADD COLUMN result TEXT;
