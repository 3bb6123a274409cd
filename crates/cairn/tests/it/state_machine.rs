//! The job state machine as a property: random sequences of operations, clock moves and restarts run against a real
//! queue and against a small model of what each step should do. After every step the queue must match the model,
//! and invariants that do not depend on the model must hold: a job is held by at most one lease (an accepted lease
//! is always the latest one handed out), no job is lost, a stale token is refused with `lease_lost` and changes
//! nothing, a unique key names at most one live job, and no job runs more attempts than it may.

use cairn::Jobs;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use cairn::{
    AttemptOutcome, Dequeue, Durability, ErrorKind, Job, JobFilter, JobId, JobState, Lease, Push,
    Queue, QueueOptions, Retention, RetryPolicy,
};
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{TestCaseError, TestCaseResult};
use serde_json::{Value, json};

use super::harness::TestQueue;

const WORKERS: [&str; 3] = ["w1", "w2", "w3"];
const KEYS: [&str; 3] = ["k1", "k2", "k3"];
/// The failure group the engine gives jobs that ran out of attempts.
const RETRIES_EXHAUSTED: &str = "retries-exhausted";
const FAIL_GROUP: &str = "model-group";

/// One step of a run.
#[derive(Debug, Clone)]
enum Step {
    Push(PushArgs),
    Dequeue {
        worker: usize,
        limit: u32,
    },
    Lease {
        pick: LeasePick,
        call: LeaseCall,
    },
    ById {
        pick: Index,
        call: IdCall,
    },
    /// Moves the clock forward by this many milliseconds.
    Advance(u64),
    /// Closes the queue and opens the file again, which recovers running jobs.
    Restart,
}

#[derive(Debug, Clone)]
struct PushArgs {
    priority: i32,
    delay_ms: u64,
    max_attempts: u32,
    lease_ms: u64,
    backoff_ms: u64,
    jitter: bool,
    key: Option<usize>,
}

/// Which lease a worker call uses: one the model thinks is current, or any lease ever handed out.
#[derive(Debug, Clone)]
enum LeasePick {
    Current(Index),
    Any(Index),
}

#[derive(Debug, Clone)]
enum LeaseCall {
    Heartbeat { progress: bool },
    Checkpoint,
    Update,
    Finish { result: bool },
    Retry { delay_ms: Option<u64> },
    Fail,
    Release,
}

#[derive(Debug, Clone)]
enum IdCall {
    Cancel,
    Delete,
    Reschedule { offset_ms: i64 },
    SetPriority(i32),
    Requeue { offset_ms: i64 },
    SetData,
}

fn push_args() -> impl Strategy<Value = PushArgs> {
    (
        -2i32..=2,
        prop_oneof![3 => Just(0u64), 1 => 1u64..5_000],
        1u32..=4,
        prop_oneof![100u64..2_000, 10_000u64..60_000],
        0u64..=3_000,
        any::<bool>(),
        prop::option::of(0..KEYS.len()),
    )
        .prop_map(
            |(priority, delay_ms, max_attempts, lease_ms, backoff_ms, jitter, key)| PushArgs {
                priority,
                delay_ms,
                max_attempts,
                lease_ms,
                backoff_ms,
                jitter,
                key,
            },
        )
}

fn lease_call() -> impl Strategy<Value = LeaseCall> {
    prop_oneof![
        1 => any::<bool>().prop_map(|progress| LeaseCall::Heartbeat { progress }),
        1 => Just(LeaseCall::Checkpoint),
        1 => Just(LeaseCall::Update),
        2 => any::<bool>().prop_map(|result| LeaseCall::Finish { result }),
        1 => prop::option::of(0u64..3_000).prop_map(|delay_ms| LeaseCall::Retry { delay_ms }),
        1 => Just(LeaseCall::Fail),
        1 => Just(LeaseCall::Release),
    ]
}

