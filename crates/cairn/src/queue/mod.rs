//! [`Queue`]: the embedded engine's public API. Each method builds an operation and hands it to the writer thread
//! (writes) or the reader pool (reads); this file holds no SQL and no job logic.

mod backend;
mod open;
#[cfg(feature = "postgres")]
mod postgres_enqueue;
pub(crate) mod reads;
pub(crate) mod request;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use jiff::Timestamp;
#[cfg(feature = "sqlite")]
use rusqlite::Connection;
use serde_json::Value;
use tokio::sync::oneshot;

use crate::activity::{ActivityFilter, ActivityPage};
use crate::clock::{Clock, to_millis};
use crate::engine::{Command, ErasedOp, Pending, Waiter, Writer};
use crate::error::{Error, ErrorKind, Result};
use crate::job::{Job, JobState};
use crate::lease::Lease;
use crate::metrics::MetricsSnapshot;
use crate::names::JobId;
use crate::ops::aging::AgeQueue;
use crate::ops::batch_jobs::BatchId;
use crate::ops::batches::{Batch, BatchCreated, BatchFilter, CreateBatch};
use crate::ops::cancel::Cancel;
use crate::ops::checkpoint::Checkpoint;
use crate::ops::claim::{Claim, ClaimedJob, Dequeue};
use crate::ops::config::{
    ConfigEntry, ConfigKey, ConfigValue, Defaults, RuntimeConfig, SetConfig, UnsetConfig,
};
use crate::ops::delete::Delete;
use crate::ops::dependencies::ChangeDependencies;
use crate::ops::fail::Fail;
use crate::ops::failures::{FailureGroup, Unfail};
use crate::ops::finish::{Finish, FinishAndTake, MAX_FINISH_MANY};
use crate::ops::heartbeat::Heartbeat;
use crate::ops::push::{Enqueued, Push, PushBatch};
use crate::ops::queues::{
    LimitKeys, LimitQueue, PauseQueue, QueueStats, ResumeQueue, SettingsCache,
};
use crate::ops::rate_limit::{RateLimit, RateLimitQueue};
use crate::ops::recurring::{Recurring, RecurringInfo, RemoveRecurring, SetRecurring};
use crate::ops::release::Release;
use crate::ops::rename::Rename;
use crate::ops::requeue::Requeue;
use crate::ops::reschedule::Reschedule;
use crate::ops::retry::Retry;
use crate::ops::rows;
use crate::ops::set_data::SetData;
use crate::ops::set_priority::SetPriority;
use crate::ops::set_schedule::SetSchedule;
use crate::ops::tags::ChangeTags;
use crate::ops::track::{Track, Untrack};
use crate::ops::update::Update;
use crate::ops::workers::WorkerInfo;
use crate::ops::workers::WorkerStopped;
use crate::ops::{Limits, Operation, ReadyQueues, TokenSource, WriteCtx};
use crate::options::QueueOptions;
use crate::query::{JobFilter, JobPage};
use crate::sql::{SqlQuery, SqlResult};
use crate::stats::{Stats, StatsPeriod, StatsQuery, WorkerStats};
use crate::store::db::Db;
use crate::store::readers::Readers;
#[cfg(feature = "sqlite")]
use crate::store::sqlite::connection::{self, SqliteSettings};
use crate::store::sqlite::syncer::Syncer;
use crate::store::writer_db::WriterDb;
use request::Request;

/// A durable job queue, on a SQLite file or a PostgreSQL database. Cheap to clone: clones share one engine.
///
/// One process at a time may open a database as a queue (a lock file, `<path>-lock`, enforces it); the
/// application may still open its own connections to the same file (see [`Queue::enqueue_in`]).
#[derive(Clone)]
pub struct Queue {
    inner: Arc<Inner>,
}

struct Inner {
    commands: Sender<Command>,
    readers: Arc<Readers>,
    clock: Arc<dyn Clock>,
    /// The options the queue was opened with (those set at run time are in the database).
    defaults: Defaults,
    /// Counters and histograms since the queue opened.
    metrics: Arc<crate::metrics::Metrics>,
    /// Who waits for jobs to end ([`Queue::wait`]), woken by the writer.
    job_watch: Arc<crate::engine::JobWatch>,
    /// The event stream's tail ([`Queue::events`]).
    tail: Arc<crate::event_stream::Tail>,
    /// Turns for read-only SQL queries, so that they cannot take every blocking thread.
    sql_turns: tokio::sync::Semaphore,
    /// The SQLite file, or the PostgreSQL URL without its password.
    path: PathBuf,
    closed: AtomicBool,
    writer_thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// On PostgreSQL: the stop flag of the background threads (the one that hears the other nodes, the vacuum's),
    /// set when the queue closes or is dropped, and how to stop each and wait for it.
    stop_background: Arc<AtomicBool>,
    background: Mutex<Vec<Box<dyn FnOnce() + Send>>>,
    /// The PostgreSQL URL the queue is on (with its password); `None` on SQLite.
    postgres_url: Option<String>,
    /// On PostgreSQL, the URL's hosts, for sessions of its own (read-only SQL).
    #[cfg(feature = "postgres")]
    postgres_hosts: Option<Arc<crate::store::postgres::hosts::Hosts>>,
    /// Whether a syncer fsyncs before durable replies, and so may hold a worker's finishes for company.
    syncs: bool,
}

/// A database opened, before its writer starts.
struct Opened {
    db: WriterDb,
    syncer: Option<Syncer>,
    settings: SettingsCache,
    lock: Option<File>,
    readers: Readers,
    location: PathBuf,
    /// The PostgreSQL URL, password included.
    postgres_url: Option<String>,
    /// On PostgreSQL, the URL's hosts.
    #[cfg(feature = "postgres")]
    postgres_hosts: Option<Arc<crate::store::postgres::hosts::Hosts>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if !self.closed.load(Ordering::SeqCst) {
            tracing::warn!(path = %self.path.display(), "queue dropped without Queue::close; the writer stops now");
            self.stop_background.store(true, Ordering::SeqCst);
            // The writer holds a sender to itself (for the syncer), so it must be told to stop.
            let (ack, _) = oneshot::channel();
            let _ = self.commands.send(Command::Close(ack));
        }
    }
}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue")
            .field("path", &self.inner.path)
            .finish_non_exhaustive()
    }
}

impl Queue {
    /// Opens (creating if needed) the queue in the SQLite file at `path`, with default options.
    ///
    /// # Errors
    /// [`ErrorKind::Locked`] if another process has it open as a queue; [`ErrorKind::Storage`] if the file cannot
    /// be opened or migrated.
    pub async fn open(path: impl AsRef<Path>) -> Result<Queue> {
        Queue::open_with(path, QueueOptions::default()).await
    }

