//! [`Client`]: a Cairn server over HTTP, with the same methods, types and errors as the embedded
//! [`cairn::Queue`], and a [`cairn::Backend`] so that a [`cairn::Worker`] runs against it unchanged.

use std::time::Duration;

use cairn::{
    ActivityFilter, ChangeDependencies, ChangeTags, ClaimedJob, ConfigEntry, ConfigKey,
    ConfigValue, Dequeue, Enqueued, Error, ErrorKind, Fail, FailureGroup, Finish, FinishAndTake,
    Job, JobFilter, JobId, JobPage, JobState, Lease, Push, QueueName, QueueStats, Recurring,
    RecurringInfo, Requeue, Reschedule, Result, Retry, SetData, SetPriority, StatsPeriod,
    StatsQuery, Unfail, WorkerInfo,
};
use jiff::Timestamp;
use reqwest::{Method, StatusCode};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use cairn::{ActivityPage, SqlQuery, SqlResult, Stats, WorkerStats};
use cairn_api::{
    ActivityPageBody, ClaimedJobBody, ConfigEntryBody, ConfigListBody, ContinueBody, DequeueBody,
    DequeueRequest, EnqueuedBatchBody, EnqueuedBody, ErrorBody, FailureGroupListBody, FinishItem,
    FinishManyBody, FinishManyRequest, FinishResult, HealthBody, JobBody, JobPageBody, PeekBody,
    PushBatchRequest, PushRequest, QueueListBody, RecurringBody, RecurringListBody,
    RecurringRequest, StatsBody, UsageBody, WorkerBody, WorkerListBody, WorkerStatsBody,
};
use cairn_api::{Jobs, Method as RouteMethod, Route, SqlBody, SqlRequest};

/// How long an ordinary call may take before the client gives up on it.
const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// The margin a long poll gets beyond its wait, for the server's answer to travel.
const LONG_POLL_MARGIN: Duration = Duration::from_secs(30);

/// A connection to a Cairn server. Cheap to clone; clones share one connection pool.
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the token.
        f.debug_struct("Client").field("base", &self.base).finish()
    }
}

impl Client {
    /// A client for the server at `url`, such as `http://127.0.0.1:6670`.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] (field `server`) when `url` is not an `http://` URL.
    pub fn new(url: &str) -> Result<Client> {
        let base = url.trim_end_matches('/');
        let rest = base.strip_prefix("http://").ok_or_else(|| {
            Error::from_parts(
                ErrorKind::InvalidInput,
                Some("server".into()),
                format!(
                    "server: must be an http:// URL such as http://127.0.0.1:6670, got {url:?}"
                ),
            )
        })?;
        if rest.is_empty() || rest.contains(['?', '#']) {
            return Err(Error::from_parts(
                ErrorKind::InvalidInput,
                Some("server".into()),
                format!("server: must be an http:// URL with a host and no query, got {url:?}"),
            ));
        }
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .tcp_nodelay(true)
            // Cairn's servers are addressed directly; a proxy would break long polls.
            .no_proxy()
            .build()
            .map_err(|e| {
                Error::with_source(ErrorKind::Unavailable, "building the HTTP client", e)
            })?;
        Ok(Client {
            http,
            base: base.to_owned(),
            token: None,
        })
    }

    /// Sends `token` as a bearer token with every request (the server's `--token`).
    pub fn with_token(mut self, token: impl Into<String>) -> Client {
        self.token = Some(token.into());
        self
    }

    /// The server's URL.
    pub fn url(&self) -> &str {
        &self.base
    }

