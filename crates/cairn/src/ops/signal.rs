//! Signals: data sent to a key ([`SendSignal`]), which a job's handler receives as a step of its run
//! ([`WaitForSignal`]). A job that waits gives up its worker until the signal comes or its wait times out; a signal
//! sent while no job waits for its key is kept until one does. Each signal is received once.
//!
//! A wait and a signal of one key take turns (`Dialect::lock_signal_key`), so that on PostgreSQL a wait and a signal
//! racing on two nodes never both find the other missing.

use jiff::Timestamp;
use serde_json::Value;

use crate::clock::from_millis;
use crate::error::{Error, Result};
use crate::job::JobState;
use crate::names::{JobId, SignalKey, StepName};
use crate::ops::events::{ActivityKind, JobRef};
use crate::ops::step::{
    Resume, StepTally, Wake, hold_for_step, store, store_and_tell, stored_step, suspend,
};
use crate::ops::{Operation, WriteCtx, encode_json, lease_refusal, requeue};
use crate::store::db::{Sql, params};

/// Sends `data` to `key`: the job that waits for it (the oldest, if several do) receives
/// it as the result of its waiting step and is ready to run again; with no job waiting, the signal is kept until
/// one waits. A signal whose key only a cancelled job waited for is refused, not kept.
#[derive(Debug, Clone, PartialEq)]
pub struct SendSignal {
    /// The key.
    pub key: SignalKey,
    /// What the waiting job receives: any JSON, at most the largest job data.
    pub data: Value,
}

/// What came of a [`SendSignal`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignalSent {
    /// Job `job` waited for the key and received the signal.
    Delivered {
        /// The job that received it.
        job: JobId,
    },
    /// No job waited for the key: the signal is kept for the first that waits.
    Kept,
}

/// The handler waits, as step `name`, for a signal sent to `key`, until `timeout` after the step is first reached.
/// A signal kept for the key, or one that came while the job was suspended, is received at once; otherwise the job
/// gives up its worker (the lease ends, and the attempt does not count) until a signal comes or the wait times out,
/// and runs again then, replaying its steps, when this step answers what came of it.
#[derive(Debug, Clone, PartialEq)]
pub struct WaitForSignal {
    /// The job.
    pub job: JobId,
    /// The lease's fencing token.
    pub token: i64,
    /// The step's name within the job.
    pub name: StepName,
    /// The key the signal is sent to.
    pub key: SignalKey,
    /// How long the wait lasts from the first time the step is reached, by the queue's clock.
    pub timeout: std::time::Duration,
}

impl WaitForSignal {
    /// Waits as step `name` of the job `lease` holds, for a signal to `key`, until `timeout`.
    pub fn new(
        lease: &crate::Lease,
        name: StepName,
        key: SignalKey,
        timeout: std::time::Duration,
    ) -> Self {
        WaitForSignal {
            job: lease.job,
            token: lease.token,
            name,
            key,
            timeout,
        }
    }
}

/// What came of a [`WaitForSignal`].
#[derive(Debug, Clone, PartialEq)]
pub enum SignalWait {
    /// The signal came: its data. The handler goes on.
    Received(Value),
    /// The wait's time passed with no signal. The handler goes on, and decides.
    TimedOut,
    /// The job waits until a signal comes or this time: its lease is over, and the handler must return (with the
    /// error [`JobContext::wait_for_signal`](crate::JobContext::wait_for_signal) gives it).
    Suspended {
        /// When the wait times out.
        until: Timestamp,
    },
}

/// What a waiting step records when the signal comes, and when the wait times out.
fn received(data: &Value) -> Value {
    serde_json::json!({ "signal": data })
}

fn timed_out() -> Value {
    serde_json::json!({ "timed_out": true })
}

/// The wait a job registered: the key, the step, when it times out.
type Registered = (Option<String>, Option<String>, Option<i64>);

const REGISTERED_WAIT: Sql =
    Sql::both("SELECT signal_key, signal_step, signal_until FROM jobs WHERE id = $1");

