//! Batches: jobs pushed as a group, with callbacks. `on_complete` is pushed once every job of the batch has reached
//! a final state (completed, failed or cancelled; a live job deleted counts as cancelled), `on_success` once every
//! job has completed, which may come after `on_complete` when failed jobs are run again and then complete.
//!
//! A batch's total is counted by the code that inserts jobs ([`count_added`](crate::ops::batch_jobs::count_added), from `push.rs`'s two inserts, which
//! every path that makes a job goes through). Its ends are the database's: triggers on `jobs` (SQLite 0022,
//! PostgreSQL 0014 and 0017) keep them, so every path that ends, revives or deletes a job counts, those to come
//! included; on PostgreSQL the update locks the batch's row, so of two nodes ending a batch's last two jobs at once,
//! the second sees the first's count. A change that brings a closed batch to an end it has not reached before marks
//! it `due`. Before each transaction commits, the writer makes the due callbacks and records the end
//! ([`make_due_callbacks`]): a callback is committed with the job end that made it due, and made once, whatever node
//! or crash comes after.
//!
//! A batch takes jobs until it has completed. An open batch does not complete, however its jobs end, until it is
//! closed ([`CloseBatch`]): jobs may be added to it over time (a job of the batch may add more).

use jiff::Timestamp;
use serde_json::{Value, json};

use crate::clock::from_millis;
use crate::error::{Error, ErrorKind, Result};
use crate::names::JobId;
use crate::names::{JobName, QueueName};
use crate::ops::batch_jobs::{BatchId, check_takes_jobs};
use crate::ops::push::{
    Enqueued, Push, ValidPush, check_batch_job, insert, insert_all, validate_all,
};
use crate::ops::{Operation, WriteCtx, in_savepoint, stored_push};
use crate::store::db::{Db, Params, Row, Sql, params};

/// The most characters a batch's description may have.
pub const MAX_BATCH_DESCRIPTION: usize = 1000;

/// The most ids of failed jobs a callback's data lists (the first, by id); `failed` counts them all.
pub const MAX_CALLBACK_FAILED_IDS: usize = 1000;

/// Creates a batch of jobs, with the callbacks to push when it ends. All of it is written, or (if anything is
/// invalid) none of it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CreateBatch {
    /// The jobs, in order; each must leave `batch` unset. A batch may start empty.
    pub jobs: Vec<Push>,
    /// Pushed once every job has completed. Its data, an object, gets a `batch` member: the batch's id,
    /// description and counts, and the ids of failed jobs (see [`MAX_CALLBACK_FAILED_IDS`]).
    pub on_success: Option<Push>,
    /// Pushed once every job has completed, failed or been cancelled, with the same `batch` member.
    pub on_complete: Option<Push>,
    /// Holds the batch open: it does not complete until closed ([`CloseBatch`]), so jobs can be added over time.
    pub open: bool,
    /// What the batch is, for people: at most [`MAX_BATCH_DESCRIPTION`] characters.
    pub description: Option<String>,
}

impl CreateBatch {
    /// A batch of `jobs`, closed, without callbacks.
    pub fn new(jobs: Vec<Push>) -> Self {
        CreateBatch {
            jobs,
            ..CreateBatch::default()
        }
    }

    /// Pushes `callback` once every job has completed.
    pub fn on_success(mut self, callback: Push) -> Self {
        self.on_success = Some(callback);
        self
    }

    /// Pushes `callback` once every job has reached a final state.
    pub fn on_complete(mut self, callback: Push) -> Self {
        self.on_complete = Some(callback);
        self
    }

    /// Holds the batch open until [`CloseBatch`].
    pub fn open(mut self) -> Self {
        self.open = true;
        self
    }

    /// Describes the batch.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }
}

/// A new batch: its id, and what became of each of its jobs, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchCreated {
    /// The batch.
    pub batch: BatchId,
    /// Its jobs.
    pub jobs: Vec<Enqueued>,
}

/// Adds jobs to a batch that has not completed, all or none. The same as pushing each with [`Push::batch`].
#[derive(Debug, Clone, PartialEq)]
pub struct AddToBatch {
    /// The batch.
    pub batch: BatchId,
    /// The jobs; each must leave `batch` unset or name this batch.
    pub jobs: Vec<Push>,
}

