//! Batches: a group of jobs whose callbacks are pushed once, when every job has ended (`on_complete`) or completed
//! (`on_success`), with the batch's counts and failed jobs; whatever path ends, revives or deletes a job.

use cairn::Jobs;
use std::time::Duration;

use cairn::{
    AddToBatch, BatchFilter, BatchId, BatchState, CloseBatch, CreateBatch, Dequeue, ErrorKind,
    JobFilter, JobId, JobState, Push, RetryPolicy,
};
use serde_json::json;

use super::harness::TestQueue;

/// The jobs named `name`, oldest first.
async fn jobs_named(t: &TestQueue, name: &str) -> Vec<cairn::Job> {
    let mut jobs = t
        .queue
        .list(JobFilter {
            name: Some(name.to_owned()),
            limit: 1000,
            ..JobFilter::default()
        })
        .await
        .unwrap()
        .jobs;
    jobs.reverse();
    jobs
}

/// Takes the next job of `queue`, whatever its name.
async fn take_from(t: &TestQueue, queue: &str) -> cairn::ClaimedJob {
    t.queue
        .dequeue(Dequeue::new("w").queue(queue))
        .await
        .unwrap()
        .pop()
        .unwrap_or_else(|| panic!("a ready job in {queue}"))
}

fn callbacks() -> CreateBatch {
    CreateBatch::default()
        .on_complete(Push::new("report.complete").queue("callbacks"))
        .on_success(
            Push::new("report.success")
                .queue("callbacks")
                .data(json!({"report": 7})),
        )
        .description("nightly reports")
}

#[tokio::test]
async fn on_complete_runs_once_every_job_ended_and_on_success_once_they_all_completed() {
    let t = TestQueue::new().await;
    let created = t
        .queue
        .create_batch(CreateBatch {
            jobs: (0..3).map(|_| Push::new("part").queue("parts")).collect(),
            ..callbacks()
        })
        .await
        .unwrap();
    let batch = created.batch;
    let ids: Vec<JobId> = created.jobs.iter().map(|e| e.id).collect();
    assert_eq!(t.queue.get(ids[0]).await.unwrap().batch, Some(batch));

    let done = take_from(&t, "parts").await;
    t.queue.finish(&done.lease, None).await.unwrap();
    let broken = take_from(&t, "parts").await;
    t.queue
        .fail(&broken.lease, "bad-input", "no such report")
        .await
        .unwrap();
    let progress = t.queue.batch(batch).await.unwrap();
    assert_eq!(
        (progress.state, progress.total, progress.pending),
        (BatchState::Running, 3, 1)
    );
    assert!(jobs_named(&t, "report.complete").await.is_empty());

    t.queue.cancel(ids[2]).await.unwrap();
    let ended = t.queue.batch(batch).await.unwrap();
    assert_eq!(ended.state, BatchState::Completed);
    assert_eq!(
        (
            ended.completed,
            ended.failed,
            ended.cancelled,
            ended.pending
        ),
        (1, 1, 1, 0)
    );
    assert!(ended.completed_at.is_some() && ended.succeeded_at.is_none());
    let complete = jobs_named(&t, "report.complete").await;
    assert_eq!(complete.len(), 1);
    assert_eq!(
        ended.on_complete.as_ref().unwrap().job,
        Some(complete[0].id)
    );
    assert_eq!(complete[0].queue.as_str(), "callbacks");
    assert_eq!(
        complete[0].data,
        json!({"batch": {"id": batch.0, "description": "nightly reports", "total": 3, "completed": 1,
            "failed": 1, "cancelled": 1, "failed_ids": [broken.job.id.0]}})
    );
    assert!(
        jobs_named(&t, "report.success").await.is_empty(),
        "not every job completed"
    );

    // Run again, the failed and cancelled jobs complete: the batch succeeds now, and completes no second time.
    t.queue.requeue(broken.job.id, None).await.unwrap();
    t.queue.requeue(ids[2], None).await.unwrap();
    assert_eq!(t.queue.batch(batch).await.unwrap().pending, 2);
    for _ in 0..2 {
        let again = take_from(&t, "parts").await;
        t.queue.finish(&again.lease, None).await.unwrap();
    }
    let succeeded = t.queue.batch(batch).await.unwrap();
    assert_eq!(succeeded.completed, 3);
    assert!(succeeded.succeeded_at.is_some());
    assert_eq!(succeeded.completed_at, ended.completed_at);
    let success = jobs_named(&t, "report.success").await;
    assert_eq!(success.len(), 1);
    assert_eq!(
        success[0].data,
        json!({"report": 7, "batch": {"id": batch.0, "description": "nightly reports", "total": 3,
            "completed": 3, "failed": 0, "cancelled": 0, "failed_ids": []}})
    );
    assert_eq!(jobs_named(&t, "report.complete").await.len(), 1);
    t.close().await;
}

