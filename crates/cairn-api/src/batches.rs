//! Batches (`/v1/batches…`): a group of jobs with callbacks, pushed when every job has ended (`on_complete`) or
//! completed (`on_success`). See `cairn::CreateBatch`.

use cairn::{
    AddToBatch, Batch, BatchCallback, BatchCreated, BatchFilter, BatchId, BatchPage, BatchState,
    CloseBatch, CreateBatch, Error, GetBatch, Push,
};
use jiff::Timestamp;
use serde::{Deserialize, Serialize};
#[cfg(feature = "openapi")]
use utoipa::ToSchema;

use crate::Named;
use crate::push::{EnqueuedBatchBody, EnqueuedBody, PushRequest};
use crate::query::{limit_param, optional, positive_param};
use crate::route::{Answer, PathParam, Received, RouteVisitor, invalid, route};
use crate::{ENQUEUE, READ, READ_ONE};
use crate::{EmptyBody, malformed};

/// The `{id}` of a batch's path.
pub const BATCH_ID: PathParam = PathParam {
    name: "id",
    description: "The batch's id",
    rule: "BatchId",
};

impl Received {
    /// The batch of `{id}`.
    ///
    /// # Errors
    /// [`cairn::ErrorKind::InvalidInput`] (field `id`) unless it is a positive integer.
    pub fn batch(&self) -> Result<BatchId, Error> {
        let text = self.text("id")?;
        text.parse::<i64>()
            .ok()
            .filter(|id| *id > 0)
            .map(BatchId)
            .ok_or_else(|| invalid("id", format!("must be a positive integer, got {text:?}")))
    }
}

/// A batch to create: its jobs, and the callbacks to push when it ends.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CreateBatchRequest {
    /// The jobs, in order, as `POST /v1/jobs` takes them (without `batch`). A batch may start empty.
    #[serde(default)]
    pub jobs: Vec<PushRequest>,
    /// Pushed once every job has completed. Its data must be an object; it gets a member `batch` with the batch's
    /// `id`, `description`, `total`, `completed`, `failed`, `cancelled` and `failed_ids` (the first 1,000 failed
    /// jobs). Without `run_at`, `delay_ms`, `parent`, `depends_on`, `schedule`, `debounce`, `throttle`,
    /// `trace_parent` or `batch`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_success: Option<PushRequest>,
    /// Pushed once every job has completed, failed or been cancelled (a job deleted before it ended counts as
    /// cancelled), with the same `batch` member and rules as `on_success`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_complete: Option<PushRequest>,
    /// Hold the batch open: it does not complete until closed (`POST /v1/batches/{id}/close`), so jobs can be added
    /// over time.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub open: bool,
    /// What the batch is, for people: at most 1,000 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(max_length = 1000))]
    pub description: Option<String>,
}

/// A new batch: its id, and its jobs in request order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct BatchCreatedBody {
    /// The batch's id.
    pub id: i64,
    /// One entry per job, in request order.
    pub jobs: Vec<EnqueuedBody>,
}

impl Answer<BatchCreated> for BatchCreatedBody {
    fn from_output(created: BatchCreated) -> Self {
        BatchCreatedBody {
            id: created.batch.0,
            jobs: created.jobs.into_iter().map(EnqueuedBody::from).collect(),
        }
    }

    fn into_output(self) -> Result<BatchCreated, Error> {
        Ok(BatchCreated {
            batch: BatchId(self.id),
            jobs: self
                .jobs
                .iter()
                .map(EnqueuedBody::to_enqueued)
                .collect::<Result<_, _>>()?,
        })
    }
}

/// Jobs to add to a batch.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct AddToBatchRequest {
    /// The jobs, in order, as `POST /v1/jobs` takes them (`batch` unset, or this batch).
    pub jobs: Vec<PushRequest>,
}

/// A batch's callback: the job it pushes, and the job it pushed once the batch reached its end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct BatchCallbackBody {
    /// The callback job's queue.
    pub queue: String,
    /// Its name.
    pub name: String,
    /// The job pushed, once it was.
    pub job: Option<i64>,
    /// Why it could not be pushed when the batch reached its end, if it could not (its job no longer valid, say a
    /// data limit lowered since).
    #[serde(default)]
    pub error: Option<String>,
}