/// Closes an open batch: from now on it completes once every job has ended (at once, if they all have). Closing a
/// closed batch changes nothing. Answers with the batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CloseBatch {
    /// The batch.
    pub batch: BatchId,
}

/// Where a batch stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BatchState {
    /// Held open: it does not complete until closed.
    Open,
    /// Closed, with jobs still to end.
    Running,
    /// Every job has reached a final state (once completed, it stays so, even if a failed job runs again).
    Completed,
}

impl BatchState {
    /// The state's name: `open`, `running` or `completed`.
    pub fn as_str(self) -> &'static str {
        match self {
            BatchState::Open => "open",
            BatchState::Running => "running",
            BatchState::Completed => "completed",
        }
    }

    /// The state named `name`.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] on `state` for another name.
    pub fn parse(name: &str) -> Result<BatchState> {
        match name {
            "open" => Ok(BatchState::Open),
            "running" => Ok(BatchState::Running),
            "completed" => Ok(BatchState::Completed),
            other => Err(Error::invalid(
                "state",
                format!("must be open, running or completed, got {other:?}"),
            )),
        }
    }
}

/// A batch's callback: the job it pushes, and the job it pushed, once it has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchCallback {
    /// The callback job's queue.
    pub queue: QueueName,
    /// Its name.
    pub name: JobName,
    /// The job pushed, once the batch reached the callback's end.
    pub job: Option<JobId>,
    /// Why it could not be pushed when the batch reached that end, if it could not (its job no longer valid, say a
    /// data limit lowered since): the batch's end is recorded without it.
    pub error: Option<String>,
}

/// A batch and its progress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    /// The batch's id.
    pub id: BatchId,
    /// What it is, if it was described.
    pub description: Option<String>,
    /// Where it stands.
    pub state: BatchState,
    /// Jobs ever added.
    pub total: u64,
    /// Of them, those not yet completed, failed or cancelled.
    pub pending: u64,
    /// Those completed.
    pub completed: u64,
    /// Those failed (their attempts ran out, or they were failed on purpose).
    pub failed: u64,
    /// Those cancelled, or deleted before they ended.
    pub cancelled: u64,
    /// When it was created.
    pub created_at: Timestamp,
    /// When every job first reached a final state, with the batch closed.
    pub completed_at: Option<Timestamp>,
    /// When every job first completed, with the batch closed.
    pub succeeded_at: Option<Timestamp>,
    /// The callback pushed when every job has completed.
    pub on_success: Option<BatchCallback>,
    /// The callback pushed when every job has reached a final state.
    pub on_complete: Option<BatchCallback>,
}

/// Which batches to list, newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchFilter {
    /// Only batches in this state.
    pub state: Option<BatchState>,
    /// Only batches with a lower id than this: the previous page's last id.
    pub before: Option<BatchId>,
    /// At most this many, 1 to [`MAX_PAGE`](crate::MAX_PAGE); 100 by default.
    pub limit: u32,
}

impl Default for BatchFilter {
    fn default() -> Self {
        BatchFilter {
            state: None,
            before: None,
            limit: 100,
        }
    }
}

const INSERT_BATCH: Sql = Sql::both(
    "INSERT INTO batches (description, open, on_success, on_complete, created_at) VALUES ($1, TRUE, $2, $3, $4) \
     RETURNING id",
);

/// Closes a batch, marking it due if its jobs have all ended (or all completed) and it has not acted on that yet.
const CLOSE_BATCH: Sql = Sql::both(
    "UPDATE batches SET open = FALSE, due = due \
     OR (completed_at IS NULL AND completed + failed + cancelled = total) \
     OR (succeeded_at IS NULL AND completed = total) \
     WHERE id = $1 AND open RETURNING due",
);

/// Closes `batch` if it is open; one that is due now has its callbacks made before the transaction commits.
fn close(ctx: &WriteCtx<'_>, batch: BatchId) -> Result<()> {
    let due: Option<bool> = ctx
        .db
        .query_row(CLOSE_BATCH, &params![batch.0], |r| r.get(0))?;
    if due == Some(true) {
        ctx.db.note_batch_due();
    }
    Ok(())
}

