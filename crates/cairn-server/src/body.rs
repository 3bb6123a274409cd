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
        if inner.is_eof() && bytes.iter().all(u8::is_ascii_whitespace) {
            return ApiError::invalid("body", "must be a JSON object, got an empty body");
        }
        // serde's message ends with a position; a syntax error keeps it, in words, and is the body's.
        let text = inner.to_string();
        let reason = match text.rfind(" at line ") {
            Some(at) => &text[..at],
            None => text.as_str(),
        };
        if inner.is_syntax() || inner.is_eof() {
            return ApiError::invalid(
                "body",
                format!(
                    "is not valid JSON: {} (line {}, column {})",
                    syntax_in_words(reason, inner.is_eof()),
                    inner.line(),
                    inner.column()
                ),
            );
        }
        // A missing field's path is the object that lacks it; name the field itself.
        let missing = reason
            .strip_prefix("missing field `")
            .and_then(|rest| rest.split('`').next());
        let field = match (path.as_str(), missing) {
            (".", Some(name)) => name.to_owned(),
            (_, Some(name)) => format!("{path}.{name}"),
            (".", None) => "body".to_owned(),
            (_, None) => path,
        };
        ApiError::invalid(field, rule_in_words(reason))
    }
}

/// A JSON syntax error as a person would say it.
fn syntax_in_words(reason: &str, eof: bool) -> String {
    let words = match reason {
        _ if eof => "the body ends before the JSON does",
        "trailing comma" => "a comma before the closing bracket or brace",
        "key must be a string" => "a key must be a string in double quotes",
        "expected value" => "a value was expected here",
        "expected ident" => "a value was expected here (true, false or null?)",
        other => {
            return other.replace(
                "expected `,` or `}`",
                "a comma or a closing brace was expected here",
            );
        }
    };
    words.to_owned()
}

/// serde's refusal of a value, in people's words: the rule and what came instead, with no Rust type in it.
fn rule_in_words(reason: &str) -> String {
    if reason.starts_with("missing field `") {
        return "is required".to_owned();
    }
    if let Some(rest) = reason
        .strip_prefix("invalid type: ")
        .or_else(|| reason.strip_prefix("invalid value: "))
        && let Some((got, wanted)) = rest.rsplit_once(", expected ")
    {
        return format!(
            "must be {}, got {}",
            expected_in_words(wanted),
            got_in_words(got)
        );
    }
    // serde reads an object from a list of its fields in order; a body never means that.
    if reason.starts_with("invalid length ") && reason.contains(", expected struct ") {
        return "must be an object, got a list".to_owned();
    }
    if let Some(rest) = reason.strip_prefix("unknown variant `")
        && let Some((got, wanted)) = rest.split_once("`, expected ")
    {
        return format!("must be {}, got {got:?}", wanted.replace('`', ""));
    }
    if let Some(rest) = reason.strip_prefix("unknown field `")
        && let Some((got, known)) = rest.split_once('`')
    {
        let known = known
            .trim_start_matches(", expected one of ")
            .trim_start_matches(", expected ")
            .replace('`', "");
        return match known.as_str() {
            ", there are no fields" => format!("{got:?} is not a field here, which takes none"),
            known => format!("{got:?} is not a field here; the fields are {known}"),
        };
    }
    // A time that does not parse: jiff says where its parser stopped, in its own terms.
    if reason.starts_with("failed to ") {
        return TIME_RULE.to_owned();
    }
    reason.to_owned()
}

/// What a time field takes.
const TIME_RULE: &str =
    "must be a time like 2026-01-31T09:00:00Z (RFC 3339: a date, a time, and Z or an offset)";

/// What serde expected, as a rule: Rust's integer types as the range they hold.
fn expected_in_words(wanted: &str) -> String {
    let range = |min: i128, max: i128| format!("a whole number from {min} to {max}");
    match wanted {
        "i8" => range(i8::MIN.into(), i8::MAX.into()),
        "i16" => range(i16::MIN.into(), i16::MAX.into()),
        "i32" => range(i32::MIN.into(), i32::MAX.into()),
        "i64" | "isize" => range(i64::MIN.into(), i64::MAX.into()),
        "u8" => range(0, u8::MAX.into()),
        "u16" => range(0, u16::MAX.into()),
        "u32" => range(0, u32::MAX.into()),
        "u64" | "usize" => range(0, u64::MAX.into()),
        "f32" | "f64" => "a number".to_owned(),
        "a string" | "a borrowed string" => "text (a JSON string)".to_owned(),
        "a boolean" => "true or false".to_owned(),
        "a sequence" => "a list".to_owned(),
        "a map" => "an object".to_owned(),
        "a timestamp string" => TIME_RULE
            .strip_prefix("must be ")
            .unwrap_or(TIME_RULE)
            .to_owned(),
        other if other.starts_with("struct ") => "an object".to_owned(),
        other => other.replace('`', ""),
    }
}

