//! Operating queues: `/v1/queues…` (counts by state, pause and resume, peek) and `/v1/failures…` (failure groups
//! and unfail). A failure group's jobs are listed by `GET /v1/jobs?failure_group=…` (in `jobs`).

use axum::Json;
use axum::extract::State;
use cairn_api::{
    ErrorBody, FailureGroupBody, FailureGroupListBody, JobBody, PeekBody, QueueListBody,
    QueueStatsBody,
};
use serde::Deserialize;
use utoipa::IntoParams;

use crate::error::ApiResult;
use crate::openapi::ReadErrors;
use crate::routes::{QueryParams, QueuePath, limit_param};
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
