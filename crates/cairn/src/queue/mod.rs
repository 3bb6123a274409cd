//! [`Queue`]: the embedded engine's public API. Each method builds an operation and hands it to the writer thread
//! (writes) or the reader pool (reads); this file holds no SQL and no job logic.

mod backend;
mod bulk_sql;
mod claims;
pub(crate) mod jobs;
mod open;
#[cfg(feature = "postgres")]
mod postgres_enqueue;
pub(crate) mod reads;
pub(crate) mod request;
#[cfg(feature = "sqlite")]
mod sqlite_app;
mod waits;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use jiff::Timestamp;
use tokio::sync::oneshot;

use crate::clock::{Clock, to_millis};
use crate::engine::{Command, Pending, Writer};
use crate::error::{Error, ErrorKind, Result};
use crate::lease::Lease;
use crate::metrics::MetricsSnapshot;
use crate::names::JobId;
use crate::ops::config::Defaults;
use crate::ops::queues::SettingsCache;
use crate::ops::rename::Rename;
use crate::ops::rows;
use crate::ops::set_schedule::SetSchedule;
use crate::ops::{Limits, Operation, TokenSource, WriteCtx};
use crate::options::QueueOptions;
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
    /// Who waits for jobs to end ([`Jobs::wait`](crate::Jobs::wait)), woken by the writer.
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
                name_families: options.name_families.clone(),
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
        // Where nodes share the database, one at a time leads timed work.
        let shared = opened.readers.capabilities().shared_by_nodes;
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
            lead: if shared {
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
        // Which database, not what it can do: these calls hand out or join SQLite's own connection.
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

    /// Tells the queue that jobs were committed by a connection it does not watch, so waiting workers look again.
    pub fn wake(&self) {
        let _ = self.send(Command::Tick);
    }

    /// Counters and histograms of job transitions, wait and run times since the queue opened, per queue and job
    /// name: what a Prometheus scrape reads. They start from zero at every open (see [`Jobs::stats`](crate::Jobs::stats) for the
    /// statistics kept in the database).
    pub fn metrics(&self) -> MetricsSnapshot {
        self.inner.metrics.snapshot()
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
            // Where nodes share the database, others append to the log: the tail reads it now and then too.
            self.inner.readers.capabilities().shared_by_nodes,
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

/// Wakes the writer to look again (clock jump, external commit). Does nothing once the queue is gone.
fn tick(inner: &Weak<Inner>) {
    if let Some(inner) = inner.upgrade() {
        let _ = inner.commands.send(Command::Tick);
    }
}
