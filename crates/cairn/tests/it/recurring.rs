//! Recurring jobs with Bedrock's repeat syntax, on a manual clock: each base, data carried from run to run,
//! `SCHEDULED` catch-up, failed runs keeping the schedule, cancel ending it, and no duplicate run after a crash.

use cairn::Jobs;
use std::time::Duration;

use cairn::{ErrorKind, JobFilter, JobState, Push, Queue, QueueOptions, RetryPolicy};
use jiff::{SignedDuration, Timestamp};
use serde_json::json;

use super::harness::{TestQueue, start_time};

fn at(offset: SignedDuration) -> Timestamp {
    start_time() + offset
}

fn hours(h: i64) -> SignedDuration {
    SignedDuration::from_hours(h)
}

fn minutes(m: i64) -> SignedDuration {
    SignedDuration::from_mins(m)
}

/// Takes the one ready job, checks its data, and finishes it with new data after `work`.
async fn run_once(
    t: &TestQueue,
    expect: serde_json::Value,
    work: Duration,
    next: serde_json::Value,
) -> cairn::Job {
    let claimed = t.take("w").await.expect("the recurring job is due");
    assert_eq!(claimed.job.data, expect);
    t.advance(work);
    t.queue.finish(&claimed.lease, Some(next)).await.unwrap();
    t.queue.get(claimed.job.id).await.unwrap()
}

#[tokio::test]
async fn finished_base_counts_from_the_finish_and_carries_the_data() {
    let t = TestQueue::new().await;
    let push = Push::new("feed.poll")
        .data(json!({"cursor": 0}))
        .schedule("finished, +1 hour")
        .lease_timeout(Duration::from_secs(3600));
    t.queue.enqueue(push).await.unwrap();
    let job = run_once(
        &t,
        json!({"cursor": 0}),
        Duration::from_secs(600),
        json!({"cursor": 10}),
    )
    .await;
    assert_eq!(job.state, JobState::Scheduled);
    assert_eq!(
        job.run_at,
        at(minutes(70)),
        "an hour after the finish at 00:10"
    );
    assert_eq!(
        (job.attempt, job.finished_at, job.schedule.as_deref()),
        (0, None, Some("FINISHED, +1 HOUR"))
    );
    assert!(t.take("w").await.is_none());
    t.advance(Duration::from_secs(3600));
    let job = run_once(
        &t,
        json!({"cursor": 10}),
        Duration::from_secs(60),
        json!({"cursor": 20}),
    )
    .await;
    assert_eq!(job.run_at, at(minutes(131)));
    assert_eq!(job.history.len(), 2, "one attempt per run, all kept");
    t.close().await;
}

#[tokio::test]
async fn started_and_scheduled_bases_count_from_their_moments() {
    let t = TestQueue::new().await;
    let hour = Duration::from_secs(3600);
    let a = Push::new("a")
        .schedule("STARTED, +1 HOUR")
        .queue("a")
        .lease_timeout(hour);
    let b = Push::new("b")
        .schedule("SCHEDULED, +1 HOUR")
        .queue("b")
        .lease_timeout(hour);
    let started = t.queue.enqueue(a).await.unwrap().id;
    let scheduled = t.queue.enqueue(b).await.unwrap().id;
    t.advance(Duration::from_secs(15 * 60)); // both start 15 minutes late
    let a = t
        .queue
        .dequeue(cairn::Dequeue::new("w").queue("a"))
        .await
        .unwrap()
        .pop()
        .unwrap();
    let b = t
        .queue
        .dequeue(cairn::Dequeue::new("w").queue("b"))
        .await
        .unwrap()
        .pop()
        .unwrap();
    t.advance(Duration::from_secs(30 * 60)); // and take half an hour
    t.queue.finish(&a.lease, None).await.unwrap();
    t.queue.finish(&b.lease, None).await.unwrap();
    assert_eq!(
        t.queue.get(started).await.unwrap().run_at,
        at(minutes(75)),
        "started 00:15, +1 hour"
    );
    assert_eq!(
        t.queue.get(scheduled).await.unwrap().run_at,
        at(minutes(60)),
        "due 00:00, +1 hour"
    );
    t.close().await;
}

