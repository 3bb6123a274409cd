//! The OpenAPI document, generated from the handlers' annotations and the wire types: the routes and their
//! documentation come from the same `routes!` lists in [`crate::router`], so neither can drift from the other.
//! Here are its fixed parts, and the statuses that operations share (the answers of `error.rs` that do not depend
//! on the operation), for the handlers' annotations and the declared routes to list.

use std::collections::BTreeMap;

use cairn_api::{ErrorBody, rules};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{ContentBuilder, Ref, RefOr, Response, ResponseBuilder, Schema};
use utoipa::{IntoResponses, OpenApi, ToSchema};

/// The document's fixed parts; the paths are added as the router is built.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "Cairn",
        description = "A durable job queue. Errors are always `{\"error\": {\"kind\", \"field\", \"message\"}}`; \
                       times are RFC 3339 in UTC; durations are milliseconds in fields ending in `_ms`. \
                       A server started with `--token` needs `Authorization: Bearer <token>` on every request; \
                       one without a token needs none.",
        license(name = "MIT OR Apache-2.0"),
    ),
    modifiers(&BearerAuth, &SharedResponses),
    // The rules that path and query parameters name; the bodies' fields bring theirs with them.
    components(schemas(
        rules::JobId,
        rules::BatchId,
        rules::QueueName,
        rules::WorkerId,
        rules::ConfigKeyName,
        rules::RecurringKey,
        rules::GroupToUnfail,
        rules::JobStateName,
        rules::NamePattern,
        rules::Tag,
        rules::StatsPeriodName,
    )),
    // No security, or the bearer token: which one is the server's choice (`--token`), so the document allows both.
    security((), ("bearer" = [])),
    tags(
        (name = "jobs", description = "Enqueue, read and manage jobs"),
        (name = "workers", description = "Take jobs and report on them under a lease; the workers the queue has seen"),
        (name = "queues", description = "Operate queues: counts by state, pause and resume, peek; failure groups and unfail"),
        (name = "batches", description = "Groups of jobs with callbacks when every job has ended or completed"),
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
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "The server's `--token`, needed on every request when it runs with one",
                    ))
                    .build(),
            ),
        );
    }
}

/// A status that many operations answer alike: its code, its name in `components.responses`, and what it means.
struct Shared {
    status: &'static str,
    name: &'static str,
    description: &'static str,
}

const UNAUTHORIZED: Shared = Shared {
    status: "401",
    name: "Unauthorized",
    description: "The server runs with a token, and the request has no `Authorization: Bearer <token>` with it",
};
const FORBIDDEN: Shared = Shared {
    status: "403",
    name: "Forbidden",
    description: "Refused for where it came from: another site's page in a browser, or (on a server without a \
                  token) a host name other than `localhost` or an IP address",
};
const REQUEST_TIMEOUT: Shared = Shared {
    status: "408",
    name: "RequestTimeout",
    description: "The body did not arrive whole within the server's request timeout; it may be sent again",
};
const PAYLOAD_TOO_LARGE: Shared = Shared {
    status: "413",
    name: "PayloadTooLarge",
    description: "The body is larger than the server's `max_body`",
};
const STORAGE: Shared = Shared {
    status: "500",
    name: "StorageError",
    description: "The database failed in a way that does not pass with time",
};
const UNAVAILABLE: Shared = Shared {
    status: "503",
    name: "Unavailable",
    description: "The server is shutting down, cannot reach its database in time, or has no room for another \
                  connection; try again after `Retry-After` seconds",
};
const STORAGE_FULL: Shared = Shared {
    status: "507",
    name: "StorageFull",
    description: "The database's disk is full; try again after `Retry-After` seconds",
};

/// Every shared status, for `components.responses`.
const SHARED: [Shared; 7] = [
    UNAUTHORIZED,
    FORBIDDEN,
    REQUEST_TIMEOUT,
    PAYLOAD_TOO_LARGE,
    STORAGE,
    UNAVAILABLE,
    STORAGE_FULL,
];

/// Defines the shared statuses once, in `components.responses`, for operations to refer to.
struct SharedResponses;

impl utoipa::Modify for SharedResponses {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        for shared in SHARED {
            let content = ContentBuilder::new()
                .schema(Some(RefOr::<Schema>::Ref(Ref::from_schema_name(
                    ErrorBody::name(),
                ))))
                .build();
            components.responses.insert(
                shared.name.to_owned(),
                RefOr::T(
                    ResponseBuilder::new()
                        .description(shared.description)
                        .content("application/json", content)
                        .build(),
                ),
            );
        }
    }
}

/// `statuses` as an operation's responses: references to `components.responses`.
fn refer(statuses: &[Shared]) -> BTreeMap<String, RefOr<Response>> {
    statuses
        .iter()
        .map(|s| {
            (
                s.status.to_owned(),
                RefOr::Ref(Ref::from_response_name(s.name)),
            )
        })
        .collect()
}

/// What an operation that reads the queue, without a body, may answer besides its own: `401`, `403`, `500`, `503`.
pub struct ReadErrors;

impl IntoResponses for ReadErrors {
    fn responses() -> BTreeMap<String, RefOr<Response>> {
        refer(&[UNAUTHORIZED, FORBIDDEN, STORAGE, UNAVAILABLE])
    }
}

/// What an operation that reads the queue with a body may answer besides its own: [`ReadErrors`], `408` and `413`.
pub struct ReadWithBodyErrors;

impl IntoResponses for ReadWithBodyErrors {
    fn responses() -> BTreeMap<String, RefOr<Response>> {
        refer(&[
            UNAUTHORIZED,
            FORBIDDEN,
            REQUEST_TIMEOUT,
            PAYLOAD_TOO_LARGE,
            STORAGE,
            UNAVAILABLE,
        ])
    }
}

/// What an operation that changes the queue, without a body, may answer besides its own: [`ReadErrors`] and `507`.
pub struct WriteErrors;

impl IntoResponses for WriteErrors {
    fn responses() -> BTreeMap<String, RefOr<Response>> {
        refer(&[UNAUTHORIZED, FORBIDDEN, STORAGE, UNAVAILABLE, STORAGE_FULL])
    }
}

/// What an operation that changes the queue with a body may answer besides its own: [`WriteErrors`], `408` and
/// `413`.
pub struct WriteWithBodyErrors;

impl IntoResponses for WriteWithBodyErrors {
    fn responses() -> BTreeMap<String, RefOr<Response>> {
        refer(&SHARED)
    }
}
