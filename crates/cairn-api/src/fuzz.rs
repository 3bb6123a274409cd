//! The harness of the `api_bodies` fuzz target (`fuzz/` at the repository's root runs it under libFuzzer; see
//! `docs/fuzzing.md`): a request body decoded as the server decodes it, converted to the engine's request as the
//! server converts it, and checked by the engine's own validation where that needs no database. Not part of the
//! API: `lib.rs` exposes it hidden, as `__fuzz`, for the fuzz target alone.
//!
//! The input is text: a first line naming the body (`push`, `dequeue`, a declared route's operation id such as
//! `set_priority`, …) and optionally the path's parameter after a space (`recurring nightly`, `set_priority 7`),
//! then the body. A body that does not decode, or a request the engine refuses, is fine; a panic is a bug.

use std::collections::BTreeMap;

use cairn::__fuzz::{check_dequeue, check_push, check_recurring, check_retry};
use cairn::{
    ConfigKey, Continue, Fail, Finish, JobId, Lease, Push, Retry, RunUsage, SetRecurring, WorkerId,
};
use serde::de::DeserializeOwned;

use crate::{
    AgingRequest, ConcurrencyRequest, DequeueRequest, FailRequest, FinishManyRequest,
    FinishRequest, PushBatchRequest, PushRequest, RateRequest, Received, RecurringRequest,
    RetryRequest, Route, RouteVisitor, SetConfigRequest, UnfailRequest, parse_token,
};

/// The `api_bodies` target.
pub fn bodies(data: &[u8]) {
    let Some(end) = data.iter().position(|&b| b == b'\n') else {
        return;
    };
    let Ok(head) = std::str::from_utf8(&data[..end]) else {
        return;
    };
    let body = &data[end + 1..];
    let (kind, param) = head.split_once(' ').unwrap_or((head, ""));
    push_bodies(kind, param, body);
    lease_bodies(kind, body);
    settings_bodies(kind, param, body);
    let mut declared = Declared { kind, param, body };
    crate::visit_routes(&mut declared);
}

/// The bodies that carry the engine's most validation: jobs to push, dequeues, recurring templates.
fn push_bodies(kind: &str, param: &str, body: &[u8]) {
    match kind {
        "push" => {
            if let Some(request) = decode::<PushRequest>(body) {
                let _ = check_push(&Push::from(request));
            }
        }
        "push_batch" => {
            if let Some(batch) = decode::<PushBatchRequest>(body) {
                for request in batch.jobs {
                    let _ = check_push(&Push::from(request));
                }
            }
        }
        "dequeue" => {
            if let Some(request) = decode::<DequeueRequest>(body)
                && let Ok(dequeue) = request.into_dequeue()
            {
                let _ = check_dequeue(&dequeue);
            }
        }
        "recurring" => {
            if let Some(request) = decode::<RecurringRequest>(body)
                && let Ok(recurring) = request.into_recurring(param.to_owned())
            {
                let _ = check_recurring(&SetRecurring { recurring });
            }
        }
        _ => {}
    }
}

/// The calls under a lease, whose token the server reads before anything else.
fn lease_bodies(kind: &str, body: &[u8]) {
    match kind {
        "finish" => {
            if let Some(request) = decode::<FinishRequest>(body)
                && let Some(lease) = lease(JobId(1), &request.token)
            {
                let _ = Finish {
                    data: request.data,
                    usage: request.usage.map(RunUsage::from),
                    next: request.next.map(Continue::from),
                    ..Finish::new(&lease)
                };
            }
        }
        "finish_many" => {
            if let Some(request) = decode::<FinishManyRequest>(body) {
                for item in request.jobs.into_iter().take(cairn::MAX_FINISH_MANY) {
                    if let Some(lease) = lease(JobId(item.id), &item.token) {
                        let _ = Finish {
                            data: item.data,
                            usage: item.usage.map(RunUsage::from),
                            next: item.next.map(Continue::from),
                            ..Finish::new(&lease)
                        };
                    }
                }
            }
        }
        "retry" => {
            if let Some(request) = decode::<RetryRequest>(body)
                && let Some(lease) = lease(JobId(1), &request.token)
            {
                let _ = check_retry(&Retry {
                    delay: request.delay_ms.map(std::time::Duration::from_millis),
                    run_at: request.run_at,
                    usage: request.usage.map(RunUsage::from),
                    ..Retry::new(&lease, request.error)
                });
            }
        }
        "fail" => {
            if let Some(request) = decode::<FailRequest>(body)
                && let Some(lease) = lease(JobId(1), &request.token)
            {
                let _ = Fail {
                    usage: request.usage.map(RunUsage::from),
                    ..Fail::new(&lease, request.group, request.message)
                };
            }
        }
        _ => {}
    }
}

/// A queue's settings and the run-time options.
fn settings_bodies(kind: &str, param: &str, body: &[u8]) {
    match kind {
        "concurrency" => {
            let _ = decode::<ConcurrencyRequest>(body);
        }
        "rate" => {
            if let Some(request) = decode::<RateRequest>(body) {
                let _ = request.rate.map(cairn::RateLimit::from);
            }
        }
        "aging" => {
            if let Some(request) = decode::<AgingRequest>(body) {
                let _ = request.every_ms.map(std::time::Duration::from_millis);
            }
        }
        "unfail" => {
            if let Some(request) = decode::<UnfailRequest>(body) {
                let _ = request.into_unfail(param.to_owned());
            }
        }
        "config" => {
            if let Some(request) = decode::<SetConfigRequest>(body)
                && let Ok(key) = ConfigKey::parse(param)
            {
                let _ = key.value_from_json(&request.value);
            }
        }
        _ => {}
    }
}

/// The routes declared in this crate: the one whose operation id is `kind`, from its path's `{id}` and its body.
struct Declared<'a> {
    kind: &'a str,
    param: &'a str,
    body: &'a [u8],
}

impl RouteVisitor for Declared<'_> {
    fn visit<R: Route>(&mut self) {
        if R::OPERATION_ID != self.kind {
            return;
        }
        let path = Received::with_path(BTreeMap::from([("id".to_owned(), self.param.to_owned())]));
        if let Some(body) = decode::<R::Body>(self.body)
            && let Ok(request) = R::from_wire(&path, body)
        {
            // The client sends the request it was given back the same way.
            let again = R::from_wire(&path, request.body());
            assert!(again.is_ok(), "{}: {:?}", self.kind, again.err());
        }
    }
}

/// Decodes a body as the server does: one JSON value of type `T`, unknown fields refused.
fn decode<T: DeserializeOwned>(body: &[u8]) -> Option<T> {
    serde_json::from_slice(body).ok()
}

/// The lease a call names, as the server builds it from the path's id and the body's token.
fn lease(job: JobId, token: &str) -> Option<Lease> {
    Some(Lease {
        job,
        token: parse_token("token", token).ok()?,
        worker: WorkerId::parse("http").expect("a valid worker id"),
        expires_at: jiff::Timestamp::UNIX_EPOCH,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_api_bodies_corpus_replays_without_a_failure() {
        cairn::__fuzz::replay_corpus("api_bodies", bodies);
    }
}
