//! CreateJob and CreateJobs (reference §5.1, §5.2).

use cairn::{Push, Repeat, RetryPolicy};
use serde_json::{Value, json};

use crate::bedrock::commands::values::{self, DEFAULT_PRIORITY, MAX_NAME, status};
use crate::bedrock::commands::{Answer, BedrockCommands};
use crate::bedrock::frame::{Headers, Response, json_object};

/// What Cairn does not do yet: refused with a clear status rather than silently ignored.
const UNSUPPORTED: [(&str, &str); 4] = [
    ("retryafter", "501 retryAfter is not supported by Cairn yet"),
    (
        "parentjobid",
        "501 parentJobID is not supported by Cairn yet",
    ),
    ("unique", "501 unique is not supported by Cairn yet"),
    (
        "mockrequest",
        "501 mockRequest is not supported by Cairn yet",
    ),
];

impl BedrockCommands {
    /// CreateJob: one job; answers `{"jobID": …}`.
    pub(super) async fn create_job(&self, headers: &Headers) -> Answer {
        let name = headers.get("name").unwrap_or("");
        if name.is_empty() {
            return Err(status("402 Missing name"));
        }
        if name.len() > MAX_NAME {
            return Err(status("402 Malformed name"));
        }
        let push = checked_push(headers)?;
        let enqueued = self.queue.enqueue(push).await.map_err(engine_error)?;
        Ok(Response::json(json_object(vec![(
            "jobID",
            json!(enqueued.id.0),
        )])))
    }

    /// CreateJobs: many jobs, all or none; answers `{"jobIDs": […]}` in input order.
    pub(super) async fn create_jobs(&self, headers: &Headers) -> Answer {
        let invalid = || status("401 Invalid JSON");
        let jobs: Vec<Value> = match serde_json::from_str(headers.get("jobs").unwrap_or("")) {
            Ok(Value::Array(jobs)) if !jobs.is_empty() => jobs,
            _ => return Err(invalid()),
        };
        let mut each = Vec::with_capacity(jobs.len());
        for job in &jobs {
            match job {
                Value::Object(fields) if !fields.is_empty() => {
                    // Bedrock's own check, quirk included: the element's text must hold "name" somewhere.
                    if !job.to_string().contains("name") {
                        return Err(status("402 Missing name"));
                    }
                    each.push(Headers::from_pairs(
                        fields.iter().map(|(k, v)| (k.clone(), header_text(v))),
                    ));
                }
                _ => return Err(invalid()),
            }
        }
        let pushes = each
            .iter()
            .map(checked_push)
            .collect::<Result<Vec<_>, _>>()?;
        let enqueued = self
            .queue
            .enqueue_batch(pushes)
            .await
            .map_err(engine_error)?;
        let ids: Vec<i64> = enqueued.iter().map(|e| e.id.0).collect();
        Ok(Response::json(json_object(vec![("jobIDs", json!(ids))])))
    }
}

/// A JSON value as a header would carry it: strings as they are, anything else as its JSON text.
fn header_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// CreateJob's checks after the name, in Bedrock's order, and the job they describe.
fn checked_push(headers: &Headers) -> Result<Push, Response> {
    if let Some(text) = headers.get("jobpriority") {
        values::priority(text)?;
    }
    let data = match headers.get("data") {
        None => json!({}),
        Some(text) => values::data_object(text)
            .ok_or_else(|| status("402 Data is not a valid JSON Object"))?,
    };
    for (header, line) in UNSUPPORTED {
        let set = match header {
            "unique" => headers.get(header) == Some("true"),
            "parentjobid" => headers.get(header).is_some_and(|v| values::atoll(v) != 0),
            "mockrequest" => headers.contains(header),
            _ => headers.get(header).is_some_and(|v| !v.is_empty()),
        };
        if set {
            return Err(status(line));
        }
    }
    let repeat = match headers.get("repeat").filter(|r| !r.is_empty()) {
        Some(text) => Some(
            Repeat::parse(text)
                .map_err(|_| status("402 Malformed repeat"))?
                .as_str()
                .to_owned(),
        ),
        None => None,
    };
    let priority = match headers.get("jobpriority").or(headers.get("priority")) {
        Some(text) => values::priority(text)?,
        None => DEFAULT_PRIORITY,
    };
    let mut push = Push::new(headers.get("name").unwrap_or(""))
        .data(data)
        .priority(values::to_cairn_priority(priority))
        // Bedrock never fails a job for its retries: RetryJob always says when to run again.
        .retry(RetryPolicy::immediate(u32::MAX));
    if let Some(first_run) = headers.get("firstrun").filter(|f| !f.is_empty()) {
        push = push.run_at(
            cairn::parse_first_run(first_run).map_err(|_| status("402 Malformed firstRun"))?,
        );
    }
    if let Some(repeat) = repeat {
        push = push.schedule(repeat);
    }
    Ok(push)
}

/// An engine error where Bedrock has no check of its own: a name or data the engine refuses.
pub(super) fn engine_error(e: cairn::Error) -> Response {
    match e.kind() {
        cairn::ErrorKind::InvalidInput => status(&format!("402 {}", one_line(&e.to_string()))),
        cairn::ErrorKind::NotFound => status("404 No job with this jobID"),
        _ => {
            tracing::error!(error = %e, "a Bedrock command failed");
            status("502 Query failed")
        }
    }
}

/// A message fit for a status line.
fn one_line(text: &str) -> String {
    text.replace(['\r', '\n'], " ")
}
