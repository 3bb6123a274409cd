//! Taking ready jobs: [`Dequeue`] leases up to N jobs to a worker, atomically.

use std::collections::HashSet;
use std::time::Duration;

use crate::store::db::{OwnedSql, Params, Sql, ToValue, Value, params};

use crate::clock::from_millis;
use crate::error::{Error, Result};
use crate::job::Job;
use crate::lease::Lease;
use crate::names::{NamePattern, QueueName, WorkerId};
pub(crate) mod bulk;
pub(crate) mod by_key;
pub(crate) mod by_name;

use crate::ops::limits::{MAX_DEQUEUE, MAX_LEASE_TIMEOUT, MIN_LEASE_TIMEOUT};
use crate::ops::rate_limit::{LOCK_LIMITED_QUEUE, STORE_BUCKET};
use crate::ops::rows::{JOB_COLUMNS, job_columns, job_from_row};
use crate::ops::{Operation, WriteCtx};
use by_name::{NameShape, NameSource};

/// The most name patterns one dequeue may carry: each is a branch of the claim's statement on PostgreSQL.
pub const MAX_DEQUEUE_NAMES: usize = 1000;

/// The most queues one dequeue may name: a parked dequeue is looked at again whenever one of them gains jobs, and its
/// claim walks each in turn.
pub const MAX_DEQUEUE_QUEUES: usize = 1000;

/// The longest a dequeue may wait: a day. Workers that want to wait longer ask again.
pub const MAX_WAIT: Duration = Duration::from_secs(24 * 3600);

/// How a dequeue over several queues picks among them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum QueueOrder {
    /// Drain the first queue before looking at the second, and so on.
    #[default]
    Ordered,
    /// Take one job from each queue in turn (or as many as its weight, see [`Dequeue::weights`]), starting at a
    /// different queue on every call.
    RoundRobin,
}

/// The largest weight a queue may have in a weighted round-robin.
pub const MAX_QUEUE_WEIGHT: u32 = 1000;

/// A worker's request for jobs. Fields are outside input, validated when the request runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Dequeue {
    /// Who takes the jobs.
    pub worker: String,
    /// The queues to take from, at most [`MAX_DEQUEUE_QUEUES`]; `default` when empty.
    pub queues: Vec<String>,
    /// How to pick among several queues.
    pub order: QueueOrder,
    /// With [`QueueOrder::RoundRobin`], how many jobs each queue gives per turn, in the order of `queues` (1 each
    /// when empty): a queue of weight 3 gives up to three jobs for every one of a queue of weight 1, so a busy
    /// queue cannot crowd out the others, and none starves.
    pub weights: Vec<u32>,
    /// GLOB patterns over job names, at most [`MAX_DEQUEUE_NAMES`]; a job matching any of them may be taken.
    /// Every name when empty.
    pub names: Vec<String>,
    /// The most jobs to take, 1 to [`MAX_DEQUEUE`].
    pub limit: u32,
    /// The most total weight to take. A job heavier than this is still taken when it is the first one, so that
    /// no job is too heavy to ever run.
    pub max_weight: Option<u32>,
    /// How long to wait for a job when none is ready. The call returns the moment one becomes ready.
    pub wait: Duration,
    /// How long these leases last before their first heartbeat, instead of each job's lease timeout: for a
    /// worker that cannot heartbeat (a shell script, a client of a protocol without heartbeats). Heartbeats extend
    /// by the job's own lease timeout and never shorten a lease.
    pub lease_timeout: Option<Duration>,
    /// Only jobs of exactly this priority.
    pub priority: Option<i32>,
}

impl Dequeue {
    /// A request by `worker` for one job of any name from the `default` queue, not waiting.
    pub fn new(worker: impl Into<String>) -> Self {
        Dequeue {
            worker: worker.into(),
            queues: Vec::new(),
            order: QueueOrder::Ordered,
            weights: Vec::new(),
            names: Vec::new(),
            limit: 1,
            max_weight: None,
            wait: Duration::ZERO,
            lease_timeout: None,
            priority: None,
        }
    }

