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
///
/// JSON has one kind of number, and JSON Schema counts `5.0` as an integer, as a client's language may write it
/// (Python's `json.dumps(5.0)`); serde refuses it for an integer field. So a whole number written with a fraction or
/// an exponent where an integer is wanted is read as that integer, field by field: only the fields that want an
/// integer change, never the job's own data.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    // Every body is an object; serde would also read a struct from an array of its fields in order.
    if let Some(first) = bytes.iter().find(|b| !b.is_ascii_whitespace())
        && *first != b'{'
    {
        return Err(ApiError::invalid("body", "must be a JSON object"));
    }
    let mut rewritten: Option<Vec<u8>> = None;
    // Each round fixes one field; a body with more such fields than this is refused naming the next one.
    for _ in 0..64 {
        let current = rewritten.as_deref().unwrap_or(bytes);
        match decode_once::<T>(current) {
            Ok(value) => return Ok(value),
            Err(failure) => match as_integer(current, &failure) {
                Some(fixed) => rewritten = Some(fixed),
                None => return Err(failure.into_api_error(current)),
            },
        }
    }
    decode_once::<T>(rewritten.as_deref().unwrap_or(bytes)).map_err(|f| f.into_api_error(bytes))
}

/// Why a body did not decode: where (none for characters after the value), and serde's error.
struct Failure {
    path: Option<serde_path_to_error::Path>,
    error: serde_json::Error,
}

/// One attempt at decoding `bytes` as a `T`.
fn decode_once<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, Failure> {
    let mut json = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut json).map_err(|e| Failure {
        path: Some(e.path().clone()),
        error: e.into_inner(),
    })?;
    if let Err(error) = json.end() {
        return Err(Failure { path: None, error });
    }
    Ok(value)
}

/// `bytes` with the whole number that `failure` refused as a float written as an integer, if that is what it
/// refused.
fn as_integer(bytes: &[u8], failure: &Failure) -> Option<Vec<u8>> {
    let text = failure.error.to_string();
    let refused = text.strip_prefix("invalid type: floating point `")?;
    if !refused.contains("`, expected i") && !refused.contains("`, expected u") {
        return None;
    }
    let mut root: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    let mut at = &mut root;
    for segment in failure.path.as_ref()?.iter() {
        at = match segment {
            serde_path_to_error::Segment::Seq { index } => at.get_mut(*index)?,
            serde_path_to_error::Segment::Map { key } => at.get_mut(key.as_str())?,
            _ => return None,
        };
    }
    let float = at.as_f64()?;
    if float.fract() != 0.0 {
        return None;
    }
    // Only where an f64 holds every integer exactly: a literal beyond (`-9223372036854775809`) reaches serde as
    // the nearest f64, not the number written, and stays refused.
    const EXACT: f64 = 9_007_199_254_740_992.0;
    if float.abs() > EXACT {
        return None;
    }
    *at = serde_json::Value::from(float as i64);
    serde_json::to_vec(&root).ok()
}

impl Failure {
    /// The error to answer with, naming the field.
    fn into_api_error(self, bytes: &[u8]) -> ApiError {
        let Some(path) = self.path else {
            return ApiError::invalid("body", "must hold one JSON value, got trailing characters");
        };
        let path = path.to_string();
        let inner = self.error;
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
    }
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
    fn whole_numbers_written_as_floats_are_integers() {
        let push = decode::<PushRequest>(
            br#"{"name":"a","weight":2.0,"data":{"x":1.0},"depends_on":[3e0,4]}"#,
        )
        .unwrap();
        assert_eq!(push.weight, Some(2));
        assert_eq!(push.depends_on, [3, 4]);
        assert_eq!(push.data.unwrap().to_string(), r#"{"x":1.0}"#);
        check::<PushRequest>(
            r#"{"name":"a","weight":2.5}"#,
            "weight",
            "weight: invalid type: floating point `2.5`, expected u32",
        );
        check::<PushRequest>(
            r#"{"name":"a","weight":-1.0}"#,
            "weight",
            "weight: invalid value: integer `-1`, expected u32",
        );
    }

    #[test]
    fn a_body_is_an_object() {
        check::<PushRequest>(r#"["a"]"#, "body", "body: must be a JSON object");
        check::<PushRequest>(" 5", "body", "body: must be a JSON object");
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
