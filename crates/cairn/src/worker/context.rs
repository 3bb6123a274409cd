//! [`JobContext`]: what a handler sees of the job it runs, and the calls it can make under the job's lease.

use std::sync::{Arc, Mutex};

use jiff::Timestamp;
use serde_json::Value;

use crate::error::Result;
use crate::job::{Job, JobId};
use crate::lease::Lease;
use crate::worker::backend::Backend;

/// The job a handler runs, with its lease. Cheap to clone.
#[derive(Clone)]
pub struct JobContext {
    backend: Arc<dyn Backend>,
    job: Arc<Job>,
    lease: Lease,
    result: Arc<Mutex<Option<Value>>>,
}

impl JobContext {
    pub(crate) fn new(backend: Arc<dyn Backend>, job: Job, lease: Lease) -> Self {
        JobContext {
            backend,
            job: Arc::new(job),
            lease,
            result: Arc::new(Mutex::new(None)),
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

    /// Sets the data the job is finished with, replacing its input, when the handler returns `Ok`.
    pub fn set_result(&self, data: Value) {
        *self.result.lock().expect("result lock is never poisoned") = Some(data);
    }

    pub(crate) fn take_result(&self) -> Option<Value> {
        self.result
            .lock()
            .expect("result lock is never poisoned")
            .take()
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
