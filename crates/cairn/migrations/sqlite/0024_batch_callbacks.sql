-- Why a batch's callback could not be made, when it could not (its stored job no longer valid, or the batch's counts
-- past the data limit): the batch's end is recorded without it, and this says so.
ALTER TABLE batches ADD COLUMN complete_error TEXT;
ALTER TABLE batches ADD COLUMN success_error TEXT;
-- A batch's failed jobs, for the callback's `failed_ids`, without reading the batch's other jobs.
CREATE INDEX jobs_failed_by_batch ON jobs (batch_id, id) WHERE batch_id IS NOT NULL AND state = 'failed';