    /// Adds a queue to take from.
    pub fn queue(mut self, queue: impl Into<String>) -> Self {
        self.queues.push(queue.into());
        self
    }

    /// Sets how to pick among queues.
    pub fn order(mut self, order: QueueOrder) -> Self {
        self.order = order;
        self
    }

    /// Adds a name pattern.
    pub fn name(mut self, pattern: impl Into<String>) -> Self {
        self.names.push(pattern.into());
        self
    }

    /// Sets the most jobs to take.
    pub fn limit(mut self, limit: u32) -> Self {
        self.limit = limit;
        self
    }

    /// Sets the most total weight to take.
    pub fn max_weight(mut self, weight: u32) -> Self {
        self.max_weight = Some(weight);
        self
    }

    /// Waits up to `wait` for a job.
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = wait;
        self
    }

    /// Takes only jobs of exactly this priority.
    pub fn priority(mut self, priority: i32) -> Self {
        self.priority = Some(priority);
        self
    }

    /// Leases the jobs for `timeout` before their first heartbeat, instead of their own lease timeout.
    pub fn lease_timeout(mut self, timeout: Duration) -> Self {
        self.lease_timeout = Some(timeout);
        self
    }

    /// The weights, one per distinct queue in `queues` order (a queue named twice keeps its first weight); empty
    /// when none were given.
    fn valid_weights(&self) -> Result<Vec<u32>> {
        if self.weights.is_empty() {
            return Ok(Vec::new());
        }
        if self.order != QueueOrder::RoundRobin {
            return Err(Error::invalid("weights", "apply only to round-robin order"));
        }
        if self.weights.len() != self.queues.len() {
            return Err(Error::invalid(
                "weights",
                format!(
                    "must give one weight per queue: {} queues, {} weights",
                    self.queues.len(),
                    self.weights.len()
                ),
            ));
        }
        if let Some(bad) = self
            .weights
            .iter()
            .find(|w| !(1..=MAX_QUEUE_WEIGHT).contains(*w))
        {
            return Err(Error::invalid(
                "weights",
                format!("each must be between 1 and {MAX_QUEUE_WEIGHT}, got {bad}"),
            ));
        }
        let mut seen = HashSet::new();
        let mut weights = Vec::new();
        for (queue, weight) in self.queues.iter().zip(&self.weights) {
            if seen.insert(queue.as_str()) {
                weights.push(*weight);
            }
        }
        Ok(weights)
    }

    /// Validates the request once, before it reaches the writer.
    pub(crate) fn validate(&self) -> Result<Claim> {
        let worker = WorkerId::parse(self.worker.as_str())?;
        let queues = self.valid_queues()?;
        let weights = self.valid_weights()?;
        let names = self.valid_names()?;
        if !(1..=MAX_DEQUEUE).contains(&self.limit) {
            return Err(Error::invalid(
                "limit",
                format!("must be between 1 and {MAX_DEQUEUE}, got {}", self.limit),
            ));
        }
        if self.wait > MAX_WAIT {
            return Err(Error::invalid(
                "wait",
                format!("must be at most {MAX_WAIT:?}, got {:?}", self.wait),
            ));
        }
        if self.max_weight == Some(0) {
            return Err(Error::invalid("max_weight", "must be at least 1, got 0"));
        }
        let lease_ms = self.valid_lease_ms()?;
        let shapes: Vec<NameShape> = names.iter().map(|n| n.source.shape()).collect();
        let sql = select_ready_jobs(&shapes, self.priority.is_some(), false);
        let sql_aging = select_ready_jobs(&shapes, self.priority.is_some(), true);
        Ok(Claim {
            worker,
            queues,
            order: self.order,
            weights,
            names,
            limit: self.limit,
            max_weight: self.max_weight,
            lease_ms,
            priority: self.priority,
            selects: Box::new([sql, sql_aging]),
        })
    }

    /// The queues, each once (a queue named twice would offer its jobs twice to one claim); `default` when none.
    fn valid_queues(&self) -> Result<Vec<QueueName>> {
        if self.queues.len() > MAX_DEQUEUE_QUEUES {
            return Err(Error::invalid(
                "queues",
                format!(
                    "must name at most {MAX_DEQUEUE_QUEUES} queues, got {}",
                    self.queues.len()
                ),
            ));
        }
        let mut queues: Vec<QueueName> = Vec::with_capacity(self.queues.len());
        let mut seen = HashSet::new();
        for queue in &self.queues {
            let queue = QueueName::parse(queue.as_str())?;
            if seen.insert(queue.clone()) {
                queues.push(queue);
            }
        }
        if queues.is_empty() {
            queues.push(QueueName::default());
        }
        Ok(queues)
    }

    /// The name patterns; none when one is `*` (the same as no list, and cheaper to run).
    fn valid_names(&self) -> Result<Vec<NameFilter>> {
        if self.names.len() > MAX_DEQUEUE_NAMES {
            return Err(Error::invalid(
                "names",
                format!(
                    "must hold at most {MAX_DEQUEUE_NAMES} patterns, got {}",
                    self.names.len()
                ),
            ));
        }
        let names = self
            .names
            .iter()
            .map(|n| NamePattern::parse(n.as_str()))
            .collect::<Result<Vec<_>>>()?;
        if names.iter().any(NamePattern::is_any) {
            return Ok(Vec::new());
        }
        Ok(names.into_iter().map(NameFilter::new).collect())
    }

    /// The lease the claim asks for, in milliseconds, if it asks for one.
    fn valid_lease_ms(&self) -> Result<Option<i64>> {
        self.lease_timeout
            .map(|timeout| {
                if (MIN_LEASE_TIMEOUT..=MAX_LEASE_TIMEOUT).contains(&timeout) {
                    Ok(crate::clock::duration_millis(timeout))
                } else {
                    Err(Error::invalid(
                        "lease_timeout",
                        format!(
                            "must be between {MIN_LEASE_TIMEOUT:?} and {MAX_LEASE_TIMEOUT:?}, got {timeout:?}"
                        ),
                    ))
                }
            })
            .transpose()
    }
}

