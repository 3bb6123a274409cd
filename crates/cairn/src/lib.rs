//! Cairn: a durable job queue. This crate is the engine, usable embedded on a SQLite file, or on a PostgreSQL
//! database that several processes share.
//!
//! ```no_run
//! # async fn demo() -> cairn::Result<()> {
//! use cairn::{Dequeue, Jobs, Push, Queue};
//!
//! let queue = Queue::open("jobs.db").await?;
//! queue.enqueue(Push::new("email.send").data(serde_json::json!({"to": "ada@example.com"}))).await?;
//! for claimed in queue.dequeue(Dequeue::new("worker-1").name("email.*")).await? {
//!     // … send the email …
//!     queue.finish(&claimed.lease, None).await?;
//! }
//! queue.close(std::time::Duration::from_secs(5)).await?;
//! # Ok(()) }
//! ```
//!
//! See `ARCHITECTURE.md` in the repository for how it works inside.
#![warn(missing_docs)]
// The lint-clean build is the full one (both backends, as CI builds it). A build without a backend compiles the
// same code and leaves its backend's paths unused.
#![cfg_attr(
    not(all(feature = "sqlite", feature = "postgres")),
    allow(
        unused_imports,
        unused_variables,
        unused_mut,
        dead_code,
        unreachable_code,
        clippy::drop_non_drop
    )
)]

mod activity;
mod clock;
mod engine;
mod error;
mod event_stream;
mod fuzz;
mod job;
mod lease;
mod metrics;
mod name_families;
mod names;
mod ops;
mod options;
mod query;
mod queue;
mod retry_policy;
mod schedule;
mod sql;
mod stats;
mod store;
mod test_support;
mod worker;

pub use activity::{ActivityEvent, ActivityFilter, ActivityPage, MAX_ACTIVITY_PAGE};
pub use clock::{Clock, ManualClock, SystemClock};
pub use error::{Error, ErrorKind, Result};
pub use event_stream::{
    EventFilter, Events, EventsFrom, EventsMissed, FOLLOW_OTHER_NODES, GAP_GRACE,
};
pub use job::{Attempt, AttemptOutcome, Children, Job, JobState, RunUsage, Step};
pub use lease::Lease;
pub use metrics::{DurationHistogram, HISTOGRAM_BOUNDS, JobMetrics, MetricsSnapshot};
pub use name_families::NameFamilies;
pub use names::{
    ConcurrencyKey, DebounceKey, JobId, JobName, NamePattern, QueueName, RecurringKey, SignalKey,
    StepName, Tag, ThrottleKey, TraceParent, UniqueKey, WorkerId,
};
pub use ops::public::*;
pub use options::{Durability, QueueOptions, RecoveryPolicy, Retention};
/// The PostgreSQL driver Cairn uses, for [`Queue::enqueue_in_postgres`].
#[cfg(feature = "postgres")]
pub use postgres;
pub use query::{JobFilter, JobPage, MAX_PAGE};
pub use queue::Queue;
pub use queue::jobs::{Jobs, Runs};
#[cfg(feature = "postgres")]
pub use store::postgres::connect::connect_postgres;
// Every request that is not an operation of `ops/` (the reads among them), as it is declared.
pub use queue::reads::*;
pub use queue::request::Request;
pub use retry_policy::{RetryOverrides, RetryPolicy};
/// The SQLite driver Cairn uses, for [`Queue::enqueue_in`] and [`Queue::connect`].
#[cfg(feature = "sqlite")]
pub use rusqlite;
pub use sql::{MAX_SQL_BYTES, MAX_SQL_ROWS, MAX_SQL_TIME, SqlQuery, SqlResult};
pub use stats::{
    Counts, HistogramBucket, QueueUsage, Stats, StatsPeriod, StatsPoint, StatsQuery, Summary,
    WorkerStats, WorkerUsage,
};
pub use store::location::{is_postgres_url, redacted as redacted_location};

/// The fuzz targets' harnesses (`fuzz/`, `docs/fuzzing.md`), and what `cairn-api`'s needs; not part of the API.
#[doc(hidden)]
pub mod __fuzz {
    pub use crate::fuzz::{
        check_dequeue, check_push, check_recurring, check_retry, cron, repeat, replay_corpus,
    };
}

/// What `impl_backend_by_jobs!` names from other crates; not part of the API.
#[doc(hidden)]
pub mod __private {
    pub use crate::test_support::is_postgres_module;
    #[cfg(feature = "postgres")]
    pub use crate::test_support::{PrivateCluster, TestDatabase};

    /// Brings a PostgreSQL database to this build's schema: for the PostgreSQL backend's tests while it is built.
    ///
    /// # Errors
    /// Storage errors, or a database written by a newer Cairn.
    #[cfg(feature = "postgres")]
    pub fn migrate_postgres(client: &mut postgres::Client, now_ms: i64) -> crate::Result<()> {
        crate::store::postgres::migrations::migrate(client, now_ms)
    }