    async fn call<B: Serialize, T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&B>,
        timeout: Duration,
    ) -> Result<T> {
        let url = format!("{}{path}", self.base);
        let mut request = self.http.request(method, &url).timeout(timeout);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            let bytes = serde_json::to_vec(body).map_err(|e| {
                Error::with_source(ErrorKind::InvalidInput, "encoding the request body", e)
            })?;
            request = request
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(bytes);
        }
        let response = request
            .send()
            .await
            .map_err(|e| unreachable_server(&url, e))?;
        let status = response.status();
        let bytes = response
            .bytes()
            .await
            .map_err(|e| unreachable_server(&url, e))?;
        if status.is_success() {
            return serde_json::from_slice(&bytes).map_err(|e| {
                Error::with_source(
                    ErrorKind::Unavailable,
                    format!("{url} answered {status} with a body that is not Cairn's"),
                    e,
                )
            });
        }
        Err(refusal(&url, status, &bytes))
    }

    /// Runs a request declared as a [`Route`]: one call, to the route's path with its body. Also
    /// [`Jobs::run`], so code written against [`Jobs`] runs on a server or embedded alike.
    ///
    /// # Errors
    /// As the embedded queue, plus [`ErrorKind::Unavailable`] and [`ErrorKind::Unauthorized`].
    pub async fn run<R: Route>(&self, request: R) -> Result<R::Output> {
        let method = match R::METHOD {
            RouteMethod::Post => Method::POST,
            RouteMethod::Put => Method::PUT,
            RouteMethod::Delete => Method::DELETE,
        };
        let body = R::BODY.then(|| request.body());
        let answer: R::Answer = self
            .call(method, &request.path()?, body.as_ref(), CALL_TIMEOUT)
            .await?;
        R::output(answer)
    }

    async fn post<B: Serialize, T: DeserializeOwned>(&self, path: &str, body: &B) -> Result<T> {
        self.call(Method::POST, path, Some(body), CALL_TIMEOUT)
            .await
    }

    /// Checks that the server is up.
    ///
    /// # Errors
    /// [`ErrorKind::Unavailable`] when it cannot be reached.
    pub async fn health(&self) -> Result<HealthBody> {
        self.call::<(), _>(Method::GET, "/v1/health", None, CALL_TIMEOUT)
            .await
    }

    /// Enqueues one job; see [`cairn::Queue::enqueue`].
    ///
    /// # Errors
    /// As the embedded queue, plus [`ErrorKind::Unavailable`] and [`ErrorKind::Unauthorized`].
    pub async fn enqueue(&self, push: Push) -> Result<Enqueued> {
        self.enqueue_request(&PushRequest::from(&push))
            .await?
            .to_enqueued()
    }

    /// Enqueues a job given in its wire form.
    ///
    /// # Errors
    /// As [`Client::enqueue`].
    pub async fn enqueue_request(&self, push: &PushRequest) -> Result<EnqueuedBody> {
        self.post("/v1/jobs", push).await
    }

    /// Enqueues many jobs in one transaction; see [`cairn::Queue::enqueue_batch`].
    ///
    /// # Errors
    /// As [`Client::enqueue`].
    pub async fn enqueue_batch(&self, jobs: Vec<Push>) -> Result<Vec<Enqueued>> {
        let request = PushBatchRequest {
            jobs: jobs.iter().map(PushRequest::from).collect(),
        };
        let body: EnqueuedBatchBody = self.post("/v1/jobs/batch", &request).await?;
        body.jobs.iter().map(EnqueuedBody::to_enqueued).collect()
    }

    /// Runs one action over many jobs; see [`cairn::Queue::bulk`]. The request lasts as long as the action, a
    /// chunk of jobs per transaction: up to ten minutes here.
    ///
    /// # Errors
    /// As the embedded queue, plus [`ErrorKind::Unavailable`] and [`ErrorKind::Unauthorized`].
    pub async fn bulk(
        &self,
        action: cairn::BulkAction,
        selection: cairn::BulkSelection,
    ) -> Result<cairn::BulkOutcome> {
        let (action, queue) = match action {
            cairn::BulkAction::Move { queue } => ("move", Some(queue)),
            other => (other.as_str(), None),
        };
        let (ids, filter) = match selection {
            cairn::BulkSelection::Ids(ids) => (Some(ids.iter().map(|id| id.0).collect()), None),
            cairn::BulkSelection::Filter(f) => (
                None,
                Some(cairn_api::BulkFilterBody {
                    queue: f.queue,
                    state: f.state.map(|s| s.as_str().to_owned()),
                    name: f.name,
                    tag: f.tag,
                    failure_group: f.failure_group,
                    parent: f.parent.map(|p| p.0),
                    tracked: f.tracked,
                    batch: f.batch.map(|b| b.0),
                }),
            ),
        };
        let request = cairn_api::BulkRequest {
            action: action.to_owned(),
            queue,
            ids,
            filter,
        };
        let body: cairn_api::BulkBody = self
            .call(
                Method::POST,
                "/v1/jobs/bulk",
                Some(&request),
                Duration::from_secs(600),
            )
            .await?;
        Ok(cairn::BulkOutcome {
            matched: body.matched,
            done: body.done,
            skipped: body.skipped,
        })
    }

    /// Takes ready jobs, waiting (a long poll) as the request says; see [`cairn::Queue::dequeue`].
    ///
    /// # Errors
    /// As the embedded queue, plus [`ErrorKind::Unavailable`] and [`ErrorKind::Unauthorized`].
    pub async fn dequeue(&self, request: Dequeue) -> Result<Vec<ClaimedJob>> {
        let timeout = request
            .wait
            .min(cairn::MAX_WAIT)
            .saturating_add(LONG_POLL_MARGIN);
        let body: DequeueBody = self
            .call(
                Method::POST,
                "/v1/dequeue",
                Some(&DequeueRequest::from(&request)),
                timeout,
            )
            .await?;
        body.jobs.iter().map(claimed_job).collect()
    }

    /// Extends a lease; see [`cairn::Queue::heartbeat`].
    ///
    /// # Errors
    /// As the embedded queue.
    pub async fn heartbeat(&self, lease: &Lease, progress: Option<Value>) -> Result<Timestamp> {
        self.run(cairn::Heartbeat {
            progress,
            ..cairn::Heartbeat::new(lease)
        })
        .await
    }

    /// Saves what a retry starts from; see [`cairn::Queue::checkpoint`].
    ///
    /// # Errors
    /// As the embedded queue.
    pub async fn checkpoint(&self, lease: &Lease, data: Value) -> Result<Timestamp> {
        self.run(cairn::Checkpoint::new(lease, data)).await
    }

    /// Records progress; see [`cairn::Queue::update`].
    ///
    /// # Errors
    /// As the embedded queue.
    pub async fn update(&self, lease: &Lease, progress: Value) -> Result<()> {
        self.run(cairn::Update::new(lease, progress)).await
    }

    /// Completes the job; see [`cairn::Queue::finish`].
    ///
    /// # Errors
    /// As the embedded queue.
    pub async fn finish(&self, lease: &Lease, data: Option<Value>) -> Result<()> {
        self.finish_with(Finish {
            data,
            ..Finish::new(lease)
        })
        .await
    }

    /// Completes the job with every field of [`Finish`], or with [`Finish::next`] moves it on to its next queue;
    /// see [`cairn::Queue::finish_with`].
    ///
    /// # Errors
    /// As the embedded queue; an error about the next step names the field as the wire spells it
    /// (`next.delay_ms`, `next.depends_on`).
    pub async fn finish_with(&self, finish: Finish) -> Result<()> {
        self.run(finish).await
    }

    /// Completes many jobs in one request; see [`cairn::Queue::finish_many`]. Each job gets its own answer, in
    /// order.
    ///
    /// # Errors
    /// As the embedded queue for the request as a whole (more than [`cairn::MAX_FINISH_MANY`] jobs), plus
    /// [`ErrorKind::Unavailable`] and [`ErrorKind::Unauthorized`]; each job's own error is in its answer.
    pub async fn finish_many(&self, finishes: Vec<Finish>) -> Result<Vec<Result<()>>> {
        let request = FinishManyRequest {
            jobs: finish_items(finishes),
            take: None,
        };
        let body: FinishManyBody = self.post("/v1/finish", &request).await?;
        Ok(finish_answers(body.results))
    }

    /// Completes jobs and takes the next ones in one request; see [`cairn::Queue::finish_and_take`].
    ///
    /// # Errors
    /// A request refused whole (a bad field, of a finish or of `take`), or one that failed on the way: then
    /// nothing is known of the finishes, as with [`Client::finish_many`].
    pub async fn finish_and_take(
        &self,
        finishes: Vec<Finish>,
        take: Dequeue,
    ) -> Result<FinishAndTake> {
        let request = FinishManyRequest {
            jobs: finish_items(finishes),
            take: Some(DequeueRequest::from(&take)),
        };
        let body: FinishManyBody = self.post("/v1/finish", &request).await?;
        let taken = match body.take_error {
            Some(error) => Err(ErrorBody { error }.into_error()),
            None => body.jobs.iter().map(claimed_job).collect(),
        };
        Ok(FinishAndTake {
            finished: Ok(finish_answers(body.results)),
            taken,
        })
    }

    /// Retries the job later; see [`cairn::Queue::retry`].
    ///
    /// # Errors
    /// As the embedded queue.
    pub async fn retry(
        &self,
        lease: &Lease,
        error: &str,
        delay: Option<Duration>,
    ) -> Result<JobState> {
        self.retry_with(Retry {
            delay,
            ..Retry::new(lease, error)
        })
        .await
    }

    /// Retries with every field of [`Retry`]; see [`cairn::Queue::retry_with`].
    ///
    /// # Errors
    /// As the embedded queue.
    pub async fn retry_with(&self, retry: Retry) -> Result<JobState> {
        self.run(retry).await
    }

    /// Fails the job for good; see [`cairn::Queue::fail`].
    ///
    /// # Errors
    /// As the embedded queue.
    pub async fn fail(&self, lease: &Lease, group: &str, message: &str) -> Result<()> {
        self.fail_with(Fail::new(lease, group, message)).await
    }

    /// Fails with every field of [`Fail`]; see [`cairn::Queue::fail_with`].
    ///
    /// # Errors
    /// As the embedded queue.
    pub async fn fail_with(&self, fail: Fail) -> Result<()> {
        self.run(fail).await
    }

    /// Gives the job back unfinished; see [`cairn::Queue::release`].
    ///
    /// # Errors
    /// As the embedded queue.
    pub async fn release(&self, lease: &Lease) -> Result<()> {
        self.run(cairn::Release::new(lease)).await
    }

    /// Cancels a job; see [`cairn::Queue::cancel`].
    ///
    /// # Errors
    /// As the embedded queue.
    pub async fn cancel(&self, job: JobId) -> Result<()> {
        self.run(cairn::Cancel { job }).await
    }

    /// Deletes a job and its history; see [`cairn::Queue::delete`].
    ///
    /// # Errors
    /// As the embedded queue.
    pub async fn delete(&self, job: JobId) -> Result<()> {
        self.run(cairn::Delete { job }).await
    }

    /// Changes a job's priority; see [`cairn::Queue::set_priority`].
    ///
    /// # Errors
    /// As the embedded queue.
    pub async fn set_priority(&self, job: JobId, priority: i32) -> Result<()> {
        self.run(SetPriority { job, priority }).await
    }

    /// Moves a job that has not started; see [`cairn::Queue::reschedule`].
    ///
    /// # Errors
    /// As the embedded queue.
    pub async fn reschedule(&self, job: JobId, run_at: Timestamp) -> Result<JobState> {
        self.run(Reschedule { job, run_at }).await
    }

    /// Runs a job again with a fresh count of attempts; see [`cairn::Queue::requeue`].
    ///
    /// # Errors
    /// As the embedded queue.
    pub async fn requeue(&self, job: JobId, run_at: Option<Timestamp>) -> Result<JobState> {
        self.run(Requeue { job, run_at }).await
    }

    /// Adds and removes dependencies of a job that has not started; see [`cairn::Queue::change_dependencies`].
    ///
    /// # Errors
    /// As the embedded queue.
    pub async fn change_dependencies(&self, change: ChangeDependencies) -> Result<JobState> {
        self.run(change).await
    }

    /// Replaces the data of a job that is not running; see [`cairn::Queue::set_data`].
    ///
    /// # Errors
    /// As the embedded queue.
    pub async fn set_data(&self, job: JobId, data: Value) -> Result<()> {
        self.run(SetData { job, data }).await
    }

    /// Adds and removes a job's tags, whatever its state; see [`cairn::Queue::change_tags`].
    ///
    /// # Errors
    /// As the embedded queue.
    pub async fn change_tags(&self, change: ChangeTags) -> Result<()> {
        self.run(change).await
    }

    /// Tracks a job (listed by [`JobFilter::tracked`]), or stops tracking it; see [`cairn::Queue::track`].
    ///
    /// # Errors
    /// As the embedded queue.
    pub async fn track(&self, job: JobId, tracked: bool) -> Result<()> {
        match tracked {
            true => self.run(cairn::Track { job }).await,
            false => self.run(cairn::Untrack { job }).await,
        }
    }

    /// Every worker the server's queue remembers, with the jobs it holds and which of them stalled; see
    /// [`cairn::Queue::workers`].
    ///
    /// # Errors
    /// As the embedded queue, plus [`ErrorKind::Unavailable`] for an answer that does not hold valid workers.
    pub async fn workers(&self) -> Result<Vec<WorkerInfo>> {
        self.workers_body()
            .await?
            .workers
            .iter()
            .map(WorkerBody::to_worker)
            .collect()
    }

    /// The workers, in the wire form.
    ///
    /// # Errors
    /// As [`Client::workers`].
    pub async fn workers_body(&self) -> Result<WorkerListBody> {
        self.call::<(), _>(Method::GET, "/v1/workers", None, CALL_TIMEOUT)
            .await
    }

    /// Pauses a queue (it hands out nothing; everything else works) or resumes it; see
    /// [`cairn::Queue::pause_queue`].
    ///
    /// # Errors
    /// As the embedded queue.
    pub async fn pause_queue(&self, queue: &str, paused: bool) -> Result<()> {
        let queue = queue.to_owned();
        match paused {
            true => self.run(cairn::PauseQueue { queue }).await,
            false => self.run(cairn::ResumeQueue { queue }).await,
        }
    }

    /// Sets or removes a queue's concurrency limit; see [`cairn::Queue::limit_queue`].
    ///
    /// # Errors
    /// As the embedded queue.
    pub async fn limit_queue(&self, queue: &str, concurrency: Option<u32>) -> Result<()> {
        self.run(cairn::LimitQueue {
            queue: queue.to_owned(),
            concurrency,
        })
        .await
    }

    /// Sets or removes a queue's limit per concurrency key; see [`cairn::Queue::limit_keys`].
    ///
    /// # Errors
    /// As the embedded queue.
    pub async fn limit_keys(&self, queue: &str, limit: Option<u32>) -> Result<()> {
        self.run(cairn::LimitKeys {
            queue: queue.to_owned(),
            limit,
        })
        .await
    }

    /// Sets or removes a concurrency key's weight in a queue; see [`cairn::Queue::weigh_key`].
    ///
    /// # Errors
    /// As the embedded queue.
    pub async fn weigh_key(&self, queue: &str, key: &str, weight: Option<u32>) -> Result<()> {
        self.run(cairn::WeighKey {
            queue: queue.to_owned(),
            key: key.to_owned(),
            weight,
        })
        .await
    }

    /// Turns a queue's priority aging on or off; see [`cairn::Queue::age_queue`].
    ///
    /// # Errors
    /// As the embedded queue.
    pub async fn age_queue(&self, queue: &str, every: Option<Duration>) -> Result<()> {
        self.run(cairn::AgeQueue {
            queue: queue.to_owned(),
            every,
        })
        .await
    }

    /// Sets or removes a queue's rate limit; see [`cairn::Queue::rate_limit_queue`].
    ///
    /// # Errors
    /// As the embedded queue.
    pub async fn rate_limit_queue(
        &self,
        queue: &str,
        rate: Option<cairn::RateLimit>,
    ) -> Result<()> {
        self.run(cairn::RateLimitQueue {
            queue: queue.to_owned(),
            rate,
        })
        .await
    }

    /// Every queue that has jobs or settings, with its jobs counted by state; see [`cairn::Queue::queue_stats`].
    ///
    /// # Errors
    /// As the embedded queue.
    pub async fn queue_stats(&self) -> Result<Vec<QueueStats>> {
        Ok(self
            .queue_stats_body()
            .await?
            .queues
            .into_iter()
            .map(QueueStats::from)
            .collect())
    }

    /// Every queue with its counts, in the wire form.
    ///
    /// # Errors
    /// As [`Client::queue_stats`].
    pub async fn queue_stats_body(&self) -> Result<QueueListBody> {
        self.call::<(), _>(Method::GET, "/v1/queues", None, CALL_TIMEOUT)
            .await
    }

    /// The next `limit` jobs a worker taking from `queue` would get, without taking them; see
    /// [`cairn::Queue::peek`].
    ///
    /// # Errors
    /// As the embedded queue.
    pub async fn peek(&self, queue: &str, limit: u32) -> Result<Vec<Job>> {
        self.peek_body(queue, limit)
            .await?
            .jobs
            .iter()
            .map(JobBody::to_job)
            .collect()
    }

    /// The next jobs of a queue, in the wire form.
    ///
    /// # Errors
    /// As [`Client::peek`].
    pub async fn peek_body(&self, queue: &str, limit: u32) -> Result<PeekBody> {
        self.call::<(), _>(
            Method::GET,
            &format!("/v1/queues/{}/peek?limit={limit}", queue_segment(queue)?),
            None,
            CALL_TIMEOUT,
        )
        .await
    }

    /// The failure groups that hold failed jobs, with their counts; see [`cairn::Queue::failure_groups`].
    ///
    /// # Errors
    /// As the embedded queue.
    pub async fn failure_groups(&self) -> Result<Vec<FailureGroup>> {
        Ok(self
            .failure_groups_body()
            .await?
            .groups
            .into_iter()
            .map(FailureGroup::from)
            .collect())
    }

    /// The failure groups, in the wire form.
    ///
    /// # Errors
    /// As [`Client::failure_groups`].
    pub async fn failure_groups_body(&self) -> Result<FailureGroupListBody> {
        self.call::<(), _>(Method::GET, "/v1/failures", None, CALL_TIMEOUT)
            .await
    }

    /// Puts the oldest failed jobs of a failure group back in a queue; returns how many moved. See
    /// [`cairn::Queue::unfail`].
    ///
    /// # Errors
    /// As the embedded queue.
    pub async fn unfail(&self, unfail: Unfail) -> Result<u64> {
        self.run(unfail).await
    }

    /// Statistics over the last hour, day or week, in their wire form; see [`cairn::Queue::stats`].
    ///
    /// # Errors
    /// As the embedded queue.
    pub async fn stats_body(&self, query: &StatsQuery) -> Result<StatsBody> {
        let mut path = format!("/v1/stats?period={}", query.period.as_str());
        for (name, value) in [("queue", &query.queue), ("name", &query.name)] {
            if let Some(value) = value {
                path.push_str(&format!("&{name}={}", cairn_api::percent_encode(value)));
            }
        }
        self.call::<(), _>(Method::GET, &path, None, CALL_TIMEOUT)
            .await
    }

    /// Worker utilization, in its wire form; see [`cairn::Queue::worker_stats`].
    ///
    /// # Errors
    /// As the embedded queue.
    pub async fn worker_stats_body(&self, period: StatsPeriod) -> Result<WorkerStatsBody> {
        let path = format!("/v1/stats/workers?period={}", period.as_str());
        self.call::<(), _>(Method::GET, &path, None, CALL_TIMEOUT)
            .await
    }

    /// A page of the activity log, in its wire form; see [`cairn::Queue::activity`].
    ///
    /// # Errors
    /// As the embedded queue.
    pub async fn activity_body(&self, filter: &ActivityFilter) -> Result<ActivityPageBody> {
        let mut query = Vec::new();
        if let Some(job) = filter.job {
            query.push(format!("job={job}"));
        }
        for (name, value) in [("worker", &filter.worker), ("queue", &filter.queue)] {
            if let Some(value) = value {
                query.push(format!("{name}={}", cairn_api::percent_encode(value)));
            }
        }
        for (name, value) in [("since", filter.since), ("until", filter.until)] {
            if let Some(at) = value {
                query.push(format!(
                    "{name}={}",
                    cairn_api::percent_encode(&at.to_string())
                ));
            }
        }
        if let Some(before) = filter.before {
            query.push(format!("before={before}"));
        }
        if filter.limit > 0 {
            query.push(format!("limit={}", filter.limit));
        }
        let path = if query.is_empty() {
            "/v1/activity".to_owned()
        } else {
            format!("/v1/activity?{}", query.join("&"))
        };
        self.call::<(), _>(Method::GET, &path, None, CALL_TIMEOUT)
            .await
    }

    /// Statistics over the last hour, day or week; see [`cairn::Queue::stats`].
    ///
    /// # Errors
    /// As the embedded queue.
    pub async fn stats(&self, query: StatsQuery) -> Result<Stats> {
        self.stats_body(&query).await?.to_stats()
    }

    /// Worker utilization; see [`cairn::Queue::worker_stats`].
    ///
    /// # Errors
    /// As the embedded queue.
    pub async fn worker_stats(&self, period: StatsPeriod) -> Result<WorkerStats> {
        Ok(WorkerStats::from(&self.worker_stats_body(period).await?))
    }

    /// A page of the activity log; see [`cairn::Queue::activity`].
    ///
    /// # Errors
    /// As the embedded queue.
    pub async fn activity(&self, filter: ActivityFilter) -> Result<ActivityPage> {
        self.activity_body(&filter).await?.to_page()
    }

    /// Runs one read-only SQL statement; see [`cairn::Queue::sql`].
    ///
    /// # Errors
    /// As the embedded queue.
    pub async fn sql(&self, query: SqlQuery) -> Result<SqlResult> {
        Ok(self
            .sql_body(&SqlRequest::from(&query))
            .await?
            .into_result())
    }

    /// Runs one read-only SQL statement given in its wire form.
    ///
    /// # Errors
    /// As [`Client::sql`].
    pub async fn sql_body(&self, request: &SqlRequest) -> Result<SqlBody> {
        let timeout = request
            .timeout_ms
            .map_or(CALL_TIMEOUT, |ms| CALL_TIMEOUT + Duration::from_millis(ms));
        self.call(Method::POST, "/v1/sql", Some(request), timeout)
            .await
    }

    /// Says the worker stops; see [`cairn::Queue::worker_stopped`].
    ///
    /// # Errors
    /// As the embedded queue.
    pub async fn worker_stopped(&self, worker: &str) -> Result<()> {
        self.run(cairn::WorkerStopped {
            worker: worker.to_owned(),
        })
        .await
    }

    /// Every engine option that can change at run time; see [`cairn::Queue::config`].
    ///
    /// # Errors
    /// As the embedded queue.
    pub async fn config(&self) -> Result<Vec<ConfigEntry>> {
        self.config_body()
            .await?
            .config
            .iter()
            .map(ConfigEntryBody::to_entry)
            .collect()
    }

    /// Every engine option, in its wire form.
    ///
    /// # Errors
    /// As [`Client::config`].
    pub async fn config_body(&self) -> Result<ConfigListBody> {
        self.call::<(), _>(Method::GET, "/v1/config", None, CALL_TIMEOUT)
            .await
    }

    /// One engine option, in its wire form.
    ///
    /// # Errors
    /// As [`Client::config`], and `key` when there is no such option.
    pub async fn config_entry_body(&self, key: ConfigKey) -> Result<ConfigEntryBody> {
        self.call::<(), _>(
            Method::GET,
            &format!("/v1/config/{}", key.as_str()),
            None,
            CALL_TIMEOUT,
        )
        .await
    }

    /// Sets an engine option at run time; see [`cairn::Queue::set_config`].
    ///
    /// # Errors
    /// As the embedded queue.
    pub async fn set_config(&self, key: ConfigKey, value: ConfigValue) -> Result<ConfigEntry> {
        self.run(cairn::SetConfig { key, value }).await
    }

    /// Goes back to the server's default for an option; see [`cairn::Queue::unset_config`].
    ///
    /// # Errors
    /// As the embedded queue.
    pub async fn unset_config(&self, key: ConfigKey) -> Result<ConfigEntry> {
        self.run(cairn::UnsetConfig { key }).await
    }

    /// Creates or replaces a recurring template; see [`cairn::Queue::set_recurring`].
    ///
    /// # Errors
    /// As the embedded queue.
    pub async fn set_recurring(&self, recurring: Recurring) -> Result<RecurringInfo> {
        self.run(cairn::SetRecurring { recurring }).await
    }

    /// Creates or replaces the recurring template `key`, given in its wire form.
    ///
    /// # Errors
    /// As [`Client::set_recurring`].
    pub async fn set_recurring_request(
        &self,
        key: &str,
        request: &RecurringRequest,
    ) -> Result<RecurringBody> {
        self.call(
            Method::PUT,
            &format!("/v1/recurring/{}", cairn_api::percent_encode(key)),
            Some(request),
            CALL_TIMEOUT,
        )
        .await
    }

    /// Removes a recurring template; see [`cairn::Queue::remove_recurring`].
    ///
    /// # Errors
    /// As the embedded queue.
    pub async fn remove_recurring(&self, key: &str) -> Result<()> {
        self.run(cairn::RemoveRecurring {
            key: key.to_owned(),
        })
        .await
    }

    /// The recurring templates, by key; see [`cairn::Queue::recurring`].
    ///
    /// # Errors
    /// As the embedded queue.
    pub async fn recurring(&self) -> Result<Vec<RecurringInfo>> {
        Ok(self
            .recurring_body()
            .await?
            .recurring
            .into_iter()
            .map(RecurringInfo::from)
            .collect())
    }

    /// The recurring templates, in their wire form.
    ///
    /// # Errors
    /// As [`Client::recurring`].
    pub async fn recurring_body(&self) -> Result<RecurringListBody> {
        self.call::<(), _>(Method::GET, "/v1/recurring", None, CALL_TIMEOUT)
            .await
    }

    /// Creates a batch of jobs with callbacks; see [`cairn::Queue::create_batch`].
    ///
    /// # Errors
    /// As the embedded queue, plus [`ErrorKind::Unavailable`] and [`ErrorKind::Unauthorized`].
    pub async fn create_batch(&self, batch: cairn::CreateBatch) -> Result<cairn::BatchCreated> {
        cairn_api::Jobs::run(self, batch).await
    }

    /// A batch and its progress; see [`cairn::Queue::batch`].
    ///
    /// # Errors
    /// As the embedded queue.
    pub async fn batch(&self, id: cairn::BatchId) -> Result<cairn::Batch> {
        self.batch_body(id).await?.to_batch()
    }

    /// A batch, in its wire form.
    ///
    /// # Errors
    /// As [`Client::batch`].
    pub async fn batch_body(&self, id: cairn::BatchId) -> Result<cairn_api::BatchBody> {
        self.call::<(), _>(
            Method::GET,
            &format!("/v1/batches/{id}"),
            None,
            CALL_TIMEOUT,
        )
        .await
    }

    /// Batches, newest first; see [`cairn::Queue::batches`].
    ///
    /// # Errors
    /// As the embedded queue.
    pub async fn batches(&self, filter: cairn::BatchFilter) -> Result<Vec<cairn::Batch>> {
        self.batches_body(&filter)
            .await?
            .batches
            .iter()
            .map(cairn_api::BatchBody::to_batch)
            .collect()
    }

    /// A page of batches, in its wire form.
    ///
    /// # Errors
    /// As [`Client::batches`].
    pub async fn batches_body(
        &self,
        filter: &cairn::BatchFilter,
    ) -> Result<cairn_api::BatchListBody> {
        let mut query = vec![format!("limit={}", filter.limit)];
        if let Some(state) = filter.state {
            query.push(format!("state={}", state.as_str()));
        }
        if let Some(before) = filter.before {
            query.push(format!("before={before}"));
        }
        self.call::<(), _>(
            Method::GET,
            &format!("/v1/batches?{}", query.join("&")),
            None,
            CALL_TIMEOUT,
        )
        .await
    }

    /// A job with its history; see [`cairn::Queue::get`].
    ///
    /// # Errors
    /// As the embedded queue.
    pub async fn get(&self, job: JobId) -> Result<Job> {
        self.get_body(job).await?.to_job()
    }

    /// A job with its history, in its wire form.
    ///
    /// # Errors
    /// As [`Client::get`].
    pub async fn get_body(&self, job: JobId) -> Result<JobBody> {
        self.call::<(), _>(Method::GET, &format!("/v1/jobs/{job}"), None, CALL_TIMEOUT)
            .await
    }

    /// Waits until the job ends (completed, failed or cancelled), at most `timeout`, and returns it with its
    /// result or error; at the timeout, as it stands. See [`cairn::Queue::wait`].
    ///
    /// # Errors
    /// As [`Client::get`].
    pub async fn wait(&self, job: JobId, timeout: Duration) -> Result<Job> {
        self.wait_body(job, timeout).await?.to_job()
    }

    /// [`Client::wait`], the job in its wire form. The server caps one request's wait (60 s by default): a longer
    /// wait asks again until the job ends or `timeout` (at most [`cairn::MAX_WAIT`]) runs out.
    ///
    /// # Errors
    /// As [`Client::wait`].
    pub async fn wait_body(&self, job: JobId, timeout: Duration) -> Result<JobBody> {
        let deadline = tokio::time::Instant::now() + timeout.min(cairn::MAX_WAIT);
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let body: JobBody = self
                .call::<(), _>(
                    Method::GET,
                    &format!("/v1/jobs/{job}?wait_ms={}", left.as_millis()),
                    None,
                    left.saturating_add(LONG_POLL_MARGIN),
                )
                .await?;
            let ended = body
                .state
                .parse::<cairn::JobState>()
                .is_ok_and(|s| s.is_finished());
            if ended || tokio::time::Instant::now() >= deadline {
                return Ok(body);
            }
        }
    }

    /// A page of jobs; see [`cairn::Queue::list`].
    ///
    /// # Errors
    /// As the embedded queue.
    pub async fn list(&self, filter: JobFilter) -> Result<JobPage> {
        let body = self.list_body(&filter).await?;
        Ok(JobPage {
            jobs: body
                .jobs
                .iter()
                .map(JobBody::to_job)
                .collect::<Result<_>>()?,
            next: body.next.map(JobId),
        })
    }

    /// A page of jobs, in its wire form.
    ///
    /// # Errors
    /// As [`Client::list`].
    pub async fn list_body(&self, filter: &JobFilter) -> Result<JobPageBody> {
        let mut query = vec![format!("limit={}", filter.limit)];
        let mut add = |key: &str, value: Option<&str>| {
            if let Some(value) = value {
                query.push(format!("{key}={}", cairn_api::percent_encode(value)));
            }
        };
        add("queue", filter.queue.as_deref());
        add("state", filter.state.map(JobState::as_str));
        add("name", filter.name.as_deref());
        add("tag", filter.tag.as_deref());
        let before = filter.before.map(|b| b.0.to_string());
        add("before", before.as_deref());
        let parent = filter.parent.map(|p| p.0.to_string());
        add("parent", parent.as_deref());
        add("failure_group", filter.failure_group.as_deref());
        add("tracked", filter.tracked.then_some("true"));
        let batch = filter.batch.map(|b| b.0.to_string());
        add("batch", batch.as_deref());
        self.call::<(), _>(
            Method::GET,
            &format!("/v1/jobs?{}", query.join("&")),
            None,
            CALL_TIMEOUT,
        )
        .await
    }
}

