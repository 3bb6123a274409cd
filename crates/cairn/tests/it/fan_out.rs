//! Fan-out and fan-in as steps: a spawn pushes its children once, however often the job runs again, and a join waits
//! for them without holding a worker, then answers how each ended.

use cairn::Jobs;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use cairn::{
    ErrorKind, JobError, JobFilter, JobId, JobState, Joined, Push, RetryPolicy, StepName, Worker,
};
use serde_json::json;

use super::harness::{PATIENCE, TestQueue, eventually};

fn step(name: &str) -> StepName {
    StepName::parse(name).unwrap()
}

async fn count_jobs(t: &TestQueue) -> usize {
    t.queue.list(JobFilter::default()).await.unwrap().jobs.len()
}

/// A spawn pushes its children and records their ids; the job retried gets the same ids back and pushes nothing.
/// The children start at once, and a retry of the run that spawned them does not cancel them.
#[tokio::test]
async fn a_spawn_pushes_its_children_once_and_they_start_at_once() {
    let t = TestQueue::new().await;
    let id = t
        .queue
        .enqueue(Push::new("parent").retry(RetryPolicy::immediate(3)))
        .await
        .unwrap()
        .id;
    let first = t.take("w1").await.unwrap();
    let children = vec![
        Push::new("child").data(json!(1)),
        Push::new("child").data(json!(2)),
    ];
    let ids = t
        .queue
        .spawn(&first.lease, step("fan"), children.clone())
        .await
        .unwrap();
    assert_eq!(ids.len(), 2);
    for child in &ids {
        let job = t.queue.get(*child).await.unwrap();
        assert_eq!((job.state, job.parent), (JobState::Queued, Some(id)));
    }
    t.queue.retry(&first.lease, "again", None).await.unwrap();
    assert_eq!(
        t.queue.get(ids[0]).await.unwrap().state,
        JobState::Queued,
        "the failed run's spawned children stay"
    );
    let again = loop {
        let claimed = t.take("w2").await.unwrap();
        if claimed.job.id == id {
            break claimed;
        }
    };
    let replayed = t
        .queue
        .spawn(&again.lease, step("fan"), children)
        .await
        .unwrap();
    assert_eq!(replayed, ids);
    assert_eq!(count_jobs(&t).await, 3, "nothing pushed twice");

    let stale = t
        .queue
        .spawn(&first.lease, step("other"), vec![Push::new("x")])
        .await
        .unwrap_err();
    assert_eq!(stale.kind(), ErrorKind::LeaseLost);
    let elsewhere = t
        .queue
        .spawn(
            &again.lease,
            step("bad"),
            vec![Push::new("x"), Push::new("y").parent(JobId(999))],
        )
        .await
        .unwrap_err();
    assert_eq!(elsewhere.field(), Some("jobs[1].parent"));
    let unique = t
        .queue
        .spawn(
            &again.lease,
            step("bad"),
            vec![Push::new("x").unique_key("account:7")],
        )
        .await
        .unwrap_err();
    assert_eq!(unique.field(), Some("jobs[0].unique_key"), "{unique}");
    assert_eq!(count_jobs(&t).await, 3, "a refused spawn pushes none");
}

/// A join while children run suspends the job (state waiting, the attempt uncounted); once they complete, the job
/// runs again and the join answers each child's state and result, the same on every later attempt.
#[tokio::test]
async fn a_join_waits_for_the_children_and_answers_how_each_ended() {
    let t = TestQueue::new().await;
    let id = t.push("parent").await;
    let first = t.take("w1").await.unwrap();
    let ids = t
        .queue
        .spawn(
            &first.lease,
            step("fan"),
            vec![Push::new("child"), Push::new("child")],
        )
        .await
        .unwrap();
    let joined = t.queue.join(&first.lease, step("gather")).await.unwrap();
    assert_eq!(joined, Joined::Suspended);
    let job = t.queue.get(id).await.unwrap();
    assert_eq!((job.state, job.attempt), (JobState::Waiting, 0));
    assert!(job.suspended_at.is_some());
    let stats = t.queue.queue_stats().await.unwrap();
    assert_eq!(
        (stats[0].suspended, stats[0].waiting, stats[0].queued),
        (1, 1, 2),
        "suspended, of the waiting"
    );

    for n in 0..2 {
        let child = t.take("w1").await.unwrap();
        assert!(ids.contains(&child.job.id));
        t.queue
            .finish_with(cairn::Finish {
                result: Some(json!({ "n": n })),
                ..cairn::Finish::new(&child.lease)
            })
            .await
            .unwrap();
    }
    let second = t
        .take("w1")
        .await
        .expect("the children ended: the job runs again");
    assert_eq!(second.job.id, id);
    assert_eq!(second.job.attempt, 1, "the join did not use an attempt");
    let Joined::Ended(children) = t.queue.join(&second.lease, step("gather")).await.unwrap() else {
        panic!("the children ended");
    };
    let seen: Vec<_> = children
        .iter()
        .map(|c| (c.id, c.state, c.result.clone()))
        .collect();
    assert_eq!(
        seen,
        [
            (ids[0], JobState::Completed, Some(json!({"n": 0}))),
            (ids[1], JobState::Completed, Some(json!({"n": 1})))
        ]
    );
    assert_eq!(
        t.queue.join(&second.lease, step("gather")).await.unwrap(),
        Joined::Ended(children),
        "recorded: the same answer again"
    );
}

