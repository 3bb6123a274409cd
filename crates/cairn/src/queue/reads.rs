//! The requests a queue answers without its writer: reads on the reader pool ([`Read`]: one struct per read, such as
//! [`ListWorkers`] or a [`JobFilter`]), and the few that wait or go elsewhere ([`GetJob`] waits for a job to end,
//! [`Dequeue`] for a job to take, [`SqlQuery`] runs on a connection of its own). Each is a [`Request`], so the
//! server mounts it and the client calls it as it does any operation.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::activity::{ActivityFilter, ActivityPage};
use crate::clock::to_millis;
use crate::error::{Error, Result};
use crate::job::Job;
use crate::names::JobId;
use crate::ops::batch_jobs::BatchId;
use crate::ops::batches::{Batch, BatchFilter};
use crate::ops::bulk_action::{BulkAction, BulkOutcome, BulkSelection};
use crate::ops::claim::{ClaimedJob, Dequeue};
use crate::ops::config::{ConfigEntry, ConfigKey, Defaults, RuntimeConfig};
use crate::ops::failures::FailureGroup;
use crate::ops::finish::Finish;
use crate::ops::queues::QueueStats;
use crate::ops::recurring::RecurringInfo;
use crate::ops::workers::WorkerInfo;
use crate::query::{JobFilter, JobPage};
use crate::queue::Queue;
use crate::queue::request::Request;
use crate::sql::{SqlQuery, SqlResult};
use crate::stats::{Stats, StatsPeriod, StatsQuery, WorkerStats};
use crate::store::db::{Db, Sql, params};
use crate::worker::backend::BoxFuture;

/// A request answered by one read on the reader pool, never by the writer.
pub(crate) trait Read: Send + Sync + 'static {
    /// What it answers.
    type Output: Send + 'static;

    /// Reads the answer, `now` being the queue's clock in milliseconds.
    fn read(&self, db: &Db<'_>, at: &ReadAt) -> Result<Self::Output>;
}

/// What a read may need besides its database: the queue's time, and the options it was opened with.
pub(crate) struct ReadAt {
    /// The queue's clock, in milliseconds since the epoch.
    pub now: i64,
    /// The options the queue was opened with (what run-time settings fall back to).
    pub defaults: Defaults,
}

impl Queue {
    /// Runs `request` on a reader connection.
    pub(crate) async fn read<R: Read>(&self, request: R) -> Result<R::Output> {
        let at = ReadAt {
            now: to_millis(self.now()),
            defaults: self.inner.defaults.clone(),
        };
        self.inner
            .readers
            .read(move |db| request.read(db, &at))
            .await
    }
}

/// Makes each read a [`Request`] that runs on the reader pool (listed with its output: the compiler holds it to the
/// read's own).
macro_rules! read_requests {
    ($($read:ty => $output:ty),* $(,)?) => {$(
        impl Request for $read {
            type Output = $output;

            fn run_on(self, queue: &Queue) -> BoxFuture<'_, Result<Self::Output>> {
                Box::pin(queue.read(self))
            }
        }
    )*};
}

read_requests!(
    ListQueues => Vec<QueueStats>,
    Peek => Vec<Job>,
    ListFailures => Vec<FailureGroup>,
    ListWorkers => Vec<WorkerInfo>,
    ListRecurring => Vec<RecurringInfo>,
    GetRecurring => RecurringInfo,
    ListConfig => Vec<ConfigEntry>,
    GetConfig => ConfigEntry,
    GetBatch => Batch,
    BatchFilter => BatchPage,
    JobFilter => JobPage,
    StatsQuery => Stats,
    WorkerStatsQuery => WorkerStats,
    ActivityFilter => ActivityPage,
    QueuesOf => QueuesFound,
);

/// The queues some jobs and a batch are in: what a server looks up to hold a token limited to some queues to them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueuesOf {
    /// The jobs.
    pub jobs: Vec<JobId>,
    /// The batch, if any.
    pub batch: Option<BatchId>,
}

/// What a [`QueuesOf`] found: each job that is there with its queue (one that is not is left out, for the request
/// that names it to answer itself), and the queues of the batch's jobs and callbacks (none if it is not there).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueuesFound {
    /// The jobs found, each with its queue, in the order asked.
    pub jobs: Vec<(JobId, String)>,
    /// The queues the batch's jobs are in, and its callbacks' queues.
    pub batch: BTreeSet<String>,
}

const QUEUE_OF_JOB: Sql = Sql::both("SELECT queue FROM jobs WHERE id = $1");
const QUEUES_OF_BATCH: Sql = Sql::both("SELECT DISTINCT queue FROM jobs WHERE batch_id = $1");

impl Read for QueuesOf {
    type Output = QueuesFound;

