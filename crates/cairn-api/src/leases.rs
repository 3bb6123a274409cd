//! Taking jobs and the calls made under a lease: dequeue, heartbeat, checkpoint, update, finish (one job or many, or
//! on to a next queue), retry, fail and release. The lease's token is checked by the engine, never here.

use cairn::{
    Checkpoint, ClaimedJob, Continue, Dequeue, Error, ErrorKind, Fail, Finish, FinishMany,
    FinishedMany, Heartbeat, JobId, Lease, QueueOrder, Release, Retry, RunUsage, Update, WorkerId,
};
use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::Value;

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

use crate::Named;
use crate::WORK;
use crate::errors::{ErrorDetail, malformed};
use crate::jobs::{JobBody, UsageBody};
use crate::millis::{millis, to_millis};
use crate::route::{Answer, JOB_ID, RouteVisitor, WhenStopping, route};
use crate::{EmptyBody, StateBody};

/// A request for ready jobs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct DequeueRequest {
    /// Who takes the jobs; recorded in their history.
    #[cfg_attr(feature = "openapi", schema(value_type = crate::rules::WorkerId))]
    pub worker: String,
    /// Queues to take from, at most 1,000; `["default"]` when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<crate::rules::QueueName>, max_items = 1000))]
    pub queues: Vec<String>,
    /// `ordered` (earlier queues first, the default) or `round_robin`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<crate::rules::QueueOrder>))]
    pub order: Option<String>,
    /// With `round_robin`, how many jobs each queue gives per turn, one weight per entry of `queues` (1 each when
    /// empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<crate::rules::QueueWeight>))]
    pub weights: Vec<u32>,
    /// Job name patterns (GLOB: `email.*`; a `*`, `?` or `[` that a name holds is written `[*]`, `[?]`, `[[]`), at
    /// most 1,000; any name when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<crate::rules::NamePattern>, max_items = 1000))]
    pub names: Vec<String>,
    /// The most jobs to take; 1 when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 1000))]
    pub limit: Option<u32>,
    /// The most total weight to take.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(minimum = 1, format = "uint32", maximum = 4_294_967_295_u32)
    )]
    pub max_weight: Option<u32>,
    /// Wait up to this long for a job (a long poll), returning the moment one is ready; 0 or absent answers at
    /// once. The server caps it at its `max_wait`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(format = "uint64", maximum = 18_446_744_073_709_551_615_u64)
    )]
    pub wait_ms: Option<u64>,
    /// How long these leases last before their first heartbeat, instead of each job's lease timeout (for a
    /// worker that cannot heartbeat); heartbeats never shorten a lease.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 100, maximum = 86_400_000))]
    pub lease_timeout_ms: Option<u64>,
    /// Only jobs of exactly this priority.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
}

impl DequeueRequest {
    /// The engine's request. A server cuts its wait to its own longest ([`Route::limit`](crate::Route::limit)).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] naming `order` when it is neither `ordered` nor `round_robin`.
    pub fn into_dequeue(self) -> Result<Dequeue, Error> {
        let order = match self.order.as_deref() {
            None | Some("ordered") => QueueOrder::Ordered,
            Some("round_robin") => QueueOrder::RoundRobin,
            Some(other) => {
                return Err(Error::from_parts(
                    ErrorKind::InvalidInput,
                    Some("order".into()),
                    format!("order: must be ordered or round_robin, got {other:?}"),
                ));
            }
        };
        Ok(Dequeue {
            worker: self.worker,
            queues: self.queues,
            order,
            weights: self.weights,
            names: self.names,
            limit: self.limit.unwrap_or(1),
            max_weight: self.max_weight,
            wait: millis(self.wait_ms.unwrap_or(0)),
            lease_timeout: self.lease_timeout_ms.map(millis),
            priority: self.priority,
        })
    }
}

impl From<&Dequeue> for DequeueRequest {
    fn from(d: &Dequeue) -> Self {
        DequeueRequest {
            worker: d.worker.clone(),
            queues: d.queues.clone(),
            order: Some(
                match d.order {
                    QueueOrder::RoundRobin => "round_robin",
                    _ => "ordered",
                }
                .to_owned(),
            ),
            weights: d.weights.clone(),
            names: d.names.clone(),
            limit: Some(d.limit),
            max_weight: d.max_weight,
            wait_ms: Some(to_millis(d.wait)),
            lease_timeout_ms: d.lease_timeout.map(to_millis),
            priority: d.priority,
        }
    }
}

