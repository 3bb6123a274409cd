//! Signals: a job waits for a key as a step of its run, without holding a worker; a signal sent to the key, before
//! or after the wait, is received once.

use cairn::Jobs;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use cairn::{
    ActivityFilter, ErrorKind, JobError, JobState, SignalKey, SignalSent, SignalWait, StepName,
    Worker,
};
use serde_json::json;

use super::harness::{PATIENCE, TestQueue, eventually};

fn step(name: &str) -> StepName {
    StepName::parse(name).unwrap()
}

fn key(key: &str) -> SignalKey {
    SignalKey::parse(key).unwrap()
}

const HOUR: Duration = Duration::from_secs(3600);

/// A signal sent after the wait: the job gives up its worker until it comes, then is ready at once (not at the
/// timeout), and the replayed wait answers the data, which the job's steps show.
#[tokio::test]
async fn a_signal_sent_after_the_wait_wakes_the_job_which_receives_it_once() {
    let t = TestQueue::new().await;
    let id = t.push("order").await;
    let first = t.take("w1").await.unwrap();
    let waited = t
        .queue
        .wait_for_signal(&first.lease, step("packed"), key("order-1/packed"), HOUR)
        .await
        .unwrap();
    let timeout = t.clock_now() + jiff::SignedDuration::from_secs(3600);
    assert_eq!(waited, SignalWait::Suspended { until: timeout });
    let job = t.queue.get(id).await.unwrap();
    assert_eq!((job.state, job.attempt), (JobState::Scheduled, 0));
    assert_eq!(job.suspended_at, Some(t.clock_now()));
    let stats = t.queue.queue_stats().await.unwrap();
    assert_eq!(
        (stats[0].suspended, stats[0].scheduled, stats[0].running),
        (1, 1, 0),
        "counted as suspended, of the scheduled, and not as running"
    );
    assert!(t.take("w1").await.is_none(), "waiting: nothing to take");

    let sent = t
        .queue
        .signal(key("order-1/packed"), json!({"parcel": "P-1"}))
        .await
        .unwrap();
    assert_eq!(sent, SignalSent::Delivered { job: id });
    let second = t
        .take("w2")
        .await
        .expect("ready at once, not at the timeout");
    assert_eq!(second.job.attempt, 1, "the wait did not use an attempt");
    assert_eq!(
        second.job.suspended_at, None,
        "taken again: no longer suspended"
    );
    assert_eq!(t.queue.queue_stats().await.unwrap()[0].suspended, 0);
    assert_eq!(second.job.steps[0].name, "packed");
    assert_eq!(
        second.job.steps[0].result,
        json!({"signal": {"parcel": "P-1"}})
    );
    let again = t
        .queue
        .wait_for_signal(&second.lease, step("packed"), key("order-1/packed"), HOUR)
        .await
        .unwrap();
    assert_eq!(again, SignalWait::Received(json!({"parcel": "P-1"})));

    // Delivered once: the same key again finds nobody waiting, and is kept.
    let later = t
        .queue
        .signal(key("order-1/packed"), json!(2))
        .await
        .unwrap();
    assert_eq!(later, SignalSent::Kept);
    t.queue.finish(&second.lease, None).await.unwrap();
    let events = t
        .queue
        .activity(ActivityFilter {
            job: Some(id),
            ..ActivityFilter::default()
        })
        .await
        .unwrap();
    let received: Vec<_> = events
        .events
        .iter()
        .filter(|e| e.kind == cairn::ActivityKind::SignalReceived)
        .collect();
    assert_eq!(received.len(), 1);
    assert_eq!(
        received[0].detail.as_deref(),
        Some("step packed, key order-1/packed")
    );
    let started: Vec<Option<&str>> = events
        .events
        .iter()
        .rev()
        .filter(|e| e.kind == cairn::ActivityKind::Started)
        .map(|e| e.detail.as_deref())
        .collect();
    assert_eq!(
        started,
        [None, Some("resumed: replays 1 recorded step")],
        "the second start says it resumed"
    );
}

/// A signal sent before the wait is kept and received at once, by the first job that waits, and only by it.
#[tokio::test]
async fn a_signal_sent_before_the_wait_is_kept_and_received_once() {
    let t = TestQueue::new().await;
    assert_eq!(
        t.queue
            .signal(key("approval-7"), json!("yes"))
            .await
            .unwrap(),
        SignalSent::Kept
    );
    let first = t.push("a").await;
    let second = t.push("b").await;
    let a = t.take("w1").await.unwrap();
    assert_eq!(a.job.id, first);
    let waited = t
        .queue
        .wait_for_signal(&a.lease, step("approved"), key("approval-7"), HOUR)
        .await
        .unwrap();
    assert_eq!(waited, SignalWait::Received(json!("yes")), "at once");
    assert_eq!(t.queue.get(first).await.unwrap().state, JobState::Running);

    let b = t.take("w1").await.unwrap();
    assert_eq!(b.job.id, second);
    let waited = t
        .queue
        .wait_for_signal(&b.lease, step("approved"), key("approval-7"), HOUR)
        .await
        .unwrap();
    assert!(
        matches!(waited, SignalWait::Suspended { .. }),
        "the kept signal went to the first job only: {waited:?}"
    );
}

