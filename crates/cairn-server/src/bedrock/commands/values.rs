//! Reading Bedrock's header values the way Bedrock does (reference §3, §5 "shared validators"), and translating
//! Cairn's values back into Bedrock's: priorities, states, times, job objects.

use cairn::{Job, JobId, JobState};
use jiff::Timestamp;
use serde_json::{Value, json};

use crate::bedrock::frame::{Headers, Response};

/// The priorities Bedrock allows.
pub const PRIORITIES: [i64; 6] = [0, 250, 500, 750, 850, 1000];

/// Bedrock's default priority, which is Cairn's 0.
pub const DEFAULT_PRIORITY: i64 = 500;

/// The longest job name CreateJob accepts, in bytes.
pub const MAX_NAME: usize = 255;

/// The longest `name` GetJob(s) accepts, in bytes.
pub const MAX_GET_NAME: usize = 12_750;

/// The largest `data`, in bytes.
pub const MAX_DATA: usize = 1024 * 1024;

/// The queue of Bedrock's jobs.
pub const QUEUE: &str = "default";

/// The queue of mocked jobs (reference §10): test traffic that goes through production without doing anything.
/// A queue of their own keeps them from every worker that did not ask for them, over any door.
pub const MOCK_QUEUE: &str = "bedrock-mock";

/// The queue of a job, mocked or not.
pub fn queue(mocked: bool) -> &'static str {
    if mocked { MOCK_QUEUE } else { QUEUE }
}

/// Whether a request marks itself mocked: the header's presence counts, whatever its value (reference §1.5).
pub fn is_mock_request(headers: &Headers) -> bool {
    headers.contains("mockrequest")
}

/// Whether a job is a mocked one.
pub fn is_mocked(job: &Job) -> bool {
    job.queue.as_str() == MOCK_QUEUE
}

/// Whether data says it is mocked, as Bedrock reads it: it has a `mockRequest` key.
pub fn says_mocked(data: &Value) -> bool {
    data.get("mockRequest").is_some()
}

/// A new job's data as the client wrote it, and for a mocked job with `"mockRequest": true` (in place if the key
/// is there, last if not).
pub fn new_job_data(mut data: Value, mocked: bool) -> Value {
    if let (true, Value::Object(map)) = (mocked, &mut data) {
        map.insert("mockRequest".to_owned(), Value::Bool(true));
    }
    data
}

/// New data for a job that already exists: its `mockRequest` key says what the job is, whatever the data says.
pub fn kept_mocked_as(mut data: Value, mocked: bool) -> Value {
    if !mocked && let Value::Object(map) = &mut data {
        map.shift_remove("mockRequest");
        return data;
    }
    new_job_data(data, mocked)
}

/// An error status with no body.
pub fn status(line: &str) -> Response {
    Response::status(line)
}

/// The jobID check: `402 Missing jobID` when absent or empty, `402 Malformed jobID` unless it is an int64 written
/// the canonical way (`01` and `+5` are not).
pub fn job_id(headers: &Headers) -> Result<JobId, Response> {
    let text = headers.get("jobid").unwrap_or("");
    if text.is_empty() {
        return Err(status("402 Missing jobID"));
    }
    match text.parse::<i64>() {
        Ok(id) if id.to_string() == text => Ok(JobId(id)),
        _ => Err(status("402 Malformed jobID")),
    }
}

/// C's `atoll`: leading whitespace, an optional sign, then digits; anything else ends it, and no digits is 0.
pub fn atoll(text: &str) -> i64 {
    let text = text.trim_start();
    let (sign, digits) = match text.as_bytes().first() {
        Some(b'-') => (-1, &text[1..]),
        Some(b'+') => (1, &text[1..]),
        _ => (1, text),
    };
    let mut value: i64 = 0;
    for byte in digits.bytes().take_while(u8::is_ascii_digit) {
        value = value
            .saturating_mul(10)
            .saturating_add(i64::from(byte - b'0'));
    }
    sign * value
}

/// A Bedrock priority read as Bedrock reads it (`atoll`), checked against the allowed set.
pub fn priority(text: &str) -> Result<i64, Response> {
    let value = atoll(text);
    if PRIORITIES.contains(&value) {
        Ok(value)
    } else {
        Err(status("402 Invalid priority value"))
    }
}