    /// Opens the queue at `path` with `options`. Jobs a dead process left running are recovered first (see
    /// [`RecoveryPolicy`](crate::RecoveryPolicy)).
    ///
    /// A `path` that is a PostgreSQL URL (`postgres://user@host/database`) opens the queue in that database
    /// instead: any number of processes, on any number of machines, may open the same one (see the README).
    ///
    /// # Errors
    /// As [`Queue::open`].
    pub async fn open_with(path: impl AsRef<Path>, options: QueueOptions) -> Result<Queue> {
        let path = path.as_ref().to_path_buf();
        let defaults = Defaults {
            limits: Limits {
                default_retry: options.default_retry,
                default_lease_timeout: options.default_lease_timeout,
                max_data_bytes: options.max_data_bytes,
            },
            retention: options.retention,
        };
        match path.to_str() {
            Some(url) if crate::store::location::is_postgres_url(url) => {
                open::postgres(url.to_owned(), options, defaults).await
            }
            _ => open::sqlite(path, options, defaults).await,
        }
    }

    /// Starts the writer on an opened database.
    async fn start(opened: Opened, options: QueueOptions, defaults: Defaults) -> Result<Queue> {
        let clock = options.clock.clone();
        let (commands, rx) = mpsc::channel();
        let metrics = Arc::new(crate::metrics::Metrics::default());
        let job_watch = Arc::new(crate::engine::JobWatch::default());
        let tail = crate::event_stream::Tail::new();
        let wake = commands.clone();
        let postgres = opened.readers.is_postgres();
        let syncs = opened.syncer.is_some();
        let writer = Writer {
            settings: opened.settings,
            db: opened.db,
            clock: clock.clone(),
            rx,
            max_batch: options.max_batch.max(1),
            parked: Default::default(),
            tokens: TokenSource::new(),
            rotation: 0,
            syncer: opened.syncer,
            returned: Default::default(),
            wake,
            // Due at once: the first batch looks for anything that came due while the queue was closed.
            next_due: Some(i64::MIN),
            told_due: None,
            next_prune: to_millis(clock.now()),
            drain: crate::engine::Drain::default(),
            ended_since_pass: 0,
            timed_backoff: None,
            last_batch_at: to_millis(clock.now()),
            pause_until: None,
            metrics: metrics.clone(),
            job_watch: job_watch.clone(),
            tail: tail.clone(),
            to_release: Vec::new(),
            // A SQLite file has one process, which does its timed work; a PostgreSQL node asks for the lead.
            lead: if postgres {
                crate::engine::Lead::elected()
            } else {
                crate::engine::Lead::Always
            },
            _lock: opened.lock,
        };
        let thread = std::thread::Builder::new()
            .name("cairn-writer".into())
            .spawn(move || writer.run())
            .map_err(|e| Error::storage("starting the writer thread", e))?;
        let inner = Arc::new(Inner {
            commands,
            readers: Arc::new(opened.readers),
            clock: clock.clone(),
            defaults,
            metrics,
            job_watch,
            tail,
            sql_turns: tokio::sync::Semaphore::new(crate::sql::CONCURRENT_QUERIES),
            path: opened.location,
            closed: AtomicBool::new(false),
            writer_thread: Mutex::new(Some(thread)),
            stop_background: Arc::new(AtomicBool::new(false)),
            background: Mutex::new(Vec::new()),
            postgres_url: opened.postgres_url,
            #[cfg(feature = "postgres")]
            postgres_hosts: opened.postgres_hosts,
            syncs,
        });
        let weak = Arc::downgrade(&inner);
        clock.on_jump(Box::new(move || tick(&weak)));
        let queue = Queue { inner };
        // A first round trip: recovery has run and the writer works before open returns.
        queue.write(Barrier).await?;
        Ok(queue)
    }

    /// The file the queue lives in; for a queue on PostgreSQL, its URL without the password.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Whether the queue is on PostgreSQL.
    pub fn is_postgres(&self) -> bool {
        self.inner.postgres_url.is_some()
    }

    /// Refuses what only a queue on a SQLite file can do.
    fn sqlite_only(&self, what: &str) -> Result<()> {
        if self.is_postgres() {
            return Err(Error::new(
                ErrorKind::InvalidState,
                format!("{what} needs a queue on a SQLite file; this one is on PostgreSQL"),
            ));
        }
        Ok(())
    }

    /// The current time, as the queue's clock reads it.
    pub fn now(&self) -> Timestamp {
        self.inner.clock.now()
    }

    /// Runs a request: any operation's struct ([`Request`] lists what answers it). The named methods are shorthand
    /// for the requests a program makes most.
    ///
    /// # Errors
    /// The request's own: [`ErrorKind::InvalidInput`] naming a bad field, [`ErrorKind::NotFound`], and so on.
    pub async fn run<R: Request>(&self, request: R) -> Result<R::Output> {
        request.run_on(self).await
    }

    pub(crate) async fn write<O: Operation>(&self, op: O) -> Result<O::Output> {
        let (reply, answer) = oneshot::channel();
        self.send(Command::Op(Pending::new(op, reply)))?;
        answer.await.map_err(|_| writer_stopped())?
    }

    fn send(&self, command: Command) -> Result<()> {
        if self.inner.closed.load(Ordering::SeqCst) {
            return Err(Error::closed());
        }
        self.inner
            .commands
            .send(command)
            .map_err(|_| writer_stopped())
    }

    /// Enqueues one job. With a unique key that a live job holds, returns that job instead (`existing: true`).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] naming the bad field; nothing is written.
    pub async fn enqueue(&self, push: Push) -> Result<Enqueued> {
        self.write(push).await
    }

    /// Enqueues many jobs in one transaction: all of them, or none if any is invalid (the error names its index).
    ///
    /// # Errors
    /// As [`Queue::enqueue`].
    pub async fn enqueue_batch(&self, jobs: Vec<Push>) -> Result<Vec<Enqueued>> {
        self.write(PushBatch { jobs }).await
    }

