//! Fan-out and fan-in as steps of a handler's run: [`Spawn`] pushes child jobs and records their ids, so that a
//! replay does not push them again; [`Join`] waits, without holding a worker, until the job's children have ended,
//! and records what they ended as, so that a replay reads it back.
//!
//! Both build on parents and children (`waiting.rs`): a spawned child is the job's child, and a join is a parent
//! waiting for its children, by the same rules (a failed child holds it, unless the children are the job's own).

use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::job::JobState;
use crate::names::{JobId, StepName};
use crate::ops::push::{Push, insert_all, validate_all};
use crate::ops::step::{Resume, hold_for_step, store_and_tell, stored_step, suspend};
use crate::ops::{Operation, WriteCtx, encode_json, lease_refusal, waiting};
use crate::store::db::{Sql, params};

/// The most jobs one spawn pushes.
pub const MAX_SPAWN: usize = 1000;

/// Pushes `children` as children of the job, as step `name`: their ids are recorded, so that a later attempt gets
/// them back and pushes nothing. They start at once: they are the step's, not the run's, so they neither wait for
/// the run to finish nor go if it fails. Each is a new job: a unique key, debounce or throttle (which may answer with
/// a job already there) is refused.
#[derive(Debug, Clone, PartialEq)]
pub struct Spawn {
    /// The job.
    pub job: JobId,
    /// The lease's fencing token.
    pub token: i64,
    /// The step's name within the job.
    pub name: StepName,
    /// The jobs to push; their parent is the job (a push naming another parent is refused).
    pub children: Vec<Push>,
}

impl Spawn {
    /// Spawns `children` as step `name` of the job `lease` holds.
    pub fn new(lease: &crate::Lease, name: StepName, children: Vec<Push>) -> Self {
        Spawn {
            job: lease.job,
            token: lease.token,
            name,
            children,
        }
    }
}

/// Waits, as step `name`, until every child of the job has ended: a job that has children still to end gives up
/// its worker (the lease ends, and the attempt does not count) and runs again when they have, replaying its steps,
/// and the step then answers how each ended. A child that fails holds the join, as it holds a parent, unless the
/// job's children are its own (`Children::OfTheJob`): requeue it, or cancel it to go on.
#[derive(Debug, Clone, PartialEq)]
pub struct Join {
    /// The job.
    pub job: JobId,
    /// The lease's fencing token.
    pub token: i64,
    /// The step's name within the job.
    pub name: StepName,
}

impl Join {
    /// Joins as step `name` of the job `lease` holds.
    pub fn new(lease: &crate::Lease, name: StepName) -> Self {
        Join {
            job: lease.job,
            token: lease.token,
            name,
        }
    }
}

/// How a child ended, as a [`Join`] answers it.
#[derive(Debug, Clone, PartialEq)]
pub struct JoinedChild {
    /// The child.
    pub id: JobId,
    /// How it ended: completed, cancelled, or (when it does not hold the join) failed.
    pub state: JobState,
    /// Its result, if it completed with one.
    pub result: Option<Value>,
}

impl JoinedChild {
    /// As the join's step records it.
    fn to_json(&self) -> Value {
        json!({ "id": self.id.0, "state": self.state.as_str(), "result": self.result })
    }

    /// As the join's step recorded it.
    pub(crate) fn from_json(value: &Value) -> Option<JoinedChild> {
        Some(JoinedChild {
            id: JobId(value.get("id")?.as_i64()?),
            state: value.get("state")?.as_str()?.parse().ok()?,
            result: value.get("result").filter(|r| !r.is_null()).cloned(),
        })
    }
}

/// What came of a [`Join`].
#[derive(Debug, Clone, PartialEq)]
pub enum Joined {
    /// The children have ended, oldest first. The handler goes on.
    Ended(Vec<JoinedChild>),
    /// The job waits for its children: its lease is over, and the handler must return (with the error
    /// [`JobContext::join`](crate::JobContext::join) gives it).
    Suspended,
}

const START_SPAWNED: Sql = Sql::both(
    "UPDATE jobs SET awaits_parent = FALSE WHERE id = $1 AND awaits_parent = TRUE RETURNING id",
);