/// A server's answer of `status` (not a success) to a request to `url`: its error body, or what the status says.
fn refusal(url: &str, status: StatusCode, bytes: &[u8]) -> Error {
    match serde_json::from_slice::<ErrorBody>(bytes) {
        Ok(body) => body.into_error(),
        Err(_) if status == StatusCode::UNAUTHORIZED => Error::from_parts(
            ErrorKind::Unauthorized,
            None,
            format!("{url} refused the request: {status}"),
        ),
        Err(_) => Error::from_parts(
            ErrorKind::Unavailable,
            None,
            format!("{url} answered {status}, not as a Cairn server"),
        ),
    }
}

fn unreachable_server(url: &str, e: reqwest::Error) -> Error {
    let what = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "could not connect"
    } else {
        "failed"
    };
    Error::with_source(ErrorKind::Unavailable, format!("{url}: {what}"), e)
}

/// A queue's name as a path segment: checked first, as the embedded queue does, since a path cannot carry every
/// name the engine would refuse (an empty one, say).
fn queue_segment(queue: &str) -> Result<String> {
    Ok(cairn_api::percent_encode(QueueName::parse(queue)?.as_str()))
}

cairn::impl_backend_by_inherent_methods!(Client);

/// A job a dequeue or a take claimed, from its body.
fn claimed_job(body: &ClaimedJobBody) -> Result<ClaimedJob> {
    Ok(ClaimedJob {
        job: body.job.to_job()?,
        lease: body.lease.to_lease()?,
    })
}