/// A batch and its progress.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct BatchBody {
    /// The batch's id.
    pub id: i64,
    /// What it is, if it was described.
    pub description: Option<String>,
    /// `open` (it does not complete until closed), `running` (closed, with jobs to go) or `completed` (every job
    /// ended; it stays so even if a failed job runs again).
    #[cfg_attr(feature = "openapi", schema(pattern = "^(open|running|completed)$"))]
    pub state: String,
    /// Jobs ever added.
    pub total: u64,
    /// Of them, those not yet completed, failed or cancelled.
    pub pending: u64,
    /// Those completed.
    pub completed: u64,
    /// Those failed.
    pub failed: u64,
    /// Those cancelled, or deleted before they ended.
    pub cancelled: u64,
    /// When it was created.
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub created_at: Timestamp,
    /// When every job first reached a final state, with the batch closed.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub completed_at: Option<Timestamp>,
    /// When every job first completed, with the batch closed.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub succeeded_at: Option<Timestamp>,
    /// The callback pushed when every job has completed.
    pub on_success: Option<BatchCallbackBody>,
    /// The callback pushed when every job has reached a final state.
    pub on_complete: Option<BatchCallbackBody>,
}

impl From<&BatchCallback> for BatchCallbackBody {
    fn from(c: &BatchCallback) -> Self {
        BatchCallbackBody {
            queue: c.queue.to_string(),
            name: c.name.to_string(),
            job: c.job.map(|j| j.0),
            error: c.error.clone(),
        }
    }
}

impl From<&Batch> for BatchBody {
    fn from(b: &Batch) -> Self {
        BatchBody {
            id: b.id.0,
            description: b.description.clone(),
            state: b.state.as_str().to_owned(),
            total: b.total,
            pending: b.pending,
            completed: b.completed,
            failed: b.failed,
            cancelled: b.cancelled,
            created_at: b.created_at,
            completed_at: b.completed_at,
            succeeded_at: b.succeeded_at,
            on_success: b.on_success.as_ref().map(BatchCallbackBody::from),
            on_complete: b.on_complete.as_ref().map(BatchCallbackBody::from),
        }
    }
}

impl BatchBody {
    /// The engine's batch.
    ///
    /// # Errors
    /// [`cairn::ErrorKind::Unavailable`] for a body Cairn does not send.
    pub fn to_batch(&self) -> Result<Batch, Error> {
        let callback = |c: &Option<BatchCallbackBody>| -> Result<Option<BatchCallback>, Error> {
            c.as_ref()
                .map(|c| {
                    Ok(BatchCallback {
                        queue: cairn::QueueName::parse(&c.queue).map_err(malformed)?,
                        name: cairn::JobName::parse(&c.name).map_err(malformed)?,
                        job: c.job.map(cairn::JobId),
                        error: c.error.clone(),
                    })
                })
                .transpose()
        };
        Ok(Batch {
            id: BatchId(self.id),
            description: self.description.clone(),
            state: BatchState::parse(&self.state).map_err(malformed)?,
            total: self.total,
            pending: self.pending,
            completed: self.completed,
            failed: self.failed,
            cancelled: self.cancelled,
            created_at: self.created_at,
            completed_at: self.completed_at,
            succeeded_at: self.succeeded_at,
            on_success: callback(&self.on_success)?,
            on_complete: callback(&self.on_complete)?,
        })
    }
}

impl Answer<Batch> for BatchBody {
    fn from_output(batch: Batch) -> Self {
        BatchBody::from(&batch)
    }

    fn into_output(self) -> Result<Batch, Error> {
        self.to_batch()
    }
}

/// A page of batches, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct BatchListBody {
    /// The batches.
    pub batches: Vec<BatchBody>,
    /// Pass as `before` for the next page; absent on the last.
    pub next: Option<i64>,
}

/// The batches' routes declared here, for [`visit_routes`](crate::visit_routes).
pub(crate) fn visit_batch_routes(visitor: &mut impl RouteVisitor) {
    visitor.visit::<CreateBatch>();
    visitor.visit::<AddToBatch>();
    visitor.visit::<CloseBatch>();
    visitor.visit::<GetBatch>();
    visitor.visit::<BatchFilter>();
}

route! {
    CreateBatch: Post "/v1/batches", params [], tag "batches", id "create_batch", access ENQUEUE, reach Queues,
    summary "Creates a batch of jobs, all or none, with callbacks: on_complete is pushed once every job has ended, \
        on_success once every job has completed; each exactly once.",
    done "Created; the batch's id and its jobs",
    errors [
        (400, "Bad input, naming the field"),
        (409, "A job's parent cannot have children now, or a job has a concurrency key for a queue with priority aging"),
    ],
    path |_| [],
    body CreateBatchRequest = |r| CreateBatchRequest {
        jobs: r.jobs.iter().map(PushRequest::from).collect(),
        on_success: r.on_success.as_ref().map(PushRequest::from),
        on_complete: r.on_complete.as_ref().map(PushRequest::from),
        open: r.open,
        description: r.description.clone(),
    },
    answer BatchCreatedBody,
    from |_, body| Ok(CreateBatch {
        jobs: body.jobs.into_iter().map(Push::from).collect(),
        on_success: body.on_success.map(Push::from),
        on_complete: body.on_complete.map(Push::from),
        open: body.open,
        description: body.description,
    }),
    names |r| Named::pushes(r.jobs.iter().chain(&r.on_success).chain(&r.on_complete)),
}

