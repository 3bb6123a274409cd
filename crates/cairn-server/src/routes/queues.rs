//! Operating queues: `/v1/queues…` (counts by state, pause and resume, peek) and `/v1/failures…` (failure groups
//! and unfail). A failure group's jobs are listed by `GET /v1/jobs?failure_group=…` (in `jobs`).

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use cairn_api::{
    AgingRequest, ConcurrencyRequest, EmptyBody, ErrorBody, FailureGroupBody, FailureGroupListBody,
    JobBody, KeyConcurrencyRequest, KeyWeightRequest, PeekBody, QueueListBody, QueueStatsBody,
    RateRequest, UnfailBody, UnfailRequest,
};
use serde::Deserialize;
use utoipa::IntoParams;

use crate::body::JsonBody;
use crate::error::ApiResult;
use crate::openapi::{ReadErrors, WriteErrors, WriteWithBodyErrors};
use crate::routes::{GroupPath, QueryParams, QueuePath, limit_param};
use crate::state::AppState;

/// How many jobs a peek shows when it does not say.
const DEFAULT_PEEK: u32 = 10;

/// Every queue that has jobs or settings, by name, with its jobs counted by state (`stalled`: running jobs whose
/// lease ran out and that were not retried yet) and whether it is paused. This reads every job: it is for
/// operators and dashboards, not for a hot path.
#[utoipa::path(get, path = "/v1/queues", tag = "queues",
    responses((status = 200, description = "The queues", body = QueueListBody), ReadErrors))]
pub async fn list_queues(State(state): State<AppState>) -> ApiResult<Json<QueueListBody>> {
    let stats = state.queue.queue_stats().await?;
    Ok(Json(QueueListBody {
        queues: stats.iter().map(QueueStatsBody::from).collect(),
    }))
}

/// Pauses a queue: it hands out no job until it is resumed; enqueue, cancel, finish and everything else work as
/// usual. A queue may be paused before it has any job.
#[utoipa::path(post, path = "/v1/queues/{queue}/pause", tag = "queues",
    params(("queue" = cairn_api::rules::QueueName, Path, description = "The queue's name")),
    responses(
        (status = 200, description = "Paused", body = EmptyBody),
        (status = 400, description = "A bad queue name", body = ErrorBody),
        WriteErrors,
    ))]
pub async fn pause(
    State(state): State<AppState>,
    QueuePath(queue): QueuePath,
) -> ApiResult<Json<EmptyBody>> {
    state.queue.pause_queue(&queue, true).await?;
    Ok(Json(EmptyBody {}))
}

/// Resumes a queue: its ready jobs go at once to the workers waiting for them.
#[utoipa::path(post, path = "/v1/queues/{queue}/resume", tag = "queues",
    params(("queue" = cairn_api::rules::QueueName, Path, description = "The queue's name")),
    responses(
        (status = 200, description = "Resumed", body = EmptyBody),
        (status = 400, description = "A bad queue name", body = ErrorBody),
        WriteErrors,
    ))]
pub async fn resume(
    State(state): State<AppState>,
    QueuePath(queue): QueuePath,
) -> ApiResult<Json<EmptyBody>> {
    state.queue.pause_queue(&queue, false).await?;
    Ok(Json(EmptyBody {}))
}

/// Sets or removes a queue's concurrency limit: at most that many of its jobs run at once, across all workers.
#[utoipa::path(post, path = "/v1/queues/{queue}/concurrency", tag = "queues", request_body = ConcurrencyRequest,
    params(("queue" = cairn_api::rules::QueueName, Path, description = "The queue's name")),
    responses(
        (status = 200, description = "Set", body = EmptyBody),
        (status = 400, description = "A bad queue name or limit (0: pause the queue instead)", body = ErrorBody),
        WriteWithBodyErrors,
    ))]
pub async fn set_concurrency(
    State(state): State<AppState>,
    QueuePath(queue): QueuePath,
    JsonBody(request): JsonBody<ConcurrencyRequest>,
) -> ApiResult<Json<EmptyBody>> {
    state.queue.limit_queue(&queue, request.concurrency).await?;
    Ok(Json(EmptyBody {}))
}

/// Sets or removes a queue's limit per concurrency key: at most that many of its jobs with one key run at once,
/// across all workers and nodes, unless a job carries its own limit. Claims pass over a key at its limit.
#[utoipa::path(post, path = "/v1/queues/{queue}/key-concurrency", tag = "queues", request_body = KeyConcurrencyRequest,
    params(("queue" = cairn_api::rules::QueueName, Path, description = "The queue's name")),
    responses(
        (status = 200, description = "Set", body = EmptyBody),
        (status = 400, description = "A bad queue name or limit", body = ErrorBody),
        (status = 409, description = "The queue has priority aging, which concurrency keys do not go with", body = ErrorBody),
        WriteWithBodyErrors,
    ))]
pub async fn set_key_concurrency(
    State(state): State<AppState>,
    QueuePath(queue): QueuePath,
    JsonBody(request): JsonBody<KeyConcurrencyRequest>,
) -> ApiResult<Json<EmptyBody>> {
    state.queue.limit_keys(&queue, request.limit).await?;
    Ok(Json(EmptyBody {}))
}

/// Sets or removes a concurrency key's weight in a queue: a key of weight N takes up to N jobs per turn where the
/// others take one.
#[utoipa::path(post, path = "/v1/queues/{queue}/key-weight", tag = "queues", request_body = KeyWeightRequest,
    params(("queue" = cairn_api::rules::QueueName, Path, description = "The queue's name")),
    responses(
        (status = 200, description = "Set", body = EmptyBody),
        (status = 400, description = "A bad queue name, key or weight", body = ErrorBody),
        (status = 409, description = "The queue has priority aging, which concurrency keys do not go with", body = ErrorBody),
        WriteWithBodyErrors,
    ))]
