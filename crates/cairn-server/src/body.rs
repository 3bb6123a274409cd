//! [`JsonBody`]: the request-body extractor. It reads the body within the server's size limit and decodes it with
//! the path of a bad field (`jobs[3].priority`), so errors name the field as the engine's own errors do.

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use serde::de::DeserializeOwned;

use crate::connection::TooSlow;
use crate::error::ApiError;
use crate::state::AppState;

/// A JSON request body of type `T`. Any content type is read as JSON, so `curl -d '{…}'` works as is.
pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned> FromRequest<AppState> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, ApiError> {
        let bytes = Bytes::from_request(req, state).await.map_err(|rejection| {
            if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::too_large(state.config.max_body_bytes)
            } else if let Some(slow) = too_slow(&rejection) {
                ApiError::request_timeout(slow)
            } else {
                ApiError::invalid("body", format!("could not be read: {rejection}"))
            }
        })?;
        decode(&bytes).map(JsonBody)
    }
}

/// The connection's deadline, if that is why the body could not be read (see `connection.rs`).
fn too_slow<'a>(rejection: &'a (dyn std::error::Error + 'static)) -> Option<&'a TooSlow> {
    let mut cause = rejection.source();
    while let Some(c) = cause {
        if let Some(slow) = c.downcast_ref::<TooSlow>() {
            return Some(slow);
        }
        cause = c.source();
    }
    None
}

/// Decodes `bytes` as a `T`, naming the field that does not fit.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let mut json = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut json).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let rule = if inner.is_eof() && bytes.iter().all(u8::is_ascii_whitespace) {
            "must be a JSON object, got an empty body".to_owned()
        } else {
            // serde's message carries a position that only means something to a parser; drop it.
            let text = inner.to_string();
            match text.rfind(" at line ") {
                Some(at) => text[..at].to_owned(),
                None => text,
            }
        };
        // A missing field's path is the object that lacks it; name the field itself.
        let missing = rule
            .strip_prefix("missing field `")
            .and_then(|rest| rest.split('`').next());
        let field = match (path.as_str(), missing) {
            (".", Some(name)) => name.to_owned(),
            (_, Some(name)) => format!("{path}.{name}"),
            (".", None) => "body".to_owned(),
            (_, None) => path,
        };
        ApiError::invalid(field, rule)
    })?;
    json.end().map_err(|_| {
        ApiError::invalid("body", "must hold one JSON value, got trailing characters")
    })?;
    Ok(value)
}

#[cfg(test)]
mod tests {
    use cairn_api::{PushBatchRequest, PushRequest};

    use super::*;

    /// The field and message of the error decoding `body` as a `T`.
    fn check<T: DeserializeOwned + std::fmt::Debug>(body: &str, field: &str, message: &str) {
        let e = decode::<T>(body.as_bytes()).unwrap_err();
        assert_eq!(e.status(), StatusCode::BAD_REQUEST);
        assert_eq!(e.body().error.field.as_deref(), Some(field), "{body}");
        assert_eq!(e.body().error.message, message, "{body}");
    }

    #[test]
    fn errors_name_the_field_path_and_the_rule() {
        check::<PushBatchRequest>(
            r#"{"jobs":[{"name":"a"},{"name":"b","priority":"high"}]}"#,
            "jobs[1].priority",
            r#"jobs[1].priority: invalid type: string "high", expected i32"#,
        );
        check::<PushRequest>(
            r#"{"name":"a","weight":-1}"#,
            "weight",
            "weight: invalid value: integer `-1`, expected u32",
        );
        check::<PushRequest>("", "body", "body: must be a JSON object, got an empty body");
        check::<PushRequest>("{}", "name", "name: missing field `name`");
        check::<PushBatchRequest>(
            r#"{"jobs":[{"name":"a"},{}]}"#,
            "jobs[1].name",
            "jobs[1].name: missing field `name`",
        );
        check::<PushRequest>(
            r#"{"name":"a"} x"#,
            "body",
            "body: must hold one JSON value, got trailing characters",
        );
    }

    #[test]
    fn unknown_fields_are_refused() {
        let e = decode::<PushRequest>(br#"{"name":"a","prio":1}"#).unwrap_err();
        assert!(
            e.body().error.message.contains("unknown field `prio`"),
            "{e:?}"
        );
    }
}
