//! PostgreSQL's way of writing a transaction's activity and statistics ([`ActivityRows`]): one statement, whose
//! round trip is most of the cost, which also tells the nodes that wait for the jobs it ended.

use crate::error::Result;
use crate::store::activity::{ActivityRows, minute_additions, minute_columns};
use crate::store::db::{Db, ToValue, columns};

/// Writes `rows`, the statistics to rows of `node`'s own.
pub(crate) fn write(db: &Db<'_>, rows: ActivityRows<'_>, node: &str) -> Result<()> {
    let minutes = rows.minutes.len() / 22;
    let histograms = rows.histograms.len() / 6;
    let mut arrays = columns(7, rows.activity);
    arrays.extend(columns(22, rows.minutes));
    arrays.push((0..minutes).map(|_| node.to_value()).collect());
    arrays.extend(columns(6, rows.histograms));
    arrays.push((0..histograms).map(|_| node.to_value()).collect());
    arrays.extend(columns(6, rows.worker_hours));
    arrays.push(rows.ended_jobs.iter().map(|id| id.to_value()).collect());
    db.query_arrays(WRITE_ACTIVITY, Vec::new(), arrays, |_| Ok(()))?;
    Ok(())
}

/// A transaction's activity rows and its three kinds of statistics rows in one statement, each a
/// data-modifying `WITH` over arrays (one per column): one round trip where there were four, in every writer
/// transaction. Activity rows are inserted in the order given (`WITH ORDINALITY`), so that their ids follow it.
///
/// The statistics go to rows of the writing node's own (the `node` column; PostgreSQL's migration 0003). Rows that
/// every node added to were a lock each commit waited on, the nodes taking turns; readers sum over nodes as they
/// sum over minutes.
///
/// Arrays, one per column of [`ActivityRows`]: `$1`–`$7` the activity rows; `$8`–`$30` the minutes' rows, then the
/// node; `$31`–`$37` the histograms' rows, then the node; `$38`–`$43` the worker hours' rows; `$44` the jobs ended.
pub(crate) const WRITE_ACTIVITY: &str = concat!(
    "WITH activity_rows AS (\
     INSERT INTO activity (at, event, job_id, queue, name, worker, detail) \
     SELECT at, event, job_id, queue, name, worker, detail \
     FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::text[]) \
     WITH ORDINALITY AS u (at, event, job_id, queue, name, worker, detail, ord) ORDER BY ord), \
     minute_rows AS (\
     INSERT INTO stats_minute (",
    minute_columns!(),
    ", node) \
     SELECT * FROM unnest($8::bigint[], $9::text[], $10::text[], $11::bigint[], $12::bigint[], $13::bigint[], \
       $14::bigint[], $15::bigint[], $16::bigint[], $17::double precision[], $18::double precision[], \
       $19::bigint[], $20::bigint[], $21::bigint[], $22::double precision[], $23::double precision[], \
       $24::bigint[], $25::bigint[], $26::bigint[], $27::double precision[], $28::bigint[], $29::bigint[], \
       $30::text[]) \
     ON CONFLICT (minute, queue, name, node) DO UPDATE SET ",
    minute_additions!(postgres),
    "), \
     histogram_rows AS (\
       INSERT INTO stats_histogram (hour, queue, name, metric, bucket, count, node) \
       SELECT * FROM unnest($31::bigint[], $32::text[], $33::text[], $34::text[], $35::bigint[], $36::bigint[], \
         $37::text[]) \
       ON CONFLICT (hour, queue, name, metric, bucket, node) \
       DO UPDATE SET count = stats_histogram.count + excluded.count), \
     worker_rows AS (\
       INSERT INTO worker_hour (hour, worker, queue, present_ms, busy_ms, attempts) \
       SELECT * FROM unnest($38::bigint[], $39::text[], $40::text[], $41::bigint[], $42::bigint[], $43::bigint[]) \
       ON CONFLICT (hour, worker, queue) DO UPDATE SET present_ms = worker_hour.present_ms + excluded.present_ms, \
       busy_ms = worker_hour.busy_ms + excluded.busy_ms, attempts = worker_hour.attempts + excluded.attempts) \
     SELECT pg_notify('cairn_job_ended', CAST(w.job_id AS TEXT)) \
     FROM (SELECT DISTINCT job_id FROM cairn_job_waits WHERE job_id = ANY($44::bigint[])) AS w"
);
