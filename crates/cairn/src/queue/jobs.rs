//! [`Jobs`]: the calls a program makes of a queue, written once over [`Runs`], so that the embedded [`Queue`] and a
//! server's client (`cairn_client::Client`) offer the same ones, with the same types and errors. Each is shorthand
//! for one request (or two, chosen by an argument: `track`, `pause_queue`); any request runs through [`Runs`].

use std::time::Duration;

use jiff::Timestamp;
use serde_json::Value;

use crate::activity::{ActivityFilter, ActivityPage};
use crate::error::{Error, Result};
use crate::job::{Job, JobState, Step};
use crate::lease::Lease;
use crate::names::{JobId, SignalKey, StepName};
use crate::ops::claim::MAX_WAIT;
use crate::ops::public::*;
use crate::query::{JobFilter, JobPage};
use crate::queue::Queue;
use crate::queue::reads::{
    Bulk, FinishMany, GetBatch, GetJob, ListConfig, ListFailures, ListQueues, ListRecurring,
    ListWorkers, Peek, WorkerStatsQuery,
};
use crate::queue::request::Request;
use crate::sql::{SqlQuery, SqlResult};
use crate::stats::{Stats, StatsPeriod, StatsQuery, WorkerStats};
use crate::worker::backend::BoxFuture;

/// Runs requests of type `R`: the embedded [`Queue`] runs every [`Request`], a server's client every request that
/// has an HTTP route. Code generic over where it runs names the requests it needs (`J: Runs<MoveJob>`).
pub trait Runs<R: Request>: Send + Sync {
    /// Runs `request` and gives what it answers.
    ///
    /// # Errors
    /// The request's own; a client adds [`ErrorKind::Unavailable`](crate::ErrorKind::Unavailable) and
    /// [`ErrorKind::Unauthorized`](crate::ErrorKind::Unauthorized).
    fn run_request(&self, request: R) -> BoxFuture<'_, Result<R::Output>>;
}

impl<R: Request> Runs<R> for Queue {
    fn run_request(&self, request: R) -> BoxFuture<'_, Result<R::Output>> {
        request.run_on(self)
    }
}

/// `request` run through the [`Runs`] of its type, which a type that runs many must be told.
macro_rules! run {
    ($runner:expr, $request:ty, $value:expr) => {
        <Self as Runs<$request>>::run_request($runner, $value)
    };
}

/// Declares [`Jobs`] over the requests its calls make, and gives it to everything that runs them all.
macro_rules! jobs {
    ([$($request:ty),* $(,)?] $($methods:tt)*) => {
        /// The calls a program makes of a queue, each shorthand for a request: embedded on a [`Queue`], or against a
        /// server through `cairn_client::Client`, with the same answers and errors (a server adds
        /// [`ErrorKind::Unavailable`](crate::ErrorKind::Unavailable) and
        /// [`ErrorKind::Unauthorized`](crate::ErrorKind::Unauthorized)). Anything that [`Runs`] these requests has
        /// it; bring it into scope (`use cairn::Jobs;`) to call them.
        pub trait Jobs: $(Runs<$request> +)* Send + Sync {
            $($methods)*
        }

        impl<T: ?Sized $(+ Runs<$request>)*> Jobs for T {}
    };
}