impl CreateBatch {
    /// The description and callbacks, checked; the callbacks as stored.
    fn check(&self, now_ms: i64, ctx: &WriteCtx<'_>) -> Result<(Option<String>, Option<String>)> {
        if let Some(d) = &self.description {
            let chars = d.chars().count();
            if chars > MAX_BATCH_DESCRIPTION {
                return Err(Error::invalid(
                    "description",
                    format!("must be at most {MAX_BATCH_DESCRIPTION} characters, got {chars}"),
                ));
            }
        }
        let stored = |push: &Option<Push>, field: &'static str| -> Result<Option<String>> {
            push.as_ref()
                .map(|push| {
                    check_callback(push, field, self.description.as_deref(), now_ms, ctx)?;
                    Ok(stored_push::to_json(push).to_string())
                })
                .transpose()
        };
        Ok((
            stored(&self.on_success, "on_success")?,
            stored(&self.on_complete, "on_complete")?,
        ))
    }
}

/// A callback must be a push to store (see [`stored_push::check`]) whose data is an object without a `batch`
/// member, which the batch's counts take.
fn check_callback(
    push: &Push,
    field: &'static str,
    description: Option<&str>,
    now_ms: i64,
    ctx: &WriteCtx<'_>,
) -> Result<()> {
    stored_push::check(
        push,
        field,
        "in a batch's callback: the batch's end makes it",
        now_ms,
        ctx.limits(),
    )?;
    // A unique key would let the callback land in another job, without the batch's counts.
    if push.unique_key.is_some() {
        return Err(Error::invalid(
            "unique_key",
            "must be unset in a batch's callback: the batch's end makes it, once",
        )
        .within(field));
    }
    let data = match push.data.as_object() {
        Some(data) if data.contains_key("batch") => {
            return Err(Error::invalid(
                "data",
                "must not have a member named batch: the batch's counts go there",
            )
            .within(field));
        }
        Some(data) => data,
        None => {
            return Err(Error::invalid(
                "data",
                "must be a JSON object: the batch's counts go in its member named batch",
            )
            .within(field));
        }
    };
    // Room for the counts at their largest, so that the callback cannot be refused when the batch ends.
    let mut largest = data.clone();
    largest.insert("batch".to_owned(), largest_counts(description));
    let limit = ctx.limits().max_data_bytes;
    let size = serde_json::to_string(&largest).map_or(usize::MAX, |t| t.len());
    if size > limit {
        return Err(Error::invalid(
            "data",
            format!(
                "must leave room for the batch's counts (with {MAX_CALLBACK_FAILED_IDS} failed ids): at most \
                 {limit} bytes of JSON with them, got {size}"
            ),
        )
        .within(field));
    }
    Ok(())
}

/// The `batch` member at its largest: every count and id at 19 digits, and every failed id listed.
fn largest_counts(description: Option<&str>) -> Value {
    let most = i64::MAX;
    let failed_ids = vec![most; MAX_CALLBACK_FAILED_IDS];
    counts_member(most, description, [most; 4], &failed_ids)
}

/// The `batch` member of a callback's data: the batch's id and description, its counts (total, completed, failed,
/// cancelled) and its first failed jobs. One shape, for the callback made and for the room checked for it.
fn counts_member(
    id: i64,
    description: Option<&str>,
    counts: [i64; 4],
    failed_ids: &[i64],
) -> Value {
    let [total, completed, failed, cancelled] = counts;
    json!({
        "id": id,
        "description": description,
        "total": total,
        "completed": completed,
        "failed": failed,
        "cancelled": cancelled,
        "failed_ids": failed_ids,
    })
}

impl Operation for CreateBatch {
    type Output = BatchCreated;

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<BatchCreated> {
        if let Some(index) = self.jobs.iter().position(|j| j.batch.is_some()) {
            return Err(Error::invalid(
                "batch",
                "must be unset: the job joins the batch being created",
            )
            .in_batch(index));
        }
        let (on_success, on_complete) = self.check(ctx.now_ms, ctx)?;
        let mut valid = validate_jobs_of_batch(&self.jobs, ctx)?;
        let batch = ctx.db.query_one(
            INSERT_BATCH,
            &params![
                self.description.as_deref(),
                on_success.as_deref(),
                on_complete.as_deref(),
                ctx.now_ms
            ],
            |r| r.get::<i64>(0).map(BatchId),
        )?;
        for v in &mut valid {
            v.join(batch);
        }
        let jobs = insert_all(&valid, ctx)?;
        if !self.open {
            close(ctx, batch)?;
        }
        Ok(BatchCreated { batch, jobs })
    }
}

