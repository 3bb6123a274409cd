//! [`JobContext`]: what a handler sees of the job it runs, and the calls it can make under the job's lease.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};

use jiff::Timestamp;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::Result;
use crate::job::Job;
use crate::lease::Lease;
use crate::names::{JobId, StepName};
use crate::worker::backend::Backend;
use crate::worker::job_error::JobError;

/// The job a handler runs, with its lease. Cheap to clone.
#[derive(Clone)]
pub struct JobContext {
    backend: Arc<dyn Backend>,
    job: Arc<Job>,
    lease: Lease,
    /// What the job finishes with when the handler returns `Ok`: its result, and data replacing its input.
    ending: Arc<Mutex<Ending>>,
    /// The steps recorded so far, and how often this run used each name.
    steps: Arc<Mutex<StepBook>>,
    /// Whether a sleep gave up the lease: the run is over, whatever the handler returns after it.
    suspended: Arc<std::sync::atomic::AtomicBool>,
}

/// The steps a run knows of: those recorded (by earlier attempts, and by this one), and how many times this run has
/// used each name, which numbers a name used again.
#[derive(Default)]
struct StepBook {
    recorded: HashMap<String, Value>,
    used: HashMap<String, u32>,
}

impl StepBook {
    /// The name the next use of `name` records under: `name` the first time in a run, then `name#2`, `name#3`, ….
    fn next_name(&mut self, name: &str) -> String {
        let used = self.used.entry(name.to_owned()).or_insert(0);
        *used += 1;
        match *used {
            1 => name.to_owned(),
            n => format!("{name}#{n}"),
        }
    }
}

/// A step's record or spawn that the queue refused: for good (group `step`) when the refusal is the input's (a result
/// over the limits, a bad push), which every retry would meet again, running the step's body again each time; a
/// retry otherwise (an outage, a lost lease, which then ends the run).
fn refused_for_good(error: crate::Error) -> JobError {
    match error.kind() {
        crate::ErrorKind::InvalidInput | crate::ErrorKind::InvalidState => {
            JobError::fail("step", error.to_string())
        }
        _ => JobError::from(error),
    }
}

/// A step opened with [`JobContext::open_step`].
#[derive(Debug, Clone, PartialEq)]
pub enum OpenStep {
    /// An earlier attempt recorded it: its result. Do not run it again.
    Recorded(Value),
    /// Not recorded yet: run it, and record it under this name.
    New(StepName),
}

/// What a handler set for its job's finish.
#[derive(Default)]
pub(crate) struct Ending {
    pub result: Option<Value>,
    pub data: Option<Value>,
}

impl JobContext {
    pub(crate) fn new(backend: Arc<dyn Backend>, job: Job, lease: Lease) -> Self {
        let recorded = job
            .steps
            .iter()
            .map(|s| (s.name.clone(), s.result.clone()))
            .collect();
        JobContext {
            backend,
            job: Arc::new(job),
            lease,
            ending: Arc::default(),
            steps: Arc::new(Mutex::new(StepBook {
                recorded,
                used: HashMap::new(),
            })),
            suspended: Arc::default(),
        }
    }

    /// The job as it was when this attempt started.
    pub fn job(&self) -> &Job {
        &self.job
    }

    /// The job's id.
    pub fn id(&self) -> JobId {
        self.job.id
    }

    /// The data this attempt starts from (the last checkpoint, or what was enqueued).
    pub fn data(&self) -> &Value {
        &self.job.data
    }

    /// The attempt number, 1 for the first.
    pub fn attempt(&self) -> u32 {
        self.job.attempt
    }

    /// The lease this attempt holds.
    pub fn lease(&self) -> &Lease {
        &self.lease
    }

    /// Extends the lease now (the worker also does this on its own), optionally reporting progress.
    ///
    /// # Errors
    /// [`ErrorKind::LeaseLost`](crate::ErrorKind::LeaseLost) if the job was taken away; stop working then.
    pub async fn heartbeat(&self, progress: Option<Value>) -> Result<Timestamp> {
        self.backend.heartbeat(&self.lease, progress).await
    }

    /// Saves `data` as what a retry starts from.
    ///
    /// # Errors
    /// [`ErrorKind::LeaseLost`](crate::ErrorKind::LeaseLost); oversized data.
    pub async fn checkpoint(&self, data: Value) -> Result<Timestamp> {
        self.backend.checkpoint(&self.lease, data).await
    }