/// A job leased to a worker, with the lease that proves it.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimedJob {
    /// The job, as it is now that it runs.
    pub job: Job,
    /// The lease to pass to heartbeat, checkpoint, finish, retry, fail.
    pub lease: Lease,
}

/// One of a claim's name patterns, and how the claim finds the names it matches (`claim/by_name.rs`).
#[derive(Debug, Clone)]
pub(crate) struct NameFilter {
    pub pattern: NamePattern,
    pub source: NameSource,
}

impl NameFilter {
    fn new(pattern: NamePattern) -> Self {
        NameFilter {
            source: NameSource::of(&pattern),
            pattern,
        }
    }
}

/// A validated [`Dequeue`], as the writer runs it.
#[derive(Debug, Clone)]
pub(crate) struct Claim {
    pub worker: WorkerId,
    pub queues: Vec<QueueName>,
    pub order: QueueOrder,
    /// Jobs per turn for each queue, in `queues` order; 1 each when empty.
    pub weights: Vec<u32>,
    pub names: Vec<NameFilter>,
    pub limit: u32,
    pub max_weight: Option<u32>,
    /// The claim's own lease timeout, in milliseconds, instead of each job's.
    lease_ms: Option<i64>,
    /// Only jobs of this priority.
    priority: Option<i32>,
    /// SELECT_READY_JOBS for a queue with strict priority, and for one with priority aging (boxed: a claim waits in
    /// the writer's commands, which stay small).
    selects: Box<[OwnedSql; 2]>,
}

