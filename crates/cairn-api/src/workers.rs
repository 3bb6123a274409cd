//! The workers a queue has seen, and what each holds now.

use cairn::{Error, JobId, ListWorkers, WorkerId, WorkerInfo, WorkerStatus, WorkerStopped};
// Named only in doc links.
#[cfg(doc)]
use cairn::ErrorKind;
use jiff::Timestamp;
use serde::{Deserialize, Serialize};

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

use crate::EmptyBody;
use crate::errors::malformed;
use crate::route::{Answer, PathParam, RouteVisitor, route};
use crate::{READ, WORK};

/// A worker the queue has seen: when it took jobs or heartbeated, and what it holds now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct WorkerBody {
    /// The worker's id, as it named itself when taking jobs.
    pub id: String,
    /// When it first took jobs or heartbeated.
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub first_seen: Timestamp,
    /// When it last did (to a second).
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub last_seen: Timestamp,
    /// The jobs it holds, oldest first.
    pub jobs: Vec<i64>,
    /// Those of its jobs whose lease ran out and that the queue has not retried yet.
    pub stalled: Vec<i64>,
    /// Whether it is still about: `live` (seen within five minutes, or holding a lease that has not run out),
    /// `stopped` (it said it stops, as a worker shutting down or a one-off `cairn dequeue` does) or `gone` (silent
    /// for five minutes, holding no live lease).
    #[cfg_attr(feature = "openapi", schema(value_type = crate::rules::WorkerStatus))]
    pub status: String,
}

impl From<&WorkerInfo> for WorkerBody {
    fn from(w: &WorkerInfo) -> Self {
        WorkerBody {
            id: w.id.to_string(),
            first_seen: w.first_seen,
            last_seen: w.last_seen,
            jobs: w.jobs.iter().map(|j| j.0).collect(),
            stalled: w.stalled.iter().map(|j| j.0).collect(),
            status: w.status.as_str().to_owned(),
        }
    }
}

impl WorkerBody {
    /// The engine's worker.
    ///
    /// # Errors
    /// [`ErrorKind::Unavailable`] when the body does not hold a valid worker id.
    pub fn to_worker(&self) -> Result<WorkerInfo, Error> {
        Ok(WorkerInfo {
            id: WorkerId::parse(self.id.as_str()).map_err(malformed)?,
            first_seen: self.first_seen,
            last_seen: self.last_seen,
            jobs: self.jobs.iter().copied().map(JobId).collect(),
            stalled: self.stalled.iter().copied().map(JobId).collect(),
            status: WorkerStatus::parse(&self.status)
                .ok_or_else(|| malformed(format_args!("a worker status {:?}", self.status)))?,
        })
    }
}

/// Every worker the queue remembers, by id.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct WorkerListBody {
    /// The workers.
    pub workers: Vec<WorkerBody>,
}

/// The `{worker}` of a worker's path.
pub const WORKER: PathParam = PathParam {
    name: "worker",
    description: "The worker's id",
    rule: "WorkerId",
};

/// The workers' routes declared here, for [`visit_routes`](crate::visit_routes).
pub(crate) fn visit_worker_routes(visitor: &mut impl RouteVisitor) {
    visitor.visit::<WorkerStopped>();
    visitor.visit::<ListWorkers>();
}

route! {
    WorkerStopped: Post "/v1/workers/{worker}/stop", params [WORKER], tag "workers", id "stop_worker",
        access WORK, reach Queues,
    summary "A worker says it stops: the activity log shows it stopped rather than lost. Its next dequeue starts it \
        again.",
    done "Noted",
    errors [(400, "A bad worker id")],
    path |r| [r.worker],
    no body,
    answer EmptyBody,
    from |path| Ok(WorkerStopped { worker: path.text("worker")?.to_owned() }),
}

impl Answer<Vec<WorkerInfo>> for WorkerListBody {
    fn from_output(workers: Vec<WorkerInfo>) -> Self {
        WorkerListBody {
            workers: workers.iter().map(WorkerBody::from).collect(),
        }
    }

    fn into_output(self) -> Result<Vec<WorkerInfo>, Error> {
        self.workers.iter().map(WorkerBody::to_worker).collect()
    }
}

route! {
    ListWorkers: Get "/v1/workers", params [], tag "workers", id "list_workers", access READ, reach Server,
    summary "Every worker the queue remembers, by id: when it was first and last seen (taking jobs or \
        heartbeating), the jobs it holds, and which of those stalled (their lease ran out and the queue has not \
        retried them yet).",
    done "The workers",
    errors [],
    path |_r| [],
    no body,
    answer WorkerListBody,
    from |_received| Ok(ListWorkers),
}
