//! Steps inside a handler's run: recorded once under the lease, read back by every later attempt, never run again.

use cairn::Jobs;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use cairn::{ErrorKind, JobError, JobFilter, JobState, Push, RetryPolicy, StepName, Worker};
use serde_json::{Value, json};

use super::harness::{PATIENCE, TestQueue, eventually, futures_join_all};

fn step(name: &str) -> StepName {
    StepName::parse(name).unwrap()
}

/// Waits for job `id` to complete.
async fn until_completed(t: &TestQueue, id: cairn::JobId) {
    eventually(PATIENCE, "the job completes", || async move {
        t.queue.get(id).await.unwrap().state == JobState::Completed
    })
    .await;
}

/// The first attempt charges and then fails; the second reads the charge back without charging again, pages through
/// a loop whose turns are steps of their own, and completes. Each body ran once, counted outside the queue.
#[tokio::test]
async fn a_recorded_step_is_read_back_by_later_attempts_and_never_run_again() {
    let t = TestQueue::new().await;
    let id = t
        .queue
        .enqueue(Push::new("order").retry(RetryPolicy::immediate(3)))
        .await
        .unwrap()
        .id;
    let charges = Arc::new(AtomicU32::new(0));
    let pages = Arc::new(AtomicU32::new(0));
    let (c, p) = (charges.clone(), pages.clone());
    let worker = Worker::builder(&t.queue, "w1")
        .handler("order", move |job| {
            let (charges, pages) = (c.clone(), p.clone());
            async move {
                let receipt: u32 = job
                    .step("charge", || async {
                        Ok::<_, JobError>(charges.fetch_add(1, Ordering::SeqCst) + 100)
                    })
                    .await?;
                if job.attempt() == 1 {
                    return Err(JobError::retry("the warehouse did not answer"));
                }
                let mut seen = Vec::new();
                for _ in 0..3 {
                    let page: u32 = job
                        .step("page", || async {
                            Ok::<_, JobError>(pages.fetch_add(1, Ordering::SeqCst))
                        })
                        .await?;
                    seen.push(page);
                }
                job.set_result(json!({"receipt": receipt, "pages": seen}));
                Ok(())
            }
        })
        .start()
        .unwrap();
    until_completed(&t, id).await;
    worker.stop(Duration::from_secs(5)).await.unwrap();
    assert_eq!(charges.load(Ordering::SeqCst), 1, "charged once");
    assert_eq!(pages.load(Ordering::SeqCst), 3, "each page once");
    let job = t.queue.get(id).await.unwrap();
    assert_eq!(
        job.result,
        Some(json!({"receipt": 100, "pages": [0, 1, 2]}))
    );
    let steps: Vec<(&str, Value, u32)> = job
        .steps
        .iter()
        .map(|s| (s.name.as_str(), s.result.clone(), s.attempt))
        .collect();
    assert_eq!(
        steps,
        [
            ("charge", json!(100), 1),
            ("page", json!(0), 2),
            ("page#2", json!(1), 2),
            ("page#3", json!(2), 2)
        ]
    );
    assert_eq!(job.step_count, 4);
    // The failed attempt's error names no step: it came after the step.
    assert_eq!(
        job.history[0].error.as_deref(),
        Some("the warehouse did not answer")
    );
}

/// A step that fails records nothing, and its error names it; the next attempt runs it again.
#[tokio::test]
async fn a_failed_step_records_nothing_and_its_error_names_it() {
    let t = TestQueue::new().await;
    let id = t
        .queue
        .enqueue(Push::new("flaky").retry(RetryPolicy::immediate(2)))
        .await
        .unwrap()
        .id;
    let worker = Worker::builder(&t.queue, "w1")
        .handler("flaky", |job| async move {
            let attempt = job.attempt();
            job.step("call", || async move {
                match attempt {
                    1 => Err(JobError::retry("timed out")),
                    _ => Ok(json!("answered")),
                }
            })
            .await?;
            Ok(())
        })
        .start()
        .unwrap();
    until_completed(&t, id).await;
    worker.stop(Duration::from_secs(5)).await.unwrap();
    let job = t.queue.get(id).await.unwrap();
    assert_eq!(
        job.history[0].error.as_deref(),
        Some("step \"call\": timed out")
    );
    assert_eq!(job.steps.len(), 1);
    assert_eq!(
        (job.steps[0].attempt, &job.steps[0].result),
        (2, &json!("answered"))
    );
}

