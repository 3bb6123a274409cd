//! The workers the queue has seen: `GET /v1/workers`, and `POST /v1/workers/{worker}/stop` for a worker that says
//! it stops. Workers are never registered: the queue notes whoever takes
//! jobs or heartbeats, and forgets those silent for its `worker_max_age`.

use axum::Json;
use axum::extract::State;
use cairn_api::{WorkerBody, WorkerListBody};

use crate::error::ApiResult;
use crate::openapi::ReadErrors;
use crate::state::AppState;

/// Every worker the queue remembers, by id: when it was first and last seen (taking jobs or heartbeating), the
/// jobs it holds, and which of those stalled (their lease ran out and the queue has not retried them yet).
#[utoipa::path(get, path = "/v1/workers", tag = "workers",
    responses((status = 200, description = "The workers", body = WorkerListBody), ReadErrors))]
pub async fn list_workers(State(state): State<AppState>) -> ApiResult<Json<WorkerListBody>> {
    let workers = state.queue.workers().await?;
    Ok(Json(WorkerListBody {
        workers: workers.iter().map(WorkerBody::from).collect(),
    }))
}