const REGISTER_WAIT: Sql =
    Sql::both("UPDATE jobs SET signal_key = $1, signal_step = $2, signal_until = $3 WHERE id = $4");

const CLEAR_WAIT: Sql = Sql::both(
    "UPDATE jobs SET signal_key = NULL, signal_step = NULL, signal_until = NULL WHERE id = $1",
);

/// The oldest signal kept for key `$1`, taken.
const TAKE_KEPT: Sql = Sql::both(
    "DELETE FROM signals WHERE id = (SELECT id FROM signals WHERE key = $1 ORDER BY id LIMIT 1) RETURNING data",
);

const KEEP: Sql =
    Sql::both("INSERT INTO signals (key, data, sent_at) VALUES ($1, $2, $3) RETURNING id");

/// The oldest live job that registered a wait for key `$1`, which receives the signal. Locked on PostgreSQL, so that
/// a cancel on another node either comes first (and the job is not live) or waits for this signal's commit.
const WAITER: Sql = Sql {
    sqlite: concat!(
        "SELECT id, state, signal_step, attempt, step_count, step_bytes, queue, name FROM jobs \
         WHERE signal_key = $1 AND ",
        crate::ops::live!(),
        " ORDER BY id LIMIT 1"
    ),
    postgres: concat!(
        "SELECT id, state, signal_step, attempt, step_count, step_bytes, queue, name FROM jobs \
         WHERE signal_key = $1 AND ",
        crate::ops::live!(),
        " ORDER BY id LIMIT 1 FOR UPDATE"
    ),
};

/// A cancelled job that waited for key `$1`, whose cancel refuses the signal.
const CANCELLED_WAITER: Sql = Sql::both(
    "SELECT id FROM jobs WHERE signal_key = $1 AND state = 'cancelled' ORDER BY id LIMIT 1",
);

impl Operation for WaitForSignal {
    type Output = SignalWait;

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<SignalWait> {
        ctx.db
            .dialect()
            .lock_signal_key(&ctx.db, self.key.as_str())?;
        let Some(held) = hold_for_step(ctx, self.job, self.token)? else {
            return Err(lease_refusal(ctx, self.job, self.token));
        };
        let name = self.name.as_str();
        if let Some(step) = stored_step(ctx, self.job, name)? {
            // Received while the job was suspended, or recorded by an attempt before this one.
            ctx.db.execute(CLEAR_WAIT, &params![self.job.0])?;
            return answer_of(self.job, name, &step.result);
        }
        let at = JobRef {
            id: self.job.0,
            queue: &held.queue,
            name: &held.name,
        };
        let kept: Option<String> =
            ctx.db
                .query_row(TAKE_KEPT, &params![self.key.as_str()], |r| r.get(0))?;
        if let Some(text) = kept {
            let data: Value = serde_json::from_str(&text).map_err(|e| {
                Error::storage("the database holds a signal whose data is not JSON", e)
            })?;
            let result = received(&data);
            let text = format!("{{\"signal\":{text}}}");
            store(ctx, self.job, name, &result, Ok(text), &held.tally)?;
            ctx.db.execute(CLEAR_WAIT, &params![self.job.0])?;
            let detail = format!("step {name}, key {}, sent before the wait", self.key);
            ctx.events.job(
                ctx.now_ms,
                ActivityKind::SignalReceived,
                at,
                Some(&held.worker),
                Some(&detail),
            );
            return Ok(SignalWait::Received(data));
        }
        let registered: Option<Registered> =
            ctx.db
                .query_row(REGISTERED_WAIT, &params![self.job.0], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                })?;
        // A job that runs again before its wait timed out (requeued by hand) waits until the same time.
        let until_ms = match registered {
            Some((Some(key), Some(step), Some(until)))
                if key == self.key.as_str() && step == name =>
            {
                until
            }
            _ => Wake::After(self.timeout).millis_from(ctx.now_ms)?,
        };
        if until_ms <= ctx.now_ms {
            let result = timed_out();
            let text = encode_json("result", &result, ctx.limits());
            store_and_tell(ctx, self.job, &held, name, &result, text)?;
            ctx.db.execute(CLEAR_WAIT, &params![self.job.0])?;
            return Ok(SignalWait::TimedOut);
        }
        ctx.db.execute(
            REGISTER_WAIT,
            &params![self.key.as_str(), name, until_ms, self.job.0],
        )?;
        let until = from_millis(until_ms);
        let detail = format!("step {name}, waiting for signal {} until {until}", self.key);
        suspend(ctx, self.job, self.token, Resume::At(until_ms), &detail)?;
        Ok(SignalWait::Suspended { until })
    }
}

