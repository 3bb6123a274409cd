//! [`Target`]: the calls the scenarios make, on an embedded `Queue` or a server's `Client` (anything with
//! [`Jobs`]), so that every scenario runs unchanged on either, with the bench's own arguments filled in; the workers
//! scenario runs `cairn::Worker`s on the same handles through `Backend`.

use std::future::Future;
use std::time::Duration;

use cairn::{
    BatchCreated, ClaimedJob, CreateBatch, Dequeue, Enqueued, JobState, Jobs, Lease, Push,
    SqlQuery, SqlResult,
};

/// What the bench puts load on.
pub trait Target: Clone + Send + Sync + 'static {
    /// Enqueues one job.
    fn enqueue(&self, push: Push) -> impl Future<Output = cairn::Result<Enqueued>> + Send;

    /// Enqueues many jobs in one call.
    fn enqueue_batch(
        &self,
        jobs: Vec<Push>,
    ) -> impl Future<Output = cairn::Result<Vec<Enqueued>>> + Send;

    /// Creates a batch of jobs with callbacks.
    fn create_batch(
        &self,
        batch: CreateBatch,
    ) -> impl Future<Output = cairn::Result<BatchCreated>> + Send;

    /// Takes ready jobs, waiting as the request says.
    fn dequeue(
        &self,
        request: Dequeue,
    ) -> impl Future<Output = cairn::Result<Vec<ClaimedJob>>> + Send;

    /// Completes a job.
    fn finish(&self, lease: &Lease) -> impl Future<Output = cairn::Result<()>> + Send;

    /// Sends a job back to run again after `delay`.
    fn retry(
        &self,
        lease: &Lease,
        delay: Duration,
    ) -> impl Future<Output = cairn::Result<JobState>> + Send;

    /// Runs a read-only query over the queue's database (what the sustained scenario reads about storage).
    fn sql(&self, query: SqlQuery) -> impl Future<Output = cairn::Result<SqlResult>> + Send;
}

impl<T: Jobs + Clone + 'static> Target for T {
    fn enqueue(&self, push: Push) -> impl Future<Output = cairn::Result<Enqueued>> + Send {
        Jobs::enqueue(self, push)
    }

    fn enqueue_batch(
        &self,
        jobs: Vec<Push>,
    ) -> impl Future<Output = cairn::Result<Vec<Enqueued>>> + Send {
        Jobs::enqueue_batch(self, jobs)
    }

    fn create_batch(
        &self,
        batch: CreateBatch,
    ) -> impl Future<Output = cairn::Result<BatchCreated>> + Send {
        Jobs::create_batch(self, batch)
    }

    fn dequeue(
        &self,
        request: Dequeue,
    ) -> impl Future<Output = cairn::Result<Vec<ClaimedJob>>> + Send {
        Jobs::dequeue(self, request)
    }

    fn finish(&self, lease: &Lease) -> impl Future<Output = cairn::Result<()>> + Send {
        Jobs::finish(self, lease, None)
    }

    fn retry(
        &self,
        lease: &Lease,
        delay: Duration,
    ) -> impl Future<Output = cairn::Result<JobState>> + Send {
        Jobs::retry(self, lease, "bench: again later", Some(delay))
    }

    fn sql(&self, query: SqlQuery) -> impl Future<Output = cairn::Result<SqlResult>> + Send {
        Jobs::sql(self, query)
    }
}