    fn read(&self, db: &Db<'_>, _: &ReadAt) -> Result<Self::Output> {
        let mut found = QueuesFound::default();
        for &job in &self.jobs {
            if let Some(queue) = db.query_row(QUEUE_OF_JOB, &params![job.0], |r| r.get(0))? {
                found.jobs.push((job, queue));
            }
        }
        if let Some(batch) = self.batch {
            let queues = db.query(QUEUES_OF_BATCH, &params![batch.0], |r| r.get(0))?;
            found.batch.extend(queues);
            match crate::ops::batches::load_batch(db, batch) {
                Ok(batch) => found.batch.extend(
                    [batch.on_success, batch.on_complete]
                        .into_iter()
                        .flatten()
                        .map(|callback| callback.queue.as_str().to_owned()),
                ),
                Err(e) if e.kind() == crate::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(found)
    }
}

/// Every queue that has jobs or settings, by name, with its jobs counted by state. This reads every job: it is for
/// operators and dashboards, not for a hot path.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ListQueues;

impl Read for ListQueues {
    type Output = Vec<QueueStats>;

    fn read(&self, db: &Db<'_>, at: &ReadAt) -> Result<Self::Output> {
        crate::ops::queues::queue_stats(db, at.now)
    }
}

/// The next jobs a worker taking from `queue` would get, in that order, without taking them; none while the queue
/// is paused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peek {
    /// The queue.
    pub queue: String,
    /// The most jobs to show, 1 to [`MAX_PAGE`](crate::MAX_PAGE).
    pub limit: u32,
}

impl Read for Peek {
    type Output = Vec<Job>;

    fn read(&self, db: &Db<'_>, _: &ReadAt) -> Result<Self::Output> {
        crate::query::peek(db, &self.queue, self.limit)
    }
}

/// Every failure group that holds failed jobs, by name, with how many and when they failed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ListFailures;

impl Read for ListFailures {
    type Output = Vec<FailureGroup>;

    fn read(&self, db: &Db<'_>, _: &ReadAt) -> Result<Self::Output> {
        crate::ops::failures::failure_groups(db)
    }
}

/// Every worker that took jobs or heartbeated and was not forgotten since, with the jobs it holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ListWorkers;

impl Read for ListWorkers {
    type Output = Vec<WorkerInfo>;

    fn read(&self, db: &Db<'_>, at: &ReadAt) -> Result<Self::Output> {
        crate::ops::workers::list(db, at.now)
    }
}

/// One recurring template, with its next and last runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GetRecurring {
    /// The template's key.
    pub key: String,
}

impl Read for GetRecurring {
    type Output = RecurringInfo;

    fn read(&self, db: &Db<'_>, _: &ReadAt) -> Result<Self::Output> {
        let key = crate::names::RecurringKey::parse(self.key.as_str())?;
        crate::ops::recurring::load_info(db, key.as_str())
    }
}

/// Every recurring template, by key, with its next and last runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ListRecurring;

impl Read for ListRecurring {
    type Output = Vec<RecurringInfo>;

    fn read(&self, db: &Db<'_>, _: &ReadAt) -> Result<Self::Output> {
        crate::ops::recurring::list_recurring(db)
    }
}

/// Every option that can change at run time, with the value in force, the value the queue was opened with, and
/// when it was set, if it was.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ListConfig;

impl Read for ListConfig {
    type Output = Vec<ConfigEntry>;

    fn read(&self, db: &Db<'_>, at: &ReadAt) -> Result<Self::Output> {
        Ok(RuntimeConfig::load(db, &at.defaults)?.entries())
    }
}

/// One option, as [`ListConfig`] shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GetConfig {
    /// The option.
    pub key: ConfigKey,
}

impl Read for GetConfig {
    type Output = ConfigEntry;

    fn read(&self, db: &Db<'_>, at: &ReadAt) -> Result<Self::Output> {
        let entries = RuntimeConfig::load(db, &at.defaults)?.entries();
        Ok(entries
            .into_iter()
            .find(|entry| entry.key == self.key)
            .expect("the options list every key"))
    }
}

/// A batch and its progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GetBatch {
    /// The batch.
    pub batch: BatchId,
}

impl Read for GetBatch {
    type Output = Batch;

    fn read(&self, db: &Db<'_>, _: &ReadAt) -> Result<Self::Output> {
        crate::ops::batches::load_batch(db, self.batch)
    }
}

/// A page of batches, newest first: what a [`BatchFilter`] answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchPage {
    /// The batches.
    pub batches: Vec<Batch>,
    /// The `before` of the next page, when this one is full.
    pub next: Option<BatchId>,
}

impl Read for BatchFilter {
    type Output = BatchPage;

    fn read(&self, db: &Db<'_>, _: &ReadAt) -> Result<Self::Output> {
        let batches = crate::ops::batches::list_batches(db, self)?;
        let full = batches.len() == self.limit as usize;
        let next = batches.last().filter(|_| full).map(|batch| batch.id);
        Ok(BatchPage { batches, next })
    }
}

impl Read for JobFilter {
    type Output = JobPage;

    fn read(&self, db: &Db<'_>, _: &ReadAt) -> Result<Self::Output> {
        self.run(db)
    }
}

impl Read for StatsQuery {
    type Output = Stats;

    fn read(&self, db: &Db<'_>, at: &ReadAt) -> Result<Self::Output> {
        crate::stats::read(db, self, at.now)
    }
}

