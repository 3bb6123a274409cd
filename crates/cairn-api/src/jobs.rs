//! A job as the server shows it (its attempts, what each used), a page of jobs, and the requests that change a job
//! outside a lease: priority, time, requeue, dependencies, tags and data. Enqueueing is in `push`; the calls under a
//! lease are in `leases`.

use cairn::{
    Attempt, AttemptOutcome, Bulk, Cancel, ChangeDependencies, ChangeTags, Delete, Error, Job,
    JobId, JobName, JobState, MoveJob, QueueName, Requeue, Reschedule, RunUsage, SetData,
    SetPriority, Tag, Track, UniqueKey, Untrack, WorkerId,
};
// Named only in doc links.
#[cfg(doc)]
use cairn::ErrorKind;
use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::Value;

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

use crate::ADMIN;
use crate::Named;
use crate::empty::EmptyBody;
use crate::errors::malformed;
use crate::millis::{millis, to_millis};
use crate::push::RetryPolicyBody;
use crate::route::{Answer, JOB_ID, RouteVisitor, route};

/// A job, as `GET /v1/jobs/{id}` and listings show it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct JobBody {
    /// The job's id.
    pub id: i64,
    /// Its queue.
    pub queue: String,
    /// Its name.
    pub name: String,
    /// `scheduled`, `queued`, `waiting`, `running`, `completed`, `failed` or `cancelled`.
    pub state: String,
    /// Its data: the input, the last checkpoint, or what a finish replaced it with.
    pub data: Value,
    /// The last progress reported.
    pub progress: Option<Value>,
    /// The result its last completed run finished with, kept apart from its data.
    #[serde(default)]
    pub result: Option<Value>,
    /// Higher runs first.
    pub priority: i32,
    /// Its share of a worker's concurrency.
    pub weight: u32,
    /// When it may run (next).
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub run_at: Timestamp,
    /// When its current run was first due: `run_at` moves when an attempt is retried, this does not (for a
    /// recurring job, the slot the run is for).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub due_at: Option<Timestamp>,
    /// Attempts started so far.
    pub attempt: u32,
    /// Attempts and backoff.
    pub retry: RetryPolicyBody,
    /// How long a lease lasts without a heartbeat.
    pub lease_timeout_ms: u64,
    /// The longest one attempt may run, heartbeats or not, if limited.
    pub timeout_ms: Option<u64>,
    /// Its unique key, if any.
    pub unique_key: Option<String>,
    /// The debounce key its pushes shared, if it was debounced.
    #[serde(default)]
    pub debounce_key: Option<String>,
    /// The key it holds for its throttle's period, if it was throttled.
    #[serde(default)]
    pub throttle_key: Option<String>,
    /// Its concurrency key, if it has one.
    #[serde(default)]
    pub concurrency_key: Option<String>,
    /// Its own limit for its key, instead of its queue's, if it has one.
    #[serde(default)]
    pub concurrency_limit: Option<u32>,
    /// The W3C trace context it was pushed with (`traceparent`), which its worker runs it in.
    #[serde(default)]
    pub trace_parent: Option<String>,
    /// The batch it belongs to, if any.
    #[serde(default)]
    pub batch: Option<i64>,
    /// Its tags.
    pub tags: Vec<String>,
    /// The job that created it.
    pub parent: Option<i64>,
    /// True while it is a child waiting for the run of its parent that created it to finish.
    pub awaits_parent: bool,
    /// Whose the children are that its runs create: `run` or `job` (see the push's `children`).
    #[serde(default)]
    pub children: crate::ChildrenBody,
    /// True when someone marked it to keep an eye on.
    pub tracked: bool,
    /// The jobs it still waits for: its dependencies that have not completed.
    pub depends_on: Vec<i64>,
    /// The worker holding it, while it runs.
    pub worker: Option<String>,
    /// When the running attempt's lease runs out.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub lease_expires_at: Option<Timestamp>,
    /// When it was enqueued.
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub created_at: Timestamp,
    /// When its latest attempt started.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub started_at: Option<Timestamp>,
    /// When it finished.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub finished_at: Option<Timestamp>,
    /// The last error.
    pub error: Option<String>,
    /// Why it failed, for grouping alike failures.
    pub failure_group: Option<String>,
    /// Its repeat or cron schedule.
    pub schedule: Option<String>,
    /// The time zone of a cron schedule.
    pub time_zone: Option<String>,
    /// Its attempts, oldest first (empty in listings).
    pub history: Vec<AttemptBody>,
    /// How many steps its handler has recorded.
    #[serde(default)]
    pub step_count: u32,
    /// The steps its handler has recorded, in order (empty in listings): what a handler that runs again reads
    /// instead of running them.
    #[serde(default)]
    pub steps: Vec<crate::steps::StepBody>,
    /// The key of the signal its handler waits for, while it waits (the job is `scheduled` until the signal comes,
    /// or its `run_at`, when the wait times out).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<crate::rules::SignalKey>))]
    pub awaits_signal: Option<String>,
    /// When its handler suspended it (a sleep, a wait for a signal or for its children), while it stays so.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub suspended_at: Option<Timestamp>,
}

