//! Recurring templates: [`Recurring`] says "create this job at every slot of this cron schedule". [`SetRecurring`]
//! and [`RemoveRecurring`] manage them; [`create_due_runs`] is the writer's timed step that creates the jobs.
//!
//! A template row keeps the earliest slot not yet created (`next_slot_at`). The step that creates a slot's job
//! moves it on in the same transaction, so a slot is created at most once, whatever restarts or clock jumps happen.

use std::time::Duration;

use crate::store::db::{Db, Params, Sql, params};
use jiff::Timestamp;
use serde_json::{Value, json};

use crate::clock::{duration_millis, from_millis, to_millis};
use crate::error::{Error, Result};
use crate::job::JobId;
use crate::names::RecurringKey;
use crate::ops::cancel::job_state;
use crate::ops::push::{Push, check, insert};
use crate::ops::{Limits, Operation, WriteCtx, in_savepoint, waiting};
use crate::retry_policy::RetryPolicy;
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
    fn as_str(self) -> &'static str {
        match self {
            MissedSlots::Skip => "skip",
            MissedSlots::RunOnce => "once",
            MissedSlots::RunAll => "all",
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
}

/// Creates or replaces a recurring template. Its next slot counts from now.
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

/// A template's job as stored. Every field of [`Push`] is named, so that a field added to a push must be given a
/// place here (or a reason to stay out) before this compiles; [`template_from_json`] reads back each one stored.
fn template_to_json(push: &Push) -> Value {
    let Push {
        queue,
        name,
        data,
        priority,
        weight,
        retry,
        lease_timeout,
        timeout,
        tags,
        unique_key,
        concurrency,
        // Refused in a template by `SetRecurring::check`: the cron schedule times each run, and a run has no
        // parent, dependencies or schedule of its own.
        run_at: _,
        delay: _,
        parent: _,
        depends_on: _,
        schedule: _,
        time_zone: _,
        debounce: _,
        throttle: _,
        // Refused too: each run is a trace of its own, not a part of the request that set the template.
        trace_parent: _,
    } = push;
    json!({
        "queue": queue,
        "name": name,
        "data": data,
        "priority": priority,
        "weight": weight,
        "lease_timeout_ms": lease_timeout.map(duration_millis),
        "timeout_ms": timeout.map(duration_millis),
        "retry": retry.map(|r| json!({
            "max_attempts": r.max_attempts,
            "initial_ms": duration_millis(r.initial_delay),
            "multiplier": r.multiplier,
            "max_ms": duration_millis(r.max_delay),
            "jitter": r.jitter,
        })),
        "tags": tags,
        "unique_key": unique_key,
        "concurrency": concurrency.as_ref().map(|c| json!({"key": c.key, "limit": c.limit})),
    })
}

fn template_from_json(text: &str) -> Result<Push> {
    let broken = |what: &str| {
        Error::new(
            crate::ErrorKind::Storage,
            format!("a stored recurring template has {what}"),
        )
    };
    let v: Value = serde_json::from_str(text).map_err(|_| broken("invalid JSON"))?;
    let text_of = |key: &str| {
        v[key]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| broken(&format!("no {key}")))
    };
    let millis = |v: &Value| v.as_u64().map(Duration::from_millis);
    let mut push = Push::new(text_of("name")?)
        .queue(text_of("queue")?)
        .data(v["data"].clone());
    push.priority = v["priority"]
        .as_i64()
        .and_then(|p| i32::try_from(p).ok())
        .unwrap_or(0);
    push.weight = v["weight"]
        .as_u64()
        .and_then(|w| u32::try_from(w).ok())
        .unwrap_or(1);
    push.lease_timeout = millis(&v["lease_timeout_ms"]);
    // Absent from templates stored before it was kept: those runs have no limit, as they had.
    push.timeout = millis(&v["timeout_ms"]);
    push.unique_key = v["unique_key"].as_str().map(str::to_owned);
    push.concurrency = v["concurrency"]["key"]
        .as_str()
        .map(|key| crate::ops::push::Concurrency {
            key: key.to_owned(),
            limit: v["concurrency"]["limit"]
                .as_u64()
                .and_then(|l| u32::try_from(l).ok()),
        });
    if let Some(r) = v["retry"].as_object() {
        push.retry = Some(RetryPolicy {
            max_attempts: r["max_attempts"]
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .unwrap_or(1),
            initial_delay: millis(&r["initial_ms"]).unwrap_or_default(),
            multiplier: r["multiplier"].as_f64().unwrap_or(1.0),
            max_delay: millis(&r["max_ms"]).unwrap_or_default(),
            jitter: r["jitter"].as_f64().unwrap_or(0.0),
        });
    }
    push.tags = v["tags"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t.as_str().map(str::to_owned))
        .collect();
    Ok(push)
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
        let job = &r.job;
        let timed_elsewhere = [
            ("job.run_at", job.run_at.is_some()),
            ("job.delay", job.delay.is_some()),
            ("job.parent", job.parent.is_some()),
            ("job.depends_on", !job.depends_on.is_empty()),
            ("job.schedule", job.schedule.is_some()),
            ("job.debounce", job.debounce.is_some()),
            ("job.throttle", job.throttle.is_some()),
        ];
        if let Some((field, _)) = timed_elsewhere.iter().find(|(_, set)| *set) {
            return Err(Error::invalid(
                field,
                "must be unset in a recurring template: its cron schedule times each run",
            ));
        }
        if job.trace_parent.is_some() {
            return Err(Error::invalid(
                "job.trace_parent",
                "must be unset in a recurring template: each run is a trace of its own",
            ));
        }
        check(job, now_ms, limits)?;
        Ok((key, cron))
    }
}

