//! Operating a queue: pause and resume, counts by state (stalled included), failure groups and unfail, tags,
//! peek.

use cairn::Jobs;
use std::time::Duration;

use cairn::{ChangeTags, Dequeue, ErrorKind, JobFilter, JobState, Push, RetryPolicy, Unfail};
use serde_json::json;

use super::harness::TestQueue;

#[tokio::test]
async fn a_paused_queue_keeps_its_jobs_and_hands_them_out_after_resume() {
    let t = TestQueue::new().await;
    let id = t.push("x").await;
    t.queue.pause_queue("default", true).await.unwrap();
    assert!(t.take("w").await.is_none());
    assert!(t.queue.peek("default", 10).await.unwrap().is_empty());
    // Everything else works: enqueue, cancel, counts.
    let other = t.push("y").await;
    t.queue.cancel(other).await.unwrap();
    let stats = t.queue.queue_stats().await.unwrap();
    assert_eq!(stats.len(), 1);
    assert!(stats[0].paused);
    assert_eq!((stats[0].queued, stats[0].cancelled), (1, 1));
    // A worker waiting on the paused queue gets the job the moment it is resumed.
    let queue = t.queue.clone();
    let waiter = tokio::spawn(async move {
        queue
            .dequeue(Dequeue::new("w").wait(Duration::from_secs(60)))
            .await
            .unwrap()
    });
    tokio::task::yield_now().await;
    t.queue.pause_queue("default", false).await.unwrap();
    let got = waiter.await.unwrap();
    assert_eq!(got[0].job.id, id);
    assert!(!t.queue.queue_stats().await.unwrap()[0].paused);
    t.close().await;
}

#[tokio::test]
async fn counts_by_state_show_stalled_jobs_whose_lease_ran_out() {
    let t = TestQueue::new().await;
    for name in ["a", "b", "c"] {
        t.queue
            .enqueue(Push::new(name).lease_timeout(Duration::from_secs(10)))
            .await
            .unwrap();
    }
    t.queue
        .enqueue(Push::new("later").delay(Duration::from_secs(3600)))
        .await
        .unwrap();
    t.queue
        .enqueue(Push::new("other").queue("mail"))
        .await
        .unwrap();
    t.take("w").await.unwrap();
    t.take("w").await.unwrap();
    let stats = t.queue.queue_stats().await.unwrap();
    let default = &stats[0];
    assert_eq!(default.queue, "default");
    assert_eq!(
        (
            default.scheduled,
            default.queued,
            default.running,
            default.stalled
        ),
        (1, 1, 2, 0)
    );
    assert_eq!((stats[1].queue.as_str(), stats[1].queued), ("mail", 1));
    // The leases run out; until the queue retries the jobs, they are stalled.
    t.clock.advance_quietly(Duration::from_secs(11));
    let default = t.queue.queue_stats().await.unwrap().remove(0);
    assert_eq!((default.running, default.stalled), (0, 2));
    t.close().await;
}