impl From<&Job> for JobBody {
    fn from(j: &Job) -> Self {
        JobBody {
            id: j.id.0,
            queue: j.queue.to_string(),
            name: j.name.to_string(),
            state: j.state.as_str().to_owned(),
            data: j.data.clone(),
            progress: j.progress.clone(),
            result: j.result.clone(),
            priority: j.priority,
            weight: j.weight,
            run_at: j.run_at,
            due_at: Some(j.due_at),
            attempt: j.attempt,
            retry: j.retry.into(),
            lease_timeout_ms: to_millis(j.lease_timeout),
            timeout_ms: j.timeout.map(to_millis),
            unique_key: j.unique_key.as_ref().map(|k| k.to_string()),
            debounce_key: j.debounce_key.as_ref().map(|k| k.to_string()),
            throttle_key: j.throttle_key.as_ref().map(|k| k.to_string()),
            concurrency_key: j.concurrency_key.as_ref().map(|k| k.to_string()),
            concurrency_limit: j.concurrency_limit,
            trace_parent: j.trace_parent.as_ref().map(|t| t.to_string()),
            batch: j.batch.map(|b| b.0),
            tags: j.tags.iter().map(|t| t.to_string()).collect(),
            parent: j.parent.map(|p| p.0),
            awaits_parent: j.awaits_parent,
            children: j.children.into(),
            tracked: j.tracked,
            depends_on: j.depends_on.iter().map(|d| d.0).collect(),
            worker: j.worker.as_ref().map(|w| w.to_string()),
            lease_expires_at: j.lease_expires_at,
            created_at: j.created_at,
            started_at: j.started_at,
            finished_at: j.finished_at,
            error: j.error.clone(),
            failure_group: j.failure_group.clone(),
            schedule: j.schedule.clone(),
            time_zone: j.time_zone.clone(),
            history: j.history.iter().map(AttemptBody::from).collect(),
            step_count: j.step_count,
            steps: j.steps.iter().map(crate::steps::StepBody::from).collect(),
            awaits_signal: j.awaits_signal.as_ref().map(|k| k.as_str().to_owned()),
            suspended_at: j.suspended_at,
        }
    }
}

