//! Enqueueing, signalling and recording steps inside the application's own PostgreSQL transaction:
//! [`Queue::enqueue_in_postgres`] calls the schema's `cairn_push` function (migration 0007),
//! [`Queue::signal_in_postgres`] its `cairn_signal` (0026), [`Queue::record_step_in_postgres`] its
//! `cairn_record_step` (0027), the same ones an application in any other language calls, so that there is one transactional
//! path whatever the caller.

use serde_json::{Map, Value, json};

use crate::clock::duration_millis;
use crate::error::{Error, ErrorKind, Result};
use crate::job::Step;
use crate::names::{JobId, SignalKey, StepName};
use crate::ops::parse_stored_state;
use crate::ops::push::{Enqueued, Push};
use crate::ops::signal::SignalSent;
use crate::queue::Queue;

/// The call: the job's name, data and options, as `cairn_push` takes them.
const CALL: &str =
    "SELECT id, state, existing FROM cairn_push($1, $2::text::json, $3::text::jsonb)";

impl Queue {
    /// Enqueues a job inside the application's own transaction on the queue's PostgreSQL database: the job exists
    /// if and only if `tx` commits, and workers waiting on any node wake at the commit.
    ///
    /// It runs the schema's `cairn_push` function, which an application in any language can call itself
    /// (`SELECT cairn_enqueue('email.send', '{"to": "…"}', '{"queue": "mail"}')`). A job with `parent`,
    /// `depends_on`, `schedule`, `debounce` or `throttle` is refused: push those through [`Jobs::enqueue`](crate::Jobs::enqueue).
    ///
    /// A concurrency key is taken: the job gets it, and its queue is marked as holding keyed jobs (the nodes load
    /// their settings again when `tx` commits).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] naming the bad field (the transaction is then aborted, as after any failed
    /// statement: roll it back, or use a savepoint); [`ErrorKind::InvalidState`] on a queue on SQLite (see
    /// [`Queue::enqueue_in`]), or for a keyed job in a queue with priority aging; storage errors from `tx`.
    pub fn enqueue_in_postgres(
        &self,
        tx: &mut postgres::Transaction<'_>,
        push: &Push,
    ) -> Result<Enqueued> {
        // Which database, not what it can do: the caller's transaction is PostgreSQL's own type.
        if !self.is_postgres() {
            return Err(Error::new(
                ErrorKind::InvalidState,
                "enqueue_in_postgres needs a queue on PostgreSQL; this one is on a SQLite file (use enqueue_in)",
            ));
        }
        // Either lands in, or answers with, a job another transaction may hold: push those through the engine. And a
        // batch's counts and callbacks are the engine's to keep (the schema's function knows nothing of batches),
        // as are children that belong to the job rather than the run (nor of those).
        for (field, set) in [
            ("debounce", push.debounce.is_some()),
            ("throttle", push.throttle.is_some()),
            ("batch", push.batch.is_some()),
            ("children", push.children != crate::Children::OfTheRun),
        ] {
            if set {
                return Err(Error::invalid(
                    field,
                    "is not taken in the application's transaction: push the job through Jobs::enqueue",
                ));
            }
        }
        let data = serde_json::to_string(&push.data).expect("serde_json::Value always serializes");
        let options = sql_options(push).to_string();
        let row = tx
            .query_one(CALL, &[&push.name, &data, &options])
            .map_err(reported)?;
        let state: String = row.get(1);
        Ok(Enqueued {
            id: JobId(row.get(0)),
            state: parse_stored_state(&state)?,
            existing: row.get(2),
        })
    }
}

impl Queue {
    /// Sends a signal inside the application's own transaction on the queue's PostgreSQL database, as
    /// [`Jobs::signal`](crate::Jobs::signal) does: the job waiting for `key` receives `data` (and workers on any
    /// node wake), or the signal is kept, if and only if `tx` commits. A database change and the signal it makes
    /// commit together.
    ///
    /// It runs the schema's `cairn_signal` function, which an application in any language can call itself
    /// (`SELECT cairn_signal('order-42/packed', '{"parcel": "P-981"}')`).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] for oversized data, or a job at its limit of steps;
    /// [`ErrorKind::InvalidState`] when only a cancelled job waited for `key`, or on a queue on SQLite; storage
    /// errors from `tx`. After an error the transaction is aborted, as after any failed statement.
    pub fn signal_in_postgres(
        &self,
        tx: &mut postgres::Transaction<'_>,
        key: &SignalKey,
        data: &Value,
    ) -> Result<SignalSent> {
        // Which database, not what it can do: the caller's transaction is PostgreSQL's own type.
        if !self.is_postgres() {
            return Err(Error::new(
                ErrorKind::InvalidState,
                "signal_in_postgres needs a queue on PostgreSQL; this one is on a SQLite file",
            ));
        }
        let data = serde_json::to_string(data).expect("serde_json::Value always serializes");
        let row = tx
            .query_one(
                "SELECT cairn_signal($1, $2::text::json)",
                &[&key.as_str(), &data],
            )
            .map_err(reported)?;
        Ok(match row.get::<_, Option<i64>>(0) {
            Some(job) => SignalSent::Delivered { job: JobId(job) },
            None => SignalSent::Kept,
        })
    }
}