/// SELECT_READY_JOBS for a claim's name patterns (their shapes, in order), and maybe one priority: ready jobs of
/// one queue in claim order, highest priority (aged, on a queue with priority aging) first, then longest ready.
///
/// For a claim of any name, one statement on both backends, served by `jobs_ready`: `$1` the queue, then the
/// priority, then the limit. On PostgreSQL the jobs are locked as they are selected, skipping those other nodes
/// are taking; SQLite's one writer needs no lock, and is told the index to walk. Without aging, the index's second
/// column (`claim_key`) is minus the priority, so one priority is a range of the index. With aging it is not, and a
/// claim of one priority walks the ready jobs that go before the first match.
///
/// For a claim of some names, served by `jobs_ready_by_name` so that it reads only those names' jobs
/// (`claim/by_name.rs`): on PostgreSQL one statement, [`by_name::postgres_select`]; on SQLite the statement for
/// one name's jobs, [`by_name::sqlite_select_one_name`], which [`by_name::sqlite_candidates`] runs per
/// name.
pub(crate) fn select_ready_jobs(
    shapes: &[NameShape],
    with_priority: bool,
    aging: bool,
) -> OwnedSql {
    if !shapes.is_empty() {
        return OwnedSql {
            sqlite: by_name::sqlite_select_one_name(with_priority, aging),
            postgres: by_name::postgres_select(shapes, with_priority, aging),
        };
    }
    let priority = match (with_priority, aging) {
        (false, _) => String::new(),
        (true, false) => " AND claim_key = -CAST($2 AS BIGINT) AND priority = $2".to_owned(),
        (true, true) => " AND priority = $2".to_owned(),
    };
    // The limit comes last, as it stands last in the statement.
    let limit = 2 + usize::from(with_priority);
    OwnedSql {
        sqlite: format!(
            "SELECT id, weight FROM jobs INDEXED BY jobs_ready WHERE state = 'queued' \
             AND concurrency_key IS NULL AND queue = $1{priority} ORDER BY claim_key, run_at, id LIMIT 0 + ${limit}"
        ),
        postgres: format!(
            "SELECT id, weight FROM jobs WHERE state = 'queued' AND concurrency_key IS NULL AND queue = $1\
             {priority} ORDER BY claim_key, run_at, id LIMIT 0 + ${limit} FOR UPDATE SKIP LOCKED"
        ),
    }
}

/// Leases one job if it is still ready (a second guard: a claim never picks a job twice), returning the row as it
/// is now: `$1` the worker, `$2` the lease's token, `$3` now, `$4` the claim's own lease timeout, `$5` the job.
/// SQLite's; PostgreSQL leases with [`lease_jobs_postgres`], many jobs to a statement. The attempt starts at now,
/// or when the job became ready if that is later (see [`lease_jobs_postgres`]).
pub(crate) const LEASE_JOB: Sql = Sql::sqlite_only(concat!(
    "UPDATE jobs SET state = 'running', worker = $1, lease_token = $2, \
     lease_expires_at = MAX($3, run_at) + CASE WHEN timeout_ms IS NULL THEN COALESCE($4, lease_timeout_ms) \
                                  ELSE MIN(COALESCE($4, lease_timeout_ms), timeout_ms) END, \
     attempt = attempt + 1, claims = claims + 1, started_at = COALESCE(started_at, MAX($3, run_at)), \
     attempt_started_at = MAX($3, run_at), progress = NULL, suspended_at = NULL WHERE id = $5 AND state = 'queued' RETURNING ",
    job_columns!()
));

/// PostgreSQL's [`LEASE_JOB`]: leases the jobs `filter` finds (a `WHERE …`, or a `FROM … WHERE …` that joins the
/// rows `worker`, `token`, `now` and `lease` read from), those four given as SQL (parameters, or a joined row's
/// columns). Returns the jobs' columns; a statement may add more after them.
///
/// An attempt starts at `now`, or when its job became ready (`run_at`) if that is later. A batch's now is read as it
/// begins, and another node may make a job ready after that, at its own later now: its lease expired there, say,
/// ending the last attempt then. Starting the next attempt at the older now would record it as begun before the
/// last one ended.
pub(crate) fn lease_jobs_postgres(
    worker: &str,
    token: &str,
    now: &str,
    lease: &str,
    filter: &str,
) -> String {
    let now = format!("GREATEST({now}, jobs.run_at)");
    format!(
        "UPDATE jobs SET state = 'running', worker = {worker}, lease_token = {token}, \
         lease_expires_at = {now} + CASE WHEN timeout_ms IS NULL THEN COALESCE({lease}, lease_timeout_ms) \
                                    ELSE LEAST(COALESCE({lease}, lease_timeout_ms), timeout_ms) END, \
         attempt = attempt + 1, claims = claims + 1, started_at = COALESCE(started_at, {now}), \
         attempt_started_at = {now}, progress = NULL, suspended_at = NULL {filter} RETURNING {JOB_COLUMNS}"
    )
}

