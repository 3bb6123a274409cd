//! The server's health (`GET /v1/health`).

use serde::{Deserialize, Serialize};

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

/// The server's health.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct HealthBody {
    /// `ok`.
    pub status: String,
    /// The server's version.
    pub version: String,
}