/// A failed child holds the join, as it holds a parent; cancelled, it lets the job go on, and the join says so.
#[tokio::test]
async fn a_failed_child_holds_the_join_until_it_is_cancelled() {
    let t = TestQueue::new().await;
    let id = t.push("parent").await;
    let first = t.take("w1").await.unwrap();
    let ids = t
        .queue
        .spawn(
            &first.lease,
            step("fan"),
            vec![Push::new("child").retry(RetryPolicy::immediate(1))],
        )
        .await
        .unwrap();
    assert_eq!(
        t.queue.join(&first.lease, step("gather")).await.unwrap(),
        Joined::Suspended
    );
    let child = t.take("w1").await.unwrap();
    t.queue.fail(&child.lease, "boom", "no").await.unwrap();
    assert!(
        t.take("w1").await.is_none(),
        "the failed child holds the job"
    );
    assert_eq!(t.queue.get(id).await.unwrap().state, JobState::Waiting);
    t.queue.cancel(ids[0]).await.unwrap();
    let second = t
        .take("w1")
        .await
        .expect("cancelled, the child lets the job go on");
    let Joined::Ended(children) = t.queue.join(&second.lease, step("gather")).await.unwrap() else {
        panic!("nothing holds the join");
    };
    assert_eq!(children[0].state, JobState::Cancelled);
}

/// Through a worker: the parent spawns three children, sleeps, joins them and sums their results; every body runs
/// once, each suspension frees the parent's slot, and the children spawned before the sleep were not cancelled by
/// it.
#[tokio::test]
async fn a_handler_fans_out_and_in_without_holding_its_slot() {
    let t = TestQueue::with(|o| o.clock = Arc::new(cairn::SystemClock)).await;
    let id = t.push("sum").await;
    let spawned = Arc::new(AtomicU32::new(0));
    let counted = spawned.clone();
    let worker = Worker::builder(&t.queue, "w1")
        .max_concurrency(1)
        .handler("sum", move |job| {
            let spawned = counted.clone();
            async move {
                let children = (1..=3)
                    .map(|n| Push::new("double").data(json!(n)))
                    .collect();
                let ids = job.spawn("fan", children).await?;
                spawned.fetch_add(1, Ordering::SeqCst);
                job.sleep("breathe", Duration::from_millis(100)).await?;
                let ended = job.join("gather").await?;
                assert_eq!(ended.iter().map(|c| c.id).collect::<Vec<_>>(), ids);
                let sum: i64 = ended
                    .iter()
                    .map(|c| c.result.as_ref().and_then(|r| r.as_i64()).unwrap_or(0))
                    .sum();
                job.set_result(json!(sum));
                Ok(())
            }
        })
        .handler("double", |job| async move {
            let n = job
                .data()
                .as_i64()
                .ok_or_else(|| JobError::fail("data", "not a number"))?;
            job.set_result(json!(n * 2));
            Ok(())
        })
        .start()
        .unwrap();
    eventually(PATIENCE, "the parent completes", || async {
        t.queue.get(id).await.unwrap().state == JobState::Completed
    })
    .await;
    let report = worker.stop(Duration::from_secs(5)).await.unwrap();
    assert_eq!(t.queue.get(id).await.unwrap().result, Some(json!(12)));
    assert_eq!(report.finished, 4, "the parent and its three children");
    assert!(report.suspended >= 1, "{report:?}");
    assert_eq!(count_jobs(&t).await, 4, "the children were pushed once");
    assert!(
        spawned.load(Ordering::SeqCst) >= 2,
        "replays got the ids back"
    );
}

/// With children that are the job's own, a failed child does not hold the join, even when it fails last: the job
/// runs again and the join says it failed.
#[tokio::test]
async fn a_join_of_the_jobs_own_children_goes_on_when_the_last_one_fails() {
    let t = TestQueue::new().await;
    let id = t
        .queue
        .enqueue(Push::new("parent").children(cairn::Children::OfTheJob))
        .await
        .unwrap()
        .id;
    let first = t.take("w1").await.unwrap();
    let ids = t
        .queue
        .spawn(
            &first.lease,
            step("fan"),
            vec![
                Push::new("child").retry(RetryPolicy::immediate(1)),
                Push::new("child"),
            ],
        )
        .await
        .unwrap();
    assert_eq!(
        t.queue.join(&first.lease, step("gather")).await.unwrap(),
        Joined::Suspended
    );
    let a = t.take("w1").await.unwrap();
    let b = t.take("w1").await.unwrap();
    let (failing, completing) = if a.job.id == ids[0] { (a, b) } else { (b, a) };
    t.queue.finish(&completing.lease, None).await.unwrap();
    assert_eq!(t.queue.get(id).await.unwrap().state, JobState::Waiting);
    t.queue.fail(&failing.lease, "boom", "no").await.unwrap();
    let second = t
        .take("w1")
        .await
        .expect("the last child failed: the join goes on");
    assert_eq!(second.job.id, id);
    let Joined::Ended(children) = t.queue.join(&second.lease, step("gather")).await.unwrap() else {
        panic!("nothing holds the join");
    };
    let states: Vec<_> = children.iter().map(|c| (c.id, c.state)).collect();
    assert_eq!(
        states,
        [(ids[0], JobState::Failed), (ids[1], JobState::Completed)]
    );
}
