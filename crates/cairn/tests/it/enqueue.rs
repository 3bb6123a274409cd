//! Enqueueing: validation, batches, unique keys, delays, the application's own transaction.

use cairn::Jobs;
use std::time::Duration;

use cairn::{Dequeue, ErrorKind, JobFilter, JobState, Push, RetryPolicy};
use serde_json::json;

use super::harness::TestQueue;

async fn count_jobs(t: &TestQueue) -> usize {
    t.queue
        .list(JobFilter {
            limit: 1000,
            ..JobFilter::default()
        })
        .await
        .unwrap()
        .jobs
        .len()
}

/// Each bad push fails with an error naming the field, and writes nothing.
#[tokio::test]
async fn bad_input_names_the_field_and_writes_nothing() {
    let t = TestQueue::with(|o| o.max_data_bytes = 100).await;
    let cases: Vec<(Push, &str)> = vec![
        (Push::new(""), "name: must not be empty"),
        (
            Push::new("a\tb"),
            "name: must not contain control characters, got '\\t'",
        ),
        (
            Push::new("x").queue("no spaces"),
            "queue: may only contain letters, digits and _ - . :, got ' '",
        ),
        (
            Push::new("x").weight(0),
            "weight: must be between 1 and 1000, got 0",
        ),
        (
            Push::new("x").weight(u32::MAX),
            "weight: must be between 1 and 1000, got 4294967295",
        ),
        (
            Push::new("x").data(json!({"blob": "y".repeat(200)})),
            "data: must be at most 100 bytes of JSON, got 211",
        ),
        (
            Push::new("x").retry(RetryPolicy::attempts(0)),
            "max_attempts: must be at least 1, got 0",
        ),
        (
            Push::new("x").lease_timeout(Duration::from_millis(5)),
            "lease_timeout: must be between 100ms and 86400s, got 5ms",
        ),
        (
            Push::new("x")
                .run_at(t.queue.now())
                .delay(Duration::from_secs(1)),
            "run_at: cannot be combined with delay",
        ),
        (Push::new("x").tag(""), "tags: must not be empty"),
        (
            Push::new("x").parent(cairn::JobId(999)),
            "parent: job 999 does not exist",
        ),
    ];
    for (push, expected) in cases {
        let err = t.queue.enqueue(push).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{expected}");
        assert_eq!(err.to_string(), expected);
    }
    let err = Push::new("x").data_json("{not json").unwrap_err();
    assert_eq!(err.field(), Some("data"));
    assert!(
        err.to_string()
            .starts_with("data: must be valid JSON: key must be a string"),
        "{err}"
    );
    assert_eq!(count_jobs(&t).await, 0);
    t.close().await;
}

#[tokio::test]
async fn data_reads_back_with_its_keys_in_the_order_they_were_written() {
    let t = TestQueue::new().await;
    let written = r#"{"r":1,"done":true,"nested":{"z":[{"y":1,"x":2}],"a":null}}"#;
    let data: serde_json::Value = serde_json::from_str(written).unwrap();
    let one = t
        .queue
        .enqueue(Push::new("a").data(data.clone()))
        .await
        .unwrap()
        .id;
    let batch = t.push_batch(vec![Push::new("b").data(data.clone())]).await;
    let as_text = |v: &serde_json::Value| serde_json::to_string(v).unwrap();
    for id in [one, batch[0]] {
        assert_eq!(as_text(&t.queue.get(id).await.unwrap().data), written);
    }
    // A listing, a claim, new data and a checkpoint keep the order too.
    let listed = t.queue.list(JobFilter::default()).await.unwrap();
    assert!(listed.jobs.iter().all(|j| as_text(&j.data) == written));
    let changed = r#"{"zz":2,"aa":1}"#;
    t.queue
        .set_data(batch[0], serde_json::from_str(changed).unwrap())
        .await
        .unwrap();
    assert_eq!(as_text(&t.queue.get(batch[0]).await.unwrap().data), changed);
    let claimed = t.take("w").await.unwrap();
    assert_eq!(as_text(&claimed.job.data), written);
    let saved = r#"{"step":3,"cursor":"x"}"#;
    t.queue
        .checkpoint(&claimed.lease, serde_json::from_str(saved).unwrap())
        .await
        .unwrap();
    assert_eq!(as_text(&t.queue.get(one).await.unwrap().data), saved);
    t.close().await;
}

