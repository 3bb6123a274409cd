//! Taking jobs (`POST /v1/dequeue`, a long poll) and the calls a worker makes under a lease
//! (`/v1/jobs/{id}/heartbeat|checkpoint|update|finish|retry|fail|release`). Every lease call carries the lease's
//! token, and the engine refuses it (409 `lease_lost`) unless that exact lease still holds the job.

use axum::Json;
use axum::extract::State;
use cairn::{Continue, Fail, Finish, Lease, Retry, RunUsage, WorkerId};
use cairn_api::{
    CheckpointRequest, ClaimedJobBody, DequeueBody, DequeueRequest, EmptyBody, ErrorBody,
    FailRequest, FinishManyBody, FinishManyRequest, FinishRequest, FinishResult, HeartbeatRequest,
    LeaseExpiryBody, LeaseRequest, RetryRequest, StateBody, UpdateRequest,
};

use crate::body::JsonBody;
use crate::error::{ApiError, ApiResult};
use crate::openapi::WriteWithBodyErrors;
use crate::routes::{JobPath, millis, token};
use crate::state::AppState;

/// Takes up to `limit` ready jobs. With `wait_ms`, waits (a long poll) until a job is ready, answering the moment
/// one is, or with no job when the wait ends or the server shuts down.
#[utoipa::path(post, path = "/v1/dequeue", tag = "workers", request_body = DequeueRequest,
    responses(
        (status = 200, description = "The jobs taken, each with its lease (possibly none)", body = DequeueBody),
        (status = 400, description = "Bad input, naming the field", body = ErrorBody),
        WriteWithBodyErrors,
    ))]
pub async fn dequeue(
    State(state): State<AppState>,
    JsonBody(request): JsonBody<DequeueRequest>,
) -> ApiResult<Json<DequeueBody>> {
    let request = request.into_dequeue(state.config.max_wait)?;
    // If the client goes away, this future is dropped; the engine then gives back any job it claimed for it.
    let claimed = tokio::select! {
        claimed = state.queue.dequeue(request) => claimed?,
        () = state.shutdown.cancelled() => Vec::new(),
    };
    Ok(Json(DequeueBody {
        jobs: claimed.iter().map(ClaimedJobBody::from).collect(),
    }))
}

/// The lease named by a path id and a token. The engine checks only job and token; the rest is for the types.
fn lease(job: cairn::JobId, token_text: &str) -> ApiResult<Lease> {
    Ok(Lease {
        job,
        token: token(token_text)?,
        worker: WorkerId::parse("http").expect("a valid worker id"),
        expires_at: jiff::Timestamp::UNIX_EPOCH,
    })
}

/// Completes many jobs at once, each as `POST /v1/jobs/{id}/finish` would: for a worker that reports several jobs
/// together, in one request and one transaction. Each job is answered on its own, in order (a lost lease refuses
/// only its job); a malformed request (a bad id or token, more than 1,000 jobs, a bad `take`) is refused whole,
/// naming `jobs[i].field` or `take.field`. With `take`, the worker's next jobs come back in the same answer.
#[utoipa::path(post, path = "/v1/finish", tag = "workers", request_body = FinishManyRequest,
    responses(
        (status = 200, description = "Each job's answer, in order, and the jobs taken", body = FinishManyBody),
        (status = 400, description = "Bad input, naming the field (such as `jobs[2].token`)", body = ErrorBody),
        WriteWithBodyErrors,
    ))]
pub async fn finish_many(
    State(state): State<AppState>,
    JsonBody(request): JsonBody<FinishManyRequest>,
) -> ApiResult<Json<FinishManyBody>> {
    if request.jobs.len() > cairn::MAX_FINISH_MANY {
        return Err(ApiError::invalid(
            "jobs",
            format!(
                "must hold at most {} jobs, got {}",
                cairn::MAX_FINISH_MANY,
                request.jobs.len()
            ),
        ));
    }
    let take = request
        .take
        .map(|take| {
            if take.wait_ms.unwrap_or(0) != 0 {
                return Err(ApiError::invalid(
                    "take.wait_ms",
                    "must be 0 or absent: a take never waits, since a long poll would hold back the finishes' answers",
                ));
            }
            take.into_dequeue(state.config.max_wait)
                .map_err(|e| under_take(e.into()))
        })
        .transpose()?;
    let mut finishes = Vec::with_capacity(request.jobs.len());
    let mut ids = Vec::with_capacity(request.jobs.len());
    for (i, item) in request.jobs.into_iter().enumerate() {
        let at = format!("jobs[{i}]");
        let id = super::job_id(&item.id.to_string()).map_err(|e| e.nested_under(&at, "id"))?;
        let lease = lease(id, &item.token).map_err(|e| e.nested_under(&at, "token"))?;
        ids.push(item.id);
        finishes.push(Finish {
            result: item.result,
            data: item.data,
            usage: item.usage.map(RunUsage::from),
            next: item.next.map(Continue::from),
            ..Finish::new(&lease)
        });
    }
    let has_next: Vec<bool> = finishes.iter().map(|f| f.next.is_some()).collect();
    let (answers, taken) = match take {
        None => (state.queue.finish_many(finishes).await?, Ok(Vec::new())),
        Some(take) => {
            let done = state
                .queue
                .finish_and_take(finishes, take)
                .await
                .map_err(|e| under_take(e.into()))?;
            // An error that answered every finish (the queue closing) fails the request; jobs taken in the same
            // moment stay leased until their lease expires.
            (done.finished?, done.taken)
        }
    };
    let results = ids
        .into_iter()
        .zip(answers)
        .zip(has_next)
        .map(|((id, answer), has_next)| FinishResult {
            id,
            error: answer
                .err()
                .map(|e| finish_error(e, has_next).body().error.clone()),
        })
        .collect();
    let (jobs, take_error) = match taken {
        Ok(jobs) => (jobs.iter().map(ClaimedJobBody::from).collect(), None),
        Err(e) => (Vec::new(), Some(ApiError::from(e).body().error.clone())),
    };
    Ok(Json(FinishManyBody {
        results,
        jobs,
        take_error,
    }))
}

