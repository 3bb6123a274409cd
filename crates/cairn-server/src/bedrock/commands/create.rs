//! CreateJob and CreateJobs (reference §5.1, §5.2).

use cairn::Jobs;
use std::time::Duration;

use cairn::{Job, JobFilter, JobState, Push, Repeat, RetryPolicy, RunTimes};
use serde_json::{Value, json};

use crate::bedrock::commands::get::BEDROCK_LEASE;
use crate::bedrock::commands::values::{self, DEFAULT_PRIORITY, MAX_NAME, status};
use crate::bedrock::commands::{Answer, BedrockCommands};
use crate::bedrock::frame::{Headers, Response, json_object};

/// How often a job with a `retryAfter` is handed out before it fails (reference §7.6).
const RETRY_AFTER_LIMIT: u32 = 10;

/// The shortest and longest a `retryAfter` may give a worker: Bedrock workers never heartbeat, so jobs taken
/// through the protocol are leased for a day at most.
const RETRY_AFTER_RANGE: (Duration, Duration) = (Duration::from_secs(1), BEDROCK_LEASE);

const NO_PARENT: &str = "404 parentJobID does not exist";
const PARENT_STATE: &str =
    "405 Can only create child job when parent is RUNNING, RUNQUEUED or PAUSED";

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
        let data = early_checks(headers)?;
        let parent = self.parent_check(headers).await?;
        // A child is mocked exactly when its parent is: CreateJob aligns it without a word.
        let mocked = match &parent {
            Some(parent) => values::is_mocked(parent),
            None => values::is_mock_request(headers),
        };
        let data = values::new_job_data(data, mocked);
        // Unique creates are serialised, as Bedrock's are: the lookup and the write must not interleave with
        // another's, or two connections would both create the job.
        let _unique = if headers.get("unique") == Some("true") {
            let guard = self.unique.lock().await;
            if let Some(existing) = self.unique_match(name, mocked).await? {
                different_parent(&existing, headers)?;
                let update = self
                    .plan_unique(existing, data, parent, headers, mocked)
                    .await?;
                let id = update.id;
                self.apply_unique(update).await?;
                return Ok(Response::json(json_object(vec![("jobID", json!(id.0))])));
            }
            Some(guard)
        } else {
            None
        };
        let mut push = late_checks(headers, data, mocked)?;
        push.parent = self.parent_recheck(parent, mocked).await?;
        let enqueued = self.queue.enqueue(push).await.map_err(engine_error)?;
        Ok(Response::json(json_object(vec![(
            "jobID",
            json!(enqueued.id.0),
        )])))
    }

    /// CreateJobs: many jobs, all or none; answers `{"jobIDs": […]}` in input order. Whether its jobs are mocked
    /// is one setting for the whole request, as in Bedrock: its `mockRequest`, turned to the parent's by each job
    /// whose parent is mocked otherwise (so the last such job decides, and a job without a parent in the same
    /// request follows). A job whose parent is then mocked otherwise is refused.
    pub(super) async fn create_jobs(&self, headers: &Headers) -> Answer {
        let mut mocked = values::is_mock_request(headers);
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
        // Unique lookups and writes of the whole batch are serialised with other unique creates.
        let _unique = if each.iter().any(|job| job.get("unique") == Some("true")) {
            Some(self.unique.lock().await)
        } else {
            None
        };
        // Steps 2–6 for every job, then 7–10 (reference §5.2).
        let mut early = Vec::with_capacity(each.len());
        for job in &each {
            let data = early_checks(job)?;
            let parent = self.parent_check(job).await?;
            if let Some(parent) = &parent {
                mocked = values::is_mocked(parent);
            }
            // A unique job is looked for among jobs mocked as the request is so far, as Bedrock looks.
            let existing = if job.get("unique") == Some("true") {
                let name = job.get("name").unwrap_or("");
                let found = self.unique_match(name, mocked).await?;
                if let Some(existing) = &found {
                    different_parent(existing, job)?;
                }
                found
            } else {
                None
            };
            early.push((data, parent, existing));
        }
        // Every check of every job, in input order, before anything is written.
        let mut pushes = Vec::with_capacity(each.len());
        let mut updates = Vec::new();
        let mut ids: Vec<Option<i64>> = vec![None; each.len()];
        for (index, (job, (data, parent, existing))) in each.iter().zip(early).enumerate() {
            let data = values::new_job_data(data, mocked);
            match existing {
                // A job found again contributes its id, merged with the new data as a unique CreateJob does.
                Some(existing) => {
                    let update = self
                        .plan_unique(existing, data, parent, job, mocked)
                        .await?;
                    ids[index] = Some(update.id.0);
                    updates.push(update);
                }
                None => {
                    let mut push = late_checks(job, data, mocked)?;
                    push.parent = self.parent_recheck(parent, mocked).await?;
                    pushes.push(push);
                }
            }
        }
        // The new jobs first, all or none (the engine checks them again); then the merges.
        let enqueued = self
            .queue
            .enqueue_batch(pushes)
            .await
            .map_err(engine_error)?;
        for update in updates {
            self.apply_unique(update).await?;
        }
        let mut created = enqueued.iter().map(|e| e.id.0);
        let ids: Vec<i64> = ids
            .into_iter()
            .map(|id| id.or_else(|| created.next()).expect("one id per job"))
            .collect();
        Ok(Response::json(json_object(vec![("jobIDs", json!(ids))])))
    }

    /// CreateJob's step 5: a non-zero `parentJobID` names a job that is RUNNING, RUNQUEUED or PAUSED (Cairn:
    /// running, or waiting for its children).
    async fn parent_check(&self, headers: &Headers) -> Result<Option<Job>, Response> {
        let id = values::atoll(headers.get("parentjobid").unwrap_or("0"));
        if id == 0 {
            return Ok(None);
        }
        let parent = self
            .bedrock_job(cairn::JobId(id))
            .await
            .map_err(|_| status(NO_PARENT))?;
        if !matches!(parent.state, JobState::Running | JobState::Waiting) {
            return Err(status(PARENT_STATE));
        }
        Ok(Some(parent))
    }

    /// CreateJob's step 9: the parent is checked again, must be mocked exactly when the child is, and must not be
    /// a child itself.
    async fn parent_recheck(
        &self,
        parent: Option<Job>,
        mocked: bool,
    ) -> Result<Option<cairn::JobId>, Response> {
        let Some(parent) = parent else {
            return Ok(None);
        };
        let parent = self
            .bedrock_job(parent.id)
            .await
            .map_err(|_| status(NO_PARENT))?;
        if !matches!(parent.state, JobState::Running | JobState::Waiting) {
            return Err(status(PARENT_STATE));
        }
        if values::is_mocked(&parent) != mocked {
            return Err(status(
                "405 Parent and child jobs must have matching mockRequest setting",
            ));
        }
        if parent.parent.is_some() {
            return Err(status("405 Cannot create grandchildren"));
        }
        Ok(Some(parent.id))
    }

    /// The job a unique CreateJob finds: one with exactly this name (GLOB's characters in it match only
    /// themselves), mocked or not as the new one is, in any state Bedrock still has.
    async fn unique_match(&self, name: &str, mocked: bool) -> Result<Option<Job>, Response> {
        let name = cairn::JobName::parse(name).map_err(engine_error)?;
        let pattern = cairn::NamePattern::exact(&name);
        for state in [
            JobState::Running,
            JobState::Queued,
            JobState::Scheduled,
            JobState::Waiting,
            JobState::Failed,
            JobState::Cancelled,
        ] {
            let page = self
                .queue
                .list(JobFilter {
                    name: Some(pattern.as_str().to_owned()),
                    queue: Some(values::queue(mocked).to_owned()),
                    state: Some(state),
                    limit: 1,
                    ..JobFilter::default()
                })
                .await
                .map_err(engine_error)?;
            if let Some(job) = page.jobs.into_iter().next() {
                return Ok(Some(job));
            }
        }
        Ok(None)
    }

    /// A unique CreateJob that found `existing` (reference §5.1 steps 6 to 10): equal data changes nothing; other
    /// data is merged in (JSON Merge Patch) with the new repeat and priority, when `overwrite` allows it. Every
    /// check runs before anything is written; the writes are returned, to be applied with [`Self::apply_unique`].
    async fn plan_unique(
        &self,
        existing: Job,
        data: Value,
        parent: Option<Job>,
        headers: &Headers,
        mocked: bool,
    ) -> Result<UniqueUpdate, Response> {
        if existing.data == data {
            return Ok(UniqueUpdate::unchanged(existing));
        }
        // Mocked jobs never repeat.
        let repeat = match headers.get("repeat").filter(|r| !r.is_empty() && !mocked) {
            Some(text) => Repeat::parse(text)
                .map_err(|_| status("402 Malformed repeat"))?
                .as_str()
                .to_owned(),
            None => String::new(),
        };
        let priority = effective_priority(headers)?;
        self.parent_recheck(parent, mocked).await?;
        if !matches!(headers.get("overwrite"), None | Some("") | Some("true")) {
            return Ok(UniqueUpdate::unchanged(existing));
        }
        let mut merged = existing.data.clone();
        merge_patch(&mut merged, &data);
        let lease = match existing.state {
            JobState::Running => Some(self.lease_of(existing.id).await.ok_or_else(|| {
                status("405 This RUNNING job was taken outside the Bedrock protocol")
            })?),
            _ => None,
        };
        // Bedrock's quirk, kept: the new repeat replaces the old, and a missing one clears it.
        let schedule = (repeat != existing.schedule.clone().unwrap_or_default())
            .then(|| (!repeat.is_empty()).then_some(repeat));
        let priority = existing
            .state
            .is_live()
            .then(|| values::to_cairn_priority(priority));
        Ok(UniqueUpdate {
            id: existing.id,
            write: Some(UniqueWrite {
                data: merged,
                lease,
                schedule,
                priority,
            }),
        })
    }

    /// Applies what [`Self::plan_unique`] decided.
    async fn apply_unique(&self, update: UniqueUpdate) -> Result<(), Response> {
        let Some(write) = update.write else {
            return Ok(());
        };
        match &write.lease {
            Some(lease) => self.queue.checkpoint(lease, write.data).await.map(drop),
            None => self.queue.set_data(update.id, write.data).await,
        }
        .map_err(engine_error)?;
        if let Some(schedule) = write.schedule {
            self.queue
                .set_schedule(update.id, schedule.as_deref(), None)
                .await
                .map_err(engine_error)?;
        }
        if let Some(priority) = write.priority {
            self.queue
                .set_priority(update.id, priority)
                .await
                .map_err(engine_error)?;
        }
        Ok(())
    }
}