#[tokio::test]
async fn failure_groups_count_failed_jobs_and_unfail_moves_the_oldest_back() {
    let t = TestQueue::new().await;
    let mut ids = Vec::new();
    for i in 0..10 {
        let id = t
            .queue
            .enqueue(
                Push::new("import")
                    .data(json!({"i": i}))
                    .retry(RetryPolicy::immediate(1)),
            )
            .await
            .unwrap()
            .id;
        ids.push(id);
        let claimed = t.take("w").await.unwrap();
        let group = if i < 7 { "bad-csv" } else { "timeout" };
        t.queue.fail(&claimed.lease, group, "no").await.unwrap();
    }
    let groups = t.queue.failure_groups().await.unwrap();
    let counts: Vec<_> = groups.iter().map(|g| (g.group.as_str(), g.count)).collect();
    assert_eq!(counts, [("bad-csv", 7), ("timeout", 3)]);
    let listed = t
        .queue
        .list(JobFilter {
            failure_group: Some("timeout".into()),
            ..JobFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(
        listed.jobs.iter().map(|j| j.id).collect::<Vec<_>>(),
        [ids[9], ids[8], ids[7]]
    );
    // The oldest five of bad-csv go back, to another queue, with fresh attempts.
    let moved = t
        .queue
        .unfail(Unfail {
            group: "bad-csv".into(),
            queue: Some("retry".into()),
            limit: 5,
        })
        .await
        .unwrap();
    assert_eq!(moved, 5);
    let job = t.queue.get(ids[0]).await.unwrap();
    assert_eq!(
        (job.state, job.queue.as_str(), job.attempt),
        (JobState::Queued, "retry", 0)
    );
    assert_eq!(job.failure_group, None);
    assert_eq!(job.history.len(), 1);
    assert_eq!(t.queue.get(ids[5]).await.unwrap().state, JobState::Failed);
    let groups = t.queue.failure_groups().await.unwrap();
    assert_eq!(groups[0].count, 2);
    // A waiting worker on the target queue is served by the unfail's commit.
    let got = t
        .queue
        .dequeue(Dequeue::new("w").queue("retry").limit(10))
        .await
        .unwrap();
    assert_eq!(got.len(), 5);
    let err = t
        .queue
        .unfail(Unfail {
            group: "timeout".into(),
            queue: None,
            limit: 0,
        })
        .await
        .unwrap_err();
    assert_eq!(err.field(), Some("limit"));
    t.close().await;
}

#[tokio::test]
async fn unfail_leaves_a_job_whose_unique_key_is_held_again() {
    let t = TestQueue::new().await;
    let first = t
        .queue
        .enqueue(
            Push::new("sync")
                .unique_key("k")
                .retry(RetryPolicy::immediate(1)),
        )
        .await
        .unwrap()
        .id;
    let claimed = t.take("w").await.unwrap();
    t.queue.fail(&claimed.lease, "g", "no").await.unwrap();
    let second = t
        .queue
        .enqueue(Push::new("sync").unique_key("k"))
        .await
        .unwrap();
    assert!(!second.existing);
    let moved = t
        .queue
        .unfail(Unfail {
            group: "g".into(),
            queue: None,
            limit: 10,
        })
        .await
        .unwrap();
    assert_eq!(moved, 0);
    assert_eq!(t.queue.get(first).await.unwrap().state, JobState::Failed);
    t.close().await;
}

#[tokio::test]
async fn tags_are_added_and_removed_and_list_newest_first() {
    let t = TestQueue::new().await;
    let a = t.push("a").await;
    let b = t.push("b").await;
    let change = |job, add: &[&str], remove: &[&str]| ChangeTags {
        job,
        add: add.iter().map(|s| s.to_string()).collect(),
        remove: remove.iter().map(|s| s.to_string()).collect(),
    };
    t.queue
        .change_tags(change(a, &["vip", "eu"], &[]))
        .await
        .unwrap();
    t.queue.change_tags(change(b, &["vip"], &[])).await.unwrap();
    t.queue
        .change_tags(change(a, &[], &["eu", "absent"]))
        .await
        .unwrap();
    let vip = t
        .queue
        .list(JobFilter {
            tag: Some("vip".into()),
            ..JobFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(vip.jobs.iter().map(|j| j.id).collect::<Vec<_>>(), [b, a]);
    assert_eq!(t.queue.get(a).await.unwrap().tags.len(), 1);
    let err = t
        .queue
        .change_tags(change(cairn::JobId(999), &["x"], &[]))
        .await
        .unwrap_err();
    assert!(err.is_not_found());
    t.close().await;
}

#[tokio::test]
async fn a_job_holds_at_most_max_tags_however_they_come() {
    let t = TestQueue::new().await;
    let tags = |from: usize, to: usize| (from..to).map(|i| format!("t{i}")).collect::<Vec<_>>();
    let mut push = Push::new("tagged");
    for tag in tags(0, cairn::MAX_TAGS + 1) {
        push = push.tag(tag);
    }
    let e = t.queue.enqueue(push).await.unwrap_err();
    assert_eq!(
        (e.kind(), e.field()),
        (ErrorKind::InvalidInput, Some("tags")),
        "{e}"
    );
    assert!(e.to_string().contains("at most 64 tags, got 65"), "{e}");

    let mut push = Push::new("tagged");
    for tag in tags(0, cairn::MAX_TAGS - 1) {
        push = push.tag(tag);
    }
    let id = t.queue.enqueue(push).await.unwrap().id;
    let change = |add: Vec<String>, remove: Vec<String>| ChangeTags {
        job: id,
        add,
        remove,
    };
    // Two more would make 65: refused, and nothing changes; one removed first makes room.
    let e = t
        .queue
        .change_tags(change(tags(100, 102), Vec::new()))
        .await
        .unwrap_err();
    assert_eq!(e.field(), Some("add"), "{e}");
    assert_eq!(
        t.queue.get(id).await.unwrap().tags.len(),
        cairn::MAX_TAGS - 1
    );
    t.queue
        .change_tags(change(tags(100, 102), tags(0, 1)))
        .await
        .unwrap();
    assert_eq!(t.queue.get(id).await.unwrap().tags.len(), cairn::MAX_TAGS);
    t.close().await;
}

#[tokio::test]
async fn peek_shows_the_next_jobs_in_claim_order_without_taking_them() {
    let t = TestQueue::new().await;
    t.queue.enqueue(Push::new("low")).await.unwrap();
    t.queue
        .enqueue(Push::new("high").priority(5))
        .await
        .unwrap();
    t.queue.enqueue(Push::new("mid").priority(1)).await.unwrap();
    let peeked: Vec<String> = t
        .queue
        .peek("default", 2)
        .await
        .unwrap()
        .into_iter()
        .map(|j| j.name.to_string())
        .collect();
    assert_eq!(peeked, ["high", "mid"]);
    assert_eq!(t.drain_names().await, ["high", "mid", "low"]);
    t.close().await;
}

#[tokio::test]
async fn tracked_jobs_are_listed_with_their_state_until_untracked() {
    let t = TestQueue::new().await;
    let a = t.push("a").await;
    let b = t.push("b").await;
    t.queue.track(a, true).await.unwrap();
    t.queue.track(b, true).await.unwrap();
    let claimed = t.take("w").await.unwrap();
    t.queue.finish(&claimed.lease, None).await.unwrap();
    t.queue.track(b, false).await.unwrap();
    let tracked = t
        .queue
        .list(JobFilter {
            tracked: true,
            ..JobFilter::default()
        })
        .await
        .unwrap();
    let seen: Vec<_> = tracked
        .jobs
        .iter()
        .map(|j| (j.id, j.state, j.tracked))
        .collect();
    assert_eq!(seen, [(a, JobState::Completed, true)]);
    assert!(
        t.queue
            .track(cairn::JobId(999), true)
            .await
            .unwrap_err()
            .is_not_found()
    );
    t.close().await;
}

#[tokio::test]
async fn workers_are_listed_with_what_they_hold_and_forgotten_when_silent() {
    let t = TestQueue::with(|o| {
        o.retention.worker_max_age = Some(Duration::from_secs(3600));
    })
    .await;
    for name in ["a", "b"] {
        t.queue
            .enqueue(Push::new(name).lease_timeout(Duration::from_secs(30)))
            .await
            .unwrap();
    }
    let first = t.take("alpha").await.unwrap();
    let second = t.take("alpha").await.unwrap();
    assert!(t.take("beta").await.is_none());
    let workers = t.queue.workers().await.unwrap();
    let ids: Vec<_> = workers.iter().map(|w| w.id.as_str()).collect();
    assert_eq!(ids, ["alpha", "beta"]);
    assert_eq!(workers[0].jobs, [first.job.id, second.job.id]);
    assert!(workers[0].stalled.is_empty() && workers[1].jobs.is_empty());
    // One lease is kept alive, the other runs out: that one is stalled until the queue retries it.
    t.advance(Duration::from_secs(20));
    t.queue.heartbeat(&first.lease, None).await.unwrap();
    t.clock.advance_quietly(Duration::from_secs(15));
    let alpha = t.queue.workers().await.unwrap().remove(0);
    assert_eq!(alpha.stalled, [second.job.id]);
    assert_eq!(alpha.last_seen, t.clock_now() - Duration::from_secs(15));
    // Beta says nothing for an hour: forgotten. Alpha heartbeats: remembered.
    t.advance(Duration::from_secs(3600));
    t.queue.finish(&first.lease, None).await.unwrap_err();
    t.take("alpha").await;
    let ids: Vec<_> = t
        .queue
        .workers()
        .await
        .unwrap()
        .into_iter()
        .map(|w| w.id.to_string())
        .collect();
    assert_eq!(ids, ["alpha"]);
    t.close().await;
}

#[tokio::test]
async fn a_queue_runs_at_most_its_concurrency_limit_across_workers() {
    let t = TestQueue::new().await;
    for i in 0..5 {
        t.push(&format!("job-{i}")).await;
    }
    t.queue.limit_queue("default", Some(2)).await.unwrap();
    let a = t.queue.dequeue(Dequeue::new("a").limit(10)).await.unwrap();
    assert_eq!(a.len(), 2);
    assert!(t.take("b").await.is_none());
    assert_eq!(t.queue.queue_stats().await.unwrap()[0].concurrency, Some(2));
    // A worker waiting on the full queue gets a job the moment one ends.
    let queue = t.queue.clone();
    let waiter = tokio::spawn(async move {
        queue
            .dequeue(Dequeue::new("b").limit(10).wait(Duration::from_secs(60)))
            .await
            .unwrap()
    });
    tokio::task::yield_now().await;
    t.queue.finish(&a[0].lease, None).await.unwrap();
    assert_eq!(waiter.await.unwrap().len(), 1);
    // Without a limit, the rest go at once.
    t.queue.limit_queue("default", None).await.unwrap();
    assert_eq!(
        t.queue
            .dequeue(Dequeue::new("c").limit(10))
            .await
            .unwrap()
            .len(),
        2
    );
    let err = t.queue.limit_queue("default", Some(0)).await.unwrap_err();
    assert_eq!(err.field(), Some("concurrency"));
    t.close().await;
}

#[tokio::test]
async fn a_rate_limited_queue_starts_at_most_its_rate_and_wakes_waiting_workers_when_it_allows() {
    let t = TestQueue::new().await;
    for i in 0..6 {
        t.push(&format!("job-{i}")).await;
    }
    let rate = cairn::RateLimit {
        jobs: 2,
        per: Duration::from_secs(10),
    };
    t.queue
        .rate_limit_queue("default", Some(rate))
        .await
        .unwrap();
    // Two start at once; then none until a token comes back, 5 s later.
    let first = t.queue.dequeue(Dequeue::new("a").limit(10)).await.unwrap();
    assert_eq!(first.len(), 2);
    assert!(t.take("b").await.is_none());
    let queue = t.queue.clone();
    let waiter = tokio::spawn(async move {
        queue
            .dequeue(
                Dequeue::new("waiting")
                    .limit(10)
                    .wait(Duration::from_secs(60)),
            )
            .await
            .unwrap()
    });
    // Parked first: it is served by the tick at which the bucket refills, not at its own arrival.
    t.until_parked("waiting").await;
    t.advance(Duration::from_secs(5));
    assert_eq!(waiter.await.unwrap().len(), 1);
    assert_eq!(
        t.queue.queue_stats().await.unwrap()[0].rate_limit,
        Some(rate)
    );
    // Finishing does not give a start back: the rate counts starts.
    for claimed in &first {
        t.queue.finish(&claimed.lease, None).await.unwrap();
    }
    assert!(t.take("c").await.is_none());
    t.queue.rate_limit_queue("default", None).await.unwrap();
    assert_eq!(
        t.queue
            .dequeue(Dequeue::new("c").limit(10))
            .await
            .unwrap()
            .len(),
        3
    );
    let err = t
        .queue
        .rate_limit_queue(
            "default",
            Some(cairn::RateLimit {
                jobs: 0,
                per: Duration::from_secs(1),
            }),
        )
        .await
        .unwrap_err();
    assert_eq!(err.field(), Some("rate.jobs"));
    t.close().await;
}

#[tokio::test]
async fn with_priority_aging_a_waiting_job_overtakes_fresher_higher_priority_ones() {
    let t = TestQueue::new().await;
    t.queue
        .age_queue("default", Some(Duration::from_secs(60)))
        .await
        .unwrap();
    t.push("low").await; // priority 0, waits ten minutes
    t.advance(Duration::from_secs(600));
    for (name, priority) in [("p9", 9), ("p11", 11), ("p10", 10)] {
        t.queue
            .enqueue(Push::new(name).priority(priority))
            .await
            .unwrap();
    }
    // Aged to 10 points, "low" ties with p10 and goes first as the longer ready; p11 still beats it.
    assert_eq!(t.drain_names().await, ["p11", "low", "p10", "p9"]);
    let stats = t.queue.queue_stats().await.unwrap();
    assert_eq!(stats[0].priority_aging, Some(Duration::from_secs(60)));
    t.close().await;
}

#[tokio::test]
async fn a_steady_stream_of_high_priority_jobs_does_not_starve_a_low_one_on_an_aging_queue() {
    let stream = async |aging: Option<Duration>| {
        let t = TestQueue::new().await;
        t.queue.age_queue("default", aging).await.unwrap();
        t.queue
            .enqueue(Push::new("low").priority(-100))
            .await
            .unwrap();
        // Every second a fresh urgent job arrives and one job is taken.
        for turn in 0..600 {
            t.queue
                .enqueue(Push::new("urgent").priority(100))
                .await
                .unwrap();
            let taken = t.take("w").await.unwrap();
            if taken.job.name.as_str() == "low" {
                t.close().await;
                return Some(turn);
            }
            t.queue.finish(&taken.lease, None).await.unwrap();
            t.advance(Duration::from_secs(1));
        }
        t.close().await;
        None
    };
    // Strict priority: "low" never runs while urgent jobs keep coming.
    assert_eq!(stream(None).await, None);
    // One point per second: after 200 s of waiting it has caught up with the 200-point gap.
    assert_eq!(stream(Some(Duration::from_secs(1))).await, Some(200));
}

#[tokio::test]
async fn aging_applies_to_jobs_already_queued_and_is_undone_by_turning_it_off() {
    let t = TestQueue::new().await;
    let old = t.push("old").await;
    t.advance(Duration::from_secs(3600));
    t.queue
        .enqueue(Push::new("urgent").priority(5))
        .await
        .unwrap();
    t.queue
        .age_queue("default", Some(Duration::from_secs(60)))
        .await
        .unwrap();
    let peeked: Vec<_> = t.queue.peek("default", 10).await.unwrap();
    assert_eq!(peeked[0].id, old, "an hour of waiting is worth 60 points");
    t.queue.age_queue("default", None).await.unwrap();
    let peeked: Vec<_> = t.queue.peek("default", 10).await.unwrap();
    assert_eq!(peeked[1].id, old, "strict priority again");
    assert_eq!(t.queue.queue_stats().await.unwrap()[0].priority_aging, None);
    // Out-of-range steps are refused, naming the field.
    for every in [Duration::ZERO, Duration::from_secs(2 * 24 * 3600)] {
        let e = t.queue.age_queue("default", Some(every)).await.unwrap_err();
        assert_eq!(e.field(), Some("every"), "{e}");
    }
    t.close().await;
}

#[tokio::test]
async fn jobs_moved_into_an_aging_queue_age_with_it() {
    let t = TestQueue::new().await;
    t.queue
        .age_queue("aged", Some(Duration::from_secs(1)))
        .await
        .unwrap();
    // Unfail into the aging queue.
    let failed = t.queue.enqueue(Push::new("failed")).await.unwrap().id;
    let claimed = t.take("w").await.unwrap();
    t.queue.fail(&claimed.lease, "boom", "boom").await.unwrap();
    let moved = t
        .queue
        .unfail(Unfail {
            group: "boom".into(),
            queue: Some("aged".into()),
            limit: 10,
        })
        .await
        .unwrap();
    assert_eq!(moved, 1);
    t.advance(Duration::from_secs(100));
    t.queue
        .enqueue(Push::new("fresh").queue("aged").priority(50))
        .await
        .unwrap();
    let next = t
        .queue
        .dequeue(Dequeue::new("w").queue("aged"))
        .await
        .unwrap();
    assert_eq!(
        next[0].job.id, failed,
        "100 s at a point a second beats 50 points"
    );
    t.close().await;
}

#[tokio::test]
async fn a_claim_of_one_priority_finds_it_on_strict_and_aging_queues() {
    let t = TestQueue::new().await;
    t.queue
        .age_queue("aged", Some(Duration::from_secs(1)))
        .await
        .unwrap();
    for queue in ["default", "aged"] {
        for priority in [3, 1, 2, 1] {
            t.queue
                .enqueue(
                    Push::new(format!("p{priority}"))
                        .queue(queue)
                        .priority(priority),
                )
                .await
                .unwrap();
        }
        let got = t
            .queue
            .dequeue(Dequeue::new("w").queue(queue).priority(1).limit(10))
            .await
            .unwrap();
        let names: Vec<_> = got.iter().map(|c| c.job.name.as_str()).collect();
        assert_eq!(names, ["p1", "p1"], "{queue}");
    }
    t.close().await;
}

/// Takes one job from `queue` as `worker`, not waiting.
async fn take_from(t: &TestQueue, queue: &str, worker: &str) -> Option<cairn::ClaimedJob> {
    t.queue
        .dequeue(Dequeue::new(worker).queue(queue))
        .await
        .unwrap()
        .pop()
}

#[tokio::test]
async fn a_queued_job_moved_to_another_queue_runs_there_as_it_was() {
    let t = TestQueue::new().await;
    let id = t
        .queue
        .enqueue(
            Push::new("report")
                .queue("slow")
                .priority(7)
                .data(json!({"b": 1, "a": 2})),
        )
        .await
        .unwrap()
        .id;
    t.queue.run(cairn::MoveJob::new(id, "fast")).await.unwrap();
    assert!(take_from(&t, "slow", "w").await.is_none());
    let claimed = take_from(&t, "fast", "w").await.unwrap();
    assert_eq!(claimed.job.id, id);
    assert_eq!(claimed.job.queue.as_str(), "fast");
    assert_eq!(claimed.job.priority, 7);
    assert_eq!(claimed.job.data.to_string(), r#"{"b":1,"a":2}"#);
    t.close().await;
}

#[tokio::test]
async fn a_worker_waiting_on_the_new_queue_gets_a_moved_job_at_once() {
    let t = TestQueue::new().await;
    let id = t.push("x").await;
    let queue = t.queue.clone();
    let waiter = tokio::spawn(async move {
        queue
            .dequeue(
                Dequeue::new("w")
                    .queue("other")
                    .wait(Duration::from_secs(10)),
            )
            .await
            .unwrap()
    });
    // The dequeue reaches the writer first, and is parked by the time this write returns: the move must wake it.
    tokio::task::yield_now().await;
    t.queue.pause_queue("unrelated", false).await.unwrap();
    t.queue.run(cairn::MoveJob::new(id, "other")).await.unwrap();
    let got = waiter.await.unwrap();
    assert_eq!(got[0].job.id, id);
    t.close().await;
}

#[tokio::test]
async fn scheduled_and_waiting_jobs_move_and_keep_their_time_and_what_they_wait_for() {
    let t = TestQueue::new().await;
    let later = t.queue.now() + jiff::SignedDuration::from_secs(3600);
    let scheduled = t
        .queue
        .enqueue(Push::new("later").run_at(later))
        .await
        .unwrap()
        .id;
    let first = t.push("first").await;
    let waiting = t
        .queue
        .enqueue(Push::new("after").depends_on(first))
        .await
        .unwrap()
        .id;
    for id in [scheduled, waiting] {
        t.queue
            .run(cairn::MoveJob::new(id, "elsewhere"))
            .await
            .unwrap();
    }
    let moved = t.queue.get(scheduled).await.unwrap();
    assert_eq!(
        (moved.state, moved.queue.as_str()),
        (JobState::Scheduled, "elsewhere")
    );
    assert_eq!(moved.run_at, later);
    let moved = t.queue.get(waiting).await.unwrap();
    assert_eq!(
        (moved.state, moved.queue.as_str()),
        (JobState::Waiting, "elsewhere")
    );
    // Its dependency ending releases it in its new queue.
    let claimed = t.take("w").await.unwrap();
    assert_eq!(claimed.job.id, first);
    t.queue.finish(&claimed.lease, None).await.unwrap();
    assert_eq!(
        take_from(&t, "elsewhere", "w").await.unwrap().job.id,
        waiting
    );
    t.close().await;
}

#[tokio::test]
async fn a_running_or_unknown_job_is_not_moved_and_a_bad_queue_is_named() {
    let t = TestQueue::new().await;
    let running = t.push("run").await;
    let claimed = t.take("w").await.unwrap();
    assert_eq!(claimed.job.id, running);
    let e = t
        .queue
        .run(cairn::MoveJob::new(running, "other"))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidState, "{e}");
    assert!(e.to_string().contains("is running"), "{e}");
    let e = t
        .queue
        .run(cairn::MoveJob::new(cairn::JobId(999), "other"))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
    let queued = t.push("q").await;
    let e = t
        .queue
        .run(cairn::MoveJob::new(queued, "bad\nname"))
        .await
        .unwrap_err();
    assert_eq!(
        (e.kind(), e.field()),
        (ErrorKind::InvalidInput, Some("queue")),
        "{e}"
    );
    // Nothing moved; moving to its own queue is no change.
    t.queue
        .run(cairn::MoveJob::new(queued, "default"))
        .await
        .unwrap();
    assert_eq!(t.queue.get(queued).await.unwrap().queue.as_str(), "default");
    t.close().await;
}

#[tokio::test]
async fn a_failed_or_completed_job_moved_to_another_queue_runs_again_there() {
    let t = TestQueue::new().await;
    let failed = t
        .queue
        .enqueue(Push::new("report").retry(RetryPolicy::attempts(1)))
        .await
        .unwrap()
        .id;
    let claimed = t.take("w").await.unwrap();
    t.queue
        .fail(&claimed.lease, "bad", "no data")
        .await
        .unwrap();
    let done = t.push("done").await;
    let claimed = t.take("w").await.unwrap();
    assert_eq!(claimed.job.id, done);
    t.queue.finish(&claimed.lease, None).await.unwrap();
    for id in [failed, done] {
        t.queue.run(cairn::MoveJob::new(id, "fixed")).await.unwrap();
        let job = t.queue.get(id).await.unwrap();
        assert_eq!(
            (job.state, job.queue.as_str(), job.attempt),
            (JobState::Queued, "fixed", 0)
        );
    }
    // Nothing of them is left in the old queue; both run in the new one, with a fresh count of attempts.
    assert!(t.take("w").await.is_none());
    let again = take_from(&t, "fixed", "w").await.unwrap();
    assert_eq!((again.job.id, again.job.attempt), (failed, 1));
    assert_eq!(take_from(&t, "fixed", "w").await.unwrap().job.id, done);
    t.close().await;
}

#[tokio::test]
async fn a_job_moved_to_a_queue_with_priority_aging_takes_its_place_in_that_queues_order() {
    let t = TestQueue::new().await;
    t.queue
        .age_queue("aged", Some(Duration::from_secs(1)))
        .await
        .unwrap();
    // In the aged queue, a job ready an hour goes before a fresh one of the same priority; the moved job takes
    // the aged queue's order, rather than keeping its old queue's strict key (which would put it first).
    let waiting_long = t
        .queue
        .enqueue(Push::new("waiting").queue("aged"))
        .await
        .unwrap()
        .id;
    t.advance(Duration::from_secs(3600));
    let fresh = t.push("fresh").await;
    t.queue
        .run(cairn::MoveJob::new(fresh, "aged"))
        .await
        .unwrap();
    assert_eq!(
        take_from(&t, "aged", "w").await.unwrap().job.id,
        waiting_long
    );
    assert_eq!(take_from(&t, "aged", "w").await.unwrap().job.id, fresh);
    t.close().await;
}