#[tokio::test]
async fn a_batch_is_all_or_nothing() {
    let t = TestQueue::new().await;
    let err = t
        .queue
        .enqueue_batch(vec![Push::new("a"), Push::new("b"), Push::new("")])
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "jobs[2].name: must not be empty");
    assert_eq!(err.field(), Some("jobs[2].name"));
    assert_eq!(count_jobs(&t).await, 0);
    let ok = t
        .queue
        .enqueue_batch((0..500).map(|i| Push::new(format!("job.{i}"))).collect())
        .await
        .unwrap();
    assert_eq!(ok.len(), 500);
    assert!(ok.windows(2).all(|w| w[0].id < w[1].id));
    assert_eq!(count_jobs(&t).await, 500);
    t.close().await;
}

#[tokio::test]
async fn a_live_unique_key_returns_the_existing_job() {
    let t = TestQueue::new().await;
    let first = t
        .queue
        .enqueue(Push::new("report").unique_key("daily"))
        .await
        .unwrap();
    let second = t
        .queue
        .enqueue(Push::new("report").unique_key("daily"))
        .await
        .unwrap();
    assert!(!first.existing);
    assert!(second.existing);
    assert_eq!(first.id, second.id);
    // Once the job finishes, the key is free again.
    let claimed = t.take("w").await.unwrap();
    t.queue.finish(&claimed.lease, None).await.unwrap();
    let third = t
        .queue
        .enqueue(Push::new("report").unique_key("daily"))
        .await
        .unwrap();
    assert!(!third.existing);
    assert_ne!(third.id, first.id);
    t.close().await;
}

#[tokio::test]
async fn delayed_jobs_are_scheduled_until_their_time() {
    let t = TestQueue::new().await;
    let pushed = t
        .queue
        .enqueue(Push::new("later").delay(Duration::from_secs(60)))
        .await
        .unwrap();
    assert_eq!(pushed.state, JobState::Scheduled);
    assert!(t.take("w").await.is_none());
    t.advance(Duration::from_secs(59));
    assert!(t.take("w").await.is_none());
    t.advance(Duration::from_secs(1));
    let claimed = t.take("w").await.expect("due at exactly run_at");
    assert_eq!(claimed.job.id, pushed.id);
    t.close().await;
}

#[tokio::test]
async fn job_fields_round_trip() {
    let t = TestQueue::new().await;
    // A child of a job waiting for its children starts as an ordinary job.
    let parent = t.push("parent").await;
    let lease = t.take("w").await.unwrap().lease;
    t.queue
        .enqueue(Push::new("sibling").parent(parent))
        .await
        .unwrap();
    t.queue.finish(&lease, None).await.unwrap();
    assert_eq!(t.queue.get(parent).await.unwrap().state, JobState::Waiting);
    let push = Push::new("email.send")
        .queue("mail")
        .data(json!({"to": "ada@example.com"}))
        .priority(7)
        .weight(3)
        .unique_key("ada")
        .tag("b")
        .tag("a")
        .tag("a")
        .parent(parent)
        .lease_timeout(Duration::from_secs(9));
    let id = t.queue.enqueue(push).await.unwrap().id;
    let job = t.queue.get(id).await.unwrap();
    assert_eq!(job.queue.as_str(), "mail");
    assert_eq!(job.name.as_str(), "email.send");
    assert_eq!(job.state, JobState::Queued);
    assert_eq!(job.data, json!({"to": "ada@example.com"}));
    assert_eq!((job.priority, job.weight, job.attempt), (7, 3, 0));
    assert_eq!(
        job.tags.iter().map(|t| t.as_str()).collect::<Vec<_>>(),
        ["a", "b"]
    );
    assert_eq!(job.parent, Some(parent));
    assert_eq!(job.unique_key.as_ref().map(|k| k.as_str()), Some("ada"));
    assert_eq!(job.lease_timeout, Duration::from_secs(9));
    assert_eq!(job.created_at, t.queue.now());
    assert_eq!(job.run_at, t.queue.now());
    assert!(job.history.is_empty());
    t.close().await;
}