/// An error about a field of a finish's `take`, as it names that field: `take.limit`, say. The count of finishes
/// is the request's own.
fn under_take(error: ApiError) -> ApiError {
    match error.body().error.field.clone() {
        Some(field) if field != "finishes" => error.nested_under("take", &field),
        _ => error,
    }
}

/// Extends the lease to a full lease timeout from now, optionally recording progress.
#[utoipa::path(post, path = "/v1/jobs/{id}/heartbeat", tag = "workers", request_body = HeartbeatRequest,
    params(("id" = cairn_api::rules::JobId, Path, description = "The job's id")),
    responses(
        (status = 200, description = "The lease's new expiry", body = LeaseExpiryBody),
        (status = 409, description = "The lease was lost", body = ErrorBody),
        (status = 400, description = "Bad input: a bad id, or a body that breaks a rule; `field` names it", body = ErrorBody),
        WriteWithBodyErrors,
    ))]
pub async fn heartbeat(
    State(state): State<AppState>,
    JobPath(id): JobPath,
    JsonBody(request): JsonBody<HeartbeatRequest>,
) -> ApiResult<Json<LeaseExpiryBody>> {
    let lease = lease(id, &request.token)?;
    let lease_expires_at = state.queue.heartbeat(&lease, request.progress).await?;
    Ok(Json(LeaseExpiryBody { lease_expires_at }))
}

/// Saves the data a retry starts from, and extends the lease.
#[utoipa::path(post, path = "/v1/jobs/{id}/checkpoint", tag = "workers", request_body = CheckpointRequest,
    params(("id" = cairn_api::rules::JobId, Path, description = "The job's id")),
    responses(
        (status = 200, description = "The lease's new expiry", body = LeaseExpiryBody),
        (status = 409, description = "The lease was lost", body = ErrorBody),
        (status = 400, description = "Bad input: a bad id, or a body that breaks a rule; `field` names it", body = ErrorBody),
        WriteWithBodyErrors,
    ))]
pub async fn checkpoint(
    State(state): State<AppState>,
    JobPath(id): JobPath,
    JsonBody(request): JsonBody<CheckpointRequest>,
) -> ApiResult<Json<LeaseExpiryBody>> {
    let lease = lease(id, &request.token)?;
    let lease_expires_at = state.queue.checkpoint(&lease, request.data).await?;
    Ok(Json(LeaseExpiryBody { lease_expires_at }))
}

/// Records progress for queries to show.
#[utoipa::path(post, path = "/v1/jobs/{id}/update", tag = "workers", request_body = UpdateRequest,
    params(("id" = cairn_api::rules::JobId, Path, description = "The job's id")),
    responses(
        (status = 200, description = "Recorded", body = EmptyBody),
        (status = 409, description = "The lease was lost", body = ErrorBody),
        (status = 400, description = "Bad input: a bad id, or a body that breaks a rule; `field` names it", body = ErrorBody),
        WriteWithBodyErrors,
    ))]
pub async fn update(
    State(state): State<AppState>,
    JobPath(id): JobPath,
    JsonBody(request): JsonBody<UpdateRequest>,
) -> ApiResult<Json<EmptyBody>> {
    let lease = lease(id, &request.token)?;
    state.queue.update(&lease, request.progress).await?;
    Ok(Json(EmptyBody {}))
}

