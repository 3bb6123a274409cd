//! [`JobContext`]: what a handler sees of the job it runs, and the calls it can make under the job's lease.

use std::sync::{Arc, Mutex};

use jiff::Timestamp;
use serde_json::Value;

use crate::error::Result;
use crate::job::Job;
use crate::lease::Lease;
use crate::names::JobId;
use crate::worker::backend::Backend;

/// The job a handler runs, with its lease. Cheap to clone.
#[derive(Clone)]
pub struct JobContext {
    backend: Arc<dyn Backend>,
    job: Arc<Job>,
    lease: Lease,
    /// What the job finishes with when the handler returns `Ok`: its result, and data replacing its input.
    ending: Arc<Mutex<Ending>>,
}

/// What a handler set for its job's finish.
#[derive(Default)]
pub(crate) struct Ending {
    pub result: Option<Value>,
    pub data: Option<Value>,
}

impl JobContext {
    pub(crate) fn new(backend: Arc<dyn Backend>, job: Job, lease: Lease) -> Self {
        JobContext {
            backend,
            job: Arc::new(job),
            lease,
            ending: Arc::default(),
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
