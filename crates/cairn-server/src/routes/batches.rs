//! Batches: `GET /v1/batches` and `GET /v1/batches/{id}`. Creating, adding to and closing a batch are declared
//! routes (`cairn_api::batches`); a batch's jobs are listed by `GET /v1/jobs?batch=`.

use axum::Json;
use axum::extract::State;
use cairn::{BatchFilter, BatchId, BatchState};
use cairn_api::{BatchBody, BatchListBody, ErrorBody};
use serde::Deserialize;
use utoipa::IntoParams;

use crate::error::{ApiError, ApiResult};
use crate::openapi::ReadErrors;
use crate::routes::{JobPath, QueryParams, limit_param};
use crate::state::AppState;

/// A batch and its progress.
#[utoipa::path(get, path = "/v1/batches/{id}", tag = "batches",
    params(("id" = cairn_api::rules::BatchId, Path, description = "The batch's id")),
    responses(
        (status = 200, description = "The batch: its state, counts and callbacks", body = BatchBody),
        (status = 404, description = "No such batch", body = ErrorBody),
        (status = 400, description = "A bad id (not a positive integer)", body = ErrorBody),
        ReadErrors,
    ))]
pub async fn get_batch(
    State(state): State<AppState>,
    JobPath(id): JobPath,
) -> ApiResult<Json<BatchBody>> {
    let batch = state.queue.batch(BatchId(id.0)).await?;
    Ok(Json(BatchBody::from(&batch)))
}

/// Filters for listing batches.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct BatchListParams {
    /// Only batches in this state: `open`, `running` or `completed`.
    #[param(value_type = String, required = false, pattern = "^(open|running|completed)$")]
    state: Option<String>,
    /// Only batches older than this id (the `next` of the previous page).
    #[param(value_type = cairn_api::rules::BatchId, required = false)]
    before: Option<String>,
    /// The most batches on the page (default 100, at most 1000).
    #[param(value_type = u32, required = false, minimum = 1, maximum = 1000)]
    limit: Option<String>,
}

/// A page of batches, newest first.
#[utoipa::path(get, path = "/v1/batches", tag = "batches", params(BatchListParams),
    responses(
        (status = 200, description = "A page of batches", body = BatchListBody),
        (status = 400, description = "Bad filter", body = ErrorBody),
        ReadErrors,
    ))]
pub async fn list_batches(
    State(state): State<AppState>,
    QueryParams(params): QueryParams<BatchListParams>,
) -> ApiResult<Json<BatchListBody>> {
    let mut filter = BatchFilter::default();
    if let Some(text) = params.state {
        filter.state = Some(BatchState::parse(&text)?);
    }
    if let Some(text) = params.before {
        let id = text
            .parse::<i64>()
            .ok()
            .filter(|id| *id > 0)
            .ok_or_else(|| {
                ApiError::invalid(
                    "before",
                    format!("must be a batch id (a positive integer), got {text:?}"),
                )
            })?;
        filter.before = Some(BatchId(id));
    }
    if let Some(text) = params.limit {
        filter.limit = limit_param(&text, cairn::MAX_PAGE)?;
    }
    let limit = filter.limit as usize;
    let batches = state.queue.batches(filter).await?;
    let next = (batches.len() == limit)
        .then(|| batches.last().map(|b| b.id.0))
        .flatten();
    Ok(Json(BatchListBody {
        batches: batches.iter().map(BatchBody::from).collect(),
        next,
    }))
}
