//! Jobs that wait on other jobs: dependencies (chains, diamonds, failures, cancellation, cycles) and parents with
//! children (the Bedrock life cycle).

use cairn::Jobs;
use std::time::Duration;

use cairn::{
    AttemptOutcome, ChangeDependencies, Children, Dequeue, ErrorKind, JobFilter, JobId, JobState,
    Push, RetryPolicy,
};
use serde_json::json;

use super::harness::TestQueue;

async fn state(t: &TestQueue, id: JobId) -> JobState {
    t.queue.get(id).await.unwrap().state
}

async fn push(t: &TestQueue, push: Push) -> JobId {
    t.queue.enqueue(push).await.unwrap().id
}

/// Pushes `parent` and runs it once, creating two children: `first`, which has one attempt, and `second`, which
/// comes after it. Returns the three ids; the parent then waits for them.
async fn family_of_two(t: &TestQueue, parent: Push) -> (JobId, JobId, JobId) {
    let parent = push(t, parent).await;
    let run = t.take("w").await.unwrap();
    let first = push(
        t,
        Push::new("first")
            .parent(parent)
            .retry(RetryPolicy::immediate(1)),
    )
    .await;
    let second = push(t, Push::new("second").parent(parent).priority(-1)).await;
    t.queue.finish(&run.lease, None).await.unwrap();
    (parent, first, second)
}

/// The children of `parent`, as it finds them when it runs again.
async fn children_of(t: &TestQueue, parent: JobId) -> Vec<cairn::Job> {
    t.queue
        .list(JobFilter {
            parent: Some(parent),
            ..JobFilter::default()
        })
        .await
        .unwrap()
        .jobs
}

/// Takes the one ready job and fails it for good; returns its id.
async fn take_and_fail(t: &TestQueue) -> JobId {
    let claimed = t.take("w").await.unwrap();
    t.queue.fail(&claimed.lease, "bad", "no").await.unwrap();
    claimed.job.id
}

/// Takes the one ready job, finishes it, and returns its name.
async fn run_one(t: &TestQueue) -> Option<String> {
    let claimed = t.take("w").await?;
    t.queue.finish(&claimed.lease, None).await.unwrap();
    Some(claimed.job.name.to_string())
}

#[tokio::test]
async fn a_chain_of_a_thousand_dependencies_runs_in_order() {
    let t = TestQueue::new().await;
    let mut previous = None;
    // Priorities against the order: only the dependencies keep the chain in line.
    for i in 0..1000 {
        let mut job = Push::new(format!("step-{i:04}")).priority(i);
        if let Some(previous) = previous {
            job = job.depends_on(previous);
        }
        previous = Some(push(&t, job).await);
    }
    let mut ran = Vec::new();
    while let Some(name) = run_one(&t).await {
        ran.push(name);
    }
    let expected: Vec<String> = (0..1000).map(|i| format!("step-{i:04}")).collect();
    assert_eq!(ran, expected);
    t.close().await;
}

#[tokio::test]
async fn a_diamond_runs_its_join_once_after_both_sides() {
    let t = TestQueue::new().await;
    let top = t.push("top").await;
    let left = push(&t, Push::new("left").depends_on(top)).await;
    let right = push(&t, Push::new("right").depends_on(top)).await;
    let join = push(&t, Push::new("join").depends_on(left).depends_on(right)).await;
    let job = t.queue.get(join).await.unwrap();
    assert_eq!(job.state, JobState::Waiting);
    assert_eq!(job.depends_on, [left, right]);
    assert_eq!(run_one(&t).await.as_deref(), Some("top"));
    let mut sides = vec![run_one(&t).await.unwrap()];
    // The join waits for the second side.
    assert_eq!(t.queue.get(join).await.unwrap().depends_on.len(), 1);
    sides.push(run_one(&t).await.unwrap());
    sides.sort();
    assert_eq!(sides, ["left", "right"]);
    assert_eq!(run_one(&t).await.as_deref(), Some("join"));
    assert_eq!(run_one(&t).await, None);
    let join = t.queue.get(join).await.unwrap();
    assert_eq!((join.state, join.history.len()), (JobState::Completed, 1));
    t.close().await;
}