/// A job of `queue` started: a rate-limited queue's bucket gives a token (written back to the queue's row on
/// PostgreSQL, where the nodes share it).
fn took(ctx: &mut WriteCtx<'_>, queue: &str) -> Result<()> {
    if ctx.settings.get(queue).rate.is_none() {
        return Ok(());
    }
    ctx.settings.buckets.take(queue);
    // Nodes that share the database share the bucket: its row is what the next one reads (see `admissible`).
    let shared = ctx.db.capabilities().shared_by_nodes;
    if let (true, Some((tokens, at))) = (shared, ctx.settings.buckets.state(queue)) {
        ctx.db.execute(STORE_BUCKET, &params![tokens, at, queue])?;
    }
    Ok(())
}

/// On PostgreSQL, leases the job `select` (a [`select_ready_jobs`] statement, limited to one) picks, with the
/// lease's parameters numbered from `first`: worker, token, now, lease timeout.
fn lease_selected(select: &str, first: usize) -> String {
    let [worker, token, now, lease] = [0, 1, 2, 3].map(|i| format!("${}", first + i));
    // `=` a scalar subquery, run once; `IN` would be a semi-join that runs the subquery again for each row and
    // leases every ready job.
    lease_jobs_postgres(
        &worker,
        &token,
        &now,
        &lease,
        &format!(
            "WHERE id = (SELECT candidate.id FROM ({select}) AS candidate) AND state = 'queued'"
        ),
    )
}

impl Claim {
    /// The ready jobs of one queue, in claim order: (id, weight).
    fn candidates(
        &self,
        ctx: &mut WriteCtx<'_>,
        queue: &QueueName,
        limit: u32,
    ) -> Result<Vec<(i64, u32)>> {
        let limit = self.admissible(ctx, queue, limit)?;
        if limit == 0 {
            return Ok(Vec::new());
        }
        if ctx.settings.get(queue.as_str()).keyed {
            return crate::ops::claim::by_key::candidates(self, ctx, queue, limit);
        }
        let sql = self.select_ready(ctx, queue);
        // A claim of some names: where a statement is a call in process, a statement per name (`by_name.rs`);
        // where it is a round trip, the one statement for them all.
        if !self.names.is_empty() && !ctx.db.capabilities().statements_are_round_trips {
            return by_name::sqlite_candidates(
                &ctx.db,
                sql,
                queue.as_str(),
                self.names.iter().map(|n| &n.source),
                self.priority,
                limit,
            );
        }
        let args = self.select_args(queue, limit);
        ctx.db
            .query(sql, &Params(args), |row| Ok((row.get(0)?, row.get(1)?)))
    }