#[tokio::test]
async fn scheduled_catches_up_as_bedrock_does() {
    let t = TestQueue::new().await;
    let short = t
        .queue
        .enqueue(Push::new("short").schedule("SCHEDULED, +1 HOUR").queue("s"))
        .await
        .unwrap()
        .id;
    let long = t
        .queue
        .enqueue(Push::new("long").schedule("SCHEDULED, +1 DAY").queue("l"))
        .await
        .unwrap()
        .id;
    t.advance(Duration::from_secs(5 * 3600 + 300)); // the worker was down for five hours
    for queue in ["s", "l"] {
        let c = t
            .queue
            .dequeue(cairn::Dequeue::new("w").queue(queue))
            .await
            .unwrap()
            .pop()
            .unwrap();
        t.queue.finish(&c.lease, None).await.unwrap();
    }
    // Under 4 hours: skip to the next slot on the phase, 06:00. A day: one run at a time, the next due at once.
    assert_eq!(t.queue.get(short).await.unwrap().run_at, at(hours(6)));
    let long = t.queue.get(long).await.unwrap();
    assert_eq!(long.run_at, at(hours(24)));
    t.close().await;
}

#[tokio::test]
async fn a_failed_or_exhausted_run_keeps_the_schedule_and_cancel_ends_it() {
    let t = TestQueue::new().await;
    let push = Push::new("report")
        .schedule("FINISHED, +1 DAY")
        .retry(RetryPolicy::immediate(2));
    let id = t.queue.enqueue(push).await.unwrap().id;
    let c = t.take("w").await.unwrap();
    t.queue
        .fail(&c.lease, "upstream-down", "503")
        .await
        .unwrap();
    let job = t.queue.get(id).await.unwrap();
    assert_eq!(
        (job.state, job.failure_group.as_deref()),
        (JobState::Scheduled, Some("upstream-down"))
    );
    assert_eq!(job.run_at, at(hours(24)));

    t.advance(Duration::from_secs(24 * 3600));
    for _ in 0..2 {
        let c = t.take("w").await.unwrap();
        t.queue.retry(&c.lease, "timeout", None).await.unwrap();
    }
    let job = t.queue.get(id).await.unwrap();
    assert_eq!(
        (job.state, job.attempt),
        (JobState::Scheduled, 0),
        "out of retries: the next day's run"
    );
    assert_eq!(job.failure_group.as_deref(), Some("retries-exhausted"));
    assert_eq!(job.run_at, at(hours(48)));

    t.queue.cancel(id).await.unwrap();
    t.advance(Duration::from_secs(48 * 3600));
    assert!(
        t.take("w").await.is_none(),
        "a cancelled job does not recur"
    );
    t.close().await;
}

/// The recurring job is one row that moves from run to run in the transaction that ends each run, so a crash can
/// never leave two runs of one slot.
#[tokio::test]
async fn a_crash_mid_run_recovers_one_run_not_two() {
    let t = TestQueue::new().await;
    let id = t
        .queue
        .enqueue(Push::new("tick").schedule("SCHEDULED, +1 HOUR"))
        .await
        .unwrap()
        .id;
    t.take("w").await.unwrap();
    t.close().await; // the process "dies" with the run in flight
    let options = QueueOptions {
        clock: std::sync::Arc::new(t.clock.clone()),
        ..Default::default()
    };
    let queue = Queue::open_with(t.path(), options).await.unwrap();
    let all = queue.list(JobFilter::default()).await.unwrap().jobs;
    assert_eq!(all.len(), 1);
    if t.is_postgres() {
        // On PostgreSQL the run is recovered when its lease expires, not at open.
        t.advance(all[0].lease_timeout + Duration::from_secs(1));
        queue.settle().await.unwrap();
        t.advance(Duration::from_secs(60)); // past the retry's backoff, well within the hour
        queue.settle().await.unwrap();
    }
    let c = queue
        .dequeue(cairn::Dequeue::new("w"))
        .await
        .unwrap()
        .pop()
        .expect("the interrupted run is retried");
    queue.finish(&c.lease, None).await.unwrap();
    let job = queue.get(id).await.unwrap();
    assert_eq!((job.state, job.run_at), (JobState::Scheduled, at(hours(1))));
    assert_eq!(
        queue.list(JobFilter::default()).await.unwrap().jobs.len(),
        1
    );
    queue.close(Duration::from_secs(5)).await.unwrap();
}