#[tokio::test]
async fn a_waiting_worker_gets_a_dependent_in_the_commit_that_meets_its_dependency() {
    let t = TestQueue::new().await;
    let first = t.push("first").await;
    let second = push(&t, Push::new("second").depends_on(first)).await;
    let claimed = t.take("a").await.unwrap();
    let queue = t.queue.clone();
    let waiter = tokio::spawn(async move {
        queue
            .dequeue(Dequeue::new("b").wait(Duration::from_secs(60)))
            .await
            .unwrap()
    });
    tokio::task::yield_now().await;
    t.queue.finish(&claimed.lease, None).await.unwrap();
    let got = waiter.await.unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].job.id, second);
    t.close().await;
}

#[tokio::test]
async fn a_failed_dependency_holds_its_dependents_until_it_is_requeued_and_completes() {
    let t = TestQueue::new().await;
    let flaky = push(&t, Push::new("flaky").retry(RetryPolicy::immediate(1))).await;
    let after = push(&t, Push::new("after").depends_on(flaky)).await;
    let claimed = t.take("w").await.unwrap();
    t.queue.retry(&claimed.lease, "boom", None).await.unwrap();
    assert_eq!(state(&t, flaky).await, JobState::Failed);
    // Visible: the dependent still waits, on a job that failed.
    let job = t.queue.get(after).await.unwrap();
    assert_eq!(
        (job.state, job.depends_on.clone()),
        (JobState::Waiting, vec![flaky])
    );
    assert!(t.take("w").await.is_none());
    t.queue.requeue(flaky, None).await.unwrap();
    assert_eq!(run_one(&t).await.as_deref(), Some("flaky"));
    assert_eq!(run_one(&t).await.as_deref(), Some("after"));
    t.close().await;
}

#[tokio::test]
async fn cancelling_a_dependency_cancels_its_dependents_and_theirs_saying_why() {
    let t = TestQueue::new().await;
    let a = t.push("a").await;
    let b = push(&t, Push::new("b").depends_on(a)).await;
    let c = push(&t, Push::new("c").depends_on(b)).await;
    let other = t.push("other").await;
    let d = push(&t, Push::new("d").depends_on(other)).await;
    t.queue.cancel(a).await.unwrap();
    for id in [a, b, c] {
        assert_eq!(state(&t, id).await, JobState::Cancelled, "job {id}");
    }
    let b_job = t.queue.get(b).await.unwrap();
    assert_eq!(
        b_job.error.as_deref(),
        Some(format!("job {a}, which it depends on, was cancelled").as_str())
    );
    assert!(b_job.depends_on.is_empty());
    // Deleting a dependency that has not completed does the same.
    t.queue.delete(other).await.unwrap();
    assert_eq!(state(&t, d).await, JobState::Cancelled);
    // A new job cannot depend on a cancelled one.
    let err = t
        .queue
        .enqueue(Push::new("late").depends_on(a))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidState, "{err}");
    t.close().await;
}

#[tokio::test]
async fn cancelling_a_failed_job_takes_it_out_of_the_failures() {
    let t = TestQueue::new().await;
    let id = push(&t, Push::new("x").retry(RetryPolicy::immediate(1))).await;
    let claimed = t.take("w").await.unwrap();
    t.queue
        .fail(&claimed.lease, "bad-input", "no")
        .await
        .unwrap();
    t.queue.cancel(id).await.unwrap();
    assert_eq!(state(&t, id).await, JobState::Cancelled);
    let failed = t
        .queue
        .list(JobFilter {
            state: Some(JobState::Failed),
            ..JobFilter::default()
        })
        .await
        .unwrap();
    assert!(failed.jobs.is_empty());
    t.close().await;
}

