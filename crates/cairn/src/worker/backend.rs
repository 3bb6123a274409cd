//! [`Backend`]: the calls a worker makes under a lease, so that one [`Worker`](crate::Worker) runs against the
//! embedded [`Queue`] or against a Cairn server (the `cairn-client` crate's `Client` implements it too).
//!
//! The futures are boxed so that workers and handlers hold a `dyn Backend` and stay free of type parameters.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use jiff::Timestamp;
use serde_json::Value;

use crate::error::Result;
use crate::job::JobState;
use crate::lease::Lease;
use crate::ops::claim::{ClaimedJob, Dequeue};
use crate::queue::Queue;

/// A boxed, sendable future, as [`Backend`]'s methods return.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Where a [`Worker`](crate::Worker) takes jobs from and reports to. Each method means what the
/// [`Queue`] method of the same name means, errors included.
pub trait Backend: Send + Sync + 'static {
    /// Takes ready jobs; see [`Queue::dequeue`].
    fn dequeue(&self, request: Dequeue) -> BoxFuture<'_, Result<Vec<ClaimedJob>>>;
    /// Extends a lease; see [`Queue::heartbeat`].
    fn heartbeat<'a>(
        &'a self,
        lease: &'a Lease,
        progress: Option<Value>,
    ) -> BoxFuture<'a, Result<Timestamp>>;
    /// Saves what a retry starts from; see [`Queue::checkpoint`].
    fn checkpoint<'a>(&'a self, lease: &'a Lease, data: Value) -> BoxFuture<'a, Result<Timestamp>>;
    /// Records progress; see [`Queue::update`].
    fn update<'a>(&'a self, lease: &'a Lease, progress: Value) -> BoxFuture<'a, Result<()>>;
    /// Completes the job; see [`Queue::finish`].
    fn finish<'a>(&'a self, lease: &'a Lease, data: Option<Value>) -> BoxFuture<'a, Result<()>>;
    /// Retries the job later; see [`Queue::retry`].
    fn retry<'a>(
        &'a self,
        lease: &'a Lease,
        error: &'a str,
        delay: Option<Duration>,
    ) -> BoxFuture<'a, Result<JobState>>;
    /// Fails the job for good; see [`Queue::fail`].
    fn fail<'a>(
        &'a self,
        lease: &'a Lease,
        group: &'a str,
        message: &'a str,
    ) -> BoxFuture<'a, Result<()>>;
    /// Gives the job back unfinished; see [`Queue::release`].
    fn release<'a>(&'a self, lease: &'a Lease) -> BoxFuture<'a, Result<()>>;
}

impl Backend for Queue {
    fn dequeue(&self, request: Dequeue) -> BoxFuture<'_, Result<Vec<ClaimedJob>>> {
        Box::pin(Queue::dequeue(self, request))
    }

    fn heartbeat<'a>(
        &'a self,
        lease: &'a Lease,
        progress: Option<Value>,
    ) -> BoxFuture<'a, Result<Timestamp>> {
        Box::pin(Queue::heartbeat(self, lease, progress))
    }

    fn checkpoint<'a>(&'a self, lease: &'a Lease, data: Value) -> BoxFuture<'a, Result<Timestamp>> {
        Box::pin(Queue::checkpoint(self, lease, data))
    }

    fn update<'a>(&'a self, lease: &'a Lease, progress: Value) -> BoxFuture<'a, Result<()>> {
        Box::pin(Queue::update(self, lease, progress))
    }

    fn finish<'a>(&'a self, lease: &'a Lease, data: Option<Value>) -> BoxFuture<'a, Result<()>> {
        Box::pin(Queue::finish(self, lease, data))
    }

    fn retry<'a>(
        &'a self,
        lease: &'a Lease,
        error: &'a str,
        delay: Option<Duration>,
    ) -> BoxFuture<'a, Result<JobState>> {
        Box::pin(Queue::retry(self, lease, error, delay))
    }

    fn fail<'a>(
        &'a self,
        lease: &'a Lease,
        group: &'a str,
        message: &'a str,
    ) -> BoxFuture<'a, Result<()>> {
        Box::pin(Queue::fail(self, lease, group, message))
    }

    fn release<'a>(&'a self, lease: &'a Lease) -> BoxFuture<'a, Result<()>> {
        Box::pin(Queue::release(self, lease))
    }
}
