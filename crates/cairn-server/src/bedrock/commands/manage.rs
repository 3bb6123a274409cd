//! QueryJob, UpdateJob, DeleteJob, CancelJob and RequeueJobs (reference §5.4, §5.5, §5.9–5.11).

use cairn::Jobs;
use cairn::{Job, JobFilter, JobId, JobState, Repeat, RunTimes};
use serde_json::json;

use crate::bedrock::commands::create::engine_error;
use crate::bedrock::commands::values::{self, MAX_DATA, status};
use crate::bedrock::commands::{Answer, BedrockCommands};
use crate::bedrock::frame::{Headers, Response, json_object};

const NO_JOB: &str = "404 No job with this jobID";

impl BedrockCommands {
    /// The job as Bedrock sees it: a completed standalone job is one Bedrock would have deleted (a completed child
    /// is `FINISHED` until its parent's next FinishJob or RetryJob deletes it).
    pub(super) async fn bedrock_job(&self, id: JobId) -> Result<Job, Response> {
        match self.queue.get(id).await {
            Ok(job) if job.state != JobState::Completed || job.parent.is_some() => Ok(job),
            Ok(_) => Err(status(NO_JOB)),
            Err(e) if e.is_not_found() => Err(status(NO_JOB)),
            Err(e) => Err(engine_error(e)),
        }
    }

    /// QueryJob: the job's ten fields, `state` included.
    pub(super) async fn query_job(&self, headers: &Headers) -> Answer {
        let id = values::job_id(headers)?;
        let job = self.bedrock_job(id).await?;
        let mut fields = values::job_fields(&job, values::last_run(&job, false), job.attempt);
        let state = values::state_name(&job);
        if let ("RUNQUEUED", Some(expiry)) = (state, job.lease_expires_at) {
            // Handed out again when its retryAfter passes: that is when it is next due.
            for (name, value) in &mut fields {
                if *name == "nextRun" {
                    *value = json!(values::time_text(expiry));
                }
            }
        }
        fields.push(("state", json!(state)));
        Ok(Response::json(json_object(fields)))
    }

    /// UpdateJob: new data (replacing the old), and optionally a new repeat, priority or `nextRun`. Everything
    /// is checked and computed before anything is written, so a refused update changes nothing.
    pub(super) async fn update_job(&self, headers: &Headers) -> Answer {
        let id = values::job_id(headers)?;
        let text = headers.get("data").unwrap_or("");
        if text.is_empty() {
            return Err(status("402 Missing data"));
        }
        if text.len() > MAX_DATA {
            return Err(status("402 Malformed data"));
        }
        let repeat = match headers.get("repeat").filter(|r| !r.is_empty()) {
            Some(text) => Some(Repeat::parse(text).map_err(|_| status("402 Malformed repeat"))?),
            None => None,
        };
        let priority = headers
            .get("jobpriority")
            .map(values::priority)
            .transpose()?;
        let job = self.bedrock_job(id).await?;
        let clear_repeat = values::atoll(headers.get("shouldclearrepeat").unwrap_or("0")) != 0;
        // Bedrock stores invalid JSON as `{}` without a word; Cairn says so instead.
        let data = serde_json::from_str(text).map_err(|_| status("402 Malformed data"))?;
        // The data cannot change whether the job is mocked.
        let data = values::kept_mocked_as(data, values::is_mocked(&job));
        // The running job's data is its worker's: it is saved as a checkpoint under the lease held here.
        let lease = match job.state {
            JobState::Running => Some(self.lease_of(id).await.ok_or_else(|| {
                status("405 This RUNNING job was taken outside the Bedrock protocol")
            })?),
            _ => None,
        };
        // Without a nextRun, a new repeat sets it: from the job's due time (SCHEDULED) and last start (STARTED).
        let next_run = match (headers.get("nextrun").filter(|n| !n.is_empty()), &repeat) {
            (Some(text), _) => {
                Some(cairn::parse_first_run(text).map_err(|_| status("402 Malformed nextRun"))?)
            }
            (None, Some(repeat)) if !clear_repeat => {
                let runs = RunTimes {
                    scheduled: job.run_at,
                    started: job.history.last().map(|a| a.started_at),
                    now: jiff::Timestamp::now(),
                };
                Some(
                    repeat
                        .next_run(runs)
                        .map_err(|_| status("400 Unique Constraints Violation"))?,
                )
            }
            _ => None,
        };

        match lease {
            Some(lease) => self.queue.checkpoint(&lease, data).await.map(drop),
            None => self.queue.set_data(id, data).await,
        }
        .map_err(engine_error)?;
        if clear_repeat {
            self.queue
                .set_schedule(id, None, None)
                .await
                .map_err(engine_error)?;
        } else if let Some(repeat) = &repeat {
            self.queue
                .set_schedule(id, Some(repeat.as_str()), None)
                .await
                .map_err(engine_error)?;
        }
        // A running job's next run is decided when it ends; only a waiting job moves now.
        if let Some(at) = next_run
            && matches!(job.state, JobState::Scheduled | JobState::Queued)
        {
            self.queue.reschedule(id, at).await.map_err(engine_error)?;
        }
        if let Some(priority) = priority
            && job.state.is_live()
        {
            self.queue
                .set_priority(id, values::to_cairn_priority(priority))
                .await
                .map_err(engine_error)?;
        }
        Ok(Response::status("200 OK"))
    }