/// What a unique create that found a job does to it.
struct UniqueUpdate {
    id: cairn::JobId,
    write: Option<UniqueWrite>,
}

struct UniqueWrite {
    data: Value,
    /// The lease this layer holds, for a running job: its data is saved as a checkpoint.
    lease: Option<cairn::Lease>,
    /// A new repeat (`Some(None)` clears it), when it changes.
    schedule: Option<Option<String>>,
    /// The new priority, for a job that has not ended.
    priority: Option<i32>,
}

impl UniqueUpdate {
    fn unchanged(existing: Job) -> Self {
        UniqueUpdate {
            id: existing.id,
            write: None,
        }
    }
}

/// A unique create that finds a child of another parent (reference §5.1 step 6): Bedrock compares the parent ids
/// as text, an absent header counting as empty.
fn different_parent(existing: &Job, headers: &Headers) -> Result<(), Response> {
    if let Some(parent) = existing.parent
        && parent.0.to_string() != headers.get("parentjobid").unwrap_or("")
    {
        return Err(status(
            "404 Trying to create a child that already exists, but it is tied to a different parent",
        ));
    }
    Ok(())
}

/// A JSON value as a header would carry it: strings as they are, anything else as its JSON text.
fn header_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// CreateJob's checks between the name and the unique lookup (reference §5.1 steps 2–5); the job's data.
fn early_checks(headers: &Headers) -> Result<Value, Response> {
    if let Some(text) = headers.get("jobpriority") {
        values::priority(text)?;
    }
    let data = match headers.get("data") {
        None => json!({}),
        Some(text) => values::data_object(text)
            .ok_or_else(|| status("402 Data is not a valid JSON Object"))?,
    };
    retry_after(headers)?;
    Ok(data)
}