    /// The [`select_ready_jobs`] statement this claim runs on `queue`: the one for priority aging if the queue
    /// ages.
    pub(crate) fn select_ready(&self, ctx: &WriteCtx<'_>, queue: &QueueName) -> Sql<'_> {
        if ctx.settings.get(queue.as_str()).aging_ms.is_some() {
            self.selects[1].as_sql()
        } else {
            self.selects[0].as_sql()
        }
    }

    /// The parameters of [`Self::select_ready`], `$1` onwards: the queue, the name patterns' (on PostgreSQL; on
    /// SQLite a claim of some names binds its own), the priority, the limit.
    pub(crate) fn select_args<'a>(&'a self, queue: &'a QueueName, limit: u32) -> Vec<Value<'a>> {
        let mut args = Vec::with_capacity(3 + 3 * self.names.len() + 4);
        args.push(queue.as_str().to_value());
        args.extend(self.names.iter().flat_map(|n| n.source.args()));
        args.extend(self.priority.map(|p| p.to_value()));
        args.push(limit.to_value());
        args
    }

    /// Only jobs of this priority, if set.
    pub(crate) fn priority(&self) -> Option<i32> {
        self.priority
    }

    /// Whether a weight budget could stop this claim before its limit (one job is always taken, budget or not).
    pub(crate) fn has_budget(&self) -> bool {
        self.max_weight.is_some() && self.limit > 1
    }

    /// The lease timeout this claim asks for, in milliseconds, instead of each job's own.
    pub(crate) fn lease_ms(&self) -> Option<i64> {
        self.lease_ms
    }

    /// Whether this claim may be run together with others of the same [`Self::filter_key`]
    /// (`ops/claim/bulk.rs`): it takes from one queue, which has no limits to count against and no keyed jobs.
    pub(crate) fn runs_in_bulk(&self, ctx: &WriteCtx<'_>) -> bool {
        if self.queues.len() != 1 {
            return false;
        }
        let settings = ctx.settings.get(self.queues[0].as_str());
        settings.concurrency.is_none() && settings.rate.is_none() && !settings.keyed
    }

    /// How many jobs of `queue` this claim may take now, at most `limit`: none while it is paused, and no more than
    /// its concurrency and rate limits allow.
    fn admissible(&self, ctx: &mut WriteCtx<'_>, queue: &QueueName, limit: u32) -> Result<u32> {
        let settings = ctx.settings.get(queue.as_str());
        if settings.paused {
            return Ok(0);
        }
        if ctx.db.capabilities().shared_by_nodes
            && (settings.concurrency.is_some() || settings.rate.is_some())
        {
            // Nodes take turns on a limited queue: the row's lock makes the next node count the running jobs
            // and read the bucket after this claim commits. The bucket in memory is what the row says. (A claim
            // that meets a key with a limit takes the same lock then: `ops/claim/by_key.rs`.)
            let stored = ctx
                .db
                .query_row(LOCK_LIMITED_QUEUE, &params![queue.as_str()], |r| {
                    Ok((r.get::<Option<f64>>(0)?, r.get::<Option<i64>>(1)?))
                })?;
            let bucket = stored.and_then(|(tokens, at)| Some((tokens?, at?)));
            ctx.settings.buckets.load(queue.as_str(), bucket);
        }
        let mut limit =
            match crate::ops::queues::room(&ctx.db, queue.as_str(), settings.concurrency)? {
                Some(0) => return Ok(0),
                Some(room) => limit.min(room),
                None => limit,
            };
        if let Some(rate) = settings.rate {
            match ctx
                .settings
                .buckets
                .available(queue.as_str(), rate, ctx.now_ms)
            {
                0 => return Ok(0),
                tokens => limit = limit.min(tokens),
            }
        }
        Ok(limit)
    }

    /// On PostgreSQL, one job from one queue in one statement: the candidate is selected, row-locked (skipping
    /// those other nodes are taking) and leased by one `UPDATE`, where the general path takes two round trips.
    fn claim_one(&self, ctx: &mut WriteCtx<'_>) -> Result<Vec<ClaimedJob>> {
        let queue = &self.queues[0];
        if self.admissible(ctx, queue, 1)? == 0 {
            return Ok(Vec::new());
        }
        let mut args = self.select_args(queue, 1);
        let sql = lease_selected(self.select_ready(ctx, queue).postgres, args.len() + 1);
        let token = ctx.tokens.next_token();
        args.extend([
            self.worker.as_str().to_value(),
            token.to_value(),
            ctx.now_ms.to_value(),
            self.lease_ms.to_value(),
        ]);
        let job = ctx
            .db
            .query_row(Sql::postgres_only(&sql), &Params(args), job_from_row)?;
        let Some(job) = job else {
            return Ok(Vec::new());
        };
        let claimed = self.leased(ctx, job, token)?;
        took(ctx, claimed.job.queue.as_str())?;
        Ok(vec![claimed])
    }

    fn lease(&self, ctx: &mut WriteCtx<'_>, id: i64) -> Result<Option<ClaimedJob>> {
        let token = ctx.tokens.next_token();
        let job = ctx.db.query_row(
            LEASE_JOB,
            &params![self.worker.as_str(), token, ctx.now_ms, self.lease_ms, id],
            job_from_row,
        )?;
        let Some(job) = job else { return Ok(None) };
        Ok(Some(self.leased(ctx, job, token)?))
    }

    /// A job this claim just leased under `token`: its start recorded, its steps read (a handler that runs again
    /// finds them all in the claim), and its lease.
    pub(crate) fn leased(
        &self,
        ctx: &mut WriteCtx<'_>,
        mut job: Job,
        token: i64,
    ) -> Result<ClaimedJob> {
        if job.step_count > 0 {
            job.steps = crate::ops::rows::load_steps(&ctx.db, job.id)?;
        }
        let job_ref = crate::ops::events::JobRef {
            id: job.id.0,
            queue: job.queue.as_str(),
            name: job.name.as_str(),
        };
        ctx.events.started(
            ctx.now_ms,
            job_ref,
            self.worker.as_str(),
            crate::clock::to_millis(job.run_at),
        );
        if job.step_count > 0 {
            // The run goes on from where an earlier attempt got to (a sleep, a wait, a crash, a retry).
            let steps = match job.step_count {
                1 => "1 recorded step".to_owned(),
                n => format!("{n} recorded steps"),
            };
            ctx.events.last_detail(format!("resumed: replays {steps}"));
        }
        let expires_at = job
            .lease_expires_at
            .unwrap_or_else(|| from_millis(ctx.now_ms));
        let lease = Lease {
            job: job.id,
            token,
            worker: self.worker.clone(),
            expires_at,
        };
        Ok(ClaimedJob { job, lease })
    }

    /// Picks which jobs to take: (id, weight) in the order they will be handed out.
    fn pick(&self, ctx: &mut WriteCtx<'_>) -> Result<Vec<(i64, u32)>> {
        match self.order {
            QueueOrder::Ordered => {
                let mut picked = Vec::new();
                for queue in &self.queues {
                    let left = self.limit - picked.len() as u32;
                    if left == 0 {
                        break;
                    }
                    picked.extend(self.candidates(ctx, queue, left)?);
                }
                Ok(picked)
            }
            QueueOrder::RoundRobin => {
                let start = *ctx.rotation % self.queues.len();
                *ctx.rotation = ctx.rotation.wrapping_add(1);
                let mut per_queue = Vec::with_capacity(self.queues.len());
                for i in 0..self.queues.len() {
                    let at = (start + i) % self.queues.len();
                    let weight = self.weights.get(at).copied().unwrap_or(1) as usize;
                    let candidates = self.candidates(ctx, &self.queues[at], self.limit)?;
                    per_queue.push((weight, candidates.into_iter()));
                }
                let mut picked = Vec::new();
                while picked.len() < self.limit as usize {
                    let before = picked.len();
                    for (weight, queue) in per_queue.iter_mut() {
                        let room = self.limit as usize - picked.len();
                        picked.extend(queue.by_ref().take((*weight).min(room)));
                    }
                    if picked.len() == before {
                        break;
                    }
                }
                Ok(picked)
            }
        }
    }

    /// Leases up to `limit` ready jobs within the weight budget.
    pub(crate) fn run(&self, ctx: &mut WriteCtx<'_>) -> Result<Vec<ClaimedJob>> {
        crate::ops::workers::seen(ctx, self.worker.as_str())?;
        // One job in one statement where a statement is a round trip (its text is PostgreSQL's).
        if ctx.db.capabilities().statements_are_round_trips
            && self.limit == 1
            && self.queues.len() == 1
            && !ctx.settings.get(self.queues[0].as_str()).keyed
        {
            return self.claim_one(ctx);
        }
        let picked = self.pick(ctx)?;
        let mut chosen = Vec::with_capacity(picked.len());
        let mut weight_left = self.max_weight.unwrap_or(u32::MAX);
        for (id, weight) in picked {
            if weight > weight_left && !chosen.is_empty() {
                // Stop rather than skip: a heavy job keeps its place instead of being overtaken forever.
                break;
            }
            weight_left = weight_left.saturating_sub(weight);
            chosen.push(id);
        }
        let claimed = if ctx.db.capabilities().statements_are_round_trips {
            // Locked by the select: leased many to a statement (of arrays), since every statement is a round trip.
            crate::ops::claim::bulk::lease_chosen(ctx, self, &chosen)?
        } else {
            let mut claimed = Vec::with_capacity(chosen.len());
            for id in chosen {
                claimed.extend(self.lease(ctx, id)?);
            }
            claimed
        };
        for job in &claimed {
            took(ctx, job.job.queue.as_str())?;
        }
        // A claim of queues without keys (most) does not look at each job it took.
        if self
            .queues
            .iter()
            .any(|queue| ctx.settings.get(queue.as_str()).keyed)
        {
            crate::ops::claim::by_key::record_turns(ctx, &claimed);
        }
        Ok(claimed)
    }

    /// Identifies what the claim looks for, so that waiters looking for the same thing can be skipped together.
    pub(crate) fn filter_key(&self) -> String {
        let mut key = String::new();
        for queue in &self.queues {
            key.push_str(queue.as_str());
            key.push('\u{1f}');
        }
        key.push('\u{1e}');
        for name in &self.names {
            key.push_str(name.pattern.as_str());
            key.push('\u{1f}');
        }
        if let Some(priority) = self.priority {
            key.push('\u{1e}');
            key.push_str(&priority.to_string());
        }
        key
    }

    /// Whether a waiting request could be served by jobs that became ready in these queues.
    pub(crate) fn wants_any_of(&self, ready: &crate::ops::ReadyQueues) -> bool {
        self.queues.iter().any(|q| ready.contains(q.as_str()))
    }
}

impl Operation for Claim {
    type Output = Vec<ClaimedJob>;