#[tokio::test]
async fn dependencies_are_checked_and_cycles_refused() {
    let t = TestQueue::new().await;
    let err = t
        .queue
        .enqueue(Push::new("x").depends_on(JobId(999)))
        .await
        .unwrap_err();
    assert_eq!(
        (err.kind(), err.field(), err.message()),
        (
            ErrorKind::InvalidInput,
            Some("depends_on"),
            "depends_on: job 999 does not exist"
        )
    );
    let a = t.push("a").await;
    let b = push(&t, Push::new("b").depends_on(a)).await;
    let c = push(&t, Push::new("c").depends_on(b)).await;
    // a → b → c: making a wait for c closes a cycle.
    let err = t
        .queue
        .change_dependencies(ChangeDependencies {
            job: a,
            add: vec![c],
            remove: vec![],
        })
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidState);
    assert!(err.message().contains("cycle"), "{err}");
    let err = t
        .queue
        .change_dependencies(ChangeDependencies {
            job: a,
            add: vec![a],
            remove: vec![],
        })
        .await
        .unwrap_err();
    assert_eq!(err.field(), Some("depends_on"), "{err}");
    // Nothing was written by the refused changes.
    assert_eq!(state(&t, a).await, JobState::Queued);
    assert!(t.queue.get(a).await.unwrap().depends_on.is_empty());
    // A dependency on a completed job is met at once.
    assert_eq!(run_one(&t).await.as_deref(), Some("a"));
    let d = push(&t, Push::new("d").depends_on(a)).await;
    assert_eq!(state(&t, d).await, JobState::Queued);
    // A job that started cannot change its dependencies.
    let claimed = t.take("w").await.unwrap();
    let err = t
        .queue
        .change_dependencies(ChangeDependencies {
            job: claimed.job.id,
            add: vec![c],
            remove: vec![],
        })
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidState);
    t.close().await;
}

#[tokio::test]
async fn dependencies_added_and_removed_move_a_job_between_waiting_and_ready() {
    let t = TestQueue::new().await;
    let a = t.push("a").await;
    let later = push(&t, Push::new("later").delay(Duration::from_secs(60))).await;
    let change = |job, add: Vec<JobId>, remove: Vec<JobId>| ChangeDependencies { job, add, remove };
    assert_eq!(
        t.queue
            .change_dependencies(change(later, vec![a], vec![]))
            .await
            .unwrap(),
        JobState::Waiting
    );
    // Removing the last dependency puts the job back where its time says: not due yet, so scheduled.
    assert_eq!(
        t.queue
            .change_dependencies(change(later, vec![], vec![a]))
            .await
            .unwrap(),
        JobState::Scheduled
    );
    let b = t.push("b").await;
    assert_eq!(
        t.queue
            .change_dependencies(change(b, vec![a], vec![]))
            .await
            .unwrap(),
        JobState::Waiting
    );
    assert_eq!(run_one(&t).await.as_deref(), Some("a"));
    assert_eq!(run_one(&t).await.as_deref(), Some("b"));
    t.close().await;
}

#[tokio::test]
async fn a_parent_runs_again_after_its_children_with_their_results() {
    let t = TestQueue::new().await;
    let parent = t.push("parent").await;
    let run = t.take("w").await.unwrap();
    let first = push(&t, Push::new("child").parent(parent).data(json!({"n": 1}))).await;
    let second = push(&t, Push::new("child").parent(parent).data(json!({"n": 2}))).await;
    // Children wait for the run that created them to finish.
    let child = t.queue.get(first).await.unwrap();
    assert_eq!(
        (child.state, child.awaits_parent),
        (JobState::Waiting, true)
    );
    assert!(t.take("w").await.is_none());
    t.queue.finish(&run.lease, None).await.unwrap();
    let waiting = t.queue.get(parent).await.unwrap();
    assert_eq!((waiting.state, waiting.attempt), (JobState::Waiting, 0));
    assert_eq!(state(&t, first).await, JobState::Queued);
    // The children run; one returns a result.
    let c = t.take("w").await.unwrap();
    assert_eq!(c.job.id, first);
    t.queue
        .finish(&c.lease, Some(json!({"sum": 10})))
        .await
        .unwrap();
    assert_eq!(state(&t, parent).await, JobState::Waiting);
    let c = t.take("w").await.unwrap();
    assert_eq!(c.job.id, second);
    t.queue.finish(&c.lease, None).await.unwrap();
    // The last one ends: the parent runs again, with fresh attempts, and finds its children.
    let again = t.take("w").await.unwrap();
    assert_eq!((again.job.id, again.job.attempt), (parent, 1));
    let children = children_of(&t, parent).await;
    let results: Vec<_> = children
        .iter()
        .map(|c| (c.id, c.state, c.data.clone()))
        .collect();
    assert_eq!(
        results,
        [
            (second, JobState::Completed, json!({"n": 2})),
            (first, JobState::Completed, json!({"sum": 10})),
        ]
    );
    t.queue.finish(&again.lease, None).await.unwrap();
    assert_eq!(state(&t, parent).await, JobState::Completed);
    let history = t.queue.get(parent).await.unwrap().history;
    assert_eq!(history.len(), 2);
    t.close().await;
}