/// A job's `retryAfter` (reference §6.5): date modifiers, as Bedrock checks them (`+5 MINUTES`, or a list such
/// as `+1 HOUR, START OF DAY`), and how long they give a worker. Cairn makes it the job's timeout: an attempt that
/// has not ended by then loses the job, which is handed out again (Bedrock's RUNQUEUED). The span is measured once,
/// from the whole second the job is created in, as Bedrock applies modifiers to a time without milliseconds: so
/// `+2 SECONDS` is exactly two seconds, and `lastRun` and `nextRun` are that far apart. `START OF HOUR`, which
/// `repeat` takes but Bedrock's check of `retryAfter` does not, is refused.
fn retry_after(headers: &Headers) -> Result<Option<(String, Duration)>, Response> {
    let Some(text) = headers.get("retryafter").filter(|r| !r.is_empty()) else {
        return Ok(None);
    };
    let malformed = || status("402 Malformed retryAfter");
    if text.to_ascii_uppercase().contains("START OF HOUR") || text.len() > 100 {
        return Err(malformed());
    }
    let repeat = Repeat::parse(&format!("FINISHED, {text}")).map_err(|_| malformed())?;
    let now = jiff::Timestamp::from_second(jiff::Timestamp::now().as_second())
        .map_err(|_| malformed())?;
    let until = repeat
        .next_run(RunTimes {
            scheduled: now,
            started: Some(now),
            now,
        })
        .map_err(|_| malformed())?;
    let wait = Duration::try_from(until.duration_since(now)).unwrap_or(Duration::ZERO);
    Ok(Some((
        text.to_owned(),
        wait.clamp(RETRY_AFTER_RANGE.0, RETRY_AFTER_RANGE.1),
    )))
}

