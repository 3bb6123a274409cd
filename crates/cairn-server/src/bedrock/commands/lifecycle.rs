//! FinishJob, RetryJob and FailJob (reference §5.6–5.8): the end of a run, named by job id alone.

use cairn::Jobs;
use std::time::Duration;

use cairn::{Finish, Job, JobState, Lease, Retry};
use serde_json::Value;

use crate::bedrock::commands::create::engine_error;
use crate::bedrock::commands::values::{self, status};
use crate::bedrock::commands::{Answer, BedrockCommands};
use crate::bedrock::frame::{Headers, Response};

const NOT_RUNNING: &str = "405 Can only retry/finish RUNNING and RUNQUEUED jobs";
const NOT_RUNNING_FAIL: &str = "405 Can only fail RUNNING or RUNQUEUED jobs";

impl BedrockCommands {
    /// The job a lifecycle command names.
    async fn named(&self, headers: &Headers) -> Result<Job, Response> {
        self.bedrock_job(values::job_id(headers)?).await
    }

    /// The lease this layer holds on `job`, which must be running.
    async fn held(&self, job: &Job, not_running: &str) -> Result<Lease, Response> {
        if job.state != JobState::Running {
            return Err(status(not_running));
        }
        // A job taken through another door (the HTTP API) has a lease this layer does not hold.
        let lease = self
            .lease_of(job.id)
            .await
            .ok_or_else(|| status(not_running))?;
        // Fenced before anything is written: a lease that ran out (a retryAfter) is refused here, not after the
        // command deleted children or changed the job.
        self.queue
            .heartbeat(&lease, None)
            .await
            .map_err(|e| lease_error(e, not_running))?;
        Ok(lease)
    }

    /// FinishJob and RetryJob's steps 4 and 5 (reference §5.6): a child ends only while its parent is PAUSED (waits
    /// for its children); the job's FINISHED and CANCELLED children are the ones to delete, and the others are left.
    async fn child_checks(&self, job: &Job) -> Result<(Vec<Job>, Vec<Job>), Response> {
        if let Some(parent) = job.parent {
            let paused =
                matches!(self.queue.get(parent).await, Ok(p) if p.state == JobState::Waiting);
            if !paused {
                return Err(status(
                    "405 Can only retry/finish child job when parent is PAUSED",
                ));
            }
        }
        Ok(self
            .children(job.id)
            .await?
            .into_iter()
            .partition(|c| matches!(c.state, JobState::Completed | JobState::Cancelled)))
    }

    /// Deletes the children a parent's FinishJob or RetryJob is done with.
    async fn delete_children(&self, done: Vec<Job>) -> Result<(), Response> {
        for child in done {
            match self.queue.delete(child.id).await {
                Ok(()) => {}
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(engine_error(e)),
            }
        }
        Ok(())
    }

    /// FinishJob: done; a repeating job is scheduled again unless `data.delete` or `ignoreRepeat` says it ends.
    /// A parent whose children are still live waits for them (PAUSED), and the children it created start.
    pub(super) async fn finish_job(&self, headers: &Headers) -> Answer {
        let job = self.named(headers).await?;
        if values::is_mocked(&job) && job.state != JobState::Running {
            return self.finish_mocked(job, headers).await;
        }
        let lease = self.held(&job, NOT_RUNNING).await?;
        let (done, left) = self.child_checks(&job).await?;
        let data = new_data(&job, headers)?;
        let ends =
            values::is_true(headers.get("ignorerepeat")) || data.as_ref().is_some_and(deletes);
        // Bedrock deletes a standalone job that ends, which a FAILED child it still has forbids.
        let pending = left.iter().any(|c| c.state.is_live());
        if job.parent.is_none() && (job.schedule.is_none() || ends) && !pending && !left.is_empty()
        {
            return Err(status(
                "405 Failed to delete a job with outstanding children",
            ));
        }
        self.delete_children(done).await?;
        if ends && job.schedule.is_some() {
            // The job ends here instead of recurring: without a schedule, finishing completes it.
            self.queue
                .set_schedule(job.id, None, None)
                .await
                .map_err(engine_error)?;
        }
        self.queue
            .finish_with(Finish {
                data,
                ..Finish::new(&lease)
            })
            .await
            .map_err(|e| lease_error(e, NOT_RUNNING))?;
        self.forget(job.id);
        Ok(Response::status("200 OK"))
    }