#[tokio::test]
async fn a_child_adds_a_sibling_while_its_parent_waits() {
    let t = TestQueue::new().await;
    let parent = t.push("parent").await;
    let run = t.take("w").await.unwrap();
    let child = push(&t, Push::new("child").parent(parent)).await;
    t.queue.finish(&run.lease, None).await.unwrap();
    let c = t.take("w").await.unwrap();
    assert_eq!(c.job.id, child);
    let sibling = push(&t, Push::new("sibling").parent(parent)).await;
    assert_eq!(state(&t, sibling).await, JobState::Queued);
    t.queue.finish(&c.lease, None).await.unwrap();
    // The sibling is still live: the parent waits on.
    assert_eq!(state(&t, parent).await, JobState::Waiting);
    assert_eq!(run_one(&t).await.as_deref(), Some("sibling"));
    assert_eq!(run_one(&t).await.as_deref(), Some("parent"));
    t.close().await;
}

#[tokio::test]
async fn children_of_a_run_that_does_not_finish_are_cancelled() {
    let t = TestQueue::new().await;
    let parent = t.push("parent").await;
    let run = t.take("w").await.unwrap();
    let child = push(&t, Push::new("child").parent(parent)).await;
    t.queue
        .retry(&run.lease, "boom", Some(Duration::ZERO))
        .await
        .unwrap();
    let job = t.queue.get(child).await.unwrap();
    assert_eq!(job.state, JobState::Cancelled);
    assert_eq!(
        job.error.as_deref(),
        Some(format!("the run of parent job {parent} that created it did not finish").as_str())
    );
    // The next run makes its own children; the parent is not held by the cancelled one.
    let run = t.take("w").await.unwrap();
    assert_eq!(run.job.id, parent);
    let child = push(&t, Push::new("child").parent(parent)).await;
    t.queue.finish(&run.lease, None).await.unwrap();
    assert_eq!(state(&t, child).await, JobState::Queued);
    assert_eq!(run_one(&t).await.as_deref(), Some("child"));
    // A lease that expires ends the run too.
    let run = t.take("w").await.unwrap();
    let orphan = push(&t, Push::new("child").parent(parent)).await;
    t.advance(run.job.lease_timeout + Duration::from_secs(1));
    // Any batch does the timed work: the parent's lease expires, and it waits for its retry.
    assert!(t.take("w").await.is_none());
    let job = t.queue.get(orphan).await.unwrap();
    assert_eq!(job.state, JobState::Cancelled);
    let history = t.queue.get(parent).await.unwrap().history;
    assert!(
        history
            .iter()
            .any(|a| a.outcome == Some(AttemptOutcome::LeaseExpired))
    );
    t.close().await;
}

