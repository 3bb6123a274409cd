//! [`ApiError`]: every error the API returns, converted to `{"error": {"kind", "field", "message"}}` in one place,
//! with one status code per kind.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use cairn_api::{ErrorBody, ErrorDetail};

/// An error on its way to the client.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    body: ErrorBody,
}

impl ApiError {
    fn new(status: StatusCode, kind: &str, field: Option<String>, message: String) -> Self {
        ApiError {
            status,
            body: ErrorBody {
                error: ErrorDetail {
                    kind: kind.to_owned(),
                    field,
                    message,
                },
            },
        }
    }

    /// Bad input in `field`.
    pub fn invalid(field: impl Into<String>, rule: impl std::fmt::Display) -> Self {
        let field = field.into();
        let message = format!("{field}: {rule}");
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_input",
            Some(field),
            message,
        )
    }

    /// A request body over the server's limit.
    pub fn too_large(limit: usize) -> Self {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            Some("body".to_owned()),
            format!("body: must be at most {limit} bytes (the server's max_body)"),
        )
    }

    /// A request whose body did not arrive whole within the server's request timeout: `408`, which a client may
    /// send again.
    pub fn request_timeout(message: impl std::fmt::Display) -> Self {
        ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            "request_timeout",
            None,
            message.to_string(),
        )
    }

    /// A connection there is no room for: every connection the server may hold has a request under way.
    pub fn no_room() -> Self {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            None,
            "the server has no room for another connection: every connection has a request under way; try again \
             in a moment"
                .to_owned(),
        )
    }

    /// A missing, malformed or unknown bearer token; `why` says which.
    pub fn unauthorized(why: &str) -> Self {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            None,
            why.to_owned(),
        )
    }

    /// A request refused for where it came from (see `auth::refuse_browser_attacks`).
    pub fn forbidden(what: &str) -> Self {
        ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            None,
            format!("refused {what}"),
        )
    }

    /// No such route.
    pub fn no_route(method: &str, path: &str) -> Self {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            None,
            format!("no route {method} {path}; the API is described at /v1/openapi.json"),
        )
    }

    /// A route that exists, called with the wrong method.
    pub fn method_not_allowed(method: &str, path: &str) -> Self {
        ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            None,
            format!("{path} does not take {method}; the API is described at /v1/openapi.json"),
        )
    }

    /// The same error about a field inside the request's object `parent`: an error naming `field` (or, without a
    /// field, a message starting with it) names `parent.field` instead.
    pub fn nested_under(mut self, parent: &str, field: &str) -> Self {
        let detail = &mut self.body.error;
        if detail.field.as_deref().is_some_and(|f| f == field) {
            detail.field = Some(format!("{parent}.{field}"));
        }
        if let Some(rest) = detail.message.strip_prefix(field)
            && rest.starts_with(':')
        {
            detail.message = format!("{parent}.{field}{rest}");
        }
        self
    }

    /// The body this error is sent with.
    pub fn body(&self) -> &ErrorBody {
        &self.body
    }

    /// The status code this error is sent with.
    pub fn status(&self) -> StatusCode {
        self.status
    }
}

impl From<cairn::Error> for ApiError {
    fn from(e: cairn::Error) -> Self {
        let (status, _) = cairn_api::wire_kind(e.kind());
        let status = StatusCode::from_u16(status).expect("wire_kind gives valid statuses");
        if status.is_server_error() {
            tracing::error!(error = %e, "request failed");
        }
        ApiError {
            status,
            body: ErrorBody::from_error(&e),
        }
    }
}

/// How long a client should wait before sending again a request refused for a reason that passes with time: the
/// database out of reach (a restart, a cut link: seconds) or out of room (until someone frees space).
fn retry_after(status: StatusCode) -> Option<&'static str> {
    match status {
        StatusCode::SERVICE_UNAVAILABLE => Some("1"),
        StatusCode::INSUFFICIENT_STORAGE => Some("10"),
        _ => None,
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, axum::Json(self.body)).into_response();
        if let Some(seconds) = retry_after(self.status) {
            response.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from_static(seconds),
            );
        }
        response
    }
}

/// What handlers return.
pub type ApiResult<T> = Result<T, ApiError>;

#[cfg(test)]
mod tests {
    use super::*;
    use cairn::ErrorKind;

    #[test]
    fn failures_that_pass_with_time_say_when_to_come_back() {
        for (kind, status, wire) in [
            (ErrorKind::Unavailable, 503, "unavailable"),
            (ErrorKind::StorageFull, 507, "storage_full"),
        ] {
            let response =
                ApiError::from(cairn::Error::from_parts(kind, None, "x")).into_response();
            assert_eq!(response.status().as_u16(), status);
            assert!(response.headers().contains_key("retry-after"), "{wire}");
        }
        let broken =
            ApiError::from(cairn::Error::from_parts(ErrorKind::Storage, None, "x")).into_response();
        assert_eq!(broken.status().as_u16(), 500);
        assert!(!broken.headers().contains_key("retry-after"));
    }
}
