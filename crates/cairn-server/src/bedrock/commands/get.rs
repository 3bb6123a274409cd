//! GetJob and GetJobs (reference §5.3, §7): take due jobs by name, with real blocking behind `Connection: wait`.

use cairn::Jobs;
use std::time::Duration;

use cairn::{ClaimedJob, Dequeue, JobState};
use serde_json::{Value, json};

use crate::bedrock::commands::create::engine_error;
use crate::bedrock::commands::values::{self, MAX_GET_NAME, status};
use crate::bedrock::commands::{Answer, BedrockCommands};
use crate::bedrock::connection::Signals;
use crate::bedrock::frame::{Headers, Response, json_object};

/// Bedrock has no leases, so its workers never heartbeat: the jobs they take are leased for a day. A job held
/// longer without FinishJob, RetryJob or FailJob runs again.
pub(super) const BEDROCK_LEASE: Duration = Duration::from_secs(24 * 3600);

/// Bedrock's default command timeout, which bounds a `Connection: wait`.
const DEFAULT_WAIT: Duration = Duration::from_millis(110_000);

/// Who the history says took the jobs, and whose leases this layer holds.
pub(super) const WORKER: &str = "bedrock";

impl BedrockCommands {
    /// GetJob (`many` false: the job object itself) and GetJobs (`{"jobs": […]}`).
    pub(super) async fn get_jobs(
        &self,
        headers: &Headers,
        many: bool,
        signals: &Signals,
    ) -> Answer {
        let name = headers.get("name").unwrap_or("");
        if name.is_empty() {
            return Err(status("402 Missing name"));
        }
        if name.len() > MAX_GET_NAME {
            return Err(status("402 Malformed name"));
        }
        let limit = match (many, headers.get("numresults")) {
            (true, None) => return Err(status("402 Missing numResults")),
            (false, Some(_)) => {
                return Err(status("402 Cannot use numResults with GetJob; try GetJobs"));
            }
            (true, Some(text)) => values::atoll(text).clamp(1, i64::from(cairn::MAX_DEQUEUE)),
            (false, None) => 1,
        };
        let priority = headers
            .get("jobpriority")
            .map(values::priority)
            .transpose()?
            .map(values::to_cairn_priority);
        let wait = if headers
            .get("connection")
            .is_some_and(|c| c.eq_ignore_ascii_case("wait"))
        {
            headers
                .get("timeout")
                .map(|t| Duration::from_millis(u64::try_from(values::atoll(t)).unwrap_or(0)))
                .unwrap_or(DEFAULT_WAIT)
                .min(cairn::MAX_WAIT)
        } else {
            Duration::ZERO
        };
        let names = name_patterns(name);
        if names.is_empty() {
            // Only names that no job can have: an empty list would take any job.
            return Err(status("404 No job found"));
        }
        // Mocked jobs go only to a request that asks for them, before or after the others.
        let queues = if values::is_mock_request(headers) || headers.contains("getmockedjobs") {
            vec![values::QUEUE.to_owned(), values::MOCK_QUEUE.to_owned()]
        } else {
            vec![values::QUEUE.to_owned()]
        };
        let request = Dequeue {
            queues,
            names,
            limit: u32::try_from(limit).expect("clamped to MAX_DEQUEUE"),
            wait,
            lease_timeout: Some(BEDROCK_LEASE),
            priority,
            ..Dequeue::new(WORKER)
        };
        // A client that leaves, or a server that stops, ends a wait; the engine gives back what it claimed. A
        // GetJob that does not wait runs to its answer even for a client that closed its side, which may still
        // read (`printf … | nc`); if it had gone, the connection gives the jobs back.
        let waits = !wait.is_zero();
        let claimed = tokio::select! {
            claimed = self.queue.dequeue(request) => claimed.map_err(engine_error)?,
            () = signals.client_gone.cancelled(), if waits => Vec::new(),
            () = signals.shutdown.cancelled() => Vec::new(),
        };
        if claimed.is_empty() {
            return Err(status("404 No job found"));
        }
        let mut objects = Vec::with_capacity(claimed.len());
        let mut handed_out = Vec::with_capacity(claimed.len());
        for ClaimedJob { job, lease } in claimed {
            // `lastRun` is the attempt before this one, which the claim does not carry: the history does.
            let last_run = match self.queue.get(job.id).await {
                Ok(with_history) => values::last_run(&with_history, true),
                Err(_) => String::new(),
            };
            handed_out.push(job.id);
            self.remember(lease);
            // As Bedrock shows it, before this dequeue counted.
            let mut fields = values::job_fields(&job, last_run, job.attempt.saturating_sub(1));
            self.family_fields(&job, &mut fields).await;
            objects.push(json_object(fields));
        }
        // The objects are joined as they are: parsing them back could fail on data nested as deep as JSON allows.
        let body = if many {
            format!("{{\"jobs\":[{}]}}", objects.join(","))
        } else {
            objects.remove(0)
        };
        Ok(Response {
            handed_out,
            ..Response::json(body)
        })
    }
}

impl BedrockCommands {
    /// What GetJob adds for a family (reference §5.3): a child's `parentJobID` and `parentData`; a parent's
    /// `finishedChildJobs` and `cancelledChildJobs`, both present once either has a job.
    async fn family_fields(&self, job: &cairn::Job, fields: &mut Vec<(&'static str, Value)>) {
        if let Some(parent) = job.parent {
            let data = match self.queue.get(parent).await {
                Ok(parent) => parent.data,
                Err(_) => json!({}),
            };
            fields.push(("parentData", data));
            fields.push(("parentJobID", json!(parent.0)));
        }
        let Ok(children) = self.children(job.id).await else {
            return;
        };
        let summaries = |state: JobState| -> Vec<Value> {
            children
                .iter()
                .filter(|c| c.state == state)
                .map(|c| json!({"data": c.data, "jobID": c.id.0}))
                .collect()
        };
        let (finished, cancelled) = (
            summaries(JobState::Completed),
            summaries(JobState::Cancelled),
        );
        if !finished.is_empty() || !cancelled.is_empty() {
            fields.push(("cancelledChildJobs", Value::Array(cancelled)));
            fields.push(("finishedChildJobs", Value::Array(finished)));
        }
    }
}

/// Bedrock's name rule (§7.1): one part is a GLOB pattern, used as sent; several comma-separated parts are exact
/// names, so their GLOB characters are escaped.
fn name_patterns(name: &str) -> Vec<String> {
    let parts: Vec<&str> = name
        .split(',')
        .map(str::trim_start)
        .filter(|p| !p.is_empty())
        .collect();
    if parts.len() <= 1 {
        return vec![name.to_owned()];
    }
    parts
        .into_iter()
        // A part that no job can be named (too long, say) matches nothing, and is left out.
        .filter_map(|part| cairn::JobName::parse(part).ok())
        .map(|name| cairn::NamePattern::exact(&name).as_str().to_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_name_is_a_glob_and_a_list_is_exact_names() {
        assert_eq!(name_patterns("email.*"), ["email.*"]);
        assert_eq!(name_patterns("foo,"), ["foo,"]);
        assert_eq!(name_patterns("low, medium,high"), ["low", "medium", "high"]);
        assert_eq!(name_patterns("a*,b?,[c]"), ["a[*]", "b[?]", "[[]c]"]);
        let long = "x".repeat(300);
        assert!(name_patterns(&format!("{long},{long}")).is_empty());
    }
}
