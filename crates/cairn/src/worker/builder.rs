//! [`WorkerBuilder`] collects handlers and settings; [`Worker`] is the running worker and how to stop it.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::error::{Error, ErrorKind, Result};
use crate::names::{JobName, NamePattern, QueueName, WorkerId};
use crate::ops::claim::QueueOrder;
use crate::ops::limits::MAX_DEQUEUE;
use crate::worker::backend::Backend;
use crate::worker::context::JobContext;
use crate::worker::handler::{Handler, HandlerResult};
use crate::worker::report::WorkerReport;
use crate::worker::run_loop::{self, Settings};

/// Settings and handlers for a [`Worker`].
pub struct WorkerBuilder {
    backend: Arc<dyn Backend>,
    id: String,
    queues: Vec<String>,
    /// One per queue, 1 unless given by `weighted_queue`.
    weights: Vec<u32>,
    order: QueueOrder,
    handlers: BTreeMap<String, Handler>,
    min_concurrency: u32,
    max_concurrency: u32,
    wait: Duration,
}

/// A running worker. Stop it with [`Worker::stop`]; dropping it stops taking jobs but does not wait.
pub struct Worker {
    stop: watch::Sender<Option<Duration>>,
    task: Option<JoinHandle<WorkerReport>>,
    id: WorkerId,
}

impl Worker {
    /// Starts building a worker called `id` that takes jobs from `backend`: an embedded [`Queue`](crate::Queue),
    /// or a server's client.
    pub fn builder<B: Backend + Clone>(backend: &B, id: impl Into<String>) -> WorkerBuilder {
        WorkerBuilder {
            backend: Arc::new(backend.clone()),
            id: id.into(),
            queues: Vec::new(),
            weights: Vec::new(),
            order: QueueOrder::Ordered,
            handlers: BTreeMap::new(),
            min_concurrency: 0,
            max_concurrency: 4,
            wait: Duration::from_secs(30),
        }
    }

    /// The worker's id.
    pub fn id(&self) -> &WorkerId {
        &self.id
    }

    /// Stops gracefully: takes no new jobs, lets running jobs finish until `deadline`, then stops the rest and
    /// gives their jobs back to the queue (those attempts do not count).
    ///
    /// # Errors
    /// [`ErrorKind::Closed`] if the worker's task ended abnormally.
    pub async fn stop(mut self, deadline: Duration) -> Result<WorkerReport> {
        let _ = self.stop.send(Some(deadline));
        let task = self.task.take().expect("a worker is stopped once");
        task.await.map_err(|e| {
            Error::new(
                ErrorKind::Closed,
                format!("the worker task ended abnormally: {e}"),
            )
        })
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if self.task.is_some() {
            tracing::warn!(worker = %self.id, "worker dropped without Worker::stop; it stops taking jobs now");
            let _ = self.stop.send(Some(Duration::ZERO));
        }
    }
}

impl WorkerBuilder {
    /// Runs `handler` for jobs named `name` (an exact name, not a pattern).
    pub fn handler<F, Fut>(mut self, name: impl Into<String>, handler: F) -> Self
    where
        F: Fn(JobContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult> + Send + 'static,
    {
        let handler: Handler = Arc::new(move |ctx| Box::pin(handler(ctx)));
        self.handlers.insert(name.into(), handler);
        self
    }

    /// Adds a queue to take jobs from; `default` if none is added.
    pub fn queue(mut self, queue: impl Into<String>) -> Self {
        self.queues.push(queue.into());
        self.weights.push(1);
        self
    }

    /// Adds a queue with a weight, and takes from the queues in weighted round-robin: per turn, each queue gives
    /// up to its weight in jobs (see [`Dequeue::weights`](crate::Dequeue)).
    pub fn weighted_queue(mut self, queue: impl Into<String>, weight: u32) -> Self {
        self.queues.push(queue.into());
        self.weights.push(weight);
        self.order = QueueOrder::RoundRobin;
        self
    }

    /// How to pick among several queues.
    pub fn order(mut self, order: QueueOrder) -> Self {
        self.order = order;
        self
    }

    /// The most total job weight running at once (4 by default). A job counts until its handler returns; its
    /// finish is reported meanwhile, with others', while the worker takes more.
    pub fn max_concurrency(mut self, max: u32) -> Self {
        self.max_concurrency = max;
        self
    }

    /// Takes more jobs only when the running weight falls below this (the maximum by default), so that jobs are
    /// taken in batches rather than one by one.
    pub fn min_concurrency(mut self, min: u32) -> Self {
        self.min_concurrency = min;
        self
    }

    /// How long one request for jobs waits before asking again (30 s by default). Jobs arrive the moment they are
    /// ready either way; this only bounds each request.
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = wait;
        self
    }

    /// Starts the worker on the current tokio runtime.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] naming the bad setting (no handlers, a bad name, concurrency out of range).
    pub fn start(self) -> Result<Worker> {
        let id = WorkerId::parse(self.id)?;
        if self.handlers.is_empty() {
            return Err(Error::invalid(
                "handlers",
                "a worker needs at least one handler",
            ));
        }
        let patterns = self
            .handlers
            .keys()
            .map(|name| JobName::parse(name.as_str()).map(|name| NamePattern::exact(&name)))
            .collect::<Result<Vec<_>>>()?;
        // Weights matter only when one differs from 1; then they must go with round-robin order.
        let weights = if self.weights.iter().any(|w| *w != 1) {
            if self.order != QueueOrder::RoundRobin {
                return Err(Error::invalid(
                    "weights",
                    "weighted queues need round-robin order",
                ));
            }
            if let Some(bad) = self
                .weights
                .iter()
                .find(|w| !(1..=crate::ops::claim::MAX_QUEUE_WEIGHT).contains(*w))
            {
                return Err(Error::invalid(
                    "weights",
                    format!(
                        "each must be between 1 and {}, got {bad}",
                        crate::ops::claim::MAX_QUEUE_WEIGHT
                    ),
                ));
            }
            self.weights
        } else {
            Vec::new()
        };
        let mut queues = self
            .queues
            .into_iter()
            .map(QueueName::parse)
            .collect::<Result<Vec<_>>>()?;
        if queues.is_empty() {
            queues.push(QueueName::default());
        }
        if !(1..=MAX_DEQUEUE).contains(&self.max_concurrency) {
            return Err(Error::invalid(
                "max_concurrency",
                format!(
                    "must be between 1 and {MAX_DEQUEUE}, got {}",
                    self.max_concurrency
                ),
            ));
        }
        let min = if self.min_concurrency == 0 {
            self.max_concurrency
        } else {
            self.min_concurrency
        };
        if min > self.max_concurrency {
            return Err(Error::invalid(
                "min_concurrency",
                format!(
                    "must not exceed max_concurrency ({}), got {min}",
                    self.max_concurrency
                ),
            ));
        }
        let (stop, stop_rx) = watch::channel(None);
        let settings = Settings {
            id: id.clone(),
            queues,
            order: self.order,
            weights,
            handlers: self.handlers,
            patterns,
            min_concurrency: min,
            max_concurrency: self.max_concurrency,
            wait: self.wait.min(crate::ops::claim::MAX_WAIT),
        };
        let task = tokio::spawn(run_loop::run(self.backend, settings, stop_rx));
        Ok(Worker {
            stop,
            task: Some(task),
            id,
        })
    }
}