/// A job can recur on a cron schedule in a time zone too: after each run, the next slot in local time.
#[tokio::test]
async fn a_cron_scheduled_job_runs_again_at_its_next_local_slot() {
    let t = TestQueue::new().await; // 2026-01-01T00:00Z is 01:00 in Berlin (CET)
    let push = Push::new("nightly")
        .schedule("0 4 * * *")
        .time_zone("Europe/Berlin");
    let id = t.queue.enqueue(push).await.unwrap().id;
    let c = t.take("w").await.unwrap();
    t.queue.finish(&c.lease, None).await.unwrap();
    let job = t.queue.get(id).await.unwrap();
    assert_eq!(
        (job.state, job.run_at),
        (JobState::Scheduled, at(hours(3))),
        "04:00 CET is 03:00Z"
    );
    assert_eq!(
        (job.schedule.as_deref(), job.time_zone.as_deref()),
        (Some("0 4 * * *"), Some("Europe/Berlin"))
    );
    let err = t
        .queue
        .enqueue(Push::new("x").schedule("DAILY").time_zone("Europe/Berlin"))
        .await
        .unwrap_err();
    assert_eq!(err.field(), Some("time_zone"));
    let err = t
        .queue
        .enqueue(Push::new("x").time_zone("Europe/Berlin"))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "time_zone: applies only to a job with a schedule"
    );
    t.close().await;
}

#[tokio::test]
async fn bad_repeat_specs_are_refused_when_the_job_is_created() {
    let t = TestQueue::new().await;
    let err = t
        .queue
        .enqueue(Push::new("x").schedule("FINISHED, +1 FORTNIGHT"))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert_eq!(err.field(), Some("schedule"));
    assert!(
        err.to_string()
            .starts_with("schedule: \"+1 FORTNIGHT\" is not a modifier; expected"),
        "{err}"
    );
    assert!(
        t.queue
            .list(JobFilter::default())
            .await
            .unwrap()
            .jobs
            .is_empty()
    );
    t.close().await;
}

fn template(key: &str, cron: &str, missed: cairn::MissedSlots) -> cairn::Recurring {
    cairn::Recurring {
        key: key.into(),
        cron: cron.into(),
        time_zone: "UTC".into(),
        missed,
        overlap: cairn::Overlap::Allow,
        job: Push::new(format!("job.{key}")).data(json!({"from": key})),
    }
}

/// The run times of the jobs a template created, oldest first.
async fn runs_of(queue: &Queue, key: &str) -> Vec<Timestamp> {
    let filter = JobFilter {
        name: Some(format!("job.{key}")),
        limit: 1000,
        ..JobFilter::default()
    };
    let mut runs: Vec<_> = queue
        .list(filter)
        .await
        .unwrap()
        .jobs
        .into_iter()
        .map(|j| j.run_at)
        .collect();
    runs.sort();
    runs
}