#[tokio::test]
async fn enqueue_in_the_applications_transaction_exists_only_if_it_commits() {
    let t = TestQueue::new().await;
    if t.is_postgres() {
        // The application's transaction is a SQLite connection to the queue's file: a queue on PostgreSQL says so.
        let e = t.queue.connect().unwrap_err();
        assert_eq!(e.kind(), cairn::ErrorKind::InvalidState);
        assert!(e.to_string().contains("SQLite"), "{e}");
        return t.close().await;
    }
    let mut conn = t.queue.connect().unwrap();
    conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY)", [])
        .unwrap();

    let tx = conn.transaction().unwrap();
    tx.execute("INSERT INTO orders (id) VALUES (1)", [])
        .unwrap();
    t.queue.enqueue_in(&tx, &Push::new("order.ship")).unwrap();
    // A queue's first keyed job goes through the writer, which must learn that the queue has keys.
    let err = t
        .queue
        .enqueue_in(&tx, &Push::new("order.ship").concurrency_key("customer:1"))
        .unwrap_err();
    assert_eq!(err.field(), Some("concurrency"), "{err}");
    tx.rollback().unwrap();
    assert_eq!(
        count_jobs(&t).await,
        0,
        "rolled back with the application's write"
    );

    // A worker waiting before the commit gets the job when the application commits.
    let queue = t.queue.clone();
    let waiting = tokio::spawn(async move {
        queue
            .dequeue(Dequeue::new("w").wait(Duration::from_secs(30)))
            .await
            .unwrap()
    });
    t.until_parked("w").await;
    let tx = conn.transaction().unwrap();
    tx.execute("INSERT INTO orders (id) VALUES (2)", [])
        .unwrap();
    let id = t
        .queue
        .enqueue_in(&tx, &Push::new("order.ship"))
        .unwrap()
        .id;
    tx.commit().unwrap();
    let got = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].job.id, id);

    let err = t.queue.enqueue_in(&conn, &Push::new("x")).unwrap_err();
    assert_eq!(err.field(), Some("conn"));
    t.close().await;
}

/// A request that fails after writing (here a batch whose last job names a parent that does not exist, found only
/// after the jobs before it were inserted) is rolled back alone: requests that shared its transaction still succeed.
#[tokio::test]
async fn a_failing_batch_does_not_fail_its_neighbours() {
    let t = TestQueue::new().await;
    let bad = vec![
        Push::new("ok.1"),
        Push::new("ok.2"),
        Push::new("orphan").parent(cairn::JobId(999_999)),
    ];
    let mut calls = tokio::task::JoinSet::new();
    for round in 0..20 {
        let queue = t.queue.clone();
        let bad = bad.clone();
        calls.spawn(async move { queue.enqueue_batch(bad).await.map(|_| ()).unwrap_err() });
        let queue = t.queue.clone();
        calls.spawn(async move {
            queue
                .enqueue(Push::new(format!("good.{round}")))
                .await
                .unwrap();
            cairn::Error::clone(&queue.enqueue(Push::new("")).await.unwrap_err())
        });
    }
    while let Some(err) = calls.join_next().await {
        assert!(err.unwrap().is_invalid_input());
    }
    let names: Vec<String> = t
        .queue
        .list(JobFilter {
            limit: 1000,
            ..JobFilter::default()
        })
        .await
        .unwrap()
        .jobs
        .into_iter()
        .map(|j| j.name.to_string())
        .collect();
    assert_eq!(names.len(), 20, "only the good single pushes: {names:?}");
    assert!(names.iter().all(|n| n.starts_with("good.")));
    t.close().await;
}

/// Plain jobs of a batch are inserted many per statement; jobs with tags or unique keys one at a time. Order, ids
/// and fields come out the same either way.
#[tokio::test]
async fn a_batch_mixing_plain_and_keyed_jobs_keeps_its_order() {
    let t = TestQueue::new().await;
    let existing = t
        .queue
        .enqueue(Push::new("keyed").unique_key("k"))
        .await
        .unwrap();
    let jobs: Vec<Push> = (0..100)
        .map(|i| match i {
            40 => Push::new("tagged").tag("t"),
            65 => Push::new("keyed").unique_key("k"),
            70 => Push::new("later").delay(Duration::from_secs(60)),
            _ => Push::new(format!("plain.{i}")).data(json!({ "i": i })),
        })
        .collect();
    let out = t.queue.enqueue_batch(jobs).await.unwrap();
    assert_eq!(out.len(), 100);
    assert_eq!((out[65].id, out[65].existing), (existing.id, true));
    assert_eq!(out[70].state, JobState::Scheduled);
    let fresh: Vec<_> = out.iter().filter(|e| !e.existing).map(|e| e.id).collect();
    assert!(
        fresh.windows(2).all(|w| w[0] < w[1]),
        "ids follow batch order"
    );
    let tagged = t.queue.get(out[40].id).await.unwrap();
    assert_eq!((tagged.name.as_str(), tagged.tags.len()), ("tagged", 1));
    for i in [0, 31, 32, 39, 41, 99] {
        let job = t.queue.get(out[i].id).await.unwrap();
        assert_eq!(job.name.as_str(), format!("plain.{i}"));
        assert_eq!(job.data, json!({ "i": i }));
    }
    t.close().await;
}

