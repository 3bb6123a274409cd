//! What a handler is to the worker: the result a handler returns, and a handler with its future's type erased.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::worker::context::JobContext;
use crate::worker::job_error::JobError;

/// What a handler returns: `Ok(())` finishes the job; an error retries or fails it (see [`JobError`]).
pub type HandlerResult = Result<(), JobError>;

/// A boxed handler future.
pub(crate) type HandlerFuture = Pin<Box<dyn Future<Output = HandlerResult> + Send + 'static>>;

/// A type-erased handler.
pub(crate) type Handler = Arc<dyn Fn(JobContext) -> HandlerFuture + Send + Sync + 'static>;
