//! The query strings of the `GET` routes: a read's body travels as its parameters, each one text, read here with
//! errors that name the parameter, and written by [`query_string`].

use cairn::{JobId, Result};
use serde::Serialize;

use crate::route::{invalid, percent_encode};

/// `body`'s fields as a query string (`?a=1&b=x`), or nothing when it has none set: a field that is absent (null)
/// is left out, text and numbers are written as themselves, percent-encoded.
///
/// # Errors
/// [`cairn::ErrorKind::InvalidInput`] if the body is not an object of plain values, which no declared route has.
pub fn query_string(body: &impl Serialize) -> Result<String> {
    let value = serde_json::to_value(body).map_err(|e| invalid("query", e))?;
    let serde_json::Value::Object(fields) = value else {
        return Err(invalid("query", "must be an object"));
    };
    let mut pairs = Vec::new();
    for (name, value) in fields {
        let text = match value {
            serde_json::Value::Null => continue,
            serde_json::Value::String(text) => text,
            serde_json::Value::Bool(_) | serde_json::Value::Number(_) => value.to_string(),
            _ => return Err(invalid(&name, "must be a plain value in a query")),
        };
        pairs.push(format!("{name}={}", percent_encode(&text)));
    }
    Ok(if pairs.is_empty() {
        String::new()
    } else {
        format!("?{}", pairs.join("&"))
    })
}

/// A job id given as parameter `name`.
///
/// # Errors
/// [`cairn::ErrorKind::InvalidInput`] naming it unless it is a positive integer.
pub fn id_param(name: &str, text: &str) -> Result<JobId> {
    text.parse::<i64>()
        .ok()
        .filter(|id| *id > 0)
        .map(JobId)
        .ok_or_else(|| {
            invalid(
                name,
                format!("must be a job id (a positive integer), got {text:?}"),
            )
        })
}

/// A positive id (a batch's, an event's) given as parameter `name`, `what` saying whose.
pub(crate) fn positive_param(name: &str, what: &str, text: &str) -> Result<i64> {
    text.parse::<i64>()
        .ok()
        .filter(|id| *id > 0)
        .ok_or_else(|| {
            invalid(
                name,
                format!("must be {what} (a positive integer), got {text:?}"),
            )
        })
}

/// A page's `limit`: an integer (the engine holds it to 1 to `most`).
pub(crate) fn limit_param(text: &str, most: u32) -> Result<u32> {
    text.parse().map_err(|_| {
        invalid(
            "limit",
            format!("must be an integer between 1 and {most}, got {text:?}"),
        )
    })
}

/// A boolean: `true` or `false`, nothing else.
pub(crate) fn bool_param(name: &str, text: &str) -> Result<bool> {
    match text {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(invalid(
            name,
            format!("must be true or false, got {text:?}"),
        )),
    }
}

/// A time: RFC 3339.
pub(crate) fn time_param(name: &str, text: &str) -> Result<jiff::Timestamp> {
    text.parse().map_err(|_| {
        invalid(
            name,
            format!("must be an RFC 3339 time such as 2026-01-31T09:00:00Z, got {text:?}"),
        )
    })
}

/// Parameter `text`, if given, read by `read`.
pub(crate) fn optional<T>(
    text: Option<&String>,
    read: impl FnOnce(&str) -> Result<T>,
) -> Result<Option<T>> {
    text.map(|text| read(text)).transpose()
}

#[cfg(test)]
mod tests {
    use super::query_string;

    #[derive(serde::Serialize)]
    struct Query {
        limit: Option<String>,
        queue: Option<String>,
        tracked: Option<String>,
    }

    #[test]
    fn absent_fields_are_left_out_and_values_encoded() {
        let query = Query {
            limit: Some("10".into()),
            queue: Some("a b/c".into()),
            tracked: None,
        };
        assert_eq!(query_string(&query).unwrap(), "?limit=10&queue=a%20b%2Fc");
        let empty = Query {
            limit: None,
            queue: None,
            tracked: None,
        };
        assert_eq!(query_string(&empty).unwrap(), "");
    }
}
