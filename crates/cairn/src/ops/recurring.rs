//! Recurring templates: [`Recurring`] says "create this job at every slot of this cron schedule". [`SetRecurring`]
//! and [`RemoveRecurring`] manage them; [`create_due_runs`] is the writer's timed step that creates the jobs.
//!
//! A template row keeps the earliest slot not yet created (`next_slot_at`). The step that creates a slot's job
//! moves it on in the same transaction, so a slot is created at most once, whatever restarts or clock jumps happen.

use std::time::Duration;

use crate::store::db::{Db, Params, Sql, params};
use jiff::Timestamp;

use crate::clock::{from_millis, to_millis};
use crate::error::{Error, Result};
use crate::names::JobId;
use crate::names::RecurringKey;
use crate::ops::cancel::job_state;
use crate::ops::push::{Enqueued, Push, insert};
use crate::ops::stored_push;
use crate::ops::{Limits, Operation, WriteCtx, in_savepoint, waiting};
use crate::schedule::cron::Cron;

/// What happens to slots that passed while nobody created their jobs (the queue was closed, or the clock jumped).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MissedSlots {
    /// Drop them: only a slot less than a minute late still runs.
    Skip,
    /// Run once for all of them, at the latest one. The default.
    #[default]
    RunOnce,
    /// Run every one of them, each as its own job.
    RunAll,
}

impl MissedSlots {
    /// The policy's name, as the API and the CLI take it: `skip`, `once` or `all`.
    pub fn as_str(self) -> &'static str {
        match self {
            MissedSlots::Skip => "skip",
            MissedSlots::RunOnce => "once",
            MissedSlots::RunAll => "all",
        }
    }

    /// The policy named `name`.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) on `missed` for another name.
    pub fn parse(name: &str) -> Result<MissedSlots> {
        match name {
            "skip" => Ok(MissedSlots::Skip),
            "once" => Ok(MissedSlots::RunOnce),
            "all" => Ok(MissedSlots::RunAll),
            other => Err(Error::invalid(
                "missed",
                format!("must be skip, once or all, got {other:?}"),
            )),
        }
    }

    fn parse_stored(text: &str) -> MissedSlots {
        match text {
            "skip" => MissedSlots::Skip,
            "all" => MissedSlots::RunAll,
            _ => MissedSlots::RunOnce,
        }
    }
}

/// What a template does when the job it created at the previous slot is still live (scheduled, queued, waiting
/// for something, or running) when the next slot comes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Overlap {
    /// Create the next run anyway: runs may overlap. The default.
    #[default]
    Allow,
    /// Create nothing at this slot: at most one run is live at a time.
    Skip,
    /// Cancel the previous run (a running one's worker is refused from then on) and create the next.
    Replace,
}

impl Overlap {
    /// The policy's name, as the API and the CLI take it: `allow`, `skip` or `replace`.
    pub fn as_str(self) -> &'static str {
        match self {
            Overlap::Allow => "allow",
            Overlap::Skip => "skip",
            Overlap::Replace => "replace",
        }
    }

    /// The policy named `name`.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) on `overlap` for another name.
    pub fn parse(name: &str) -> Result<Overlap> {
        match name {
            "allow" => Ok(Overlap::Allow),
            "skip" => Ok(Overlap::Skip),
            "replace" => Ok(Overlap::Replace),
            other => Err(Error::invalid(
                "overlap",
                format!("must be allow, skip or replace, got {other:?}"),
            )),
        }
    }
}

/// How late a slot may be and still run under [`MissedSlots::Skip`].
const SKIP_GRACE: Duration = Duration::from_secs(60);

/// The most slots one step creates for one template under [`MissedSlots::RunAll`]; the rest follow at once.
const MAX_SLOTS_PER_STEP: usize = 1000;

