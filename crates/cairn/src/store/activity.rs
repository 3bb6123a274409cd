//! A writer transaction's activity and statistics rows, as the operations' event log (`ops/events.rs`) counted
//! them, for each database to write its own way (`Dialect::write_activity`, in `dialect.rs`):
//! SQLite in a few many-row statements (`sqlite/activity.rs`); PostgreSQL in one statement of arrays, which also
//! tells the nodes which jobs ended (`postgres/activity.rs`).

use crate::store::db::Value;

/// The rows one writer transaction adds, each kind's values one row after another.
pub(crate) struct ActivityRows<'v> {
    /// The activity log's rows, seven values each: at, event, job id, queue, name, worker, detail.
    pub activity: Vec<Value<'v>>,
    /// What each minute (of a queue and name) adds, 22 values each, in the order of [`minute_columns!`].
    pub minutes: Vec<Value<'v>>,
    /// What each histogram bucket adds, six values each: hour, queue, name, metric, bucket, count.
    pub histograms: Vec<Value<'v>>,
    /// What each worker hour adds, six values each: hour, worker, queue, present ms, busy ms, attempts.
    pub worker_hours: Vec<Value<'v>>,
    /// The jobs the transaction ended: where nodes share the database, those waiting for them on other nodes are
    /// told.
    pub ended_jobs: &'v [i64],
}

/// The columns of a minute's row that a transaction adds to, in the order the operations give them (`ops/events.rs`).
#[cfg(any(feature = "sqlite", feature = "postgres"))]
macro_rules! minute_columns {
    () => {
        "minute, queue, name, added, started, finished, retried, failed, wait_count, wait_sum, wait_sumsq, \
         wait_min, wait_max, run_count, run_sum, run_sumsq, run_min, run_max, service_count, service_sum, \
         service_min, service_max"
    };
}

/// How a minute's row takes what a transaction adds; a min or max that is NULL on one side takes the other. In
/// each dialect's words for the smaller and larger of two values: `minute_additions!(sqlite)`,
/// `minute_additions!(postgres)`.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
macro_rules! minute_additions {
    (sqlite) => {
        minute_additions!("MIN", "MAX")
    };
    (postgres) => {
        minute_additions!("LEAST", "GREATEST")
    };
    ($min:literal, $max:literal) => {
        concat!(
            "added = stats_minute.added + excluded.added, ",
            "started = stats_minute.started + excluded.started, ",
            "finished = stats_minute.finished + excluded.finished, ",
            "retried = stats_minute.retried + excluded.retried, ",
            "failed = stats_minute.failed + excluded.failed, ",
            "wait_count = stats_minute.wait_count + excluded.wait_count, ",
            "wait_sum = stats_minute.wait_sum + excluded.wait_sum, ",
            "wait_sumsq = stats_minute.wait_sumsq + excluded.wait_sumsq, ",
            "wait_min = COALESCE(",
            $min,
            "(stats_minute.wait_min, excluded.wait_min), ",
            "stats_minute.wait_min, excluded.wait_min), ",
            "wait_max = COALESCE(",
            $max,
            "(stats_minute.wait_max, excluded.wait_max), ",
            "stats_minute.wait_max, excluded.wait_max), ",
            "run_count = stats_minute.run_count + excluded.run_count, ",
            "run_sum = stats_minute.run_sum + excluded.run_sum, ",
            "run_sumsq = stats_minute.run_sumsq + excluded.run_sumsq, ",
            "run_min = COALESCE(",
            $min,
            "(stats_minute.run_min, excluded.run_min), ",
            "stats_minute.run_min, excluded.run_min), ",
            "run_max = COALESCE(",
            $max,
            "(stats_minute.run_max, excluded.run_max), ",
            "stats_minute.run_max, excluded.run_max), ",
            "service_count = stats_minute.service_count + excluded.service_count, ",
            "service_sum = stats_minute.service_sum + excluded.service_sum, ",
            "service_min = COALESCE(",
            $min,
            "(stats_minute.service_min, excluded.service_min), ",
            "stats_minute.service_min, excluded.service_min), ",
            "service_max = COALESCE(",
            $max,
            "(stats_minute.service_max, excluded.service_max), ",
            "stats_minute.service_max, excluded.service_max)"
        )
    };
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) use {minute_additions, minute_columns};
