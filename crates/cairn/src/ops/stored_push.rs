//! A push kept to be made later: a recurring template's job (made at each slot) and a batch's callbacks (made when
//! the batch ends). [`check`] holds it to what such a job may be; [`to_json`] and [`from_json`] store it.

use std::time::Duration;

use serde_json::{Value, json};

use crate::clock::duration_millis;
use crate::error::{Error, Result};
use crate::ops::Limits;
use crate::ops::push::{Push, ValidPush};
use crate::retry_policy::RetryOverrides;
#[cfg(test)]
use crate::retry_policy::RetryPolicy;

/// Checks a push to store, named `field` in errors (`job`, `on_success`): it must leave its timing, parent,
/// dependencies, schedule, debounce, throttle, trace and batch unset, since whoever makes it later decides those;
/// then it must be a valid push at `now_ms`. Errors name the field within it (`job.delay`, `on_success.name`).
pub(crate) fn check(
    push: &Push,
    field: &'static str,
    why: &str,
    now_ms: i64,
    limits: &Limits,
) -> Result<ValidPush> {
    let made_later = [
        ("run_at", push.run_at.is_some()),
        ("delay", push.delay.is_some()),
        ("parent", push.parent.is_some()),
        ("depends_on", !push.depends_on.is_empty()),
        ("schedule", push.schedule.is_some()),
        ("debounce", push.debounce.is_some()),
        ("throttle", push.throttle.is_some()),
        ("trace_parent", push.trace_parent.is_some()),
        ("batch", push.batch.is_some()),
    ];
    if let Some((name, _)) = made_later.iter().find(|(_, set)| *set) {
        return Err(Error::invalid(name, format!("must be unset {why}")).within(field));
    }
    crate::ops::push::check(push, now_ms, limits).map_err(|e| e.within(field))
}

/// A push as stored. Every field of [`Push`] is named, so that a field added to a push must be given a
/// place here (or a reason to stay out) before this compiles; [`from_json`] reads back each one stored.
pub(crate) fn to_json(push: &Push) -> Value {
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
        children,
        // Refused by `check`: the template's owner times each job it makes, and such a job has no parent,
        // dependencies, schedule or batch of its own.
        run_at: _,
        delay: _,
        parent: _,
        depends_on: _,
        schedule: _,
        time_zone: _,
        debounce: _,
        throttle: _,
        // Refused too: each job made is a trace of its own, not a part of the request that stored the push.
        trace_parent: _,
        batch: _,
    } = push;
    json!({
        "queue": queue,
        "name": name,
        "data": data,
        "priority": priority,
        "weight": weight,
        "lease_timeout_ms": lease_timeout.map(duration_millis),
        "timeout_ms": timeout.map(duration_millis),
        // The parts the job sets; the rest are the default policy's when each job is made.
        "retry": (!retry.is_empty()).then(|| json!({
            "max_attempts": retry.max_attempts,
            "initial_ms": retry.initial_delay.map(duration_millis),
            "multiplier": retry.multiplier,
            "max_ms": retry.max_delay.map(duration_millis),
            "jitter": retry.jitter,
        })),
        "tags": tags,
        "unique_key": unique_key,
        "concurrency": concurrency.as_ref().map(|c| json!({"key": c.key, "limit": c.limit})),
        "children": children.as_str(),
    })
}

pub(crate) fn from_json(text: &str) -> Result<Push> {
    let broken = |what: &str| {
        Error::new(
            crate::ErrorKind::Storage,
            format!("a stored job template has {what}"),
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
    // Absent from templates stored before it was kept: their children were the run's.
    push.children = v["children"]
        .as_str()
        .and_then(crate::Children::parse)
        .unwrap_or_default();
    if let Some(r) = v["retry"].as_object() {
        push.retry = RetryOverrides {
            max_attempts: r
                .get("max_attempts")
                .and_then(Value::as_u64)
                .and_then(|n| u32::try_from(n).ok()),
            initial_delay: r.get("initial_ms").and_then(millis),
            multiplier: r.get("multiplier").and_then(Value::as_f64),
            max_delay: r.get("max_ms").and_then(millis),
            jitter: r.get("jitter").and_then(Value::as_f64),
        };
    }
    push.tags = v["tags"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t.as_str().map(str::to_owned))
        .collect();
    Ok(push)
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
        let stored = to_json(&job).to_string();
        assert_eq!(from_json(&stored).unwrap(), job);
    }

    /// A template that sets only some parts of its retry policy keeps only those: each job it makes takes the
    /// default policy, as it stands then, for the rest.
    #[test]
    fn a_template_keeps_only_the_retry_parts_it_sets() {
        let job = Push::new("report.build").max_attempts(1);
        let stored = to_json(&job);
        assert_eq!(stored["retry"]["initial_ms"], Value::Null);
        assert_eq!(from_json(&stored.to_string()).unwrap(), job);
        let without = Push::new("report.build");
        assert_eq!(to_json(&without)["retry"], Value::Null);
        assert_eq!(from_json(&to_json(&without).to_string()).unwrap(), without);
    }
}