/// The jobs holding a debounce burst's name, oldest first.
async fn named(t: &TestQueue, name: &str) -> Vec<cairn::Job> {
    let mut jobs = t
        .queue
        .list(JobFilter {
            name: Some(name.into()),
            limit: 1000,
            ..JobFilter::default()
        })
        .await
        .unwrap()
        .jobs;
    jobs.sort_by_key(|j| j.id);
    jobs
}

#[tokio::test]
async fn debounced_pushes_land_in_one_job_that_runs_after_the_last() {
    let t = TestQueue::new().await;
    let (delay, max_wait) = (Duration::from_secs(30), Duration::from_secs(120));
    let push = |n: i64| {
        Push::new("reindex")
            .data(json!({ "n": n }))
            .debounce("customer:42", delay, max_wait)
    };
    let first = t.queue.enqueue(push(1)).await.unwrap();
    assert_eq!((first.state, first.existing), (JobState::Scheduled, false));
    // Pushes within the window land in the same job, keep the newest data, and move its run.
    t.advance(Duration::from_secs(20));
    let second = t.queue.enqueue(push(2)).await.unwrap();
    assert_eq!(
        (second.id, second.state, second.existing),
        (first.id, JobState::Scheduled, true)
    );
    let job = t.queue.get(first.id).await.unwrap();
    assert_eq!(job.data, json!({"n": 2}));
    assert_eq!(
        job.debounce_key.as_ref().map(|k| k.as_str()),
        Some("customer:42")
    );
    assert_eq!(job.run_at, t.queue.now() + delay);
    // A key of its own is a job of its own.
    let other = t
        .queue
        .enqueue(Push::new("reindex.other").debounce("customer:7", delay, max_wait))
        .await
        .unwrap();
    assert_ne!(other.id, first.id);
    // Never past the first push's max_wait: at 110 s, the run stays at 120 s, not 140 s.
    t.advance(Duration::from_secs(90));
    let third = t.queue.enqueue(push(3)).await.unwrap();
    assert_eq!(third.id, first.id);
    let job = t.queue.get(first.id).await.unwrap();
    assert_eq!(job.run_at, t.queue.now() + Duration::from_secs(10));
    assert_eq!(job.data, json!({"n": 3}));
    // Due and not yet taken: still pending, so still debounced while the window is open.
    t.advance(Duration::from_secs(10));
    t.queue.settle().await.unwrap();
    assert_eq!(t.queue.get(first.id).await.unwrap().state, JobState::Queued);
    // Past the window, a push makes a new job, and the first runs as it is.
    t.advance(Duration::from_secs(1));
    let fourth = t.queue.enqueue(push(4)).await.unwrap();
    assert_ne!(fourth.id, first.id);
    assert!(!fourth.existing);
    let claimed = t
        .queue
        .dequeue(Dequeue::new("w").name("reindex"))
        .await
        .unwrap()
        .remove(0);
    assert_eq!(
        (claimed.job.id, claimed.job.data.clone()),
        (first.id, json!({"n": 3}))
    );
    // A running job is not pending: a push lands in the open one, never in it.
    let fifth = t.queue.enqueue(push(5)).await.unwrap();
    assert_eq!(fifth.id, fourth.id);
    let jobs = named(&t, "reindex").await;
    let ids: Vec<_> = jobs.iter().map(|j| j.id).collect();
    assert_eq!(ids, [first.id, fourth.id], "one job per burst");
    // The activity log says when a push landed in a job.
    let activity = t
        .queue
        .activity(cairn::ActivityFilter {
            job: Some(first.id),
            ..cairn::ActivityFilter::default()
        })
        .await
        .unwrap();
    let debounced = activity
        .events
        .iter()
        .filter(|e| e.kind == cairn::ActivityKind::Debounced)
        .count();
    assert_eq!(debounced, 2, "{:?}", activity.events);
    t.close().await;
}

