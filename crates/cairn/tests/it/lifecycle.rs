//! A job's life: finish, retry with backoff, fail, checkpoint, cancel, reschedule, priority, recovery, retention.

use cairn::Jobs;
use std::time::Duration;

use cairn::{
    AttemptOutcome, ErrorKind, Fail, Finish, JobFilter, JobId, JobState, Push, Queue, QueueOptions,
    RecoveryPolicy, Retry, RetryPolicy, RunUsage,
};
use serde_json::json;

use super::harness::TestQueue;

fn no_jitter(max_attempts: u32) -> RetryPolicy {
    RetryPolicy {
        max_attempts,
        initial_delay: Duration::from_secs(10),
        multiplier: 2.0,
        max_delay: Duration::from_secs(3600),
        jitter: 0.0,
    }
}

#[tokio::test]
async fn finish_completes_with_optional_result_and_history() {
    let t = TestQueue::new().await;
    let id = t.push("x").await;
    let claimed = t.take("w1").await.unwrap();
    t.advance(Duration::from_secs(2));
    t.queue
        .finish(&claimed.lease, Some(json!({"sent": true})))
        .await
        .unwrap();
    let job = t.queue.get(id).await.unwrap();
    assert_eq!(job.state, JobState::Completed);
    assert_eq!(job.data, json!({"sent": true}));
    assert_eq!(job.finished_at, Some(t.queue.now()));
    assert_eq!(job.worker, None);
    assert_eq!(job.history.len(), 1);
    let attempt = &job.history[0];
    assert_eq!((attempt.number, attempt.worker.as_str()), (1, "w1"));
    assert_eq!(attempt.outcome, Some(AttemptOutcome::Completed));
    assert_eq!(
        attempt.finished_at.unwrap().as_millisecond() - attempt.started_at.as_millisecond(),
        2000
    );
    t.close().await;
}

#[tokio::test]
async fn retry_backs_off_exponentially_then_fails_when_attempts_run_out() {
    let t = TestQueue::new().await;
    let id = t
        .queue
        .enqueue(Push::new("flaky").retry(no_jitter(3)))
        .await
        .unwrap()
        .id;
    let c = t.take("w").await.unwrap();
    assert_eq!(
        t.queue.retry(&c.lease, "boom 1", None).await.unwrap(),
        JobState::Scheduled
    );
    t.advance(Duration::from_secs(9));
    assert!(t.take("w").await.is_none(), "backoff of 10s not over");
    t.advance(Duration::from_secs(1));
    let c = t.take("w").await.unwrap();
    assert_eq!(
        t.queue.retry(&c.lease, "boom 2", None).await.unwrap(),
        JobState::Scheduled
    );
    t.advance(Duration::from_secs(19));
    assert!(t.take("w").await.is_none(), "backoff of 20s not over");
    t.advance(Duration::from_secs(1));
    let c = t.take("w").await.unwrap();
    assert_eq!(c.job.attempt, 3);
    assert_eq!(
        t.queue.retry(&c.lease, "boom 3", None).await.unwrap(),
        JobState::Failed
    );
    let job = t.queue.get(id).await.unwrap();
    assert_eq!(job.state, JobState::Failed);
    assert_eq!(job.failure_group.as_deref(), Some("retries-exhausted"));
    assert_eq!(job.error.as_deref(), Some("boom 3"));
    let errors: Vec<_> = job
        .history
        .iter()
        .map(|a| a.error.as_deref().unwrap())
        .collect();
    assert_eq!(errors, ["boom 1", "boom 2", "boom 3"]);
    // The retry that found no attempt left is the failure, as the job's state says.
    let outcomes: Vec<_> = job.history.iter().map(|a| a.outcome).collect();
    assert_eq!(
        outcomes,
        [
            Some(AttemptOutcome::Retried),
            Some(AttemptOutcome::Retried),
            Some(AttemptOutcome::Failed)
        ]
    );
    t.close().await;
}

