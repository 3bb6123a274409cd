//! [`Backend`]: the calls a worker makes under a lease, so that one [`Worker`](crate::Worker) runs against the
//! embedded [`Queue`](crate::Queue) or against a Cairn server (the `cairn-client` crate's `Client` implements it too).
//!
//! The futures are boxed so that workers and handlers hold a `dyn Backend` and stay free of type parameters.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use jiff::Timestamp;
use serde_json::Value;

use crate::error::Result;
use crate::job::{JobState, Step};
use crate::lease::Lease;
use crate::names::{JobId, SignalKey, StepName};
use crate::ops::claim::{ClaimedJob, Dequeue};
use crate::ops::fan_out::Joined;
use crate::ops::finish::{Finish, FinishAndTake};
use crate::ops::push::Push;
use crate::ops::signal::SignalWait;
use crate::ops::step::{Slept, Wake};

/// A boxed, sendable future, as [`Backend`]'s methods return.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Where a [`Worker`](crate::Worker) takes jobs from and reports to. Each method means what the
/// [`Jobs`](crate::Jobs) call of the same name means, errors included. A backend that wraps another (a test double,
/// a metering layer) calls the inner one as `Jobs::finish(&self.inner, …)`: with both traits in scope, a method call
/// that both name must say which it means.
pub trait Backend: Send + Sync + 'static {
    /// Takes ready jobs; see [`Jobs::dequeue`](crate::Jobs::dequeue).
    fn dequeue(&self, request: Dequeue) -> BoxFuture<'_, Result<Vec<ClaimedJob>>>;
    /// Extends a lease; see [`Jobs::heartbeat`](crate::Jobs::heartbeat).
    fn heartbeat<'a>(
        &'a self,
        lease: &'a Lease,
        progress: Option<Value>,
    ) -> BoxFuture<'a, Result<Timestamp>>;
    /// Saves what a retry starts from; see [`Jobs::checkpoint`](crate::Jobs::checkpoint).
    fn checkpoint<'a>(&'a self, lease: &'a Lease, data: Value) -> BoxFuture<'a, Result<Timestamp>>;
    /// Records a step's result; see [`Jobs::record_step`](crate::Jobs::record_step).
    fn record_step<'a>(
        &'a self,
        lease: &'a Lease,
        name: StepName,
        result: Value,
    ) -> BoxFuture<'a, Result<Step>>;
    /// Sleeps as a step; see [`Jobs::sleep`](crate::Jobs::sleep).
    fn sleep<'a>(
        &'a self,
        lease: &'a Lease,
        name: StepName,
        wake: Wake,
    ) -> BoxFuture<'a, Result<Slept>>;
    /// Waits for a signal as a step; see [`Jobs::wait_for_signal`](crate::Jobs::wait_for_signal).
    fn wait_for_signal<'a>(
        &'a self,
        lease: &'a Lease,
        name: StepName,
        key: SignalKey,
        timeout: std::time::Duration,
    ) -> BoxFuture<'a, Result<SignalWait>>;
    /// Spawns child jobs as a step; see [`Jobs::spawn`](crate::Jobs::spawn).
    fn spawn<'a>(
        &'a self,
        lease: &'a Lease,
        name: StepName,
        children: Vec<Push>,
    ) -> BoxFuture<'a, Result<Vec<JobId>>>;
    /// Waits for the job's children as a step; see [`Jobs::join`](crate::Jobs::join).
    fn join<'a>(&'a self, lease: &'a Lease, name: StepName) -> BoxFuture<'a, Result<Joined>>;
    /// Records progress; see [`Jobs::update`](crate::Jobs::update).
    fn update<'a>(&'a self, lease: &'a Lease, progress: Value) -> BoxFuture<'a, Result<()>>;
    /// Completes the job; see [`Jobs::finish`](crate::Jobs::finish).
    fn finish<'a>(&'a self, lease: &'a Lease, data: Option<Value>) -> BoxFuture<'a, Result<()>>;
    /// Completes many jobs in one call, answering each; see [`Jobs::finish_many`](crate::Jobs::finish_many).
    fn finish_many(&self, finishes: Vec<Finish>) -> BoxFuture<'_, Result<Vec<Result<()>>>>;
    /// [`Backend::finish_many`] for finishes whose caller does not wait on the answers to go on: a
    /// [`Worker`](crate::Worker)'s, whose slots are free already. The embedded queue may hold their fsync for a
    /// moment so that more finishes share it, and answers `taken` as its writer takes them up, so that the caller
    /// may send more while these are written and wait for the disk. By default, `finish_many`, with `taken`
    /// dropped at once.
    #[doc(hidden)]
    fn finish_many_unhurried(
        &self,
        finishes: Vec<Finish>,
        taken: tokio::sync::oneshot::Sender<()>,
    ) -> BoxFuture<'_, Result<Vec<Result<()>>>> {
        drop(taken);
        self.finish_many(finishes)
    }
    /// Whether [`Backend::finish_many_unhurried`] may hold finishes for company, so that a worker should send the
    /// finishes of jobs ending meanwhile at once rather than after the answer (false by default: over HTTP, one call
    /// at a time makes fewer requests).
    #[doc(hidden)]
    fn holds_finishes_for_company(&self) -> bool {
        false
    }
    /// Completes jobs and takes the next ones in one call; see [`Jobs::finish_and_take`](crate::Jobs::finish_and_take). By default, the two
    /// calls at once.
    fn finish_and_take(
        &self,
        finishes: Vec<Finish>,
        take: Dequeue,
    ) -> BoxFuture<'_, Result<FinishAndTake>> {
        Box::pin(async move {
            let (finished, taken) = tokio::join!(self.finish_many(finishes), self.dequeue(take));
            Ok(FinishAndTake { finished, taken })
        })
    }
    /// Retries the job later; see [`Jobs::retry`](crate::Jobs::retry).
    fn retry<'a>(
        &'a self,
        lease: &'a Lease,
        error: &'a str,
        delay: Option<Duration>,
    ) -> BoxFuture<'a, Result<JobState>>;
    /// Fails the job for good; see [`Jobs::fail`](crate::Jobs::fail).
    fn fail<'a>(
        &'a self,
        lease: &'a Lease,
        group: &'a str,
        message: &'a str,
    ) -> BoxFuture<'a, Result<()>>;
    /// Gives the job back unfinished; see [`Jobs::release`](crate::Jobs::release).
    fn release<'a>(&'a self, lease: &'a Lease) -> BoxFuture<'a, Result<()>>;
    /// Says the worker stops; see [`Jobs::worker_stopped`](crate::Jobs::worker_stopped).
    fn worker_stopped<'a>(&'a self, worker: &'a str) -> BoxFuture<'a, Result<()>>;
}