/// A wait whose time passes answers "timed out" when the job runs again, and a signal sent after that is kept, not
/// given to the job that stopped waiting.
#[tokio::test]
async fn a_wait_times_out_and_a_later_signal_is_kept() {
    let t = TestQueue::new().await;
    let id = t.push("order").await;
    let first = t.take("w1").await.unwrap();
    t.queue
        .wait_for_signal(
            &first.lease,
            step("packed"),
            key("k"),
            Duration::from_secs(60),
        )
        .await
        .unwrap();
    t.advance(Duration::from_secs(61));
    let second = t.take("w1").await.expect("due at the timeout");
    // A timeout given differently on the replay changes nothing: the first wait's time stands.
    let waited = t
        .queue
        .wait_for_signal(&second.lease, step("packed"), key("k"), HOUR)
        .await
        .unwrap();
    assert_eq!(waited, SignalWait::TimedOut);
    assert_eq!(
        t.queue.signal(key("k"), json!(1)).await.unwrap(),
        SignalSent::Kept
    );
    t.queue.finish(&second.lease, None).await.unwrap();
    assert_eq!(t.queue.get(id).await.unwrap().state, JobState::Completed);
}

/// A signal to a key that only a cancelled job waited for is refused with a clear error, and nothing is kept: a
/// job that waits for the key later does not receive it.
#[tokio::test]
async fn a_signal_for_a_cancelled_job_is_refused() {
    let t = TestQueue::new().await;
    let id = t.push("order").await;
    let first = t.take("w1").await.unwrap();
    t.queue
        .wait_for_signal(&first.lease, step("packed"), key("order-9"), HOUR)
        .await
        .unwrap();
    t.queue.cancel(id).await.unwrap();
    let refused = t.queue.signal(key("order-9"), json!(1)).await.unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::InvalidState);
    assert_eq!(
        refused.message(),
        format!(
            "job {id} waited for signal \"order-9\" and was cancelled: the signal is refused, not kept"
        )
    );
    let other = t.push("other").await;
    let o = t.take("w1").await.unwrap();
    assert_eq!(o.job.id, other);
    let waited = t
        .queue
        .wait_for_signal(&o.lease, step("packed"), key("order-9"), HOUR)
        .await
        .unwrap();
    assert!(matches!(waited, SignalWait::Suspended { .. }));
    // Now a live job waits: it receives the next one.
    assert_eq!(
        t.queue.signal(key("order-9"), json!(2)).await.unwrap(),
        SignalSent::Delivered { job: other }
    );
}

/// A stale attempt cannot wait, and bad input is refused by name before anything is written.
#[tokio::test]
async fn a_wait_is_fenced_and_bad_input_is_refused() {
    let t = TestQueue::new().await;
    t.push("a").await;
    let first = t.take("w1").await.unwrap();
    t.queue.release(&first.lease).await.unwrap();
    let stale = t
        .queue
        .wait_for_signal(&first.lease, step("s"), key("k"), HOUR)
        .await
        .unwrap_err();
    assert_eq!(stale.kind(), ErrorKind::LeaseLost);
    assert_eq!(
        SignalKey::parse("").unwrap_err().field(),
        Some("key"),
        "an empty key"
    );
    let big = "x".repeat(2 * 1024 * 1024);
    let too_big = t.queue.signal(key("k"), json!(big)).await.unwrap_err();
    assert_eq!(too_big.field(), Some("data"));
    assert_eq!(
        t.queue.signal(key("k"), json!(1)).await.unwrap(),
        SignalSent::Kept,
        "the refused signal left nothing behind"
    );
}

/// Through a worker: the handler waits without a slot, the signal wakes it, and each step's body runs once.
#[tokio::test]
async fn a_handler_waits_for_a_signal_without_holding_its_slot() {
    let t = TestQueue::with(|o| o.clock = Arc::new(cairn::SystemClock)).await;
    let id = t.push("ship").await;
    let ran = Arc::new(AtomicU32::new(0));
    let counted = ran.clone();
    let worker = Worker::builder(&t.queue, "w1")
        .handler("ship", move |job| {
            let ran = counted.clone();
            async move {
                job.step("charge", || async {
                    Ok::<_, JobError>(ran.fetch_add(1, Ordering::SeqCst))
                })
                .await?;
                let parcel: Option<String> = job
                    .wait_for_signal("packed", "ship-1/packed", Duration::from_secs(60))
                    .await?;
                job.set_result(json!({ "parcel": parcel }));
                Ok(())
            }
        })
        .start()
        .unwrap();
    eventually(PATIENCE, "the job waits", || async {
        t.queue.get(id).await.unwrap().state == JobState::Scheduled
    })
    .await;
    t.queue
        .signal(key("ship-1/packed"), json!("P-42"))
        .await
        .unwrap();
    eventually(PATIENCE, "the job completes", || async {
        t.queue.get(id).await.unwrap().state == JobState::Completed
    })
    .await;
    let report = worker.stop(Duration::from_secs(5)).await.unwrap();
    assert_eq!((report.finished, report.suspended), (1, 1));
    assert_eq!(ran.load(Ordering::SeqCst), 1, "the charge ran once");
    assert_eq!(
        t.queue.get(id).await.unwrap().result,
        Some(json!({"parcel": "P-42"}))
    );
}