impl JobBody {
    /// The engine's job, as a handler sees it.
    ///
    /// # Errors
    /// [`ErrorKind::Unavailable`] when the body does not hold a valid job.
    pub fn to_job(&self) -> Result<Job, Error> {
        let history = self
            .history
            .iter()
            .map(|a| {
                Ok(Attempt {
                    number: a.number,
                    worker: WorkerId::parse(a.worker.as_str()).map_err(malformed)?,
                    started_at: a.started_at,
                    finished_at: a.finished_at,
                    outcome: a.outcome.as_deref().and_then(AttemptOutcome::parse),
                    error: a.error.clone(),
                    usage: a.usage.map(RunUsage::from),
                    result: a.result.clone(),
                })
            })
            .collect::<Result<Vec<_>, Error>>()?;
        Ok(Job {
            id: JobId(self.id),
            queue: QueueName::parse(self.queue.as_str()).map_err(malformed)?,
            name: JobName::parse(self.name.as_str()).map_err(malformed)?,
            state: self.state.parse::<JobState>().map_err(malformed)?,
            data: self.data.clone(),
            progress: self.progress.clone(),
            result: self.result.clone(),
            priority: self.priority,
            weight: self.weight,
            run_at: self.run_at,
            // A server that does not say (an older one): the run was due when it is.
            due_at: self.due_at.unwrap_or(self.run_at),
            attempt: self.attempt,
            retry: self.retry.into(),
            lease_timeout: millis(self.lease_timeout_ms),
            timeout: self.timeout_ms.map(millis),
            unique_key: self
                .unique_key
                .as_deref()
                .map(UniqueKey::parse)
                .transpose()
                .map_err(malformed)?,
            debounce_key: self
                .debounce_key
                .as_deref()
                .map(cairn::DebounceKey::parse)
                .transpose()
                .map_err(malformed)?,
            throttle_key: self
                .throttle_key
                .as_deref()
                .map(cairn::ThrottleKey::parse)
                .transpose()
                .map_err(malformed)?,
            concurrency_key: self
                .concurrency_key
                .as_deref()
                .map(cairn::ConcurrencyKey::parse)
                .transpose()
                .map_err(malformed)?,
            concurrency_limit: self.concurrency_limit,
            trace_parent: self
                .trace_parent
                .as_deref()
                .map(cairn::TraceParent::parse)
                .transpose()
                .map_err(malformed)?,
            batch: self.batch.map(cairn::BatchId),
            tags: self
                .tags
                .iter()
                .map(|t| Tag::parse(t.as_str()))
                .collect::<Result<_, _>>()
                .map_err(malformed)?,
            parent: self.parent.map(JobId),
            awaits_parent: self.awaits_parent,
            children: self.children.into(),
            tracked: self.tracked,
            depends_on: self.depends_on.iter().copied().map(JobId).collect(),
            worker: self
                .worker
                .as_deref()
                .map(WorkerId::parse)
                .transpose()
                .map_err(malformed)?,
            lease_expires_at: self.lease_expires_at,
            created_at: self.created_at,
            started_at: self.started_at,
            finished_at: self.finished_at,
            error: self.error.clone(),
            failure_group: self.failure_group.clone(),
            schedule: self.schedule.clone(),
            time_zone: self.time_zone.clone(),
            history,
            step_count: self.step_count,
            steps: self.steps.iter().map(cairn::Step::from).collect(),
            awaits_signal: self
                .awaits_signal
                .as_deref()
                .map(cairn::SignalKey::parse)
                .transpose()
                .map_err(malformed)?,
            suspended_at: self.suspended_at,
        })
    }
}

/// One attempt at running a job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct AttemptBody {
    /// 1 for the first attempt.
    pub number: u32,
    /// The worker that held the job.
    pub worker: String,
    /// When the worker took the job.
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub started_at: Timestamp,
    /// When it ended; null while it runs.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub finished_at: Option<Timestamp>,
    /// `completed`, `retried`, `failed`, `lease_expired`, `cancelled`, `crashed`, `released`, `requeued` or `suspended`; null
    /// while it runs.
    pub outcome: Option<String>,
    /// The error it ended with.
    pub error: Option<String>,
    /// What its process used, when the worker measured it.
    pub usage: Option<UsageBody>,
    /// The result a completed attempt finished with.
    #[serde(default)]
    pub result: Option<Value>,
}

impl From<&Attempt> for AttemptBody {
    fn from(a: &Attempt) -> Self {
        AttemptBody {
            number: a.number,
            worker: a.worker.to_string(),
            started_at: a.started_at,
            finished_at: a.finished_at,
            outcome: a.outcome.map(|o| o.as_str().to_owned()),
            error: a.error.clone(),
            usage: a.usage.map(UsageBody::from),
            result: a.result.clone(),
        }
    }
}

/// What an attempt's process used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct UsageBody {
    /// Wall-clock run time.
    #[cfg_attr(
        feature = "openapi",
        schema(format = "uint64", maximum = 18_446_744_073_709_551_615_u64)
    )]
    pub run_ms: u64,
    /// CPU time, user plus system.
    #[cfg_attr(
        feature = "openapi",
        schema(format = "uint64", maximum = 18_446_744_073_709_551_615_u64)
    )]
    pub cpu_ms: u64,
    /// Peak resident memory, in bytes.
    #[cfg_attr(
        feature = "openapi",
        schema(format = "uint64", maximum = 18_446_744_073_709_551_615_u64)
    )]
    pub peak_memory: u64,
}

impl From<RunUsage> for UsageBody {
    fn from(u: RunUsage) -> Self {
        UsageBody {
            run_ms: to_millis(u.run_time),
            cpu_ms: to_millis(u.cpu_time),
            peak_memory: u.peak_memory,
        }
    }
}