/// What came instead, as serde names it: the value itself where it gives one, else its kind.
fn got_in_words(got: &str) -> String {
    for prefix in ["floating point ", "integer ", "boolean "] {
        if let Some(value) = got.strip_prefix(prefix) {
            return value.trim_matches('`').to_owned();
        }
    }
    if let Some(text) = got.strip_prefix("string ") {
        return format!("the text {text}");
    }
    match got {
        "map" => "an object".to_owned(),
        "sequence" => "a list".to_owned(),
        "unit value" | "null" => "null".to_owned(),
        other => other.to_owned(),
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
            r#"jobs[1].priority: must be a whole number from -2147483648 to 2147483647, got the text "high""#,
        );
        check::<PushRequest>(
            r#"{"name":"a","weight":-1}"#,
            "weight",
            "weight: must be a whole number from 0 to 4294967295, got -1",
        );
        check::<PushRequest>("", "body", "body: must be a JSON object, got an empty body");
        check::<PushRequest>("{}", "name", "name: is required");
        check::<PushBatchRequest>(
            r#"{"jobs":[{"name":"a"},{}]}"#,
            "jobs[1].name",
            "jobs[1].name: is required",
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
            "weight: must be a whole number from 0 to 4294967295, got 2.5",
        );
        check::<PushRequest>(
            r#"{"name":"a","weight":-1.0}"#,
            "weight",
            "weight: must be a whole number from 0 to 4294967295, got -1",
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
        let message = &e.body().error.message;
        assert!(
            message.starts_with(
                "prio: \"prio\" is not a field here; the fields are queue, name, data, priority,"
            ),
            "{message}"
        );
    }

    /// The inputs people sent that got a parser's or a Rust type's words back: each is answered in a person's.
    #[test]
    fn errors_say_what_is_accepted_in_words() {
        check::<PushRequest>(
            r#"{"name":"x","#,
            "body",
            "body: is not valid JSON: the body ends before the JSON does (line 1, column 12)",
        );
        check::<PushRequest>(
            "{\n  \"name\": \"x\",\n}",
            "body",
            "body: is not valid JSON: a comma before the closing bracket or brace (line 3, column 1)",
        );
        check::<PushRequest>(
            r#"{name: "x"}"#,
            "body",
            "body: is not valid JSON: a key must be a string in double quotes (line 1, column 2)",
        );
        check::<PushRequest>(
            r#"{"name":"x" "b":1}"#,
            "body",
            "body: is not valid JSON: a comma or a closing brace was expected here (line 1, column 13)",
        );
        check::<PushRequest>(
            r#"{"name":"x","priority":1e20}"#,
            "priority",
            "priority: must be a whole number from -2147483648 to 2147483647, got 1e+20",
        );
        for run_at in [
            r#""2026-13-01T00:00:00Z""#,
            r#""yesterday""#,
            r#""2026-01-31""#,
            "5",
        ] {
            let e =
                decode::<PushRequest>(format!(r#"{{"name":"x","run_at":{run_at}}}"#).as_bytes())
                    .unwrap_err();
            assert_eq!(e.body().error.field.as_deref(), Some("run_at"));
            assert!(
                e.body()
                    .error
                    .message
                    .starts_with("run_at: must be a time like 2026-01-31T09:00:00Z"),
                "{run_at}: {}",
                e.body().error.message
            );
        }
        check::<PushRequest>(
            r#"{"name":5}"#,
            "name",
            "name: must be text (a JSON string), got 5",
        );
        check::<PushRequest>(
            r#"{"name":"x","tags":"a"}"#,
            "tags",
            r#"tags: must be a list, got the text "a""#,
        );
        check::<PushRequest>(
            r#"{"name":"x","children":"mine"}"#,
            "children",
            r#"children: must be run or job, got "mine""#,
        );
        check::<PushRequest>(
            r#"{"name":"x","retry":[]}"#,
            "retry",
            "retry: must be an object, got a list",
        );
        // Every part of a policy may be left out, so a list of them in order must not read as one.
        check::<PushRequest>(
            r#"{"name":"x","retry":[3]}"#,
            "retry",
            "retry: must be an object, got a list",
        );
        check::<PushRequest>(
            r#"{"name":"x","retry":{"max_attempts":1,"attempts":2}}"#,
            "retry.attempts",
            "retry.attempts: \"attempts\" is not a field here; the fields are max_attempts, initial_delay_ms, \
             multiplier, max_delay_ms, jitter",
        );
        check::<PushRequest>(
            r#"{"name":"x","retry":{"max_attempts":"once"}}"#,
            "retry.max_attempts",
            r#"retry.max_attempts: must be a whole number from 0 to 4294967295, got the text "once""#,
        );
    }
}
