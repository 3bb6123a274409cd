//! The calls of the HTTP API and their errors, through the wire: the Rust client for what it sends, raw requests
//! for what it would never send (bad bodies, missing tokens, forged requests, unknown routes).

use cairn::Jobs;
use std::time::Duration;

use cairn::{Dequeue, ErrorKind, JobFilter, JobId, JobState, Push, Worker};
use cairn_server::ServerConfig;
use serde_json::{Value, json};

use super::{TestServer, post, raw, take, until_waiting};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_goes_through_its_life_over_http() {
    let server = TestServer::spawn().await;
    let client = server.client();
    let enqueued = client
        .enqueue(Push::new("email.send").data(json!({"to": "ada@example.com"})))
        .await
        .unwrap();
    assert_eq!(enqueued.state, JobState::Queued);

    let claimed = client.dequeue(take("w1")).await.unwrap();
    assert_eq!(claimed.len(), 1);
    let lease = &claimed[0].lease;
    assert_eq!(claimed[0].job.data, json!({"to": "ada@example.com"}));
    client
        .heartbeat(lease, Some(json!({"pct": 50})))
        .await
        .unwrap();
    client.checkpoint(lease, json!({"step": 2})).await.unwrap();
    client.update(lease, json!({"pct": 75})).await.unwrap();
    client
        .finish(lease, Some(json!({"sent": true})))
        .await
        .unwrap();

    let job = client.get(enqueued.id).await.unwrap();
    assert_eq!(job.state, JobState::Completed);
    assert_eq!(job.data, json!({"sent": true}));
    assert_eq!(job.progress, Some(json!({"pct": 75})));
    assert_eq!(job.history.len(), 1);
    assert_eq!(job.history[0].worker.as_str(), "w1");

    // The lease is fenced: a second finish with the same lease is refused and changes nothing.
    let err = client.finish(lease, None).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LeaseLost);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_management_call_works_over_http() {
    let server = TestServer::spawn().await;
    let client = server.client();
    let later = jiff::Timestamp::now() + jiff::SignedDuration::from_hours(1);
    let a = client
        .enqueue(Push::new("a").run_at(later).tag("t1"))
        .await
        .unwrap();
    assert_eq!(a.state, JobState::Scheduled);
    let b = client.enqueue(Push::new("b").tag("t1")).await.unwrap();
    let c = client.enqueue(Push::new("c")).await.unwrap();

    client.set_priority(b.id, 9).await.unwrap();
    assert_eq!(client.get(b.id).await.unwrap().priority, 9);
    assert_eq!(
        client
            .reschedule(a.id, jiff::Timestamp::now())
            .await
            .unwrap(),
        JobState::Queued
    );
    client.cancel(c.id).await.unwrap();
    assert_eq!(client.get(c.id).await.unwrap().state, JobState::Cancelled);
    client.cancel(c.id).await.unwrap(); // Cancelling twice is harmless.

    let tagged = client
        .list(JobFilter {
            tag: Some("t1".into()),
            ..JobFilter::default()
        })
        .await
        .unwrap();
    let ids: Vec<JobId> = tagged.jobs.iter().map(|j| j.id).collect();
    assert_eq!(ids, [b.id, a.id]);
    let page = client
        .list(JobFilter {
            limit: 2,
            ..JobFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(page.jobs.len(), 2);
    let rest = client
        .list(JobFilter {
            before: page.next,
            ..JobFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(rest.jobs.len(), 1);
    assert_eq!(rest.next, None);

    client.delete(a.id).await.unwrap();
    assert_eq!(
        client.get(a.id).await.unwrap_err().kind(),
        ErrorKind::NotFound
    );
    assert_eq!(
        client.delete(a.id).await.unwrap_err().kind(),
        ErrorKind::NotFound
    );

    // Retry and fail under a lease.
    let claimed = client.dequeue(take("w")).await.unwrap();
    assert_eq!(claimed[0].job.id, b.id, "priority 9 goes first");
    let state = client
        .retry(&claimed[0].lease, "boom", Some(Duration::from_secs(60)))
        .await
        .unwrap();
    assert_eq!(state, JobState::Scheduled);
    client
        .reschedule(b.id, jiff::Timestamp::now())
        .await
        .unwrap();
    let claimed = client.dequeue(take("w")).await.unwrap();
    client
        .fail(&claimed[0].lease, "bad-input", "no address")
        .await
        .unwrap();
    let job = client.get(b.id).await.unwrap();
    assert_eq!(job.state, JobState::Failed);
    assert_eq!(job.failure_group.as_deref(), Some("bad-input"));
    assert_eq!(job.history.len(), 2);
}

/// Code written against `cairn::Jobs` and `cairn::Runs`: the same function moves and reprioritizes a job embedded and
/// remote.
async fn move_and_prioritize<J: cairn::Jobs + cairn::Runs<cairn::MoveJob>>(jobs: &J, job: JobId) {
    jobs.run_request(cairn::MoveJob::new(job, "fast"))
        .await
        .unwrap();
    jobs.set_priority(job, 5).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_moves_to_another_queue_embedded_and_over_http_alike() {
    let server = TestServer::spawn().await;
    let client = server.client();
    let dir = tempfile::tempdir().unwrap();
    let queue = cairn::Queue::open(dir.path().join("jobs.db"))
        .await
        .unwrap();
    let remote = client
        .enqueue(Push::new("r").queue("slow"))
        .await
        .unwrap()
        .id;
    let local = queue
        .enqueue(Push::new("l").queue("slow"))
        .await
        .unwrap()
        .id;
    move_and_prioritize(&client, remote).await;
    move_and_prioritize(&queue, local).await;
    let (remote, local) = (
        client.get(remote).await.unwrap(),
        queue.get(local).await.unwrap(),
    );
    for job in [&remote, &local] {
        assert_eq!((job.queue.as_str(), job.priority), ("fast", 5));
    }
    queue.close(Duration::from_secs(5)).await.unwrap();

    // The route's answers and errors, as the wire carries them.
    let id = remote.id;
    assert_eq!(
        post(
            &server,
            &format!("/v1/jobs/{id}/move"),
            r#"{"queue":"slow"}"#
        )
        .await,
        (200, json!({}))
    );
    assert_eq!(
        post(&server, "/v1/jobs/abc/move", r#"{"queue":"q"}"#).await,
        (
            400,
            json!({"error": {"kind": "invalid_input", "field": "id", "message": "id: must be a positive integer, got \"abc\""}})
        )
    );
    let (status, body) = post(&server, "/v1/jobs/999/move", r#"{"queue":"q"}"#).await;
    assert_eq!(
        (status, body["error"]["kind"].as_str()),
        (404, Some("not_found"))
    );
    let (status, body) = post(
        &server,
        &format!("/v1/jobs/{id}/move"),
        r#"{"queue":"a\tb"}"#,
    )
    .await;
    assert_eq!(
        (status, body["error"]["field"].as_str()),
        (400, Some("queue")),
        "{body}"
    );
    let (status, body) = post(
        &server,
        &format!("/v1/jobs/{id}/move"),
        r#"{"queue":"q","x":1}"#,
    )
    .await;
    assert_eq!(
        (status, body["error"]["kind"].as_str()),
        (400, Some("invalid_input")),
        "{body}"
    );
    let claimed = client.dequeue(take("w").queue("slow")).await.unwrap();
    assert_eq!(claimed[0].job.id, id);
    let (status, body) = post(&server, &format!("/v1/jobs/{id}/move"), r#"{"queue":"q"}"#).await;
    assert_eq!(
        (status, body["error"]["kind"].as_str()),
        (409, Some("invalid_state")),
        "{body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_is_all_or_nothing_and_names_the_bad_job() {
    let server = TestServer::spawn().await;
    let client = server.client();
    let ids = client
        .enqueue_batch(vec![Push::new("a"), Push::new("b"), Push::new("c")])
        .await
        .unwrap();
    assert_eq!(ids.len(), 3);

    let (status, body) = post(
        &server,
        "/v1/jobs/batch",
        r#"{"jobs":[{"name":"ok"},{"name":"bad","weight":0}]}"#,
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(
        body,
        json!({"error": {"kind": "invalid_input", "field": "jobs[1].weight", "message": "jobs[1].weight: must be between 1 and 1000, got 0"}})
    );
    let all = client.list(JobFilter::default()).await.unwrap();
    assert_eq!(all.jobs.len(), 3, "the failed batch wrote nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_poll_returns_the_job_the_moment_it_is_enqueued() {
    let server = TestServer::spawn().await;
    let client = server.client();
    let waiting = {
        let client = client.clone();
        tokio::spawn(async move {
            client
                .dequeue(Dequeue {
                    wait: Duration::from_secs(50),
                    ..take("w")
                })
                .await
        })
    };
    // Enqueue once the poll is parked: an enqueue before it would be found at once, not wake it.
    until_waiting(&client, &["w"]).await;
    let id = client.enqueue(Push::new("x")).await.unwrap().id;
    // Far less than the 50 s wait: a server that did not wake the poll would answer only at the end.
    let claimed = tokio::time::timeout(Duration::from_secs(20), waiting)
        .await
        .expect("the long poll answered before its wait ended")
        .unwrap()
        .unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].job.id, id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_embedded_worker_api_runs_unchanged_against_the_server() {
    let server = TestServer::spawn().await;
    let client = server.client();
    for n in 0..5 {
        client
            .enqueue(Push::new("double").data(json!({"n": n})))
            .await
            .unwrap();
    }
    client
        .enqueue(Push::new("flaky").retry(cairn::RetryPolicy::immediate(1)))
        .await
        .unwrap();
    let worker = Worker::builder(&client, "remote-1")
        .max_concurrency(3)
        .wait(Duration::from_secs(5))
        .handler("double", |job| async move {
            let n = job.data()["n"].as_i64().unwrap_or(0);
            job.update(json!({"half": true}))
                .await
                .map_err(|e| cairn::JobError::retry(e.to_string()))?;
            job.set_result(json!({"doubled": n * 2}));
            Ok(())
        })
        .handler("flaky", |_job| async move {
            Err(cairn::JobError::fail("broken", "always fails"))
        })
        .start()
        .unwrap();
    super::eventually(Duration::from_secs(20), "all jobs done", || {
        let client = client.clone();
        async move {
            let page = client.list(JobFilter::default()).await.unwrap();
            page.jobs.iter().all(|j| j.state.is_finished())
        }
    })
    .await;
    let report = worker.stop(Duration::from_secs(5)).await.unwrap();
    assert_eq!((report.finished, report.failed), (5, 1));
    let done = client
        .list(JobFilter {
            name: Some("double".into()),
            ..JobFilter::default()
        })
        .await
        .unwrap();
    let mut results: Vec<i64> = done
        .jobs
        .iter()
        .map(|j| {
            j.result.as_ref().expect("a result")["doubled"]
                .as_i64()
                .unwrap()
        })
        .collect();
    results.sort();
    assert_eq!(results, [0, 2, 4, 6, 8]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttle_over_http_counts_the_states_it_names() {
    let server = TestServer::spawn().await;
    let body = r#"{"name":"sync","throttle":{"key":"sync:7","period_ms":86400000,"states":["queued","running"]}}"#;
    let (status, first) = post(&server, "/v1/jobs", body).await;
    assert_eq!(status, 201, "{first}");
    let (status, again) = post(&server, "/v1/jobs", body).await;
    assert_eq!(
        (status, &again["id"], &again["existing"]),
        (200, &first["id"], &json!(true))
    );
    let (status, refused) = post(
        &server,
        "/v1/jobs",
        r#"{"name":"x","throttle":{"key":"k","period_ms":1000,"states":["done"]}}"#,
    )
    .await;
    assert_eq!(status, 400, "{refused}");
    assert_eq!(refused["error"]["field"], "throttle.states", "{refused}");
}

/// A step is recorded under the lease over HTTP, comes back with the job and with its next claim, and a stale token,
/// a bad name or a body without a result is refused naming the field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steps_are_recorded_over_http_and_come_back_with_the_job() {
    let server = TestServer::spawn().await;
    let client = server.client();
    let id = client
        .enqueue(Push::new("order").retry(cairn::RetryPolicy::immediate(2)))
        .await
        .unwrap()
        .id;
    let first = client.dequeue(take("w1")).await.unwrap().remove(0);
    let name = cairn::StepName::parse("charge").unwrap();
    let step = client
        .record_step(&first.lease, name.clone(), json!({"receipt": 7}))
        .await
        .unwrap();
    assert_eq!((step.name.as_str(), step.attempt), ("charge", 1));
    let (status, body) = post(
        &server,
        &format!("/v1/jobs/{id}/steps"),
        &format!(
            r#"{{"token":"{}","name":"","result":1}}"#,
            first.lease.token
        ),
    )
    .await;
    assert_eq!(
        (status, &body["error"]["field"]),
        (400, &json!("name")),
        "{body}"
    );
    let (status, body) = post(
        &server,
        &format!("/v1/jobs/{id}/steps"),
        &format!(r#"{{"token":"{}","name":"x"}}"#, first.lease.token),
    )
    .await;
    assert_eq!(
        (status, &body["error"]["field"]),
        (400, &json!("result")),
        "{body}"
    );
    client.retry(&first.lease, "again", None).await.unwrap();
    let stale = client
        .record_step(&first.lease, name, json!(1))
        .await
        .unwrap_err();
    assert_eq!(stale.kind(), ErrorKind::LeaseLost);
    let second = client.dequeue(take("w2")).await.unwrap().remove(0);
    assert_eq!(second.job.steps, [step]);
    let (status, shown) = raw(
        reqwest::Method::GET,
        format!("{}/v1/jobs/{id}", server.url()),
        None,
        None,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(shown["step_count"], 1);
    assert_eq!(shown["steps"][0]["name"], "charge");
    assert_eq!(shown["steps"][0]["result"], json!({"receipt": 7}));

    // A sleep over HTTP: the job gives up its worker until then; a body with neither time is refused.
    let (status, body) = post(
        &server,
        &format!("/v1/jobs/{id}/sleep"),
        &format!(r#"{{"token":"{}","name":"nap"}}"#, second.lease.token),
    )
    .await;
    assert_eq!(
        (status, &body["error"]["field"]),
        (400, &json!("until")),
        "{body}"
    );
    let slept = client
        .sleep(
            &second.lease,
            cairn::StepName::parse("nap").unwrap(),
            cairn::Wake::After(Duration::from_secs(3600)),
        )
        .await
        .unwrap();
    assert!(matches!(slept, cairn::Slept::Suspended { .. }), "{slept:?}");
    let job = client.get(id).await.unwrap();
    assert_eq!((job.state, job.attempt), (JobState::Scheduled, 1));
}

/// Signals over HTTP: a wait suspends the job, which `GET` shows waiting for its key; `POST /v1/signals` delivers
/// to it and wakes it, and a signal with no job waiting is kept for the next wait; a bad key or timeout is refused
/// naming the field, and a signal to a key only a cancelled job waited for is a 409 saying so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signals_are_sent_and_waited_for_over_http() {
    let server = TestServer::spawn().await;
    let client = server.client();
    let id = client.enqueue(Push::new("order")).await.unwrap().id;
    let first = client.dequeue(take("w1")).await.unwrap().remove(0);
    let wait_body = |token: &str, key: &str, timeout: u64| {
        format!(r#"{{"token":"{token}","name":"packed","key":"{key}","timeout_ms":{timeout}}}"#)
    };
    let url = format!("/v1/jobs/{id}/wait_for_signal");
    let token = first.lease.token.to_string();
    let (status, body) = post(&server, &url, &wait_body(&token, "", 1000)).await;
    assert_eq!(
        (status, &body["error"]["field"]),
        (400, &json!("key")),
        "{body}"
    );
    let (status, body) = post(&server, &url, &wait_body(&token, "k", u64::MAX)).await;
    assert_eq!(
        (status, &body["error"]["field"]),
        (400, &json!("timeout_ms")),
        "{body}"
    );
    let (status, body) = post(
        &server,
        &url,
        &wait_body(&token, "order-1/packed", 3_600_000),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (&body["suspended"], &body["received"], &body["timed_out"]),
        (&json!(true), &json!(false), &json!(false)),
        "{body}"
    );
    let (_, shown) = raw(
        reqwest::Method::GET,
        format!("{}/v1/jobs/{id}", server.url()),
        None,
        None,
    )
    .await;
    assert_eq!(
        (&shown["state"], &shown["awaits_signal"]),
        (&json!("scheduled"), &json!("order-1/packed"))
    );

    let (status, sent) = post(
        &server,
        "/v1/signals",
        r#"{"key":"order-1/packed","data":{"parcel":"P-1"}}"#,
    )
    .await;
    assert_eq!(
        (status, sent),
        (200, json!({"delivered": true, "job": id.0}))
    );
    let second = client.dequeue(take("w2")).await.unwrap().remove(0);
    assert_eq!(second.job.awaits_signal, None);
    let token = second.lease.token.to_string();
    let (status, body) = post(
        &server,
        &url,
        &wait_body(&token, "order-1/packed", 3_600_000),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (&body["received"], &body["data"]),
        (&json!(true), &json!({"parcel": "P-1"})),
        "{body}"
    );

    let (status, kept) = post(&server, "/v1/signals", r#"{"key":"later"}"#).await;
    assert_eq!(
        (status, kept),
        (200, json!({"delivered": false, "job": null}))
    );
    let (status, body) = post(&server, "/v1/signals", r#"{"key":"k","dat":1}"#).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["field"], "dat", "{body}");

    // A job cancelled while it waits: its key refuses signals.
    let other = client.enqueue(Push::new("order")).await.unwrap().id;
    let taken = client.dequeue(take("w3")).await.unwrap().remove(0);
    assert_eq!(taken.job.id, other);
    let waited = client
        .wait_for_signal(
            &taken.lease,
            cairn::StepName::parse("approved").unwrap(),
            cairn::SignalKey::parse("order-2/approved").unwrap(),
            Duration::from_secs(60),
        )
        .await
        .unwrap();
    assert!(matches!(waited, cairn::SignalWait::Suspended { .. }));
    client.cancel(other).await.unwrap();
    let (status, refused) = post(&server, "/v1/signals", r#"{"key":"order-2/approved"}"#).await;
    assert_eq!(status, 409, "{refused}");
    assert_eq!(
        refused["error"]["message"],
        format!(
            "job {other} waited for signal \"order-2/approved\" and was cancelled: the signal is refused, not kept"
        )
    );
}

/// Spawn and join over HTTP: the children are pushed once and answered by id, the join suspends the job until they
/// end and then answers each one's state and result, and a child naming another parent is refused by its index.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spawn_and_join_over_http() {
    let server = TestServer::spawn().await;
    let client = server.client();
    let id = client.enqueue(Push::new("parent")).await.unwrap().id;
    let first = client.dequeue(take("w1")).await.unwrap().remove(0);
    let token = first.lease.token.to_string();
    let spawn_url = format!("/v1/jobs/{id}/spawn");
    let (status, body) = post(
        &server,
        &spawn_url,
        &format!(r#"{{"token":"{token}","name":"fan","jobs":[{{"name":"a"}},{{"name":"b","parent":1234}}]}}"#),
    )
    .await;
    assert_eq!(
        (status, &body["error"]["field"]),
        (400, &json!("jobs[1].parent")),
        "{body}"
    );
    let (status, spawned) = post(
        &server,
        &spawn_url,
        &format!(r#"{{"token":"{token}","name":"fan","jobs":[{{"name":"a"}},{{"name":"b","data":{{"n":2}}}}]}}"#),
    )
    .await;
    assert_eq!(status, 200, "{spawned}");
    let children = spawned["children"].as_array().unwrap().clone();
    assert_eq!(children.len(), 2);
    let join_url = format!("/v1/jobs/{id}/join");
    let (status, joined) = post(
        &server,
        &join_url,
        &format!(r#"{{"token":"{token}","name":"gather"}}"#),
    )
    .await;
    assert_eq!(
        (status, &joined["suspended"]),
        (200, &json!(true)),
        "{joined}"
    );
    for _ in 0..2 {
        let child = client.dequeue(take("w2")).await.unwrap().remove(0);
        client
            .finish_with(cairn::Finish {
                result: Some(json!(child.job.id.0)),
                ..cairn::Finish::new(&child.lease)
            })
            .await
            .unwrap();
    }
    let second = client.dequeue(take("w1")).await.unwrap().remove(0);
    assert_eq!(second.job.id, id);
    let token = second.lease.token.to_string();
    let (status, joined) = post(
        &server,
        &join_url,
        &format!(r#"{{"token":"{token}","name":"gather"}}"#),
    )
    .await;
    assert_eq!(status, 200, "{joined}");
    assert_eq!(
        joined,
        json!({"suspended": false, "children": [
            {"id": children[0], "state": "completed", "result": children[0]},
            {"id": children[1], "state": "completed", "result": children[1]},
        ]})
    );
    let (_, again) = post(
        &server,
        &spawn_url,
        &format!(r#"{{"token":"{token}","name":"fan","jobs":[]}}"#),
    )
    .await;
    assert_eq!(
        again["children"],
        json!(children),
        "recorded: nothing pushed again"
    );
}

/// "Try this job once" is one field: the parts of a retry policy a push leaves out are the server's default policy's,
/// as it stands when the job is pushed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_policy_with_some_parts_takes_the_defaults_for_the_rest() {
    let server = TestServer::spawn().await;
    let retry_of = |id: &Value| {
        let url = format!("{}/v1/jobs/{}", server.url(), id);
        async move { raw(reqwest::Method::GET, url, None, None).await.1["retry"].clone() }
    };
    let (status, once) = post(
        &server,
        "/v1/jobs",
        r#"{"name":"x","retry":{"max_attempts":1}}"#,
    )
    .await;
    assert_eq!(status, 201, "{once}");
    assert_eq!(
        retry_of(&once["id"]).await,
        json!({"max_attempts":1,"initial_delay_ms":5000,"multiplier":2.0,"max_delay_ms":3600000,"jitter":0.2})
    );
    let (status, set) = raw(
        reqwest::Method::PUT,
        format!("{}/v1/config/default_retry.max_attempts", server.url()),
        None,
        Some(r#"{"value":9}"#),
    )
    .await;
    assert_eq!(status, 200, "{set}");
    let (status, slower) = post(
        &server,
        "/v1/jobs",
        r#"{"name":"x","retry":{"initial_delay_ms":60000,"jitter":null}}"#,
    )
    .await;
    assert_eq!(status, 201, "{slower}");
    assert_eq!(
        retry_of(&slower["id"]).await,
        json!({"max_attempts":9,"initial_delay_ms":60000,"multiplier":2.0,"max_delay_ms":3600000,"jitter":0.2})
    );
    // What the parts make together is held to the rules, naming the part at fault.
    let (status, refused) = post(
        &server,
        "/v1/jobs",
        r#"{"name":"x","retry":{"max_delay_ms":1000}}"#,
    )
    .await;
    assert_eq!(status, 400, "{refused}");
    assert_eq!(
        refused["error"]["message"],
        "retry.initial_delay_ms: must not exceed the longest delay (1s), got 5s",
        "{refused}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn whose_children_a_job_has_travels_both_ways() {
    use cairn::{Children, Jobs, Push};
    let server = TestServer::spawn().await;
    let client = server.client();
    let id = client
        .enqueue(Push::new("parent").children(Children::OfTheJob))
        .await
        .unwrap()
        .id;
    assert_eq!(client.get(id).await.unwrap().children, Children::OfTheJob);
    let (status, plain) = post(&server, "/v1/jobs", r#"{"name":"plain"}"#).await;
    assert_eq!(status, 201, "{plain}");
    let shown = client
        .get(JobId(plain["id"].as_i64().unwrap()))
        .await
        .unwrap();
    assert_eq!(shown.children, Children::OfTheRun);
    let (status, refused) = post(&server, "/v1/jobs", r#"{"name":"x","children":"mine"}"#).await;
    assert_eq!(status, 400, "{refused}");
    assert_eq!(refused["error"]["field"], "children", "{refused}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrency_keys_over_http_limit_a_key_and_show_in_the_queue() {
    let server = TestServer::spawn().await;
    let (status, set) = post(&server, "/v1/queues/mail/key-concurrency", r#"{"limit":1}"#).await;
    assert_eq!(status, 200, "{set}");
    for _ in 0..2 {
        let body = r#"{"name":"send","queue":"mail","concurrency":{"key":"customer:42"}}"#;
        let (status, pushed) = post(&server, "/v1/jobs", body).await;
        assert_eq!(status, 201, "{pushed}");
    }
    let (status, own) = post(
        &server,
        "/v1/jobs",
        r#"{"name":"send","queue":"mail","concurrency":{"key":"customer:7","limit":3}}"#,
    )
    .await;
    assert_eq!(status, 201, "{own}");
    let (status, taken) = post(
        &server,
        "/v1/dequeue",
        r#"{"worker":"w","queues":["mail"],"limit":10}"#,
    )
    .await;
    assert_eq!(status, 200, "{taken}");
    let mut keys: Vec<&str> = taken["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["job"]["concurrency_key"].as_str().unwrap())
        .collect();
    keys.sort();
    assert_eq!(keys, ["customer:42", "customer:7"], "{taken}");
    let (status, queues) = raw(
        reqwest::Method::GET,
        format!("{}/v1/queues", server.url()),
        None,
        None,
    )
    .await;
    assert_eq!(status, 200);
    let mail = &queues["queues"][0];
    assert_eq!(mail["key_concurrency"], 1, "{mail}");
    assert_eq!(mail["waiting_on_keys"], 1, "{mail}");
    assert_eq!(
        mail["top_keys"][0],
        json!({"key": "customer:42", "running": 1, "queued": 1, "limit": 1, "full": true, "weight": 1})
    );
    for (path, body, field) in [
        ("/v1/queues/mail/key-concurrency", r#"{"limit":0}"#, "limit"),
        (
            "/v1/queues/mail/key-weight",
            r#"{"key":"customer:42","weight":0}"#,
            "weight",
        ),
        (
            "/v1/jobs",
            r#"{"name":"x","concurrency":{"key":"k","limit":0}}"#,
            "concurrency.limit",
        ),
        (
            "/v1/jobs",
            r#"{"name":"x","concurrency":{"key":""}}"#,
            "concurrency.key",
        ),
    ] {
        let (status, refused) = post(&server, path, body).await;
        assert_eq!(status, 400, "{refused}");
        assert_eq!(refused["error"]["field"], field, "{refused}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_are_json_with_kind_field_message_and_one_status_per_kind() {
    let server = TestServer::spawn_with(ServerConfig {
        max_body_bytes: 2048,
        ..ServerConfig::default()
    })
    .await;
    let url = server.url().to_owned();
    let check = |(status, body): (u16, Value), want_status: u16, want: Value| {
        assert_eq!(status, want_status, "{body}");
        assert_eq!(body, json!({ "error": want }));
    };
    check(
        post(&server, "/v1/jobs", r#"{"name":""}"#).await,
        400,
        json!({"kind": "invalid_input", "field": "name", "message": "name: must not be empty"}),
    );
    check(
        post(&server, "/v1/jobs", r#"{"name":"x","priority":"high"}"#).await,
        400,
        json!({"kind": "invalid_input", "field": "priority", "message": "priority: must be a whole number from -2147483648 to 2147483647, got the text \"high\""}),
    );
    check(
        post(&server, "/v1/jobs", "not json").await,
        400,
        json!({"kind": "invalid_input", "field": "body", "message": "body: must be a JSON object"}),
    );
    check(
        raw(
            reqwest::Method::GET,
            format!("{url}/v1/jobs/424242"),
            None,
            None,
        )
        .await,
        404,
        json!({"kind": "not_found", "field": null, "message": "job 424242 not found"}),
    );
    check(
        raw(
            reqwest::Method::GET,
            format!("{url}/v1/jobs/abc"),
            None,
            None,
        )
        .await,
        400,
        json!({"kind": "invalid_input", "field": "id", "message": "id: must be a positive integer, got \"abc\""}),
    );
    check(
        raw(
            reqwest::Method::GET,
            format!("{url}/v1/jobs?state=done"),
            None,
            None,
        )
        .await,
        400,
        json!({"kind": "invalid_input", "field": "state", "message": "state: must be one of scheduled, queued, waiting, running, completed, failed, cancelled, got \"done\""}),
    );
    check(
        post(&server, "/v1/dequeue", r#"{"worker":"w","order":"random"}"#).await,
        400,
        json!({"kind": "invalid_input", "field": "order", "message": "order: must be ordered or round_robin, got \"random\""}),
    );
    let big = format!(r#"{{"name":"x","data":"{}"}}"#, "a".repeat(4096));
    check(
        post(&server, "/v1/jobs", &big).await,
        413,
        json!({"kind": "payload_too_large", "field": "body", "message": "body: must be at most 2048 bytes (the server's max_body)"}),
    );
    check(
        post(&server, "/v1/nowhere", "{}").await,
        404,
        json!({"kind": "not_found", "field": null, "message": "no route POST /v1/nowhere; the API is described at /v1/openapi.json"}),
    );
    check(
        raw(
            reqwest::Method::PUT,
            format!("{url}/v1/dequeue"),
            None,
            None,
        )
        .await,
        405,
        json!({"kind": "method_not_allowed", "field": null, "message": "/v1/dequeue does not take PUT; the API is described at /v1/openapi.json"}),
    );

    // Lease calls: a wrong token is refused with 409 and changes nothing.
    let (status, enqueued) = post(&server, "/v1/jobs", r#"{"name":"x"}"#).await;
    assert_eq!(status, 201);
    let id = enqueued["id"].as_i64().unwrap();
    let (_, claimed) = post(&server, "/v1/dequeue", r#"{"worker":"w"}"#).await;
    assert_eq!(claimed["jobs"][0]["job"]["id"], id);
    check(
        post(
            &server,
            &format!("/v1/jobs/{id}/finish"),
            r#"{"token":"12345"}"#,
        )
        .await,
        409,
        json!({"kind": "lease_lost", "field": null, "message": format!("job {id} was leased again; this lease is stale")}),
    );
    check(
        post(
            &server,
            &format!("/v1/jobs/{id}/finish"),
            r#"{"token":"not-a-number"}"#,
        )
        .await,
        400,
        json!({"kind": "invalid_input", "field": "token", "message": "token: must be a lease token (a decimal integer), got \"not-a-number\""}),
    );
    let token = claimed["jobs"][0]["lease"]["token"].as_str().unwrap();
    let (status, _) = post(
        &server,
        &format!("/v1/jobs/{id}/finish"),
        &format!(r#"{{"token":"{token}"}}"#),
    )
    .await;
    assert_eq!(status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_token_every_request_needs_it() {
    let token = "0123456789abcdef-secret";
    let server = TestServer::spawn_with(ServerConfig {
        token: Some(token.to_owned()),
        ..ServerConfig::default()
    })
    .await;
    let url = server.url().to_owned();
    for path in ["/v1/jobs", "/v1/openapi.json", "/v1/jobs/1"] {
        let (status, body) = raw(reqwest::Method::GET, format!("{url}{path}"), None, None).await;
        assert_eq!(status, 401, "{path}");
        assert_eq!(body["error"]["kind"], "unauthorized");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains("needs a bearer token"), "{message}");
        let (status, body) = raw(
            reqwest::Method::GET,
            format!("{url}{path}"),
            Some("0123456789abcdef-wrong!"),
            None,
        )
        .await;
        assert_eq!(status, 401, "{path}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains("not one this server knows"), "{message}");
    }
    let malformed = super::wire::http()
        .get(format!("{url}/v1/jobs"))
        .header("authorization", format!("Token {token}"))
        .send()
        .await
        .unwrap();
    assert_eq!(malformed.status(), 401);
    let body: Value = serde_json::from_slice(&malformed.bytes().await.unwrap()).unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`Bearer <token>`"),
        "{body}"
    );
    // The liveness check answers without the token, and then tells nothing but that the server is up.
    let (status, body) = raw(reqwest::Method::GET, format!("{url}/v1/health"), None, None).await;
    assert_eq!((status, body), (200, json!({ "status": "ok" })));
    let (status, body) = raw(
        reqwest::Method::GET,
        format!("{url}/v1/health"),
        Some(token),
        None,
    )
    .await;
    assert_eq!(status, 200);
    assert!(body["version"].is_string(), "{body}");
    // The client sends the token; without it the same call is refused.
    server.client().enqueue(Push::new("x")).await.unwrap();
    let anonymous = cairn_client::Client::new(&url).unwrap();
    let err = anonymous.enqueue(Push::new("x")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unauthorized);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_job_is_fixed_and_requeued_over_http() {
    let server = TestServer::spawn().await;
    let client = server.client();
    let id = client
        .enqueue(
            Push::new("import")
                .data(json!({"file": "bad.csv"}))
                .retry(cairn::RetryPolicy::immediate(1)),
        )
        .await
        .unwrap()
        .id;
    // A worker that cannot heartbeat asks for a long first lease.
    let claimed = client
        .dequeue(take("script").lease_timeout(Duration::from_secs(3600)))
        .await
        .unwrap();
    let lease = &claimed[0].lease;
    let hour = lease.expires_at.as_second() - jiff::Timestamp::now().as_second();
    assert!(
        (3590..=3600).contains(&hour),
        "a lease of about an hour, got {hour} s"
    );
    client
        .fail(lease, "bad-input", "no such file")
        .await
        .unwrap();

    let err = client.set_data(JobId(424242), json!({})).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    client
        .set_data(id, json!({"file": "good.csv"}))
        .await
        .unwrap();
    assert_eq!(client.requeue(id, None).await.unwrap(), JobState::Queued);
    let again = client.dequeue(take("w")).await.unwrap();
    assert_eq!(again[0].job.data, json!({"file": "good.csv"}));
    assert_eq!(
        client.set_data(id, json!({})).await.unwrap_err().kind(),
        ErrorKind::InvalidState,
        "a running job's data is its worker's"
    );
    client.finish(&again[0].lease, None).await.unwrap();
    let job = client.get(id).await.unwrap();
    assert_eq!(job.state, JobState::Completed);
    assert_eq!(job.history.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recurring_templates_are_managed_over_http() {
    let server = TestServer::spawn().await;
    let client = server.client();
    let info = client
        .set_recurring(cairn::Recurring {
            key: "nightly/report".into(),
            cron: "0 4 * * *".into(),
            time_zone: "Europe/Berlin".into(),
            missed: cairn::MissedSlots::Skip,
            overlap: cairn::Overlap::Replace,
            job: Push::new("report.nightly").data(json!({"kind": "full"})),
        })
        .await
        .unwrap();
    assert_eq!(info.key, "nightly/report");
    let next = info.next_run.expect("a cron schedule has a next run");
    let local = next.to_zoned(jiff::tz::TimeZone::get("Europe/Berlin").unwrap());
    assert_eq!((local.hour(), local.minute()), (4, 0));
    let listed = client.recurring().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].cron, "0 4 * * *");
    assert_eq!(listed[0].overlap, cairn::Overlap::Replace);
    // The whole template reads back: its policies and the job it makes.
    assert_eq!(listed[0].missed, cairn::MissedSlots::Skip);
    assert_eq!(
        listed[0].job,
        Push::new("report.nightly").data(json!({"kind": "full"}))
    );
    // One template read back by its key, which travels as itself (`/` percent-encoded).
    let one = client
        .run(cairn::GetRecurring {
            key: "nightly/report".into(),
        })
        .await
        .unwrap();
    assert_eq!(one, listed[0]);
    let (status, body) = raw(
        reqwest::Method::GET,
        format!("{}/v1/recurring/nightly%2Freport", server.url()),
        None,
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["time_zone"], "Europe/Berlin");
    assert_eq!(
        (&body["missed"], &body["job"]["name"], &body["job"]["data"]),
        (
            &json!("skip"),
            &json!("report.nightly"),
            &json!({"kind": "full"})
        ),
        "{body}"
    );
    let (status, body) = raw(
        reqwest::Method::GET,
        format!("{}/v1/recurring/nope", server.url()),
        None,
        None,
    )
    .await;
    assert_eq!(
        (status, body["error"]["kind"].clone()),
        (404, json!("not_found"))
    );
    let too_long = "k".repeat(300);
    let (status, body) = raw(
        reqwest::Method::GET,
        format!("{}/v1/recurring/{too_long}", server.url()),
        None,
        None,
    )
    .await;
    assert_eq!(
        (status, body["error"]["field"].clone()),
        (400, json!("key")),
        "{body}"
    );

    let (status, body) = raw(
        reqwest::Method::PUT,
        format!("{}/v1/recurring/bad", server.url()),
        None,
        Some(r#"{"cron":"0 4 * * *","missed":"sometimes","job":{"name":"x"}}"#),
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["field"], "missed");
    let (status, body) = raw(
        reqwest::Method::PUT,
        format!("{}/v1/recurring/bad", server.url()),
        None,
        Some(r#"{"cron":"0 4 * * *","overlap":"queue","job":{"name":"x"}}"#),
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["field"], "overlap", "{body}");
    let (status, body) = raw(
        reqwest::Method::PUT,
        format!("{}/v1/recurring/bad", server.url()),
        None,
        Some(r#"{"cron":"61 * * * *","job":{"name":"x"}}"#),
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["field"], "cron", "{body}");

    // Paused, resumed and run by hand through the declared routes, the key's `/` travelling as itself.
    let paused = client
        .run(cairn::PauseRecurring {
            key: "nightly/report".into(),
        })
        .await
        .unwrap();
    assert!(paused.paused && paused.next_run.is_none());
    assert!(client.recurring().await.unwrap()[0].paused);
    let run = client
        .run(cairn::RunRecurring {
            key: "nightly/report".into(),
        })
        .await
        .unwrap();
    assert_eq!(
        client.get(run.id).await.unwrap().data,
        json!({"kind": "full"})
    );
    let resumed = client
        .run(cairn::ResumeRecurring {
            key: "nightly/report".into(),
        })
        .await
        .unwrap();
    assert_eq!(resumed.next_run, Some(next));
    let (status, body) = post(&server, "/v1/recurring/nope/run", "{}").await;
    assert_eq!(
        (status, body["error"]["kind"].clone()),
        (404, json!("not_found"))
    );

    client.remove_recurring("nightly/report").await.unwrap();
    assert!(client.recurring().await.unwrap().is_empty());
    assert_eq!(
        client
            .remove_recurring("nightly/report")
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::NotFound
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_a_web_page_could_forge_are_refused() {
    let server = TestServer::spawn().await;
    let url = server.url().to_owned();
    let host = url.trim_start_matches("http://").to_owned();
    let pause = format!("{url}/v1/queues/default/pause");
    let client = super::wire::http();
    for (header, value) in [
        ("origin", "http://evil.example".to_owned()),
        ("origin", "http://127.0.0.1:1".to_owned()),
        ("sec-fetch-site", "cross-site".to_owned()),
        ("host", "evil.example".to_owned()),
        (
            "host",
            format!("rebound.example:{}", host.rsplit(':').next().unwrap()),
        ),
    ] {
        let response = client
            .post(&pause)
            .header(header, &value)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 403, "{header}: {value}");
        let body: Value = serde_json::from_slice(&response.bytes().await.unwrap()).unwrap();
        assert_eq!(body["error"]["kind"], "forbidden", "{body}");
    }
    assert!(server.client().queue_stats().await.unwrap().is_empty());
    // The dashboard's own requests (same origin) and clients that are not browsers go through.
    for headers in [
        vec![
            ("origin", format!("http://{host}")),
            ("sec-fetch-site", "same-origin".to_owned()),
        ],
        vec![(
            "host",
            format!("localhost:{}", host.rsplit(':').next().unwrap()),
        )],
        vec![],
    ] {
        let mut request = client.post(&pause);
        for (name, value) in &headers {
            request = request.header(*name, value);
        }
        assert_eq!(request.send().await.unwrap().status(), 200, "{headers:?}");
    }
    assert!(server.client().queue_stats().await.unwrap()[0].paused);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_a_token_answers_the_service_names_it_is_given() {
    let server = TestServer::spawn_with(ServerConfig {
        allowed_hosts: vec!["cairn".to_owned(), "cairn.jobs.svc".to_owned()],
        ..ServerConfig::default()
    })
    .await;
    let health = format!("{}/v1/health", server.url());
    let client = super::wire::http();
    for host in ["cairn:6670", "CAIRN", "cairn.jobs.svc:80"] {
        let response = client
            .get(&health)
            .header("host", host)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{host}");
    }
    let response = client
        .get(&health)
        .header("host", "other:6670")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 403);
    let body: Value = serde_json::from_slice(&response.bytes().await.unwrap()).unwrap();
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("--allowed-host other"), "{message}");
}

/// `POST /v1/finish` answers each job on its own, in order: done, or the one-job call's error; a malformed item is
/// refused whole, naming it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finish_many_answers_each_job_in_order() {
    let server = TestServer::spawn().await;
    let check = |(status, body): (u16, Value), want_status: u16, want: Value| {
        assert_eq!(status, want_status, "{body}");
        assert_eq!(body, json!({ "error": want }));
    };
    let get = |path: String| {
        raw(
            reqwest::Method::GET,
            format!("{}{path}", server.url()),
            None,
            None,
        )
    };
    for _ in 0..3 {
        let (status, _) = post(&server, "/v1/jobs", r#"{"name":"x"}"#).await;
        assert_eq!(status, 201);
    }
    let (_, claimed) = post(&server, "/v1/dequeue", r#"{"worker":"w","limit":3}"#).await;
    let jobs: Vec<(i64, String)> = claimed["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["job"]["id"].as_i64().unwrap(),
                c["lease"]["token"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(jobs.len(), 3);
    let [(a, ta), (b, _), (c, tc)] = [jobs[0].clone(), jobs[1].clone(), jobs[2].clone()];

    check(
        post(
            &server,
            "/v1/finish",
            &format!(r#"{{"jobs":[{{"id":{a},"token":"{ta}"}},{{"id":{b},"token":"nope"}}]}}"#),
        )
        .await,
        400,
        json!({"kind": "invalid_input", "field": "jobs[1].token", "message": "jobs[1].token: must be a lease token (a decimal integer), got \"nope\""}),
    );
    check(
        post(&server, "/v1/finish", r#"{"jobs":[{"id":0,"token":"1"}]}"#).await,
        400,
        json!({"kind": "invalid_input", "field": "jobs[0].id", "message": "jobs[0].id: must be a positive integer, got \"0\""}),
    );

    let body = format!(
        r#"{{"jobs":[{{"id":{a},"token":"{ta}","data":{{"ok":true}}}},{{"id":{b},"token":"12345"}},{{"id":{c},"token":"{tc}"}}]}}"#
    );
    let (status, answer) = post(&server, "/v1/finish", &body).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer,
        json!({"results": [
            {"id": a},
            {"id": b, "error": {"kind": "lease_lost", "field": null, "message": format!("job {b} was leased again; this lease is stale")}},
            {"id": c},
        ]})
    );
    let (_, job) = get(format!("/v1/jobs/{a}")).await;
    assert_eq!(
        (&job["state"], &job["data"]),
        (&json!("completed"), &json!({"ok": true}))
    );
    let (_, job) = get(format!("/v1/jobs/{b}")).await;
    assert_eq!(job["state"], "running");
}

/// `POST /v1/finish` with a `take` finishes, then takes the worker's next jobs in the same answer, seeing the room
/// the finishes made; a take that would wait, or a bad field of it, is refused whole, naming `take.field`, with
/// nothing finished.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finish_with_a_take_answers_the_finishes_and_brings_the_next_jobs() {
    let server = TestServer::spawn().await;
    let (status, _) = post(&server, "/v1/queues/q/concurrency", r#"{"concurrency":1}"#).await;
    assert_eq!(status, 200);
    let mut ids = Vec::new();
    for i in 0..3 {
        let (status, pushed) = post(
            &server,
            "/v1/jobs",
            &format!(r#"{{"name":"x","queue":"q","data":{{"i":{i}}}}}"#),
        )
        .await;
        assert_eq!(status, 201, "{pushed}");
        ids.push(pushed["id"].as_i64().unwrap());
    }
    let (_, claimed) = post(
        &server,
        "/v1/dequeue",
        r#"{"worker":"w","queues":["q"],"limit":3}"#,
    )
    .await;
    let jobs = claimed["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 1, "the queue runs one job at a time: {claimed}");
    let (id, token) = (
        jobs[0]["job"]["id"].as_i64().unwrap(),
        jobs[0]["lease"]["token"].as_str().unwrap().to_owned(),
    );
    assert_eq!(id, ids[0]);

    for (take, field) in [
        (
            r#"{"worker":"w","queues":["q"],"wait_ms":1000}"#,
            "take.wait_ms",
        ),
        (r#"{"worker":"w","queues":["q"],"limit":0}"#, "take.limit"),
        (r#"{"worker":"","queues":["q"]}"#, "take.worker"),
    ] {
        let (status, refused) = post(
            &server,
            "/v1/finish",
            &format!(r#"{{"jobs":[{{"id":{id},"token":"{token}"}}],"take":{take}}}"#),
        )
        .await;
        assert_eq!(status, 400, "{refused}");
        assert_eq!(refused["error"]["field"], field, "{refused}");
    }
    let (_, job) = raw(
        reqwest::Method::GET,
        format!("{}/v1/jobs/{id}", server.url()),
        None,
        None,
    )
    .await;
    assert_eq!(
        job["state"], "running",
        "a refused request finished nothing"
    );

    let (status, answer) = post(
        &server,
        "/v1/finish",
        &format!(r#"{{"jobs":[{{"id":{id},"token":"{token}"}}],"take":{{"worker":"w","queues":["q"],"limit":3}}}}"#),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["results"], json!([{ "id": id }]));
    let next = answer["jobs"]
        .as_array()
        .expect("the next job came with the answer");
    assert_eq!(
        next.len(),
        1,
        "one may run, now that the first finished: {answer}"
    );
    assert_eq!(next[0]["job"]["id"], ids[1]);
    assert_eq!(next[0]["job"]["state"], "running");
    assert!(next[0]["lease"]["token"].is_string());

    // Finished with nothing left that may run: the answer has no jobs.
    let token = next[0]["lease"]["token"].as_str().unwrap();
    let (status, answer) = post(
        &server,
        "/v1/finish",
        &format!(r#"{{"jobs":[{{"id":{},"token":"{token}"}}],"take":{{"worker":"w","queues":["empty"]}}}}"#, ids[1]),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer, json!({"results": [{ "id": ids[1] }]}));
}

/// A push's `trace_parent` is held to W3C's rules, naming the field; a request's `traceparent` header that breaks
/// them is ignored (as W3C asks of a receiver), and one that keeps them goes to the jobs of a batch without their
/// own; a recurring template refuses one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trace_context_in_the_body_is_checked_and_one_in_the_header_is_taken_when_valid() {
    let server = TestServer::spawn().await;
    let trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let (status, refused) = post(
        &server,
        "/v1/jobs",
        r#"{"name": "x", "trace_parent": "00-abc"}"#,
    )
    .await;
    assert_eq!(
        (status, &refused["error"]["field"]),
        (400, &json!("trace_parent")),
        "{refused}"
    );
    let with_header = |header: &'static str, path: &'static str, body: &'static str| {
        let url = format!("{}{path}", server.url());
        async move {
            let answer = super::wire::http()
                .post(url)
                .header("traceparent", header)
                .body(body)
                .send()
                .await
                .unwrap();
            let status = answer.status().as_u16();
            let body: Value = serde_json::from_str(&answer.text().await.unwrap()).unwrap();
            (status, body)
        }
    };
    let (status, ignored) = with_header("not-a-trace", "/v1/jobs", r#"{"name": "x"}"#).await;
    assert_eq!(status, 201, "{ignored}");
    let job = server
        .client()
        .answer(cairn::GetJob::new(JobId(ignored["id"].as_i64().unwrap())))
        .await
        .unwrap();
    assert_eq!(job.trace_parent, None);
    let own = r#"{"jobs": [{"name": "a"}, {"name": "b", "trace_parent": "00-11111111111111111111111111111111-2222222222222222-00"}]}"#;
    let (status, batch) = with_header(trace, "/v1/jobs/batch", own).await;
    assert_eq!(status, 200, "{batch}");
    let mut parents = Vec::new();
    for job in batch["jobs"].as_array().unwrap() {
        let id = JobId(job["id"].as_i64().unwrap());
        parents.push(
            server
                .client()
                .answer(cairn::GetJob::new(id))
                .await
                .unwrap()
                .trace_parent,
        );
    }
    assert_eq!(
        parents,
        [
            Some(trace.to_owned()),
            Some("00-11111111111111111111111111111111-2222222222222222-00".to_owned())
        ]
    );
    let template = format!(
        r#"{{"cron": "0 * * * *", "job": {{"name": "hourly", "trace_parent": "{trace}"}}}}"#
    );
    let (status, refused) = raw(
        reqwest::Method::PUT,
        format!("{}/v1/recurring/hourly", server.url()),
        None,
        Some(&template),
    )
    .await;
    assert_eq!(
        (status, &refused["error"]["field"]),
        (400, &json!("job.trace_parent")),
        "{refused}"
    );
}

/// `POST /v1/jobs/bulk` names the field a bad request breaks, before doing anything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_bulk_request_names_its_field() {
    let server = TestServer::spawn().await;
    post(&server, "/v1/jobs", r#"{"name": "x"}"#).await;
    for (body, field) in [
        (r#"{"action": "explode", "ids": [1]}"#, "action"),
        (r#"{"action": "move", "ids": [1]}"#, "queue"),
        (r#"{"action": "cancel", "queue": "q", "ids": [1]}"#, "queue"),
        (r#"{"action": "cancel"}"#, "ids"),
        (r#"{"action": "cancel", "ids": [1], "filter": {}}"#, "ids"),
        (r#"{"action": "cancel", "ids": [0]}"#, "ids"),
        (
            r#"{"action": "cancel", "filter": {"state": "gone"}}"#,
            "filter.state",
        ),
        (
            r#"{"action": "move", "queue": "no spaces", "ids": [1]}"#,
            "queue",
        ),
    ] {
        let (status, answer) = post(&server, "/v1/jobs/bulk", body).await;
        assert_eq!(
            (status, &answer["error"]["field"]),
            (400, &json!(field)),
            "{body}: {answer}"
        );
    }
    let (status, answer) = post(
        &server,
        "/v1/jobs/bulk",
        r#"{"action": "cancel", "filter": {}}"#,
    )
    .await;
    assert_eq!(
        (status, &answer),
        (200, &json!({"matched": 1, "done": 1, "skipped": 0}))
    );
}

/// The next event of a server's stream, or a failure after ten seconds.
async fn next(events: &mut cairn_client::ClientEvents) -> cairn::ActivityEvent {
    tokio::time::timeout(Duration::from_secs(10), events.next())
        .await
        .expect("an event within ten seconds")
        .unwrap()
}

/// The event stream over HTTP (Server-Sent Events): a consumer gone during a burst of 1,000 transitions resumes
/// with `Last-Event-ID` and gets exactly the ones it missed, in order, then the live ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sse_consumer_resumes_with_last_event_id_and_gets_exactly_what_it_missed() {
    let server = TestServer::spawn().await;
    let client = server.client();
    let mut events = client
        .events(cairn::EventsFrom::Now, cairn::EventFilter::default())
        .await
        .unwrap();
    let first = client.enqueue(Push::new("before")).await.unwrap().id;
    assert_eq!(next(&mut events).await.job, Some(first));
    let resume_at = events.position().unwrap();
    drop(events);
    let burst: Vec<JobId> = client
        .enqueue_batch((0..1_000).map(|_| Push::new("burst")).collect())
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();
    let mut resumed = client
        .events(
            cairn::EventsFrom::After(resume_at),
            cairn::EventFilter::default(),
        )
        .await
        .unwrap();
    let mut got = Vec::new();
    let mut last = resume_at;
    for _ in 0..1_000 {
        let e = next(&mut resumed).await;
        assert!(e.id > last, "in order: {} after {last}", e.id);
        last = e.id;
        got.push(e.job.unwrap());
    }
    assert_eq!(got, burst);
    let live = client.enqueue(Push::new("after")).await.unwrap().id;
    assert_eq!(next(&mut resumed).await.job, Some(live));
    // A bad filter is refused naming its field, before any stream.
    let (status, refused) = raw(
        reqwest::Method::GET,
        format!("{}/v1/events?kinds=added,exploded", server.url()),
        None,
        None,
    )
    .await;
    assert_eq!((status, &refused["error"]["field"]), (400, &json!("kinds")));
}

/// A resume point no consumer of this server can have seen, below zero or after its newest event (an id from
/// another server's log), is refused naming where it came from, rather than a stream that stays silent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_point_from_nowhere_is_refused() {
    let server = TestServer::spawn().await;
    server.client().enqueue(Push::new("one")).await.unwrap();
    let (status, refused) = raw(
        reqwest::Method::GET,
        format!("{}/v1/events?after=-5", server.url()),
        None,
        None,
    )
    .await;
    assert_eq!(status, 400, "{refused}");
    assert_eq!(
        refused["error"]["message"],
        "after: must be an event's id, 0 or more (0 for every event kept), got -5"
    );
    let response = super::wire::http()
        .get(format!("{}/v1/events", server.url()))
        .header("Last-Event-ID", "99999")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 400);
    let refused: Value = serde_json::from_slice(&response.bytes().await.unwrap()).unwrap();
    assert_eq!(refused["error"]["field"], "Last-Event-ID", "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("Last-Event-ID: 99999 is after the newest event, "),
        "{message}"
    );
}

/// A consumer that resumes from an event the server's log no longer holds gets a `missed` notice (with no id, so its
/// `Last-Event-ID` stays), then the oldest event kept; `cairn events` says so on stderr.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sse_consumer_resuming_past_pruned_events_is_told() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cairn.db");
    let server = TestServer::spawn_on_file(&path).await;
    let client = server.client();
    for _ in 0..5 {
        client.enqueue(Push::new("old")).await.unwrap();
    }
    // Retention's work, done by hand: the oldest three events go.
    let conn = cairn::rusqlite::Connection::open(&path).unwrap();
    conn.busy_timeout(Duration::from_secs(5)).unwrap();
    conn.execute("DELETE FROM activity WHERE id <= 3", [])
        .unwrap();
    drop(conn);
    let (status, body) = raw(
        reqwest::Method::GET,
        format!("{}/v1/activity?limit=1000", server.url()),
        None,
        None,
    )
    .await;
    assert_eq!(status, 200);
    let oldest = body["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_i64().unwrap())
        .min()
        .unwrap();
    assert_eq!(oldest, 4);
    let mut resumed = client
        .events(cairn::EventsFrom::After(1), cairn::EventFilter::default())
        .await
        .unwrap();
    assert_eq!(next(&mut resumed).await.id, 4);
    assert_eq!(
        resumed.missed(),
        Some(cairn::EventsMissed {
            after: 1,
            oldest: 4
        })
    );
    assert_eq!(resumed.missed(), None, "told once");
    assert_eq!(resumed.position(), Some(4));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_over_http_name_bad_input_and_answer_each_status() {
    let server = TestServer::spawn().await;
    let url = server.url().to_owned();
    let get = |path: String| raw(reqwest::Method::GET, format!("{url}{path}"), None, None);
    let error = |(status, body): (u16, Value)| {
        (
            status,
            body["error"]["field"].clone(),
            body["error"]["kind"].clone(),
        )
    };
    assert_eq!(
        error(
            post(
                &server,
                "/v1/batches",
                r#"{"jobs":[{"name":"a"},{"name":"b","unique_key":"k"}]}"#
            )
            .await
        ),
        (400, json!("jobs[1].unique_key"), json!("invalid_input"))
    );
    assert_eq!(
        error(
            post(
                &server,
                "/v1/batches",
                r#"{"on_success":{"name":"done","delay_ms":10}}"#
            )
            .await
        ),
        (400, json!("on_success.delay_ms"), json!("invalid_input"))
    );
    assert_eq!(
        error(
            post(
                &server,
                "/v1/batches",
                r#"{"on_complete":{"name":"done","data":[1]}}"#
            )
            .await
        ),
        (400, json!("on_complete.data"), json!("invalid_input"))
    );
    assert_eq!(
        error(post(&server, "/v1/batches", r#"{"jobs":[],"extra":1}"#).await),
        (400, json!("extra"), json!("invalid_input"))
    );
    assert_eq!(
        error(post(&server, "/v1/batches/77/jobs", r#"{"jobs":[{"name":"a"}]}"#).await),
        (404, Value::Null, json!("not_found"))
    );
    assert_eq!(
        error(post(&server, "/v1/batches/0/close", "{}").await),
        (400, json!("id"), json!("invalid_input"))
    );
    assert_eq!(error(get("/v1/batches/77".to_owned()).await).0, 404);
    assert_eq!(
        error(get("/v1/batches?state=done".to_owned()).await),
        (400, json!("state"), json!("invalid_input"))
    );
    assert_eq!(
        error(post(&server, "/v1/jobs", r#"{"name":"a","batch":77}"#).await),
        (400, json!("batch"), json!("invalid_input"))
    );

    // An open batch takes jobs by push and by its own route; closed with every job ended, it completes, and from
    // then on refuses more.
    let (status, created) = post(
        &server,
        "/v1/batches",
        r#"{"open":true,"on_complete":{"name":"done"}}"#,
    )
    .await;
    assert_eq!(status, 200, "{created}");
    let batch = created["id"].as_i64().unwrap();
    let (status, _) = post(
        &server,
        "/v1/jobs",
        &format!(r#"{{"name":"part","batch":{batch}}}"#),
    )
    .await;
    assert_eq!(status, 201);
    let (status, added) = post(
        &server,
        &format!("/v1/batches/{batch}/jobs"),
        r#"{"jobs":[{"name":"part"}]}"#,
    )
    .await;
    assert_eq!((status, added["jobs"].as_array().unwrap().len()), (200, 1));
    let (_, jobs) = get(format!("/v1/jobs?batch={batch}")).await;
    let ids: Vec<i64> = jobs["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids.len(), 2);
    for id in &ids {
        let (_, job) = get(format!("/v1/jobs/{id}")).await;
        assert_eq!(job["batch"], json!(batch));
    }
    let (status, done) = post(
        &server,
        "/v1/jobs/bulk",
        &format!(r#"{{"action":"cancel","filter":{{"batch":{batch}}}}}"#),
    )
    .await;
    assert_eq!((status, done["done"].clone()), (200, json!(2)), "{done}");
    let (_, open) = get(format!("/v1/batches/{batch}")).await;
    assert_eq!(
        (open["state"].clone(), open["cancelled"].clone()),
        (json!("open"), json!(2))
    );
    let (status, closed) = post(&server, &format!("/v1/batches/{batch}/close"), "{}").await;
    assert_eq!(status, 200);
    assert_eq!(
        closed["state"],
        json!("completed"),
        "the close that ends it answers it completed, its callback made"
    );
    assert!(closed["on_complete"]["job"].is_i64(), "{closed}");
    let (_, completed) = get(format!("/v1/batches/{batch}")).await;
    assert_eq!(completed["state"], json!("completed"));
    assert!(completed["on_complete"]["job"].is_i64(), "{completed}");
    assert_eq!(
        error(
            post(
                &server,
                &format!("/v1/batches/{batch}/jobs"),
                r#"{"jobs":[{"name":"late"}]}"#
            )
            .await
        ),
        (409, Value::Null, json!("invalid_state"))
    );
}