#[tokio::test]
async fn a_bad_debounce_names_the_field_and_writes_nothing() {
    let t = TestQueue::new().await;
    let minute = Duration::from_secs(60);
    let cases = [
        (Push::new("x").debounce("", minute, minute), "debounce.key"),
        (
            Push::new("x").debounce("k", 2 * minute, minute),
            "debounce.delay",
        ),
        (
            Push::new("x").debounce("k", minute, cairn::MAX_DEBOUNCE + minute),
            "debounce.max_wait",
        ),
        (
            Push::new("x").debounce("k", minute, minute).delay(minute),
            "debounce",
        ),
        (
            Push::new("x").debounce("k", minute, minute).unique_key("u"),
            "debounce",
        ),
    ];
    for (push, field) in cases {
        let e = t.queue.enqueue(push).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
        assert_eq!(e.field(), Some(field), "{e}");
    }
    assert_eq!(count_jobs(&t).await, 0);
    t.close().await;
}

#[tokio::test]
async fn a_throttle_allows_one_job_per_key_per_period_whatever_became_of_it() {
    let t = TestQueue::new().await;
    let day = Duration::from_secs(24 * 3600);
    let push = || Push::new("welcome").throttle("welcome:ada", day);
    let first = t.queue.enqueue(push()).await.unwrap();
    assert!(!first.existing);
    let again = t.queue.enqueue(push()).await.unwrap();
    assert_eq!((again.id, again.existing), (first.id, true));
    let job = t.queue.get(first.id).await.unwrap();
    assert_eq!(
        job.throttle_key.as_ref().map(|k| k.as_str()),
        Some("welcome:ada")
    );
    // Unlike a unique key, it still holds once the job has ended.
    let claimed = t.take("w").await.unwrap();
    t.queue.finish(&claimed.lease, None).await.unwrap();
    t.advance(day - Duration::from_millis(1));
    let still = t.queue.enqueue(push()).await.unwrap();
    assert_eq!(
        (still.id, still.state, still.existing),
        (first.id, JobState::Completed, true)
    );
    // Another key is another job; after the period, the key is free again.
    let other = t
        .queue
        .enqueue(Push::new("welcome").throttle("welcome:bob", day))
        .await
        .unwrap();
    assert!(!other.existing);
    t.advance(Duration::from_millis(1));
    let next = t.queue.enqueue(push()).await.unwrap();
    assert!(!next.existing);
    assert_ne!(next.id, first.id);
    // With states, only an earlier job in one of them counts: a failed or completed one lets the next through.
    let mut live_only = Push::new("sync").throttle("sync:7", day);
    live_only.throttle.as_mut().unwrap().states = vec![JobState::Queued, JobState::Running];
    let sync = t.queue.enqueue(live_only.clone()).await.unwrap();
    assert_eq!(
        t.queue.enqueue(live_only.clone()).await.unwrap().id,
        sync.id
    );
    let claimed = t
        .queue
        .dequeue(Dequeue::new("w").name("sync"))
        .await
        .unwrap()
        .remove(0);
    t.queue.finish(&claimed.lease, None).await.unwrap();
    let after = t.queue.enqueue(live_only).await.unwrap();
    assert!(!after.existing);
    // A debounced push that lands in a pending job gives it its throttle key, as a new job would get it.
    let minute = Duration::from_secs(60);
    let burst = t
        .queue
        .enqueue(Push::new("digest").debounce("digest:ada", minute, 10 * minute))
        .await
        .unwrap();
    let landed = t
        .queue
        .enqueue(
            Push::new("digest")
                .debounce("digest:ada", minute, 10 * minute)
                .throttle("digest:ada", day),
        )
        .await
        .unwrap();
    assert_eq!(landed.id, burst.id);
    let held = t
        .queue
        .enqueue(Push::new("digest").throttle("digest:ada", day))
        .await
        .unwrap();
    assert_eq!((held.id, held.existing), (burst.id, true));
    // Bad throttles are refused naming the field.
    for (push, field) in [
        (Push::new("x").throttle("", day), "throttle.key"),
        (
            Push::new("x").throttle("k", Duration::ZERO),
            "throttle.period",
        ),
        (
            Push::new("x").throttle("k", cairn::MAX_THROTTLE + day),
            "throttle.period",
        ),
    ] {
        let e = t.queue.enqueue(push).await.unwrap_err();
        assert_eq!(e.field(), Some(field), "{e}");
    }
    t.close().await;
}