    /// RetryJob: run again at the repeat's next time, at `nextRun`, or after `delay` seconds, in that order.
    pub(super) async fn retry_job(&self, headers: &Headers) -> Answer {
        let job = self.named(headers).await?;
        if values::is_mocked(&job) && job.state != JobState::Running {
            return self.retry_mocked(job, headers).await;
        }
        let lease = self.held(&job, NOT_RUNNING).await?;
        let (done, _) = self.child_checks(&job).await?;
        let data = new_data(&job, headers)?;
        let plan = self.retry_plan(&job, headers)?;
        self.delete_children(done).await?;
        // Name and priority change while the job still runs, so that nobody can take it under the old ones.
        self.rename_and_prioritise(&job, &plan).await?;
        if let Some(data) = data {
            self.queue
                .checkpoint(&lease, data)
                .await
                .map_err(|e| lease_error(e, NOT_RUNNING))?;
        }
        match plan.run_at {
            // The repeat decides: finishing the run schedules the next one.
            None => self.queue.finish(&lease, None).await.map(drop),
            // A job with a retryAfter starts counting its hand-outs afresh (Bedrock removes retryAfterCount).
            Some(at) if values::retry_after(&job).is_some() => {
                self.queue.requeue(job.id, Some(at)).await.map(drop)
            }
            Some(at) => self
                .queue
                .retry_with(Retry {
                    run_at: Some(at),
                    ..Retry::new(&lease, "retried by RetryJob")
                })
                .await
                .map(drop),
        }
        .map_err(|e| lease_error(e, NOT_RUNNING))?;
        self.forget(job.id);
        Ok(Response::status("200 OK"))
    }

    /// RetryJob on a mocked job that does not run, which Bedrock allows in any state (reference §10): a job on
    /// its own moves to its next run. A mocked child, a parent with children left or a repeating job would need a
    /// run to end (a repeat schedules the next run when one ends), and is refused as an unmocked one is.
    async fn retry_mocked(&self, job: Job, headers: &Headers) -> Answer {
        let (done, left) = self.child_checks(&job).await?;
        let data = new_data(&job, headers)?;
        let plan = self.retry_plan(&job, headers)?;
        let Some(at) = plan.run_at else {
            return Err(status(NOT_RUNNING));
        };
        if job.parent.is_some() || !left.is_empty() {
            return Err(status(NOT_RUNNING));
        }
        self.delete_children(done).await?;
        self.rename_and_prioritise(&job, &plan).await?;
        if let Some(data) = data {
            self.queue
                .set_data(job.id, data)
                .await
                .map_err(engine_error)?;
        }
        self.queue
            .requeue(job.id, Some(at))
            .await
            .map_err(engine_error)?;
        self.forget(job.id);
        Ok(Response::status("200 OK"))
    }

    /// What a RetryJob asks for, checked before anything is written.
    fn retry_plan(&self, job: &Job, headers: &Headers) -> Result<RetryPlan, Response> {
        let rename = headers
            .get("name")
            .filter(|name| !name.is_empty() && *name != job.name.as_str())
            .map(|name| {
                cairn::JobName::parse(name)
                    .map(|_| name.to_owned())
                    .map_err(engine_error)
            })
            .transpose()?;
        let priority = headers
            .get("jobpriority")
            .map(values::priority)
            .transpose()?;
        let repeats = job.schedule.is_some() && !values::is_true(headers.get("ignorerepeat"));
        let run_at = if repeats {
            None
        } else if let Some(next_run) = headers.get("nextrun").filter(|n| !n.is_empty()) {
            Some(cairn::parse_first_run(next_run).map_err(|_| status("402 Malformed nextRun"))?)
        } else {
            let delay = retry_delay(headers.get("delay").unwrap_or("0"))?;
            Some(self.queue.now() + delay)
        };
        Ok(RetryPlan {
            rename,
            priority,
            run_at,
        })
    }

    /// A RetryJob's new name and priority.
    async fn rename_and_prioritise(&self, job: &Job, plan: &RetryPlan) -> Result<(), Response> {
        if let Some(name) = &plan.rename {
            self.queue
                .rename(job.id, name)
                .await
                .map_err(engine_error)?;
        }
        if let Some(priority) = plan.priority {
            self.queue
                .set_priority(job.id, values::to_cairn_priority(priority))
                .await
                .map_err(engine_error)?;
        }
        Ok(())
    }

