//! Mounting the routes declared in `cairn-api` ([`Route`], listed by `cairn_api::visit_routes`): one handler serves
//! every one of them (read the path, the query or the body, hold the request to the server's limits, run it on the
//! queue, send the answer), and each route's entry in the OpenAPI document is built from its declaration. A route
//! declared there needs nothing here.

use std::collections::BTreeMap;
use std::marker::PhantomData;

use axum::Json;
use axum::extract::path::ErrorKind;
use axum::extract::rejection::PathRejection;
use axum::extract::{FromRequestParts, Path, State};
use axum::http::StatusCode;
use axum::http::request::Parts;
use cairn_api::{ErrorBody, Method, Received, Route, RouteVisitor, ServerLimits, WhenStopping};
use serde::Deserialize;
use utoipa::openapi::path::{
    HttpMethod, OperationBuilder, Parameter, ParameterBuilder, ParameterIn, PathItem,
};
use utoipa::openapi::request_body::RequestBodyBuilder;
use utoipa::openapi::schema::{SchemaType, Type};
use utoipa::openapi::{ContentBuilder, Paths, Ref, RefOr, Required, ResponseBuilder, Schema};
use utoipa::{IntoResponses, PartialSchema, ToSchema};
use utoipa_axum::router::{OpenApiRouter, UtoipaMethodRouter};

use crate::auth::Caller;
use crate::body::JsonBody;
use crate::error::{ApiError, ApiResult};
use crate::openapi::{ReadErrors, ReadWithBodyErrors, WriteErrors, WriteWithBodyErrors};
use crate::routes::QueryParams;
use crate::state::AppState;

/// Every route declared in `cairn-api`, mounted.
pub fn routes() -> OpenApiRouter<AppState> {
    struct Mount(OpenApiRouter<AppState>);
    impl RouteVisitor for Mount {
        fn visit<R: Route>(&mut self) {
            let router = std::mem::take(&mut self.0);
            self.0 = router.routes(mount::<R>());
        }
    }
    let mut mounted = Mount(OpenApiRouter::new());
    cairn_api::visit_routes(&mut mounted);
    mounted.0
}

/// `R`'s handler and its OpenAPI entry, for `OpenApiRouter::routes`.
fn mount<R: Route>() -> UtoipaMethodRouter<AppState> {
    let method_router = match (R::BODY, R::METHOD) {
        // A route without a body reads none: an empty request (or anything sent along, a query too) is fine.
        (false, _) => on::<R, _>(
            |State(state): State<AppState>, Arrived(caller, received, _): Arrived<R>| async move {
                let body = R::Body::deserialize(serde_json::json!({}))
                    .map_err(|e| ApiError::invalid("body", e.to_string()))?;
                run::<R>(&state, caller, &received, body).await
            },
        ),
        // A read's body is its query string.
        (true, Method::Get) => on::<R, _>(
            |State(state): State<AppState>,
             Arrived(caller, received, _): Arrived<R>,
             QueryParams(body): QueryParams<R::Body>| async move {
                run::<R>(&state, caller, &received, body).await
            },
        ),
        (true, _) => on::<R, _>(
            |State(state): State<AppState>,
             Arrived(caller, received, _): Arrived<R>,
             JsonBody(body): JsonBody<R::Body>| async move {
                run::<R>(&state, caller, &received, body).await
            },
        ),
    };
    let mut schemas = Vec::new();
    <R::Body as ToSchema>::schemas(&mut schemas);
    <R::Answer as ToSchema>::schemas(&mut schemas);
    // A query's parameters are described one by one, not as a body.
    if R::METHOD != Method::Get {
        schemas.push((
            <R::Body as ToSchema>::name().into_owned(),
            <R::Body as PartialSchema>::schema(),
        ));
    }
    schemas.push((
        <R::Answer as ToSchema>::name().into_owned(),
        <R::Answer as PartialSchema>::schema(),
    ));
    (schemas, paths::<R>(), method_router)
}