#[tokio::test]
async fn retry_with_explicit_delay_and_fail_with_group() {
    let t = TestQueue::new().await;
    let id = t.push("x").await;
    let c = t.take("w").await.unwrap();
    t.queue
        .retry(&c.lease, "rate limited", Some(Duration::ZERO))
        .await
        .unwrap();
    let c = t.take("w").await.expect("zero delay: ready at once");
    t.queue
        .fail(&c.lease, "invalid-address", "no such mailbox")
        .await
        .unwrap();
    let job = t.queue.get(id).await.unwrap();
    assert_eq!(job.state, JobState::Failed);
    assert_eq!(job.failure_group.as_deref(), Some("invalid-address"));
    assert_eq!(job.error.as_deref(), Some("no such mailbox"));
    assert_eq!(job.history[1].outcome, Some(AttemptOutcome::Failed));
    t.close().await;
}

#[tokio::test]
async fn retry_at_a_time_runs_again_exactly_then() {
    let t = TestQueue::new().await;
    // A time with milliseconds, and a whole second, are kept as given.
    for at in ["2030-01-02T03:04:05.678Z", "2030-01-02T03:04:05Z"] {
        let at: jiff::Timestamp = at.parse().unwrap();
        let id = t.push("x").await;
        let c = t.take("w").await.unwrap();
        let refused = |retry: Retry| {
            let q = t.queue.clone();
            async move {
                q.retry_with(retry)
                    .await
                    .unwrap_err()
                    .field()
                    .map(str::to_owned)
            }
        };
        let both = Retry {
            delay: Some(Duration::ZERO),
            run_at: Some(at),
            ..Retry::new(&c.lease, "later")
        };
        assert_eq!(refused(both).await.as_deref(), Some("run_at"));
        let state = t
            .queue
            .retry_with(Retry {
                run_at: Some(at),
                ..Retry::new(&c.lease, "later")
            })
            .await
            .unwrap();
        assert_eq!(state, JobState::Scheduled);
        assert_eq!(t.queue.get(id).await.unwrap().run_at, at);
    }
    t.close().await;
}

#[tokio::test]
async fn a_retry_starts_from_the_last_checkpoint() {
    let t = TestQueue::new().await;
    t.queue
        .enqueue(
            Push::new("import")
                .data(json!({"row": 0}))
                .retry(RetryPolicy::immediate(3)),
        )
        .await
        .unwrap();
    let c = t.take("w").await.unwrap();
    t.queue
        .checkpoint(&c.lease, json!({"row": 500}))
        .await
        .unwrap();
    t.queue
        .update(&c.lease, json!({"percent": 60}))
        .await
        .unwrap();
    t.queue
        .retry(&c.lease, "connection reset", None)
        .await
        .unwrap();
    let c = t.take("w").await.unwrap();
    assert_eq!(c.job.data, json!({"row": 500}));
    assert_eq!(c.job.progress, None, "progress belongs to an attempt");
    t.close().await;
}

#[tokio::test]
async fn cancel_rules() {
    let t = TestQueue::new().await;
    let queued = t.push("q").await;
    t.queue.cancel(queued).await.unwrap();
    t.queue.cancel(queued).await.unwrap(); // idempotent
    assert_eq!(
        t.queue.get(queued).await.unwrap().state,
        JobState::Cancelled
    );
    assert!(t.take("w").await.is_none());

    let done = t.push("d").await;
    let c = t.take("w").await.unwrap();
    t.queue.finish(&c.lease, None).await.unwrap();
    assert_eq!(
        t.queue.cancel(done).await.unwrap_err().kind(),
        ErrorKind::InvalidState
    );
    assert!(
        t.queue
            .cancel(cairn::JobId(12345))
            .await
            .unwrap_err()
            .is_not_found()
    );
    t.close().await;
}