/// The finishes of a `POST /v1/finish`, as its body lists them.
fn finish_items(finishes: Vec<Finish>) -> Vec<FinishItem> {
    finishes
        .into_iter()
        .map(|finish| FinishItem {
            id: finish.job.0,
            token: finish.token.to_string(),
            result: finish.result,
            data: finish.data,
            usage: finish.usage.map(UsageBody::from),
            next: finish.next.as_ref().map(ContinueBody::from),
        })
        .collect()
}

/// Each finish's answer, in order.
fn finish_answers(results: Vec<FinishResult>) -> Vec<Result<()>> {
    results
        .into_iter()
        .map(|result| match result.error {
            None => Ok(()),
            Some(error) => Err(ErrorBody { error }.into_error()),
        })
        .collect()
}

impl Jobs for Client {
    fn run<R: Route>(
        &self,
        request: R,
    ) -> impl std::future::Future<Output = Result<R::Output>> + Send {
        Client::run(self, request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_refuses_what_is_not_an_http_url() {
        for bad in ["", "127.0.0.1:6670", "https://x", "http://", "http://h/?q"] {
            let e = Client::new(bad).unwrap_err();
            assert_eq!(e.field(), Some("server"), "{bad}");
        }
        assert_eq!(
            Client::new("http://127.0.0.1:6670/").unwrap().url(),
            "http://127.0.0.1:6670"
        );
    }

    #[test]
    fn query_values_are_percent_encoded() {
        assert_eq!(cairn_api::percent_encode("email.*"), "email.%2A");
        assert_eq!(cairn_api::percent_encode("a b&c"), "a%20b%26c");
    }
}

/// A subscription to a server's event stream (`GET /v1/events`); see [`Client::events`]. It reconnects by itself
/// when the connection drops, resuming after the last event it gave (`Last-Event-ID`), so that a consumer misses
/// nothing still retained.
#[derive(Debug)]
pub struct ClientEvents {
    client: Client,
    /// The path and query, without `after`.
    path: String,
    /// Where a new connection resumes: the last event given, or where the stream started.
    from: cairn::EventsFrom,
    /// The server's notice that the stream resumed past events the log no longer holds, until taken.
    missed: Option<cairn::EventsMissed>,
    response: Option<reqwest::Response>,
    /// Bytes received and not yet parsed into an event (an event may arrive split anywhere, within a character too).
    pending: Vec<u8>,
}

/// How long a connection may stay silent before it counts as broken: three of the server's keep-alive comments
/// (one every 15 s), so that a link that went silent is found and made again.
const SILENT_STREAM: Duration = Duration::from_secs(45);

/// The most bytes of one event the client holds before giving up on the stream (a server's event is a small JSON
/// object).
const MAX_EVENT_BYTES: usize = 1 << 20;

impl Client {
    /// Follows the server's event stream: each event the filter lets through, in the log's order, from the next
    /// one committed or after an id; see [`cairn::Queue::events`].
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] naming a bad filter field (from the server), [`ErrorKind::Unavailable`] when it
    /// cannot be reached.
    pub async fn events(
        &self,
        from: cairn::EventsFrom,
        filter: cairn::EventFilter,
    ) -> Result<ClientEvents> {
        let mut query = Vec::new();
        if let Some(queue) = &filter.queue {
            query.push(format!("queue={}", cairn_api::percent_encode(queue)));
        }
        if let Some(name) = &filter.name {
            query.push(format!("name={}", cairn_api::percent_encode(name)));
        }
        if let Some(job) = filter.job {
            query.push(format!("job={job}"));
        }
        if !filter.kinds.is_empty() {
            let kinds: Vec<&str> = filter.kinds.iter().map(|k| k.as_str()).collect();
            query.push(format!(
                "kinds={}",
                cairn_api::percent_encode(&kinds.join(","))
            ));
        }
        let path = if query.is_empty() {
            "/v1/events".to_owned()
        } else {
            format!("/v1/events?{}", query.join("&"))
        };
        // "Now" is where the log stands: so that a connection made again before any event resumes from there, not
        // from a later now.
        let from = match from {
            cairn::EventsFrom::Now => {
                let newest = self
                    .activity_body(&ActivityFilter {
                        limit: 1,
                        ..ActivityFilter::default()
                    })
                    .await?;
                cairn::EventsFrom::After(newest.events.first().map_or(0, |e| e.id))
            }
            from => from,
        };
        let mut events = ClientEvents {
            client: self.clone(),
            path,
            from,
            response: None,
            pending: Vec::new(),
            missed: None,
        };
        events.connect().await?;
        Ok(events)
    }
}

impl ClientEvents {
    /// The id of the last event given: where a new subscription would resume.
    pub fn position(&self) -> Option<i64> {
        match self.from {
            cairn::EventsFrom::After(id) => Some(id),
            cairn::EventsFrom::Now => None,
        }
    }