impl From<UsageBody> for RunUsage {
    fn from(u: UsageBody) -> Self {
        RunUsage {
            run_time: millis(u.run_ms),
            cpu_time: millis(u.cpu_ms),
            peak_memory: u.peak_memory,
        }
    }
}

/// A page of jobs, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct JobPageBody {
    /// The jobs on this page.
    pub jobs: Vec<JobBody>,
    /// Pass as `before` for the next page; null on the last page.
    pub next: Option<i64>,
}

/// A job's state after a call that changes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct StateBody {
    /// The job's new state.
    pub state: String,
}

impl From<JobState> for StateBody {
    fn from(state: JobState) -> Self {
        StateBody {
            state: state.as_str().to_owned(),
        }
    }
}

impl StateBody {
    /// The state the server sent.
    ///
    /// # Errors
    /// [`ErrorKind::Unavailable`] for a state Cairn does not have.
    pub fn into_state(self) -> Result<JobState, Error> {
        self.state
            .parse()
            .map_err(|_| malformed(format!("an unknown job state {:?}", self.state)))
    }
}

/// Change a job's priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PriorityRequest {
    /// The new priority.
    pub priority: i32,
}

/// The jobs' routes declared here, for [`visit_routes`](crate::visit_routes).
pub(crate) fn visit_job_routes(visitor: &mut impl RouteVisitor) {
    visitor.visit::<SetPriority>();
    visitor.visit::<Reschedule>();
    visitor.visit::<Requeue>();
    visitor.visit::<SetData>();
    visitor.visit::<ChangeDependencies>();
    visitor.visit::<ChangeTags>();
    visitor.visit::<MoveJob>();
    visitor.visit::<Cancel>();
    visitor.visit::<Delete>();
    visitor.visit::<Track>();
    visitor.visit::<Untrack>();
    visitor.visit::<Bulk>();
}

route! {
    Cancel: Post "/v1/jobs/{id}/cancel", params [JOB_ID], tag "jobs", id "cancel", access ADMIN, reach Queues,
    summary "Cancels a job that has not finished; its worker, if any, is refused from then on.",
    done "Cancelled",
    errors [
        (404, "No such job"),
        (409, "The job already finished"),
        (400, "A bad id: not a positive integer"),
    ],
    path |r| [r.job],
    no body,
    answer EmptyBody,
    from |path| Ok(Cancel { job: path.job()? }),
}

route! {
    Delete: Delete "/v1/jobs/{id}", params [JOB_ID], tag "jobs", id "delete", access ADMIN, reach Queues,
    summary "Deletes a job and its history.",
    done "Deleted",
    errors [(404, "No such job"), (400, "A bad id: not a positive integer")],
    path |r| [r.job],
    no body,
    answer EmptyBody,
    from |path| Ok(Delete { job: path.job()? }),
}

route! {
    Track: Post "/v1/jobs/{id}/track", params [JOB_ID], tag "jobs", id "track", access ADMIN, reach Queues,
    summary "Tracks a job: `GET /v1/jobs?tracked=true` lists it, whatever its state, until it is untracked. \
        Tracking a tracked job is not an error.",
    done "Tracked",
    errors [(404, "No such job"), (400, "A bad id: not a positive integer")],
    path |r| [r.job],
    no body,
    answer EmptyBody,
    from |path| Ok(Track { job: path.job()? }),
}

route! {
    Untrack: Post "/v1/jobs/{id}/untrack", params [JOB_ID], tag "jobs", id "untrack", access ADMIN, reach Queues,
    summary "Stops tracking a job. Untracking a job that is not tracked is not an error.",
    done "No longer tracked",
    errors [(404, "No such job"), (400, "A bad id: not a positive integer")],
    path |r| [r.job],
    no body,
    answer EmptyBody,
    from |path| Ok(Untrack { job: path.job()? }),
}

/// Move a job that is not running to another queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct MoveRequest {
    /// The queue it moves to.
    #[cfg_attr(feature = "openapi", schema(value_type = crate::rules::QueueName))]
    pub queue: String,
}

