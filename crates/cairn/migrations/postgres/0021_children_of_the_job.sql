-- As SQLite's 0026: whose the children are that a job's runs create (`Children` in job.rs).
ALTER TABLE jobs ADD COLUMN children_of_job boolean NOT NULL DEFAULT false;