/// Worker utilization over a period: busy time over the time each worker was there, per worker and per queue.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkerStatsQuery {
    /// The window.
    pub period: StatsPeriod,
}

impl Read for WorkerStatsQuery {
    type Output = WorkerStats;

    fn read(&self, db: &Db<'_>, at: &ReadAt) -> Result<Self::Output> {
        crate::stats::workers(db, self.period, at.now)
    }
}

impl Read for ActivityFilter {
    type Output = ActivityPage;

    fn read(&self, db: &Db<'_>, _: &ReadAt) -> Result<Self::Output> {
        crate::activity::list(db, self)
    }
}

/// A job with its history; with a `wait`, once it ended or as it stands when the wait runs out (see
/// [`Jobs::wait`](crate::Jobs::wait)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GetJob {
    /// The job.
    pub job: JobId,
    /// How long to wait for it to end, at most [`MAX_WAIT`](crate::MAX_WAIT); zero answers at once.
    pub wait: Duration,
}

impl GetJob {
    /// The job as it stands.
    pub fn new(job: JobId) -> GetJob {
        GetJob {
            job,
            wait: Duration::ZERO,
        }
    }
}

impl Request for GetJob {
    type Output = Job;

    fn run_on(self, queue: &Queue) -> BoxFuture<'_, Result<Job>> {
        Box::pin(async move {
            if self.wait.is_zero() {
                queue.load_job(self.job).await
            } else {
                queue.wait_until_ended(self.job, self.wait).await
            }
        })
    }
}

/// A dequeue may wait, parked in the writer, for a job to take.
impl Request for Dequeue {
    type Output = Vec<ClaimedJob>;

    fn run_on(self, queue: &Queue) -> BoxFuture<'_, Result<Self::Output>> {
        Box::pin(queue.take(self))
    }
}

/// Completes many jobs at once, each as its [`Finish`] would, in one transaction, each answered on its own; with
/// `take`, takes the worker's next jobs in the same transaction (see [`Jobs::finish_and_take`](crate::Jobs::finish_and_take)).
#[derive(Debug, Clone, PartialEq)]
pub struct FinishMany {
    /// The finishes, at most [`MAX_FINISH_MANY`](crate::MAX_FINISH_MANY).
    pub finishes: Vec<Finish>,
    /// The jobs to take, without a wait.
    pub take: Option<Dequeue>,
}

/// What a [`FinishMany`] did: each job's answer, in the request's order, and the jobs the take claimed. The two
/// parts succeed or fail apart: jobs taken are leased whatever became of the finishes.
#[derive(Debug)]
pub struct FinishedMany {
    /// Each job, with its answer.
    pub finished: Vec<(JobId, Result<()>)>,
    /// The jobs taken (none without a take), or why none could be.
    pub taken: Result<Vec<ClaimedJob>>,
}

impl Request for FinishMany {
    type Output = FinishedMany;

    fn run_on(self, queue: &Queue) -> BoxFuture<'_, Result<Self::Output>> {
        Box::pin(async move {
            let jobs: Vec<JobId> = self.finishes.iter().map(|f| f.job).collect();
            let (answers, taken) = match self.take {
                None => (queue.finish_all(self.finishes).await?, Ok(Vec::new())),
                Some(take) => {
                    let done = queue
                        .finish_all_and_take(self.finishes, take)
                        .await
                        .map_err(|e| match e.field() {
                            // A field of the take's, named as the request holds it: `take.limit`.
                            Some(field) if field != "finishes" => e.within("take"),
                            _ => e,
                        })?;
                    // An error that answered every finish (the queue closing) fails the request; jobs taken in
                    // the same moment stay leased until their lease expires.
                    (done.finished?, done.taken)
                }
            };
            Ok(FinishedMany {
                finished: jobs.into_iter().zip(answers).collect(),
                taken,
            })
        })
    }
}

/// One action over many jobs (see [`Jobs::bulk`](crate::Jobs::bulk)).
#[derive(Debug, Clone, PartialEq)]
pub struct Bulk {
    /// What to do to each job.
    pub action: BulkAction,
    /// Which jobs.
    pub selection: BulkSelection,
}

impl Request for Bulk {
    type Output = BulkOutcome;

    fn run_on(self, queue: &Queue) -> BoxFuture<'_, Result<Self::Output>> {
        Box::pin(queue.run_bulk(self.action, self.selection))
    }
}

impl Request for SqlQuery {
    type Output = SqlResult;

    fn run_on(self, queue: &Queue) -> BoxFuture<'_, Result<Self::Output>> {
        Box::pin(queue.run_sql(self))
    }
}

/// Whether the queue is open: it answers the engine's version while it is, and [`ErrorKind::Closed`] once it
/// closed.
///
/// [`ErrorKind::Closed`]: crate::ErrorKind::Closed
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Health;

impl Request for Health {
    type Output = String;

    fn run_on(self, queue: &Queue) -> BoxFuture<'_, Result<String>> {
        Box::pin(async move {
            if queue.inner.closed.load(Ordering::SeqCst) {
                return Err(Error::closed());
            }
            Ok(env!("CARGO_PKG_VERSION").to_owned())
        })
    }
}