    #[cfg(feature = "sqlite")]
    /// Enqueues a job inside the application's own transaction on the same database file: the job exists if and
    /// only if that transaction commits.
    ///
    /// `conn` must be inside a transaction (for example a [`rusqlite::Transaction`]). Waiting workers are woken
    /// when it commits if the connection came from [`Queue::connect`] or went through [`Queue::attach`]; for any
    /// other connection, call [`Queue::wake`] after the commit.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] for a bad job or a connection outside a transaction; storage errors from `conn`.
    pub fn enqueue_in(&self, conn: &Connection, push: &Push) -> Result<Enqueued> {
        self.sqlite_only("enqueue_in")?;
        if conn.is_autocommit() {
            return Err(Error::invalid(
                "conn",
                "must be inside a transaction (use Connection::transaction)",
            ));
        }
        let mut ready = ReadyQueues::default();
        let mut tokens = TokenSource::new();
        let mut rotation = 0;
        // The queue's settings and options in force, read in the application's transaction.
        let db = Db::Sqlite(conn);
        let mut settings = SettingsCache::load(&db, &self.inner.defaults)?;
        let mut events = crate::ops::events::EventLog::default();
        let mut ctx = WriteCtx {
            db,
            events: &mut events,
            now_ms: to_millis(self.inner.clock.now()),
            ready: &mut ready,
            tokens: &mut tokens,
            rotation: &mut rotation,
            settings: &mut settings,
        };
        // The writer learns that a queue holds keyed jobs when it marks it; it cannot learn it from this connection.
        if push.concurrency.is_some() && !ctx.settings.get(push.queue.as_str()).keyed {
            return Err(Error::invalid(
                "concurrency",
                format!(
                    "queue {:?} has held no job with a concurrency key yet: push its first keyed job with \
                     Queue::enqueue, or set its limit per key (Queue::limit_keys), before enqueue_in",
                    push.queue
                ),
            ));
        }
        let enqueued = crate::ops::push::insert(push, &mut ctx)?;
        ctx.events.flush(&ctx.db, None)?;
        Ok(enqueued)
    }

    #[cfg(feature = "sqlite")]
    /// Opens a new read-write connection to the queue's file for the application's own tables and
    /// [`Queue::enqueue_in`], set up as by [`Queue::attach`].
    ///
    /// # Errors
    /// Storage errors.
    pub fn connect(&self) -> Result<Connection> {
        self.sqlite_only("connect")?;
        let mut conn = Connection::open(&self.inner.path)
            .map_err(|e| Error::storage(format!("opening {}", self.inner.path.display()), e))?;
        self.attach(&mut conn)?;
        Ok(conn)
    }

    #[cfg(feature = "sqlite")]
    /// Sets up an application connection to the queue's file: a busy timeout (so it waits for the queue's writer
    /// instead of failing), foreign keys, and a commit hook that wakes waiting workers after each commit. The hook
    /// replaces any commit hook the application set.
    ///
    /// # Errors
    /// Storage errors.
    pub fn attach(&self, conn: &mut Connection) -> Result<()> {
        self.sqlite_only("attach")?;
        connection::apply_common(conn)?;
        let weak = Arc::downgrade(&self.inner);
        conn.commit_hook(Some(move || {
            tick(&weak);
            false
        }))?;
        Ok(())
    }

    /// Tells the queue that jobs were committed by a connection it does not watch, so waiting workers look again.
    pub fn wake(&self) {
        let _ = self.send(Command::Tick);
    }

    /// Takes up to `request.limit` ready jobs, leased to `request.worker`. With a `wait`, blocks until a matching
    /// job is ready (returning at once when it is) or the wait ends (returning no job).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] naming the bad field.
    pub async fn dequeue(&self, request: Dequeue) -> Result<Vec<ClaimedJob>> {
        let claim = request.validate()?;
        self.claim(claim, request.wait).await
    }

    /// Runs a validated dequeue.
    async fn claim(&self, claim: Claim, wait: Duration) -> Result<Vec<ClaimedJob>> {
        let deadline = if wait.is_zero() {
            None
        } else {
            Some(Instant::now() + wait)
        };
        let (reply, answer) = oneshot::channel();
        self.send(Command::Dequeue(Waiter {
            claim,
            deadline,
            reply,
        }))?;
        let mut pending = PendingDequeue {
            answer: Some(answer),
            queue: self,
        };
        let answer = pending.answer.as_mut().expect("set just above").await;
        pending.answer = None;
        answer.map_err(|_| writer_stopped())?
    }

    /// Extends a lease (to a full lease timeout from now), optionally reporting progress. Returns the new expiry.
    ///
    /// # Errors
    /// [`ErrorKind::LeaseLost`] if the lease is no longer valid.
    pub async fn heartbeat(&self, lease: &Lease, progress: Option<Value>) -> Result<Timestamp> {
        self.write(Heartbeat {
            progress,
            ..Heartbeat::new(lease)
        })
        .await
    }

    /// Saves `data` as what the next attempt starts from, and extends the lease. Returns the new expiry.
    ///
    /// # Errors
    /// [`ErrorKind::LeaseLost`]; [`ErrorKind::InvalidInput`] for oversized data.
    pub async fn checkpoint(&self, lease: &Lease, data: Value) -> Result<Timestamp> {
        self.write(Checkpoint::new(lease, data)).await
    }

    /// Records progress for queries to show.
    ///
    /// # Errors
    /// [`ErrorKind::LeaseLost`]; [`ErrorKind::InvalidInput`] for oversized progress.
    pub async fn update(&self, lease: &Lease, progress: Value) -> Result<()> {
        self.write(Update::new(lease, progress)).await
    }

    /// Completes the job, optionally replacing its data with a result.
    ///
    /// # Errors
    /// [`ErrorKind::LeaseLost`] if the lease is no longer valid; nothing changes then.
    pub async fn finish(&self, lease: &Lease, data: Option<Value>) -> Result<()> {
        self.write(Finish {
            data,
            ..Finish::new(lease)
        })
        .await
    }

    /// Reports a transient error: the job runs again after its backoff (or `delay`), or fails when it has no
    /// attempts left. Returns its new state.
    ///
    /// # Errors
    /// [`ErrorKind::LeaseLost`] if the lease is no longer valid.
    pub async fn retry(
        &self,
        lease: &Lease,
        error: &str,
        delay: Option<Duration>,
    ) -> Result<JobState> {
        self.write(Retry {
            delay,
            ..Retry::new(lease, error)
        })
        .await
    }

    /// Fails the job for good, with a failure group and a message.
    ///
    /// # Errors
    /// [`ErrorKind::LeaseLost`]; [`ErrorKind::InvalidInput`] for an empty or overlong group.
    pub async fn fail(&self, lease: &Lease, group: &str, message: &str) -> Result<()> {
        self.write(Fail::new(lease, group, message)).await
    }

