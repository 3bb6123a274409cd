//! Mounting the routes declared in `cairn-api` ([`Route`], listed by `cairn_api::visit_routes`): one handler serves
//! every one of them (read the path and the body, run the request on the queue, send the answer), and each route's
//! entry in the OpenAPI document is built from its declaration. A route declared there needs nothing here.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::path::ErrorKind;
use axum::extract::rejection::PathRejection;
use axum::extract::{FromRequestParts, Path, State};
use axum::http::request::Parts;
use cairn_api::{ErrorBody, Method, PathParams, Route, RouteVisitor};
use serde::Deserialize;
use utoipa::openapi::path::{
    HttpMethod, OperationBuilder, ParameterBuilder, ParameterIn, PathItem,
};
use utoipa::openapi::request_body::RequestBodyBuilder;
use utoipa::openapi::{ContentBuilder, Paths, Ref, RefOr, Required, ResponseBuilder, Schema};
use utoipa::{IntoResponses, PartialSchema, ToSchema};
use utoipa_axum::router::{OpenApiRouter, UtoipaMethodRouter};

use crate::body::JsonBody;
use crate::error::{ApiError, ApiResult};
use crate::openapi::{WriteErrors, WriteWithBodyErrors};
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
    let method_router = if R::BODY {
        on::<R, _>(
            |State(state): State<AppState>,
             PathOf(path): PathOf,
             JsonBody(body): JsonBody<R::Body>| async move {
                run::<R>(&state, &path, body).await
            },
        )
    } else {
        // A route without a body reads none: an empty request (or anything sent along) is fine.
        on::<R, _>(
            |State(state): State<AppState>, PathOf(path): PathOf| async move {
                let body = R::Body::deserialize(serde_json::json!({}))
                    .map_err(|e| ApiError::invalid("body", e.to_string()))?;
                run::<R>(&state, &path, body).await
            },
        )
    };
    let mut schemas = Vec::new();
    <R::Body as ToSchema>::schemas(&mut schemas);
    <R::Answer as ToSchema>::schemas(&mut schemas);
    schemas.push((
        <R::Body as ToSchema>::name().into_owned(),
        <R::Body as PartialSchema>::schema(),
    ));
    schemas.push((
        <R::Answer as ToSchema>::name().into_owned(),
        <R::Answer as PartialSchema>::schema(),
    ));
    (schemas, paths::<R>(), method_router)
}

/// Runs `R` from its path and body, and answers what it gives.
async fn run<R: Route>(
    state: &AppState,
    path: &PathParams,
    body: R::Body,
) -> ApiResult<Json<R::Answer>> {
    let request = R::from_wire(path, body)?;
    let output = state.queue.run(request).await?;
    Ok(Json(R::answer(output)))
}

/// `handler` mounted for `R`'s method.
fn on<R: Route, T: 'static>(
    handler: impl axum::handler::Handler<T, AppState>,
) -> axum::routing::MethodRouter<AppState> {
    match R::METHOD {
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
    let mut operation = OperationBuilder::new()
        .tag(R::TAG)
        .summary(Some(R::SUMMARY))
        .operation_id(Some(R::OPERATION_ID))
        .request_body(R::BODY.then(|| {
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
    // Every declared route has a path and a body, either of which may be bad; a route that says how in its own
    // words keeps them.
    let bad_input = (
        400,
        "Bad input: a path parameter or the body breaks a rule; `field` names it",
    );
    let own = R::ERRORS.iter().any(|(status, _)| *status == 400);
    for (status, meaning) in (!own).then_some(&bad_input).into_iter().chain(R::ERRORS) {
        operation = operation.response(
            status.to_string(),
            ResponseBuilder::new()
                .description(*meaning)
                .content("application/json", json(&ErrorBody::name()))
                .build(),
        );
    }
    // And what every operation that changes the queue (with a body, or without) may answer.
    let shared = if R::BODY {
        WriteWithBodyErrors::responses()
    } else {
        WriteErrors::responses()
    };
    for (status, response) in shared {
        operation = operation.response(status, response);
    }
    let method = match R::METHOD {
        Method::Post => HttpMethod::Post,
        Method::Put => HttpMethod::Put,
        Method::Delete => HttpMethod::Delete,
    };
    Paths::builder()
        .path(R::PATH, PathItem::new(method, operation))
        .build()
}

/// A declared route's path parameters. A segment that is not valid UTF-8 once decoded is a `path` error in Cairn's
/// error shape rather than axum's plain-text rejection; the route names a bad value's field itself.
struct PathOf(PathParams);

impl<S: Send + Sync> FromRequestParts<S> for PathOf {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Path(params) = Path::<BTreeMap<String, String>>::from_request_parts(parts, state)
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
        Ok(PathOf(PathParams(params)))
    }
}