/// Jobs taken, each with its lease.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct DequeueBody {
    /// Empty when no job was ready before the wait ended.
    pub jobs: Vec<ClaimedJobBody>,
}

/// A job taken by a worker, and the lease under which it runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct ClaimedJobBody {
    /// The job as the attempt starts.
    pub job: JobBody,
    /// The lease; send its `token` with every call about the job.
    pub lease: LeaseBody,
}

impl From<&ClaimedJob> for ClaimedJobBody {
    fn from(c: &ClaimedJob) -> Self {
        ClaimedJobBody {
            job: JobBody::from(&c.job),
            lease: LeaseBody::from(&c.lease),
        }
    }
}

/// A lease on a running job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct LeaseBody {
    /// The job.
    pub job: i64,
    /// The fencing token: calls without this exact token are refused.
    pub token: String,
    /// The worker holding the lease.
    pub worker: String,
    /// When the lease runs out unless extended by a heartbeat.
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub expires_at: Timestamp,
}

impl From<&Lease> for LeaseBody {
    fn from(l: &Lease) -> Self {
        LeaseBody {
            job: l.job.0,
            token: l.token.to_string(),
            worker: l.worker.to_string(),
            expires_at: l.expires_at,
        }
    }
}

impl LeaseBody {
    /// The engine's lease.
    ///
    /// # Errors
    /// [`ErrorKind::Unavailable`] when the body does not hold a valid lease.
    pub fn to_lease(&self) -> Result<Lease, Error> {
        Ok(Lease {
            job: JobId(self.job),
            token: self.token.parse().map_err(|_| malformed("lease.token"))?,
            worker: WorkerId::parse(self.worker.as_str()).map_err(malformed)?,
            expires_at: self.expires_at,
        })
    }
}

/// Parses a lease token as the wire carries it.
pub fn parse_token(field: &str, token: &str) -> Result<i64, Error> {
    token.parse().map_err(|_| {
        Error::from_parts(
            ErrorKind::InvalidInput,
            Some(field.to_owned()),
            format!("{field}: must be a lease token (a decimal integer), got {token:?}"),
        )
    })
}

/// A call under a lease that carries nothing else (release).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct LeaseRequest {
    /// The lease's token.
    #[cfg_attr(feature = "openapi", schema(value_type = crate::rules::LeaseToken))]
    pub token: String,
}

/// Extend a lease, optionally reporting progress.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct HeartbeatRequest {
    /// The lease's token.
    #[cfg_attr(feature = "openapi", schema(value_type = crate::rules::LeaseToken))]
    pub token: String,
    /// Progress to record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<Value>,
}

/// A lease's new expiry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct LeaseExpiryBody {
    /// When the lease now runs out.
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub lease_expires_at: Timestamp,
}

/// Save what a retry starts from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CheckpointRequest {
    /// The lease's token.
    #[cfg_attr(feature = "openapi", schema(value_type = crate::rules::LeaseToken))]
    pub token: String,
    /// The data the next attempt starts from.
    pub data: Value,
}

/// Record progress.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct UpdateRequest {
    /// The lease's token.
    #[cfg_attr(feature = "openapi", schema(value_type = crate::rules::LeaseToken))]
    pub token: String,
    /// The progress to record.
    pub progress: Value,
}

/// Complete the job, or with `next`, this stage of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct FinishRequest {
    /// The lease's token.
    #[cfg_attr(feature = "openapi", schema(value_type = crate::rules::LeaseToken))]
    pub token: String,
    /// What the job produced, kept apart from its data as the job's `result` (and with this attempt in its
    /// history).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// The job's new data, replacing its input: what a recurring job's next run starts from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    /// What the attempt's process used, kept in the history.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<UsageBody>,
    /// Instead of completing, the job goes on in another queue (the attempt ends and the job moves in one step).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<ContinueBody>,
}

/// Completes many jobs at once (`POST /v1/finish`): for a worker that reports several jobs together. Each job is
/// answered on its own, in `results`; only a malformed request is refused whole.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct FinishManyRequest {
    /// The jobs, at most 1,000.
    #[cfg_attr(feature = "openapi", schema(max_items = 1000))]
    pub jobs: Vec<FinishItem>,
    /// Then take jobs, as `POST /v1/dequeue` would with this request, in the same round trip (and, when the writer
    /// takes both together, the same transaction). It never waits: `wait_ms` must be absent or 0. The jobs come
    /// back in `jobs` once the finishes are durable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub take: Option<DequeueRequest>,
}

