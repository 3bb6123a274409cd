//! Results and waits: a finish may carry a result, kept apart from the job's data and with the attempt in its
//! history, and `Jobs::wait` answers the moment a job ends, with that result or its error.

use cairn::Jobs;
use std::time::Duration;

use cairn::{Dequeue, ErrorKind, Finish, JobId, JobState, Push};
use serde_json::json;

use super::harness::{TestQueue, poll_once};

#[tokio::test]
async fn a_wait_returns_the_moment_its_job_completes_with_the_result_apart_from_the_data() {
    let t = TestQueue::new().await;
    let id = t
        .queue
        .enqueue(Push::new("resize").data(json!({"image": "a.png"})))
        .await
        .unwrap()
        .id;
    // Under way before the job is taken: registered, and reading the job.
    let mut waiting = Box::pin(t.queue.wait(id, Duration::from_secs(60)));
    assert!(poll_once(&mut waiting).await, "nothing ended the job");
    let claimed = t.take("w").await.unwrap();
    t.queue
        .finish_with(Finish {
            result: Some(json!({"width": 640})),
            ..Finish::new(&claimed.lease)
        })
        .await
        .unwrap();
    // Far less than the 60 s wait: a wait that the finish did not wake would return only at its end.
    let job = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the wait returned when its job completed")
        .unwrap();
    assert_eq!(job.state, JobState::Completed);
    assert_eq!(job.result, Some(json!({"width": 640})));
    assert_eq!(job.data, json!({"image": "a.png"}), "the data stays");
    assert_eq!(job.history.len(), 1);
    assert_eq!(job.history[0].result, Some(json!({"width": 640})));
    t.close().await;
}

#[tokio::test]
async fn a_wait_returns_when_its_job_fails_or_is_cancelled() {
    let t = TestQueue::new().await;
    let failing = t.push("breaks").await;
    let cancelled = t.push("unwanted").await;
    let waits: Vec<_> = [failing, cancelled]
        .into_iter()
        .map(|id| {
            let queue = t.queue.clone();
            tokio::spawn(async move { queue.wait(id, Duration::from_secs(60)).await })
        })
        .collect();
    let claimed = t
        .queue
        .dequeue(Dequeue::new("w").name("breaks"))
        .await
        .unwrap()
        .remove(0);
    t.queue
        .fail(&claimed.lease, "bad-input", "cannot parse")
        .await
        .unwrap();
    t.queue.cancel(cancelled).await.unwrap();
    let mut ended = Vec::new();
    for wait in waits {
        ended.push(wait.await.unwrap().unwrap());
    }
    assert_eq!(ended[0].state, JobState::Failed);
    assert_eq!(ended[0].error.as_deref(), Some("cannot parse"));
    assert_eq!(ended[0].result, None);
    assert_eq!(ended[1].state, JobState::Cancelled);
    t.close().await;
}

#[tokio::test]
async fn a_wait_that_times_out_returns_the_job_as_it_stands() {
    let t = TestQueue::new().await;
    let id = t.push("slow").await;
    let job = t.queue.wait(id, Duration::from_millis(200)).await.unwrap();
    assert_eq!(job.state, JobState::Queued);
    // A job that already ended answers at once, with no time to wait.
    let claimed = t.take("w").await.unwrap();
    t.queue.finish(&claimed.lease, None).await.unwrap();
    let job = t.queue.wait(id, Duration::ZERO).await.unwrap();
    assert_eq!(job.state, JobState::Completed);
    t.close().await;
}

#[tokio::test]
async fn a_wait_for_no_such_job_or_too_long_is_refused() {
    let t = TestQueue::new().await;
    let err = t
        .queue
        .wait(JobId(424_242), Duration::from_secs(1))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    let id = t.push("any").await;
    let err = t
        .queue
        .wait(id, Duration::from_secs(2 * 24 * 3600))
        .await
        .unwrap_err();
    assert_eq!(
        (err.kind(), err.field()),
        (ErrorKind::InvalidInput, Some("wait"))
    );
    t.close().await;
}

/// A result bigger than the data limit is refused, naming the field, and the job stays held.
#[tokio::test]
async fn an_oversized_result_is_refused_naming_the_field() {
    let t = TestQueue::with(|o| o.max_data_bytes = 64).await;
    t.push("big").await;
    let claimed = t.take("w").await.unwrap();
    let err = t
        .queue
        .finish_with(Finish {
            result: Some(json!({"text": "x".repeat(100)})),
            ..Finish::new(&claimed.lease)
        })
        .await
        .unwrap_err();
    assert_eq!(
        (err.kind(), err.field()),
        (ErrorKind::InvalidInput, Some("result")),
        "{err}"
    );
    let job = t.queue.get(claimed.job.id).await.unwrap();
    assert_eq!(job.state, JobState::Running);
    t.close().await;
}

#[tokio::test]
async fn closing_the_queue_ends_every_wait() {
    let t = TestQueue::new().await;
    let id = t.push("never").await;
    let mut waiting = Box::pin(t.queue.wait(id, Duration::from_secs(60)));
    assert!(poll_once(&mut waiting).await, "nothing ended the job");
    t.close().await;
    let err = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the wait ended with the queue")
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Closed, "{err}");
}