/// What a waiting step recorded, as the handler's answer.
fn answer_of(job: JobId, name: &str, result: &Value) -> Result<SignalWait> {
    if let Some(data) = result.get("signal") {
        return Ok(SignalWait::Received(data.clone()));
    }
    if result.get("timed_out") == Some(&Value::Bool(true)) {
        return Ok(SignalWait::TimedOut);
    }
    Err(Error::invalid(
        "step",
        format!(
            "step {name:?} of job {job} was recorded by something other than a wait for a signal"
        ),
    ))
}

/// A job that registered a wait for a key.
struct Waiter {
    job: JobId,
    state: String,
    step: String,
    tally: StepTally,
    queue: String,
    name: String,
}

impl Operation for SendSignal {
    type Output = SignalSent;

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<SignalSent> {
        let text = encode_json("data", &self.data, ctx.limits())?;
        let key = self.key.as_str();
        ctx.db.dialect().lock_signal_key(&ctx.db, key)?;
        // A key whose wait is registered has its step beside it (`REGISTER_WAIT` writes them together).
        let waiter: Option<Waiter> = ctx.db.query_row(WAITER, &params![key], |r| {
            Ok(Waiter {
                job: JobId(r.get(0)?),
                state: r.get(1)?,
                step: r.get(2)?,
                tally: StepTally {
                    attempt: r.get(3)?,
                    count: r.get(4)?,
                    bytes: r.get(5)?,
                },
                queue: r.get(6)?,
                name: r.get(7)?,
            })
        })?;
        if let Some(waiter) = waiter {
            let step = waiter.step.as_str();
            let result = received(&self.data);
            let text = format!("{{\"signal\":{text}}}");
            store(ctx, waiter.job, step, &result, Ok(text), &waiter.tally)?;
            ctx.db.execute(CLEAR_WAIT, &params![waiter.job.0])?;
            if waiter.state == JobState::Scheduled.as_str() {
                requeue(ctx, waiter.job, &waiter.queue, ctx.now_ms, None)?;
            }
            let detail = format!("step {step}, key {key}");
            let at = JobRef {
                id: waiter.job.0,
                queue: &waiter.queue,
                name: &waiter.name,
            };
            ctx.events.job(
                ctx.now_ms,
                ActivityKind::SignalReceived,
                at,
                None,
                Some(&detail),
            );
            return Ok(SignalSent::Delivered { job: waiter.job });
        }
        let cancelled: Option<i64> = ctx
            .db
            .query_row(CANCELLED_WAITER, &params![key], |r| r.get(0))?;
        if let Some(cancelled) = cancelled {
            return Err(Error::invalid_state(format!(
                "job {cancelled} waited for signal {key:?} and was cancelled: the signal is refused, not kept"
            )));
        }
        ctx.db
            .query_row(KEEP, &params![key, text.as_str(), ctx.now_ms], |r| {
                r.get::<i64>(0)
            })?;
        Ok(SignalSent::Kept)
    }
}

/// Deletes up to `limit` kept signals sent before `cutoff` (no job waited for them within retention's age).
pub(crate) fn prune_kept(ctx: &WriteCtx<'_>, cutoff: i64, limit: i64) -> Result<usize> {
    ctx.db.execute(
        Sql::both(
            "DELETE FROM signals WHERE id IN (SELECT id FROM signals WHERE sent_at < $1 ORDER BY sent_at LIMIT 0 + $2)",
        ),
        &params![cutoff, limit],
    )
}
