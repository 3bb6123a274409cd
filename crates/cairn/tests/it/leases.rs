//! Leases: heartbeats extend them, expiry retries the job, stale tokens are refused and change nothing.

use cairn::Jobs;
use std::time::Duration;

use cairn::{AttemptOutcome, Dequeue, ErrorKind, JobState, Push, RetryPolicy};
use serde_json::json;

use super::harness::TestQueue;

#[tokio::test]
async fn expired_lease_retries_the_job_and_refuses_late_calls() {
    let t = TestQueue::new().await;
    let id = t
        .queue
        .enqueue(
            Push::new("slow")
                .lease_timeout(Duration::from_secs(30))
                .retry(RetryPolicy::immediate(3)),
        )
        .await
        .unwrap()
        .id;
    let first = t.take("w1").await.unwrap();
    t.advance(Duration::from_secs(30));
    let second = t.take("w2").await.expect("expired job is ready again");
    assert_eq!(second.job.id, id);
    assert_eq!(second.job.attempt, 2);
    assert_ne!(first.lease.token, second.lease.token);

    for err in [
        t.queue.heartbeat(&first.lease, None).await.unwrap_err(),
        t.queue
            .checkpoint(&first.lease, json!(1))
            .await
            .unwrap_err(),
        t.queue.update(&first.lease, json!(1)).await.unwrap_err(),
        t.queue.finish(&first.lease, None).await.unwrap_err(),
        t.queue
            .retry(&first.lease, "late", None)
            .await
            .map(|_| ())
            .unwrap_err(),
        t.queue.fail(&first.lease, "g", "late").await.unwrap_err(),
        t.queue.release(&first.lease).await.unwrap_err(),
    ] {
        assert_eq!(err.kind(), ErrorKind::LeaseLost, "{err}");
    }
    let job = t.queue.get(id).await.unwrap();
    assert_eq!(job.state, JobState::Running);
    assert_eq!(job.worker.as_ref().map(|w| w.as_str()), Some("w2"));
    assert_eq!(job.history[0].outcome, Some(AttemptOutcome::LeaseExpired));
    assert_eq!(job.history[1].outcome, None);
    t.close().await;
}

#[tokio::test]
async fn heartbeat_extends_the_lease_and_reports_progress() {
    let t = TestQueue::new().await;
    t.queue
        .enqueue(Push::new("long").lease_timeout(Duration::from_secs(30)))
        .await
        .unwrap();
    let claimed = t.take("w").await.unwrap();
    for _ in 0..5 {
        t.advance(Duration::from_secs(20));
        let expires = t
            .queue
            .heartbeat(&claimed.lease, Some(json!({"done": 20})))
            .await
            .unwrap();
        assert_eq!(expires, t.queue.now() + jiff::SignedDuration::from_secs(30));
    }
    let job = t.queue.get(claimed.job.id).await.unwrap();
    assert_eq!(job.state, JobState::Running);
    assert_eq!(job.progress, Some(json!({"done": 20})));
    t.queue.finish(&claimed.lease, None).await.unwrap();
    t.close().await;
}

#[tokio::test]
async fn a_lease_expiry_wakes_a_blocked_dequeue() {
    let t = TestQueue::new().await;
    t.queue
        .enqueue(
            Push::new("j")
                .lease_timeout(Duration::from_secs(10))
                .retry(RetryPolicy::immediate(2)),
        )
        .await
        .unwrap();
    let _held = t.take("w1").await.unwrap();
    let queue = t.queue.clone();
    let waiter = tokio::spawn(async move {
        queue
            .dequeue(cairn::Dequeue::new("w2").wait(Duration::from_secs(30)))
            .await
            .unwrap()
    });
    t.until_parked("w2").await;
    t.advance(Duration::from_secs(10));
    let got = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got[0].job.attempt, 2);
    t.close().await;
}

#[tokio::test]
async fn cancelled_and_deleted_jobs_refuse_their_worker() {
    let t = TestQueue::new().await;
    let a = t.push("a").await;
    let b = t.push("b").await;
    let ca = t.take("w").await.unwrap();
    let cb = t.take("w").await.unwrap();
    t.queue.cancel(a).await.unwrap();
    t.queue.delete(b).await.unwrap();
    assert!(
        t.queue
            .finish(&ca.lease, None)
            .await
            .unwrap_err()
            .is_lease_lost()
    );
    assert!(
        t.queue
            .heartbeat(&cb.lease, None)
            .await
            .unwrap_err()
            .is_lease_lost()
    );
    let job = t.queue.get(a).await.unwrap();
    assert_eq!(job.state, JobState::Cancelled);
    assert_eq!(job.history[0].outcome, Some(AttemptOutcome::Cancelled));
    assert!(t.queue.get(b).await.unwrap_err().is_not_found());
    t.close().await;
}

