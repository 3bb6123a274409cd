//! The engine's options at run time: `/v1/config…`. A value set here is stored in the database and wins over the
//! server's flags, environment and file until it is deleted.

use axum::Json;
use axum::extract::State;
use cairn_api::{ConfigEntryBody, ConfigListBody, ErrorBody};

use crate::error::ApiResult;
use crate::openapi::ReadErrors;
use crate::routes::ConfigKeyPath;
use crate::state::AppState;

/// Every option, with the value in force, the server's default, and when it was set at run time.
#[utoipa::path(get, path = "/v1/config", tag = "config",
    responses((status = 200, description = "The options", body = ConfigListBody), ReadErrors))]
pub async fn list_config(State(state): State<AppState>) -> ApiResult<Json<ConfigListBody>> {
    let entries = state.queue.config().await?;
    Ok(Json(ConfigListBody {
        config: entries.iter().map(ConfigEntryBody::from).collect(),
    }))
}

/// One option.
#[utoipa::path(get, path = "/v1/config/{key}", tag = "config",
    params(("key" = cairn_api::rules::ConfigKeyName, Path, description = "The option, such as `retention.max_age`")),
    responses(
        (status = 200, description = "The option", body = ConfigEntryBody),
        (status = 400, description = "No such option", body = ErrorBody),
        ReadErrors,
    ))]
pub async fn get_config(
    State(state): State<AppState>,
    ConfigKeyPath(key): ConfigKeyPath,
) -> ApiResult<Json<ConfigEntryBody>> {
    let entries = state.queue.config().await?;
    let entry = entries
        .iter()
        .find(|e| e.key == key)
        .expect("config lists every key");
    Ok(Json(ConfigEntryBody::from(entry)))
}