impl Operation for AddToBatch {
    type Output = Vec<Enqueued>;

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<Vec<Enqueued>> {
        let batch = self.batch;
        if let Some(index) = self
            .jobs
            .iter()
            .position(|j| j.batch.is_some_and(|b| b != batch))
        {
            return Err(Error::invalid(
                "batch",
                format!("must be unset or {batch}: the job joins batch {batch}"),
            )
            .in_batch(index));
        }
        // The batch is the path's, not a job's: a batch that does not exist is not found.
        check_takes_jobs(ctx, batch).map_err(|e| match e.kind() {
            crate::ErrorKind::InvalidInput => Error::not_found(format!("batch {batch}")),
            _ => e,
        })?;
        let jobs: Vec<Push> = self
            .jobs
            .iter()
            .map(|job| Push {
                batch: None,
                ..job.clone()
            })
            .collect();
        let mut valid = validate_jobs_of_batch(&jobs, ctx)?;
        for v in &mut valid {
            v.join(batch);
        }
        insert_all(&valid, ctx)
    }
}

/// Validates jobs (their `batch` unset) as jobs of a batch, before anything is written: the rules of a batch's job,
/// then every field (errors name the job's position, `jobs[3].unique_key`). The caller has checked the batch, once.
fn validate_jobs_of_batch(jobs: &[Push], ctx: &WriteCtx<'_>) -> Result<Vec<ValidPush>> {
    for (index, job) in jobs.iter().enumerate() {
        check_batch_job(job).map_err(|e| e.in_batch(index))?;
    }
    validate_all(jobs, ctx)
}

impl Operation for CloseBatch {
    type Output = Batch;

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<Batch> {
        close(ctx, self.batch)?;
        // A batch this close ends gets its callbacks here, so that the answer shows it completed.
        make_due_callbacks(ctx, false)?;
        load_batch(&ctx.db, self.batch)
    }
}

/// The batches the writer acts on at the end of a transaction. On PostgreSQL a batch another transaction holds is
/// skipped: that transaction changed its counts, so it acts on it before it commits.
const SELECT_DUE: Sql = Sql {
    sqlite: "SELECT id, open, total, completed, failed, cancelled, on_success, on_complete, completed_at, \
             succeeded_at, description FROM batches INDEXED BY batches_due WHERE due ORDER BY id LIMIT 100",
    postgres: "SELECT id, open, total, completed, failed, cancelled, on_success, on_complete, completed_at, \
               succeeded_at, description FROM batches WHERE due ORDER BY id LIMIT 100 FOR UPDATE SKIP LOCKED",
};

/// A batch's end recorded, with the callbacks made. `$1` completed at, `$2` succeeded at, `$3` the `on_complete`
/// job, `$4` the `on_success` job, `$5` and `$6` why either could not be made, `$7` the batch.
const RECORD_END: Sql = Sql::both(
    "UPDATE batches SET due = FALSE, completed_at = COALESCE(completed_at, $1), \
     succeeded_at = COALESCE(succeeded_at, $2), complete_job = COALESCE(complete_job, $3), \
     success_job = COALESCE(success_job, $4), complete_error = COALESCE(complete_error, $5), \
     success_error = COALESCE(success_error, $6) WHERE id = $7",
);

/// The first failed jobs of a batch, by id.
const SELECT_FAILED: Sql = Sql {
    sqlite: "SELECT id FROM jobs INDEXED BY jobs_failed_by_batch WHERE batch_id = $1 AND state = 'failed' \
             ORDER BY id LIMIT $2",
    postgres: "SELECT id FROM jobs WHERE batch_id = $1 AND state = 'failed' ORDER BY id LIMIT $2",
};

/// A due batch, as read.
struct DueBatch {
    id: BatchId,
    open: bool,
    total: i64,
    completed: i64,
    failed: i64,
    cancelled: i64,
    on_success: Option<String>,
    on_complete: Option<String>,
    completed_at: Option<i64>,
    succeeded_at: Option<i64>,
    description: Option<String>,
}

/// The most due batches one transaction acts on; the rest are left for the next.
const DUE_PER_TRANSACTION: usize = 100;