/// A recurring template: at every slot of `cron` in `time_zone`, a job like `job` is created, due at the slot.
#[derive(Debug, Clone, PartialEq)]
pub struct Recurring {
    /// The template's key; setting a template with an existing key replaces it.
    pub key: String,
    /// A cron expression (see [`Cron`]).
    pub cron: String,
    /// An IANA time zone such as `Europe/Berlin`, or `UTC`.
    pub time_zone: String,
    /// What to do with slots that passed unseen.
    pub missed: MissedSlots,
    /// What to do at a slot when the previous run is still live.
    pub overlap: Overlap,
    /// The job to create at each slot. Its `run_at`, `delay`, `parent`, `depends_on`, `schedule`, `debounce` and
    /// `throttle` must be unset: the slot times each run; and its `trace_parent`: each run is a trace of its own. A `unique_key` makes a slot add nothing while a live job
    /// holds the key.
    pub job: Push,
}

/// A template as stored, and when it runs next.
#[derive(Debug, Clone, PartialEq)]
pub struct RecurringInfo {
    /// The template's key.
    pub key: String,
    /// Its cron expression.
    pub cron: String,
    /// Its time zone.
    pub time_zone: String,
    /// The next slot, if the schedule has one.
    pub next_run: Option<Timestamp>,
    /// The latest slot a job was created for.
    pub last_run: Option<Timestamp>,
    /// What it does at a slot when the previous run is still live.
    pub overlap: Overlap,
    /// Whether it is paused: it creates no job, and has no next run, until resumed.
    pub paused: bool,
    /// The last job it created (at a slot, or run by hand), which its overlap policy looks at; it may be gone since.
    pub last_job: Option<JobId>,
    /// What it does with slots that passed unseen.
    pub missed: MissedSlots,
    /// The job it creates at each slot, as it was set.
    pub job: Push,
}

/// Creates or replaces a recurring template. Its next slot counts from now; a paused template stays paused.
#[derive(Debug, Clone, PartialEq)]
pub struct SetRecurring {
    /// The template.
    pub recurring: Recurring,
}

/// Removes a recurring template; jobs it already created are untouched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoveRecurring {
    /// The template's key.
    pub key: String,
}

const UPSERT_RECURRING: Sql = Sql::both(
    "INSERT INTO recurring \
     (key, cron, time_zone, missed, template, next_slot_at, created_at, overlap) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
     ON CONFLICT (key) DO UPDATE SET cron = excluded.cron, time_zone = excluded.time_zone, \
     missed = excluded.missed, template = excluded.template, next_slot_at = excluded.next_slot_at, \
     overlap = excluded.overlap",
);

impl SetRecurring {
    /// Checks the template before anything is written: its key, its schedule, and its job as a push at `now_ms`.
    pub(crate) fn check(&self, now_ms: i64, limits: &Limits) -> Result<(RecurringKey, Cron)> {
        let r = &self.recurring;
        let key = RecurringKey::parse(r.key.as_str())?;
        let cron = Cron::parse(&r.cron, &r.time_zone)?;
        stored_push::check(
            &r.job,
            "job",
            "in a recurring template: its cron schedule makes each run",
            now_ms,
            limits,
        )?;
        Ok((key, cron))
    }
}