/// Runs `R` from what arrived, within the server's limits, and answers what it gives. A request that waits is
/// answered at once when the server stops, as its route says.
async fn run<R: Route>(
    state: &AppState,
    caller: Option<Caller>,
    received: &Received,
    body: R::Body,
) -> ApiResult<(StatusCode, Json<R::Answer>)> {
    let mut request = R::from_wire(received, body)?;
    // Only a limited token's request is looked at: every push and dequeue passes here.
    if R::NAMES_IN_BODY && caller.as_ref().is_some_and(|c| c.queues.is_some()) {
        let method = http_method(R::METHOD);
        crate::reach::hold(state, caller.as_ref(), request.names(), &method, R::PATH).await?;
    }
    request.limit(&ServerLimits {
        max_wait: state.config.max_wait,
        max_batch_jobs: state.config.max_batch_jobs,
    })?;
    let audit = caller
        .filter(|_| R::ACCESS == cairn_api::ADMIN)
        .map(|caller| audit_of(&request, &caller, received));
    // If the client goes away, this future is dropped; the engine then gives back any job it claimed for it.
    let output = match request.when_stopping() {
        WhenStopping::Finish => state.queue.run(request).await?,
        WhenStopping::Answer(output) => tokio::select! {
            answer = state.queue.run(request) => answer?,
            () = state.shutdown.cancelled() => output,
        },
        WhenStopping::RunInstead(instead) => tokio::select! {
            answer = state.queue.run(request) => answer?,
            () = state.shutdown.cancelled() => state.queue.run(instead).await?,
        },
    };
    if let Some(audit) = audit {
        // The change is made: an audit record that cannot be written is logged, not answered as a failure of it.
        if let Err(e) = state.queue.run(audit).await {
            tracing::warn!(error = %e, "could not record an audit event for a change made with a token");
        }
    }
    let status = StatusCode::from_u16(R::status(&output)).unwrap_or(StatusCode::OK);
    Ok((status, Json(R::answer(output))))
}

/// The audit trail's record of `request`, an admin's (what only `admin` may do changes what others made, or how
/// the queue runs): the token, the method and path with the body, and the job or queue the path names.
fn audit_of<R: Route>(request: &R, caller: &Caller, received: &Received) -> cairn::RecordAudit {
    let method = http_method(R::METHOD);
    let path = request.path().unwrap_or_else(|_| R::PATH.to_owned());
    let body = serde_json::to_string(&request.body()).unwrap_or_default();
    let mut said = format!("{method} {path}");
    if R::BODY && body != "{}" {
        said.push(' ');
        said.push_str(&body);
    }
    let job = R::PARAMS
        .contains(&cairn_api::JOB_ID)
        .then(|| received.job().ok())
        .flatten();
    let queue = R::PARAMS
        .contains(&cairn_api::QUEUE_NAME)
        .then(|| received.text("queue").ok().map(str::to_owned))
        .flatten();
    cairn::RecordAudit {
        token: caller.name.clone(),
        request: said,
        job,
        queue,
    }
}

/// A declared method as HTTP names it.
fn http_method(method: Method) -> axum::http::Method {
    match method {
        Method::Get => axum::http::Method::GET,
        Method::Post => axum::http::Method::POST,
        Method::Put => axum::http::Method::PUT,
        Method::Delete => axum::http::Method::DELETE,
    }
}

/// `handler` mounted for `R`'s method.
fn on<R: Route, T: 'static>(
    handler: impl axum::handler::Handler<T, AppState>,
) -> axum::routing::MethodRouter<AppState> {
    match R::METHOD {
        Method::Get => axum::routing::get(handler),
        Method::Post => axum::routing::post(handler),
        Method::Put => axum::routing::put(handler),
        Method::Delete => axum::routing::delete(handler),
    }
}