#[tokio::test]
async fn a_batch_whose_jobs_all_complete_makes_both_callbacks_and_a_parked_worker_takes_them() {
    let t = TestQueue::new().await;
    let created = t
        .queue
        .create_batch(CreateBatch {
            jobs: vec![Push::new("part").queue("parts")],
            ..callbacks()
        })
        .await
        .unwrap();
    let waiting = {
        let queue = t.queue.clone();
        tokio::spawn(async move {
            queue
                .dequeue(
                    Dequeue::new("callbacks")
                        .queue("callbacks")
                        .limit(2)
                        .wait(Duration::from_secs(30)),
                )
                .await
        })
    };
    t.until_parked("callbacks").await;
    let part = take_from(&t, "parts").await;
    t.queue.finish(&part.lease, None).await.unwrap();
    let mut names: Vec<String> = waiting
        .await
        .unwrap()
        .unwrap()
        .iter()
        .map(|c| c.job.name.to_string())
        .collect();
    names.sort();
    assert_eq!(names, ["report.complete", "report.success"]);
    let batch = t.queue.batch(created.batch).await.unwrap();
    assert!(batch.completed_at.is_some() && batch.succeeded_at.is_some());
    t.close().await;
}

#[tokio::test]
async fn an_open_batch_completes_only_once_closed_and_takes_jobs_until_it_has_completed() {
    let t = TestQueue::new().await;
    let batch = t
        .queue
        .create_batch(callbacks().open())
        .await
        .unwrap()
        .batch;
    assert_eq!(t.queue.batch(batch).await.unwrap().state, BatchState::Open);
    t.queue
        .enqueue(Push::new("part").queue("parts").batch(batch))
        .await
        .unwrap();
    let first = take_from(&t, "parts").await;
    t.queue.finish(&first.lease, None).await.unwrap();
    assert_eq!(
        t.queue.batch(batch).await.unwrap().state,
        BatchState::Open,
        "every job ended, but the batch is open"
    );
    t.queue
        .run(AddToBatch {
            batch,
            jobs: vec![Push::new("part").queue("parts"); 2],
        })
        .await
        .unwrap();
    let closed = t.queue.run(CloseBatch { batch }).await.unwrap();
    assert_eq!((closed.state, closed.pending), (BatchState::Running, 2));
    // A job of the batch adds one more before it ends: the batch goes on.
    let second = take_from(&t, "parts").await;
    t.queue
        .enqueue(Push::new("part").queue("parts").batch(batch))
        .await
        .unwrap();
    t.queue.finish(&second.lease, None).await.unwrap();
    for _ in 0..2 {
        let next = take_from(&t, "parts").await;
        t.queue.finish(&next.lease, None).await.unwrap();
    }
    let done = t.queue.batch(batch).await.unwrap();
    assert_eq!(
        (done.state, done.total, done.completed),
        (BatchState::Completed, 4, 4)
    );
    assert_eq!(jobs_named(&t, "report.complete").await.len(), 1);
    assert_eq!(jobs_named(&t, "report.success").await.len(), 1);

    let late = t
        .queue
        .enqueue(Push::new("part").batch(batch))
        .await
        .unwrap_err();
    assert_eq!(late.kind(), ErrorKind::InvalidState, "{late}");
    let late = t
        .queue
        .run(AddToBatch {
            batch,
            jobs: vec![Push::new("part")],
        })
        .await
        .unwrap_err();
    assert_eq!(late.kind(), ErrorKind::InvalidState, "{late}");
    // Closing again changes nothing.
    let again = t.queue.run(CloseBatch { batch }).await.unwrap();
    assert_eq!(again.completed_at, done.completed_at);
    assert_eq!(jobs_named(&t, "report.complete").await.len(), 1);
    t.close().await;
}