/// A step's record is fenced by the lease; recorded twice under one name, the first stands; a claim carries the
/// steps, a listing counts them; the limits name what broke; a deleted job's steps go with it.
#[tokio::test]
async fn a_step_is_fenced_by_the_lease_kept_once_and_carried_by_the_claim() {
    let t = TestQueue::new().await;
    let id = t
        .queue
        .enqueue(Push::new("x").retry(RetryPolicy::immediate(3)))
        .await
        .unwrap()
        .id;
    let first = t.take("w1").await.unwrap();
    assert!(first.job.steps.is_empty());
    let charge = t
        .queue
        .record_step(&first.lease, step("charge"), json!({"id": "ch_1"}))
        .await
        .unwrap();
    assert_eq!(
        (charge.attempt, charge.result.clone()),
        (1, json!({"id": "ch_1"}))
    );
    // Sent again with another result: the first stands.
    let again = t
        .queue
        .record_step(&first.lease, step("charge"), json!({"id": "ch_2"}))
        .await
        .unwrap();
    assert_eq!(again, charge);
    let recorded = t
        .queue
        .activity(cairn::ActivityFilter {
            job: Some(id),
            ..cairn::ActivityFilter::default()
        })
        .await
        .unwrap()
        .events
        .iter()
        .filter(|e| e.kind == cairn::ActivityKind::StepRecorded)
        .count();
    assert_eq!(
        recorded, 1,
        "the request sent again recorded nothing, so no event"
    );
    // Too large: the largest job data is 1 MiB by default.
    let big = json!("x".repeat(1024 * 1024));
    let refused = t
        .queue
        .record_step(&first.lease, step("big"), big)
        .await
        .unwrap_err();
    assert_eq!(
        (refused.kind(), refused.field()),
        (ErrorKind::InvalidInput, Some("result"))
    );
    assert_eq!(
        StepName::parse("").unwrap_err().to_string(),
        "step: must not be empty"
    );

    t.queue.retry(&first.lease, "again", None).await.unwrap();
    let stale = t
        .queue
        .record_step(&first.lease, step("late"), json!(1))
        .await
        .unwrap_err();
    assert_eq!(stale.kind(), ErrorKind::LeaseLost);
    let second = t.take("w2").await.unwrap();
    assert_eq!(second.job.steps, [charge]);
    assert_eq!(second.job.step_count, 1);
    let listed = t.queue.list(JobFilter::default()).await.unwrap();
    assert_eq!(
        (listed.jobs[0].step_count, listed.jobs[0].steps.len()),
        (1, 0)
    );

    t.queue.delete(id).await.unwrap();
    assert_eq!(
        t.select_integers("SELECT count(*) FROM job_steps").await,
        [[0]]
    );
}

/// A job records at most `MAX_STEPS` steps; the one past it is refused, naming the limit.
#[tokio::test]
async fn a_job_records_at_most_its_limit_of_steps() {
    let t = TestQueue::new().await;
    t.push("x").await;
    let claimed = t.take("w1").await.unwrap();
    // At once, so that the writer takes them in a few transactions.
    let recorded = futures_join_all((0..cairn::MAX_STEPS).map(|n| {
        let (queue, lease) = (t.queue.clone(), claimed.lease.clone());
        async move {
            queue
                .record_step(&lease, step(&format!("s{n}")), json!(n))
                .await
        }
    }))
    .await;
    assert!(recorded.iter().all(Result::is_ok));
    let refused = t
        .queue
        .record_step(&claimed.lease, step("one more"), json!(0))
        .await
        .unwrap_err();
    assert_eq!(refused.field(), Some("step"), "{refused}");
    assert!(
        refused.to_string().contains("at most 1000 steps"),
        "{refused}"
    );
}