/// Makes the callbacks of the batches whose counts reached an end in this transaction (or were left due), and
/// records each end. The writer runs it before every commit: on SQLite it reads the head of an index that is empty
/// but for those moments; on PostgreSQL it looks only when the transaction made a batch due (the trigger's notice)
/// or when `always` (the writer's periodic pass, for a batch left due by a transaction that could not act on it).
/// Returns how many callbacks it made.
pub(crate) fn make_due_callbacks(ctx: &mut WriteCtx<'_>, always: bool) -> Result<usize> {
    if !ctx.db.take_batch_due() && !always {
        return Ok(0);
    }
    let mut made = 0;
    // A page at a time, until a page is not full: every batch due now ends in this transaction.
    loop {
        let (acted, callbacks) = act_on_due(ctx)?;
        made += callbacks;
        if acted < DUE_PER_TRANSACTION {
            return Ok(made);
        }
    }
}

/// Acts on one page of due batches: how many it acted on, and how many callbacks it made.
fn act_on_due(ctx: &mut WriteCtx<'_>) -> Result<(usize, usize)> {
    let due = ctx.db.query(SELECT_DUE, &Params::NONE, |r| {
        Ok(DueBatch {
            id: BatchId(r.get(0)?),
            open: r.get(1)?,
            total: r.get(2)?,
            completed: r.get(3)?,
            failed: r.get(4)?,
            cancelled: r.get(5)?,
            on_success: r.get(6)?,
            on_complete: r.get(7)?,
            completed_at: r.get(8)?,
            succeeded_at: r.get(9)?,
            description: r.get(10)?,
        })
    })?;
    let acted = due.len();
    let mut made = 0;
    for batch in due {
        let ended = !batch.open && batch.completed + batch.failed + batch.cancelled == batch.total;
        let succeeded = !batch.open && batch.completed == batch.total;
        let completes = ended && batch.completed_at.is_none();
        let succeeds = succeeded && batch.succeeded_at.is_none();
        let (mut complete, mut success) = (Made::default(), Made::default());
        if completes || succeeds {
            let counts = counts_for_callback(ctx, &batch)?;
            if completes && let Some(template) = &batch.on_complete {
                complete = make_callback(ctx, batch.id, "on_complete", template, &counts)?;
            }
            if succeeds && let Some(template) = &batch.on_success {
                success = make_callback(ctx, batch.id, "on_success", template, &counts)?;
            }
        }
        made += usize::from(complete.job.is_some()) + usize::from(success.job.is_some());
        let at = |now: bool| now.then_some(ctx.now_ms);
        ctx.db.execute(
            RECORD_END,
            &params![
                at(completes),
                at(succeeds),
                complete.job.map(|j| j.0),
                success.job.map(|j| j.0),
                complete.error.as_deref(),
                success.error.as_deref(),
                batch.id.0
            ],
        )?;
    }
    Ok((acted, made))
}

/// What became of one callback: the job made, or why none could be.
#[derive(Default)]
struct Made {
    job: Option<JobId>,
    error: Option<String>,
}

/// The `batch` member a callback's data gets.
fn counts_for_callback(ctx: &WriteCtx<'_>, batch: &DueBatch) -> Result<Value> {
    let failed_ids: Vec<i64> = if batch.failed > 0 {
        ctx.db.query(
            SELECT_FAILED,
            &params![batch.id.0, MAX_CALLBACK_FAILED_IDS as i64],
            |r| r.get(0),
        )?
    } else {
        Vec::new()
    };
    let counts = [batch.total, batch.completed, batch.failed, batch.cancelled];
    Ok(counts_member(
        batch.id.0,
        batch.description.as_deref(),
        counts,
        &failed_ids,
    ))
}

/// Pushes one callback, in a savepoint of its own. One refused for good (its stored job no longer passes validation,
/// say a data limit lowered since) is logged, and the batch's end recorded without it but with the reason, which the
/// batch shows: a callback that can never be made must not hold up every later transaction. Any other error (the
/// database out of reach, a lock that timed out) fails the transaction, which runs again.
fn make_callback(
    ctx: &mut WriteCtx<'_>,
    batch: BatchId,
    which: &'static str,
    template: &str,
    counts: &Value,
) -> Result<Made> {
    let made = in_savepoint(ctx, |ctx| {
        let mut push = stored_push::from_json(template)?;
        if let Value::Object(data) = &mut push.data {
            data.insert("batch".to_owned(), counts.clone());
        }
        insert(&push, ctx)
    });
    match made {
        Ok(enqueued) => Ok(Made {
            job: Some(enqueued.id),
            error: None,
        }),
        Err(e) if matches!(e.kind(), ErrorKind::InvalidInput | ErrorKind::InvalidState) => {
            tracing::error!(batch = batch.0, callback = which, error = %e, "a batch's callback could not be made; the batch's end is recorded without it");
            Ok(Made {
                job: None,
                error: Some(e.to_string()),
            })
        }
        Err(e) => Err(e),
    }
}

