//! Recurring templates: `/v1/recurring…`. At every slot of a template's cron schedule the engine creates its job,
//! once per slot, even across restarts.

use axum::Json;
use axum::extract::State;
use cairn_api::{RecurringBody, RecurringListBody};

use crate::error::ApiResult;
use crate::openapi::ReadErrors;
use crate::state::AppState;

/// Every template, by key, with its next and last runs.
#[utoipa::path(get, path = "/v1/recurring", tag = "recurring",
    responses((status = 200, description = "The templates", body = RecurringListBody), ReadErrors))]
pub async fn list_recurring(State(state): State<AppState>) -> ApiResult<Json<RecurringListBody>> {
    let templates = state.queue.recurring().await?;
    Ok(Json(RecurringListBody {
        recurring: templates.iter().map(RecurringBody::from).collect(),
    }))
}