pub async fn set_key_weight(
    State(state): State<AppState>,
    QueuePath(queue): QueuePath,
    JsonBody(request): JsonBody<KeyWeightRequest>,
) -> ApiResult<Json<EmptyBody>> {
    state
        .queue
        .weigh_key(&queue, &request.key, request.weight)
        .await?;
    Ok(Json(EmptyBody {}))
}

/// Sets or removes a queue's rate limit: at most `jobs` of its jobs start per `per_ms`, across all workers.
#[utoipa::path(post, path = "/v1/queues/{queue}/rate", tag = "queues", request_body = RateRequest,
    params(("queue" = cairn_api::rules::QueueName, Path, description = "The queue's name")),
    responses(
        (status = 200, description = "Set", body = EmptyBody),
        (status = 400, description = "A bad queue name or rate", body = ErrorBody),
        WriteWithBodyErrors,
    ))]
pub async fn set_rate(
    State(state): State<AppState>,
    QueuePath(queue): QueuePath,
    JsonBody(request): JsonBody<RateRequest>,
) -> ApiResult<Json<EmptyBody>> {
    state
        .queue
        .rate_limit_queue(&queue, request.rate.map(cairn::RateLimit::from))
        .await?;
    Ok(Json(EmptyBody {}))
}

/// Turns a queue's priority aging on or off: with it, a ready job gains one priority point per `every_ms` of
/// waiting, so a stream of high-priority jobs cannot starve the low ones. Applies at once to the queue's jobs.
#[utoipa::path(post, path = "/v1/queues/{queue}/aging", tag = "queues", request_body = AgingRequest,
    params(("queue" = cairn_api::rules::QueueName, Path, description = "The queue's name")),
    responses(
        (status = 200, description = "Set", body = EmptyBody),
        (status = 400, description = "A bad queue name or step", body = ErrorBody),
        (status = 409, description = "The queue has jobs with concurrency keys, which priority aging does not go with", body = ErrorBody),
        WriteWithBodyErrors,
    ))]
pub async fn set_aging(
    State(state): State<AppState>,
    QueuePath(queue): QueuePath,
    JsonBody(request): JsonBody<AgingRequest>,
) -> ApiResult<Json<EmptyBody>> {
    state
        .queue
        .age_queue(&queue, request.every_ms.map(Duration::from_millis))
        .await?;
    Ok(Json(EmptyBody {}))
}

/// How many jobs to peek at.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct PeekParams {
    /// The most jobs to show (default 10, at most 1000).
    #[param(value_type = u32, required = false, minimum = 1, maximum = 1000)]
    limit: Option<String>,
}

/// The next jobs a worker taking from the queue would get, in that order, without taking them; none while the
/// queue is paused.
#[utoipa::path(get, path = "/v1/queues/{queue}/peek", tag = "queues",
    params(("queue" = cairn_api::rules::QueueName, Path, description = "The queue's name"), PeekParams),
    responses(
        (status = 200, description = "The next jobs, in claim order", body = PeekBody),
        (status = 400, description = "A bad queue name or limit", body = ErrorBody),
        ReadErrors,
    ))]
pub async fn peek(
    State(state): State<AppState>,
    QueuePath(queue): QueuePath,
    QueryParams(params): QueryParams<PeekParams>,
) -> ApiResult<Json<PeekBody>> {
    let limit = match params.limit {
        None => DEFAULT_PEEK,
        Some(text) => limit_param(&text, cairn::MAX_PAGE)?,
    };
    let jobs = state.queue.peek(&queue, limit).await?;
    Ok(Json(PeekBody {
        jobs: jobs.iter().map(JobBody::from).collect(),
    }))
}

/// Every failure group that holds failed jobs, by name, with how many and when they failed. A group's jobs are
/// listed by `GET /v1/jobs?failure_group=…`.
#[utoipa::path(get, path = "/v1/failures", tag = "queues",
    responses((status = 200, description = "The failure groups", body = FailureGroupListBody), ReadErrors))]
pub async fn list_failures(State(state): State<AppState>) -> ApiResult<Json<FailureGroupListBody>> {
    let groups = state.queue.failure_groups().await?;
    Ok(Json(FailureGroupListBody {
        groups: groups.iter().map(FailureGroupBody::from).collect(),
    }))
}

/// Puts the oldest failed jobs of a failure group back in a queue (their own, or `queue`), ready now, with fresh
/// attempts; their history is kept. A job whose unique key another live job holds now stays failed. One
/// statement, however many jobs.
#[utoipa::path(post, path = "/v1/failures/{group}/unfail", tag = "queues", request_body = UnfailRequest,
    params(("group" = cairn_api::rules::GroupToUnfail, Path, description = "The failure group")),
    responses(
        (status = 200, description = "How many jobs went back", body = UnfailBody),
        (status = 400, description = "A bad queue name or limit", body = ErrorBody),
        (status = 409, description = "A job with a concurrency key would go to a queue with priority aging", body = ErrorBody),
        WriteWithBodyErrors,
    ))]
pub async fn unfail(
    State(state): State<AppState>,
    GroupPath(group): GroupPath,
    JsonBody(request): JsonBody<UnfailRequest>,
) -> ApiResult<Json<UnfailBody>> {
    let moved = state.queue.unfail(request.into_unfail(group)).await?;
    Ok(Json(UnfailBody { moved }))
}