    /// FinishJob on a mocked job that does not run, which Bedrock allows in any state (reference §10): a job
    /// on its own, whose run would end it, is gone (Bedrock deletes it). A mocked child, a parent with children
    /// left or a repeating job would need a run to end, and is refused as an unmocked one is.
    async fn finish_mocked(&self, job: Job, headers: &Headers) -> Answer {
        let (done, left) = self.child_checks(&job).await?;
        let data = new_data(&job, headers)?;
        let ends =
            values::is_true(headers.get("ignorerepeat")) || data.as_ref().is_some_and(deletes);
        if job.parent.is_some() || !left.is_empty() || (job.schedule.is_some() && !ends) {
            return Err(status(NOT_RUNNING));
        }
        self.delete_children(done).await?;
        self.queue.delete(job.id).await.map_err(engine_error)?;
        self.forget(job.id);
        Ok(Response::status("200 OK"))
    }

    /// FailJob: failed for good.
    pub(super) async fn fail_job(&self, headers: &Headers) -> Answer {
        let job = self.named(headers).await?;
        let lease = self.held(&job, NOT_RUNNING_FAIL).await?;
        // FailJob stores data as it comes (Bedrock checks mocked-ness only when a job finishes or is retried).
        if let Some(data) = data_header(headers)? {
            self.queue
                .checkpoint(&lease, data)
                .await
                .map_err(|e| lease_error(e, NOT_RUNNING_FAIL))?;
        }
        self.queue
            .fail(&lease, "bedrock", "failed by FailJob")
            .await
            .map_err(|e| lease_error(e, NOT_RUNNING_FAIL))?;
        self.forget(job.id);
        Ok(Response::status("200 OK"))
    }
}

/// What a RetryJob asks for.
struct RetryPlan {
    /// A new name.
    rename: Option<String>,
    /// A new (Bedrock) priority.
    priority: Option<i64>,
    /// When the job runs again: at `nextRun` as sent, or `delay` seconds from now; `None` when its repeat decides
    /// (finishing the run schedules the next one).
    run_at: Option<jiff::Timestamp>,
}

/// A non-empty `data` header, which must be JSON here (Bedrock stores any text; Cairn stores JSON), and must be
/// mocked exactly when the job is (`500 Mock Mismatch`: Bedrock cannot tell whom to trust).
fn new_data(job: &Job, headers: &Headers) -> Result<Option<Value>, Response> {
    let data = data_header(headers)?;
    if let Some(data) = &data
        && values::says_mocked(data) != values::is_mocked(job)
    {
        return Err(status("500 Mock Mismatch"));
    }
    Ok(data)
}

/// A non-empty `data` header as JSON. A `retryAfterCount` the worker sends back is dropped, as Bedrock drops it:
/// the count is the engine's.
fn data_header(headers: &Headers) -> Result<Option<Value>, Response> {
    let Some(text) = headers.get("data").filter(|d| !d.is_empty()) else {
        return Ok(None);
    };
    let mut data: Value = serde_json::from_str(text).map_err(|_| status("402 Malformed data"))?;
    if let Value::Object(map) = &mut data {
        map.shift_remove("retryAfterCount");
    }
    Ok(Some(data))
}

/// Whether FinishJob's data ends a repeating job: `"delete": true` (or `"true"`).
fn deletes(data: &Value) -> bool {
    matches!(data.get("delete"), Some(Value::Bool(true)))
        || data.get("delete").and_then(Value::as_str) == Some("true")
}

/// RetryJob's `delay`, in seconds: at most 8 digits, not negative.
fn retry_delay(text: &str) -> Result<Duration, Response> {
    let digits = text.trim_start().trim_start_matches(['-', '+']);
    if digits.bytes().take_while(u8::is_ascii_digit).count() > 8 {
        return Err(status("402 Malformed delay"));
    }
    let seconds = values::atoll(text);
    if seconds < 0 {
        return Err(status(
            "402 Must specify a non-negative delay when retrying",
        ));
    }
    Ok(Duration::from_secs(seconds.unsigned_abs()))
}

/// A refusal under the lease: the lease ran out (a day after the GetJob) or the job was taken away.
fn lease_error(e: cairn::Error, not_running: &str) -> Response {
    if e.is_lease_lost() {
        status(not_running)
    } else {
        engine_error(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_are_whole_seconds_up_to_eight_digits_and_never_negative() {
        assert_eq!(retry_delay("0").unwrap(), Duration::ZERO);
        assert_eq!(retry_delay("90").unwrap(), Duration::from_secs(90));
        assert_eq!(
            retry_delay("99999999").unwrap(),
            Duration::from_secs(99_999_999)
        );
        assert_eq!(
            retry_delay("100000000").unwrap_err().status,
            "402 Malformed delay"
        );
        assert_eq!(
            retry_delay("-5").unwrap_err().status,
            "402 Must specify a non-negative delay when retrying"
        );
    }
}