impl Operation for SetRecurring {
    type Output = RecurringInfo;

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<RecurringInfo> {
        let (key, cron) = self.check(ctx.now_ms, ctx.limits())?;
        let r = &self.recurring;
        let job = &r.job;
        // Locked: the leader may be creating this template's slot (see `create_due_runs`).
        let stored = match stored_template(ctx, key.as_str()) {
            Ok(stored) => Some(stored),
            Err(e) if e.kind() == crate::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        let paused = stored.as_ref().is_some_and(|s| s.paused);
        let stored_last_job = stored.as_ref().and_then(|s| s.last_job);
        let next = match stored {
            // Paused: no next run until resumed.
            Some(_) if paused => None,
            // The same schedule: a slot already due but not yet created stays due.
            Some(s) if s.cron == cron.as_str() && s.zone == cron.time_zone() => {
                s.next_slot.map(from_millis)
            }
            // A new schedule counts from now, and never from before the last slot created (the clock may be behind).
            Some(s) => cron.next_after(from_millis(
                s.last_slot.map_or(ctx.now_ms, |l| l.max(ctx.now_ms)),
            )),
            None => cron.next_after(from_millis(ctx.now_ms)),
        };
        ctx.db.execute(
            UPSERT_RECURRING,
            &params![
                key.as_str(),
                cron.as_str(),
                cron.time_zone(),
                r.missed.as_str(),
                stored_push::to_json(job).to_string(),
                next.map(to_millis),
                ctx.now_ms,
                r.overlap.as_str()
            ],
        )?;
        let last: Option<i64> = ctx.db.query_one(
            Sql::both("SELECT last_slot_at FROM recurring WHERE key = $1"),
            &params![key.as_str()],
            |row| row.get(0),
        )?;
        Ok(RecurringInfo {
            key: key.to_string(),
            cron: cron.as_str().to_owned(),
            time_zone: cron.time_zone().to_owned(),
            next_run: next,
            last_run: last.map(from_millis),
            overlap: r.overlap,
            paused,
            last_job: stored_last_job,
            missed: r.missed,
            job: job.clone(),
        })
    }
}

impl Operation for RemoveRecurring {
    type Output = ();

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<()> {
        let removed = ctx.db.execute(
            Sql::both("DELETE FROM recurring WHERE key = $1"),
            &params![&self.key],
        )?;
        if removed == 0 {
            return Err(Error::not_found(format!(
                "recurring template {:?}",
                self.key
            )));
        }
        Ok(())
    }
}

/// On PostgreSQL the templates are locked, skipping any another transaction holds (one being changed, or another
/// node creating its slot around a handover of the lead): a skipped template is taken at the next pass, and once
/// taken, its `next_slot_at` is checked again on the newest row, so no slot is created twice.
const SELECT_DUE_TEMPLATES: Sql = Sql {
    sqlite: "SELECT key, cron, time_zone, missed, template, next_slot_at, overlap, last_job_id \
             FROM recurring INDEXED BY recurring_due WHERE next_slot_at IS NOT NULL AND next_slot_at <= $1 \
             ORDER BY next_slot_at LIMIT 100",
    postgres: "SELECT key, cron, time_zone, missed, template, next_slot_at, overlap, last_job_id \
               FROM recurring WHERE next_slot_at IS NOT NULL AND next_slot_at <= $1 \
               ORDER BY next_slot_at LIMIT 100 FOR UPDATE SKIP LOCKED",
};

const ADVANCE_TEMPLATE: Sql = Sql::both(
    "UPDATE recurring SET next_slot_at = $1, \
     last_slot_at = COALESCE($2, last_slot_at), last_job_id = COALESCE($3, last_job_id) WHERE key = $4",
);

/// Creates the jobs of every template slot that is due, as each template's missed-slot policy says, and moves the
/// templates on. Returns how many jobs it created.
pub(crate) fn create_due_runs(ctx: &mut WriteCtx<'_>) -> Result<usize> {
    let due: Vec<DueTemplate> = ctx
        .db
        .query(SELECT_DUE_TEMPLATES, &params![ctx.now_ms], |r| {
            Ok(DueTemplate {
                key: r.get(0)?,
                cron: r.get(1)?,
                zone: r.get(2)?,
                missed: r.get(3)?,
                template: r.get(4)?,
                next_slot: r.get(5)?,
                overlap: r.get(6)?,
                last_job: r.get::<Option<i64>>(7)?.map(JobId),
            })
        })?;
    let now = from_millis(ctx.now_ms);
    let mut created = 0;
    for due in due {
        let DueTemplate {
            key,
            cron,
            zone,
            missed,
            template,
            next_slot,
            ..
        } = &due;
        let (key, next_slot) = (key.as_str(), *next_slot);
        let cron = match Cron::parse(cron, zone) {
            Ok(cron) => cron,
            Err(e) => {
                // Only possible if the time zone database changed under a stored template: stop it, loudly.
                tracing::error!(key, error = %e, "a recurring template no longer parses; it is stopped");
                let params = &params![None::<i64>, None::<i64>, None::<i64>, key];
                ctx.db.execute(ADVANCE_TEMPLATE, params)?;
                continue;
            }
        };
        let first = from_millis(next_slot);
        let policy = MissedSlots::parse_stored(missed);
        let (chosen, latest) = match policy {
            MissedSlots::RunAll => {
                let mut slots = vec![first];
                while slots.len() < MAX_SLOTS_PER_STEP {
                    match cron.next_after(*slots.last().expect("never empty")) {
                        Some(next) if next <= now => slots.push(next),
                        _ => break,
                    }
                }
                let latest = *slots.last().expect("never empty");
                (slots, latest)
            }
            MissedSlots::RunOnce | MissedSlots::Skip => {
                let latest = last_slot_at_or_before(&cron, first, now);
                let late = now.duration_since(latest);
                let on_time =
                    late <= jiff::SignedDuration::try_from(SKIP_GRACE).unwrap_or_default();
                let chosen = if policy == MissedSlots::Skip && !on_time {
                    Vec::new()
                } else {
                    vec![latest]
                };
                (chosen, latest)
            }
        };
        // Each template in its own savepoint: one that cannot create its job (its stored job no longer passes
        // validation, say) skips its slots with an error in the log, and holds up nothing else.
        let overlap = Overlap::parse(&due.overlap).unwrap_or_default();
        let mut last_job = None;
        match in_savepoint(ctx, |ctx| {
            create_slots(ctx, key, template, &chosen, overlap, due.last_job)
        }) {
            Ok((made, last)) => {
                created += made;
                last_job = last;
            }
            Err(e) => {
                tracing::error!(key, error = %e, "a recurring template could not create its job; its slot is skipped")
            }
        }
        let params = &params![
            cron.next_after(latest).map(to_millis),
            chosen.last().map(|t| to_millis(*t)),
            last_job,
            key
        ];
        ctx.db.execute(ADVANCE_TEMPLATE, params)?;
    }
    Ok(created)
}

/// A template whose next slot is due, as read.
struct DueTemplate {
    key: String,
    cron: String,
    zone: String,
    missed: String,
    template: String,
    next_slot: i64,
    overlap: String,
    last_job: Option<JobId>,
}

/// Creates one job from a template for each slot, as its overlap policy allows given the run it created last
/// (`previous`). Returns how many it created, and the last one's id.
fn create_slots(
    ctx: &mut WriteCtx<'_>,
    key: &str,
    template: &str,
    slots: &[Timestamp],
    overlap: Overlap,
    mut previous: Option<JobId>,
) -> Result<(usize, Option<JobId>)> {
    let job = stored_push::from_json(template)?;
    let mut made = 0;
    let mut last = None;
    for slot in slots {
        let live = match previous {
            Some(id) if overlap != Overlap::Allow => is_live(ctx, id)?,
            _ => false,
        };
        if live {
            let id = previous.expect("a live previous run");
            match overlap {
                Overlap::Skip => {
                    tracing::info!(key, job = %id, slot = %slot, "recurring template: its previous run is still live; the slot is skipped");
                    continue;
                }
                Overlap::Replace => {
                    let reason = format!("replaced by the next run of recurring template {key:?}");
                    waiting::cancel_jobs(ctx, vec![(id, Some(reason))])?;
                }
                Overlap::Allow => {}
            }
        }
        let enqueued = insert(&job.clone().run_at(*slot), ctx)?;
        if enqueued.existing {
            // A live job holds the template's unique key: this slot adds nothing.
            tracing::info!(key, job = %enqueued.id, slot = %slot, "recurring template: a live job holds its unique key; the slot is skipped");
            continue;
        }
        made += 1;
        last = Some(enqueued.id);
        previous = Some(enqueued.id);
    }
    Ok((made, last))
}

/// Whether a job is still to run or running; a job that is gone (deleted, or removed by retention) is not.
fn is_live(ctx: &WriteCtx<'_>, id: JobId) -> Result<bool> {
    match job_state(ctx, id) {
        Ok(state) => Ok(state.is_live()),
        Err(e) if e.kind() == crate::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// The latest slot at or before `now`, given that `first` (at or before `now`) is one. Looks back from `now` over
/// doubling windows, so a long downtime costs a few steps, not one per missed slot.
fn last_slot_at_or_before(cron: &Cron, first: Timestamp, now: Timestamp) -> Timestamp {
    let mut window = jiff::SignedDuration::from_secs(1);
    let mut slot = loop {
        let from = now
            .checked_sub(window)
            .unwrap_or(first)
            .max(first - jiff::SignedDuration::from_millis(1));
        match cron.next_after(from) {
            Some(slot) if slot <= now => break slot,
            _ if from < first => break first,
            _ => window = window.checked_mul(2).unwrap_or(jiff::SignedDuration::MAX),
        }
    };
    while let Some(next) = cron.next_after(slot).filter(|next| *next <= now) {
        slot = next;
    }
    slot
}

/// The columns [`info_from_row`] reads. A macro so that statements can `concat!` it.
macro_rules! info_columns {
    () => {
        "key, cron, time_zone, next_slot_at, last_slot_at, overlap, paused, last_job_id, missed, template"
    };
}

fn info_from_row(r: &crate::store::db::Row<'_>) -> Result<RecurringInfo> {
    Ok(RecurringInfo {
        key: r.get(0)?,
        cron: r.get(1)?,
        time_zone: r.get(2)?,
        next_run: r.get::<Option<i64>>(3)?.map(from_millis),
        last_run: r.get::<Option<i64>>(4)?.map(from_millis),
        overlap: Overlap::parse(&r.get::<String>(5)?).unwrap_or_default(),
        paused: r.get(6)?,
        last_job: r.get::<Option<i64>>(7)?.map(JobId),
        missed: MissedSlots::parse_stored(&r.get::<String>(8)?),
        job: stored_push::from_json(&r.get::<String>(9)?)?,
    })
}

/// Lists the templates, by key.
pub(crate) fn list_recurring(db: &Db<'_>) -> Result<Vec<RecurringInfo>> {
    db.query(
        Sql::both(concat!(
            "SELECT ",
            info_columns!(),
            " FROM recurring ORDER BY key"
        )),
        &Params::NONE,
        info_from_row,
    )
}

/// One template as it stands.
pub(crate) fn load_info(db: &Db<'_>, key: &str) -> Result<RecurringInfo> {
    db.query_row(
        Sql::both(concat!(
            "SELECT ",
            info_columns!(),
            " FROM recurring WHERE key = $1"
        )),
        &params![key],
        info_from_row,
    )?
    .ok_or_else(|| Error::not_found(format!("recurring template {key:?}")))
}

/// Pauses a recurring template: it creates no job, and has no next run, until resumed ([`ResumeRecurring`]).
/// Pausing a paused template changes nothing. Answers with the template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PauseRecurring {
    /// The template's key.
    pub key: String,
}

/// Resumes a paused recurring template: its next slot counts from now, so the slots it passed paused are not made
/// up. Resuming one that is not paused changes nothing. Answers with the template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResumeRecurring {
    /// The template's key.
    pub key: String,
}

/// Creates a template's job now, outside its schedule, as a slot would now: the template's overlap policy and unique
/// key hold, and it becomes the previous run the next slot looks at. The schedule is untouched, paused or not.
/// Answers with the job; `existing` when a live job holds the template's unique key (and that is the job).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRecurring {
    /// The template's key.
    pub key: String,
}

