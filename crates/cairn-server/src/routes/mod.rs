//! The `/v1` routes: every operation and read is declared in `cairn-api` and mounted by `declared` through one
//! handler; the rest cannot be a request to the queue with one JSON answer: `events` (a stream of Server-Sent
//! Events), `metrics` (Prometheus's text format) and `token` (the caller's own token, which the queue knows nothing
//! of).

pub mod declared;
pub mod events;
pub mod metrics;
pub mod token;

use axum::extract::{FromRequestParts, Query};
use axum::http::request::Parts;

use crate::error::ApiError;

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

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use cairn_api::{Method, Route, RouteVisitor};

    /// What the API mounts, as the OpenAPI document lists it: the document and the router are built from the same
    /// list (`api()`), so a route mounted by hand would show here.
    fn mounted() -> BTreeSet<(&'static str, String)> {
        let doc = crate::openapi_document();
        let mut mounted = BTreeSet::new();
        for (path, item) in doc.paths.paths {
            for (method, operation) in [
                ("GET", &item.get),
                ("POST", &item.post),
                ("PUT", &item.put),
                ("DELETE", &item.delete),
                ("PATCH", &item.patch),
                ("HEAD", &item.head),
                ("OPTIONS", &item.options),
                ("TRACE", &item.trace),
            ] {
                if operation.is_some() {
                    mounted.insert((method, path.clone()));
                }
            }
        }
        mounted
    }

    #[test]
    fn the_api_mounts_the_declared_routes_and_only_the_event_stream_metrics_and_token_besides() {
        struct Declared(BTreeSet<(&'static str, String)>);
        impl RouteVisitor for Declared {
            fn visit<R: Route>(&mut self) {
                let method = match R::METHOD {
                    Method::Get => "GET",
                    Method::Post => "POST",
                    Method::Put => "PUT",
                    Method::Delete => "DELETE",
                };
                let fresh = self.0.insert((method, R::PATH.to_owned()));
                assert!(fresh, "{method} {} is declared twice", R::PATH);
            }
        }
        let mut declared = Declared(BTreeSet::new());
        cairn_api::visit_routes(&mut declared);
        let mounted = mounted();
        let missing: Vec<_> = declared.0.difference(&mounted).collect();
        assert!(missing.is_empty(), "declared but not mounted: {missing:?}");
        let others: BTreeSet<_> = mounted.difference(&declared.0).cloned().collect();
        assert_eq!(
            others,
            BTreeSet::from([
                ("GET", "/metrics".to_owned()),
                ("GET", "/v1/events".to_owned()),
                ("GET", "/v1/token".to_owned())
            ]),
            "only what cannot be a request to the queue with one JSON answer is mounted by hand"
        );
    }
}