/// `R`'s entry in the OpenAPI document: as `#[utoipa::path]` writes one.
fn paths<R: Route>() -> Paths {
    let json = |name: &str| {
        ContentBuilder::new()
            .schema(Some(RefOr::<Schema>::Ref(Ref::from_schema_name(name))))
            .build()
    };
    let reads = R::METHOD == Method::Get;
    let with_body = R::BODY && !reads;
    let mut operation = OperationBuilder::new()
        .tag(R::TAG)
        .summary(Some(R::SUMMARY))
        .description(Some(format!(
            "Who may call it, on a server with tokens: {}{}.",
            R::ACCESS.describe(),
            match R::REACH {
                _ if R::ACCESS.public => "",
                cairn_api::Reach::Server => "; not a token limited to some queues",
                cairn_api::Reach::Queues => "; a token limited to some queues, for what is in them",
            }
        )))
        .operation_id(Some(R::OPERATION_ID))
        .request_body(with_body.then(|| {
            RequestBodyBuilder::new()
                .content("application/json", json(&<R::Body as ToSchema>::name()))
                .required(Some(Required::True))
                .build()
        }))
        .response(
            "200",
            ResponseBuilder::new()
                .description(R::DONE)
                .content("application/json", json(&<R::Answer as ToSchema>::name()))
                .build(),
        );
    for (status, meaning) in R::SUCCESSES {
        operation = operation.response(
            status.to_string(),
            ResponseBuilder::new()
                .description(*meaning)
                .content("application/json", json(&<R::Answer as ToSchema>::name()))
                .build(),
        );
    }
    for param in R::PARAMS {
        operation = operation.parameter(
            ParameterBuilder::new()
                .name(param.name)
                .parameter_in(ParameterIn::Path)
                .description(Some(param.description))
                .required(Required::True)
                .schema(Some(RefOr::<Schema>::Ref(Ref::from_schema_name(
                    param.rule,
                )))),
        );
    }
    if reads && R::BODY {
        for parameter in query_parameters::<R::Body>() {
            operation = operation.parameter(parameter);
        }
    }
    // A route with a path parameter, a query or a body may be given a bad one; a route that says how in its own
    // words keeps them.
    let bad_input = if reads {
        (
            400,
            "Bad input: a path or query parameter breaks a rule; `field` names it",
        )
    } else {
        (
            400,
            "Bad input: a path parameter or the body breaks a rule; `field` names it",
        )
    };
    let may_be_bad = R::BODY || !R::PARAMS.is_empty();
    let own = R::ERRORS.iter().any(|(status, _)| *status == 400);
    for (status, meaning) in (may_be_bad && !own)
        .then_some(&bad_input)
        .into_iter()
        .chain(R::ERRORS)
    {
        operation = operation.response(
            status.to_string(),
            ResponseBuilder::new()
                .description(*meaning)
                .content("application/json", json(&ErrorBody::name()))
                .build(),
        );
    }
    // And what every operation of its kind may answer: a write may find the disk full, a body may be too large or
    // too slow to arrive.
    let shared = match (R::WRITES, with_body) {
        (true, true) => WriteWithBodyErrors::responses(),
        (true, false) => WriteErrors::responses(),
        (false, true) => ReadWithBodyErrors::responses(),
        (false, false) => ReadErrors::responses(),
    };
    for (status, response) in shared {
        operation = operation.response(status, response);
    }
    let method = match R::METHOD {
        Method::Get => HttpMethod::Get,
        Method::Post => HttpMethod::Post,
        Method::Put => HttpMethod::Put,
        Method::Delete => HttpMethod::Delete,
    };
    Paths::builder()
        .path(R::PATH, PathItem::new(method, operation))
        .build()
}

/// A query's parameters, from the fields of the body it stands for: each optional unless the body requires it,
/// described as the field is. The fields are text on the wire (read with errors that name them), typed in the
/// document by what they hold, and never null.
fn query_parameters<B: PartialSchema>() -> Vec<Parameter> {
    let RefOr::T(Schema::Object(object)) = B::schema() else {
        return Vec::new();
    };
    object
        .properties
        .into_iter()
        .map(|(name, schema)| {
            let required = object.required.contains(&name);
            let (description, schema) = described(schema);
            ParameterBuilder::new()
                .name(name)
                .parameter_in(ParameterIn::Query)
                .description(description)
                .required(if required {
                    Required::True
                } else {
                    Required::False
                })
                .schema(Some(schema))
                .build()
        })
        .collect()
}