/// One job of a [`FinishManyRequest`]: what `POST /v1/jobs/{id}/finish` takes, with the job's id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct FinishItem {
    /// The job's id.
    #[cfg_attr(feature = "openapi", schema(value_type = crate::rules::JobId))]
    pub id: i64,
    /// The lease's token.
    #[cfg_attr(feature = "openapi", schema(value_type = crate::rules::LeaseToken))]
    pub token: String,
    /// What the job produced, kept apart from its data as the job's `result` (and with this attempt in its
    /// history).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// The job's new data, replacing its input: what a recurring job's next run starts from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    /// What the attempt's process used, kept in the history.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<UsageBody>,
    /// Instead of completing, the job goes on in another queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<ContinueBody>,
}

/// What became of each job of a [`FinishManyRequest`], in the request's order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct FinishManyBody {
    /// One per job.
    pub results: Vec<FinishResult>,
    /// The jobs `take` claimed, each with its lease; absent without a `take`, or when it found none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub jobs: Vec<ClaimedJobBody>,
    /// Why `take` claimed nothing, when it failed; the finishes' answers stand.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub take_error: Option<ErrorDetail>,
}

/// One job's answer: done (completed, or moved on to its next queue) unless `error` says why not, as the one-job
/// call's error would (`lease_lost`, say).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct FinishResult {
    /// The job's id.
    pub id: i64,
    /// Why the job was not finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorDetail>,
}

/// Where a finished stage of a job goes on: another queue, after a delay or once other jobs complete, with fresh
/// attempts and the data it finished with.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ContinueBody {
    /// The queue the job goes on in.
    #[cfg_attr(feature = "openapi", schema(value_type = crate::rules::QueueName))]
    pub queue: String,
    /// How long from now until it is ready again, in milliseconds (at most a year); at once when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(maximum = 31_622_400_000_u64))]
    pub delay_ms: Option<u64>,
    /// Jobs that must complete before it runs again (each must exist and not be cancelled; a completed one counts
    /// as met); it is `waiting` until then.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<crate::rules::JobId>, max_items = 1000))]
    pub depends_on: Vec<i64>,
}

impl From<&Continue> for ContinueBody {
    fn from(c: &Continue) -> Self {
        ContinueBody {
            queue: c.queue.clone(),
            delay_ms: c.delay.map(to_millis),
            depends_on: c.depends_on.iter().map(|j| j.0).collect(),
        }
    }
}

impl From<ContinueBody> for Continue {
    fn from(b: ContinueBody) -> Self {
        Continue {
            queue: b.queue,
            delay: b.delay_ms.map(millis),
            depends_on: b.depends_on.into_iter().map(JobId).collect(),
        }
    }
}

/// Retry the job after a transient error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RetryRequest {
    /// The lease's token.
    #[cfg_attr(feature = "openapi", schema(value_type = crate::rules::LeaseToken))]
    pub token: String,
    /// What went wrong.
    pub error: String,
    /// Wait this long instead of the job's backoff.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(maximum = 31_622_400_000_u64))]
    pub delay_ms: Option<u64>,
    /// Run again at this time instead of after the job's backoff (give this or `delay_ms`, not both).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub run_at: Option<Timestamp>,
    /// What the attempt's process used, kept in the history.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<UsageBody>,
}

/// Fail the job for good.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct FailRequest {
    /// The lease's token.
    #[cfg_attr(feature = "openapi", schema(value_type = crate::rules::LeaseToken))]
    pub token: String,
    /// The kind of failure, such as `invalid-address`.
    #[cfg_attr(feature = "openapi", schema(value_type = crate::rules::FailureGroup))]
    pub group: String,
    /// What happened.
    pub message: String,
    /// What the attempt's process used, kept in the history.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<UsageBody>,
}

/// The calls under a lease declared here, for [`visit_routes`](crate::visit_routes).
pub(crate) fn visit_lease_routes(visitor: &mut impl RouteVisitor) {
    visitor.visit::<Dequeue>();
    visitor.visit::<FinishMany>();
    visitor.visit::<Heartbeat>();
    visitor.visit::<Checkpoint>();
    visitor.visit::<Update>();
    visitor.visit::<Finish>();
    visitor.visit::<Retry>();
    visitor.visit::<Fail>();
    visitor.visit::<Release>();
}