impl Operation for SetRecurring {
    type Output = RecurringInfo;

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<RecurringInfo> {
        let (key, cron) = self.check(ctx.now_ms, ctx.limits())?;
        let r = &self.recurring;
        let job = &r.job;
        let stored: Option<(String, String, Option<i64>, Option<i64>)> = ctx.db.query_row(
            // Locked: the leader may be creating this template's slot (see `create_due_runs`).
            Sql {
                sqlite: "SELECT cron, time_zone, next_slot_at, last_slot_at FROM recurring WHERE key = $1",
                postgres: "SELECT cron, time_zone, next_slot_at, last_slot_at FROM recurring WHERE key = $1 \
                           FOR UPDATE",
            },
            &params![key.as_str()],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )?;
        let next = match stored {
            // The same schedule: a slot already due but not yet created stays due.
            Some((c, z, pending, _)) if c == cron.as_str() && z == cron.time_zone() => {
                pending.map(from_millis)
            }
            // A new schedule counts from now, and never from before the last slot created (the clock may be behind).
            Some((_, _, _, last)) => {
                cron.next_after(from_millis(last.map_or(ctx.now_ms, |l| l.max(ctx.now_ms))))
            }
            None => cron.next_after(from_millis(ctx.now_ms)),
        };
        ctx.db.execute(
            UPSERT_RECURRING,
            &params![
                key.as_str(),
                cron.as_str(),
                cron.time_zone(),
                r.missed.as_str(),
                template_to_json(job).to_string(),
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
    let job = template_from_json(template)?;
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

/// Lists the templates, by key.
pub(crate) fn list_recurring(db: &Db<'_>) -> Result<Vec<RecurringInfo>> {
    db.query(
        Sql::both(
            "SELECT key, cron, time_zone, next_slot_at, last_slot_at, overlap FROM recurring ORDER BY key",
        ),
        &Params::NONE,
        |r| {
            Ok(RecurringInfo {
                key: r.get(0)?,
                cron: r.get(1)?,
                time_zone: r.get(2)?,
                next_run: r.get::<Option<i64>>(3)?.map(from_millis),
                last_run: r.get::<Option<i64>>(4)?.map(from_millis),
                overlap: Overlap::parse(&r.get::<String>(5)?).unwrap_or_default(),
            })
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every field a template keeps comes back as it was set, none at its default.
    #[test]
    fn a_template_keeps_every_field_of_its_job() {
        let job = Push::new("report.build")
            .queue("reports")
            .data(json!({"b": 1, "a": [true, null]}))
            .priority(-7)
            .weight(3)
            .retry(RetryPolicy {
                max_attempts: 9,
                initial_delay: Duration::from_millis(1500),
                multiplier: 1.5,
                max_delay: Duration::from_secs(600),
                jitter: 0.25,
            })
            .lease_timeout(Duration::from_secs(45))
            .timeout(Duration::from_secs(300))
            .tag("nightly")
            .tag("finance")
            .unique_key("report:nightly");
        let stored = template_to_json(&job).to_string();
        assert_eq!(template_from_json(&stored).unwrap(), job);
    }
}