    /// [`Queue::finish`] with every field of [`Finish`], such as the attempt's measured [`RunUsage`](crate::RunUsage).
    ///
    /// # Errors
    /// As [`Queue::finish`].
    pub async fn finish_with(&self, finish: Finish) -> Result<()> {
        self.write(finish).await
    }

    /// Completes many jobs at once, each as [`Queue::finish_with`] would: for a worker that reports several jobs
    /// together. They reach the writer together, so they share one transaction (and on PostgreSQL, the plain ones
    /// share its statements). Each gets its own answer, in order: a lost lease refuses only its own job.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] (field `finishes`) for more than [`MAX_FINISH_MANY`] jobs, and nothing is
    /// written; a closed queue's errors. Each job's own error (such as [`ErrorKind::LeaseLost`]) is in its answer.
    pub async fn finish_many(&self, finishes: Vec<Finish>) -> Result<Vec<Result<()>>> {
        self.finish_many_sent(finishes, Command::Ops).await
    }

    /// [`Queue::finish_many`] for a [`Worker`](crate::Worker), whose slots are free before the answers come: the
    /// fsync may be held for a moment (at most a millisecond) so that more finishes share it. `taken` is answered
    /// as the writer takes the finishes into a batch.
    pub(crate) async fn finish_many_unhurried(
        &self,
        finishes: Vec<Finish>,
        taken: oneshot::Sender<()>,
    ) -> Result<Vec<Result<()>>> {
        self.finish_many_sent(finishes, |ops| Command::UnhurriedOps(ops, taken))
            .await
    }

    /// Whether [`Queue::finish_many_unhurried`] may hold finishes for company: on SQLite with
    /// [`Durability::Full`](crate::Durability::Full).
    pub(crate) fn holds_finishes_for_company(&self) -> bool {
        self.inner.syncs
    }

    async fn finish_many_sent(
        &self,
        finishes: Vec<Finish>,
        command: impl FnOnce(Vec<Box<dyn ErasedOp>>) -> Command,
    ) -> Result<Vec<Result<()>>> {
        check_finish_count(finishes.len())?;
        if finishes.is_empty() {
            return Ok(Vec::new());
        }
        let mut ops: Vec<Box<dyn ErasedOp>> = Vec::with_capacity(finishes.len());
        let mut answers = Vec::with_capacity(finishes.len());
        for finish in finishes {
            let (reply, answer) = oneshot::channel();
            ops.push(Pending::new(finish, reply));
            answers.push(answer);
        }
        self.send(command(ops))?;
        let mut results = Vec::with_capacity(answers.len());
        for answer in answers {
            results.push(answer.await.map_err(|_| writer_stopped())?);
        }
        Ok(results)
    }

    /// Completes `finishes` as [`Queue::finish_many`] does, then takes jobs as [`Queue::dequeue`] does with `take`,
    /// which does not wait: a worker reports the jobs that ended and takes its next ones in one call. Both reach
    /// the writer together, the finishes first, so they share a transaction (and its fsync) when the writer takes
    /// them in one batch, and the take sees the room the finishes made (a queue's concurrency limit). The jobs
    /// come back once the finishes are durable.
    ///
    /// # Errors
    /// The call is refused whole, with nothing done, as either part would refuse it: [`ErrorKind::InvalidInput`]
    /// for more than [`MAX_FINISH_MANY`] finishes (field `finishes`), a take that waits (field `wait`), or a bad
    /// field of the take. Everything else is in the answer's two parts.
    pub async fn finish_and_take(
        &self,
        finishes: Vec<Finish>,
        take: Dequeue,
    ) -> Result<FinishAndTake> {
        check_finish_count(finishes.len())?;
        if !take.wait.is_zero() {
            return Err(Error::invalid(
                "wait",
                format!(
                    "must be 0 in a take that goes with finishes, got {:?}: a long poll would hold back their answers",
                    take.wait
                ),
            ));
        }
        let claim = take.validate()?;
        // Polled in this order, each sends its command before the other is polled: the finishes reach the writer
        // first.
        let (finished, taken) = tokio::join!(
            self.finish_many(finishes),
            self.claim(claim, Duration::ZERO)
        );
        Ok(FinishAndTake { finished, taken })
    }

    /// [`Queue::retry`] with every field of [`Retry`].
    ///
    /// # Errors
    /// As [`Queue::retry`].
    pub async fn retry_with(&self, retry: Retry) -> Result<JobState> {
        self.write(retry).await
    }

    /// [`Queue::fail`] with every field of [`Fail`].
    ///
    /// # Errors
    /// As [`Queue::fail`].
    pub async fn fail_with(&self, fail: Fail) -> Result<()> {
        self.write(fail).await
    }

    /// Gives the job back to its queue at once, without counting the attempt (for a worker shutting down).
    ///
    /// # Errors
    /// [`ErrorKind::LeaseLost`] if the lease is no longer valid.
    pub async fn release(&self, lease: &Lease) -> Result<()> {
        self.write(Release::new(lease)).await
    }

    /// Cancels a job that has not finished; a running job's worker is refused from then on.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`]; [`ErrorKind::InvalidState`] for a completed or failed job.
    pub async fn cancel(&self, job: JobId) -> Result<()> {
        self.write(Cancel { job }).await
    }

    /// Deletes a job and its history.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`].
    pub async fn delete(&self, job: JobId) -> Result<()> {
        self.write(Delete { job }).await
    }

    /// Runs a job again with a fresh count of attempts, whatever became of it: a failed, cancelled or completed job
    /// goes back to its queue, a waiting one moves to `run_at` (now when `None`), a running one is taken from its
    /// worker. Returns its new state.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`]; [`ErrorKind::InvalidState`] when another live job holds its unique key.
    pub async fn requeue(&self, job: JobId, run_at: Option<Timestamp>) -> Result<JobState> {
        self.write(Requeue { job, run_at }).await
    }

    /// Adds and removes dependencies of a job that has not started (see [`ChangeDependencies`]). Returns its new
    /// state: `waiting` while a dependency has not completed.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`]; [`ErrorKind::InvalidState`] for a job that started or ended, a cancelled
    /// dependency, or a cycle; [`ErrorKind::InvalidInput`] on `depends_on` for a job that does not exist.
    pub async fn change_dependencies(&self, change: ChangeDependencies) -> Result<JobState> {
        self.write(change).await
    }

    /// Tracks a job (listed by `JobFilter::tracked`), or stops tracking it.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`].
    pub async fn track(&self, job: JobId, tracked: bool) -> Result<()> {
        match tracked {
            true => self.write(Track { job }).await,
            false => self.write(Untrack { job }).await,
        }
    }