#[tokio::test]
async fn a_template_creates_one_job_per_slot_on_time() {
    let t = TestQueue::new().await;
    let info = t
        .queue
        .set_recurring(template(
            "sync",
            "*/15 * * * *",
            cairn::MissedSlots::RunOnce,
        ))
        .await
        .unwrap();
    assert_eq!(info.next_run, Some(at(minutes(15))));
    // A worker waiting for the job gets it when its slot comes.
    let queue = t.queue.clone();
    let waiting = tokio::spawn(async move {
        queue
            .dequeue(
                cairn::Dequeue::new("w")
                    .name("job.sync")
                    .wait(Duration::from_secs(30)),
            )
            .await
            .unwrap()
    });
    t.until_parked("w").await;
    t.advance(Duration::from_secs(15 * 60));
    let got = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got[0].job.run_at, at(minutes(15)));
    assert_eq!(got[0].job.data, json!({"from": "sync"}));
    t.queue.finish(&got[0].lease, None).await.unwrap();
    t.advance(Duration::from_secs(15 * 60));
    t.queue.settle().await.unwrap();
    assert_eq!(
        runs_of(&t.queue, "sync").await,
        [at(minutes(15)), at(minutes(30))]
    );
    let listed = t.queue.recurring().await.unwrap();
    assert_eq!(
        (listed[0].next_run, listed[0].last_run),
        (Some(at(minutes(45))), Some(at(minutes(30))))
    );
    t.close().await;
}

/// Every setting a template's job may carry reaches the jobs it creates (a template's `timeout` was validated and
/// then dropped once).
#[tokio::test]
async fn a_templates_job_carries_every_setting_to_its_runs() {
    let t = TestQueue::new().await;
    let retry = RetryPolicy {
        max_attempts: 9,
        initial_delay: Duration::from_millis(1500),
        multiplier: 1.5,
        max_delay: Duration::from_secs(600),
        jitter: 0.25,
    };
    let mut recurring = template("full", "*/15 * * * *", cairn::MissedSlots::RunOnce);
    recurring.job = recurring
        .job
        .queue("reports")
        .priority(-7)
        .weight(3)
        .retry(retry)
        .lease_timeout(Duration::from_secs(45))
        .timeout(Duration::from_secs(300))
        .concurrency_key("tenant:7")
        .concurrency_limit(2)
        .tag("nightly")
        .tag("finance");
    t.queue.set_recurring(recurring).await.unwrap();
    t.advance(Duration::from_secs(15 * 60));
    t.queue.settle().await.unwrap();
    let created = t
        .queue
        .list(JobFilter {
            name: Some("job.full".into()),
            ..JobFilter::default()
        })
        .await
        .unwrap()
        .jobs;
    assert_eq!(created.len(), 1);
    let job = &created[0];
    assert_eq!(job.queue.as_str(), "reports");
    assert_eq!(job.data, json!({"from": "full"}));
    assert_eq!((job.priority, job.weight), (-7, 3));
    assert_eq!(job.retry, retry);
    assert_eq!(job.lease_timeout, Duration::from_secs(45));
    assert_eq!(job.timeout, Some(Duration::from_secs(300)));
    assert_eq!(job.concurrency_key.as_ref().unwrap().as_str(), "tenant:7");
    assert_eq!(job.concurrency_limit, Some(2));
    let tags: Vec<&str> = job.tags.iter().map(|t| t.as_str()).collect();
    assert_eq!(tags, ["finance", "nightly"]);
    assert_eq!(job.run_at, at(minutes(15)));
    t.close().await;
}

/// The jobs a template created, by id, with their states.
async fn states_of(queue: &Queue, key: &str) -> Vec<JobState> {
    let filter = JobFilter {
        name: Some(format!("job.{key}")),
        limit: 1000,
        ..JobFilter::default()
    };
    let mut jobs = queue.list(filter).await.unwrap().jobs;
    jobs.sort_by_key(|j| j.id);
    jobs.into_iter().map(|j| j.state).collect()
}