#[tokio::test]
async fn reschedule_and_set_priority() {
    let t = TestQueue::new().await;
    let a = t.push("a").await;
    let b = t.push("b").await;
    let later = t.queue.now() + jiff::SignedDuration::from_secs(60);
    assert_eq!(
        t.queue.reschedule(a, later).await.unwrap(),
        JobState::Scheduled
    );
    t.queue.set_priority(b, 5).await.unwrap();
    assert_eq!(t.drain_names().await, ["b"]);
    assert_eq!(
        t.queue.reschedule(a, t.queue.now()).await.unwrap(),
        JobState::Queued
    );
    assert_eq!(t.drain_names().await, ["a"]);
    assert_eq!(
        t.queue.reschedule(a, later).await.unwrap_err().kind(),
        ErrorKind::InvalidState
    );
    assert_eq!(
        t.queue.set_priority(a, 1).await.unwrap_err().kind(),
        ErrorKind::InvalidState
    );
    t.close().await;
}

#[tokio::test]
async fn list_filters_and_pages_newest_first() {
    let t = TestQueue::new().await;
    for i in 0..5 {
        t.queue
            .enqueue(Push::new(format!("mail.{i}")).queue("mail").tag("batch"))
            .await
            .unwrap();
    }
    t.queue.enqueue(Push::new("other")).await.unwrap();
    let page = t
        .queue
        .list(JobFilter {
            queue: Some("mail".into()),
            limit: 2,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        page.jobs
            .iter()
            .map(|j| j.name.as_str())
            .collect::<Vec<_>>(),
        ["mail.4", "mail.3"]
    );
    let page2 = t
        .queue
        .list(JobFilter {
            queue: Some("mail".into()),
            limit: 2,
            before: page.next,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        page2
            .jobs
            .iter()
            .map(|j| j.name.as_str())
            .collect::<Vec<_>>(),
        ["mail.2", "mail.1"]
    );
    let tagged = t
        .queue
        .list(JobFilter {
            tag: Some("batch".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(tagged.jobs.len(), 5);
    let by_name = t
        .queue
        .list(JobFilter {
            name: Some("*.3".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(by_name.jobs.len(), 1);
    let running = t
        .queue
        .list(JobFilter {
            state: Some(JobState::Running),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(running.jobs.is_empty());
    let err = t
        .queue
        .list(JobFilter {
            limit: 0,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.field(), Some("limit"));
    t.close().await;
}

/// Opening a database that a dead process left with running jobs recovers them and records it.
#[tokio::test]
async fn reopening_recovers_jobs_left_running() {
    let t = TestQueue::new().await;
    let id = t
        .queue
        .enqueue(Push::new("x").retry(no_jitter(5)))
        .await
        .unwrap()
        .id;
    let claimed = t.take("w").await.unwrap();
    t.close().await; // the "process" ends with the job still running

    if t.is_postgres() {
        // On PostgreSQL a node cannot know that a running job's worker is gone (it may be served by another
        // node): the job keeps its lease, and its worker can still finish it; lease expiry recovers the others.
        let options = QueueOptions {
            clock: std::sync::Arc::new(t.clock.clone()),
            recovery: RecoveryPolicy::RetryNow,
            ..Default::default()
        };
        let queue = Queue::open_with(t.path(), options).await.unwrap();
        assert_eq!(queue.get(id).await.unwrap().state, JobState::Running);
        queue.finish(&claimed.lease, None).await.unwrap();
        assert_eq!(queue.get(id).await.unwrap().state, JobState::Completed);
        return queue.close(Duration::from_secs(5)).await.unwrap();
    }
    for (policy, expected_state) in [(RecoveryPolicy::RetryNow, JobState::Queued)] {
        let options = QueueOptions {
            clock: std::sync::Arc::new(t.clock.clone()),
            recovery: policy,
            ..Default::default()
        };
        let queue = Queue::open_with(t.path(), options).await.unwrap();
        let job = queue.get(id).await.unwrap();
        assert_eq!(job.state, expected_state);
        assert_eq!(job.history[0].outcome, Some(AttemptOutcome::Crashed));
        assert!(
            queue
                .finish(&claimed.lease, None)
                .await
                .unwrap_err()
                .is_lease_lost()
        );
        queue.close(Duration::from_secs(5)).await.unwrap();
    }
}

#[tokio::test]
async fn recovery_with_backoff_waits_the_retry_delay() {
    let t = TestQueue::new().await;
    let id = t
        .queue
        .enqueue(Push::new("x").retry(no_jitter(5)))
        .await
        .unwrap()
        .id;
    t.take("w").await.unwrap();
    t.close().await;
    let options = QueueOptions {
        clock: std::sync::Arc::new(t.clock.clone()),
        recovery: RecoveryPolicy::Backoff,
        ..Default::default()
    };
    let queue = Queue::open_with(t.path(), options).await.unwrap();
    let job = queue.get(id).await.unwrap();
    if t.is_postgres() {
        // No recovery at open on PostgreSQL (see reopening_recovers_jobs_left_running): lease expiry does it.
        assert_eq!(job.state, JobState::Running);
        t.advance(job.lease_timeout + Duration::from_secs(1));
        queue.settle().await.unwrap();
        let job = queue.get(id).await.unwrap();
        assert_eq!(job.state, JobState::Scheduled);
        assert_eq!(job.history[0].outcome, Some(AttemptOutcome::LeaseExpired));
        return queue.close(Duration::from_secs(5)).await.unwrap();
    }
    assert_eq!(job.state, JobState::Scheduled);
    assert_eq!(
        job.run_at,
        t.clock_now() + jiff::SignedDuration::from_secs(10)
    );
    queue.close(Duration::from_secs(5)).await.unwrap();
}

/// Jobs finished in one batch share a millisecond; retention by count keeps exactly `max_count` of them.
#[tokio::test]
async fn retention_by_count_keeps_the_newest_even_with_equal_finish_times() {
    let t = TestQueue::with(|o| {
        o.retention = cairn::Retention {
            worker_max_age: None,
            max_age: None,
            max_count: Some(2),
            interval: Duration::from_secs(60),
            ..Default::default()
        }
    })
    .await;
    t.queue
        .enqueue_batch((0..5).map(|i| Push::new(format!("j{i}"))).collect())
        .await
        .unwrap();
    let claimed = t
        .queue
        .dequeue(cairn::Dequeue::new("w").limit(5))
        .await
        .unwrap();
    for c in &claimed {
        t.queue.finish(&c.lease, None).await.unwrap(); // all at the same (manual) millisecond
    }
    t.advance(Duration::from_secs(60));
    t.queue.settle().await.unwrap();
    let left: Vec<_> = t
        .queue
        .list(JobFilter::default())
        .await
        .unwrap()
        .jobs
        .into_iter()
        .map(|j| j.id)
        .collect();
    assert_eq!(
        left,
        [claimed[4].job.id, claimed[3].job.id],
        "the two newest by id"
    );
    t.close().await;
}

#[tokio::test]
async fn retention_removes_old_and_surplus_finished_jobs() {
    let t = TestQueue::with(|o| {
        o.retention = cairn::Retention {
            worker_max_age: None,
            max_age: Some(Duration::from_secs(3600)),
            max_count: Some(3),
            interval: Duration::from_secs(60),
            ..Default::default()
        }
    })
    .await;
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(t.push(&format!("j{i}")).await);
        let c = t.take("w").await.unwrap();
        t.queue.finish(&c.lease, None).await.unwrap();
        t.advance(Duration::from_secs(1));
    }
    let failed = t
        .queue
        .enqueue(Push::new("f").retry(RetryPolicy::immediate(1)))
        .await
        .unwrap()
        .id;
    let c = t.take("w").await.unwrap();
    t.queue.retry(&c.lease, "x", None).await.unwrap();
    t.advance(Duration::from_secs(60)); // the next pruning pass runs
    t.queue.settle().await.unwrap();
    let left: Vec<_> = t
        .queue
        .list(JobFilter::default())
        .await
        .unwrap()
        .jobs
        .into_iter()
        .map(|j| j.id)
        .collect();
    assert_eq!(
        left,
        [failed, ids[4], ids[3], ids[2]],
        "the 3 newest finished jobs and the failed one stay"
    );
    t.advance(Duration::from_secs(3600));
    t.queue.settle().await.unwrap();
    let left: Vec<_> = t
        .queue
        .list(JobFilter::default())
        .await
        .unwrap()
        .jobs
        .into_iter()
        .map(|j| j.id)
        .collect();
    assert_eq!(
        left,
        [failed],
        "old finished jobs go; failed jobs stay until dealt with"
    );
    // Their histories go with them: only the failed job's one attempt is left.
    assert_eq!(
        t.select_integers("SELECT count(*), min(job_id) FROM cairn_attempts")
            .await,
        [[1, failed.0]]
    );
    t.close().await;
}

#[tokio::test]
async fn retention_drains_a_backlog_past_its_count_a_step_at_a_time() {
    let t = TestQueue::with(|o| {
        o.retention = cairn::Retention {
            worker_max_age: None,
            max_age: None,
            max_count: Some(100),
            interval: Duration::from_secs(60),
            ..Default::default()
        }
    })
    .await;
    // 2,500 finished jobs: more than two steps of retention past the count.
    for _ in 0..5 {
        crate::harness::finish_batch(&t.queue, "bulk", 500).await;
    }
    t.advance(Duration::from_secs(60));
    // The drain's steps are paced by the real clock.
    let t = &t;
    crate::harness::eventually(
        crate::harness::PATIENCE,
        "the newest 100 and their histories are left",
        || async move {
            t.queue.settle().await.unwrap();
            let left = t
                .select_integers("SELECT count(*), count(DISTINCT job_id) FROM cairn_attempts")
                .await;
            left == [[100, 100]]
        },
    )
    .await;
    let kept = t.select_integers("SELECT count(*) FROM cairn_jobs").await;
    assert_eq!(kept, [[100]]);
    t.close().await;
}

#[tokio::test]
async fn measured_usage_is_kept_in_the_attempt_history() {
    let t = TestQueue::new().await;
    let id = t
        .queue
        .enqueue(Push::new("x").retry(no_jitter(3)))
        .await
        .unwrap()
        .id;
    let usage = |ms: u64| RunUsage {
        run_time: Duration::from_millis(ms),
        cpu_time: Duration::from_millis(ms / 2),
        peak_memory: ms * 1024,
    };
    let c = t.take("w").await.unwrap();
    t.queue
        .retry_with(Retry {
            usage: Some(usage(100)),
            ..Retry::new(&c.lease, "boom")
        })
        .await
        .unwrap();
    t.advance(Duration::from_secs(3600));
    let c = t.take("w").await.unwrap();
    t.queue
        .fail_with(Fail {
            usage: Some(usage(300)),
            ..Fail::new(&c.lease, "bad-input", "no")
        })
        .await
        .unwrap();
    let job = t.queue.get(id).await.unwrap();
    let usages: Vec<_> = job.history.iter().map(|a| a.usage).collect();
    assert_eq!(usages, [Some(usage(100)), Some(usage(300))]);

    // A plain finish records none.
    let id = t.push("y").await;
    let c = t.take("w").await.unwrap();
    t.queue
        .finish_with(Finish {
            usage: None,
            ..Finish::new(&c.lease)
        })
        .await
        .unwrap();
    assert_eq!(t.queue.get(id).await.unwrap().history[0].usage, None);
    t.close().await;
}

#[tokio::test]
async fn requeue_runs_a_failed_job_again_with_fresh_attempts_and_keeps_its_history() {
    let t = TestQueue::new().await;
    let id = t
        .queue
        .enqueue(Push::new("x").retry(no_jitter(1)))
        .await
        .unwrap()
        .id;
    let c = t.take("w").await.unwrap();
    assert_eq!(
        t.queue.retry(&c.lease, "boom", None).await.unwrap(),
        JobState::Failed
    );

    assert_eq!(t.queue.requeue(id, None).await.unwrap(), JobState::Queued);
    let job = t.queue.get(id).await.unwrap();
    assert_eq!(
        (
            job.attempt,
            job.error.as_deref(),
            job.failure_group.as_deref()
        ),
        (0, None, None)
    );
    assert_eq!(job.finished_at, None);
    assert_eq!(
        job.history.len(),
        1,
        "the failed attempt stays in the history"
    );

    let c = t.take("w").await.unwrap();
    assert_eq!(c.job.id, id);
    assert_eq!(c.job.attempt, 1);
    t.queue.finish(&c.lease, None).await.unwrap();
    // A completed job can be run again too, later.
    let later = t.queue.now() + jiff::SignedDuration::from_mins(5);
    assert_eq!(
        t.queue.requeue(id, Some(later)).await.unwrap(),
        JobState::Scheduled
    );
    assert_eq!(t.queue.get(id).await.unwrap().run_at, later);
    t.close().await;
}

#[tokio::test]
async fn requeue_takes_a_running_job_from_its_worker() {
    let t = TestQueue::new().await;
    let id = t.push("x").await;
    let c = t.take("w1").await.unwrap();
    assert_eq!(t.queue.requeue(id, None).await.unwrap(), JobState::Queued);
    let err = t.queue.finish(&c.lease, None).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LeaseLost);
    let job = t.queue.get(id).await.unwrap();
    assert_eq!(job.history[0].outcome, Some(AttemptOutcome::Requeued));
    let again = t.take("w2").await.unwrap();
    assert_eq!(again.job.id, id);
    t.close().await;
}

#[tokio::test]
async fn requeue_refuses_when_another_live_job_holds_the_unique_key() {
    let t = TestQueue::new().await;
    let first = t
        .queue
        .enqueue(Push::new("x").unique_key("k"))
        .await
        .unwrap()
        .id;
    t.queue.cancel(first).await.unwrap();
    let second = t
        .queue
        .enqueue(Push::new("x").unique_key("k"))
        .await
        .unwrap()
        .id;
    let err = t.queue.requeue(first, None).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidState);
    assert!(
        err.to_string().contains(&format!("job {second} holds")),
        "{err}"
    );
    t.queue.delete(second).await.unwrap();
    assert_eq!(
        t.queue.requeue(first, None).await.unwrap(),
        JobState::Queued
    );
    assert_eq!(
        t.queue.requeue(JobId(999), None).await.unwrap_err().kind(),
        ErrorKind::NotFound
    );
    t.close().await;
}

#[tokio::test]
async fn set_data_replaces_the_data_of_a_job_that_is_not_running() {
    let t = TestQueue::new().await;
    let id = t.push("x").await;
    t.queue.set_data(id, json!({"fixed": true})).await.unwrap();
    assert_eq!(t.queue.get(id).await.unwrap().data, json!({"fixed": true}));
    let c = t.take("w").await.unwrap();
    assert_eq!(c.job.data, json!({"fixed": true}));
    let err = t.queue.set_data(id, json!({})).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidState);
    assert_eq!(
        t.queue
            .set_data(JobId(999), json!({}))
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::NotFound
    );
    t.close().await;
}

#[tokio::test]
async fn rename_gives_a_job_another_name_whatever_its_state() {
    let t = TestQueue::new().await;
    let id = t.push("old.name").await;
    t.queue.rename(id, "new.name").await.unwrap();
    assert_eq!(t.queue.get(id).await.unwrap().name.as_str(), "new.name");
    let taken = t
        .queue
        .dequeue(cairn::Dequeue::new("w").name("new.*"))
        .await
        .unwrap();
    assert_eq!(taken[0].job.id, id);
    // Renaming a running job leaves its worker be.
    t.queue.rename(id, "other").await.unwrap();
    t.queue.finish(&taken[0].lease, None).await.unwrap();
    assert_eq!(t.queue.get(id).await.unwrap().name.as_str(), "other");
    assert_eq!(
        t.queue.rename(JobId(999), "x").await.unwrap_err().kind(),
        ErrorKind::NotFound
    );
    let other = t.push("x").await;
    assert_eq!(
        t.queue.rename(other, "a\tb").await.unwrap_err().field(),
        Some("name")
    );
    t.close().await;
}

#[tokio::test]
async fn set_schedule_makes_a_job_recur_and_none_stops_it() {
    let t = TestQueue::new().await;
    let id = t.push("report").await;
    t.queue
        .set_schedule(id, Some("finished, +1 hour"), None)
        .await
        .unwrap();
    let c = t.take("w").await.unwrap();
    t.queue.finish(&c.lease, None).await.unwrap();
    let job = t.queue.get(id).await.unwrap();
    assert_eq!(job.state, JobState::Scheduled);
    assert_eq!(job.schedule.as_deref(), Some("FINISHED, +1 HOUR"));
    assert_eq!(
        job.run_at,
        t.queue.now() + jiff::SignedDuration::from_hours(1)
    );

    t.queue.set_schedule(id, None, None).await.unwrap();
    t.advance(Duration::from_secs(3600));
    let c = t.take("w").await.unwrap();
    t.queue.finish(&c.lease, None).await.unwrap();
    assert_eq!(t.queue.get(id).await.unwrap().state, JobState::Completed);

    let err = t
        .queue
        .set_schedule(id, Some("whenever"), None)
        .await
        .unwrap_err();
    assert_eq!(err.field(), Some("schedule"));
    t.close().await;
}

#[tokio::test]
async fn keep_leases_lets_a_worker_that_outlived_the_process_finish_its_job() {
    let t = TestQueue::new().await;
    let kept = t.push("kept").await;
    let orphan = t
        .queue
        .enqueue(
            Push::new("orphan")
                .lease_timeout(Duration::from_secs(30))
                .retry(RetryPolicy::immediate(3)),
        )
        .await
        .unwrap()
        .id;
    let claimed = t.take("remote").await.unwrap();
    assert_eq!(claimed.job.id, kept);
    let _lost = t.take("gone").await.unwrap();
    t.close().await; // the server stops; its remote workers do not

    let options = QueueOptions {
        clock: std::sync::Arc::new(t.clock.clone()),
        recovery: RecoveryPolicy::KeepLeases,
        ..Default::default()
    };
    let queue = Queue::open_with(t.path(), options).await.unwrap();
    assert_eq!(queue.get(kept).await.unwrap().state, JobState::Running);
    let found = queue
        .lease(kept)
        .await
        .unwrap()
        .expect("a running job's lease");
    assert_eq!(found.token, claimed.lease.token);
    assert_eq!(queue.lease(JobId(999)).await.unwrap(), None);
    // The surviving worker goes on under its lease.
    queue.heartbeat(&claimed.lease, None).await.unwrap();
    queue.finish(&claimed.lease, None).await.unwrap();
    assert_eq!(queue.get(kept).await.unwrap().state, JobState::Completed);
    // The job whose worker is gone runs again once its lease expires.
    t.clock.advance(Duration::from_secs(31));
    queue.wake();
    let again = queue
        .dequeue(cairn::Dequeue::new("w").wait(Duration::from_secs(10)))
        .await
        .unwrap();
    assert_eq!(again[0].job.id, orphan);
    assert_eq!(
        queue.get(orphan).await.unwrap().history[0].outcome,
        Some(AttemptOutcome::LeaseExpired)
    );
    queue.close(Duration::from_secs(5)).await.unwrap();
}