/// Steps belong to one stage of a job and one run of a recurring job: a job that goes on to its next queue, or a
/// recurring job's next run, starts with none.
#[tokio::test]
async fn a_new_stage_or_a_new_run_starts_without_steps() {
    let t = TestQueue::new().await;
    let staged = t.push("ingest").await;
    let recurring = t
        .queue
        .enqueue(Push::new("report").schedule("finished, +1 hour"))
        .await
        .unwrap()
        .id;
    for _ in 0..2 {
        let claimed = t.take("w1").await.unwrap();
        t.queue
            .record_step(&claimed.lease, step("fetch"), json!(1))
            .await
            .unwrap();
        let next = (claimed.job.id == staged).then(|| cairn::Continue {
            queue: "process".into(),
            delay: None,
            depends_on: vec![],
        });
        t.queue
            .finish_with(cairn::Finish {
                next,
                ..cairn::Finish::new(&claimed.lease)
            })
            .await
            .unwrap();
    }
    for id in [staged, recurring] {
        let job = t.queue.get(id).await.unwrap();
        assert_eq!((job.step_count, job.steps.len()), (0, 0), "job {id}");
    }
    assert_eq!(
        t.select_integers("SELECT count(*) FROM job_steps").await,
        [[0]]
    );
}

/// A sleep records its wake time as a step and gives up the worker: the job is scheduled for then, the attempt does
/// not count, and the history says why. Woken, the job finds the sleep's time passed and goes on; its steps come
/// back with the claim.
#[tokio::test]
async fn a_sleep_gives_up_the_worker_until_its_time_and_then_goes_on() {
    let t = TestQueue::new().await;
    let id = t.push("order").await;
    let first = t.take("w1").await.unwrap();
    t.queue
        .record_step(&first.lease, step("charge"), json!("ch_1"))
        .await
        .unwrap();
    let slept = t
        .queue
        .sleep(
            &first.lease,
            step("cool-off"),
            cairn::Wake::After(Duration::from_secs(3600)),
        )
        .await
        .unwrap();
    let wake = t.clock_now() + jiff::SignedDuration::from_secs(3600);
    assert_eq!(slept, cairn::Slept::Suspended { until: wake });
    let job = t.queue.get(id).await.unwrap();
    assert_eq!(
        (job.state, job.attempt, job.run_at),
        (JobState::Scheduled, 0, wake)
    );
    assert_eq!(
        job.history[0].outcome,
        Some(cairn::AttemptOutcome::Suspended)
    );
    assert!(t.take("w1").await.is_none(), "asleep: nothing to take");
    let late = t
        .queue
        .record_step(&first.lease, step("late"), json!(1))
        .await
        .unwrap_err();
    assert_eq!(late.kind(), ErrorKind::LeaseLost);

    t.advance(Duration::from_secs(3600));
    let second = t.take("w2").await.unwrap();
    assert_eq!(second.job.attempt, 1, "the sleep did not use an attempt");
    let names: Vec<&str> = second.job.steps.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["charge", "cool-off"]);
    let again = t
        .queue
        .sleep(
            &second.lease,
            step("cool-off"),
            cairn::Wake::After(Duration::from_secs(3600)),
        )
        .await
        .unwrap();
    assert_eq!(again, cairn::Slept::Woke, "its time has passed");
    t.queue.finish(&second.lease, None).await.unwrap();
    assert_eq!(t.queue.get(id).await.unwrap().state, JobState::Completed);
}