fn id_call() -> impl Strategy<Value = IdCall> {
    prop_oneof![
        2 => Just(IdCall::Cancel),
        1 => Just(IdCall::Delete),
        2 => (-3_000i64..10_000).prop_map(|offset_ms| IdCall::Reschedule { offset_ms }),
        2 => (-2i32..=2).prop_map(IdCall::SetPriority),
        2 => (-3_000i64..10_000).prop_map(|offset_ms| IdCall::Requeue { offset_ms }),
        1 => Just(IdCall::SetData),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        5 => push_args().prop_map(Step::Push),
        5 => (0..WORKERS.len(), 1u32..=3).prop_map(|(worker, limit)| Step::Dequeue { worker, limit }),
        7 => (any::<Index>(), lease_call())
            .prop_map(|(i, call)| Step::Lease { pick: LeasePick::Current(i), call }),
        2 => (any::<Index>(), lease_call())
            .prop_map(|(i, call)| Step::Lease { pick: LeasePick::Any(i), call }),
        3 => (any::<Index>(), id_call()).prop_map(|(pick, call)| Step::ById { pick, call }),
        4 => prop_oneof![3 => 0u64..500, 2 => 0u64..6_000, 1 => 0u64..60_000].prop_map(Step::Advance),
        1 => Just(Step::Restart),
    ]
}

/// What a test compares of a job: everything the state machine decides.
#[derive(Debug, Clone, PartialEq)]
struct JobView {
    id: i64,
    state: JobState,
    priority: i32,
    run_at: i64,
    attempt: u32,
    max_attempts: u32,
    worker: Option<String>,
    lease_expires_at: Option<i64>,
    data: Value,
    progress: Option<Value>,
    unique_key: Option<String>,
    started_at: Option<i64>,
    finished_at: Option<i64>,
    failure_group: Option<String>,
    history: Vec<AttemptView>,
}

#[derive(Debug, Clone, PartialEq)]
struct AttemptView {
    number: u32,
    worker: String,
    started_at: i64,
    finished_at: Option<i64>,
    outcome: Option<AttemptOutcome>,
}

impl JobView {
    fn of(job: &Job) -> JobView {
        JobView {
            id: job.id.0,
            state: job.state,
            priority: job.priority,
            run_at: job.run_at.as_millisecond(),
            attempt: job.attempt,
            max_attempts: job.retry.max_attempts,
            worker: job.worker.as_ref().map(|w| w.to_string()),
            lease_expires_at: job.lease_expires_at.map(|t| t.as_millisecond()),
            data: job.data.clone(),
            progress: job.progress.clone(),
            unique_key: job.unique_key.as_ref().map(|k| k.to_string()),
            started_at: job.started_at.map(|t| t.as_millisecond()),
            finished_at: job.finished_at.map(|t| t.as_millisecond()),
            failure_group: job.failure_group.clone(),
            history: job
                .history
                .iter()
                .map(|a| AttemptView {
                    number: a.number,
                    worker: a.worker.to_string(),
                    started_at: a.started_at.as_millisecond(),
                    finished_at: a.finished_at.map(|t| t.as_millisecond()),
                    outcome: a.outcome,
                })
                .collect(),
        }
    }
}

/// A job as the model sees it.
#[derive(Debug, Clone)]
struct ModelJob {
    view: JobView,
    token: Option<i64>,
    retry: RetryPolicy,
    lease_ms: i64,
}

impl ModelJob {
    fn end_attempt(&mut self, outcome: AttemptOutcome, now: i64) {
        for attempt in self.view.history.iter_mut().filter(|a| a.outcome.is_none()) {
            attempt.finished_at = Some(now);
            attempt.outcome = Some(outcome);
        }
    }

    fn clear_lease(&mut self) {
        self.token = None;
        self.view.worker = None;
        self.view.lease_expires_at = None;
    }

    fn finish_as(&mut self, state: JobState, now: i64) {
        self.view.state = state;
        self.view.finished_at = Some(now);
        self.clear_lease();
    }

    fn requeue(&mut self, run_at: i64, now: i64) -> JobState {
        self.view.state = if run_at <= now {
            JobState::Queued
        } else {
            JobState::Scheduled
        };
        self.view.run_at = run_at;
        self.clear_lease();
        self.view.state
    }