    /// Runs `body` as step `name` of the job, once. The first time, `body` runs and its `Ok` value is recorded under
    /// the job's lease before it is returned. On every later attempt (after a crash, a deploy, a retry), the
    /// recorded value is returned and `body` does not run. A step that returns `Err` records nothing: the error is
    /// the handler's (so the job is retried by its policy), its message naming the step.
    ///
    /// A name used again in one run is numbered (`charge`, `charge#2`, …), so the steps of a loop are recorded, and
    /// found again, in the order the run reaches them: keep that order the same from run to run. A step name the
    /// handler no longer uses is ignored. The value is stored as JSON: at most the largest job data, and a job's
    /// steps hold at most [`MAX_STEPS`](crate::MAX_STEPS) results and eight times the largest job data in all.
    ///
    /// Only the step in flight when a worker dies may run twice: keep each step's effect idempotent where it can be
    /// (an idempotency key such as `"{job id}:{step}"` for a payment).
    ///
    /// # Errors
    /// The body's error (its message naming the step), and as a permanent failure (group `step`), a name that is
    /// empty, too long or holds `#` or a control character, a value that does not serialize, or a recorded value that
    /// does not read as a `T` (the handler changed the step's type: see docs/workflows.md on changing a workflow).
    /// A lost lease or a refused record is the handler's error too.
    pub async fn step<T, E, F, Fut>(&self, name: &str, body: F) -> std::result::Result<T, JobError>
    where
        T: Serialize + DeserializeOwned,
        E: Into<JobError>,
        F: FnOnce() -> Fut,
        Fut: Future<Output = std::result::Result<T, E>>,
    {
        let step_name = self.step_name(name)?;
        let full = step_name.as_str().to_owned();
        let recorded = self.book().recorded.get(&full).cloned();
        if let Some(value) = recorded {
            return serde_json::from_value(value).map_err(|e| {
                JobError::fail(
                    "step",
                    format!(
                        "step {full:?}: its recorded result does not read as this step's type: {e}"
                    ),
                )
            });
        }
        let value = body().await.map_err(|e| e.into().in_step(&full))?;
        let json = serde_json::to_value(&value).map_err(|e| {
            JobError::fail(
                "step",
                format!("step {full:?}: its result does not serialize: {e}"),
            )
        })?;
        let stored = self
            .backend
            .record_step(&self.lease, step_name, json.clone())
            .await
            .map_err(|e| refused_for_good(e).in_step(&full))?;
        self.book()
            .recorded
            .insert(full.clone(), stored.result.clone());
        if stored.result != json {
            // Recorded already under this name (a request sent again after its answer was lost): the first stands.
            return serde_json::from_value(stored.result).map_err(|e| {
                JobError::fail(
                    "step",
                    format!(
                        "step {full:?}: its recorded result does not read as this step's type: {e}"
                    ),
                )
            });
        }
        Ok(value)
    }

    /// Sleeps for `duration` as step `name`, without holding a worker: the first time, the wake time (the queue's
    /// now plus `duration`) is recorded and the job gives up its lease, and this returns an error for the handler to
    /// return at once (with `?`): the job runs again at that time, replaying its steps, and this attempt does not
    /// count. When the job runs again, the step finds its time passed and returns `Ok`. A name used again in one
    /// run is numbered, as for [`JobContext::step`].
    ///
    /// # Errors
    /// The error that suspends the job (return it); a lost lease; a bad name, as for [`JobContext::step`].
    pub async fn sleep(
        &self,
        name: &str,
        duration: std::time::Duration,
    ) -> std::result::Result<(), JobError> {
        self.sleep_as(name, crate::Wake::After(duration)).await
    }

    /// Sleeps until `until` as step `name`; see [`JobContext::sleep`].
    ///
    /// # Errors
    /// As [`JobContext::sleep`].
    pub async fn sleep_until(
        &self,
        name: &str,
        until: Timestamp,
    ) -> std::result::Result<(), JobError> {
        self.sleep_as(name, crate::Wake::At(until)).await
    }

    async fn sleep_as(&self, name: &str, wake: crate::Wake) -> std::result::Result<(), JobError> {
        let full = self.step_name(name)?;
        // Asked of the queue every time, even on a replay: its clock says whether the time has passed.
        let slept = self
            .backend
            .sleep(&self.lease, full.clone(), wake)
            .await
            .map_err(|e| JobError::from(e).in_step(full.as_str()))?;
        match slept {
            crate::Slept::Woke => Ok(()),
            crate::Slept::Suspended { until } => {
                Err(self.suspend(format!("sleeping until {until}")))
            }
        }
    }