/// A query field's schema without the description it carries (which its parameter carries instead), and
/// without the null an optional field may be: a parameter that means nothing is left out, never null.
fn described(schema: RefOr<Schema>) -> (Option<String>, RefOr<Schema>) {
    match schema {
        RefOr::Ref(mut reference) => {
            let description = std::mem::take(&mut reference.description);
            (
                (!description.is_empty()).then_some(description),
                RefOr::Ref(reference),
            )
        }
        RefOr::T(Schema::Object(mut field)) => {
            if let SchemaType::Array(types) = &field.schema_type {
                let kinds: Vec<Type> = types
                    .iter()
                    .filter(|t| **t != Type::Null)
                    .cloned()
                    .collect();
                if let [only] = kinds.as_slice() {
                    field.schema_type = SchemaType::Type(only.clone());
                }
            }
            (field.description.take(), RefOr::T(Schema::Object(field)))
        }
        // An optional reference: one of null and it.
        RefOr::T(Schema::OneOf(one_of)) => {
            let outer = one_of.description.clone();
            let is_null = |item: &RefOr<Schema>| matches!(item, RefOr::T(Schema::Object(o)) if o.schema_type == SchemaType::Type(Type::Null));
            let mut items: Vec<_> = one_of
                .items
                .iter()
                .filter(|item| !is_null(item))
                .cloned()
                .collect();
            match (items.len(), items.pop()) {
                (1, Some(only)) => {
                    let (inner, schema) = described(only);
                    (inner.or(outer), schema)
                }
                _ => (outer, RefOr::T(Schema::OneOf(one_of))),
            }
        }
        other => (None, other),
    }
}

/// What a request to `R` arrived with, besides its body, once `R`'s rule is held to its caller (see `auth.rs` and
/// `reach.rs`): the caller, where a change is audited or a token limited to some queues must be held to what the
/// body names; and the path's parameters and trace context. The rule is held before anything is read but the path:
/// a token that may not call the route learns nothing of what its request would have met.
///
/// A path segment that is not valid UTF-8 once decoded is a `path` error in Cairn's error shape rather than axum's
/// plain-text rejection; the route names a bad value's field itself.
struct Arrived<R>(Option<Caller>, Received, PhantomData<R>);

impl<R: Route> FromRequestParts<AppState> for Arrived<R> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let caller = parts.extensions.get::<Caller>();
        crate::auth::allow(
            state.config.has_tokens(),
            caller,
            R::ACCESS,
            R::REACH,
            &parts.method,
            R::PATH,
        )?;
        // Kept only where it is needed again: an admin's change is audited, a limited token's body is held.
        let caller = caller
            .filter(|c| R::ACCESS == cairn_api::ADMIN || c.queues.is_some())
            .cloned();
        // axum refuses to read the parameters of a path that has none.
        let path = if R::PARAMS.is_empty() {
            BTreeMap::new()
        } else {
            path_params(parts, state).await?
        };
        // A `traceparent` that is not a valid one is ignored, as W3C Trace Context asks.
        let trace_parent = parts
            .headers
            .get("traceparent")
            .and_then(|value| value.to_str().ok())
            .filter(|value| cairn::TraceParent::parse(*value).is_ok())
            .map(str::to_owned);
        let received = Received { path, trace_parent };
        if caller.as_ref().is_some_and(|c| c.queues.is_some()) {
            let named = received.named::<R>();
            crate::reach::hold(state, caller.as_ref(), named, &parts.method, R::PATH).await?;
        }
        Ok(Arrived(caller, received, PhantomData))
    }
}

/// The path's parameters, by name.
async fn path_params<S: Send + Sync>(
    parts: &mut Parts,
    state: &S,
) -> Result<BTreeMap<String, String>, ApiError> {
    let Path(path) = Path::<BTreeMap<String, String>>::from_request_parts(parts, state)
        .await
        .map_err(|rejection| {
            // Name the parameter, as the engine names a bad field, when axum says which one it is.
            let field = match &rejection {
                PathRejection::FailedToDeserializePathParams(e) => match e.kind() {
                    ErrorKind::InvalidUtf8InPathParam { key } => key.clone(),
                    _ => "path".to_owned(),
                },
                _ => "path".to_owned(),
            };
            ApiError::invalid(field, "must be UTF-8 text once percent-decoded")
        })?;
    Ok(path)
}
