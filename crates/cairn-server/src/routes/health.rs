//! `GET /v1/health`: whether the server is up.

use axum::Json;
use cairn_api::HealthBody;

use crate::openapi::ServerErrors;

/// The server is up and serving.
#[utoipa::path(get, path = "/v1/health", tag = "server",
    responses((status = 200, description = "The server is up", body = HealthBody), ServerErrors))]
pub async fn health() -> Json<HealthBody> {
    Json(HealthBody {
        status: "ok".to_owned(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
    })
}