    /// Waits as step `name` for a signal sent to `key` ([`Jobs::signal`](crate::Jobs::signal), `POST /v1/signals`,
    /// `cairn signal`), for at most `timeout` from when the step is first reached, without holding a worker. Answers
    /// `Some(data)` once the signal has come, or `None` once the time has passed without one, for the handler to
    /// decide. A signal sent before the job waits is kept and received here at once; each signal is received once.
    ///
    /// Otherwise the job gives up its lease (the attempt does not count), and this returns an error for the handler
    /// to return at once (with `?`): the job runs again when the signal comes or the time passes, replays its steps,
    /// and this step answers what came. A name used again in one run is numbered, as for [`JobContext::step`].
    ///
    /// # Errors
    /// The error that suspends the job (return it); a lost lease; a bad name or key; data that does not read as a
    /// `T` (group `step`).
    pub async fn wait_for_signal<T: DeserializeOwned>(
        &self,
        name: &str,
        key: &str,
        timeout: std::time::Duration,
    ) -> std::result::Result<Option<T>, JobError> {
        let full = self.step_name(name)?;
        let key_text = key.to_owned();
        let key =
            crate::SignalKey::parse(key).map_err(|e| JobError::fail("step", e.to_string()))?;
        let recorded = self.book().recorded.get(full.as_str()).cloned();
        let waited = match recorded {
            // Received or timed out on an earlier attempt: no request on a replay.
            Some(result) if result.get("signal").is_some() => {
                crate::SignalWait::Received(result["signal"].clone())
            }
            Some(result) if result.get("timed_out").is_some() => crate::SignalWait::TimedOut,
            _ => self
                .backend
                .wait_for_signal(&self.lease, full.clone(), key, timeout)
                .await
                .map_err(|e| JobError::from(e).in_step(full.as_str()))?,
        };
        match waited {
            crate::SignalWait::Received(data) => {
                let read = serde_json::from_value(data.clone()).map_err(|e| {
                    JobError::fail(
                        "step",
                        format!(
                            "step {:?}: the signal's data does not read as this step's type: {e}",
                            full.as_str()
                        ),
                    )
                })?;
                self.book().recorded.insert(
                    full.as_str().to_owned(),
                    serde_json::json!({ "signal": data }),
                );
                Ok(Some(read))
            }
            crate::SignalWait::TimedOut => {
                self.book().recorded.insert(
                    full.as_str().to_owned(),
                    serde_json::json!({ "timed_out": true }),
                );
                Ok(None)
            }
            crate::SignalWait::Suspended { until } => Err(self.suspend(format!(
                "waiting for signal {key} until {until}",
                key = key_text
            ))),
        }
    }

    /// Spawns `children` as step `name`: pushes them as the job's children and records their ids, so that a later
    /// attempt gets the ids back and pushes nothing. They start at once (they do not wait for the run to finish,
    /// nor go if it fails). Wait for them with [`JobContext::join`]. At most [`MAX_SPAWN`](crate::MAX_SPAWN) jobs.
    ///
    /// # Errors
    /// A push refused (naming its index, `jobs[3].queue`), a lost lease, a bad name (group `step`).
    pub async fn spawn(
        &self,
        name: &str,
        children: Vec<crate::Push>,
    ) -> std::result::Result<Vec<JobId>, JobError> {
        let full = self.step_name(name)?;
        let recorded = self.book().recorded.get(full.as_str()).cloned();
        if let Some(ids) = recorded.as_ref().and_then(|r| r.get("children")) {
            // Spawned by an earlier attempt: no request on a replay.
            let ids: Option<Vec<JobId>> = ids
                .as_array()
                .and_then(|ids| ids.iter().map(|id| id.as_i64().map(JobId)).collect());
            if let Some(ids) = ids {
                return Ok(ids);
            }
        }
        let ids = self
            .backend
            .spawn(&self.lease, full.clone(), children)
            .await
            .map_err(|e| refused_for_good(e).in_step(full.as_str()))?;
        let recorded =
            serde_json::json!({ "children": ids.iter().map(|id| id.0).collect::<Vec<_>>() });
        self.book()
            .recorded
            .insert(full.as_str().to_owned(), recorded);
        Ok(ids)
    }