route! {
    MoveJob: Post "/v1/jobs/{id}/move", params [JOB_ID], tag "jobs", id "move_job", access ADMIN, reach Queues,
    summary "Moves a job that is not running to another queue: as it is if it has not started, to run again if it ended.",
    done "Moved (or already there)",
    errors [
        (400, "Bad input, naming the field"),
        (404, "No such job"),
        (
            409,
            "The job is running, or it has a concurrency key and the queue has priority aging",
        ),
    ],
    path |r| [r.job],
    body MoveRequest = |r| MoveRequest {
        queue: r.queue.clone(),
    },
    answer EmptyBody,
    from |path, body| Ok(MoveJob::new(path.job()?, body.queue)),
    names |r| Named::queues([r.queue.as_str()]),
}

route! {
    SetPriority: Post "/v1/jobs/{id}/priority", params [JOB_ID], tag "jobs", id "set_priority",
        access ADMIN, reach Queues,
    summary "Changes the priority of a job that has not finished.",
    done "Changed",
    errors [(404, "No such job"), (409, "The job already finished")],
    path |r| [r.job],
    body PriorityRequest = |r| PriorityRequest {
        priority: r.priority,
    },
    answer EmptyBody,
    from |path, body| Ok(SetPriority {
        job: path.job()?,
        priority: body.priority,
    }),
}

/// Move a job that has not started to another time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RescheduleRequest {
    /// When it may run.
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub run_at: Timestamp,
}

route! {
    Reschedule: Post "/v1/jobs/{id}/reschedule", params [JOB_ID], tag "jobs", id "reschedule",
        access ADMIN, reach Queues,
    summary "Moves a job that is not running to another time.",
    done "Moved; its new state",
    errors [
        (404, "No such job"),
        (409, "The job is running or finished"),
    ],
    path |r| [r.job],
    body RescheduleRequest = |r| RescheduleRequest {
        run_at: r.run_at,
    },
    answer StateBody,
    from |path, body| Ok(Reschedule {
        job: path.job()?,
        run_at: body.run_at,
    }),
}

/// Run a job again, whatever became of it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RequeueRequest {
    /// When it may run; now when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub run_at: Option<Timestamp>,
}

route! {
    Requeue: Post "/v1/jobs/{id}/requeue", params [JOB_ID], tag "jobs", id "requeue", access ADMIN, reach Queues,
    summary "Runs a job again with a fresh count of attempts, whatever became of it: a failed, \
        cancelled or completed job\ngoes back to its queue, a running one is taken from its worker (whose lease is \
        refused from then on).",
    done "Requeued; its new state, queued or scheduled",
    errors [
        (404, "No such job"),
        (409, "Another live job holds its unique key"),
    ],
    path |r| [r.job],
    body RequeueRequest = |r| RequeueRequest {
        run_at: r.run_at,
    },
    answer StateBody,
    from |path, body| Ok(Requeue {
        job: path.job()?,
        run_at: body.run_at,
    }),
}

/// Add and remove dependencies of a job that has not started.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct DependenciesRequest {
    /// Jobs it must now also wait for: each must exist, not be cancelled, and not wait (directly or not) for this
    /// job. A completed one counts as met.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<crate::rules::JobId>))]
    pub add: Vec<i64>,
    /// Jobs it no longer waits for.
    #[serde(default)]
    pub remove: Vec<i64>,
}

route! {
    ChangeDependencies: Post "/v1/jobs/{id}/dependencies", params [JOB_ID], tag "jobs", id "change_dependencies",
        access ADMIN, reach Queues,
    summary "Adds and removes dependencies of a job that has not started. A job with a \
        dependency that has not completed is\n`waiting`; one whose last dependency goes becomes ready.",
    done "Changed; the job's new state",
    errors [
        (400, "A dependency that does not exist"),
        (404, "No such job"),
        (
            409,
            "The job started or ended, a dependency was cancelled, or a cycle",
        ),
    ],
    path |r| [r.job],
    body DependenciesRequest = |r| DependenciesRequest {
        add: r.add.iter().map(|j| j.0).collect(),
        remove: r.remove.iter().map(|j| j.0).collect(),
    },
    answer StateBody,
    from |path, body| Ok(ChangeDependencies {
        job: path.job()?,
        add: body.add.into_iter().map(JobId).collect(),
        remove: body.remove.into_iter().map(JobId).collect(),
    }),
    names |r| Named::jobs(r.add.iter().chain(&r.remove).copied()),
}

/// Add and remove tags of a job, in any state. Adding a tag it has, or removing one it lacks, is not an error.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct TagsRequest {
    /// Tags to add (each 1 to 128 bytes, no control characters).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<crate::rules::Tag>))]
    pub add: Vec<String>,
    /// Tags to remove.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<crate::rules::Tag>))]
    pub remove: Vec<String>,
}

