-- Whose the children are that a job's runs create (`Children` in job.rs): the run's (FALSE, as every job's were
-- before), or the job's, as Bedrock's are (ops/waiting.rs).
ALTER TABLE jobs ADD COLUMN children_of_job INTEGER NOT NULL DEFAULT FALSE;