impl Answer<Timestamp> for LeaseExpiryBody {
    fn from_output(lease_expires_at: Timestamp) -> Self {
        LeaseExpiryBody { lease_expires_at }
    }

    fn into_output(self) -> Result<Timestamp, Error> {
        Ok(self.lease_expires_at)
    }
}

/// What a call under a lease may answer besides its own: the lease lost, or bad input.
const LEASE_LOST: (u16, &str) = (409, "The lease was lost");
const BAD_LEASE_CALL: (u16, &str) = (
    400,
    "Bad input: a bad id, or a body that breaks a rule; `field` names it",
);

route! {
    Heartbeat: Post "/v1/jobs/{id}/heartbeat", params [JOB_ID], tag "workers", id "heartbeat",
        access WORK, reach Queues,
    summary "Extends the lease to a full lease timeout from now, optionally recording progress.",
    done "The lease's new expiry",
    errors [LEASE_LOST, BAD_LEASE_CALL],
    path |r| [r.job],
    body HeartbeatRequest = |r| HeartbeatRequest {
        token: r.token.to_string(),
        progress: r.progress.clone(),
    },
    answer LeaseExpiryBody,
    from |path, body| Ok(Heartbeat {
        job: path.job()?,
        token: parse_token("token", &body.token)?,
        progress: body.progress,
    }),
}

route! {
    Checkpoint: Post "/v1/jobs/{id}/checkpoint", params [JOB_ID], tag "workers", id "checkpoint",
        access WORK, reach Queues,
    summary "Saves the data a retry starts from, and extends the lease.",
    done "The lease's new expiry",
    errors [LEASE_LOST, BAD_LEASE_CALL],
    path |r| [r.job],
    body CheckpointRequest = |r| CheckpointRequest {
        token: r.token.to_string(),
        data: r.data.clone(),
    },
    answer LeaseExpiryBody,
    from |path, body| Ok(Checkpoint {
        job: path.job()?,
        token: parse_token("token", &body.token)?,
        data: body.data,
    }),
}

route! {
    Update: Post "/v1/jobs/{id}/update", params [JOB_ID], tag "workers", id "update", access WORK, reach Queues,
    summary "Records progress for queries to show.",
    done "Recorded",
    errors [LEASE_LOST, BAD_LEASE_CALL],
    path |r| [r.job],
    body UpdateRequest = |r| UpdateRequest {
        token: r.token.to_string(),
        progress: r.progress.clone(),
    },
    answer EmptyBody,
    from |path, body| Ok(Update {
        job: path.job()?,
        token: parse_token("token", &body.token)?,
        progress: body.progress,
    }),
}

route! {
    Finish: Post "/v1/jobs/{id}/finish", params [JOB_ID], tag "workers", id "finish", access WORK, reach Queues,
    summary "Completes the job, optionally replacing its data with a result. With `next`, completes only this stage: \
        the attempt ends and the job goes on in another queue (after `delay_ms`, once `depends_on` complete), with \
        fresh attempts and the data it finished with, in one step.",
    done "Completed, or moved on to its next queue",
    errors [
        (400, "Bad input, naming the field (such as `next.queue`)"),
        (409, "The lease was lost, or a next dependency was cancelled or would make a cycle, or a job with a \
            concurrency key would go on to a queue with priority aging"),
    ],
    path |r| [r.job],
    body FinishRequest = |r| FinishRequest {
        token: r.token.to_string(),
        result: r.result.clone(),
        data: r.data.clone(),
        usage: r.usage.map(UsageBody::from),
        next: r.next.as_ref().map(ContinueBody::from),
    },
    answer EmptyBody,
    from |path, body| Ok(Finish {
        job: path.job()?,
        token: parse_token("token", &body.token)?,
        result: body.result,
        data: body.data,
        usage: body.usage.map(RunUsage::from),
        next: body.next.map(Continue::from),
    }),
}