#[tokio::test]
async fn overlap_skip_creates_no_run_while_the_previous_one_is_live() {
    let t = TestQueue::new().await;
    let mut recurring = template("sync", "*/15 * * * *", cairn::MissedSlots::RunOnce);
    recurring.overlap = cairn::Overlap::Skip;
    // A lease that outlasts the slots the test runs through.
    recurring.job = recurring.job.lease_timeout(Duration::from_secs(6 * 3600));
    t.queue.set_recurring(recurring).await.unwrap();
    let slot = Duration::from_secs(15 * 60);
    t.advance(slot);
    t.queue.settle().await.unwrap();
    assert_eq!(states_of(&t.queue, "sync").await, [JobState::Queued]);
    // Still queued at the next slot, then running at the one after: both slots are skipped.
    t.advance(slot);
    t.queue.settle().await.unwrap();
    let running = t.take("w").await.unwrap();
    t.advance(slot);
    t.queue.settle().await.unwrap();
    assert_eq!(states_of(&t.queue, "sync").await, [JobState::Running]);
    // Once it has ended, the next slot runs; the skipped slots still count as passed.
    t.queue.finish(&running.lease, None).await.unwrap();
    t.advance(slot);
    t.queue.settle().await.unwrap();
    assert_eq!(
        states_of(&t.queue, "sync").await,
        [JobState::Completed, JobState::Queued]
    );
    assert_eq!(runs_of(&t.queue, "sync").await[1], at(minutes(60)));
    let listed = t.queue.recurring().await.unwrap();
    assert_eq!(listed[0].overlap, cairn::Overlap::Skip);
    // Slots missed all at once under `all` make one run, not one per slot.
    let mut catch_up = template("batch", "*/15 * * * *", cairn::MissedSlots::RunAll);
    catch_up.overlap = cairn::Overlap::Skip;
    t.queue.set_recurring(catch_up).await.unwrap();
    t.advance(4 * slot);
    t.queue.settle().await.unwrap();
    assert_eq!(states_of(&t.queue, "batch").await, [JobState::Queued]);
    t.close().await;
}

#[tokio::test]
async fn overlap_replace_cancels_the_previous_run_for_the_next() {
    let t = TestQueue::new().await;
    let mut recurring = template("sync", "*/15 * * * *", cairn::MissedSlots::RunOnce);
    recurring.overlap = cairn::Overlap::Replace;
    recurring.job = recurring.job.lease_timeout(Duration::from_secs(6 * 3600));
    t.queue.set_recurring(recurring).await.unwrap();
    let slot = Duration::from_secs(15 * 60);
    t.advance(slot);
    t.queue.settle().await.unwrap();
    let running = t.take("w").await.unwrap();
    // The next slot cancels the running job: its worker's finish is refused.
    t.advance(slot);
    t.queue.settle().await.unwrap();
    assert_eq!(
        states_of(&t.queue, "sync").await,
        [JobState::Cancelled, JobState::Queued]
    );
    let refused = t.queue.finish(&running.lease, None).await.unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::LeaseLost);
    let cancelled = t.queue.get(running.job.id).await.unwrap();
    assert!(
        cancelled
            .error
            .as_deref()
            .is_some_and(|e| e.contains("replaced by the next run")),
        "{:?}",
        cancelled.error
    );
    // A queued run is replaced too; a completed one is left alone.
    t.advance(slot);
    t.queue.settle().await.unwrap();
    let third = t.take("w").await.unwrap();
    t.queue.finish(&third.lease, None).await.unwrap();
    t.advance(slot);
    t.queue.settle().await.unwrap();
    assert_eq!(
        states_of(&t.queue, "sync").await,
        [
            JobState::Cancelled,
            JobState::Cancelled,
            JobState::Completed,
            JobState::Queued
        ]
    );
    t.close().await;
}

/// A template's unique key: a slot adds nothing while a live job holds it, whoever made that job.
#[tokio::test]
async fn a_templates_unique_key_holds_a_slot_while_a_live_job_has_it() {
    let t = TestQueue::new().await;
    let mut recurring = template("sync", "*/15 * * * *", cairn::MissedSlots::RunOnce);
    recurring.job = recurring
        .job
        .unique_key("sync:all")
        .lease_timeout(Duration::from_secs(6 * 3600));
    // A job pushed by hand holds the key before the first slot.
    let by_hand = t
        .queue
        .enqueue(Push::new("job.sync").unique_key("sync:all"))
        .await
        .unwrap();
    t.queue.set_recurring(recurring).await.unwrap();
    let slot = Duration::from_secs(15 * 60);
    t.advance(slot);
    t.queue.settle().await.unwrap();
    assert_eq!(states_of(&t.queue, "sync").await, [JobState::Queued]);
    let claimed = t.take("w").await.unwrap();
    assert_eq!(claimed.job.id, by_hand.id);
    t.queue.finish(&claimed.lease, None).await.unwrap();
    // The key is free: the next slot creates its run, which holds the key in turn.
    t.advance(slot);
    t.queue.settle().await.unwrap();
    assert_eq!(
        states_of(&t.queue, "sync").await,
        [JobState::Completed, JobState::Queued]
    );
    t.advance(slot);
    t.queue.settle().await.unwrap();
    assert_eq!(states_of(&t.queue, "sync").await.len(), 2);
    t.close().await;
}