#[tokio::test]
async fn a_failed_child_holds_its_parent_until_it_is_requeued_or_given_up() {
    let t = TestQueue::new().await;
    // Whether the failure comes first or last, the parent waits while a child has failed.
    for failure_first in [true, false] {
        let (parent, first, second) = family_of_two(&t, Push::new("parent")).await;
        if failure_first {
            assert_eq!(take_and_fail(&t).await, first);
            assert_eq!(run_one(&t).await.as_deref(), Some("second"));
        } else {
            t.queue.set_priority(second, 10).await.unwrap();
            assert_eq!(run_one(&t).await.as_deref(), Some("second"));
            assert_eq!(take_and_fail(&t).await, first);
        }
        assert_eq!(state(&t, parent).await, JobState::Waiting);
        assert!(t.take("w").await.is_none(), "the parent must wait");
        // Requeued, the child runs again and its completion frees the parent.
        t.queue.requeue(first, None).await.unwrap();
        assert_eq!(state(&t, parent).await, JobState::Waiting);
        assert_eq!(run_one(&t).await.as_deref(), Some("first"));
        let again = t.take("w").await.unwrap();
        assert_eq!(again.job.id, parent);
        t.queue.finish(&again.lease, None).await.unwrap();
    }
    // Cancelled or deleted, a failed child frees its parent too.
    for give_up in ["cancel", "delete"] {
        let parent = t.push("parent").await;
        let run = t.take("w").await.unwrap();
        let child = push(
            &t,
            Push::new("child")
                .parent(parent)
                .retry(RetryPolicy::immediate(1)),
        )
        .await;
        t.queue.finish(&run.lease, None).await.unwrap();
        assert_eq!(take_and_fail(&t).await, child);
        assert_eq!(state(&t, parent).await, JobState::Waiting);
        match give_up {
            "cancel" => t.queue.cancel(child).await.unwrap(),
            _ => t.queue.delete(child).await.unwrap(),
        }
        let again = t.take("w").await.unwrap();
        assert_eq!(again.job.id, parent, "{give_up}");
        t.queue.finish(&again.lease, None).await.unwrap();
    }
    t.close().await;
}

/// A parent whose children are the job's keeps them through runs that do not finish (a retry, a lapsed lease, a
/// release, a requeue): they start when a run finishes. A run that fails the job for good still cancels them.
#[tokio::test]
async fn children_of_the_job_wait_for_a_run_that_finishes() {
    let t = TestQueue::new().await;
    let parent = push(
        &t,
        Push::new("parent")
            .children(Children::OfTheJob)
            .retry(RetryPolicy::immediate(5)),
    )
    .await;
    assert_eq!(
        t.queue.get(parent).await.unwrap().children,
        Children::OfTheJob
    );
    let mut children = Vec::new();
    for ending in ["retry", "lease", "release", "requeue"] {
        let run = t.take("w").await.unwrap();
        assert_eq!(run.job.id, parent, "{ending}");
        children.push(push(&t, Push::new(format!("child-{ending}")).parent(parent)).await);
        match ending {
            "retry" => {
                t.queue
                    .retry(&run.lease, "boom", Some(Duration::ZERO))
                    .await
                    .unwrap();
            }
            "lease" => {
                t.advance(run.job.lease_timeout + Duration::from_secs(1));
                // Any batch does the timed work: the parent's lease expires, and it is due again at once.
                let again = t.take("w").await.unwrap();
                t.queue.release(&again.lease).await.unwrap();
            }
            "release" => t.queue.release(&run.lease).await.unwrap(),
            _ => {
                t.queue.requeue(parent, None).await.unwrap();
            }
        }
        for child in &children {
            let job = t.queue.get(*child).await.unwrap();
            assert_eq!(job.state, JobState::Waiting, "{ending}: {job:?}");
            assert!(job.awaits_parent, "{ending}");
        }
    }
    let run = t.take("w").await.unwrap();
    t.queue.finish(&run.lease, None).await.unwrap();
    assert_eq!(state(&t, parent).await, JobState::Waiting);
    for _ in &children {
        assert!(run_one(&t).await.unwrap().starts_with("child-"));
    }
    let again = t.take("w").await.unwrap();
    assert_eq!(again.job.id, parent);

    // Failed for good, the job cancels the children its runs left waiting.
    let child = push(&t, Push::new("orphan").parent(parent)).await;
    t.queue.fail(&again.lease, "bad", "no").await.unwrap();
    assert_eq!(state(&t, child).await, JobState::Cancelled);
    t.close().await;
}

