//! Enqueueing, reading and managing jobs: `/v1/jobs…`, tracking among them. The routes declared in `cairn-api`
//! are mounted by `routes/declared.rs`; these are the others.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use cairn::{JobFilter, JobState, Push};
use cairn_api::{
    BulkBody, BulkRequest, EnqueuedBatchBody, EnqueuedBody, ErrorBody, JobBody, JobPageBody,
    PushBatchRequest, PushRequest,
};
use serde::Deserialize;
use std::time::Duration;
use utoipa::IntoParams;

use crate::body::JsonBody;
use crate::error::{ApiError, ApiResult};
use crate::openapi::{ReadErrors, WriteWithBodyErrors};
use crate::routes::{JobPath, QueryParams, bool_param, id_param, limit_param};
use crate::state::AppState;

/// Enqueues one job. Answers 201 for a new job, 200 when a live job already held the unique key or a debounced push
/// landed in the pending job of its key.
#[utoipa::path(post, path = "/v1/jobs", tag = "jobs", request_body = PushRequest,
    responses(
        (status = 201, description = "Enqueued", body = EnqueuedBody),
        (status = 200, description = "A live job holds the unique key, or the debounced push landed in the pending job of its key; this is that job", body = EnqueuedBody),
        (status = 400, description = "Bad input, naming the field (a parent or dependency that does not exist among them)", body = ErrorBody),
        (status = 409, description = "The parent cannot have children now: it is neither running nor waiting for its children; or a job with a concurrency key for a queue with priority aging", body = ErrorBody),
        WriteWithBodyErrors,
    ))]
pub async fn enqueue(
    State(state): State<AppState>,
    headers: HeaderMap,
    JsonBody(push): JsonBody<PushRequest>,
) -> ApiResult<(StatusCode, Json<EnqueuedBody>)> {
    let enqueued = state
        .queue
        .enqueue(in_trace(Push::from(push), &headers))
        .await?;
    let status = if enqueued.existing {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    Ok((status, Json(enqueued.into())))
}

/// Enqueues many jobs in one transaction: all of them, or none (the error names the bad job's index).
#[utoipa::path(post, path = "/v1/jobs/batch", tag = "jobs", request_body = PushBatchRequest,
    responses(
        (status = 200, description = "Every job, in request order", body = EnqueuedBatchBody),
        (status = 400, description = "Bad input, naming the job and field (a parent or dependency that does not exist among them)", body = ErrorBody),
        (status = 409, description = "A job's parent cannot have children now: it is neither running nor waiting for its children; or a job with a concurrency key for a queue with priority aging", body = ErrorBody),
        WriteWithBodyErrors,
    ))]
pub async fn enqueue_batch(
    State(state): State<AppState>,
    headers: HeaderMap,
    JsonBody(batch): JsonBody<PushBatchRequest>,
) -> ApiResult<Json<EnqueuedBatchBody>> {
    let max = state.config.max_batch_jobs;
    if batch.jobs.len() > max {
        return Err(ApiError::invalid(
            "jobs",
            format!(
                "must hold at most {max} jobs (the server's max_batch_jobs), got {}",
                batch.jobs.len()
            ),
        ));
    }
    let jobs = batch
        .jobs
        .into_iter()
        .map(|push| in_trace(Push::from(push), &headers))
        .collect();
    let enqueued = state.queue.enqueue_batch(jobs).await?;
    Ok(Json(EnqueuedBatchBody {
        jobs: enqueued.into_iter().map(EnqueuedBody::from).collect(),
    }))
}

/// One action over many jobs: those of a filter when it starts, or a list of ids; a chunk per transaction, each job
/// by its own operation's rules, the ones it does not apply to skipped and counted.
#[utoipa::path(post, path = "/v1/jobs/bulk", tag = "jobs", request_body = BulkRequest,
    responses(
        (status = 200, description = "What it did: the jobs matched, done and skipped", body = BulkBody),
        (status = 400, description = "Bad input, naming the field (an unknown action, a move without a queue, both or neither of ids and filter)", body = ErrorBody),
        WriteWithBodyErrors,
    ))]
pub async fn bulk(
    State(state): State<AppState>,
    JsonBody(request): JsonBody<BulkRequest>,
) -> ApiResult<Json<BulkBody>> {
    let (action, selection) = request.into_bulk()?;
    let outcome = state.queue.bulk(action, selection).await?;
    Ok(Json(outcome.into()))
}

/// A push without a trace context of its own takes the request's (its W3C `traceparent` header), so that a caller
/// whose HTTP client propagates traces needs to do nothing more. A header that is not a valid `traceparent` is
/// ignored, as W3C asks of a receiver; a `trace_parent` in the body is held to the rules.
fn in_trace(mut push: Push, headers: &HeaderMap) -> Push {
    // A recurring job's runs are each a trace of their own.
    if push.trace_parent.is_none() && push.schedule.is_none() {
        push.trace_parent = headers
            .get("traceparent")
            .and_then(|value| value.to_str().ok())
            .filter(|value| cairn::TraceParent::parse(*value).is_ok())
            .map(str::to_owned);
    }
    push
}

