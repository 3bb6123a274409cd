//! Recurring templates: `/v1/recurring…`. At every slot of a template's cron schedule the engine creates its job,
//! once per slot, even across restarts.

use axum::Json;
use axum::extract::State;
use cairn_api::{EmptyBody, ErrorBody, RecurringBody, RecurringListBody, RecurringRequest};

use crate::body::JsonBody;
use crate::error::ApiResult;
use crate::openapi::{ReadErrors, WriteErrors, WriteWithBodyErrors};
use crate::routes::KeyPath;
use crate::state::AppState;

/// Creates or replaces the template `key`; its next slot counts from now.
#[utoipa::path(put, path = "/v1/recurring/{key}", tag = "recurring", request_body = RecurringRequest,
    params(("key" = cairn_api::rules::RecurringKey, Path, description = "The template's key")),
    responses(
        (status = 200, description = "The template, with its next run", body = RecurringBody),
        (status = 400, description = "Bad input, naming the field", body = ErrorBody),
        WriteWithBodyErrors,
    ))]
pub async fn set_recurring(
    State(state): State<AppState>,
    KeyPath(key): KeyPath,
    JsonBody(request): JsonBody<RecurringRequest>,
) -> ApiResult<Json<RecurringBody>> {
    let info = state
        .queue
        .set_recurring(request.into_recurring(key)?)
        .await?;
    Ok(Json(RecurringBody::from(&info)))
}

/// Removes the template `key`; the jobs it already created stay.
#[utoipa::path(delete, path = "/v1/recurring/{key}", tag = "recurring",
    params(("key" = cairn_api::rules::RecurringKey, Path, description = "The template's key")),
    responses(
        (status = 200, description = "Removed", body = EmptyBody),
        (status = 400, description = "A key that is not UTF-8 text", body = ErrorBody),
        (status = 404, description = "No such template", body = ErrorBody),
        WriteErrors,
    ))]
pub async fn remove_recurring(
    State(state): State<AppState>,
    KeyPath(key): KeyPath,
) -> ApiResult<Json<EmptyBody>> {
    state.queue.remove_recurring(&key).await?;
    Ok(Json(EmptyBody {}))
}

/// Every template, by key, with its next and last runs.
#[utoipa::path(get, path = "/v1/recurring", tag = "recurring",
    responses((status = 200, description = "The templates", body = RecurringListBody), ReadErrors))]
pub async fn list_recurring(State(state): State<AppState>) -> ApiResult<Json<RecurringListBody>> {
    let templates = state.queue.recurring().await?;
    Ok(Json(RecurringListBody {
        recurring: templates.iter().map(RecurringBody::from).collect(),
    }))
}