#[tokio::test]
async fn a_claim_may_ask_for_its_own_lease_timeout() {
    let t = TestQueue::new().await;
    t.push("script").await;
    let claimed = t
        .queue
        .dequeue(Dequeue::new("shell").lease_timeout(Duration::from_secs(3600)))
        .await
        .unwrap();
    let expected = t.queue.now() + jiff::SignedDuration::from_hours(1);
    assert_eq!(claimed[0].lease.expires_at, expected);
    // The job's own 60 s timeout would have expired it by now; the claim's has not.
    t.advance(Duration::from_secs(600));
    t.queue.finish(&claimed[0].lease, None).await.unwrap();

    let err = t
        .queue
        .dequeue(Dequeue::new("shell").lease_timeout(Duration::ZERO))
        .await
        .unwrap_err();
    assert_eq!(err.field(), Some("lease_timeout"));
    t.close().await;
}

#[tokio::test]
async fn an_attempt_that_runs_past_its_timeout_loses_the_job_whatever_its_heartbeats() {
    let t = TestQueue::new().await;
    let id = t
        .queue
        .enqueue(
            Push::new("slow")
                .lease_timeout(Duration::from_secs(30))
                .timeout(Duration::from_secs(45))
                .retry(RetryPolicy::immediate(5)),
        )
        .await
        .unwrap()
        .id;
    let claimed = t.take("w").await.unwrap();
    assert_eq!(
        claimed.lease.expires_at,
        t.clock_now() + Duration::from_secs(30)
    );
    // A heartbeat extends the lease only up to the timeout.
    t.advance(Duration::from_secs(20));
    let expires = t.queue.heartbeat(&claimed.lease, None).await.unwrap();
    assert_eq!(expires, t.clock_now() + Duration::from_secs(25));
    t.advance(Duration::from_secs(26));
    let err = t.queue.heartbeat(&claimed.lease, None).await.unwrap_err();
    assert!(err.is_lease_lost(), "{err}");
    let job = t.queue.get(id).await.unwrap();
    assert_eq!(job.timeout, Some(Duration::from_secs(45)));
    assert_eq!(job.history[0].outcome, Some(AttemptOutcome::LeaseExpired));
    // A claim's own longer lease is cut to the timeout too.
    let again = t
        .queue
        .dequeue(Dequeue::new("w").lease_timeout(Duration::from_secs(3600)))
        .await
        .unwrap()
        .pop()
        .unwrap();
    assert_eq!(
        again.lease.expires_at,
        t.clock_now() + Duration::from_secs(45)
    );
    let err = t
        .queue
        .enqueue(Push::new("x").timeout(Duration::from_secs(2 * 24 * 3600)))
        .await
        .unwrap_err();
    assert_eq!(err.field(), Some("timeout"));
    t.close().await;
}

/// `finish_many` completes each job as `finish_with` would, answering each on its own and in order: a lost lease
/// (a wrong token, a job finished earlier in the same call) refuses only its job, and the others complete.
#[tokio::test]
async fn finish_many_answers_each_job_on_its_own() {
    let t = TestQueue::new().await;
    for i in 0..4 {
        t.push(&format!("job-{i}")).await;
    }
    let claimed = t.queue.dequeue(Dequeue::new("w").limit(4)).await.unwrap();
    assert_eq!(claimed.len(), 4);
    let stale = cairn::Lease {
        token: claimed[3].lease.token.wrapping_add(1),
        ..claimed[3].lease.clone()
    };
    let finishes = vec![
        cairn::Finish {
            data: Some(json!({"result": 0})),
            ..cairn::Finish::new(&claimed[0].lease)
        },
        cairn::Finish::new(&claimed[1].lease),
        cairn::Finish::new(&stale),
        cairn::Finish::new(&claimed[2].lease),
        cairn::Finish::new(&claimed[1].lease),
    ];
    let answers = t.queue.finish_many(finishes).await.unwrap();
    let kinds: Vec<Option<ErrorKind>> = answers
        .iter()
        .map(|a| a.as_ref().err().map(cairn::Error::kind))
        .collect();
    assert_eq!(
        kinds,
        [
            None,
            None,
            Some(ErrorKind::LeaseLost),
            None,
            Some(ErrorKind::LeaseLost)
        ]
    );
    let states: Vec<JobState> = {
        let mut states = Vec::new();
        for c in &claimed {
            states.push(t.queue.get(c.job.id).await.unwrap().state);
        }
        states
    };
    assert_eq!(
        states,
        [
            JobState::Completed,
            JobState::Completed,
            JobState::Completed,
            JobState::Running
        ]
    );
    assert_eq!(
        t.queue.get(claimed[0].job.id).await.unwrap().data,
        json!({"result": 0})
    );
    // The held job still finishes under its own lease.
    t.queue.finish(&claimed[3].lease, None).await.unwrap();

    assert!(t.queue.finish_many(Vec::new()).await.unwrap().is_empty());
    let too_many = vec![cairn::Finish::new(&claimed[0].lease); cairn::MAX_FINISH_MANY + 1];
    let err = t.queue.finish_many(too_many).await.unwrap_err();
    assert_eq!(
        (err.kind(), err.field()),
        (ErrorKind::InvalidInput, Some("finishes"))
    );
    t.close().await;
}
