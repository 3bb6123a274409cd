//! Taking jobs (`POST /v1/dequeue`, a long poll) and finishing many at once (`POST /v1/finish`), which are not one
//! engine request each. The other calls under a lease (heartbeat, checkpoint, update, finish, retry, fail, release)
//! are declared routes (`cairn-api`'s `leases.rs`).

use axum::Json;
use axum::extract::State;
use cairn::{Continue, Finish, Lease, RunUsage, WorkerId};
use cairn_api::{
    ClaimedJobBody, DequeueBody, DequeueRequest, ErrorBody, FinishManyBody, FinishManyRequest,
    FinishResult,
};

use crate::body::JsonBody;
use crate::error::{ApiError, ApiResult};
use crate::openapi::WriteWithBodyErrors;
use crate::routes::token;
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
        .map(|(id, answer)| FinishResult {
            id,
            error: answer.err().map(|e| ApiError::from(e).body().error.clone()),
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