    /// Waits as step `name` until every child of the job has ended, without holding a worker, and answers how each
    /// ended (oldest first): its id, state and result. While some have not, the job gives up its lease (the attempt
    /// does not count) and this returns an error for the handler to return at once (with `?`); the job runs again
    /// once they have, replays its steps, and this step answers. A child that fails holds the join, as it holds a
    /// parent (unless the job's children are its own, `Children::OfTheJob`): requeue it, or cancel it to go on.
    ///
    /// # Errors
    /// The error that suspends the job (return it); a lost lease; a bad name (group `step`).
    pub async fn join(&self, name: &str) -> std::result::Result<Vec<crate::JoinedChild>, JobError> {
        let full = self.step_name(name)?;
        let recorded = self.book().recorded.get(full.as_str()).cloned();
        if let Some(children) = recorded.as_ref().and_then(|r| r.get("children")) {
            // Joined by an earlier attempt: no request on a replay.
            let children: Option<Vec<crate::JoinedChild>> = children
                .as_array()
                .and_then(|c| c.iter().map(crate::JoinedChild::from_json).collect());
            if let Some(children) = children {
                return Ok(children);
            }
        }
        // Not recorded yet: asked of the queue, which knows whether the children have ended.
        let joined = self
            .backend
            .join(&self.lease, full.clone())
            .await
            .map_err(|e| JobError::from(e).in_step(full.as_str()))?;
        match joined {
            crate::Joined::Ended(children) => Ok(children),
            crate::Joined::Suspended => Err(self.suspend("waiting for its children".to_owned())),
        }
    }

    /// Opens step `name` for a handler that records it itself, in its own PostgreSQL transaction with
    /// [`Queue::record_step_in_postgres`](crate::Queue::record_step_in_postgres), so that the step's change to the
    /// application's tables and its record commit together: answers the result recorded by an earlier attempt, or
    /// the name (numbered, as [`JobContext::step`] numbers it) to record it under now.
    ///
    /// # Errors
    /// A bad name (group `step`), as for [`JobContext::step`].
    pub fn open_step(&self, name: &str) -> std::result::Result<OpenStep, JobError> {
        let full = self.step_name(name)?;
        Ok(match self.book().recorded.get(full.as_str()) {
            Some(result) => OpenStep::Recorded(result.clone()),
            None => OpenStep::New(full),
        })
    }

    /// Notes that the run gave up its lease, and the error that says so.
    fn suspend(&self, why: String) -> JobError {
        self.suspended
            .store(true, std::sync::atomic::Ordering::SeqCst);
        JobError {
            kind: crate::worker::job_error::JobErrorKind::Suspended { why },
        }
    }

    /// The name the next use of `name` in this run records under, checked.
    fn step_name(&self, name: &str) -> std::result::Result<StepName, JobError> {
        if name.contains('#') {
            return Err(JobError::fail(
                "step",
                format!(
                    "step {name:?}: a step's name must not hold '#', which numbers a name used again"
                ),
            ));
        }
        let full = self.book().next_name(name);
        StepName::parse(full).map_err(|e| JobError::fail("step", e.to_string()))
    }

    fn book(&self) -> std::sync::MutexGuard<'_, StepBook> {
        self.steps
            .lock()
            .expect("the steps' lock is never poisoned")
    }

    /// Reports progress for queries to show.
    ///
    /// # Errors
    /// [`ErrorKind::LeaseLost`](crate::ErrorKind::LeaseLost); oversized progress.
    pub async fn update(&self, progress: Value) -> Result<()> {
        self.backend.update(&self.lease, progress).await
    }

    /// Sets the job's result, when the handler returns `Ok`: what it produced, kept apart from its data (see
    /// [`Finish::result`](crate::Finish::result)), for whoever waits for the job or reads it later.
    pub fn set_result(&self, result: Value) {
        self.ending().result = Some(result);
    }

    /// Sets the data the job is finished with, replacing its input, when the handler returns `Ok`: what a
    /// recurring job's next run starts from.
    pub fn set_data(&self, data: Value) {
        self.ending().data = Some(data);
    }

    fn ending(&self) -> std::sync::MutexGuard<'_, Ending> {
        self.ending
            .lock()
            .expect("the ending's lock is never poisoned")
    }

    /// Whether a sleep of this run gave up the job's lease.
    pub(crate) fn suspended(&self) -> bool {
        self.suspended.load(std::sync::atomic::Ordering::SeqCst)
    }

    pub(crate) fn take_ending(&self) -> Ending {
        std::mem::take(&mut *self.ending())
    }
}

impl std::fmt::Debug for JobContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobContext")
            .field("job", &self.job.id)
            .field("attempt", &self.job.attempt)
            .finish()
    }
}