    /// Every worker that took jobs or heartbeated and was not forgotten since (see
    /// [`QueueOptions::worker_max_age`](crate::QueueOptions)), with the jobs it holds and which of them stalled.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn workers(&self) -> Result<Vec<WorkerInfo>> {
        let now = crate::clock::to_millis(self.now());
        self.inner
            .readers
            .read(move |conn| crate::ops::workers::list(conn, now))
            .await
    }

    /// Adds and removes a job's tags, whatever its state.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`]; [`ErrorKind::InvalidInput`] on `tags` for a bad tag.
    pub async fn change_tags(&self, change: ChangeTags) -> Result<()> {
        self.write(change).await
    }

    /// Puts the oldest failed jobs of a failure group back in a queue, in one statement (see [`Unfail`]).
    /// Returns how many moved.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] on `group`, `queue` or `limit`.
    pub async fn unfail(&self, unfail: Unfail) -> Result<u64> {
        self.write(unfail).await
    }

    /// The failure groups that hold failed jobs, with their counts; `JobFilter::failure_group` lists a group's
    /// jobs.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn failure_groups(&self) -> Result<Vec<FailureGroup>> {
        self.inner
            .readers
            .read(crate::ops::failures::failure_groups)
            .await
    }

    /// Pauses a queue (it hands out nothing; everything else works) or resumes it.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] on `queue`.
    pub async fn pause_queue(&self, queue: &str, paused: bool) -> Result<()> {
        match paused {
            true => {
                self.write(PauseQueue {
                    queue: queue.to_owned(),
                })
                .await
            }
            false => {
                self.write(ResumeQueue {
                    queue: queue.to_owned(),
                })
                .await
            }
        }
    }

    /// Sets a queue's concurrency limit across all workers (see [`LimitQueue`]), or removes it with `None`.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] on `queue` or `concurrency` (0: pause the queue instead).
    pub async fn limit_queue(&self, queue: &str, concurrency: Option<u32>) -> Result<()> {
        self.write(LimitQueue {
            queue: queue.to_owned(),
            concurrency,
        })
        .await
    }

    /// Sets a queue's limit per concurrency key: at most `limit` of its jobs with one key run at once, across all
    /// workers and nodes, unless a job carries its own limit (see [`Concurrency`](crate::Concurrency)); `None`
    /// removes it. Claims pass over a key at its limit, and waiting workers get its next job as soon as one of its
    /// jobs ends.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] on `limit` when it is 0 or above
    /// [`MAX_KEY_CONCURRENCY`](crate::MAX_KEY_CONCURRENCY).
    pub async fn limit_keys(&self, queue: &str, limit: Option<u32>) -> Result<()> {
        self.write(LimitKeys {
            queue: queue.to_owned(),
            limit,
        })
        .await
    }

    /// Sets or removes a concurrency key's weight in a queue: a key of weight N takes up to N jobs per turn where
    /// the others take one (see [`WeighKey`](crate::WeighKey)); `None` goes back to 1.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] on `key` or `weight` (1 to
    /// [`MAX_KEY_WEIGHT`](crate::MAX_KEY_WEIGHT)).
    pub async fn weigh_key(&self, queue: &str, key: &str, weight: Option<u32>) -> Result<()> {
        self.write(crate::ops::queues::WeighKey {
            queue: queue.to_owned(),
            key: key.to_owned(),
            weight,
        })
        .await
    }

    /// Sets a queue's rate limit: at most `rate.jobs` of its jobs start per `rate.per`, across all workers; `None`
    /// removes it. Waiting workers get a job as soon as the limit allows.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] on `queue`, `rate.jobs` (0) or `rate.per` (1 ms to a year).
    pub async fn rate_limit_queue(&self, queue: &str, rate: Option<RateLimit>) -> Result<()> {
        self.write(RateLimitQueue {
            queue: queue.to_owned(),
            rate,
        })
        .await
    }

    /// The activity log, newest first: every job and worker transition, filtered by job, worker, queue and time.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] on `limit` or a `since` after `until`; storage errors.
    pub async fn activity(&self, filter: ActivityFilter) -> Result<ActivityPage> {
        self.inner
            .readers
            .read(move |conn| crate::activity::list(conn, &filter))
            .await
    }

    /// Statistics over the last hour, day or week, for every queue and name or one of each: counts, wait, run
    /// and service times with their histograms, and a series of points for graphs.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn stats(&self, query: StatsQuery) -> Result<Stats> {
        let now = crate::clock::to_millis(self.now());
        self.inner
            .readers
            .read(move |conn| crate::stats::read(conn, &query, now))
            .await
    }

    /// Worker utilization over the last hour, day or week (kept per clock hour): per worker and per queue, busy
    /// time over the time the workers were there.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn worker_stats(&self, period: StatsPeriod) -> Result<WorkerStats> {
        let now = crate::clock::to_millis(self.now());
        self.inner
            .readers
            .read(move |conn| crate::stats::workers(conn, period, now))
            .await
    }

    /// Runs one read-only SQL statement over the queue's database (see [`SqlQuery`]): the tables, and the
    /// documented views `cairn_jobs`, `cairn_attempts`, `cairn_activity`, `cairn_stats_minute`,
    /// `cairn_stats_hour` and `cairn_workers`. Anything but a read is refused, and a query stops at its time
    /// limit; it never blocks the queue's writes.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] on `query` (not a read, not one statement, SQLite's own complaint, or too slow),
    /// `limit` or `timeout`.
    pub async fn sql(&self, query: SqlQuery) -> Result<SqlResult> {
        let _turn = self
            .inner
            .sql_turns
            .acquire()
            .await
            .map_err(|_| Error::closed())?;
        let path = self.inner.path.clone();
        let url = self.inner.postgres_url.clone();
        #[cfg(feature = "postgres")]
        let hosts = self.inner.postgres_hosts.clone();
        tokio::task::spawn_blocking(move || match url {
            #[cfg(feature = "postgres")]
            Some(_) => crate::store::postgres::sql::run(
                hosts.as_ref().expect("a queue on PostgreSQL has its hosts"),
                &query,
            ),
            #[cfg(feature = "sqlite")]
            None => crate::store::sqlite::sql::run(&path, &query),
            #[allow(unreachable_patterns)]
            _ => unreachable!(
                "a queue is open only on a backend this build has ({path:?}, {query:?})"
            ),
        })
        .await
        .map_err(|e| {
            Error::new(
                ErrorKind::Storage,
                format!("the query's thread failed: {e}"),
            )
        })?
    }

    /// Counters and histograms of job transitions, wait and run times since the queue opened, per queue and job
    /// name: what a Prometheus scrape reads. They start from zero at every open (see [`Queue::stats`] for the
    /// statistics kept in the database).
    pub fn metrics(&self) -> MetricsSnapshot {
        self.inner.metrics.snapshot()
    }

    /// Says that `worker` stops (the activity log shows it; it is not counted as lost). Its next dequeue starts it
    /// again.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] on `worker`.
    pub async fn worker_stopped(&self, worker: &str) -> Result<()> {
        self.write(WorkerStopped {
            worker: worker.to_owned(),
        })
        .await
    }

    /// Every option that can change at run time, with the value in force, the value the queue was opened with,
    /// and when it was set, if it was.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn config(&self) -> Result<Vec<ConfigEntry>> {
        let defaults = self.inner.defaults.clone();
        self.inner
            .readers
            .read(move |conn| Ok(RuntimeConfig::load(conn, &defaults)?.entries()))
            .await
    }

    /// Sets an option at run time (see [`SetConfig`]): stored in the database, so it outlives restarts and wins
    /// over the value the queue is opened with. Returns the option as it now is.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] naming the key, when the value is of the wrong kind, out of range, or would
    /// make the default retry policy invalid (an initial delay above the maximum, for one).
    pub async fn set_config(&self, key: ConfigKey, value: ConfigValue) -> Result<ConfigEntry> {
        self.write(SetConfig { key, value }).await
    }

    /// Goes back to the value the queue was opened with. Returns the option as it now is.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] when the value it was opened with does not fit with the others set at run
    /// time (the retry policy).
    pub async fn unset_config(&self, key: ConfigKey) -> Result<ConfigEntry> {
        self.write(UnsetConfig { key }).await
    }

    /// Turns priority aging on for a queue, or off with `None`: a ready job gains one priority point for every
    /// `every` it waits, so a steady stream of high-priority jobs cannot starve the low ones (see [`AgeQueue`]).
    /// Applies at once to the queue's jobs; changing it reads every job, so it is for an operator, not a loop.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] on `queue` or `every` ([`MIN_AGING_STEP`](crate::MIN_AGING_STEP) to
    /// [`MAX_AGING_STEP`](crate::MAX_AGING_STEP)).
    pub async fn age_queue(&self, queue: &str, every: Option<Duration>) -> Result<()> {
        self.write(AgeQueue {
            queue: queue.to_owned(),
            every,
        })
        .await
    }

    /// Every queue that has jobs or settings, with its jobs counted by state (`stalled`: running jobs whose lease
    /// ran out and that were not retried yet) and whether it is paused. Reads every job: for operators, not for a
    /// hot path.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn queue_stats(&self) -> Result<Vec<QueueStats>> {
        let now = crate::clock::to_millis(self.now());
        self.inner
            .readers
            .read(move |conn| crate::ops::queues::queue_stats(conn, now))
            .await
    }

    /// The next `limit` jobs a worker taking from `queue` would get, in that order, without taking them (none
    /// while the queue is paused).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] on `queue` or `limit`.
    pub async fn peek(&self, queue: &str, limit: u32) -> Result<Vec<Job>> {
        let queue = queue.to_owned();
        self.inner
            .readers
            .read(move |conn| crate::query::peek(conn, &queue, limit))
            .await
    }

    /// Replaces the data of a job that is not running.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`]; [`ErrorKind::InvalidState`] for a running job; [`ErrorKind::InvalidInput`] for
    /// oversized data.
    pub async fn set_data(&self, job: JobId, data: Value) -> Result<()> {
        self.write(SetData { job, data }).await
    }

    /// Renames a job, whatever its state (a running job's worker is unaffected: names matter when jobs are taken).
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`]; [`ErrorKind::InvalidInput`] for a bad name.
    pub async fn rename(&self, job: JobId, name: &str) -> Result<()> {
        self.write(Rename {
            job,
            name: name.to_owned(),
        })
        .await
    }

    /// Sets a job's schedule (a repeat spec or a cron expression in `time_zone`), or removes it with `None`; it
    /// decides the next run when the current one ends.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`]; [`ErrorKind::InvalidInput`] on `schedule` or `time_zone`.
    pub async fn set_schedule(
        &self,
        job: JobId,
        schedule: Option<&str>,
        time_zone: Option<&str>,
    ) -> Result<()> {
        self.write(SetSchedule {
            job,
            schedule: schedule.map(str::to_owned),
            time_zone: time_zone.map(str::to_owned),
        })
        .await
    }

    /// Changes the priority of a job that has not finished.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`]; [`ErrorKind::InvalidState`] for a finished job.
    pub async fn set_priority(&self, job: JobId, priority: i32) -> Result<()> {
        self.write(SetPriority { job, priority }).await
    }

    /// Moves a scheduled or queued job's run time. Returns its new state.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`]; [`ErrorKind::InvalidState`] for other states.
    pub async fn reschedule(&self, job: JobId, run_at: Timestamp) -> Result<JobState> {
        self.write(Reschedule { job, run_at }).await
    }

    /// Creates or replaces a recurring template: at every slot of its cron schedule, the queue creates its job, due
    /// at the slot, exactly once per slot (see [`MissedSlots`](crate::MissedSlots) for slots that pass unseen).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] naming the bad field (`key`, `cron`, `time_zone`, or the job's).
    pub async fn set_recurring(&self, recurring: Recurring) -> Result<RecurringInfo> {
        self.write(SetRecurring { recurring }).await
    }

    /// Removes a recurring template; the jobs it already created stay.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`].
    pub async fn remove_recurring(&self, key: &str) -> Result<()> {
        self.write(RemoveRecurring {
            key: key.to_owned(),
        })
        .await
    }

    /// Creates a batch of jobs with callbacks (see [`CreateBatch`]): a group whose `on_complete` job is pushed
    /// once every job has ended, and `on_success` once every job has completed. Not to be confused with
    /// [`Queue::enqueue_batch`], many jobs in one transaction and nothing more.
    ///
    /// # Errors
    /// As [`Queue::enqueue_batch`] for the jobs (named `jobs[i].…`); [`ErrorKind::InvalidInput`] naming
    /// `description`, or a callback's field (`on_success.data`).
    pub async fn create_batch(&self, batch: CreateBatch) -> Result<BatchCreated> {
        self.write(batch).await
    }

    /// A batch and its progress.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`].
    pub async fn batch(&self, id: BatchId) -> Result<Batch> {
        self.inner
            .readers
            .read(move |db| crate::ops::batches::load_batch(db, id))
            .await
    }

    /// Batches, newest first (see [`BatchFilter`]).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] naming `limit`.
    pub async fn batches(&self, filter: BatchFilter) -> Result<Vec<Batch>> {
        self.inner
            .readers
            .read(move |db| crate::ops::batches::list_batches(db, &filter))
            .await
    }

    /// The recurring templates, by key, with their next and last runs.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn recurring(&self) -> Result<Vec<RecurringInfo>> {
        self.inner
            .readers
            .read(crate::ops::recurring::list_recurring)
            .await
    }

    /// Everything about one job, its history included.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`].
    pub async fn get(&self, job: JobId) -> Result<Job> {
        self.inner
            .readers
            .read(move |conn| rows::load_job_with_history(conn, job))
            .await
    }

    /// Waits until the job ends (completed, failed or cancelled), at most `timeout`, and returns it as
    /// [`Queue::get`] does: with its [`result`](Job::result) or its error, and its history. At the timeout it
    /// returns the job as it stands, whose state then says it has not ended. No polling: the commit that ends the
    /// job wakes the wait (once durable), on PostgreSQL whichever node ends it.
    ///
    /// A recurring job's run ending does not end the job, which is scheduled again: a wait for it returns at the
    /// timeout.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`] if there is no such job (or it was deleted meanwhile); [`ErrorKind::InvalidInput`]
    /// (field `wait`) for a timeout over [`MAX_WAIT`](crate::MAX_WAIT); [`ErrorKind::Closed`] once the queue
    /// closes, which ends every wait; storage errors.
    pub async fn wait(&self, job: JobId, timeout: Duration) -> Result<Job> {
        if timeout > crate::ops::claim::MAX_WAIT {
            return Err(Error::invalid(
                "wait",
                format!(
                    "must be at most {:?}, got {timeout:?}",
                    crate::ops::claim::MAX_WAIT
                ),
            ));
        }
        let deadline = tokio::time::Instant::now() + timeout;
        let watch = self.inner.job_watch.watch(job.0);
        // On PostgreSQL another node may end the job: the wait is registered in the database too, until a minute
        // past its time (a node that stops without taking it back leaves it that long).
        let registered = self.inner.readers.is_postgres().then(|| {
            let until = to_millis(self.inner.clock.now()) + timeout.as_millis() as i64 + 60_000;
            crate::ops::watch::WatchJob {
                job,
                until_ms: until,
            }
        });
        // Takes the registration back however the wait ends, a caller that stops waiting (a client gone) included.
        let mut unwatch = Unwatch {
            queue: self,
            job,
            waiter: None,
        };
        let waited = async {
            let mut register = registered;
            loop {
                let woken = watch.notify.notified();
                tokio::pin!(woken);
                // Enabled before the job is read: an end committed after the read wakes it.
                woken.as_mut().enable();
                if self.inner.job_watch.is_closed() {
                    return Err(Error::closed());
                }
                if let Some(op) = register.take() {
                    let registered = self.write(op).await?;
                    unwatch.waiter = registered.map(|(_, waiter)| waiter);
                    match registered {
                        None => return Err(Error::not_found(format!("job {job}"))),
                        Some((state, _)) if state.is_live() => {}
                        Some(_) => return self.get(job).await,
                    }
                } else {
                    let current = self.get(job).await?;
                    if current.state.is_finished() || tokio::time::Instant::now() >= deadline {
                        return Ok(current);
                    }
                }
                tokio::select! {
                    () = &mut woken => {}
                    () = tokio::time::sleep_until(deadline) => return self.get(job).await,
                }
            }
        }
        .await;
        drop(unwatch);
        waited
    }

    /// Follows the activity log as it is written: each event the filter lets through, in the log's order, from the
    /// next one committed (`EventsFrom::Now`) or from the one after an id (`EventsFrom::After`, to resume: every
    /// event still retained after it, then on). No polling on SQLite; on PostgreSQL other nodes' events are looked
    /// for every quarter of a second while someone follows. See [`Events`](crate::Events).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] naming `name` for a bad GLOB; [`ErrorKind::Closed`] after close; storage errors.
    pub async fn events(
        &self,
        from: crate::EventsFrom,
        filter: crate::EventFilter,
    ) -> Result<crate::Events> {
        if self.inner.closed.load(Ordering::SeqCst) {
            return Err(Error::closed());
        }
        let log = Arc::downgrade(&self.inner.readers);
        crate::event_stream::start(
            &self.inner.tail,
            log.clone(),
            self.inner.readers.is_postgres(),
        )
        .await?;
        crate::Events::new(self.inner.tail.clone(), log, from, filter).await
    }

    /// The lease a running job is held under, token included; `None` when it is not running.
    ///
    /// For a server layer that holds leases on behalf of clients whose protocol has none (the Bedrock protocol),
    /// and that must find them again after a restart. Hand a lease only to the job's own worker: its token is what
    /// lets a caller finish the job.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn lease(&self, job: JobId) -> Result<Option<Lease>> {
        self.inner
            .readers
            .read(move |conn| rows::load_lease(conn, job))
            .await
    }

    /// Lists jobs, newest first, a page at a time.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] naming a bad filter field.
    pub async fn list(&self, filter: JobFilter) -> Result<JobPage> {
        self.inner.readers.read(move |conn| filter.run(conn)).await
    }

    /// Runs `action` over the jobs `selection` names: every job a filter lists when the call starts, or a list of
    /// ids. A chunk of jobs per transaction, each job as its own operation would treat it: one whose state the
    /// action does not apply to (or that is gone) is skipped and counted, and the others go on. Jobs done before a
    /// failure stay done.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] naming `queue` (a move's) or `ids` (more than
    /// [`MAX_BULK_IDS`](crate::MAX_BULK_IDS)) before anything is done; storage errors, and what a filter's own
    /// fields break, as [`Queue::list`].
    pub async fn bulk(
        &self,
        action: crate::BulkAction,
        selection: crate::BulkSelection,
    ) -> Result<crate::BulkOutcome> {
        use crate::ops::bulk_action::{BULK_CHUNK, BulkChunk, check};
        check(&action, &selection)?;
        let mut total = crate::BulkOutcome::default();
        let run = |jobs: Vec<JobId>| {
            let chunk = BulkChunk {
                action: action.clone(),
                jobs,
            };
            self.write(chunk)
        };
        match selection {
            crate::BulkSelection::Ids(ids) => {
                for jobs in ids.chunks(BULK_CHUNK) {
                    add(&mut total, run(jobs.to_vec()).await?);
                }
            }
            crate::BulkSelection::Filter(filter) => {
                // Newest first, a page at a time from where the last one ended: jobs created meanwhile have higher
                // ids, and are not reached.
                let mut page_filter = JobFilter {
                    before: None,
                    limit: crate::query::MAX_PAGE,
                    ..filter
                };
                loop {
                    let page = self.list(page_filter.clone()).await?;
                    let ids: Vec<JobId> = page.jobs.iter().map(|j| j.id).collect();
                    for jobs in ids.chunks(BULK_CHUNK) {
                        add(&mut total, run(jobs.to_vec()).await?);
                    }
                    match page.next {
                        Some(next) => page_filter.before = Some(next),
                        None => break,
                    }
                }
            }
        }
        Ok(total)
    }

    /// Returns once the writer has run a batch sent after this call: every operation sent before it has committed,
    /// and the timed work due by the queue's clock (promotion, lease expiry, template slots, retention) has run.
    ///
    /// # Errors
    /// [`ErrorKind::Closed`] after close; storage errors.
    pub async fn settle(&self) -> Result<()> {
        self.write(Barrier).await
    }

    #[cfg(feature = "sqlite")]
    /// The SQLite settings of the writer's connection, read back from SQLite.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidState`] for a queue on PostgreSQL; storage errors.
    pub async fn sqlite_settings(&self) -> Result<SqliteSettings> {
        self.write(ReadSettings).await
    }

    /// Stops the engine: answers waiting dequeues with no job, commits what is in flight, and closes the database.
    /// Later calls fail with [`ErrorKind::Closed`]. Workers should be stopped first.
    ///
    /// # Errors
    /// [`ErrorKind::Storage`] if the writer did not stop within `deadline`.
    pub async fn close(&self, deadline: Duration) -> Result<()> {
        let (ack, stopped) = oneshot::channel();
        self.send(Command::Close(ack))?;
        self.inner.closed.store(true, Ordering::SeqCst);
        self.inner.stop_background.store(true, Ordering::SeqCst);
        let background = std::mem::take(
            &mut *self
                .inner
                .background
                .lock()
                .expect("the background threads' lock is never poisoned"),
        );
        // The writer stops meanwhile; both within the deadline. A background thread still in a call to the
        // database (each bounded) ends on its own after it.
        let started = std::time::Instant::now();
        if !background.is_empty() {
            let stopping =
                tokio::task::spawn_blocking(move || background.into_iter().for_each(|stop| stop()));
            if tokio::time::timeout(deadline, stopping).await.is_err() {
                tracing::warn!(
                    "the queue's background threads (the listener, the vacuum) did not stop within {deadline:?}; \
                     they end on their own"
                );
            }
        }
        let left = deadline.saturating_sub(started.elapsed());
        match tokio::time::timeout(left, stopped).await {
            Ok(_) => {
                let thread = self
                    .inner
                    .writer_thread
                    .lock()
                    .expect("thread slot lock is never poisoned")
                    .take();
                if let Some(thread) = thread {
                    let _ = tokio::task::spawn_blocking(move || thread.join()).await;
                }
                Ok(())
            }
            Err(_) => Err(Error::new(
                ErrorKind::Storage,
                format!("the writer did not stop within {deadline:?}"),
            )),
        }
    }
}