/// Completes the job, optionally replacing its data with a result. With `next`, completes only this step: the
/// attempt ends and the job goes on in another queue (after `delay_ms`, once `depends_on` complete), with fresh
/// attempts and the data it finished with, in one step.
#[utoipa::path(post, path = "/v1/jobs/{id}/finish", tag = "workers", request_body = FinishRequest,
    params(("id" = cairn_api::rules::JobId, Path, description = "The job's id")),
    responses(
        (status = 200, description = "Completed, or moved on to its next queue", body = EmptyBody),
        (status = 400, description = "Bad input, naming the field (such as `next.queue`)", body = ErrorBody),
        (status = 409, description = "The lease was lost, or a next dependency was cancelled or would make a cycle, or a job with a concurrency key would go on to a queue with priority aging", body = ErrorBody),
        WriteWithBodyErrors,
    ))]
pub async fn finish(
    State(state): State<AppState>,
    JobPath(id): JobPath,
    JsonBody(request): JsonBody<FinishRequest>,
) -> ApiResult<Json<EmptyBody>> {
    let lease = lease(id, &request.token)?;
    let has_next = request.next.is_some();
    state
        .queue
        .finish_with(Finish {
            result: request.result,
            data: request.data,
            usage: request.usage.map(RunUsage::from),
            next: request.next.map(Continue::from),
            ..Finish::new(&lease)
        })
        .await
        .map_err(|e| finish_error(e, has_next))?;
    Ok(Json(EmptyBody {}))
}

/// A finish's error as the request spells its fields. The engine checks a next step's dependencies as it checks a
/// new job's, under `depends_on`; in a finish they are `next.depends_on`.
fn finish_error(e: cairn::Error, has_next: bool) -> ApiError {
    let error = ApiError::from(e);
    if has_next {
        error.nested_under("next", "depends_on")
    } else {
        error
    }
}

/// Reports a transient error: the job runs again after its backoff (or `delay_ms`, or at `run_at`), or fails when
/// out of attempts.
#[utoipa::path(post, path = "/v1/jobs/{id}/retry", tag = "workers", request_body = RetryRequest,
    params(("id" = cairn_api::rules::JobId, Path, description = "The job's id")),
    responses(
        (status = 200, description = "The job's new state: queued, scheduled, or failed", body = StateBody),
        (status = 409, description = "The lease was lost", body = ErrorBody),
        (status = 400, description = "Bad input: a bad id, or a body that breaks a rule; `field` names it", body = ErrorBody),
        WriteWithBodyErrors,
    ))]
pub async fn retry(
    State(state): State<AppState>,
    JobPath(id): JobPath,
    JsonBody(request): JsonBody<RetryRequest>,
) -> ApiResult<Json<StateBody>> {
    let lease = lease(id, &request.token)?;
    let new_state = state
        .queue
        .retry_with(Retry {
            delay: millis(request.delay_ms),
            run_at: request.run_at,
            usage: request.usage.map(RunUsage::from),
            ..Retry::new(&lease, request.error)
        })
        .await?;
    Ok(Json(StateBody::from(new_state)))
}

/// Fails the job for good, with a failure group and a message.
#[utoipa::path(post, path = "/v1/jobs/{id}/fail", tag = "workers", request_body = FailRequest,
    params(("id" = cairn_api::rules::JobId, Path, description = "The job's id")),
    responses(
        (status = 200, description = "Failed", body = EmptyBody),
        (status = 409, description = "The lease was lost", body = ErrorBody),
        (status = 400, description = "Bad input: a bad id, or a body that breaks a rule; `field` names it", body = ErrorBody),
        WriteWithBodyErrors,
    ))]
pub async fn fail(
    State(state): State<AppState>,
    JobPath(id): JobPath,
    JsonBody(request): JsonBody<FailRequest>,
) -> ApiResult<Json<EmptyBody>> {
    let lease = lease(id, &request.token)?;
    state
        .queue
        .fail_with(Fail {
            usage: request.usage.map(RunUsage::from),
            ..Fail::new(&lease, request.group, request.message)
        })
        .await?;
    Ok(Json(EmptyBody {}))
}

/// Gives the job back to its queue at once, without counting the attempt.
#[utoipa::path(post, path = "/v1/jobs/{id}/release", tag = "workers", request_body = LeaseRequest,
    params(("id" = cairn_api::rules::JobId, Path, description = "The job's id")),
    responses(
        (status = 200, description = "Released", body = EmptyBody),
        (status = 409, description = "The lease was lost", body = ErrorBody),
        (status = 400, description = "Bad input: a bad id, or a body that breaks a rule; `field` names it", body = ErrorBody),
        WriteWithBodyErrors,
    ))]
pub async fn release(
    State(state): State<AppState>,
    JobPath(id): JobPath,
    JsonBody(request): JsonBody<LeaseRequest>,
) -> ApiResult<Json<EmptyBody>> {
    let lease = lease(id, &request.token)?;
    state.queue.release(&lease).await?;
    Ok(Json(EmptyBody {}))
}
