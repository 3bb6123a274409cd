//! The OpenAPI document, generated from the handlers' annotations and the wire types: the routes and their
//! documentation come from the same `routes!` lists in [`crate::router`], so neither can drift from the other.

use utoipa::OpenApi;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};

/// The document's fixed parts; the paths are added as the router is built.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "Cairn",
        description = "A durable job queue. Errors are always `{\"error\": {\"kind\", \"field\", \"message\"}}`; \
                       times are RFC 3339 in UTC; durations are milliseconds in fields ending in `_ms`.",
        license(name = "MIT OR Apache-2.0"),
    ),
    modifiers(&BearerAuth),
    security(("bearer" = [])),
    tags(
        (name = "jobs", description = "Enqueue, read and manage jobs"),
        (name = "workers", description = "Take jobs and report on them under a lease; the workers the queue has seen"),
        (name = "queues", description = "Operate queues: counts by state, pause and resume, peek; failure groups and unfail"),
        (name = "recurring", description = "Cron templates that create a job at every slot"),
        (name = "config", description = "The engine's options, read and changed at run time"),
        (name = "stats", description = "Statistics, worker utilization, the activity log, Prometheus metrics"),
        (name = "server", description = "The server itself"),
    )
)]
pub struct ApiDoc;

/// Declares the bearer token (needed when the server runs with `--token`).
struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}