    /// As the engine's `retry_or_fail`: fails when the attempts are used up, else waits `delay` or the backoff.
    fn retry_or_fail(&mut self, outcome: AttemptOutcome, delay: Option<i64>, now: i64) -> JobState {
        let exhausted = self.view.attempt >= self.view.max_attempts;
        // A worker's retry with no attempt left is its failure.
        let outcome = match outcome {
            AttemptOutcome::Retried if exhausted => AttemptOutcome::Failed,
            other => other,
        };
        self.end_attempt(outcome, now);
        if exhausted {
            self.view.failure_group = Some(RETRIES_EXHAUSTED.to_owned());
            self.finish_as(JobState::Failed, now);
            return JobState::Failed;
        }
        let delay = delay.unwrap_or_else(|| {
            let backoff = self
                .retry
                .delay_after(JobId(self.view.id), self.view.attempt);
            i64::try_from(backoff.as_millis()).unwrap()
        });
        self.requeue(now + delay, now)
    }

    /// The lease's expiry after a heartbeat or checkpoint: a full timeout from now, never shorter than before.
    fn extend(&mut self, now: i64) -> i64 {
        let expires = self.view.lease_expires_at.unwrap().max(now + self.lease_ms);
        self.view.lease_expires_at = Some(expires);
        expires
    }
}

/// What a successful call returned, in a form both sides can produce.
#[derive(Debug, Clone, PartialEq)]
enum Out {
    Unit,
    At(i64),
    State(JobState),
}

/// The model: every job that exists, and what was handed out.
#[derive(Debug, Default)]
struct Model {
    now: i64,
    jobs: BTreeMap<i64, ModelJob>,
    /// Every id ever returned, deleted ones included.
    ids: Vec<i64>,
    deleted: Vec<i64>,
    /// Every lease ever handed out, in order.
    leases: Vec<Lease>,
    /// The latest token handed out for each job.
    latest_token: HashMap<i64, i64>,
    tokens: HashSet<i64>,
}

impl Model {
    /// The timed work the writer does at the start of each batch: due jobs become ready, expired leases retry.
    fn settle(&mut self) {
        let now = self.now;
        for job in self.jobs.values_mut() {
            if job.view.state == JobState::Scheduled && job.view.run_at <= now {
                job.view.state = JobState::Queued;
            }
        }
        for job in self.jobs.values_mut() {
            if job.view.state == JobState::Running && job.view.lease_expires_at.unwrap() <= now {
                job.retry_or_fail(AttemptOutcome::LeaseExpired, None, now);
            }
        }
    }

    /// What opening the file again does to jobs left running: retried at once, counting the attempt.
    fn recover(&mut self) {
        let now = self.now;
        for job in self.jobs.values_mut() {
            if job.view.state == JobState::Running {
                job.retry_or_fail(AttemptOutcome::Crashed, Some(0), now);
            }
        }
        self.settle();
    }

    fn live_with_key(&self, key: &str) -> Option<&ModelJob> {
        self.jobs
            .values()
            .find(|j| j.view.state.is_live() && j.view.unique_key.as_deref() == Some(key))
    }

    /// Ready jobs in claim order: priority first, then run_at, then id.
    fn ready_order(&self) -> Vec<i64> {
        let mut ready: Vec<&JobView> = self
            .jobs
            .values()
            .map(|j| &j.view)
            .filter(|v| v.state == JobState::Queued)
            .collect();
        ready.sort_by_key(|v| (std::cmp::Reverse(v.priority), v.run_at, v.id));
        ready.into_iter().map(|v| v.id).collect()
    }

    /// Whether the engine should accept `lease`: its job is running under that very token.
    fn holds(&self, lease: &Lease) -> bool {
        self.jobs
            .get(&lease.job.0)
            .is_some_and(|j| j.view.state == JobState::Running && j.token == Some(lease.token))
    }