#[tokio::test]
async fn slots_missed_while_closed_follow_the_templates_policy() {
    let t = TestQueue::new().await;
    for (key, missed) in [
        ("skip", cairn::MissedSlots::Skip),
        ("once", cairn::MissedSlots::RunOnce),
        ("all", cairn::MissedSlots::RunAll),
    ] {
        t.queue
            .set_recurring(template(key, "0 * * * *", missed))
            .await
            .unwrap();
    }
    t.close().await;
    t.advance(Duration::from_secs(3 * 3600 + 30 * 60)); // down from 00:00 to 03:30: slots 01:00, 02:00, 03:00 missed
    let options = QueueOptions {
        clock: std::sync::Arc::new(t.clock.clone()),
        ..Default::default()
    };
    let queue = Queue::open_with(t.path(), options).await.unwrap();
    queue.settle().await.unwrap();
    assert_eq!(runs_of(&queue, "skip").await, Vec::<Timestamp>::new());
    assert_eq!(runs_of(&queue, "once").await, [at(hours(3))]);
    assert_eq!(
        runs_of(&queue, "all").await,
        [at(hours(1)), at(hours(2)), at(hours(3))]
    );
    assert!(
        queue
            .recurring()
            .await
            .unwrap()
            .iter()
            .all(|r| r.next_run == Some(at(hours(4))))
    );
    queue.close(Duration::from_secs(5)).await.unwrap();
}

#[tokio::test]
async fn a_slot_is_created_once_even_when_the_clock_jumps_back() {
    let t = TestQueue::new().await;
    t.queue
        .set_recurring(template("tick", "0 * * * *", cairn::MissedSlots::RunAll))
        .await
        .unwrap();
    t.advance(Duration::from_secs(3600));
    t.queue.settle().await.unwrap();
    assert_eq!(runs_of(&t.queue, "tick").await, [at(hours(1))]);
    t.clock.set(at(minutes(30))); // the clock jumps back half an hour, then forward again
    t.queue.settle().await.unwrap();
    t.clock.set(at(minutes(61)));
    t.queue.settle().await.unwrap();
    assert_eq!(
        runs_of(&t.queue, "tick").await,
        [at(hours(1))],
        "01:00 is not created twice"
    );
    t.clock.set(at(hours(2)));
    t.queue.settle().await.unwrap();
    assert_eq!(
        runs_of(&t.queue, "tick").await,
        [at(hours(1)), at(hours(2))]
    );
    t.close().await;
}