impl From<&ChangeTags> for TagsRequest {
    fn from(c: &ChangeTags) -> Self {
        TagsRequest {
            add: c.add.clone(),
            remove: c.remove.clone(),
        }
    }
}

impl TagsRequest {
    /// The engine's change of `job`'s tags.
    pub fn into_change(self, job: JobId) -> ChangeTags {
        ChangeTags {
            job,
            add: self.add,
            remove: self.remove,
        }
    }
}

route! {
    ChangeTags: Post "/v1/jobs/{id}/tags", params [JOB_ID], tag "jobs", id "change_tags", access ADMIN, reach Queues,
    summary "Adds and removes tags of a job, whatever its state. Adding a tag it has, or \
        removing one it lacks, is not an\nerror.",
    done "Changed",
    errors [(400, "A bad tag"), (404, "No such job")],
    path |r| [r.job],
    body TagsRequest = |r| TagsRequest::from(r),
    answer EmptyBody,
    from |path, body| Ok(body.into_change(path.job()?)),
}

/// Replace the data of a job that is not running.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct SetDataRequest {
    /// The new data.
    pub data: Value,
}

route! {
    SetData: Post "/v1/jobs/{id}/data", params [JOB_ID], tag "jobs", id "set_data", access ADMIN, reach Queues,
    summary "Replaces the data of a job that is not running.",
    done "Replaced",
    errors [
        (404, "No such job"),
        (409, "The job is running; its worker saves its data"),
    ],
    path |r| [r.job],
    body SetDataRequest = |r| SetDataRequest {
        data: r.data.clone(),
    },
    answer EmptyBody,
    from |path, body| Ok(SetData {
        job: path.job()?,
        data: body.data,
    }),
}

/// One action over many jobs (`POST /v1/jobs/bulk`): those of `filter`, or the `ids` listed (exactly one of the
/// two). A chunk of jobs per transaction; a job the action does not apply to is skipped and counted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct BulkRequest {
    /// `cancel` (jobs that have not completed), `delete` (any job, a live one cancelled first), `retry` (run again
    /// the jobs that failed, were cancelled or completed) or `move` (jobs that are not running, to `queue`).
    #[cfg_attr(feature = "openapi", schema(pattern = "^(cancel|delete|retry|move)$"))]
    pub action: String,
    /// With `move`: the queue the jobs go to (and only with `move`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<crate::rules::QueueName>))]
    pub queue: Option<String>,
    /// These jobs, at most 10,000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Vec<crate::rules::JobId>>, max_items = 10000))]
    pub ids: Option<Vec<i64>>,
    /// Every job this filter lists when the action starts (as `GET /v1/jobs` filters them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<BulkFilterBody>,
}

/// The jobs a bulk action acts on, as `GET /v1/jobs`'s filters choose them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct BulkFilterBody {
    /// Only jobs in this queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<crate::rules::QueueName>))]
    pub queue: Option<String>,
    /// Only jobs in this state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<crate::rules::JobStateName>))]
    pub state: Option<String>,
    /// Only jobs whose name matches this GLOB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<crate::rules::NamePattern>))]
    pub name: Option<String>,
    /// Only jobs with this tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<crate::rules::Tag>))]
    pub tag: Option<String>,
    /// Only the failed jobs of this failure group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_group: Option<String>,
    /// Only the children of this job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<crate::rules::JobId>))]
    pub parent: Option<i64>,
    /// Only tracked jobs.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tracked: bool,
    /// Only the jobs of this batch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<crate::rules::BatchId>))]
    pub batch: Option<i64>,
}

/// What a bulk action did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct BulkBody {
    /// The jobs it selected.
    pub matched: u64,
    /// Those it acted on.
    pub done: u64,
    /// Those it left as they were: gone, or in a state the action does not apply to.
    pub skipped: u64,
}

impl From<cairn::BulkOutcome> for BulkBody {
    fn from(o: cairn::BulkOutcome) -> Self {
        BulkBody {
            matched: o.matched,
            done: o.done,
            skipped: o.skipped,
        }
    }
}