    fn push(&mut self, args: &PushArgs, data: Value, id: i64) -> JobState {
        let now = self.now;
        let run_at = now + args.delay_ms as i64;
        let state = if run_at <= now {
            JobState::Queued
        } else {
            JobState::Scheduled
        };
        let job = ModelJob {
            view: JobView {
                id,
                state,
                priority: args.priority,
                run_at,
                attempt: 0,
                max_attempts: args.max_attempts,
                worker: None,
                lease_expires_at: None,
                data,
                progress: None,
                unique_key: args.key.map(|k| KEYS[k].to_owned()),
                started_at: None,
                finished_at: None,
                failure_group: None,
                history: Vec::new(),
            },
            token: None,
            retry: retry_policy(args),
            lease_ms: args.lease_ms as i64,
        };
        self.jobs.insert(id, job);
        self.ids.push(id);
        state
    }

    fn claim(&mut self, id: i64, worker: &str, token: i64) {
        let now = self.now;
        let job = self.jobs.get_mut(&id).unwrap();
        let v = &mut job.view;
        v.state = JobState::Running;
        v.attempt += 1;
        v.worker = Some(worker.to_owned());
        v.lease_expires_at = Some(now + job.lease_ms);
        v.started_at.get_or_insert(now);
        v.progress = None;
        v.history.push(AttemptView {
            number: v.attempt,
            worker: worker.to_owned(),
            started_at: now,
            finished_at: None,
            outcome: None,
        });
        job.token = Some(token);
        self.latest_token.insert(id, token);
    }

    /// Applies a worker call under a lease the model holds valid.
    fn lease_call(&mut self, id: i64, call: &LeaseCall, step: usize) -> Out {
        let now = self.now;
        let job = self.jobs.get_mut(&id).unwrap();
        match call {
            LeaseCall::Heartbeat { progress } => {
                if *progress {
                    job.view.progress = Some(progress_payload(step));
                }
                Out::At(job.extend(now))
            }
            LeaseCall::Checkpoint => {
                job.view.data = checkpoint_payload(step);
                Out::At(job.extend(now))
            }
            LeaseCall::Update => {
                job.view.progress = Some(progress_payload(step));
                Out::Unit
            }
            LeaseCall::Finish { result } => {
                job.end_attempt(AttemptOutcome::Completed, now);
                if *result {
                    job.view.data = result_payload(step);
                }
                job.finish_as(JobState::Completed, now);
                Out::Unit
            }
            LeaseCall::Retry { delay_ms } => Out::State(job.retry_or_fail(
                AttemptOutcome::Retried,
                delay_ms.map(|d| d as i64),
                now,
            )),
            LeaseCall::Fail => {
                job.end_attempt(AttemptOutcome::Failed, now);
                job.view.failure_group = Some(FAIL_GROUP.to_owned());
                job.finish_as(JobState::Failed, now);
                Out::Unit
            }
            LeaseCall::Release => {
                job.end_attempt(AttemptOutcome::Released, now);
                job.view.attempt -= 1;
                job.requeue(now, now);
                Out::Unit
            }
        }
    }