#[tokio::test]
async fn templates_are_validated_and_removable() {
    let t = TestQueue::new().await;
    let bad = |cron: &str, zone: &str, job: Push| cairn::Recurring {
        key: "k".into(),
        cron: cron.into(),
        time_zone: zone.into(),
        missed: cairn::MissedSlots::RunOnce,
        overlap: cairn::Overlap::Allow,
        job,
    };
    let cases = [
        (
            bad("0 25 * * *", "UTC", Push::new("x")),
            "cron: hour field: 25 is out of range 0-23",
        ),
        (
            bad("@daily", "Nowhere/Town", Push::new("x")),
            "time_zone: \"Nowhere/Town\" is not a known IANA time zone",
        ),
        (
            bad(
                "@daily",
                "UTC",
                Push::new("x").delay(Duration::from_secs(5)),
            ),
            "job.delay: must be unset in a recurring template: its cron schedule makes each run",
        ),
        (
            bad("@daily", "UTC", Push::new("")),
            "job.name: must not be empty",
        ),
    ];
    for (recurring, expected) in cases {
        assert_eq!(
            t.queue
                .set_recurring(recurring)
                .await
                .unwrap_err()
                .to_string(),
            expected
        );
    }
    assert!(t.queue.recurring().await.unwrap().is_empty());
    let set = t
        .queue
        .set_recurring(template("gone", "0 * * * *", cairn::MissedSlots::RunAll))
        .await
        .unwrap();
    // Read back by its key, as the listing has it; a key that no template has, or no template could have, says so.
    let read = |key: &str| {
        t.queue.run(cairn::GetRecurring {
            key: key.to_owned(),
        })
    };
    assert_eq!(read("gone").await.unwrap(), set);
    assert_eq!(t.queue.recurring().await.unwrap(), vec![set]);
    assert!(read("other").await.unwrap_err().is_not_found());
    assert_eq!(read("").await.unwrap_err().field(), Some("key"));
    t.queue.remove_recurring("gone").await.unwrap();
    assert!(read("gone").await.unwrap_err().is_not_found());
    assert!(
        t.queue
            .remove_recurring("gone")
            .await
            .unwrap_err()
            .is_not_found()
    );
    t.advance(Duration::from_secs(2 * 3600));
    t.queue.settle().await.unwrap();
    assert!(runs_of(&t.queue, "gone").await.is_empty());
    t.close().await;
}

/// After a long downtime, RunOnce creates exactly one job however dense the schedule, at the latest missed slot.
#[tokio::test]
async fn run_once_after_a_day_down_creates_one_job_for_a_per_second_schedule() {
    let t = TestQueue::new().await;
    t.queue
        .set_recurring(template(
            "dense",
            "* * * * * *",
            cairn::MissedSlots::RunOnce,
        ))
        .await
        .unwrap();
    t.queue
        .set_recurring(template(
            "minutely",
            "* * * * *",
            cairn::MissedSlots::RunOnce,
        ))
        .await
        .unwrap();
    t.close().await;
    t.advance(Duration::from_secs(24 * 3600) + Duration::from_millis(500));
    let options = QueueOptions {
        clock: std::sync::Arc::new(t.clock.clone()),
        ..Default::default()
    };
    let queue = Queue::open_with(t.path(), options).await.unwrap();
    queue.settle().await.unwrap();
    assert_eq!(runs_of(&queue, "dense").await, [at(hours(24))]);
    assert_eq!(runs_of(&queue, "minutely").await, [at(hours(24))]);
    queue.close(Duration::from_secs(5)).await.unwrap();
}

/// Setting a template again with a new schedule never goes back before the last slot it created, even with the
/// clock behind.
#[tokio::test]
async fn re_setting_a_template_never_recreates_a_slot() {
    let t = TestQueue::new().await;
    t.queue
        .set_recurring(template("tick", "0 * * * *", cairn::MissedSlots::RunAll))
        .await
        .unwrap();
    t.advance(Duration::from_secs(3600));
    t.queue.settle().await.unwrap();
    t.clock.set(at(minutes(30))); // the clock is behind the last slot created (01:00)
    let info = t
        .queue
        .set_recurring(template("tick", "*/30 * * * *", cairn::MissedSlots::RunAll))
        .await
        .unwrap();
    assert_eq!(
        info.next_run,
        Some(at(minutes(90))),
        "after 01:00, not 01:00 again"
    );
    t.clock.set(at(minutes(61)));
    t.queue.settle().await.unwrap();
    assert_eq!(runs_of(&t.queue, "tick").await, [at(hours(1))]);
    t.close().await;
}