/// A parent whose children are the job's is not held by a failed child once another child completes, or is
/// cancelled, last: it runs again and finds the failure among its children. A failure that comes last leaves it
/// waiting until the failed child is given up or requeued, as Bedrock does.
#[tokio::test]
async fn a_failed_child_of_the_job_holds_its_parent_only_while_its_failure_came_last() {
    let t = TestQueue::new().await;
    for failure_first in [true, false] {
        let parent = Push::new("parent").children(Children::OfTheJob);
        let (parent, first, second) = family_of_two(&t, parent).await;
        if failure_first {
            assert_eq!(take_and_fail(&t).await, first);
            assert_eq!(state(&t, parent).await, JobState::Waiting);
            assert_eq!(run_one(&t).await.as_deref(), Some("second"));
            // The sibling completed last: the parent runs, and sees the failure.
            let again = t.take("w").await.unwrap();
            assert_eq!(again.job.id, parent);
            let family = children_of(&t, parent).await;
            assert!(
                family
                    .iter()
                    .any(|j| j.id == first && j.state == JobState::Failed)
            );
            t.queue.finish(&again.lease, None).await.unwrap();
        } else {
            t.queue.set_priority(second, 10).await.unwrap();
            assert_eq!(run_one(&t).await.as_deref(), Some("second"));
            assert_eq!(take_and_fail(&t).await, first);
            // The failure came last: nothing wakes the parent until the child is given up.
            assert_eq!(state(&t, parent).await, JobState::Waiting);
            assert!(t.take("w").await.is_none(), "the parent must wait");
            t.queue.cancel(first).await.unwrap();
            let again = t.take("w").await.unwrap();
            assert_eq!(again.job.id, parent);
            t.queue.finish(&again.lease, None).await.unwrap();
        }
    }
    t.close().await;
}

#[tokio::test]
async fn cancelling_a_parent_cancels_its_live_children_only() {
    let t = TestQueue::new().await;
    let parent = t.push("parent").await;
    let run = t.take("w").await.unwrap();
    let done = push(&t, Push::new("done").parent(parent)).await;
    let pending = push(&t, Push::new("pending").parent(parent)).await;
    t.queue.finish(&run.lease, None).await.unwrap();
    assert_eq!(run_one(&t).await.as_deref(), Some("done"));
    t.queue.cancel(parent).await.unwrap();
    assert_eq!(state(&t, done).await, JobState::Completed);
    let job = t.queue.get(pending).await.unwrap();
    assert_eq!(job.state, JobState::Cancelled);
    assert_eq!(
        job.error.as_deref(),
        Some(format!("its parent job {parent} was cancelled").as_str())
    );
    t.close().await;
}

#[tokio::test]
async fn only_a_running_or_waiting_job_can_have_new_children() {
    let t = TestQueue::new().await;
    let queued = t.push("queued").await;
    let err = t
        .queue
        .enqueue(Push::new("child").parent(queued))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidState, "{err}");
    let err = t
        .queue
        .enqueue(Push::new("child").parent(JobId(12345)))
        .await
        .unwrap_err();
    assert_eq!(err.field(), Some("parent"));
    t.close().await;
}

#[tokio::test]
async fn waiting_survives_a_restart() {
    let t = TestQueue::new().await;
    let a = t.push("a").await;
    let b = push(&t, Push::new("b").depends_on(a)).await;
    let path = t.path();
    t.close().await;
    let queue = cairn::Queue::open(&path).await.unwrap();
    assert_eq!(queue.get(b).await.unwrap().depends_on, [a]);
    let claimed = queue
        .dequeue(Dequeue::new("w"))
        .await
        .unwrap()
        .pop()
        .unwrap();
    queue.finish(&claimed.lease, None).await.unwrap();
    assert_eq!(queue.get(b).await.unwrap().state, JobState::Queued);
    queue.close(Duration::from_secs(5)).await.unwrap();
}

#[tokio::test]
async fn a_child_cannot_wait_for_its_parent_nor_a_parent_for_a_job_that_waits_on_it() {
    let t = TestQueue::new().await;
    let parent = t.push("parent").await;
    let run = t.take("w").await.unwrap();
    let err = t
        .queue
        .enqueue(Push::new("child").parent(parent).depends_on(parent))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidState, "{err}");
    let child = push(&t, Push::new("child").parent(parent)).await;
    t.queue.finish(&run.lease, None).await.unwrap();
    // The parent waits for its child: the child (or a job it waits for) cannot wait for the parent.
    let other = t.push("other").await;
    let err = t
        .queue
        .change_dependencies(ChangeDependencies {
            job: child,
            add: vec![parent],
            remove: vec![],
        })
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidState, "{err}");
    // A job the child depends on may not wait for the parent either.
    t.queue
        .change_dependencies(ChangeDependencies {
            job: child,
            add: vec![other],
            remove: vec![],
        })
        .await
        .unwrap();
    let err = t
        .queue
        .change_dependencies(ChangeDependencies {
            job: other,
            add: vec![parent],
            remove: vec![],
        })
        .await
        .unwrap_err();
    assert!(err.message().contains("cycle"), "{err}");
    // A job that waits on dependencies has never run: it cannot have children.
    let blocked = push(&t, Push::new("blocked").depends_on(other)).await;
    let err = t
        .queue
        .enqueue(Push::new("x").parent(blocked))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidState, "{err}");
    t.close().await;
}

