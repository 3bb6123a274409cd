-- A batch's total is counted by the code that inserts its jobs (ops/batches.rs, `count_added`), one update per batch
-- and statement. As a trigger it cost every insert into `jobs`, a batch job or not: SQLite runs a row trigger's
-- program (its WHEN clause included) for every row. The ends stay counted by the triggers of 0022.
DROP TRIGGER batch_job_added;