/// A dequeue's reply in flight. If the caller stops waiting (the future is dropped) after the writer has sent jobs
/// but before they were read, the drop gives them back, so they are not held by nobody until their lease expires.
struct PendingDequeue<'a> {
    answer: Option<oneshot::Receiver<Result<Vec<ClaimedJob>>>>,
    queue: &'a Queue,
}

impl Drop for PendingDequeue<'_> {
    fn drop(&mut self) {
        let Some(mut answer) = self.answer.take() else {
            return;
        };
        // After close, the writer's send fails (and it gives the jobs back itself); before it, the jobs are here.
        answer.close();
        if let Ok(Ok(jobs)) = answer.try_recv()
            && !jobs.is_empty()
        {
            let leases = jobs.into_iter().map(|c| c.lease).collect();
            let _ = self.queue.inner.commands.send(Command::GiveBack(leases));
        }
    }
}

/// Wakes the writer to look again (clock jump, external commit). Does nothing once the queue is gone.
fn tick(inner: &Weak<Inner>) {
    if let Some(inner) = inner.upgrade() {
        let _ = inner.commands.send(Command::Tick);
    }
}

/// Refuses more finishes in one call than [`MAX_FINISH_MANY`].
fn check_finish_count(count: usize) -> Result<()> {
    if count > MAX_FINISH_MANY {
        return Err(Error::invalid(
            "finishes",
            format!("must be at most {MAX_FINISH_MANY} jobs, got {count}"),
        ));
    }
    Ok(())
}