    /// Applies a call by job id, or says which error the engine must refuse it with.
    fn id_call(&mut self, id: i64, call: &IdCall) -> Result<Out, ErrorKind> {
        let now = self.now;
        // Requeueing a finished job brings its unique key back to life: refused while another live job holds it.
        if let (IdCall::Requeue { .. }, Some(job)) = (call, self.jobs.get(&id))
            && !job.view.state.is_live()
            && let Some(key) = &job.view.unique_key
            && self
                .live_with_key(key)
                .is_some_and(|other| other.view.id != id)
        {
            return Err(ErrorKind::InvalidState);
        }
        let Some(job) = self.jobs.get_mut(&id) else {
            return Err(ErrorKind::NotFound);
        };
        let state = job.view.state;
        match call {
            IdCall::Cancel => match state {
                JobState::Cancelled => {}
                JobState::Completed => return Err(ErrorKind::InvalidState),
                _ => {
                    // A failed job can be cancelled too, which takes it out of the failures.
                    if state == JobState::Running {
                        job.end_attempt(AttemptOutcome::Cancelled, now);
                    }
                    job.finish_as(JobState::Cancelled, now);
                }
            },
            IdCall::Delete => {
                self.jobs.remove(&id);
                self.deleted.push(id);
            }
            IdCall::Reschedule { offset_ms } => {
                if !matches!(state, JobState::Scheduled | JobState::Queued) {
                    return Err(ErrorKind::InvalidState);
                }
                return Ok(Out::State(job.requeue(now + offset_ms, now)));
            }
            IdCall::SetPriority(priority) => {
                if state.is_finished() {
                    return Err(ErrorKind::InvalidState);
                }
                job.view.priority = *priority;
            }
            IdCall::Requeue { offset_ms } => {
                if state == JobState::Running {
                    job.end_attempt(AttemptOutcome::Requeued, now);
                }
                job.view.attempt = 0;
                job.view.finished_at = None;
                job.view.failure_group = None;
                return Ok(Out::State(job.requeue(now + offset_ms, now)));
            }
            IdCall::SetData => {
                if state == JobState::Running {
                    return Err(ErrorKind::InvalidState);
                }
                job.view.data = set_data_payload(id);
            }
        }
        Ok(Out::Unit)
    }
}

fn retry_policy(args: &PushArgs) -> RetryPolicy {
    RetryPolicy {
        max_attempts: args.max_attempts,
        initial_delay: Duration::from_millis(args.backoff_ms),
        multiplier: 2.0,
        max_delay: Duration::from_secs(20),
        jitter: if args.jitter { 0.3 } else { 0.0 },
    }
}

fn progress_payload(step: usize) -> Value {
    json!({ "progress": step })
}

fn checkpoint_payload(step: usize) -> Value {
    json!({ "checkpoint": step })
}

fn set_data_payload(id: i64) -> Value {
    json!({ "set": id })
}

fn result_payload(step: usize) -> Value {
    json!({ "result": step })
}

/// Settings for every queue a run opens.
fn configure(options: &mut QueueOptions) {
    // Retention is off so that the model keeps every job; pruning has its own test.
    options.retention = Retention {
        worker_max_age: None,
        max_age: None,
        max_count: None,
        interval: Duration::from_secs(60),
        ..Default::default()
    };
    // Commits need not reach the disk: the state machine is the same, and a run makes thousands of them.
    options.durability = Durability::Normal;
}

fn engine<T>(what: &str, result: cairn::Result<T>) -> Result<T, TestCaseError> {
    result.map_err(|e| TestCaseError::fail(format!("{what}: unexpected error: {e}")))
}

async fn call_lease(
    queue: &Queue,
    lease: &Lease,
    call: &LeaseCall,
    step: usize,
) -> cairn::Result<Out> {
    Ok(match call {
        LeaseCall::Heartbeat { progress } => {
            let progress = progress.then(|| progress_payload(step));
            Out::At(queue.heartbeat(lease, progress).await?.as_millisecond())
        }
        LeaseCall::Checkpoint => Out::At(
            queue
                .checkpoint(lease, checkpoint_payload(step))
                .await?
                .as_millisecond(),
        ),
        LeaseCall::Update => {
            queue.update(lease, progress_payload(step)).await?;
            Out::Unit
        }
        LeaseCall::Finish { result } => {
            queue
                .finish(lease, result.then(|| result_payload(step)))
                .await?;
            Out::Unit
        }
        LeaseCall::Retry { delay_ms } => {
            let delay = delay_ms.map(Duration::from_millis);
            Out::State(queue.retry(lease, "model error", delay).await?)
        }
        LeaseCall::Fail => {
            queue.fail(lease, FAIL_GROUP, "model failure").await?;
            Out::Unit
        }
        LeaseCall::Release => {
            queue.release(lease).await?;
            Out::Unit
        }
    })
}