    async fn connect(&mut self) -> Result<()> {
        let url = format!("{}{}", self.client.base, self.path);
        // No timeout for the whole response: it does not end. Keep-alive comments come every 15 s.
        let mut request = self.client.http.get(&url);
        if let Some(token) = &self.client.token {
            request = request.bearer_auth(token);
        }
        if let cairn::EventsFrom::After(id) = self.from {
            request = request.header("Last-Event-ID", id.to_string());
        }
        let response = request
            .send()
            .await
            .map_err(|e| unreachable_server(&url, e))?;
        let status = response.status();
        if !status.is_success() {
            let bytes = response.bytes().await.unwrap_or_default();
            return Err(refusal(&url, status, &bytes));
        }
        self.pending.clear();
        self.response = Some(response);
        Ok(())
    }

    /// The next event, waiting as long as it takes. A dropped connection is made again (after a second, then
    /// longer, up to ten), resuming after the last event given.
    ///
    /// # Errors
    /// What the server refuses on a new connection (a bad filter, a refused token); an event it sends that this
    /// client cannot read.
    pub async fn next(&mut self) -> Result<cairn::ActivityEvent> {
        let mut backoff = Duration::from_secs(1);
        loop {
            if let Some(event) = self.parse_one()? {
                return Ok(event);
            }
            let chunk = match self.response.as_mut() {
                Some(response) => tokio::time::timeout(SILENT_STREAM, response.chunk())
                    .await
                    .unwrap_or(Ok(None)),
                None => Ok(None),
            };
            match chunk {
                Ok(Some(bytes)) => {
                    self.pending.extend_from_slice(&bytes);
                    if self.pending.len() > MAX_EVENT_BYTES {
                        // Not a stream of Cairn's events: the next call connects again.
                        self.pending.clear();
                        self.response = None;
                        return Err(Error::from_parts(
                            ErrorKind::Unavailable,
                            None,
                            "the event stream sent more than a megabyte without ending an event",
                        ));
                    }
                }
                // The stream ended (the server stopped), broke, or went silent: again, from the last event given.
                Ok(None) | Err(_) => {
                    self.response = None;
                    loop {
                        match self.connect().await {
                            Ok(()) => break,
                            Err(e) if e.kind() == ErrorKind::Unavailable => {
                                tracing::debug!(error = %e, "the event stream is down; connecting again");
                                tokio::time::sleep(backoff).await;
                                backoff = (backoff * 2).min(Duration::from_secs(10));
                            }
                            Err(e) => return Err(e),
                        }
                    }
                }
            }
        }
    }

