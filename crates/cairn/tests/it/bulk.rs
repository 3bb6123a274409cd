//! Bulk actions: one operator action over the jobs of a filter or a list of ids, a chunk per transaction, each job
//! by its own operation's rules, the ones it does not apply to skipped and counted.

use cairn::Jobs;
use cairn::{
    BulkAction, BulkOutcome, BulkSelection, Dequeue, ErrorKind, JobFilter, JobId, JobState, Push,
};

use super::harness::TestQueue;

async fn states(t: &TestQueue, ids: &[JobId]) -> Vec<JobState> {
    let mut out = Vec::new();
    for &id in ids {
        out.push(t.queue.get(id).await.unwrap().state);
    }
    out
}

fn filter(queue: &str) -> BulkSelection {
    BulkSelection::Filter(JobFilter {
        queue: Some(queue.to_owned()),
        ..JobFilter::default()
    })
}

/// More jobs than a page and a chunk: every job of the filter, none of another queue.
#[tokio::test]
async fn a_bulk_cancel_reaches_every_job_of_its_filter_and_no_other() {
    let t = TestQueue::new().await;
    let mail = t
        .push_batch(
            (0..1_250)
                .map(|_| Push::new("send").queue("mail"))
                .collect(),
        )
        .await;
    let other = t.push_batch(vec![Push::new("send").queue("pdf")]).await;
    // One of them is running, which a cancel stops too, and one completed, which it cannot cancel.
    let taken = t
        .queue
        .dequeue(Dequeue::new("w").queue("mail").limit(2))
        .await
        .unwrap();
    t.queue.finish(&taken[1].lease, None).await.unwrap();
    let outcome = t
        .queue
        .bulk(BulkAction::Cancel, filter("mail"))
        .await
        .unwrap();
    assert_eq!(
        outcome,
        BulkOutcome {
            matched: 1_250,
            done: 1_249,
            skipped: 1
        }
    );
    let after = states(&t, &mail).await;
    let completed = after.iter().filter(|s| **s == JobState::Completed).count();
    let cancelled = after.iter().filter(|s| **s == JobState::Cancelled).count();
    assert_eq!((completed, cancelled), (1, 1_249));
    assert_eq!(states(&t, &other).await, [JobState::Queued]);
    // The running job's worker is refused from then on.
    let err = t.queue.finish(&taken[0].lease, None).await.unwrap_err();
    assert!(err.is_lease_lost(), "{err}");
    t.close().await;
}

#[tokio::test]
async fn retry_delete_and_move_act_on_the_states_they_apply_to() {
    let t = TestQueue::new().await;
    let ids = t
        .push_batch((0..4).map(|_| Push::new("step").queue("q")).collect())
        .await;
    let taken = t
        .queue
        .dequeue(Dequeue::new("w").queue("q").limit(2))
        .await
        .unwrap();
    t.queue
        .fail(&taken[0].lease, "broken", "no input")
        .await
        .unwrap();
    // Now: one failed, one running, two queued. Retry runs the failed one again and skips the live ones.
    let failed = taken[0].job.id;
    let outcome = t
        .queue
        .bulk(BulkAction::Retry, BulkSelection::Ids(ids.clone()))
        .await
        .unwrap();
    assert_eq!((outcome.done, outcome.skipped), (1, 3));
    assert_eq!(t.queue.get(failed).await.unwrap().state, JobState::Queued);
    // Move skips the running job.
    let outcome = t
        .queue
        .bulk(
            BulkAction::Move {
                queue: "later".into(),
            },
            filter("q"),
        )
        .await
        .unwrap();
    assert_eq!((outcome.matched, outcome.done, outcome.skipped), (4, 3, 1));
    let moved = t
        .queue
        .list(JobFilter {
            queue: Some("later".into()),
            ..JobFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(moved.jobs.len(), 3);
    // Delete takes every job, the running one too (its worker is refused), and skips an id that does not exist.
    let mut selection = ids.clone();
    selection.push(JobId(999_999));
    let outcome = t
        .queue
        .bulk(BulkAction::Delete, BulkSelection::Ids(selection))
        .await
        .unwrap();
    assert_eq!((outcome.matched, outcome.done, outcome.skipped), (5, 4, 1));
    for id in ids {
        let err = t.queue.get(id).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotFound);
    }
    let err = t.queue.finish(&taken[1].lease, None).await.unwrap_err();
    assert!(err.is_lease_lost(), "{err}");
    t.close().await;
}

#[tokio::test]
async fn a_bad_bulk_action_is_refused_before_anything_is_done() {
    let t = TestQueue::new().await;
    let id = t.push("x").await;
    let err = t
        .queue
        .bulk(
            BulkAction::Move {
                queue: "no spaces".into(),
            },
            BulkSelection::Ids(vec![id]),
        )
        .await
        .unwrap_err();
    assert_eq!(
        (err.kind(), err.field()),
        (ErrorKind::InvalidInput, Some("queue"))
    );
    let too_many = (1..=10_001).map(JobId).collect();
    let err = t
        .queue
        .bulk(BulkAction::Cancel, BulkSelection::Ids(too_many))
        .await
        .unwrap_err();
    assert_eq!(
        (err.kind(), err.field()),
        (ErrorKind::InvalidInput, Some("ids"))
    );
    assert_eq!(t.queue.get(id).await.unwrap().state, JobState::Queued);
    t.close().await;
}
