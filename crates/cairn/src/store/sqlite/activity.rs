//! SQLite's way of writing a transaction's activity and statistics ([`ActivityRows`]): a few many-row statements
//! of each kind, as [`MultiRow`] cuts them. Fewer statements is most of the cost.

use crate::error::Result;
use crate::store::activity::{ActivityRows, minute_additions, minute_columns};
use crate::store::db::{Db, MultiRow};

/// Writes `rows` (their ended jobs' waiters are in this process, and are told by the engine).
pub(crate) fn write(db: &Db<'_>, rows: ActivityRows<'_>) -> Result<()> {
    INSERT_ACTIVITY.execute(db, rows.activity)?;
    UPSERT_MINUTES.execute(db, rows.minutes)?;
    UPSERT_HISTOGRAMS.execute(db, rows.histograms)?;
    UPSERT_WORKER_HOURS.execute(db, rows.worker_hours)?;
    Ok(())
}

/// The activity log's rows.
static INSERT_ACTIVITY: MultiRow = MultiRow::sqlite_only(
    7,
    "INSERT INTO activity (at, event, job_id, queue, name, worker, detail)",
    "",
);

/// Adds to the minutes' rows many at once (the keys of one batch are distinct, as an upsert of many rows
/// needs).
pub(crate) static UPSERT_MINUTES: MultiRow = MultiRow::sqlite_only(
    22,
    concat!("INSERT INTO stats_minute (", minute_columns!(), ")"),
    concat!(
        "ON CONFLICT (minute, queue, name) DO UPDATE SET ",
        minute_additions!(sqlite)
    ),
);

/// Adds to the histograms' buckets, many at once (the keys of one batch are distinct).
pub(crate) static UPSERT_HISTOGRAMS: MultiRow = MultiRow::sqlite_only(
    6,
    "INSERT INTO stats_histogram (hour, queue, name, metric, bucket, count)",
    "ON CONFLICT (hour, queue, name, metric, bucket) DO UPDATE SET count = stats_histogram.count + excluded.count",
);

/// Adds to the worker-hour rows, many at once (the keys of one batch are distinct, as an upsert of many
/// rows needs).
pub(crate) static UPSERT_WORKER_HOURS: MultiRow = MultiRow::sqlite_only(
    6,
    "INSERT INTO worker_hour (hour, worker, queue, present_ms, busy_ms, attempts)",
    "ON CONFLICT (hour, worker, queue) DO UPDATE SET present_ms = worker_hour.present_ms + excluded.present_ms, \
     busy_ms = worker_hour.busy_ms + excluded.busy_ms, attempts = worker_hour.attempts + excluded.attempts",
);