route! {
    Retry: Post "/v1/jobs/{id}/retry", params [JOB_ID], tag "workers", id "retry", access WORK, reach Queues,
    summary "Reports a transient error: the job runs again after its backoff (or `delay_ms`, or at `run_at`), or \
        fails when out of attempts.",
    done "The job's new state: queued, scheduled, or failed",
    errors [LEASE_LOST, BAD_LEASE_CALL],
    path |r| [r.job],
    body RetryRequest = |r| RetryRequest {
        token: r.token.to_string(),
        error: r.error.clone(),
        delay_ms: r.delay.map(to_millis),
        run_at: r.run_at,
        usage: r.usage.map(UsageBody::from),
    },
    answer StateBody,
    from |path, body| Ok(Retry {
        job: path.job()?,
        token: parse_token("token", &body.token)?,
        error: body.error,
        delay: body.delay_ms.map(millis),
        run_at: body.run_at,
        usage: body.usage.map(RunUsage::from),
    }),
}

route! {
    Fail: Post "/v1/jobs/{id}/fail", params [JOB_ID], tag "workers", id "fail", access WORK, reach Queues,
    summary "Fails the job for good, with a failure group and a message.",
    done "Failed",
    errors [LEASE_LOST, BAD_LEASE_CALL],
    path |r| [r.job],
    body FailRequest = |r| FailRequest {
        token: r.token.to_string(),
        group: r.group.clone(),
        message: r.message.clone(),
        usage: r.usage.map(UsageBody::from),
    },
    answer EmptyBody,
    from |path, body| Ok(Fail {
        job: path.job()?,
        token: parse_token("token", &body.token)?,
        group: body.group,
        message: body.message,
        usage: body.usage.map(RunUsage::from),
    }),
}

route! {
    Release: Post "/v1/jobs/{id}/release", params [JOB_ID], tag "workers", id "release", access WORK, reach Queues,
    summary "Gives the job back to its queue at once, without counting the attempt.",
    done "Released",
    errors [LEASE_LOST, BAD_LEASE_CALL],
    path |r| [r.job],
    body LeaseRequest = |r| LeaseRequest {
        token: r.token.to_string(),
    },
    answer EmptyBody,
    from |path, body| Ok(Release {
        job: path.job()?,
        token: parse_token("token", &body.token)?,
    }),
}

route! {
    Dequeue: Post "/v1/dequeue", params [], tag "workers", id "dequeue", access WORK, reach Queues,
    summary "Takes up to `limit` ready jobs. With `wait_ms`, waits (a long poll) until a job is ready, answering the \
        moment one is, or with no job when the wait ends or the server shuts down.",
    done "The jobs taken, each with its lease (possibly none)",
    errors [(400, "Bad input, naming the field")],
    path |_r| [],
    body DequeueRequest = |r| DequeueRequest::from(r),
    answer DequeueBody,
    from |_received, body| body.into_dequeue(),
    limit |r, limits| {
        r.wait = r.wait.min(limits.max_wait);
        Ok(())
    },
    stopping |_r| WhenStopping::Answer(Vec::new()),
    waits |r| r.wait.min(cairn::MAX_WAIT),
    names |r| Named::dequeue(r),
}

impl Answer<Vec<ClaimedJob>> for DequeueBody {
    fn from_output(jobs: Vec<ClaimedJob>) -> Self {
        DequeueBody {
            jobs: jobs.iter().map(ClaimedJobBody::from).collect(),
        }
    }

    fn into_output(self) -> Result<Vec<ClaimedJob>, Error> {
        self.jobs.iter().map(ClaimedJobBody::to_claimed).collect()
    }
}

impl ClaimedJobBody {
    /// The job and lease this body says.
    ///
    /// # Errors
    /// [`ErrorKind::Unavailable`] when the body is not one Cairn sends.
    pub fn to_claimed(&self) -> Result<ClaimedJob, Error> {
        Ok(ClaimedJob {
            job: self.job.to_job()?,
            lease: self.lease.to_lease()?,
        })
    }
}

