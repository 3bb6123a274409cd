//! The server's health (`GET /v1/health`).

use cairn::Health;
use serde::{Deserialize, Serialize};

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

use crate::route::{Answer, RouteVisitor, route};

/// The server's health.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct HealthBody {
    /// `ok`.
    pub status: String,
    /// The server's version.
    pub version: String,
}

impl Answer<String> for HealthBody {
    fn from_output(version: String) -> Self {
        HealthBody {
            status: "ok".to_owned(),
            version,
        }
    }

    fn into_output(self) -> cairn::Result<String> {
        Ok(self.version)
    }
}

pub(crate) fn visit_health_routes(visitor: &mut impl RouteVisitor) {
    visitor.visit::<Health>();
}

route! {
    Health: Get "/v1/health", params [], tag "server", id "health",
    summary "The server is up and its queue open.",
    done "The server is up and serving",
    errors [],
    path |_r| [],
    no body,
    answer HealthBody,
    from |_received| Ok(Health),
}