impl Operation for Spawn {
    type Output = Vec<JobId>;

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<Vec<JobId>> {
        let Some(held) = hold_for_step(ctx, self.job, self.token)? else {
            return Err(lease_refusal(ctx, self.job, self.token));
        };
        let name = self.name.as_str();
        if let Some(step) = stored_step(ctx, self.job, name)? {
            return spawned_of(self.job, name, &step.result);
        }
        if self.children.len() > MAX_SPAWN {
            return Err(Error::invalid(
                "jobs",
                format!(
                    "a spawn pushes at most {MAX_SPAWN} jobs, got {}; spawn them in steps of that many",
                    self.children.len()
                ),
            ));
        }
        let mut pushes = self.children.clone();
        for (index, push) in pushes.iter_mut().enumerate() {
            if push.parent.is_some_and(|parent| parent != self.job) {
                return Err(Error::invalid(
                    "parent",
                    format!(
                        "a spawned job's parent is the job that spawns it, {}",
                        self.job
                    ),
                )
                .in_batch(index));
            }
            // Each of these may answer with a job already there instead of a new one, which would not be a child.
            for (field, set) in [
                ("unique_key", push.unique_key.is_some()),
                ("debounce", push.debounce.is_some()),
                ("throttle", push.throttle.is_some()),
            ] {
                if set {
                    return Err(Error::invalid(
                        field,
                        "is not taken by a spawn: a spawned job is always a new child of the job (a step already \
                         pushes it once)",
                    )
                    .in_batch(index));
                }
            }
            push.parent = Some(self.job);
        }
        let valid = validate_all(&pushes, ctx)?;
        let enqueued = insert_all(&valid, ctx)?;
        let ids: Vec<JobId> = enqueued.iter().map(|e| e.id).collect();
        for child in &enqueued {
            let waited: Option<i64> =
                ctx.db
                    .query_row(START_SPAWNED, &params![child.id.0], |r| r.get(0))?;
            if waited.is_some() {
                waiting::release_if_unblocked(ctx, child.id)?;
            }
        }
        let result = json!({ "children": ids.iter().map(|id| id.0).collect::<Vec<_>>() });
        let text = encode_json("result", &result, ctx.limits());
        store_and_tell(ctx, self.job, &held, name, &result, text)?;
        Ok(ids)
    }
}

/// The ids a spawn recorded.
fn spawned_of(job: JobId, name: &str, result: &Value) -> Result<Vec<JobId>> {
    result
        .get("children")
        .and_then(Value::as_array)
        .and_then(|ids| ids.iter().map(|id| id.as_i64().map(JobId)).collect())
        .ok_or_else(|| not_a(job, name, "spawn"))
}

fn not_a(job: JobId, name: &str, what: &str) -> Error {
    Error::invalid(
        "step",
        format!("step {name:?} of job {job} was recorded by something other than a {what}"),
    )
}

/// The job's children, oldest first, each with whether it holds its parent (live, or failed where failed children
/// hold: the rule of `waiting::RELEASE_IF_UNBLOCKED`).
const CHILDREN: Sql = Sql::both(concat!(
    "SELECT c.id, c.state, c.result, (",
    crate::ops::live!("c"),
    " OR (c.state = 'failed' AND NOT p.children_of_job)) \
     FROM jobs AS c JOIN jobs AS p ON p.id = c.parent_id WHERE c.parent_id = $1 ORDER BY c.id"
));

impl Operation for Join {
    type Output = Joined;

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<Joined> {
        let Some(held) = hold_for_step(ctx, self.job, self.token)? else {
            return Err(lease_refusal(ctx, self.job, self.token));
        };
        let name = self.name.as_str();
        if let Some(step) = stored_step(ctx, self.job, name)? {
            return step
                .result
                .get("children")
                .and_then(Value::as_array)
                .and_then(|c| c.iter().map(JoinedChild::from_json).collect())
                .map(Joined::Ended)
                .ok_or_else(|| not_a(self.job, name, "join"));
        }
        type Row = (i64, String, Option<String>, bool);
        let rows: Vec<Row> = ctx.db.query(CHILDREN, &params![self.job.0], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
        })?;
        let holding = rows.iter().filter(|r| r.3).count();
        if holding > 0 {
            let detail = format!("step {name}, joining {holding} children");
            suspend(ctx, self.job, self.token, Resume::WhenChildrenEnd, &detail)?;
            return Ok(Joined::Suspended);
        }
        let children = rows
            .into_iter()
            .map(|(id, state, result, _)| {
                Ok(JoinedChild {
                    id: JobId(id),
                    state: crate::ops::parse_stored_state(&state)?,
                    result: result
                        .map(|r| {
                            serde_json::from_str(&r).map_err(|e| {
                                Error::storage("the database holds a result that is not JSON", e)
                            })
                        })
                        .transpose()?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let result =
            json!({ "children": children.iter().map(JoinedChild::to_json).collect::<Vec<_>>() });
        let text = encode_json("result", &result, ctx.limits()).map_err(|_| {
            Error::invalid(
                "result",
                format!(
                    "the results of job {}'s {} children are larger than a step's largest result, the largest job \
                     data; have children keep large results elsewhere and return where",
                    self.job,
                    children.len()
                ),
            )
        });
        store_and_tell(ctx, self.job, &held, name, &result, text)?;
        Ok(Joined::Ended(children))
    }
}