/// A template's row for setting, pausing or running it; locked on PostgreSQL, as the leader may be creating its slot.
const SELECT_TEMPLATE: Sql = Sql {
    sqlite: "SELECT cron, time_zone, template, overlap, last_job_id, last_slot_at, paused, next_slot_at \
             FROM recurring WHERE key = $1",
    postgres: "SELECT cron, time_zone, template, overlap, last_job_id, last_slot_at, paused, next_slot_at \
               FROM recurring WHERE key = $1 FOR UPDATE",
};

/// A template as [`SELECT_TEMPLATE`] reads it.
struct StoredTemplate {
    cron: String,
    zone: String,
    template: String,
    overlap: String,
    last_job: Option<JobId>,
    last_slot: Option<i64>,
    paused: bool,
    next_slot: Option<i64>,
}

fn stored_template(ctx: &WriteCtx<'_>, key: &str) -> Result<StoredTemplate> {
    ctx.db
        .query_row(SELECT_TEMPLATE, &params![key], |r| {
            Ok(StoredTemplate {
                cron: r.get(0)?,
                zone: r.get(1)?,
                template: r.get(2)?,
                overlap: r.get(3)?,
                last_job: r.get::<Option<i64>>(4)?.map(JobId),
                last_slot: r.get(5)?,
                paused: r.get(6)?,
                next_slot: r.get(7)?,
            })
        })?
        .ok_or_else(|| Error::not_found(format!("recurring template {key:?}")))
}

