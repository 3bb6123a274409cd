-- As SQLite's 0024: why a batch's callback could not be made, and a batch's failed jobs by id.
ALTER TABLE batches ADD COLUMN complete_error TEXT;
ALTER TABLE batches ADD COLUMN success_error TEXT;
CREATE INDEX jobs_failed_by_batch ON jobs (batch_id, id) WHERE batch_id IS NOT NULL AND state = 'failed';