route! {
    FinishMany: Post "/v1/finish", params [], tag "workers", id "finish_many", access WORK, reach Queues,
    summary "Completes many jobs at once, each as `POST /v1/jobs/{id}/finish` would: for a worker that reports \
        several jobs together, in one request and one transaction. Each job is answered on its own, in order (a \
        lost lease refuses only its job); a malformed request (a bad id or token, more than 1,000 jobs, a bad \
        `take`) is refused whole, naming `jobs[i].field` or `take.field`. With `take`, the worker's next jobs \
        come back in the same answer.",
    done "Each job's answer, in order, and the jobs taken",
    errors [(400, "Bad input, naming the field (such as `jobs[2].token`)")],
    path |_r| [],
    body FinishManyRequest = |r| FinishManyRequest {
        jobs: r.finishes.iter().map(FinishItem::from).collect(),
        take: r.take.as_ref().map(DequeueRequest::from),
    },
    answer FinishManyBody,
    from |_received, body| body.into_finish_many(),
    limit |r, limits| {
        if let Some(take) = r.take.as_mut() {
            take.wait = take.wait.min(limits.max_wait);
        }
        Ok(())
    },
    names |r| Named::jobs(r.finishes.iter().map(|finish| finish.job))
        .and(r.take.as_ref().map(Named::dequeue).unwrap_or_default()),
}

impl FinishManyRequest {
    /// The engine's request.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] naming the field: `jobs` past [`cairn::MAX_FINISH_MANY`], `jobs[i].id` or
    /// `jobs[i].token` not well formed, `take.wait_ms` other than 0, or a bad `take.order`.
    pub fn into_finish_many(self) -> Result<FinishMany, Error> {
        if self.jobs.len() > cairn::MAX_FINISH_MANY {
            return Err(crate::route::invalid(
                "jobs",
                format!(
                    "must hold at most {} jobs, got {}",
                    cairn::MAX_FINISH_MANY,
                    self.jobs.len()
                ),
            ));
        }
        let take = match self.take {
            Some(take) if take.wait_ms.unwrap_or(0) != 0 => {
                return Err(crate::route::invalid(
                    "take.wait_ms",
                    "must be 0 or absent: a take never waits, since a long poll would hold back the finishes' \
                     answers",
                ));
            }
            Some(take) => Some(take.into_dequeue().map_err(|e| e.within("take"))?),
            None => None,
        };
        let finishes = self
            .jobs
            .into_iter()
            .enumerate()
            .map(|(i, item)| {
                item.into_finish()
                    .map_err(|e| e.within(&format!("jobs[{i}]")))
            })
            .collect::<Result<_, Error>>()?;
        Ok(FinishMany { finishes, take })
    }
}

impl FinishItem {
    /// The engine's finish of this job.
    fn into_finish(self) -> Result<Finish, Error> {
        if self.id <= 0 {
            return Err(crate::route::invalid(
                "id",
                format!("must be a positive integer, got {:?}", self.id.to_string()),
            ));
        }
        Ok(Finish {
            job: JobId(self.id),
            token: parse_token("token", &self.token)?,
            result: self.result,
            data: self.data,
            usage: self.usage.map(RunUsage::from),
            next: self.next.map(Continue::from),
        })
    }
}

impl From<&Finish> for FinishItem {
    fn from(finish: &Finish) -> Self {
        FinishItem {
            id: finish.job.0,
            token: finish.token.to_string(),
            result: finish.result.clone(),
            data: finish.data.clone(),
            usage: finish.usage.map(UsageBody::from),
            next: finish.next.as_ref().map(ContinueBody::from),
        }
    }
}

impl Answer<FinishedMany> for FinishManyBody {
    fn from_output(done: FinishedMany) -> Self {
        let detail = |e: &Error| crate::ErrorBody::from_error(e).error;
        let (jobs, take_error) = match &done.taken {
            Ok(jobs) => (jobs.iter().map(ClaimedJobBody::from).collect(), None),
            Err(e) => (Vec::new(), Some(detail(e))),
        };
        FinishManyBody {
            results: done
                .finished
                .iter()
                .map(|(job, answer)| FinishResult {
                    id: job.0,
                    error: answer.as_ref().err().map(detail),
                })
                .collect(),
            jobs,
            take_error,
        }
    }

    fn into_output(self) -> Result<FinishedMany, Error> {
        let taken = match self.take_error {
            Some(error) => Err(crate::ErrorBody { error }.into_error()),
            None => self.jobs.iter().map(ClaimedJobBody::to_claimed).collect(),
        };
        Ok(FinishedMany {
            finished: self
                .results
                .into_iter()
                .map(|result| {
                    let answer = match result.error {
                        None => Ok(()),
                        Some(error) => Err(crate::ErrorBody { error }.into_error()),
                    };
                    (JobId(result.id), answer)
                })
                .collect(),
            taken,
        })
    }
}