#[tokio::test]
async fn a_paused_template_makes_no_run_and_resumes_from_now() {
    let t = TestQueue::new().await;
    let hourly = template("sync", "0 * * * *", cairn::MissedSlots::RunAll);
    t.queue.set_recurring(hourly.clone()).await.unwrap();
    let paused = t
        .queue
        .run(cairn::PauseRecurring { key: "sync".into() })
        .await
        .unwrap();
    assert!(paused.paused);
    assert_eq!(paused.next_run, None);
    // Three slots pass while it is paused: none runs, and none is made up when it resumes.
    t.advance(Duration::from_secs(3 * 3600 + 60));
    t.queue.settle().await.unwrap();
    assert!(runs_of(&t.queue, "sync").await.is_empty());
    // Setting it again (a deploy, say) keeps it paused.
    let set = t.queue.set_recurring(hourly).await.unwrap();
    assert!(set.paused);
    assert_eq!(set.next_run, None);
    let resumed = t
        .queue
        .run(cairn::ResumeRecurring { key: "sync".into() })
        .await
        .unwrap();
    assert!(!resumed.paused);
    assert_eq!(resumed.next_run, Some(at(hours(4))));
    t.queue.settle().await.unwrap();
    assert!(runs_of(&t.queue, "sync").await.is_empty());
    t.advance(Duration::from_secs(3600));
    t.queue.settle().await.unwrap();
    assert_eq!(runs_of(&t.queue, "sync").await, [at(hours(4))]);
    // Resuming again changes nothing.
    let again = t
        .queue
        .run(cairn::ResumeRecurring { key: "sync".into() })
        .await
        .unwrap();
    assert_eq!(again.next_run, Some(at(hours(5))));
    for missing in [
        t.queue
            .run(cairn::PauseRecurring { key: "nope".into() })
            .await
            .unwrap_err(),
        t.queue
            .run(cairn::ResumeRecurring { key: "nope".into() })
            .await
            .unwrap_err(),
    ] {
        assert_eq!(missing.kind(), ErrorKind::NotFound, "{missing}");
    }
    t.close().await;
}

#[tokio::test]
async fn running_a_template_by_hand_makes_a_job_now_as_its_overlap_policy_allows() {
    let t = TestQueue::new().await;
    let mut daily = template("report", "0 4 * * *", cairn::MissedSlots::RunOnce);
    daily.overlap = cairn::Overlap::Skip;
    let info = t.queue.set_recurring(daily).await.unwrap();
    let run = t
        .queue
        .run(cairn::RunRecurring {
            key: "report".into(),
        })
        .await
        .unwrap();
    assert!(!run.existing);
    let job = t.queue.get(run.id).await.unwrap();
    assert_eq!(
        (job.state, job.run_at, job.data),
        (JobState::Queued, start_time(), json!({"from": "report"}))
    );
    // Its schedule is untouched.
    let listed = t.queue.recurring().await.unwrap();
    assert_eq!(listed[0].next_run, info.next_run);
    assert_eq!(
        listed[0].last_job,
        Some(run.id),
        "the run by hand is its last job"
    );
    // The run is live: under `skip`, another by hand is refused, and so is the next slot.
    let refused = t
        .queue
        .run(cairn::RunRecurring {
            key: "report".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::InvalidState, "{refused}");
    t.advance(Duration::from_secs(5 * 3600));
    t.queue.settle().await.unwrap();
    assert_eq!(states_of(&t.queue, "report").await, [JobState::Queued]);
    // Once it ended, a run by hand goes, paused or not.
    let claimed = t.take("w").await.unwrap();
    t.queue.finish(&claimed.lease, None).await.unwrap();
    t.queue
        .run(cairn::PauseRecurring {
            key: "report".into(),
        })
        .await
        .unwrap();
    t.queue
        .run(cairn::RunRecurring {
            key: "report".into(),
        })
        .await
        .unwrap();
    assert_eq!(
        states_of(&t.queue, "report").await,
        [JobState::Completed, JobState::Queued]
    );
    let missing = t
        .queue
        .run(cairn::RunRecurring { key: "nope".into() })
        .await
        .unwrap_err();
    assert_eq!(missing.kind(), ErrorKind::NotFound, "{missing}");
    t.close().await;
}