jobs! {
    // Every request a call below makes, and so every one a type must run to have the calls.
    [
        Push, PushBatch, Dequeue, Heartbeat, Checkpoint, RecordStep, Sleep, WaitForSignal, SendSignal, Spawn, Join, Update, Finish, FinishMany, Retry, Fail, Release,
        WorkerStopped, GetJob, JobFilter, Bulk, Cancel, Delete, Requeue, Reschedule, SetPriority, SetData,
        ChangeDependencies, ChangeTags, Track, Untrack, ListWorkers, ListQueues, Peek, PauseQueue, ResumeQueue,
        LimitQueue, LimitKeys, WeighKey, RateLimitQueue, AgeQueue, ListFailures, Unfail, ActivityFilter, StatsQuery,
        WorkerStatsQuery, SqlQuery, ListConfig, SetConfig, UnsetConfig, ListRecurring, SetRecurring,
        RemoveRecurring, CreateBatch, GetBatch, BatchFilter,
    ]

    /// Enqueues one job. With a unique key that a live job holds, returns that job instead (`existing: true`).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) naming the bad field; nothing is written.
    fn enqueue(&self, push: Push) -> BoxFuture<'_, Result<Enqueued>> {
        run!(self, Push, push)
    }

    /// Enqueues many jobs in one transaction: all of them, or none if any is invalid (the error names its index).
    ///
    /// # Errors
    /// As [`Jobs::enqueue`].
    fn enqueue_batch(&self, jobs: Vec<Push>) -> BoxFuture<'_, Result<Vec<Enqueued>>> {
        run!(self, PushBatch, PushBatch { jobs })
    }

    /// Takes up to `request.limit` ready jobs, leased to `request.worker`. With a `wait`, blocks until a matching
    /// job is ready (returning at once when it is) or the wait ends (returning no job).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) naming the bad field.
    fn dequeue(&self, request: Dequeue) -> BoxFuture<'_, Result<Vec<ClaimedJob>>> {
        run!(self, Dequeue, request)
    }

    /// Extends a lease (to a full lease timeout from now), optionally reporting progress. Returns the new expiry.
    ///
    /// # Errors
    /// [`ErrorKind::LeaseLost`](crate::ErrorKind::LeaseLost) if the lease is no longer valid.
    fn heartbeat(&self, lease: &Lease, progress: Option<Value>) -> BoxFuture<'_, Result<Timestamp>> {
        run!(self, Heartbeat, Heartbeat { progress, ..Heartbeat::new(lease) })
    }

    /// Saves `data` as what the next attempt starts from, and extends the lease. Returns the new expiry.
    ///
    /// # Errors
    /// [`ErrorKind::LeaseLost`](crate::ErrorKind::LeaseLost); [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) for oversized data.
    fn checkpoint(&self, lease: &Lease, data: Value) -> BoxFuture<'_, Result<Timestamp>> {
        run!(self, Checkpoint, Checkpoint::new(lease, data))
    }

    /// Records step `name` of the running attempt with its `result`, and extends the lease; a step already recorded
    /// keeps its first result, which is the answer. Handlers use [`JobContext::step`](crate::JobContext::step).
    ///
    /// # Errors
    /// [`ErrorKind::LeaseLost`](crate::ErrorKind::LeaseLost); [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput)
    /// for an oversized result, or a job at its limit of steps.
    fn record_step(&self, lease: &Lease, name: StepName, result: Value) -> BoxFuture<'_, Result<Step>> {
        run!(self, RecordStep, RecordStep::new(lease, name, result))
    }

    /// Sleeps until `wake`, as step `name` of the running attempt: the job gives up its worker and runs again then
    /// ([`Slept::Suspended`]), or goes on at once when the step's time has passed ([`Slept::Woke`]). Handlers use
    /// [`JobContext::sleep`](crate::JobContext::sleep).
    ///
    /// # Errors
    /// As [`Jobs::record_step`].
    fn sleep(&self, lease: &Lease, name: StepName, wake: Wake) -> BoxFuture<'_, Result<Slept>> {
        run!(self, Sleep, Sleep::new(lease, name, wake))
    }

    /// Waits, as step `name` of the running attempt, for a signal sent to `key`, until `timeout`: answers the
    /// signal's data ([`SignalWait::Received`]) or that the time passed ([`SignalWait::TimedOut`]), or the job gives
    /// up its worker until one of them happens ([`SignalWait::Suspended`]). Handlers use
    /// [`JobContext::wait_for_signal`](crate::JobContext::wait_for_signal).
    ///
    /// # Errors
    /// As [`Jobs::record_step`].
    fn wait_for_signal(
        &self,
        lease: &Lease,
        name: StepName,
        key: SignalKey,
        timeout: std::time::Duration,
    ) -> BoxFuture<'_, Result<SignalWait>> {
        run!(self, WaitForSignal, WaitForSignal::new(lease, name, key, timeout))
    }

    /// Pushes `children` as children of the running job, as step `name`, and records their ids, which it answers;
    /// a step already recorded answers its ids and pushes nothing. Handlers use
    /// [`JobContext::spawn`](crate::JobContext::spawn).
    ///
    /// # Errors
    /// As [`Jobs::enqueue_batch`] for the pushes, and as [`Jobs::record_step`].
    fn spawn(&self, lease: &Lease, name: StepName, children: Vec<Push>) -> BoxFuture<'_, Result<Vec<JobId>>> {
        run!(self, Spawn, Spawn::new(lease, name, children))
    }

    /// Waits, as step `name` of the running attempt, until the job's children have ended: answers how each ended
    /// ([`Joined::Ended`]), or the job gives up its worker until they have ([`Joined::Suspended`]). Handlers use
    /// [`JobContext::join`](crate::JobContext::join).
    ///
    /// # Errors
    /// As [`Jobs::record_step`].
    fn join(&self, lease: &Lease, name: StepName) -> BoxFuture<'_, Result<Joined>> {
        run!(self, Join, Join::new(lease, name))
    }

    /// Sends `data` to `key`: the job waiting for it receives it and runs again ([`SignalSent::Delivered`]), or it
    /// is kept for the first job that waits ([`SignalSent::Kept`]). Each signal is received once.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) for data larger than the largest job data, or a
    /// job at its limit of steps; [`ErrorKind::InvalidState`](crate::ErrorKind::InvalidState) when only a cancelled
    /// job waited for the key.
    fn signal(&self, key: SignalKey, data: Value) -> BoxFuture<'_, Result<SignalSent>> {
        run!(self, SendSignal, SendSignal { key, data })
    }

    /// Records progress for queries to show.
    ///
    /// # Errors
    /// [`ErrorKind::LeaseLost`](crate::ErrorKind::LeaseLost); [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) for oversized progress.
    fn update(&self, lease: &Lease, progress: Value) -> BoxFuture<'_, Result<()>> {
        run!(self, Update, Update::new(lease, progress))
    }

    /// Completes the job, optionally replacing its data with a result.
    ///
    /// # Errors
    /// [`ErrorKind::LeaseLost`](crate::ErrorKind::LeaseLost) if the lease is no longer valid; nothing changes then.
    fn finish(&self, lease: &Lease, data: Option<Value>) -> BoxFuture<'_, Result<()>> {
        run!(self, Finish, Finish { data, ..Finish::new(lease) })
    }

    /// [`Jobs::finish`] with every field of [`Finish`], such as the attempt's measured [`RunUsage`](crate::RunUsage).
    ///
    /// # Errors
    /// As [`Jobs::finish`].
    fn finish_with(&self, finish: Finish) -> BoxFuture<'_, Result<()>> {
        run!(self, Finish, finish)
    }

    /// Completes many jobs at once, each as [`Jobs::finish_with`] would: for a worker that reports several jobs
    /// together. They reach the writer together, so they share one transaction (and on PostgreSQL, the plain ones
    /// share its statements). Each gets its own answer, in order: a lost lease refuses only its own job.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) (field `finishes`) for more than [`MAX_FINISH_MANY`] jobs, and nothing is
    /// written; a closed queue's errors. Each job's own error (such as [`ErrorKind::LeaseLost`](crate::ErrorKind::LeaseLost)) is in its answer.
    fn finish_many(&self, finishes: Vec<Finish>) -> BoxFuture<'_, Result<Vec<Result<()>>>> {
        let done = run!(self, FinishMany, FinishMany { finishes, take: None });
        Box::pin(async move { Ok(done.await?.finished.into_iter().map(|(_, answer)| answer).collect()) })
    }

    /// Completes `finishes` as [`Jobs::finish_many`] does, then takes jobs as [`Jobs::dequeue`] does with `take`,
    /// which does not wait: a worker reports the jobs that ended and takes its next ones in one call. Both reach
    /// the writer together, the finishes first, so they share a transaction (and its fsync) when the writer takes
    /// them in one batch, and the take sees the room the finishes made (a queue's concurrency limit). The jobs
    /// come back once the finishes are durable.
    ///
    /// # Errors
    /// The call is refused whole, with nothing done, as either part would refuse it: [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput)
    /// for more than [`MAX_FINISH_MANY`] finishes (field `finishes`), a take that waits (field `wait`), or a bad
    /// field of the take. Everything else is in the answer's two parts.
    fn finish_and_take(&self, finishes: Vec<Finish>, take: Dequeue) -> BoxFuture<'_, Result<FinishAndTake>> {
        let done = run!(self, FinishMany, FinishMany { finishes, take: Some(take) });
        Box::pin(async move {
            let done = done.await?;
            Ok(FinishAndTake {
                finished: Ok(done.finished.into_iter().map(|(_, answer)| answer).collect()),
                taken: done.taken,
            })
        })
    }

    /// Reports a transient error: the job runs again after its backoff (or `delay`), or fails when it has no
    /// attempts left. Returns its new state.
    ///
    /// # Errors
    /// [`ErrorKind::LeaseLost`](crate::ErrorKind::LeaseLost) if the lease is no longer valid.
    fn retry(&self, lease: &Lease, error: &str, delay: Option<Duration>) -> BoxFuture<'_, Result<JobState>> {
        run!(self, Retry, Retry { delay, ..Retry::new(lease, error) })
    }

    /// [`Jobs::retry`] with every field of [`Retry`].
    ///
    /// # Errors
    /// As [`Jobs::retry`].
    fn retry_with(&self, retry: Retry) -> BoxFuture<'_, Result<JobState>> {
        run!(self, Retry, retry)
    }

    /// Fails the job for good, with a failure group and a message.
    ///
    /// # Errors
    /// [`ErrorKind::LeaseLost`](crate::ErrorKind::LeaseLost); [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) for an empty or overlong group.
    fn fail(&self, lease: &Lease, group: &str, message: &str) -> BoxFuture<'_, Result<()>> {
        run!(self, Fail, Fail::new(lease, group, message))
    }

    /// [`Jobs::fail`] with every field of [`Fail`].
    ///
    /// # Errors
    /// As [`Jobs::fail`].
    fn fail_with(&self, fail: Fail) -> BoxFuture<'_, Result<()>> {
        run!(self, Fail, fail)
    }

    /// Gives the job back to its queue at once, without counting the attempt (for a worker shutting down).
    ///
    /// # Errors
    /// [`ErrorKind::LeaseLost`](crate::ErrorKind::LeaseLost) if the lease is no longer valid.
    fn release(&self, lease: &Lease) -> BoxFuture<'_, Result<()>> {
        run!(self, Release, Release::new(lease))
    }

    /// Says that `worker` stops (the activity log shows it; it is not counted as lost). Its next dequeue starts it
    /// again.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) on `worker`.
    fn worker_stopped(&self, worker: &str) -> BoxFuture<'_, Result<()>> {
        run!(self, WorkerStopped, WorkerStopped { worker: worker.to_owned() })
    }

    /// Everything about one job, its history included.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`](crate::ErrorKind::NotFound).
    fn get(&self, job: JobId) -> BoxFuture<'_, Result<Job>> {
        run!(self, GetJob, GetJob::new(job))
    }

    /// Waits until the job ends (completed, failed or cancelled), at most `timeout`, and returns it as
    /// [`Jobs::get`] does: with its [`result`](Job::result) or its error, and its history. At the timeout it
    /// returns the job as it stands, whose state then says it has not ended. No polling: the commit that ends the
    /// job wakes the wait (once durable), on PostgreSQL whichever node ends it.
    ///
    /// A recurring job's run ending does not end the job, which is scheduled again: a wait for it returns at the
    /// timeout.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`](crate::ErrorKind::NotFound) if there is no such job (or it was deleted meanwhile); [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput)
    /// (field `wait`) for a timeout over [`MAX_WAIT`]; [`ErrorKind::Closed`](crate::ErrorKind::Closed) once the queue
    /// closes, which ends every wait; storage errors.
    fn wait(&self, job: JobId, timeout: Duration) -> BoxFuture<'_, Result<Job>> {
        // One request's wait may be cut short (a server holds one to its `--max-wait`): ask again until the job ends or
        // the time is up. Embedded, the first answer is the last.
        Box::pin(async move {
            if timeout > MAX_WAIT {
                return Err(Error::invalid(
                    "wait",
                    format!("must be at most {MAX_WAIT:?}, got {timeout:?}"),
                ));
            }
            let deadline = tokio::time::Instant::now() + timeout;
            loop {
                let wait = deadline.saturating_duration_since(tokio::time::Instant::now());
                let job = run!(self, GetJob, GetJob { job, wait }).await?;
                if job.state.is_finished() || tokio::time::Instant::now() >= deadline {
                    return Ok(job);
                }
            }
        })
    }

    /// Lists jobs, newest first, a page at a time.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) naming a bad filter field.
    fn list(&self, filter: JobFilter) -> BoxFuture<'_, Result<JobPage>> {
        run!(self, JobFilter, filter)
    }

    /// Runs `action` over the jobs `selection` names: every job a filter lists when the call starts, or a list of
    /// ids. A chunk of jobs per transaction, each job as its own operation would treat it: one whose state the
    /// action does not apply to (or that is gone) is skipped and counted, and the others go on. Jobs done before a
    /// failure stay done.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) naming `queue` (a move's) or `ids` (more than
    /// [`MAX_BULK_IDS`]) before anything is done; storage errors, and what a filter's own
    /// fields break, as [`Jobs::list`].
    fn bulk(&self, action: BulkAction, selection: BulkSelection) -> BoxFuture<'_, Result<BulkOutcome>> {
        run!(self, Bulk, Bulk { action, selection })
    }

    /// Cancels a job that has not finished; a running job's worker is refused from then on.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`](crate::ErrorKind::NotFound); [`ErrorKind::InvalidState`](crate::ErrorKind::InvalidState) for a completed or failed job.
    fn cancel(&self, job: JobId) -> BoxFuture<'_, Result<()>> {
        run!(self, Cancel, Cancel { job })
    }

    /// Deletes a job and its history.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`](crate::ErrorKind::NotFound).
    fn delete(&self, job: JobId) -> BoxFuture<'_, Result<()>> {
        run!(self, Delete, Delete { job })
    }

    /// Runs a job again with a fresh count of attempts, whatever became of it: a failed, cancelled or completed job
    /// goes back to its queue, a waiting one moves to `run_at` (now when `None`), a running one is taken from its
    /// worker. Returns its new state.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`](crate::ErrorKind::NotFound); [`ErrorKind::InvalidState`](crate::ErrorKind::InvalidState) when another live job holds its unique key.
    fn requeue(&self, job: JobId, run_at: Option<Timestamp>) -> BoxFuture<'_, Result<JobState>> {
        run!(self, Requeue, Requeue { job, run_at })
    }

    /// Moves a scheduled or queued job's run time. Returns its new state.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`](crate::ErrorKind::NotFound); [`ErrorKind::InvalidState`](crate::ErrorKind::InvalidState) for other states.
    fn reschedule(&self, job: JobId, run_at: Timestamp) -> BoxFuture<'_, Result<JobState>> {
        run!(self, Reschedule, Reschedule { job, run_at })
    }

    /// Changes the priority of a job that has not finished.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`](crate::ErrorKind::NotFound); [`ErrorKind::InvalidState`](crate::ErrorKind::InvalidState) for a finished job.
    fn set_priority(&self, job: JobId, priority: i32) -> BoxFuture<'_, Result<()>> {
        run!(self, SetPriority, SetPriority { job, priority })
    }

    /// Replaces the data of a job that is not running.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`](crate::ErrorKind::NotFound); [`ErrorKind::InvalidState`](crate::ErrorKind::InvalidState) for a running job; [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) for
    /// oversized data.
    fn set_data(&self, job: JobId, data: Value) -> BoxFuture<'_, Result<()>> {
        run!(self, SetData, SetData { job, data })
    }

    /// Adds and removes dependencies of a job that has not started (see [`ChangeDependencies`]). Returns its new
    /// state: `waiting` while a dependency has not completed.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`](crate::ErrorKind::NotFound); [`ErrorKind::InvalidState`](crate::ErrorKind::InvalidState) for a job that started or ended, a cancelled
    /// dependency, or a cycle; [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) on `depends_on` for a job that does not exist.
    fn change_dependencies(&self, change: ChangeDependencies) -> BoxFuture<'_, Result<JobState>> {
        run!(self, ChangeDependencies, change)
    }

    /// Adds and removes a job's tags, whatever its state.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`](crate::ErrorKind::NotFound); [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) on `tags` for a bad tag.
    fn change_tags(&self, change: ChangeTags) -> BoxFuture<'_, Result<()>> {
        run!(self, ChangeTags, change)
    }

    /// Tracks a job (listed by `JobFilter::tracked`), or stops tracking it.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`](crate::ErrorKind::NotFound).
    fn track(&self, job: JobId, tracked: bool) -> BoxFuture<'_, Result<()>> {
        match tracked {
            true => run!(self, Track, Track { job }),
            false => run!(self, Untrack, Untrack { job }),
        }
    }

    /// Every worker that took jobs or heartbeated and was not forgotten since (see
    /// [`QueueOptions::worker_max_age`](crate::QueueOptions)), with the jobs it holds and which of them stalled.
    ///
    /// # Errors
    /// Storage errors.
    fn workers(&self) -> BoxFuture<'_, Result<Vec<WorkerInfo>>> {
        run!(self, ListWorkers, ListWorkers)
    }

    /// Every queue that has jobs or settings, with its jobs counted by state (`stalled`: running jobs whose lease
    /// ran out and that were not retried yet) and whether it is paused. Reads every job: for operators, not for a
    /// hot path.
    ///
    /// # Errors
    /// Storage errors.
    fn queue_stats(&self) -> BoxFuture<'_, Result<Vec<QueueStats>>> {
        run!(self, ListQueues, ListQueues)
    }

    /// The next `limit` jobs a worker taking from `queue` would get, in that order, without taking them (none
    /// while the queue is paused).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) on `queue` or `limit`.
    fn peek(&self, queue: &str, limit: u32) -> BoxFuture<'_, Result<Vec<Job>>> {
        run!(self, Peek, Peek { queue: queue.to_owned(), limit })
    }

    /// Pauses a queue (it hands out nothing; everything else works) or resumes it.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) on `queue`.
    fn pause_queue(&self, queue: &str, paused: bool) -> BoxFuture<'_, Result<()>> {
        let queue = queue.to_owned();
        match paused {
            true => run!(self, PauseQueue, PauseQueue { queue }),
            false => run!(self, ResumeQueue, ResumeQueue { queue }),
        }
    }

    /// Sets a queue's concurrency limit across all workers (see [`LimitQueue`]), or removes it with `None`.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) on `queue` or `concurrency` (0: pause the queue instead).
    fn limit_queue(&self, queue: &str, concurrency: Option<u32>) -> BoxFuture<'_, Result<()>> {
        run!(self, LimitQueue, LimitQueue { queue: queue.to_owned(), concurrency })
    }

    /// Sets a queue's limit per concurrency key: at most `limit` of its jobs with one key run at once, across all
    /// workers and nodes, unless a job carries its own limit (see [`Concurrency`]); `None`
    /// removes it. Claims pass over a key at its limit, and waiting workers get its next job as soon as one of its
    /// jobs ends.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) on `limit` when it is 0 or above
    /// [`MAX_KEY_CONCURRENCY`].
    fn limit_keys(&self, queue: &str, limit: Option<u32>) -> BoxFuture<'_, Result<()>> {
        run!(self, LimitKeys, LimitKeys { queue: queue.to_owned(), limit })
    }

    /// Sets or removes a concurrency key's weight in a queue: a key of weight N takes up to N jobs per turn where
    /// the others take one (see [`WeighKey`]); `None` goes back to 1.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) on `key` or `weight` (1 to
    /// [`MAX_KEY_WEIGHT`]).
    fn weigh_key(&self, queue: &str, key: &str, weight: Option<u32>) -> BoxFuture<'_, Result<()>> {
        run!(self, WeighKey, WeighKey { queue: queue.to_owned(), key: key.to_owned(), weight })
    }

    /// Sets a queue's rate limit: at most `rate.jobs` of its jobs start per `rate.per`, across all workers; `None`
    /// removes it. Waiting workers get a job as soon as the limit allows.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) on `queue`, `rate.jobs` (0) or `rate.per` (1 ms to a year).
    fn rate_limit_queue(&self, queue: &str, rate: Option<RateLimit>) -> BoxFuture<'_, Result<()>> {
        run!(self, RateLimitQueue, RateLimitQueue { queue: queue.to_owned(), rate })
    }

    /// Turns priority aging on for a queue, or off with `None`: a ready job gains one priority point for every
    /// `every` it waits, so a steady stream of high-priority jobs cannot starve the low ones (see [`AgeQueue`]).
    /// Applies at once to the queue's jobs; changing it reads every job, so it is for an operator, not a loop.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) on `queue` or `every` ([`MIN_AGING_STEP`] to
    /// [`MAX_AGING_STEP`]).
    fn age_queue(&self, queue: &str, every: Option<Duration>) -> BoxFuture<'_, Result<()>> {
        run!(self, AgeQueue, AgeQueue { queue: queue.to_owned(), every })
    }

    /// The failure groups that hold failed jobs, with their counts; `JobFilter::failure_group` lists a group's
    /// jobs.
    ///
    /// # Errors
    /// Storage errors.
    fn failure_groups(&self) -> BoxFuture<'_, Result<Vec<FailureGroup>>> {
        run!(self, ListFailures, ListFailures)
    }

    /// Puts the oldest failed jobs of a failure group back in a queue, in one statement (see [`Unfail`]).
    /// Returns how many moved.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) on `group`, `queue` or `limit`.
    fn unfail(&self, unfail: Unfail) -> BoxFuture<'_, Result<u64>> {
        run!(self, Unfail, unfail)
    }

    /// The activity log, newest first: every job and worker transition, filtered by job, worker, queue and time.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) on `limit` or a `since` after `until`; storage errors.
    fn activity(&self, filter: ActivityFilter) -> BoxFuture<'_, Result<ActivityPage>> {
        run!(self, ActivityFilter, filter)
    }

    /// Statistics over the last hour, day or week, for every queue and name or one of each: counts, wait, run
    /// and service times with their histograms, and a series of points for graphs.
    ///
    /// # Errors
    /// Storage errors.
    fn stats(&self, query: StatsQuery) -> BoxFuture<'_, Result<Stats>> {
        run!(self, StatsQuery, query)
    }

    /// Worker utilization over the last hour, day or week (kept per clock hour): per worker and per queue, busy
    /// time over the time the workers were there.
    ///
    /// # Errors
    /// Storage errors.
    fn worker_stats(&self, period: StatsPeriod) -> BoxFuture<'_, Result<WorkerStats>> {
        run!(self, WorkerStatsQuery, WorkerStatsQuery { period })
    }

    /// Runs one read-only SQL statement over the queue's database (see [`SqlQuery`]): the tables, and the
    /// documented views `cairn_jobs`, `cairn_attempts`, `cairn_activity`, `cairn_stats_minute`,
    /// `cairn_stats_hour` and `cairn_workers`. Anything but a read is refused, and a query stops at its time
    /// limit; it never blocks the queue's writes.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) on `query` (not a read, not one statement, SQLite's own complaint, or too slow),
    /// `limit` or `timeout`.
    fn sql(&self, query: SqlQuery) -> BoxFuture<'_, Result<SqlResult>> {
        run!(self, SqlQuery, query)
    }

    /// Every option that can change at run time, with the value in force, the value the queue was opened with,
    /// and when it was set, if it was.
    ///
    /// # Errors
    /// Storage errors.
    fn config(&self) -> BoxFuture<'_, Result<Vec<ConfigEntry>>> {
        run!(self, ListConfig, ListConfig)
    }

    /// Sets an option at run time (see [`SetConfig`]): stored in the database, so it outlives restarts and wins
    /// over the value the queue is opened with. Returns the option as it now is.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) naming the key, when the value is of the wrong kind, out of range, or would
    /// make the default retry policy invalid (an initial delay above the maximum, for one).
    fn set_config(&self, key: ConfigKey, value: ConfigValue) -> BoxFuture<'_, Result<ConfigEntry>> {
        run!(self, SetConfig, SetConfig { key, value })
    }

    /// Goes back to the value the queue was opened with. Returns the option as it now is.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) when the value it was opened with does not fit with the others set at run
    /// time (the retry policy).
    fn unset_config(&self, key: ConfigKey) -> BoxFuture<'_, Result<ConfigEntry>> {
        run!(self, UnsetConfig, UnsetConfig { key })
    }

    /// The recurring templates, by key, with their next and last runs.
    ///
    /// # Errors
    /// Storage errors.
    fn recurring(&self) -> BoxFuture<'_, Result<Vec<RecurringInfo>>> {
        run!(self, ListRecurring, ListRecurring)
    }

    /// Creates or replaces a recurring template: at every slot of its cron schedule, the queue creates its job, due
    /// at the slot, exactly once per slot (see [`MissedSlots`] for slots that pass unseen).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) naming the bad field (`key`, `cron`, `time_zone`, or the job's).
    fn set_recurring(&self, recurring: Recurring) -> BoxFuture<'_, Result<RecurringInfo>> {
        run!(self, SetRecurring, SetRecurring { recurring })
    }

    /// Removes a recurring template; the jobs it already created stay.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`](crate::ErrorKind::NotFound).
    fn remove_recurring(&self, key: &str) -> BoxFuture<'_, Result<()>> {
        run!(self, RemoveRecurring, RemoveRecurring { key: key.to_owned() })
    }

    /// Creates a batch of jobs with callbacks (see [`CreateBatch`]): a group whose `on_complete` job is pushed
    /// once every job has ended, and `on_success` once every job has completed. Not to be confused with
    /// [`Jobs::enqueue_batch`], many jobs in one transaction and nothing more.
    ///
    /// # Errors
    /// As [`Jobs::enqueue_batch`] for the jobs (named `jobs[i].…`); [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) naming
    /// `description`, or a callback's field (`on_success.data`).
    fn create_batch(&self, batch: CreateBatch) -> BoxFuture<'_, Result<BatchCreated>> {
        run!(self, CreateBatch, batch)
    }

    /// A batch and its progress.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`](crate::ErrorKind::NotFound).
    fn batch(&self, id: BatchId) -> BoxFuture<'_, Result<Batch>> {
        run!(self, GetBatch, GetBatch { batch: id })
    }

    /// Batches, newest first (see [`BatchFilter`]).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) naming `limit`.
    fn batches(&self, filter: BatchFilter) -> BoxFuture<'_, Result<Vec<Batch>>> {
        let page = run!(self, BatchFilter, filter);
        Box::pin(async move { Ok(page.await?.batches) })
    }
}