#[tokio::test]
async fn an_empty_batch_completes_when_created_closed() {
    let t = TestQueue::new().await;
    let batch = t.queue.create_batch(callbacks()).await.unwrap().batch;
    let done = t.queue.batch(batch).await.unwrap();
    assert_eq!((done.state, done.total), (BatchState::Completed, 0));
    assert_eq!(jobs_named(&t, "report.complete").await.len(), 1);
    assert_eq!(jobs_named(&t, "report.success").await.len(), 1);
    t.close().await;
}

#[tokio::test]
async fn a_live_job_deleted_counts_as_cancelled_and_a_lease_running_out_of_attempts_as_failed() {
    let t = TestQueue::new().await;
    let once = RetryPolicy {
        max_attempts: 1,
        ..RetryPolicy::default()
    };
    let created = t
        .queue
        .create_batch(CreateBatch {
            jobs: vec![
                Push::new("part").queue("parts"),
                Push::new("lost")
                    .queue("lost")
                    .retry(once)
                    .lease_timeout(Duration::from_secs(1)),
            ],
            ..callbacks()
        })
        .await
        .unwrap();
    t.queue.delete(created.jobs[0].id).await.unwrap();
    let _abandoned = take_from(&t, "lost").await;
    t.advance(Duration::from_secs(5));
    t.queue.settle().await.unwrap();
    let ended = t.queue.batch(created.batch).await.unwrap();
    assert_eq!(
        (ended.state, ended.completed, ended.failed, ended.cancelled),
        (BatchState::Completed, 0, 1, 1)
    );
    let complete = jobs_named(&t, "report.complete").await;
    assert_eq!(complete.len(), 1);
    assert_eq!(
        complete[0].data["batch"]["failed_ids"],
        json!([created.jobs[1].id.0])
    );
    t.close().await;
}

#[tokio::test]
async fn bad_batches_are_refused_naming_the_field_and_write_nothing() {
    let t = TestQueue::new().await;
    let refused = |batch: CreateBatch| {
        let queue = t.queue.clone();
        async move { queue.create_batch(batch).await.unwrap_err() }
    };
    let cases = [
        (
            CreateBatch::new(vec![Push::new("a"), Push::new("b").unique_key("k")]),
            "jobs[1].unique_key",
        ),
        (
            CreateBatch::new(vec![Push::new("a").schedule("0 4 * * *")]),
            "jobs[0].schedule",
        ),
        (
            CreateBatch::new(vec![Push::new("a").batch(BatchId(1))]),
            "jobs[0].batch",
        ),
        (CreateBatch::new(vec![Push::new("")]), "jobs[0].name"),
        (
            CreateBatch::default().on_success(Push::new("done").data(json!([1]))),
            "on_success.data",
        ),
        (
            CreateBatch::default().on_success(Push::new("done").data(json!({"batch": 1}))),
            "on_success.data",
        ),
        (
            CreateBatch::default().on_complete(Push::new("done").delay(Duration::from_secs(1))),
            "on_complete.delay",
        ),
        (
            CreateBatch::default().on_complete(Push::new("done").queue("no spaces")),
            "on_complete.queue",
        ),
        (
            CreateBatch::default().description("x".repeat(1001)),
            "description",
        ),
    ];
    for (batch, field) in cases {
        let e = refused(batch).await;
        assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
        assert_eq!(e.field(), Some(field), "{e}");
    }
    assert!(
        t.queue
            .batches(BatchFilter::default())
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        t.queue
            .list(JobFilter::default())
            .await
            .unwrap()
            .jobs
            .is_empty()
    );

    let e = t
        .queue
        .enqueue(Push::new("a").batch(BatchId(42)))
        .await
        .unwrap_err();
    assert_eq!(
        (e.kind(), e.field()),
        (ErrorKind::InvalidInput, Some("batch"))
    );
    let e = t
        .queue
        .run(AddToBatch {
            batch: BatchId(42),
            jobs: vec![Push::new("a")],
        })
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
    let e = t
        .queue
        .run(CloseBatch { batch: BatchId(42) })
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
    let e = t.queue.batch(BatchId(42)).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
    t.close().await;
}