impl Queue {
    /// Records step `name` of the attempt `lease` holds inside the application's own transaction on the queue's
    /// PostgreSQL database, as [`Jobs::record_step`](crate::Jobs::record_step) does: the step is recorded if and
    /// only if `tx` commits, so a change the step made to the application's tables and the record that it was made
    /// commit together, exactly once. A step already recorded keeps its first result, which the answer gives.
    ///
    /// It runs the schema's `cairn_record_step` function, which an application in any language can call itself.
    /// A handler learns whether a step is recorded already, and under which name to record it, with
    /// [`JobContext::open_step`](crate::JobContext::open_step).
    ///
    /// # Errors
    /// [`ErrorKind::LeaseLost`] when the lease is no longer held; [`ErrorKind::InvalidInput`] for an oversized
    /// result or a job at its limit of steps; [`ErrorKind::InvalidState`] on a queue on SQLite; storage errors from
    /// `tx`. After an error the transaction is aborted, as after any failed statement.
    pub fn record_step_in_postgres(
        &self,
        tx: &mut postgres::Transaction<'_>,
        lease: &crate::Lease,
        name: &StepName,
        result: &Value,
    ) -> Result<Step> {
        // Which database, not what it can do: the caller's transaction is PostgreSQL's own type.
        if !self.is_postgres() {
            return Err(Error::new(
                ErrorKind::InvalidState,
                "record_step_in_postgres needs a queue on PostgreSQL; this one is on a SQLite file",
            ));
        }
        let text = serde_json::to_string(result).expect("serde_json::Value always serializes");
        let row = tx
            .query_one(
                "SELECT stored, attempt, recorded_at FROM cairn_record_step($1, $2, $3, $4::text::json)",
                &[&lease.job.0, &lease.token, &name.as_str(), &text],
            )
            .map_err(reported)?;
        let stored: String = row.get(0);
        Ok(Step {
            name: name.as_str().to_owned(),
            result: serde_json::from_str(&stored).map_err(|e| {
                Error::storage("the database holds a step whose result is not JSON", e)
            })?,
            attempt: u32::try_from(row.get::<_, i64>(1)).unwrap_or(u32::MAX),
            recorded_at: crate::clock::from_millis(row.get(2)),
        })
    }
}

/// A push's options as `cairn_push` takes them: the HTTP API's push body without its name and data. Fields it
/// refuses (`parent`, `depends_on`, `schedule`, `time_zone`) are passed on, so that its error names them.
fn sql_options(push: &Push) -> Value {
    let mut options = Map::new();
    let mut put = |key: &str, value: Value| {
        options.insert(key.to_owned(), value);
    };
    put("queue", json!(push.queue));
    put("priority", json!(push.priority));
    put("weight", json!(push.weight));
    if let Some(at) = push.run_at {
        put("run_at", json!(at.to_string()));
    }
    if let Some(delay) = push.delay {
        put(
            "delay_ms",
            json!(delay.as_millis().min(u128::from(u64::MAX)) as u64),
        );
    }
    if !push.retry.is_empty() {
        // Only the parts the push sets: cairn_push takes the default policy's for the rest, as a push does.
        let retry = push.retry;
        let mut parts = Map::new();
        let mut part = |key: &str, value: Option<Value>| {
            if let Some(value) = value {
                parts.insert(key.to_owned(), value);
            }
        };
        part("max_attempts", retry.max_attempts.map(|n| json!(n)));
        part(
            "initial_delay_ms",
            retry.initial_delay.map(|d| json!(duration_millis(d))),
        );
        part("multiplier", retry.multiplier.map(|m| json!(m)));
        part(
            "max_delay_ms",
            retry.max_delay.map(|d| json!(duration_millis(d))),
        );
        part("jitter", retry.jitter.map(|j| json!(j)));
        put("retry", Value::Object(parts));
    }
    if let Some(lease) = push.lease_timeout {
        put("lease_timeout_ms", json!(duration_millis(lease)));
    }
    if let Some(timeout) = push.timeout {
        put("timeout_ms", json!(duration_millis(timeout)));
    }
    if let Some(key) = &push.unique_key {
        put("unique_key", json!(key));
    }
    if !push.tags.is_empty() {
        put("tags", json!(push.tags));
    }
    if let Some(parent) = push.parent {
        put("parent", json!(parent.0));
    }
    if !push.depends_on.is_empty() {
        put(
            "depends_on",
            json!(push.depends_on.iter().map(|j| j.0).collect::<Vec<_>>()),
        );
    }
    if let Some(schedule) = &push.schedule {
        put("schedule", json!(schedule));
    }
    if let Some(zone) = &push.time_zone {
        put("time_zone", json!(zone));
    }
    if let Some(c) = &push.concurrency {
        put("concurrency", json!({ "key": c.key, "limit": c.limit }));
    }
    if let Some(trace) = &push.trace_parent {
        put("trace_parent", json!(trace));
    }
    Value::Object(options)
}

/// `cairn_push`'s or `cairn_signal`'s refusal of a field as the engine's invalid input, and of a state as invalid
/// state; anything else as a storage error.
fn reported(e: postgres::Error) -> Error {
    if let Some(db) = e.as_db_error()
        && *db.code() == postgres::error::SqlState::INVALID_PARAMETER_VALUE
        && let Some(field) = db.column()
    {
        return Error::invalid_reported(field.to_owned(), db.message().to_owned());
    }
    if let Some(db) = e.as_db_error()
        && *db.code() == postgres::error::SqlState::OBJECT_NOT_IN_PREREQUISITE_STATE
    {
        return Error::invalid_state(db.message().to_owned());
    }
    // `cairn_record_step`'s own code for a lease no longer held.
    if let Some(db) = e.as_db_error()
        && db.code().code() == "CN001"
    {
        return Error::lease_lost(db.message().to_owned());
    }
    Error::storage("writing in the application's transaction", e)
}