async fn call_by_id(queue: &Queue, id: JobId, call: &IdCall) -> cairn::Result<Out> {
    Ok(match call {
        IdCall::Cancel => {
            queue.cancel(id).await?;
            Out::Unit
        }
        IdCall::Delete => {
            queue.delete(id).await?;
            Out::Unit
        }
        IdCall::Reschedule { offset_ms } => {
            let at = queue.now() + jiff::SignedDuration::from_millis(*offset_ms);
            Out::State(queue.reschedule(id, at).await?)
        }
        IdCall::SetPriority(priority) => {
            queue.set_priority(id, *priority).await?;
            Out::Unit
        }
        IdCall::Requeue { offset_ms } => {
            let at = queue.now() + jiff::SignedDuration::from_millis(*offset_ms);
            Out::State(queue.requeue(id, Some(at)).await?)
        }
        IdCall::SetData => {
            queue.set_data(id, set_data_payload(id.0)).await?;
            Out::Unit
        }
    })
}

/// A job as the engine has it now, if it exists.
async fn snapshot(queue: &Queue, id: JobId) -> Result<Option<Job>, TestCaseError> {
    match queue.get(id).await {
        Ok(job) => Ok(Some(job)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(TestCaseError::fail(format!("get {id}: {e}"))),
    }
}

async fn run_step(t: &mut TestQueue, model: &mut Model, step: &Step, n: usize) -> TestCaseResult {
    model.settle();
    match step {
        Step::Push(args) => {
            let mut push = Push::new("job")
                .priority(args.priority)
                .retry(retry_policy(args))
                .lease_timeout(Duration::from_millis(args.lease_ms))
                .data(json!({ "pushed": n }));
            if args.delay_ms > 0 {
                push = push.delay(Duration::from_millis(args.delay_ms));
            }
            if let Some(k) = args.key {
                push = push.unique_key(KEYS[k]);
            }
            let got = engine("enqueue", t.queue.enqueue(push).await)?;
            let holder = args
                .key
                .and_then(|k| model.live_with_key(KEYS[k]))
                .map(|j| (j.view.id, j.view.state));
            match holder {
                Some((id, state)) => {
                    prop_assert!(got.existing, "a live job {id} holds the key; got {got:?}");
                    prop_assert_eq!((got.id.0, got.state), (id, state));
                }
                None => {
                    prop_assert!(!got.existing, "no live job holds the key; got {got:?}");
                    let newest = model.ids.iter().copied().max().unwrap_or(0);
                    prop_assert!(
                        got.id.0 > newest,
                        "ids are never reused: {got:?} after {newest}"
                    );
                    let state = model.push(args, json!({ "pushed": n }), got.id.0);
                    prop_assert_eq!(got.state, state);
                }
            }
        }
        Step::Dequeue { worker, limit } => {
            let worker = WORKERS[*worker];
            let expected: Vec<i64> = model
                .ready_order()
                .into_iter()
                .take(*limit as usize)
                .collect();
            let request = Dequeue::new(worker).limit(*limit);
            let claimed = engine("dequeue", t.queue.dequeue(request).await)?;
            let got: Vec<i64> = claimed.iter().map(|c| c.job.id.0).collect();
            prop_assert_eq!(&got, &expected, "dequeue by {} (limit {})", worker, limit);
            for c in claimed {
                let id = c.job.id.0;
                prop_assert!(
                    model.tokens.insert(c.lease.token),
                    "token {} handed out twice",
                    c.lease.token
                );
                model.claim(id, worker, c.lease.token);
                let view = &model.jobs[&id].view;
                prop_assert_eq!(c.job.state, JobState::Running);
                prop_assert_eq!(c.job.attempt, view.attempt);
                prop_assert_eq!(c.lease.worker.as_str(), worker);
                prop_assert_eq!(
                    Some(c.lease.expires_at.as_millisecond()),
                    view.lease_expires_at
                );
                model.leases.push(c.lease);
            }
        }
        Step::Lease { pick, call } => {
            let Some(lease) = pick_lease(model, pick) else {
                return Ok(());
            };
            let before = snapshot(&t.queue, lease.job).await?;
            let valid = model.holds(&lease);
            let result = call_lease(&t.queue, &lease, call, n).await;
            match result {
                Ok(out) => {
                    let latest = model.latest_token.get(&lease.job.0).copied();
                    prop_assert_eq!(
                        Some(lease.token),
                        latest,
                        "the engine accepted {:?} on job {} with a lease that is not the latest",
                        call,
                        lease.job
                    );
                    prop_assert!(
                        valid,
                        "the engine accepted {call:?} under a lease the model holds stale"
                    );
                    let expected = model.lease_call(lease.job.0, call, n);
                    prop_assert_eq!(out, expected, "{:?}", call);
                }
                Err(e) => {
                    prop_assert!(
                        !valid,
                        "the engine refused {call:?} under a current lease: {e}"
                    );
                    prop_assert_eq!(e.kind(), ErrorKind::LeaseLost, "{}", e);
                    let after = snapshot(&t.queue, lease.job).await?;
                    prop_assert_eq!(before, after, "a refused {:?} changed the job", call);
                }
            }
        }
        Step::ById { pick, call } => {
            if model.ids.is_empty() {
                return Ok(());
            }
            let id = JobId(*pick.get(&model.ids));
            let before = snapshot(&t.queue, id).await?;
            let result = call_by_id(&t.queue, id, call).await;
            match (model.id_call(id.0, call), result) {
                (Ok(expected), Ok(out)) => prop_assert_eq!(out, expected, "{:?} on {}", call, id),
                (Err(kind), Err(e)) => {
                    prop_assert_eq!(e.kind(), kind, "{:?} on {}: {}", call, id, e);
                    let after = snapshot(&t.queue, id).await?;
                    prop_assert_eq!(before, after, "a refused {:?} changed job {}", call, id);
                }
                (expected, got) => {
                    let got = got.map_err(|e| e.to_string());
                    return Err(TestCaseError::fail(format!(
                        "{call:?} on {id}: expected {expected:?}, got {got:?}"
                    )));
                }
            }
        }
        Step::Advance(ms) => {
            t.advance(Duration::from_millis(*ms));
            // A round trip through the writer: the batch it runs in has done the timed work for the new time.
            engine("round trip", t.queue.settle().await)?;
            model.now += *ms as i64;
            model.settle();
        }
        Step::Restart => {
            engine("close", t.queue.close(Duration::from_secs(10)).await)?;
            let mut options = QueueOptions {
                clock: Arc::new(t.clock.clone()),
                ..QueueOptions::default()
            };
            configure(&mut options);
            t.queue = engine("reopen", Queue::open_with(t.path(), options).await)?;
            // On PostgreSQL nothing is recovered at open (other nodes' workers may hold the running jobs): leases
            // stay, and expire as they would have.
            if !t.is_postgres() {
                model.recover();
            }
        }
    }
    Ok(())
}

fn pick_lease(model: &Model, pick: &LeasePick) -> Option<Lease> {
    let (LeasePick::Current(index) | LeasePick::Any(index)) = pick;
    if matches!(pick, LeasePick::Current(_)) {
        let current: Vec<&Lease> = model.leases.iter().filter(|l| model.holds(l)).collect();
        if !current.is_empty() {
            return Some((*index.get(&current)).clone());
        }
    }
    (!model.leases.is_empty()).then(|| index.get(&model.leases).clone())
}

/// Checks what must hold of any job, whatever the model says.
fn check_job(job: &Job, now: i64) -> TestCaseResult {
    let id = job.id;
    let open = job.history.iter().filter(|a| a.outcome.is_none()).count();
    let running = job.state == JobState::Running;
    prop_assert_eq!(
        open,
        usize::from(running),
        "job {}: one open attempt while running, else none",
        id
    );
    let counted = job
        .history
        .iter()
        .filter(|a| a.outcome != Some(AttemptOutcome::Released))
        .count();
    // A requeue starts the count again (the model checks the exact number), so the history may hold more.
    prop_assert!(
        job.attempt as usize <= counted,
        "job {}: attempt counts unreleased attempts at most",
        id
    );
    prop_assert!(
        job.attempt <= job.retry.max_attempts,
        "job {id}: attempts exceed max"
    );
    prop_assert_eq!(
        running,
        job.worker.is_some(),
        "job {}: a worker exactly while running",
        id
    );
    prop_assert_eq!(
        running,
        job.lease_expires_at.is_some(),
        "job {}: a lease exactly while running",
        id
    );
    let last = job.history.last();
    match job.state {
        JobState::Running => {
            prop_assert!(job.attempt >= 1);
            prop_assert_eq!(job.worker.as_ref(), last.map(|a| &a.worker));
            prop_assert!(
                job.lease_expires_at.unwrap().as_millisecond() > now,
                "job {id}: expired lease kept"
            );
        }
        JobState::Completed => {
            prop_assert_eq!(
                last.and_then(|a| a.outcome),
                Some(AttemptOutcome::Completed)
            );
        }
        JobState::Failed => {
            let outcome = last.and_then(|a| a.outcome);
            prop_assert!(
                matches!(
                    outcome,
                    Some(
                        AttemptOutcome::Failed
                            | AttemptOutcome::LeaseExpired
                            | AttemptOutcome::Crashed
                    )
                ),
                "job {id}: failed after {outcome:?}"
            );
            prop_assert!(job.failure_group.is_some());
        }
        JobState::Scheduled => prop_assert!(
            job.run_at.as_millisecond() > now,
            "job {id}: due but scheduled"
        ),
        JobState::Queued => {
            prop_assert!(job.run_at.as_millisecond() <= now, "job {id}: queued early")
        }
        JobState::Cancelled | JobState::Waiting => {}
    }
    Ok(())
}

/// Compares the whole queue with the model, and checks the invariants.
async fn check(t: &TestQueue, model: &Model) -> TestCaseResult {
    let filter = JobFilter {
        limit: 1000,
        ..JobFilter::default()
    };
    let page = engine("list", t.queue.list(filter).await)?;
    let mut listed: Vec<i64> = page.jobs.iter().map(|j| j.id.0).collect();
    listed.sort();
    let expected: Vec<i64> = model.jobs.keys().copied().collect();
    prop_assert_eq!(listed, expected, "the jobs that exist");
    let mut live_keys: HashMap<String, JobId> = HashMap::new();
    for (&id, modelled) in &model.jobs {
        let job = engine(&format!("get job {id}"), t.queue.get(JobId(id)).await)?;
        check_job(&job, model.now)?;
        prop_assert_eq!(
            JobView::of(&job),
            modelled.view.clone(),
            "job {}: the queue (left) against the model (right)",
            id
        );
        if let (true, Some(key)) = (job.state.is_live(), &job.unique_key) {
            let other = live_keys.insert(key.to_string(), job.id);
            prop_assert!(
                other.is_none(),
                "jobs {other:?} and {id} both hold key {key}"
            );
        }
    }
    for &id in &model.deleted {
        prop_assert!(
            snapshot(&t.queue, JobId(id)).await?.is_none(),
            "deleted job {id} is back"
        );
    }
    Ok(())
}

async fn run(steps: Vec<Step>) -> TestCaseResult {
    let mut t = TestQueue::with(configure).await;
    let mut model = Model {
        now: t.clock_now().as_millisecond(),
        ..Model::default()
    };
    for (n, step) in steps.iter().enumerate() {
        run_step(&mut t, &mut model, step, n)
            .await
            .map_err(|e| TestCaseError::fail(format!("step {n} {step:?}: {e}")))?;
        check(&t, &model)
            .await
            .map_err(|e| TestCaseError::fail(format!("after step {n} {step:?}: {e}")))?;
    }
    t.close().await;
    Ok(())
}

fn config() -> ProptestConfig {
    // PROPTEST_CASES raises the count for a longer hunt; the default keeps the suite fast.
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(48);
    ProptestConfig {
        cases,
        failure_persistence: None,
        max_shrink_iters: 2_000,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn queue_follows_the_model_and_keeps_its_invariants(steps in prop::collection::vec(step(), 1..70)) {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(run(steps))?;
    }
}