/// The Cairn priority of a Bedrock one.
pub fn to_cairn_priority(priority: i64) -> i32 {
    i32::try_from(priority - DEFAULT_PRIORITY).expect("allowed priorities are small")
}

/// The Bedrock priority of a Cairn one.
pub fn to_bedrock_priority(priority: i32) -> i64 {
    i64::from(priority) + DEFAULT_PRIORITY
}

/// A `data` value that CreateJob accepts: a non-empty JSON object, exactly `{}`, or an empty array, which is how
/// PHP encodes an empty one (Bedrock-PHP's `createJobs` sends `"data":[]` for a job without data; Bedrock itself
/// refuses it, and its clients get by only because they add `_commitCounts` to the data once they have talked to
/// a Bedrock node).
pub fn data_object(text: &str) -> Option<Value> {
    if text == "{}" {
        return Some(json!({}));
    }
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) if !map.is_empty() => Some(Value::Object(map)),
        Ok(Value::Array(items)) if items.is_empty() => Some(json!({})),
        _ => None,
    }
}

/// A time as Bedrock writes it: `YYYY-MM-DD HH:MM:SS`, UTC.
pub fn time_text(at: Timestamp) -> String {
    at.strftime("%Y-%m-%d %H:%M:%S").to_string()
}

/// A job's `nextRun`: as [`time_text`], but with milliseconds while it is still due from the moment it was
/// created, as Bedrock writes the `nextRun` it gives a new job (reference §1.6). Every time Bedrock computes is
/// whole seconds, and so are the times this layer gives a job (RequeueJobs' `created`, for one).
fn next_run_text(job: &Job) -> String {
    due_text(job, job.run_at)
}

/// `at`, a time `job` is due, as [`next_run_text`] writes it.
fn due_text(job: &Job, at: jiff::Timestamp) -> String {
    if at == job.created_at {
        at.strftime("%Y-%m-%d %H:%M:%S%.3f").to_string()
    } else {
        time_text(at)
    }
}

/// Whether a header is "true" as Bedrock's `ignoreRepeat` reads it: `true` in any case, or a non-zero integer.
pub fn is_true(value: Option<&str>) -> bool {
    value.is_some_and(|v| v.eq_ignore_ascii_case("true") || atoll(v) != 0)
}

/// How Bedrock names a job's state. A completed job is `FINISHED`: Bedrock keeps only children in that state
/// (a standalone job that finished is deleted, and this layer does not show it).
pub fn state_name(job: &Job) -> &'static str {
    match job.state {
        JobState::Scheduled | JobState::Queued => "QUEUED",
        JobState::Running if retry_after(job).is_some() => "RUNQUEUED",
        JobState::Running => "RUNNING",
        JobState::Waiting => "PAUSED",
        JobState::Failed => "FAILED",
        JobState::Cancelled => "CANCELLED",
        JobState::Completed => "FINISHED",
    }
}

/// The tag that keeps a job's `retryAfter` as it was given (its meaning is the job's timeout; see `create.rs`).
pub const RETRY_AFTER_TAG: &str = "bedrock:retryAfter=";

/// A job's `retryAfter`, if it has one.
pub fn retry_after(job: &Job) -> Option<&str> {
    job.tags
        .iter()
        .find_map(|tag| tag.as_str().strip_prefix(RETRY_AFTER_TAG))
}

/// When the job's latest attempt before `skip_running` started: Bedrock's `lastRun`, `""` when it never ran.
pub fn last_run(job: &Job, skip_running: bool) -> String {
    job.history
        .iter()
        .rev()
        .filter(|a| !(skip_running && a.outcome.is_none()))
        .map(|a| time_text(a.started_at))
        .next()
        .unwrap_or_default()
}

/// Whether a job's hand-outs go uncounted: Bedrock exempts jobs whose name starts with `manual` (reference §7.6),
/// which are handed out again for as long as their `retryAfter` runs out.
pub fn is_manual(name: &str) -> bool {
    name.starts_with("manual")
}