/// The columns [`batch_from_row`] reads. A macro so that statements can `concat!` it.
macro_rules! batch_columns {
    () => {
        "id, description, open, total, completed, failed, cancelled, created_at, completed_at, succeeded_at, \
         on_success, on_complete, success_job, complete_job, success_error, complete_error"
    };
}

fn batch_from_row(r: &Row<'_>) -> Result<Batch> {
    let callback = |template: Option<String>,
                    job: Option<i64>,
                    error: Option<String>|
     -> Result<Option<BatchCallback>> {
        template
            .map(|t| {
                let push = stored_push::from_json(&t)?;
                Ok(BatchCallback {
                    queue: QueueName::from_trusted(push.queue),
                    name: JobName::from_trusted(push.name),
                    job: job.map(JobId),
                    error,
                })
            })
            .transpose()
    };
    let count = |i: usize| -> Result<u64> { Ok(r.get::<i64>(i)?.max(0) as u64) };
    let (total, completed, failed, cancelled) = (count(3)?, count(4)?, count(5)?, count(6)?);
    let open: bool = r.get(2)?;
    let completed_at = r.get::<Option<i64>>(8)?.map(from_millis);
    Ok(Batch {
        id: BatchId(r.get(0)?),
        description: r.get(1)?,
        state: if open {
            BatchState::Open
        } else if completed_at.is_some() {
            BatchState::Completed
        } else {
            BatchState::Running
        },
        total,
        pending: total.saturating_sub(completed + failed + cancelled),
        completed,
        failed,
        cancelled,
        created_at: from_millis(r.get(7)?),
        completed_at,
        succeeded_at: r.get::<Option<i64>>(9)?.map(from_millis),
        on_success: callback(r.get(10)?, r.get(12)?, r.get(14)?)?,
        on_complete: callback(r.get(11)?, r.get(13)?, r.get(15)?)?,
    })
}

const SELECT_BATCH: Sql = Sql::both(concat!(
    "SELECT ",
    batch_columns!(),
    " FROM batches WHERE id = $1"
));

/// One batch.
///
/// # Errors
/// [`ErrorKind::NotFound`].
pub(crate) fn load_batch(db: &Db<'_>, id: BatchId) -> Result<Batch> {
    db.query_row(SELECT_BATCH, &params![id.0], batch_from_row)?
        .ok_or_else(|| Error::not_found(format!("batch {id}")))
}

/// Batches by id, newest first. `$1` below this id, `$2` the state (0 any, 1 open, 2 running, 3 completed), `$3`
/// at most this many.
const LIST_BATCHES: Sql = Sql::both(concat!(
    "SELECT ",
    batch_columns!(),
    " FROM batches WHERE id < $1 AND ($2 = 0 OR ($2 = 1 AND open) OR ($2 = 2 AND NOT open AND completed_at IS NULL) \
     OR ($2 = 3 AND completed_at IS NOT NULL)) ORDER BY id DESC LIMIT $3"
));

/// The batches `filter` lists, newest first.
///
/// # Errors
/// [`ErrorKind::InvalidInput`] on `limit` outside 1 to [`MAX_PAGE`](crate::MAX_PAGE).
pub(crate) fn list_batches(db: &Db<'_>, filter: &BatchFilter) -> Result<Vec<Batch>> {
    if !(1..=crate::MAX_PAGE).contains(&filter.limit) {
        return Err(Error::invalid(
            "limit",
            format!(
                "must be between 1 and {}, got {}",
                crate::MAX_PAGE,
                filter.limit
            ),
        ));
    }
    let state: i64 = match filter.state {
        None => 0,
        Some(BatchState::Open) => 1,
        Some(BatchState::Running) => 2,
        Some(BatchState::Completed) => 3,
    };
    let before = filter.before.map_or(i64::MAX, |b| b.0);
    db.query(
        LIST_BATCHES,
        &params![before, state, i64::from(filter.limit)],
        batch_from_row,
    )
}
