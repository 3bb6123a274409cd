//! The `/v1` routes, one file per area: `jobs` (enqueue, read, manage, track), `leases` (dequeue and the calls a
//! worker makes under a lease), `workers` (the workers the queue has seen), `queues` (counts, pause and resume,
//! peek, failure groups and unfail), `recurring` (cron templates), `config` (the engine's options at run time),
//! `health`. Each handler parses its input, builds
//! the engine's operation, and converts the answer; validation is the engine's.

pub mod batches;
pub mod config;
pub mod declared;
pub mod events;
pub mod health;
pub mod jobs;
pub mod leases;
pub mod queues;
pub mod recurring;
pub mod stats;
pub mod workers;

use axum::extract::{FromRequestParts, Path, Query};
use axum::http::request::Parts;
use cairn::{ConfigKey, JobId};

use crate::error::ApiError;

/// The `{id}` of a job's path. Any bad id, even one that is not valid UTF-8 once decoded, is an `id` error in
/// Cairn's error shape rather than axum's plain-text rejection.
pub struct JobPath(pub JobId);

impl<S: Send + Sync> FromRequestParts<S> for JobPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Path(text) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|e| {
                ApiError::invalid(
                    "id",
                    format!("must be a positive integer ({})", e.body_text()),
                )
            })?;
        job_id(&text).map(JobPath)
    }
}

/// The `{queue}` of a queue's path, as sent (the engine checks the name). A segment that is not valid UTF-8 once
/// decoded is a `queue` error in Cairn's error shape.
pub struct QueuePath(pub String);

impl<S: Send + Sync> FromRequestParts<S> for QueuePath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        text_segment(parts, state, "queue").await.map(QueuePath)
    }
}

/// The `{key}` of an option's path (`/v1/config/{key}`), checked against the options there are.
pub struct ConfigKeyPath(pub ConfigKey);

impl<S: Send + Sync> FromRequestParts<S> for ConfigKeyPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let text = text_segment(parts, state, "key").await?;
        Ok(ConfigKeyPath(ConfigKey::parse(&text)?))
    }
}

/// A handler's query parameters. With every parameter read as a string, the only rejection left is an unknown or
/// repeated parameter: a `query` error in Cairn's error shape, rather than axum's plain-text rejection.
pub struct QueryParams<T>(pub T);

impl<T: serde::de::DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for QueryParams<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Query(params) = Query::<T>::from_request_parts(parts, state)
            .await
            .map_err(|e| ApiError::invalid("query", e.body_text()))?;
        Ok(QueryParams(params))
    }
}

/// The one text segment of a path, or an error naming `field`.
async fn text_segment<S: Send + Sync>(
    parts: &mut Parts,
    state: &S,
    field: &'static str,
) -> Result<String, ApiError> {
    let Path(text) = Path::<String>::from_request_parts(parts, state)
        .await
        .map_err(|e| ApiError::invalid(field, format!("must be UTF-8 text ({})", e.body_text())))?;
    Ok(text)
}

/// A job id given as a query parameter.
pub(crate) fn id_param(name: &'static str, text: &str) -> Result<JobId, ApiError> {
    crate::routes::job_id(text).map_err(|_| {
        ApiError::invalid(
            name,
            format!("must be a job id (a positive integer), got {text:?}"),
        )
    })
}

/// A page's `limit` given as a query parameter: an integer (the engine holds it to 1 to `most`).
pub(crate) fn limit_param(text: &str, most: u32) -> Result<u32, ApiError> {
    text.parse().map_err(|_| {
        ApiError::invalid(
            "limit",
            format!("must be an integer between 1 and {most}, got {text:?}"),
        )
    })
}

/// A boolean given as a query parameter: `true` or `false`, nothing else.
pub(crate) fn bool_param(name: &'static str, text: &str) -> Result<bool, ApiError> {
    match text {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(ApiError::invalid(
            name,
            format!("must be true or false, got {text:?}"),
        )),
    }
}

/// A time given as a query parameter: RFC 3339.
pub(crate) fn time_param(name: &'static str, text: &str) -> Result<jiff::Timestamp, ApiError> {
    text.parse().map_err(|_| {
        ApiError::invalid(
            name,
            format!("must be an RFC 3339 time such as 2026-01-31T09:00:00Z, got {text:?}"),
        )
    })
}

/// A job id from the path.
pub(crate) fn job_id(text: &str) -> Result<JobId, ApiError> {
    text.parse::<i64>()
        .ok()
        .filter(|id| *id > 0)
        .map(JobId)
        .ok_or_else(|| ApiError::invalid("id", format!("must be a positive integer, got {text:?}")))
}

/// A lease token from a request body.
fn token(text: &str) -> Result<i64, ApiError> {
    cairn_api::parse_token("token", text).map_err(ApiError::from)
}