/// The fields every job object has (QueryJob adds `state`, GetJob may add parent fields). A job with a
/// `retryAfter` shows its bookkeeping in its data as Bedrock keeps it there (reference §7.6): how often it was
/// handed out, `handed_out`, as `retryAfterCount` (Cairn counts it as the job's attempts), and, for a `SCHEDULED`
/// repeat, when the run was due before it was first handed out, as `originalNextRun`. A `manual…` job has neither.
pub fn job_fields(job: &Job, last_run: String, handed_out: u32) -> Vec<(&'static str, Value)> {
    let mut data = job.data.clone();
    if let (Some(_), Value::Object(map)) = (retry_after(job), &mut data)
        && handed_out > 0
        && !is_manual(job.name.as_str())
    {
        map.insert("retryAfterCount".to_owned(), json!(handed_out));
        if job
            .schedule
            .as_deref()
            .is_some_and(|s| s.contains("SCHEDULED"))
        {
            // When the run was first due, however often it was handed out since.
            map.insert(
                "originalNextRun".to_owned(),
                json!(due_text(job, job.due_at)),
            );
        }
    }
    vec![
        ("created", json!(time_text(job.created_at))),
        ("data", data),
        ("jobID", json!(job.id.0)),
        ("lastRun", json!(last_run)),
        ("name", json!(job.name.as_str())),
        ("nextRun", json!(next_run_text(job))),
        ("priority", json!(to_bedrock_priority(job.priority))),
        ("repeat", json!(job.schedule.clone().unwrap_or_default())),
        ("retryAfter", json!(retry_after(job).unwrap_or(""))),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bedrock::frame::{FrameLimits, parse};

    fn headers(text: &str) -> Headers {
        let request = format!("X\r\n{text}\r\n\r\n");
        parse(request.as_bytes(), &FrameLimits::default())
            .unwrap()
            .unwrap()
            .0
            .headers
    }

    #[test]
    fn job_ids_must_be_canonical_int64() {
        assert_eq!(job_id(&headers("jobID: 42")).unwrap(), JobId(42));
        assert_eq!(job_id(&headers("jobID: -5")).unwrap(), JobId(-5));
        for (text, line) in [
            ("x: 1", "402 Missing jobID"),
            ("jobID:", "402 Missing jobID"),
            ("jobID: abc", "402 Malformed jobID"),
            ("jobID: 01", "402 Malformed jobID"),
            ("jobID: +5", "402 Malformed jobID"),
            ("jobID: 99999999999999999999", "402 Malformed jobID"),
        ] {
            assert_eq!(job_id(&headers(text)).unwrap_err().status, line, "{text}");
        }
    }

    #[test]
    fn priorities_are_read_like_atoll_and_checked_against_the_six_values() {
        for (text, value) in [
            ("500", 500),
            ("", 0),
            ("abc", 0),
            ("1000xyz", 1000),
            (" 250", 250),
        ] {
            assert_eq!(priority(text).unwrap(), value, "{text:?}");
        }
        for text in ["111", "-500", "501"] {
            assert_eq!(
                priority(text).unwrap_err().status,
                "402 Invalid priority value"
            );
        }
        assert_eq!(to_cairn_priority(500), 0);
        assert_eq!(to_bedrock_priority(to_cairn_priority(1000)), 1000);
    }

    #[test]
    fn data_must_be_a_non_empty_object_or_exactly_empty_braces_or_an_empty_array() {
        assert_eq!(data_object("{}"), Some(json!({})));
        assert_eq!(data_object("[]"), Some(json!({})));
        assert_eq!(data_object("[ ]"), Some(json!({})));
        assert_eq!(data_object(r#"{"a":1}"#), Some(json!({"a": 1})));
        for bad in ["", "blabla", "[1]", "{ }", "1", r#""{}""#] {
            assert_eq!(data_object(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn ignore_repeat_is_true_or_a_non_zero_integer() {
        assert!(is_true(Some("TRUE")));
        assert!(is_true(Some("1")));
        assert!(!is_true(Some("false")));
        assert!(!is_true(Some("0")));
        assert!(!is_true(None));
    }
}
