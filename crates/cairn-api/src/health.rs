//! The server's health (`GET /v1/health`).

use cairn::Health;
use serde::{Deserialize, Serialize};

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

use crate::PUBLIC;
use crate::route::{Answer, RouteVisitor, route};

/// The server's health.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct HealthBody {
    /// `ok`.
    pub status: String,
    /// The server's version; absent from an answer to a caller without the token of a server that has one (a
    /// liveness probe learns that the server is up, and nothing else).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

impl Answer<String> for HealthBody {
    fn from_output(version: String) -> Self {
        HealthBody {
            status: "ok".to_owned(),
            version: Some(version),
        }
    }

    fn into_output(self) -> cairn::Result<String> {
        Ok(self.version.unwrap_or_default())
    }
}

pub(crate) fn visit_health_routes(visitor: &mut impl RouteVisitor) {
    visitor.visit::<Health>();
}

route! {
    Health: Get "/v1/health", params [], tag "server", id "health", access PUBLIC, reach Server,
    summary "The server is up and its queue open. Answered without the token too, then without the version: a \
        liveness probe needs no secret.",
    done "The server is up and serving",
    errors [],
    path |_r| [],
    no body,
    answer HealthBody,
    from |_received| Ok(Health),
}