    fn is_durable(&self) -> bool {
        false
    }

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<Vec<ClaimedJob>> {
        self.run(ctx)
    }

    fn undelivered_leases(output: &Vec<ClaimedJob>) -> Vec<Lease> {
        output.iter().map(|c| c.lease.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regression_24_a_dequeue_naming_many_queues_is_checked_in_linear_time() {
        // See: 24
        // A 16 MiB body can name millions of queues; they were deduplicated by a linear search each, so one
        // request held a thread for hours. A queue named twice still keeps its first place and weight.
        let n = 200_000;
        let mut queues: Vec<String> = (0..n).map(|i| format!("q{i}")).collect();
        queues.push("q1".to_owned());
        let weights: Vec<u32> = (0..=n).map(|i| 1 + (i % 7) as u32).collect();
        let dequeue = Dequeue {
            queues,
            order: QueueOrder::RoundRobin,
            weights,
            ..Dequeue::new("w")
        };
        assert_eq!(dequeue.valid_weights().unwrap().len(), n);
        // Such a request is now refused before its queues are read; within the cap, duplicates still go.
        let refused = dequeue.validate().expect_err("too many queues");
        assert_eq!(refused.field(), Some("queues"));
        let most = Dequeue {
            queues: dequeue.queues[..MAX_DEQUEUE_QUEUES - 1]
                .iter()
                .cloned()
                .chain(["q1".to_owned()])
                .collect(),
            weights: dequeue.weights[..MAX_DEQUEUE_QUEUES].to_vec(),
            ..dequeue
        };
        let claim = most.validate().unwrap();
        assert_eq!(claim.queues.len(), MAX_DEQUEUE_QUEUES - 1);
    }
}