#[tokio::test]
async fn retention_keeps_the_children_of_a_parent_that_has_not_read_them() {
    let t = TestQueue::with(|o| {
        o.retention = cairn::Retention {
            worker_max_age: None,
            max_age: None,
            max_count: Some(0),
            interval: Duration::from_millis(1),
            ..Default::default()
        }
    })
    .await;
    let parent = t.push("parent").await;
    let run = t.take("w").await.unwrap();
    let first = push(&t, Push::new("first").parent(parent)).await;
    push(&t, Push::new("second").parent(parent)).await;
    t.queue.finish(&run.lease, None).await.unwrap();
    assert_eq!(run_one(&t).await.as_deref(), Some("first"));
    let unrelated = push(&t, Push::new("unrelated").priority(10)).await;
    let c = t.take("w").await.unwrap();
    assert_eq!(c.job.id, unrelated);
    t.queue.finish(&c.lease, None).await.unwrap();
    // Batches come and go, with pruning due each time: the unrelated job goes, the waiting parent's child stays.
    t.advance(Duration::from_secs(1));
    t.push("tick").await;
    assert!(t.queue.get(unrelated).await.unwrap_err().is_not_found());
    assert_eq!(t.queue.get(first).await.unwrap().state, JobState::Completed);
    t.close().await;
}

#[tokio::test]
async fn finishing_a_step_moves_the_job_on_to_its_next_queue_in_one_step() {
    let t = TestQueue::new().await;
    let id = push(&t, Push::new("order").queue("ingest")).await;
    let step = t
        .queue
        .dequeue(Dequeue::new("w").queue("ingest"))
        .await
        .unwrap()
        .pop()
        .unwrap();
    let gate = t.push("gate").await;
    t.queue
        .finish_with(cairn::Finish {
            data: Some(json!({"ingested": true})),
            next: Some(cairn::Continue {
                queue: "process".into(),
                delay: Some(Duration::from_secs(10)),
                depends_on: vec![gate],
            }),
            ..cairn::Finish::new(&step.lease)
        })
        .await
        .unwrap();
    let job = t.queue.get(id).await.unwrap();
    assert_eq!(
        (job.state, job.queue.as_str()),
        (JobState::Waiting, "process")
    );
    assert_eq!((job.attempt, job.depends_on.clone()), (0, vec![gate]));
    assert_eq!(job.data, json!({"ingested": true}));
    assert_eq!(job.history[0].outcome, Some(AttemptOutcome::Completed));
    // Its dependency completes: it is due ten seconds after the step finished.
    assert_eq!(run_one(&t).await.as_deref(), Some("gate"));
    assert_eq!(state(&t, id).await, JobState::Scheduled);
    t.advance(Duration::from_secs(10));
    let next = t
        .queue
        .dequeue(Dequeue::new("w").queue("process"))
        .await
        .unwrap()
        .pop()
        .unwrap();
    assert_eq!((next.job.id, next.job.attempt), (id, 1));
    // A bad next queue is refused and changes nothing.
    let err = t
        .queue
        .finish_with(cairn::Finish {
            next: Some(cairn::Continue {
                queue: "bad queue".into(),
                delay: None,
                depends_on: vec![],
            }),
            ..cairn::Finish::new(&next.lease)
        })
        .await
        .unwrap_err();
    assert_eq!(err.field(), Some("next.queue"), "{err}");
    assert_eq!(state(&t, id).await, JobState::Running);
    t.close().await;
}
