//! [`Client`]: a Cairn server over HTTP, with the same methods, types and errors as the embedded
//! [`cairn::Queue`], and a [`cairn::Backend`] so that a [`cairn::Worker`] runs against it unchanged.

use std::time::Duration;

use cairn::{
    ActivityFilter, ActivityPage, ChangeDependencies, ChangeTags, ClaimedJob, ConfigEntry,
    ConfigKey, ConfigValue, Dequeue, Enqueued, Error, ErrorKind, Fail, FailureGroup, Finish,
    FinishAndTake, FinishMany, Job, JobFilter, JobId, JobPage, JobState, Lease, Push, QueueStats,
    Recurring, RecurringInfo, Requeue, Reschedule, Result, Retry, SetData, SetPriority, SqlQuery,
    SqlResult, Stats, StatsPeriod, StatsQuery, Unfail, WorkerInfo, WorkerStats,
};
use jiff::Timestamp;
use reqwest::{Method, StatusCode};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use cairn_api::{ErrorBody, HealthBody, Jobs, Method as RouteMethod, Route};

/// How long an ordinary call may take before the client gives up on it.
const CALL_TIMEOUT: Duration = Duration::from_secs(60);

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

    /// Runs a request declared as a [`Route`]: one call, to the route's path with its body (a read's as its query
    /// string). Also [`Jobs::run`], so code written against [`Jobs`] runs on a server or embedded alike.
    ///
    /// # Errors
    /// As the embedded queue, plus [`ErrorKind::Unavailable`] and [`ErrorKind::Unauthorized`].
    pub async fn run<R: Route>(&self, request: R) -> Result<R::Output> {
        R::output(self.answer(request).await?)
    }

    /// Runs a request declared as a [`Route`] and gives its answer as the server sent it, the wire form (what the
    /// CLI prints).
    ///
    /// # Errors
    /// As [`Client::run`].
    pub async fn answer<R: Route>(&self, request: R) -> Result<R::Answer> {
        let mut path = request.path()?;
        let (method, body) = match R::METHOD {
            RouteMethod::Get => {
                if R::BODY {
                    path.push_str(&cairn_api::query_string(&request.body())?);
                }
                (Method::GET, None)
            }
            RouteMethod::Post => (Method::POST, R::BODY.then(|| request.body())),
            RouteMethod::Put => (Method::PUT, R::BODY.then(|| request.body())),
            RouteMethod::Delete => (Method::DELETE, R::BODY.then(|| request.body())),
        };
        // A request the server may hold (a long poll) gets that much longer.
        let timeout = CALL_TIMEOUT.saturating_add(request.waits());
        self.call(method, &path, body.as_ref(), timeout).await
    }

    /// Checks that the server is up.
    ///
    /// # Errors
    /// [`ErrorKind::Unavailable`] when it cannot be reached.
    pub async fn health(&self) -> Result<HealthBody> {
        self.answer(cairn::Health).await
    }

    /// Enqueues one job; see [`cairn::Queue::enqueue`].
    ///
    /// # Errors
    /// As the embedded queue, plus [`ErrorKind::Unavailable`] and [`ErrorKind::Unauthorized`].
    pub async fn enqueue(&self, push: Push) -> Result<Enqueued> {
        self.run(push).await
    }

    /// Enqueues many jobs in one transaction; see [`cairn::Queue::enqueue_batch`].
    ///
    /// # Errors
    /// As [`Client::enqueue`].
    pub async fn enqueue_batch(&self, jobs: Vec<Push>) -> Result<Vec<Enqueued>> {
        self.run(cairn::PushBatch { jobs }).await
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
        self.run(cairn::Bulk { action, selection }).await
    }

    /// Takes ready jobs, waiting (a long poll) as the request says; see [`cairn::Queue::dequeue`].
    ///
    /// # Errors
    /// As the embedded queue, plus [`ErrorKind::Unavailable`] and [`ErrorKind::Unauthorized`].
    pub async fn dequeue(&self, request: Dequeue) -> Result<Vec<ClaimedJob>> {
        self.run(request).await
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
        let done = self
            .run(FinishMany {
                finishes,
                take: None,
            })
            .await?;
        Ok(done
            .finished
            .into_iter()
            .map(|(_, answer)| answer)
            .collect())
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
        let done = self
            .run(FinishMany {
                finishes,
                take: Some(take),
            })
            .await?;
        Ok(FinishAndTake {
            finished: Ok(done
                .finished
                .into_iter()
                .map(|(_, answer)| answer)
                .collect()),
            taken: done.taken,
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
        self.run(cairn::ListWorkers).await
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
        self.run(cairn::ListQueues).await
    }

    /// The next `limit` jobs a worker taking from `queue` would get, without taking them; see
    /// [`cairn::Queue::peek`].
    ///
    /// # Errors
    /// As the embedded queue.
    pub async fn peek(&self, queue: &str, limit: u32) -> Result<Vec<Job>> {
        self.run(cairn::Peek {
            queue: queue.to_owned(),
            limit,
        })
        .await
    }

    /// The failure groups that hold failed jobs, with their counts; see [`cairn::Queue::failure_groups`].
    ///
    /// # Errors
    /// As the embedded queue.
    pub async fn failure_groups(&self) -> Result<Vec<FailureGroup>> {
        self.run(cairn::ListFailures).await
    }

    /// Puts the oldest failed jobs of a failure group back in a queue; returns how many moved. See
    /// [`cairn::Queue::unfail`].
    ///
    /// # Errors
    /// As the embedded queue.
    pub async fn unfail(&self, unfail: Unfail) -> Result<u64> {
        self.run(unfail).await
    }

    /// Counts, wait, run and service times over a period, with series and histograms; see
    /// [`cairn::Queue::stats`].
    ///
    /// # Errors
    /// As the embedded queue.
    pub async fn stats(&self, query: StatsQuery) -> Result<Stats> {
        self.run(query).await
    }

    /// How busy the workers were over a period; see [`cairn::Queue::worker_stats`].
    ///
    /// # Errors
    /// As the embedded queue.
    pub async fn worker_stats(&self, period: StatsPeriod) -> Result<WorkerStats> {
        self.run(cairn::WorkerStatsQuery { period }).await
    }

    /// A page of the activity log, newest first; see [`cairn::Queue::activity`].
    ///
    /// # Errors
    /// As the embedded queue.
    pub async fn activity(&self, filter: ActivityFilter) -> Result<ActivityPage> {
        self.run(filter).await
    }

    /// Runs one read-only SQL statement; see [`cairn::Queue::sql`].
    ///
    /// # Errors
    /// As the embedded queue.
    pub async fn sql(&self, query: SqlQuery) -> Result<SqlResult> {
        self.run(query).await
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

    /// Every option with its value and where the value comes from; see [`cairn::Queue::config`].
    ///
    /// # Errors
    /// As the embedded queue.
    pub async fn config(&self) -> Result<Vec<ConfigEntry>> {
        self.run(cairn::ListConfig).await
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

    /// Every recurring template; see [`cairn::Queue::recurring`].
    ///
    /// # Errors
    /// As the embedded queue.
    pub async fn recurring(&self) -> Result<Vec<RecurringInfo>> {
        self.run(cairn::ListRecurring).await
    }

    /// Creates a batch of jobs with callbacks; see [`cairn::Queue::create_batch`].
    ///
    /// # Errors
    /// As the embedded queue, plus [`ErrorKind::Unavailable`] and [`ErrorKind::Unauthorized`].
    pub async fn create_batch(&self, batch: cairn::CreateBatch) -> Result<cairn::BatchCreated> {
        cairn_api::Jobs::run(self, batch).await
    }

    /// A batch with its counts; see [`cairn::Queue::batch`].
    ///
    /// # Errors
    /// As the embedded queue.
    pub async fn batch(&self, id: cairn::BatchId) -> Result<cairn::Batch> {
        self.run(cairn::GetBatch { batch: id }).await
    }

    /// A page of batches, newest first; see [`cairn::Queue::batches`].
    ///
    /// # Errors
    /// As the embedded queue.
    pub async fn batches(&self, filter: cairn::BatchFilter) -> Result<Vec<cairn::Batch>> {
        Ok(self.run(filter).await?.batches)
    }

    /// A job with its history; see [`cairn::Queue::get`].
    ///
    /// # Errors
    /// As the embedded queue.
    pub async fn get(&self, job: JobId) -> Result<Job> {
        self.run(cairn::GetJob::new(job)).await
    }

    /// Waits until the job ends (completed, failed or cancelled), at most `timeout` (at most [`cairn::MAX_WAIT`]),
    /// and returns it with its result or error; at the timeout, as it stands. See [`cairn::Queue::wait`]. The
    /// server cuts one request's wait to its own longest (60 s by default): a longer wait asks again.
    ///
    /// # Errors
    /// As [`Client::get`].
    pub async fn wait(&self, job: JobId, timeout: Duration) -> Result<Job> {
        let deadline = tokio::time::Instant::now() + timeout.min(cairn::MAX_WAIT);
        loop {
            let wait = deadline.saturating_duration_since(tokio::time::Instant::now());
            let found = self.run(cairn::GetJob { job, wait }).await?;
            if found.state.is_finished() || tokio::time::Instant::now() >= deadline {
                return Ok(found);
            }
        }
    }

    /// A page of jobs; see [`cairn::Queue::list`].
    ///
    /// # Errors
    /// As the embedded queue.
    pub async fn list(&self, filter: JobFilter) -> Result<JobPage> {
        self.run(filter).await
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

cairn::impl_backend_by_inherent_methods!(Client);

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
                    .run(ActivityFilter {
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