#[tokio::test]
async fn batches_list_by_state_and_their_jobs_list_by_batch() {
    let t = TestQueue::new().await;
    let open = t
        .queue
        .create_batch(CreateBatch::default().open())
        .await
        .unwrap();
    let running = t
        .queue
        .create_batch(CreateBatch::new(vec![Push::new("a"), Push::new("b")]))
        .await
        .unwrap();
    let completed = t.queue.create_batch(CreateBatch::default()).await.unwrap();
    let ids = |batches: Vec<cairn::Batch>| batches.iter().map(|b| b.id).collect::<Vec<_>>();
    let all = t.queue.batches(BatchFilter::default()).await.unwrap();
    assert_eq!(ids(all), [completed.batch, running.batch, open.batch]);
    for (state, batch) in [
        (BatchState::Open, open.batch),
        (BatchState::Running, running.batch),
        (BatchState::Completed, completed.batch),
    ] {
        let listed = t
            .queue
            .batches(BatchFilter {
                state: Some(state),
                ..BatchFilter::default()
            })
            .await
            .unwrap();
        assert_eq!(ids(listed), [batch], "{state:?}");
    }
    let page = t
        .queue
        .batches(BatchFilter {
            before: Some(completed.batch),
            limit: 1,
            ..BatchFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(ids(page), [running.batch]);
    let jobs = t
        .queue
        .list(JobFilter {
            batch: Some(running.batch),
            ..JobFilter::default()
        })
        .await
        .unwrap()
        .jobs;
    let mut listed: Vec<JobId> = jobs.iter().map(|j| j.id).collect();
    listed.sort();
    let made: Vec<JobId> = running.jobs.iter().map(|e| e.id).collect();
    assert_eq!(listed, made);
    assert!(jobs.iter().all(|j| j.state == JobState::Queued));
    t.close().await;
}

/// A callback's data must leave room for the counts at their largest, so that it cannot be refused when the batch
/// ends; one that is refused then all the same (the data limit lowered since) is recorded, with why, on the batch.
#[tokio::test]
async fn a_callback_that_cannot_be_made_is_refused_up_front_or_recorded_with_why() {
    let t = TestQueue::new().await;
    t.queue
        .set_config(
            cairn::ConfigKey::MaxDataBytes,
            cairn::ConfigValue::Count(25_000),
        )
        .await
        .unwrap();
    let big = json!({"blob": "x".repeat(9_000)});
    let e = t
        .queue
        .create_batch(
            CreateBatch::new(vec![Push::new("part")])
                .on_complete(Push::new("done").data(big.clone())),
        )
        .await
        .unwrap_err();
    assert_eq!(e.field(), Some("on_complete.data"), "{e}");
    assert!(e.message().contains("room for the batch's counts"), "{e}");
    let e = t
        .queue
        .create_batch(CreateBatch::default().on_success(Push::new("done").unique_key("k")))
        .await
        .unwrap_err();
    assert_eq!(e.field(), Some("on_success.unique_key"), "{e}");

    let fits = json!({"blob": "x".repeat(3_000)});
    let created = t
        .queue
        .create_batch(
            CreateBatch::new(vec![Push::new("part").queue("parts")])
                .on_complete(Push::new("done").data(fits)),
        )
        .await
        .unwrap();
    t.queue
        .set_config(
            cairn::ConfigKey::MaxDataBytes,
            cairn::ConfigValue::Count(1_000),
        )
        .await
        .unwrap();
    let part = take_from(&t, "parts").await;
    t.queue.finish(&part.lease, None).await.unwrap();
    let batch = t.queue.batch(created.batch).await.unwrap();
    assert_eq!(batch.state, BatchState::Completed);
    let callback = batch.on_complete.unwrap();
    assert_eq!(callback.job, None);
    assert!(
        callback
            .error
            .as_deref()
            .is_some_and(|e| e.contains("data")),
        "{callback:?}"
    );
    assert!(jobs_named(&t, "done").await.is_empty());
    t.close().await;
}

/// More batches ending in one transaction than one look takes (100) all get their callbacks in it.
#[tokio::test]
async fn hundreds_of_batches_ending_at_once_all_get_their_callbacks() {
    let t = TestQueue::new().await;
    const BATCHES: usize = 250;
    let mut jobs = Vec::new();
    for _ in 0..BATCHES {
        let created = t
            .queue
            .create_batch(
                CreateBatch::new(vec![Push::new("part").queue("parts")])
                    .on_complete(Push::new("done").queue("callbacks")),
            )
            .await
            .unwrap();
        jobs.push(created.jobs[0].id);
    }
    // One bulk action over ids cancels them a chunk of 100 per transaction; many cancels sent together share one.
    let cancels: Vec<_> = jobs
        .iter()
        .map(|&id| {
            let queue = t.queue.clone();
            tokio::spawn(async move { queue.cancel(id).await })
        })
        .collect();
    for cancel in cancels {
        cancel.await.unwrap().unwrap();
    }
    let completed = t
        .queue
        .batches(BatchFilter {
            state: Some(BatchState::Completed),
            limit: 1000,
            ..BatchFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(
        completed.len(),
        BATCHES,
        "every batch ended with its job's cancel"
    );
    assert_eq!(jobs_named(&t, "done").await.len(), BATCHES);
    t.close().await;
}

/// Closing a batch whose jobs have all ended answers with it completed, its callbacks made.
#[tokio::test]
async fn closing_a_batch_whose_jobs_ended_answers_it_completed() {
    let t = TestQueue::new().await;
    let created = t
        .queue
        .create_batch(
            CreateBatch::new(vec![Push::new("part").queue("parts")])
                .open()
                .on_complete(Push::new("done")),
        )
        .await
        .unwrap();
    let part = take_from(&t, "parts").await;
    t.queue.finish(&part.lease, None).await.unwrap();
    let closed = t
        .queue
        .run(CloseBatch {
            batch: created.batch,
        })
        .await
        .unwrap();
    assert_eq!(closed.state, BatchState::Completed);
    assert!(closed.on_complete.unwrap().job.is_some());
    t.close().await;
}

#[tokio::test]
async fn a_completed_batch_goes_with_the_last_of_its_jobs_once_retention_lets_it() {
    let t = TestQueue::with(|o| {
        o.retention = cairn::Retention {
            max_age: Some(Duration::from_secs(3600)),
            max_count: None,
            worker_max_age: None,
            interval: Duration::from_secs(60),
            ..Default::default()
        }
    })
    .await;
    let done = t
        .queue
        .create_batch(
            CreateBatch::new((0..2).map(|_| Push::new("part").queue("parts")).collect())
                .on_complete(Push::new("report.complete").queue("callbacks")),
        )
        .await
        .unwrap()
        .batch;
    let failing = t
        .queue
        .create_batch(CreateBatch::new(vec![
            Push::new("doomed")
                .queue("doomed")
                .retry(RetryPolicy::immediate(1)),
        ]))
        .await
        .unwrap()
        .batch;
    let open = t
        .queue
        .create_batch(CreateBatch::new(vec![Push::new("part").queue("parts")]).open())
        .await
        .unwrap()
        .batch;
    for _ in 0..3 {
        let c = take_from(&t, "parts").await;
        t.queue.finish(&c.lease, None).await.unwrap();
    }
    let doomed = take_from(&t, "doomed").await;
    t.queue
        .retry(&doomed.lease, "out of attempts", None)
        .await
        .unwrap();
    let states = async |t: &TestQueue| {
        let mut states = Vec::new();
        for id in [done, failing, open] {
            states.push(
                t.queue
                    .batch(id)
                    .await
                    .map(|b| b.state)
                    .map_err(|e| e.kind()),
            );
        }
        states
    };
    use BatchState::{Completed, Open};
    assert_eq!(states(&t).await, [Ok(Completed), Ok(Completed), Ok(Open)]);

    t.advance(Duration::from_secs(60)); // a pruning pass: nothing is an hour old yet
    t.queue.settle().await.unwrap();
    assert_eq!(states(&t).await, [Ok(Completed), Ok(Completed), Ok(Open)]);

    t.advance(Duration::from_secs(3600)); // the finished jobs go, and the batch left with none goes with them
    t.queue.settle().await.unwrap();
    assert_eq!(
        states(&t).await,
        [Err(ErrorKind::NotFound), Ok(Completed), Ok(Open)],
        "a failed job keeps its batch, and an open batch stays open"
    );
    assert_eq!(
        t.queue.get(doomed.job.id).await.unwrap().state,
        JobState::Failed
    );

    // The failed job dealt with, the next pass takes its batch too.
    t.queue.delete(doomed.job.id).await.unwrap();
    t.advance(Duration::from_secs(60));
    t.queue.settle().await.unwrap();
    assert_eq!(
        states(&t).await,
        [Err(ErrorKind::NotFound), Err(ErrorKind::NotFound), Ok(Open)]
    );
    t.close().await;
}