    /// Brings a PostgreSQL database to schema version `last` only: for the tests of an upgrade.
    ///
    /// # Errors
    /// Storage errors, or a database written by a newer Cairn.
    #[cfg(feature = "postgres")]
    pub fn migrate_postgres_to(
        client: &mut postgres::Client,
        now_ms: i64,
        last: i64,
    ) -> crate::Result<()> {
        crate::store::postgres::migrations::migrate_to(client, now_ms, last)
    }

    /// PostgreSQL's statement for a claim of `patterns` (valid GLOBs) from one queue, with no priority, and the
    /// values of its parameters between the queue (`$1`) and the limit (last): for the tests that run it in
    /// transactions of their own.
    pub fn postgres_claim_select(patterns: &[&str]) -> (String, Vec<String>) {
        use crate::ops::claim::by_name::NameSource;
        use crate::store::db::Value;
        let sources: Vec<NameSource> = patterns
            .iter()
            .map(|p| NameSource::of(&crate::NamePattern::parse(*p).expect("a valid pattern")))
            .collect();
        let shapes: Vec<_> = sources.iter().map(NameSource::shape).collect();
        let sql = crate::ops::claim::select_ready_jobs(&shapes, false, false).postgres;
        let args = sources
            .iter()
            .flat_map(NameSource::args)
            .map(|value| match value {
                Value::Text(text) => text.into_owned(),
                other => panic!("a name pattern's parameters are texts, got {other:?}"),
            })
            .collect();
        (sql, args)
    }

    /// Some of the engine's own statements, those where the two dialects differ most, as (SQLite's text,
    /// PostgreSQL's text), either empty where the statement does not run on that database: for the tests to
    /// prepare each on the real schema of its database.
    pub fn sample_statements() -> Vec<(String, String)> {
        use crate::ops::*;
        use crate::store::db::{OwnedSql, Sql};
        let owned = |sql: Sql<'_>| (sql.sqlite.to_owned(), sql.postgres.to_owned());
        let mut all: Vec<(String, String)> = [
            crate::stats::SERIES,
            crate::stats::TOTALS,
            crate::stats::HISTOGRAM,
            crate::stats::WORKER_HOURS,
            heartbeat::EXTEND_LEASE,
            workers::SEEN,
            workers::LOSE,
            workers::FORGET,
            finish::COMPLETE_JOB,
            finish::GO_ON,
            queues::COUNT_BY_STATE,
            waiting::RELEASE_IF_UNBLOCKED,
            aging::SET_AGING,
            aging::AGE_JOBS,
            failures::UNFAIL,
            claim::LEASE_JOB,
            crate::activity::BY_JOB,
            crate::activity::RECENT,
            crate::ops::maintenance::PRUNE_ACTIVITY,
            crate::ops::maintenance::PRUNE_ACTIVITY_BY_COUNT,
            crate::query::PEEK,
            crate::query::PEEK_KEYED,
        ]
        .into_iter()
        .map(owned)
        .collect();
        all.extend(crate::ops::maintenance::PRUNE_STATS.map(owned));
        #[cfg(feature = "sqlite")]
        for rows in [
            &crate::store::sqlite::activity::UPSERT_WORKER_HOURS,
            &crate::store::sqlite::activity::UPSERT_MINUTES,
        ] {
            all.push((
                rows.sqlite_text(2).unwrap_or_default().to_owned(),
                String::new(),
            ));
        }
        #[cfg(feature = "postgres")]
        all.push((
            String::new(),
            crate::store::postgres::activity::WRITE_ACTIVITY.to_owned(),
        ));
        all.push(push::insert_plain_texts());
        all.push((String::new(), finish::complete_plain_text().to_owned()));
        use crate::ops::claim::by_name::NameShape;
        let scan = |bounded| NameShape::Scan {
            bounded,
            glob: true,
        };
        for (shapes, priority, aging) in [
            (&[][..], false, false),
            (&[][..], true, true),
            (&[NameShape::Exact][..], false, false),
            (&[NameShape::Exact, scan(true)][..], true, false),
            (&[scan(false), NameShape::Exact][..], true, true),
            (
                &[NameShape::Scan {
                    bounded: true,
                    glob: false,
                }][..],
                false,
                false,
            ),
        ] {
            let OwnedSql { sqlite, postgres } = claim::select_ready_jobs(shapes, priority, aging);
            all.push((sqlite, postgres));
        }
        all.extend(crate::ops::claim::by_name::SQLITE_NAME_STEPS.map(owned));
        all.extend(crate::ops::claim::by_key::sample_statements());
        all.extend(watch::statements());
        all.push((String::new(), crate::ops::claim::bulk::lease_chosen_sql()));
        let select = claim::select_ready_jobs(&[NameShape::Exact], true, false);
        all.push((
            String::new(),
            crate::ops::claim::bulk::lease_slots_sql(&select.postgres, 5),
        ));
        all
    }

    pub use jiff::Timestamp;
    pub use serde_json::Value;
}
pub use schedule::cron::Cron;
pub use schedule::repeat::{Repeat, RepeatBase, RunTimes};
pub use schedule::{Schedule, parse_first_run};
#[cfg(feature = "sqlite")]
pub use store::sqlite::connection::SqliteSettings;
pub use worker::{
    Backend, BoxFuture, HandlerResult, JobContext, JobError, OpenStep, Worker, WorkerBuilder,
    WorkerReport,
};