/// The effective priority: `jobPriority`, else `priority`, else 500.
fn effective_priority(headers: &Headers) -> Result<i64, Response> {
    match headers.get("jobpriority").or(headers.get("priority")) {
        Some(text) => values::priority(text),
        None => Ok(DEFAULT_PRIORITY),
    }
}

/// CreateJob's checks after the unique lookup (steps 7–8), and the job they describe.
fn late_checks(headers: &Headers, data: Value, mocked: bool) -> Result<Push, Response> {
    // Mocked jobs never repeat: their repeat is dropped before it is read, as Bedrock drops it.
    let repeat = match headers.get("repeat").filter(|r| !r.is_empty() && !mocked) {
        Some(text) => Some(
            Repeat::parse(text)
                .map_err(|_| status("402 Malformed repeat"))?
                .as_str()
                .to_owned(),
        ),
        None => None,
    };
    let priority = effective_priority(headers)?;
    let mut push = Push::new(headers.get("name").unwrap_or(""))
        .queue(values::queue(mocked))
        .data(data)
        .priority(values::to_cairn_priority(priority))
        // Bedrock never fails a job for its retries: RetryJob always says when to run again.
        .retry(RetryPolicy::immediate(u32::MAX))
        // Bedrock's children are the job's: a run whose retryAfter lapses leaves them for the run that finishes.
        .children(cairn::Children::OfTheJob);
    if let Some(first_run) = headers.get("firstrun").filter(|f| !f.is_empty()) {
        push = push.run_at(
            cairn::parse_first_run(first_run).map_err(|_| status("402 Malformed firstRun"))?,
        );
    }
    if let Some(repeat) = repeat {
        push = push.schedule(repeat);
    }
    if let Some((text, wait)) = retry_after(headers)? {
        // A `manual…` job's hand-outs are not counted, so it never fails for them.
        let limit = if values::is_manual(headers.get("name").unwrap_or("")) {
            u32::MAX
        } else {
            RETRY_AFTER_LIMIT
        };
        push = push
            .timeout(wait)
            .tag(format!("{}{text}", values::RETRY_AFTER_TAG))
            .retry(RetryPolicy::immediate(limit));
    }
    Ok(push)
}

/// RFC 7396 JSON Merge Patch: objects merge key by key, `null` removes a key, anything else replaces.
fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = json!({});
    }
    let target = target.as_object_mut().expect("made an object just above");
    for (key, value) in patch {
        if value.is_null() {
            target.shift_remove(key);
        } else {
            merge_patch(target.entry(key.clone()).or_insert(Value::Null), value);
        }
    }
}

/// An engine error where Bedrock has no check of its own: a name or data the engine refuses.
pub(super) fn engine_error(e: cairn::Error) -> Response {
    match e.kind() {
        cairn::ErrorKind::InvalidInput => status(&format!("402 {}", one_line(&e.to_string()))),
        cairn::ErrorKind::NotFound => status("404 No job with this jobID"),
        // Bedrock's clients send a command again, on another node if they have one, when it timed out before
        // committing (`555 Timeout…`) or met `500 Internal Server Error` (Bedrock-PHP's `Client::call`): the two
        // failures here that pass with time.
        cairn::ErrorKind::Unavailable | cairn::ErrorKind::Closed => {
            tracing::warn!(error = %e, "a Bedrock command could not reach the database");
            status("555 Timeout processing command")
        }
        cairn::ErrorKind::StorageFull => {
            tracing::error!(error = %e, "a Bedrock command found the disk full");
            status("500 Internal Server Error")
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_patch_follows_rfc_7396() {
        let mut target = json!({"a": "b", "c": {"d": "e", "f": "g"}, "keep": [1, 2]});
        merge_patch(
            &mut target,
            &json!({"a": "z", "c": {"f": null}, "keep": [3], "new": 1}),
        );
        assert_eq!(
            target,
            json!({"a": "z", "c": {"d": "e"}, "keep": [3], "new": 1})
        );
        let mut scalar = json!(1);
        merge_patch(&mut scalar, &json!({"a": 1}));
        assert_eq!(scalar, json!({"a": 1}));
    }
}