fn writer_stopped() -> Error {
    Error::new(ErrorKind::Closed, "the queue's writer has stopped")
}

/// An operation that writes nothing: a round trip through the writer.
struct Barrier;

impl Operation for Barrier {
    type Output = ();

    fn is_durable(&self) -> bool {
        false
    }

    fn apply(&mut self, _ctx: &mut WriteCtx<'_>) -> Result<()> {
        Ok(())
    }
}

/// Reads the writer connection's settings.
#[cfg(feature = "sqlite")]
struct ReadSettings;

#[cfg(feature = "sqlite")]
impl Operation for ReadSettings {
    type Output = SqliteSettings;

    fn is_durable(&self) -> bool {
        false
    }

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<SqliteSettings> {
        match &ctx.db {
            Db::Sqlite(conn) => connection::read_settings(conn),
            #[allow(unreachable_patterns)]
            _ => Err(Error::new(
                ErrorKind::InvalidState,
                "the queue is not stored in SQLite",
            )),
        }
    }
}

/// Adds a chunk's counts to a bulk action's.
fn add(total: &mut crate::BulkOutcome, chunk: crate::BulkOutcome) {
    total.matched += chunk.matched;
    total.done += chunk.done;
    total.skipped += chunk.skipped;
}

/// A wait's registration on PostgreSQL, taken back when the wait ends, however it ends: in the writer's next batch,
/// which the caller does not wait for.
struct Unwatch<'q> {
    queue: &'q Queue,
    job: JobId,
    waiter: Option<i64>,
}

impl Drop for Unwatch<'_> {
    fn drop(&mut self) {
        let (Some(waiter), Ok(runtime)) = (self.waiter, tokio::runtime::Handle::try_current())
        else {
            return;
        };
        let (queue, job) = (self.queue.clone(), self.job);
        runtime.spawn(async move {
            let _ = queue
                .write(crate::ops::watch::UnwatchJob { job, waiter })
                .await;
        });
    }
}