    /// DeleteJob: gone, unless it runs or waits for its children.
    pub(super) async fn delete_job(&self, headers: &Headers) -> Answer {
        let id = values::job_id(headers)?;
        let job = self.bedrock_job(id).await?;
        match values::state_name(&job) {
            "RUNNING" => return Err(status("405 Can't delete a RUNNING job")),
            "PAUSED" => {
                return Err(status(
                    "405 Can't delete a parent jobs with children running",
                ));
            }
            _ => {}
        }
        self.queue.delete(id).await.map_err(engine_error)?;
        self.forget(id);
        Ok(Response::status("200 OK"))
    }

    /// CancelJob: only a child job without children of its own can be cancelled; one that runs (not RUNQUEUED),
    /// waits or finished is left as it is. The engine then runs the parent again if no child of it is left live.
    pub(super) async fn cancel_job(&self, headers: &Headers) -> Answer {
        let id = values::job_id(headers)?;
        let job = self.bedrock_job(id).await?;
        if !self.children(id).await?.is_empty() {
            return Err(status(
                "404 Invalid jobID - Cannot cancel a job with children",
            ));
        }
        if job.parent.is_none() {
            return Err(status(
                "404 Invalid jobID - Cannot cancel a job without a parent",
            ));
        }
        if matches!(values::state_name(&job), "FINISHED" | "RUNNING" | "PAUSED") {
            return Ok(Response::status("200 OK"));
        }
        self.queue.cancel(id).await.map_err(engine_error)?;
        self.forget(id);
        if let Some(parent) = job.parent {
            self.requeue_running_parent(parent).await?;
        }
        Ok(Response::status("200 OK"))
    }

    /// After a child is cancelled: Bedrock queues its parent once no child is queued or running, whatever the
    /// parent's state. For a parent running now (taken again after its children ended, one of them failed), that
    /// sends it back, so that its next hand-out lists the child as cancelled; the worker that had it is refused its
    /// FinishJob, as in Bedrock. A parent that waits is queued by the engine itself.
    async fn requeue_running_parent(&self, parent: JobId) -> Result<(), Response> {
        let Ok(job) = self.queue.get(parent).await else {
            return Ok(());
        };
        if job.state != cairn::JobState::Running {
            return Ok(());
        }
        // A parent taken over HTTP has a lease this layer does not hold: it is left to its worker.
        let Some(lease) = self.lease_of(parent).await else {
            return Ok(());
        };
        let busy = self.children(parent).await?.iter().any(|child| {
            matches!(
                values::state_name(child),
                "QUEUED" | "RUNQUEUED" | "RUNNING"
            )
        });
        if busy {
            return Ok(());
        }
        match self.queue.release(&lease).await {
            Ok(()) => {}
            Err(e) if e.is_lease_lost() || e.is_not_found() => {}
            Err(e) => return Err(engine_error(e)),
        }
        self.forget(parent);
        Ok(())
    }

    /// A job's children, as Bedrock has them (every state).
    pub(super) async fn children(&self, parent: JobId) -> Result<Vec<Job>, Response> {
        let mut children = Vec::new();
        let mut before = None;
        loop {
            let page = self
                .queue
                .list(JobFilter {
                    parent: Some(parent),
                    before,
                    limit: cairn::MAX_PAGE,
                    ..JobFilter::default()
                })
                .await
                .map_err(engine_error)?;
            children.extend(page.jobs);
            match page.next {
                Some(next) => before = Some(next),
                None => return Ok(children),
            }
        }
    }

    /// RequeueJobs: every listed job, whatever its state, is due again at once, with its creation time as its
    /// `nextRun` (so it goes before jobs of its priority that came due later); unknown ids are ignored.
    pub(super) async fn requeue_jobs(&self, headers: &Headers) -> Answer {
        let rename = match headers.get("name").filter(|n| !n.is_empty()) {
            Some(name) => Some(
                cairn::JobName::parse(name)
                    .map_err(engine_error)?
                    .as_str()
                    .to_owned(),
            ),
            None => None,
        };
        let ids = headers
            .get("jobids")
            .unwrap_or("")
            .split(',')
            .map(values::atoll)
            .filter(|id| *id > 0);
        for id in ids {
            // A completed job is one Bedrock deleted: an unknown id, ignored.
            let Ok(job) = self.bedrock_job(JobId(id)).await else {
                continue;
            };
            // `created` as Bedrock writes it: whole seconds.
            let created = job
                .created_at
                .round(
                    jiff::TimestampRound::new()
                        .smallest(jiff::Unit::Second)
                        .mode(jiff::RoundMode::Trunc),
                )
                .unwrap_or(job.created_at);
            match self.queue.requeue(JobId(id), Some(created)).await {
                Ok(_) => {
                    self.forget(JobId(id));
                    if let Some(name) = &rename
                        && let Err(e) = self.queue.rename(JobId(id), name).await
                    {
                        tracing::warn!(job = id, error = %e, "RequeueJobs could not rename a job");
                    }
                }
                Err(e) if e.is_not_found() => {}
                Err(e) => {
                    tracing::warn!(job = id, error = %e, "RequeueJobs could not requeue a job")
                }
            }
        }
        Ok(Response::status("200 OK"))
    }
}