    /// The server's notice, once, that the stream resumed past events the log no longer holds (pruned by its
    /// retention while this client was away): it went on from the oldest one kept.
    pub fn missed(&mut self) -> Option<cairn::EventsMissed> {
        self.missed.take()
    }

    /// Takes the first whole event out of what was received: its `data` line, as JSON (comments and other fields
    /// are skipped; the event's id is in its data). A `missed` notice is kept for [`ClientEvents::missed`].
    fn parse_one(&mut self) -> Result<Option<cairn::ActivityEvent>> {
        loop {
            let Some(end) = self.pending.windows(2).position(|w| w == b"\n\n") else {
                return Ok(None);
            };
            let bytes: Vec<u8> = self.pending.drain(..end + 2).collect();
            let block = String::from_utf8_lossy(&bytes);
            let data: Vec<&str> = block
                .lines()
                .filter_map(|line| line.strip_prefix("data:"))
                .map(|d| d.strip_prefix(' ').unwrap_or(d))
                .collect();
            if data.is_empty() {
                continue;
            }
            let name = block
                .lines()
                .find_map(|line| line.strip_prefix("event:").map(str::trim));
            let named = |wanted: &str| name == Some(wanted);
            if named("missed") {
                let notice: serde_json::Value =
                    serde_json::from_str(&data.join("\n")).unwrap_or_default();
                if let (Some(after), Some(oldest)) =
                    (notice["after"].as_i64(), notice["oldest"].as_i64())
                {
                    self.missed = Some(cairn::EventsMissed { after, oldest });
                }
                continue;
            }
            let body: cairn_api::ActivityEventBody = match serde_json::from_str(&data.join("\n")) {
                Ok(body) => body,
                // A named event this client does not know, whose data is no activity event (a newer server's
                // notice): passed over, its id (if any) kept as the place to resume from.
                Err(_) if name.is_some_and(|n| cairn::ActivityKind::parse(n).is_none()) => {
                    if let Some(id) = block
                        .lines()
                        .find_map(|line| line.strip_prefix("id:"))
                        .and_then(|id| id.trim().parse::<i64>().ok())
                    {
                        self.from = cairn::EventsFrom::After(id);
                    }
                    continue;
                }
                Err(e) => {
                    return Err(Error::with_source(
                        ErrorKind::Unavailable,
                        "the event stream sent an event that is not Cairn's",
                        e,
                    ));
                }
            };
            let event = body.to_event()?;
            self.from = cairn::EventsFrom::After(event.id);
            return Ok(Some(event));
        }
    }
}