route! {
    AddToBatch: Post "/v1/batches/{id}/jobs", params [BATCH_ID], tag "batches", id "add_to_batch",
        access ENQUEUE, reach Queues,
    summary "Adds jobs to a batch that has not completed, all or none.",
    done "Added; the jobs in request order",
    errors [
        (400, "Bad input, naming the field"),
        (404, "No such batch"),
        (409, "The batch has completed; or a job's parent cannot have children now, or a job has a concurrency key \
            for a queue with priority aging"),
    ],
    path |r| [r.batch],
    body AddToBatchRequest = |r| AddToBatchRequest {
        jobs: r.jobs.iter().map(PushRequest::from).collect(),
    },
    answer EnqueuedBatchBody,
    from |path, body| Ok(AddToBatch {
        batch: path.batch()?,
        jobs: body.jobs.into_iter().map(Push::from).collect(),
    }),
    names |r| Named::pushes(&r.jobs),
}

route! {
    CloseBatch: Post "/v1/batches/{id}/close", params [BATCH_ID], tag "batches", id "close_batch",
        access ENQUEUE, reach Queues,
    summary "Closes an open batch: it completes once every job has ended (at once if they all have). Closing a \
        closed batch changes nothing.",
    done "Closed; the batch",
    errors [(404, "No such batch")],
    path |r| [r.batch],
    body EmptyBody = |_| EmptyBody {},
    answer BatchBody,
    from |path, _| Ok(CloseBatch { batch: path.batch()? }),
}

/// Which batches to list (`GET /v1/batches`'s parameters).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct BatchListQuery {
    /// Only batches in this state: `open`, `running` or `completed`.
    #[cfg_attr(feature = "openapi", schema(pattern = "^(open|running|completed)$"))]
    pub state: Option<String>,
    /// Only batches older than this id (the `next` of the previous page).
    #[cfg_attr(feature = "openapi", schema(value_type = Option<crate::rules::BatchId>))]
    pub before: Option<String>,
    /// The most batches on the page (default 100, at most 1000).
    #[cfg_attr(feature = "openapi", schema(value_type = Option<u32>, minimum = 1, maximum = 1000))]
    pub limit: Option<String>,
}

impl From<&BatchFilter> for BatchListQuery {
    fn from(filter: &BatchFilter) -> Self {
        BatchListQuery {
            state: filter.state.map(|state| state.as_str().to_owned()),
            before: filter.before.map(|batch| batch.to_string()),
            limit: Some(filter.limit.to_string()),
        }
    }
}

impl BatchListQuery {
    /// The engine's filter.
    ///
    /// # Errors
    /// [`cairn::ErrorKind::InvalidInput`] naming the parameter that is not of its kind.
    pub fn into_filter(self) -> Result<BatchFilter, Error> {
        let mut filter = BatchFilter::default();
        if let Some(text) = self.state {
            filter.state = Some(BatchState::parse(&text)?);
        }
        filter.before = optional(self.before.as_ref(), |t| {
            positive_param("before", "a batch id", t).map(BatchId)
        })?;
        if let Some(text) = self.limit {
            filter.limit = limit_param(&text, cairn::MAX_PAGE)?;
        }
        Ok(filter)
    }
}

impl Answer<BatchPage> for BatchListBody {
    fn from_output(page: BatchPage) -> Self {
        BatchListBody {
            batches: page.batches.iter().map(BatchBody::from).collect(),
            next: page.next.map(|batch| batch.0),
        }
    }

    fn into_output(self) -> Result<BatchPage, Error> {
        Ok(BatchPage {
            batches: self
                .batches
                .iter()
                .map(BatchBody::to_batch)
                .collect::<Result<_, Error>>()?,
            next: self.next.map(BatchId),
        })
    }
}

route! {
    GetBatch: Get "/v1/batches/{id}", params [BATCH_ID], tag "batches", id "get_batch", access READ_ONE, reach Queues,
    summary "A batch and its progress.",
    done "The batch: its state, counts and callbacks",
    errors [
        (404, "No such batch"),
        (400, "A bad id (not a positive integer)"),
    ],
    path |r| [r.batch],
    no body,
    answer BatchBody,
    from |received| Ok(GetBatch { batch: received.batch()? }),
}

route! {
    BatchFilter: Get "/v1/batches", params [], tag "batches", id "list_batches", access READ, reach Server,
    summary "A page of batches, newest first.",
    done "A page of batches",
    errors [(400, "Bad filter")],
    path |_r| [],
    body BatchListQuery = |r| BatchListQuery::from(r),
    answer BatchListBody,
    from |_received, query| query.into_filter(),
}