/// A job with its history.
#[utoipa::path(get, path = "/v1/jobs/{id}", tag = "jobs",
    params(("id" = cairn_api::rules::JobId, Path, description = "The job's id"), GetParams),
    responses(
        (status = 200, description = "The job; with `wait_ms`, once it ended (its state completed, failed or \
            cancelled, with its result or error) or as it stands when the wait ran out", body = JobBody),
        (status = 404, description = "No such job", body = ErrorBody),
        (status = 400, description = "A bad id (not a positive integer) or `wait_ms`", body = ErrorBody),
        ReadErrors,
    ))]
pub async fn get_job(
    State(state): State<AppState>,
    JobPath(id): JobPath,
    QueryParams(params): QueryParams<GetParams>,
) -> ApiResult<Json<JobBody>> {
    let wait = params
        .wait_ms
        .as_deref()
        .map(|text| {
            text.parse::<u64>()
                .ok()
                .filter(|ms| *ms <= 86_400_000)
                .ok_or_else(|| {
                    ApiError::invalid(
                        "wait_ms",
                        format!(
                            "must be a whole number of milliseconds up to a day (86400000), got {text:?}"
                        ),
                    )
                })
        })
        .transpose()?;
    let job = match wait {
        None | Some(0) => state.queue.get(id).await?,
        // Capped as a dequeue's long poll is: the caller asks again.
        Some(ms) => {
            let wait = Duration::from_millis(ms).min(state.config.max_wait);
            // A stopping server answers with the job as it stands, as it answers a long poll with no job.
            tokio::select! {
                job = state.queue.wait(id, wait) => job?,
                () = state.shutdown.cancelled() => state.queue.get(id).await?,
            }
        }
    };
    Ok(Json(JobBody::from(&job)))
}

/// How to read one job.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct GetParams {
    /// Wait up to this long (ms, at most a day; the server caps it as it caps a dequeue's wait, 60 s by default) for
    /// the job to end, and answer the moment it does. Absent or 0: answer at once.
    #[param(value_type = u64, required = false, minimum = 0, maximum = 86_400_000)]
    wait_ms: Option<String>,
}

/// Filters for listing jobs.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ListParams {
    /// Only jobs in this queue.
    #[param(value_type = cairn_api::rules::QueueName, required = false)]
    queue: Option<String>,
    /// Only jobs in this state.
    #[param(value_type = cairn_api::rules::JobStateName, required = false)]
    state: Option<String>,
    /// Only jobs whose name matches this GLOB pattern.
    #[param(value_type = cairn_api::rules::NamePattern, required = false)]
    name: Option<String>,
    /// Only jobs with this tag.
    #[param(value_type = cairn_api::rules::Tag, required = false)]
    tag: Option<String>,
    /// Only the failed jobs of this failure group (see `GET /v1/failures`).
    failure_group: Option<String>,
    /// `true`: only tracked jobs (see `POST /v1/jobs/{id}/track`), whatever their state; `false` or absent: every
    /// job.
    #[param(value_type = bool, required = false)]
    tracked: Option<String>,
    /// Only the children of this job.
    #[param(value_type = cairn_api::rules::JobId, required = false)]
    parent: Option<String>,
    /// Only the jobs of this batch.
    #[param(value_type = cairn_api::rules::BatchId, required = false)]
    batch: Option<String>,
    /// Only jobs older than this id (the `next` of the previous page).
    #[param(value_type = cairn_api::rules::JobId, required = false)]
    before: Option<String>,
    /// The most jobs on the page (default 100, at most 1000).
    #[param(value_type = u32, required = false, minimum = 1, maximum = 1000)]
    limit: Option<String>,
}

/// A page of jobs, newest first, without their history.
#[utoipa::path(get, path = "/v1/jobs", tag = "jobs", params(ListParams),
    responses(
        (status = 200, description = "A page of jobs", body = JobPageBody),
        (status = 400, description = "Bad filter", body = ErrorBody),
        ReadErrors,
    ))]
pub async fn list_jobs(
    State(state): State<AppState>,
    QueryParams(params): QueryParams<ListParams>,
) -> ApiResult<Json<JobPageBody>> {
    let mut filter = JobFilter {
        queue: params.queue,
        name: params.name,
        tag: params.tag,
        failure_group: params.failure_group,
        tracked: params
            .tracked
            .as_deref()
            .map(|text| bool_param("tracked", text))
            .transpose()?
            .unwrap_or(false),
        before: params
            .before
            .as_deref()
            .map(|text| id_param("before", text))
            .transpose()?,
        parent: params
            .parent
            .as_deref()
            .map(|text| id_param("parent", text))
            .transpose()?,
        batch: params
            .batch
            .as_deref()
            .map(|text| {
                id_param("batch", text)
                    .map(|id| cairn::BatchId(id.0))
                    .map_err(|_| {
                        ApiError::invalid(
                            "batch",
                            format!("must be a batch id (a positive integer), got {text:?}"),
                        )
                    })
            })
            .transpose()?,
        ..JobFilter::default()
    };
    if let Some(state) = params.state {
        filter.state = Some(state.parse::<JobState>()?);
    }
    if let Some(text) = params.limit {
        filter.limit = limit_param(&text, cairn::MAX_PAGE)?;
    }
    let page = state.queue.list(filter).await?;
    Ok(Json(JobPageBody {
        jobs: page.jobs.iter().map(JobBody::from).collect(),
        next: page.next.map(|id| id.0),
    }))
}