impl Operation for PauseRecurring {
    type Output = RecurringInfo;

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<RecurringInfo> {
        set_paused(ctx, &self.key, true)
    }
}

impl Operation for ResumeRecurring {
    type Output = RecurringInfo;

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<RecurringInfo> {
        set_paused(ctx, &self.key, false)
    }
}

/// Pauses or resumes a template, and answers with it.
fn set_paused(ctx: &mut WriteCtx<'_>, key: &str, paused: bool) -> Result<RecurringInfo> {
    let stored = stored_template(ctx, key)?;
    if stored.paused != paused {
        let next = if paused {
            None
        } else {
            // From now, and never from before the last slot created (the clock may be behind).
            let from = stored.last_slot.map_or(ctx.now_ms, |l| l.max(ctx.now_ms));
            Cron::parse(&stored.cron, &stored.zone)?
                .next_after(from_millis(from))
                .map(to_millis)
        };
        ctx.db.execute(
            Sql::both("UPDATE recurring SET paused = $1, next_slot_at = $2 WHERE key = $3"),
            &params![paused, next, key],
        )?;
    }
    load_info(&ctx.db, key)
}

impl Operation for RunRecurring {
    type Output = Enqueued;

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<Enqueued> {
        let key = self.key.as_str();
        let stored = stored_template(ctx, key)?;
        let overlap = Overlap::parse(&stored.overlap).unwrap_or_default();
        if let Some(previous) = stored.last_job
            && overlap != Overlap::Allow
            && is_live(ctx, previous)?
        {
            if overlap == Overlap::Skip {
                return Err(Error::invalid_state(format!(
                    "recurring template {key:?}: its previous run, job {previous}, is still live, and its overlap \
                     policy is skip"
                )));
            }
            let reason = format!("replaced by a run of recurring template {key:?} made by hand");
            waiting::cancel_jobs(ctx, vec![(previous, Some(reason))])?;
        }
        let job = stored_push::from_json(&stored.template)?;
        let now = from_millis(ctx.now_ms);
        let enqueued = insert(&job.run_at(now), ctx)?;
        if !enqueued.existing {
            ctx.db.execute(
                Sql::both("UPDATE recurring SET last_job_id = $1 WHERE key = $2"),
                &params![enqueued.id, key],
            )?;
        }
        Ok(enqueued)
    }
}