/// Through a worker: the handler returns the sleep's error, the slot is free at once, and the job comes back at its
/// time and completes, each step's body having run once.
#[tokio::test]
async fn a_handler_that_sleeps_frees_its_slot_and_finishes_later() {
    let t = TestQueue::with(|o| o.clock = Arc::new(cairn::SystemClock)).await;
    let id = t.push("wait-and-see").await;
    let ran = Arc::new(AtomicU32::new(0));
    let counted = ran.clone();
    let worker = Worker::builder(&t.queue, "w1")
        .handler("wait-and-see", move |job| {
            let ran = counted.clone();
            async move {
                job.step("before", || async {
                    Ok::<_, JobError>(ran.fetch_add(1, Ordering::SeqCst))
                })
                .await?;
                job.sleep("nap", Duration::from_millis(300)).await?;
                job.step("after", || async {
                    Ok::<_, JobError>(ran.fetch_add(1, Ordering::SeqCst))
                })
                .await?;
                Ok(())
            }
        })
        .start()
        .unwrap();
    until_completed(&t, id).await;
    let report = worker.stop(Duration::from_secs(5)).await.unwrap();
    assert_eq!(
        (report.finished, report.suspended, report.retried),
        (1, 1, 0)
    );
    assert_eq!(ran.load(Ordering::SeqCst), 2, "each step's body once");
    let job = t.queue.get(id).await.unwrap();
    let outcomes: Vec<_> = job.history.iter().map(|a| a.outcome).collect();
    assert_eq!(
        outcomes,
        [
            Some(cairn::AttemptOutcome::Suspended),
            Some(cairn::AttemptOutcome::Completed)
        ]
    );
}

/// A handler that swallows its sleep's error and returns `Ok` still ends its run with the sleep: nothing is
/// finished (the lease is over), the report counts it as suspended, and the job wakes and completes.
#[tokio::test]
async fn a_handler_that_swallows_its_sleep_still_sleeps() {
    let t = TestQueue::with(|o| o.clock = Arc::new(cairn::SystemClock)).await;
    let id = t.push("careless").await;
    let worker = Worker::builder(&t.queue, "w1")
        .handler("careless", |job| async move {
            let _ = job.sleep("nap", Duration::from_millis(200)).await;
            Ok(())
        })
        .start()
        .unwrap();
    until_completed(&t, id).await;
    let report = worker.stop(Duration::from_secs(5)).await.unwrap();
    assert_eq!((report.suspended, report.finished, report.lost), (1, 1, 0));
}

/// A step whose result the queue refuses (larger than the limits) fails the job for good, naming the step: a retry
/// would run its body again only to be refused again.
#[tokio::test]
async fn a_step_whose_result_is_refused_fails_the_job_and_its_body_runs_once() {
    let t = TestQueue::with(|o| o.clock = Arc::new(cairn::SystemClock)).await;
    let id = t
        .queue
        .enqueue(Push::new("big").retry(RetryPolicy::immediate(3)))
        .await
        .unwrap()
        .id;
    let ran = Arc::new(AtomicU32::new(0));
    let counted = ran.clone();
    let worker = Worker::builder(&t.queue, "w1")
        .handler("big", move |job| {
            let ran = counted.clone();
            async move {
                job.step("export", || async {
                    ran.fetch_add(1, Ordering::SeqCst);
                    Ok::<_, JobError>("x".repeat(2 * 1024 * 1024))
                })
                .await?;
                Ok(())
            }
        })
        .start()
        .unwrap();
    eventually(PATIENCE, "the job fails", || async {
        t.queue.get(id).await.unwrap().state == JobState::Failed
    })
    .await;
    worker.stop(Duration::from_secs(5)).await.unwrap();
    let job = t.queue.get(id).await.unwrap();
    assert_eq!(ran.load(Ordering::SeqCst), 1, "the body ran once");
    assert_eq!(job.failure_group.as_deref(), Some("step"));
    assert!(
        job.error
            .as_deref()
            .unwrap_or("")
            .contains("step \"export\""),
        "{:?}",
        job.error
    );
}