impl BulkRequest {
    /// The engine's action and selection.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] naming `action`, `queue`, `ids`, `filter` or a filter's field.
    pub fn into_bulk(self) -> Result<(cairn::BulkAction, cairn::BulkSelection), Error> {
        let action = match (self.action.as_str(), self.queue) {
            ("move", Some(queue)) => cairn::BulkAction::Move { queue },
            ("move", None) => return Err(crate::route::invalid("queue", "is required with move")),
            (_, Some(_)) => return Err(crate::route::invalid("queue", "applies only to move")),
            ("cancel", None) => cairn::BulkAction::Cancel,
            ("delete", None) => cairn::BulkAction::Delete,
            ("retry", None) => cairn::BulkAction::Retry,
            (other, None) => {
                return Err(crate::route::invalid(
                    "action",
                    format!("must be cancel, delete, retry or move, got {other:?}"),
                ));
            }
        };
        let selection = match (self.ids, self.filter) {
            (Some(ids), None) => {
                let ids = ids
                    .into_iter()
                    .map(|id| {
                        if id > 0 {
                            Ok(JobId(id))
                        } else {
                            Err(crate::route::invalid(
                                "ids",
                                format!("must be positive, got {id}"),
                            ))
                        }
                    })
                    .collect::<Result<Vec<_>, Error>>()?;
                cairn::BulkSelection::Ids(ids)
            }
            (None, Some(f)) => cairn::BulkSelection::Filter(cairn::JobFilter {
                queue: f.queue,
                state: f
                    .state
                    .map(|s| {
                        s.parse::<JobState>().map_err(|_| {
                            crate::route::invalid(
                                "filter.state",
                                format!(
                                    "must be a job state (queued, running, failed, …), got {s:?}"
                                ),
                            )
                        })
                    })
                    .transpose()?,
                name: f.name,
                tag: f.tag,
                failure_group: f.failure_group,
                parent: f.parent.map(JobId),
                batch: f.batch.map(cairn::BatchId),
                tracked: f.tracked,
                ..cairn::JobFilter::default()
            }),
            _ => {
                return Err(crate::route::invalid(
                    "ids",
                    "give exactly one of ids and filter",
                ));
            }
        };
        Ok((action, selection))
    }
}

impl From<&Bulk> for BulkRequest {
    fn from(bulk: &Bulk) -> Self {
        let (action, queue) = match &bulk.action {
            cairn::BulkAction::Move { queue } => ("move", Some(queue.clone())),
            other => (other.as_str(), None),
        };
        let (ids, filter) = match &bulk.selection {
            cairn::BulkSelection::Ids(ids) => (Some(ids.iter().map(|id| id.0).collect()), None),
            cairn::BulkSelection::Filter(f) => (
                None,
                Some(BulkFilterBody {
                    queue: f.queue.clone(),
                    state: f.state.map(|s| s.as_str().to_owned()),
                    name: f.name.clone(),
                    tag: f.tag.clone(),
                    failure_group: f.failure_group.clone(),
                    parent: f.parent.map(|p| p.0),
                    tracked: f.tracked,
                    batch: f.batch.map(|b| b.0),
                }),
            ),
        };
        BulkRequest {
            action: action.to_owned(),
            queue,
            ids,
            filter,
        }
    }
}

impl Answer<cairn::BulkOutcome> for BulkBody {
    fn from_output(outcome: cairn::BulkOutcome) -> Self {
        outcome.into()
    }

    fn into_output(self) -> Result<cairn::BulkOutcome, Error> {
        Ok(cairn::BulkOutcome {
            matched: self.matched,
            done: self.done,
            skipped: self.skipped,
        })
    }
}

/// How long a bulk action may take: a chunk of jobs per transaction, over as many jobs as the filter lists.
const BULK_TIME: std::time::Duration = std::time::Duration::from_secs(600);

route! {
    Bulk: Post "/v1/jobs/bulk", params [], tag "jobs", id "bulk", access ADMIN, reach Server,
    summary "One action over many jobs: those of a filter when it starts, or a list of ids; a chunk per \
        transaction, each job by its own operation's rules, the ones it does not apply to skipped and counted.",
    done "What it did: the jobs matched, done and skipped",
    errors [(400, "Bad input, naming the field (an unknown action, a move without a queue, both or neither of ids \
        and filter)")],
    path |_r| [],
    body BulkRequest = |r| BulkRequest::from(r),
    answer BulkBody,
    from |_received, body| body.into_bulk().map(|(action, selection)| Bulk { action, selection }),
    waits |_r| BULK_TIME,
}