/// Implements [`Backend`] for a type that has [`Jobs`](crate::Jobs) (the embedded queue, the HTTP client): each call
/// is its [`Jobs`](crate::Jobs) call of the same name, so each implementation is this one line.
#[macro_export]
macro_rules! impl_backend_by_jobs {
    ($type:ty $(; $($extra:item)*)?) => {
        impl $crate::Backend for $type {
            $($($extra)*)?

            fn dequeue(
                &self,
                request: $crate::Dequeue,
            ) -> $crate::BoxFuture<'_, $crate::Result<Vec<$crate::ClaimedJob>>> {
                <$type as $crate::Jobs>::dequeue(self, request)
            }

            fn heartbeat<'a>(
                &'a self,
                lease: &'a $crate::Lease,
                progress: Option<$crate::__private::Value>,
            ) -> $crate::BoxFuture<'a, $crate::Result<$crate::__private::Timestamp>> {
                <$type as $crate::Jobs>::heartbeat(self, lease, progress)
            }

            fn checkpoint<'a>(
                &'a self,
                lease: &'a $crate::Lease,
                data: $crate::__private::Value,
            ) -> $crate::BoxFuture<'a, $crate::Result<$crate::__private::Timestamp>> {
                <$type as $crate::Jobs>::checkpoint(self, lease, data)
            }

            fn record_step<'a>(
                &'a self,
                lease: &'a $crate::Lease,
                name: $crate::StepName,
                result: $crate::__private::Value,
            ) -> $crate::BoxFuture<'a, $crate::Result<$crate::Step>> {
                <$type as $crate::Jobs>::record_step(self, lease, name, result)
            }

            fn sleep<'a>(
                &'a self,
                lease: &'a $crate::Lease,
                name: $crate::StepName,
                wake: $crate::Wake,
            ) -> $crate::BoxFuture<'a, $crate::Result<$crate::Slept>> {
                <$type as $crate::Jobs>::sleep(self, lease, name, wake)
            }

            fn wait_for_signal<'a>(
                &'a self,
                lease: &'a $crate::Lease,
                name: $crate::StepName,
                key: $crate::SignalKey,
                timeout: std::time::Duration,
            ) -> $crate::BoxFuture<'a, $crate::Result<$crate::SignalWait>> {
                <$type as $crate::Jobs>::wait_for_signal(self, lease, name, key, timeout)
            }

            fn spawn<'a>(
                &'a self,
                lease: &'a $crate::Lease,
                name: $crate::StepName,
                children: Vec<$crate::Push>,
            ) -> $crate::BoxFuture<'a, $crate::Result<Vec<$crate::JobId>>> {
                <$type as $crate::Jobs>::spawn(self, lease, name, children)
            }

            fn join<'a>(
                &'a self,
                lease: &'a $crate::Lease,
                name: $crate::StepName,
            ) -> $crate::BoxFuture<'a, $crate::Result<$crate::Joined>> {
                <$type as $crate::Jobs>::join(self, lease, name)
            }

            fn update<'a>(
                &'a self,
                lease: &'a $crate::Lease,
                progress: $crate::__private::Value,
            ) -> $crate::BoxFuture<'a, $crate::Result<()>> {
                <$type as $crate::Jobs>::update(self, lease, progress)
            }

            fn finish<'a>(
                &'a self,
                lease: &'a $crate::Lease,
                data: Option<$crate::__private::Value>,
            ) -> $crate::BoxFuture<'a, $crate::Result<()>> {
                <$type as $crate::Jobs>::finish(self, lease, data)
            }

            fn finish_many(
                &self,
                finishes: Vec<$crate::Finish>,
            ) -> $crate::BoxFuture<'_, $crate::Result<Vec<$crate::Result<()>>>> {
                <$type as $crate::Jobs>::finish_many(self, finishes)
            }

            fn finish_and_take(
                &self,
                finishes: Vec<$crate::Finish>,
                take: $crate::Dequeue,
            ) -> $crate::BoxFuture<'_, $crate::Result<$crate::FinishAndTake>> {
                <$type as $crate::Jobs>::finish_and_take(self, finishes, take)
            }

            fn retry<'a>(
                &'a self,
                lease: &'a $crate::Lease,
                error: &'a str,
                delay: Option<std::time::Duration>,
            ) -> $crate::BoxFuture<'a, $crate::Result<$crate::JobState>> {
                <$type as $crate::Jobs>::retry(self, lease, error, delay)
            }

            fn fail<'a>(
                &'a self,
                lease: &'a $crate::Lease,
                group: &'a str,
                message: &'a str,
            ) -> $crate::BoxFuture<'a, $crate::Result<()>> {
                <$type as $crate::Jobs>::fail(self, lease, group, message)
            }

            fn release<'a>(
                &'a self,
                lease: &'a $crate::Lease,
            ) -> $crate::BoxFuture<'a, $crate::Result<()>> {
                <$type as $crate::Jobs>::release(self, lease)
            }

            fn worker_stopped<'a>(
                &'a self,
                worker: &'a str,
            ) -> $crate::BoxFuture<'a, $crate::Result<()>> {
                <$type as $crate::Jobs>::worker_stopped(self, worker)
            }
        }
    };
}
