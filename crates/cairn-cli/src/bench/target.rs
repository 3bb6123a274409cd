//! [`Target`]: the calls the scenarios make, on an embedded [`Queue`] or a server's [`Client`], so that every
//! scenario runs unchanged on either. `cairn::Backend` has no enqueue, hence this trait of the bench's own; the
//! workers scenario runs `cairn::Worker`s on the same handles through `Backend`.

use std::future::Future;
use std::time::Duration;

use cairn::{
    BatchCreated, ClaimedJob, CreateBatch, Dequeue, Enqueued, JobState, Lease, Push, Queue,
    SqlQuery, SqlResult,
};
use cairn_client::Client;

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

impl Target for Queue {
    fn enqueue(&self, push: Push) -> impl Future<Output = cairn::Result<Enqueued>> + Send {
        Queue::enqueue(self, push)
    }

    fn enqueue_batch(
        &self,
        jobs: Vec<Push>,
    ) -> impl Future<Output = cairn::Result<Vec<Enqueued>>> + Send {
        Queue::enqueue_batch(self, jobs)
    }

    fn create_batch(
        &self,
        batch: CreateBatch,
    ) -> impl Future<Output = cairn::Result<BatchCreated>> + Send {
        Queue::create_batch(self, batch)
    }

    fn dequeue(
        &self,
        request: Dequeue,
    ) -> impl Future<Output = cairn::Result<Vec<ClaimedJob>>> + Send {
        Queue::dequeue(self, request)
    }

    fn finish(&self, lease: &Lease) -> impl Future<Output = cairn::Result<()>> + Send {
        Queue::finish(self, lease, None)
    }

    fn retry(
        &self,
        lease: &Lease,
        delay: Duration,
    ) -> impl Future<Output = cairn::Result<JobState>> + Send {
        Queue::retry(self, lease, "bench: again later", Some(delay))
    }

    fn sql(&self, query: SqlQuery) -> impl Future<Output = cairn::Result<SqlResult>> + Send {
        Queue::sql(self, query)
    }
}

impl Target for Client {
    fn enqueue(&self, push: Push) -> impl Future<Output = cairn::Result<Enqueued>> + Send {
        Client::enqueue(self, push)
    }

    fn enqueue_batch(
        &self,
        jobs: Vec<Push>,
    ) -> impl Future<Output = cairn::Result<Vec<Enqueued>>> + Send {
        Client::enqueue_batch(self, jobs)
    }

    fn create_batch(
        &self,
        batch: CreateBatch,
    ) -> impl Future<Output = cairn::Result<BatchCreated>> + Send {
        Client::create_batch(self, batch)
    }

    fn dequeue(
        &self,
        request: Dequeue,
    ) -> impl Future<Output = cairn::Result<Vec<ClaimedJob>>> + Send {
        Client::dequeue(self, request)
    }

    fn finish(&self, lease: &Lease) -> impl Future<Output = cairn::Result<()>> + Send {
        Client::finish(self, lease, None)
    }

    fn retry(
        &self,
        lease: &Lease,
        delay: Duration,
    ) -> impl Future<Output = cairn::Result<JobState>> + Send {
        Client::retry(self, lease, "bench: again later", Some(delay))
    }

    fn sql(&self, query: SqlQuery) -> impl Future<Output = cairn::Result<SqlResult>> + Send {
        Client::sql(self, query)
    }
}
