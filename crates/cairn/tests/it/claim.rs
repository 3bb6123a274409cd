//! Dequeue: order, filters, limits, weights, several queues, blocking waits.

use cairn::Jobs;
use std::time::Duration;

use cairn::{Dequeue, JobFilter, JobName, NamePattern, Push, QueueOrder};

use super::harness::TestQueue;

#[tokio::test]
async fn claim_prefers_higher_priority_then_earlier_run_at_then_lower_id() {
    let t = TestQueue::new().await;
    let now = t.queue.now();
    t.queue.enqueue(Push::new("low").priority(0)).await.unwrap();
    t.queue
        .enqueue(Push::new("high-late").priority(10).run_at(now))
        .await
        .unwrap();
    t.queue
        .enqueue(
            Push::new("high-early")
                .priority(10)
                .run_at(now - jiff::SignedDuration::from_secs(5)),
        )
        .await
        .unwrap();
    t.queue
        .enqueue(Push::new("high-late-2").priority(10).run_at(now))
        .await
        .unwrap();
    t.queue
        .enqueue(Push::new("negative").priority(-5))
        .await
        .unwrap();
    assert_eq!(
        t.drain_names().await,
        ["high-early", "high-late", "high-late-2", "low", "negative"]
    );
    t.close().await;
}

/// The names of the ready jobs that `pattern` matches, sorted; the jobs are given back.
async fn names_matching(t: &TestQueue, pattern: &str) -> Vec<String> {
    let got = t
        .queue
        .dequeue(Dequeue::new("w").name(pattern).limit(10))
        .await
        .unwrap();
    for c in &got {
        t.queue.release(&c.lease).await.unwrap();
    }
    let mut names: Vec<String> = got.into_iter().map(|c| c.job.name.to_string()).collect();
    names.sort();
    names
}

#[tokio::test]
async fn name_patterns_match_as_sqlite_glob() {
    let t = TestQueue::new().await;
    for name in ["email.send", "email.bounce", "sms.send", "Email.x", "email"] {
        t.push(name).await;
    }
    assert_eq!(
        names_matching(&t, "email.*").await,
        ["email.bounce", "email.send"]
    );
    assert_eq!(
        names_matching(&t, "*.send").await,
        ["email.send", "sms.send"]
    );
    assert_eq!(names_matching(&t, "[Ee]mail.?").await, ["Email.x"]);
    assert_eq!(names_matching(&t, "[^e]*").await, ["Email.x", "sms.send"]);
    assert_eq!(names_matching(&t, "email").await, ["email"]);
    let err = t
        .queue
        .dequeue(Dequeue::new("w").name("email.["))
        .await
        .unwrap_err();
    assert_eq!(err.field(), Some("name_pattern"));
    t.close().await;
}

#[tokio::test]
async fn names_may_hold_glob_characters_and_an_exact_pattern_matches_only_them() {
    let t = TestQueue::new().await;
    // Bedrock's worker manager carries parameters in the name.
    let names = ["env/Report?id=[7]*", "env/ReportXid=7x", "env/Report?id=7"];
    for name in names {
        t.push(name).await;
    }
    // As a pattern, the name's own `?` and `*` are wildcards ...
    assert_eq!(
        names_matching(&t, "env/Report?id=*").await,
        ["env/Report?id=7", "env/Report?id=[7]*", "env/ReportXid=7x"]
    );
    // ... and escaped, each name matches itself alone.
    for name in names {
        let exact = NamePattern::exact(&JobName::parse(name).unwrap());
        assert_eq!(names_matching(&t, exact.as_str()).await, [name]);
    }
    let listed = t
        .queue
        .list(JobFilter {
            name: Some(NamePattern::exact(&JobName::parse(names[0]).unwrap()).to_string()),
            ..JobFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(listed.jobs.len(), 1);
    assert_eq!(listed.jobs[0].name.as_str(), names[0]);
    t.close().await;
}

#[tokio::test]
async fn several_patterns_match_any() {
    let t = TestQueue::new().await;
    for name in ["a.1", "b.1", "c.1"] {
        t.push(name).await;
    }
    let got = t
        .queue
        .dequeue(Dequeue::new("w").name("a.*").name("c.*").limit(10))
        .await
        .unwrap();
    let names: Vec<_> = got.iter().map(|c| c.job.name.as_str()).collect();
    assert_eq!(names, ["a.1", "c.1"]);
    t.close().await;
}

#[tokio::test]
async fn a_claim_of_several_names_takes_their_jobs_in_claim_order_each_once() {
    let t = TestQueue::new().await;
    // Priorities interleave the names, so the order comes from merging each name's jobs.
    for (name, priority) in [
        ("a.1", 0),
        ("b.1", 5),
        ("a.2", 5),
        ("c.1", 9),
        ("b.2", 0),
        ("a.1", 9),
        ("other", 20),
    ] {
        t.queue
            .enqueue(Push::new(name).priority(priority))
            .await
            .unwrap();
    }
    let taken = |got: &[cairn::ClaimedJob]| -> Vec<(String, i32)> {
        got.iter()
            .map(|c| (c.job.name.to_string(), c.job.priority))
            .collect()
    };
    // "a.1" is named twice, exactly and by the pattern; its jobs are still taken once each.
    let got = t
        .queue
        .dequeue(
            Dequeue::new("w")
                .name("a.1")
                .name("a.*")
                .name("b.2")
                .limit(10),
        )
        .await
        .unwrap();
    let expected = [("a.1", 9), ("a.2", 5), ("a.1", 0), ("b.2", 0)];
    assert_eq!(taken(&got), expected.map(|(n, p)| (n.to_owned(), p)));
    // One priority, among the names a GLOB without a literal prefix finds.
    let got = t
        .queue
        .dequeue(Dequeue::new("w").name("*.1").priority(5).limit(10))
        .await
        .unwrap();
    assert_eq!(taken(&got), [("b.1".to_owned(), 5)]);
    // With priority aging, the same claim.
    t.queue
        .age_queue("default", Some(Duration::from_secs(60)))
        .await
        .unwrap();
    let got = t
        .queue
        .dequeue(
            Dequeue::new("w")
                .name("c.*")
                .name("nothing.*")
                .priority(9)
                .limit(10),
        )
        .await
        .unwrap();
    assert_eq!(taken(&got), [("c.1".to_owned(), 9)]);
    let rest = t.drain_names().await;
    assert_eq!(rest, ["other"]);
    t.close().await;
}

#[tokio::test]
async fn dequeue_takes_up_to_the_limit_atomically() {
    let t = TestQueue::new().await;
    t.queue
        .enqueue_batch((0..10).map(|i| Push::new(format!("j{i}"))).collect())
        .await
        .unwrap();
    let (a, b) = tokio::join!(
        t.queue.dequeue(Dequeue::new("a").limit(7)),
        t.queue.dequeue(Dequeue::new("b").limit(7))
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(a.len() + b.len(), 10);
    let mut ids: Vec<_> = a.iter().chain(&b).map(|c| c.job.id).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 10, "no job handed to both workers");
    let err = t
        .queue
        .dequeue(Dequeue::new("w").limit(0))
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "limit: must be between 1 and 1000, got 0");
    t.close().await;
}

#[tokio::test]
async fn weight_budget_stops_at_the_first_job_that_does_not_fit() {
    let t = TestQueue::new().await;
    for (name, weight) in [("w2", 2), ("w3", 3), ("w1", 1)] {
        t.queue
            .enqueue(Push::new(name).weight(weight))
            .await
            .unwrap();
    }
    let got = t
        .queue
        .dequeue(Dequeue::new("w").limit(10).max_weight(4))
        .await
        .unwrap();
    assert_eq!(
        got.iter().map(|c| c.job.name.as_str()).collect::<Vec<_>>(),
        ["w2"]
    );
    // A job heavier than the whole budget still runs when it comes first.
    let got = t
        .queue
        .dequeue(Dequeue::new("w").limit(10).max_weight(2))
        .await
        .unwrap();
    assert_eq!(
        got.iter().map(|c| c.job.name.as_str()).collect::<Vec<_>>(),
        ["w3"]
    );
    t.close().await;
}

#[tokio::test]
async fn ordered_queues_drain_in_order_and_round_robin_alternates() {
    let t = TestQueue::new().await;
    for queue in ["a", "b"] {
        for i in 0..3 {
            t.queue
                .enqueue(Push::new(format!("{queue}{i}")).queue(queue))
                .await
                .unwrap();
        }
    }
    let ordered = t
        .queue
        .dequeue(Dequeue::new("w").queue("b").queue("a").limit(4))
        .await
        .unwrap();
    let names: Vec<_> = ordered.iter().map(|c| c.job.name.as_str()).collect();
    assert_eq!(names, ["b0", "b1", "b2", "a0"]);
    for c in &ordered {
        t.queue.release(&c.lease).await.unwrap();
    }
    let rr = t
        .queue
        .dequeue(
            Dequeue::new("w")
                .queue("a")
                .queue("b")
                .order(QueueOrder::RoundRobin)
                .limit(6),
        )
        .await
        .unwrap();
    let queues: Vec<_> = rr.iter().map(|c| c.job.queue.as_str()).collect();
    assert!(
        queues == ["a", "b", "a", "b", "a", "b"] || queues == ["b", "a", "b", "a", "b", "a"],
        "{queues:?}"
    );
    t.close().await;
}

#[tokio::test]
async fn blocked_dequeue_returns_when_a_job_is_enqueued() {
    let t = TestQueue::new().await;
    let queue = t.queue.clone();
    let waiter = tokio::spawn(async move {
        queue
            .dequeue(
                Dequeue::new("w")
                    .name("mail.*")
                    .wait(Duration::from_secs(30)),
            )
            .await
            .unwrap()
    });
    t.until_parked("w").await;
    t.push("other").await; // does not match: the waiter keeps waiting
    let id = t.push("mail.send").await;
    let got = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].job.id, id);
    t.close().await;
}

#[tokio::test]
async fn blocked_dequeue_returns_when_a_scheduled_job_comes_due() {
    let t = TestQueue::new().await;
    let id = t
        .queue
        .enqueue(Push::new("later").delay(Duration::from_secs(3600)))
        .await
        .unwrap()
        .id;
    let queue = t.queue.clone();
    let waiter = tokio::spawn(async move {
        queue
            .dequeue(Dequeue::new("w").wait(Duration::from_secs(30)))
            .await
    });
    t.until_parked("w").await;
    assert!(!waiter.is_finished());
    t.advance(Duration::from_secs(3600));
    let got = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(got[0].job.id, id);
    t.close().await;
}

#[tokio::test]
async fn blocked_dequeue_times_out_with_no_job() {
    let t = TestQueue::new().await;
    let got = t
        .queue
        .dequeue(Dequeue::new("w").wait(Duration::from_millis(50)))
        .await
        .unwrap();
    assert!(got.is_empty());
    t.close().await;
}

#[tokio::test]
async fn close_answers_waiting_dequeues_with_no_job() {
    let t = TestQueue::new().await;
    let queue = t.queue.clone();
    let waiter = tokio::spawn(async move {
        queue
            .dequeue(Dequeue::new("w").wait(Duration::from_secs(60)))
            .await
    });
    t.until_parked("w").await;
    t.close().await;
    let got = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(got.is_empty());
}

/// A dequeue whose caller stops waiting after the writer claimed and sent the job, but before reading it, gives
/// the job back: it is not held by nobody until its lease expires.
#[tokio::test]
async fn a_dequeue_dropped_after_its_reply_was_sent_gives_the_job_back() {
    let t = TestQueue::new().await;
    let mut gone = Box::pin(
        t.queue
            .dequeue(Dequeue::new("gone").wait(Duration::from_secs(60))),
    );
    // Poll once, so the request parks in the writer; then never poll again.
    tokio::select! {
        biased;
        _ = &mut gone => panic!("nothing was ready"),
        _ = std::future::ready(()) => {}
    }
    let id = t.push("job").await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while t.queue.get(id).await.unwrap().state != cairn::JobState::Running {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the parked dequeue was never served"
        );
        tokio::task::yield_now().await;
    }
    drop(gone); // the reply with the job in it is never read
    let claimed = t
        .queue
        .dequeue(Dequeue::new("w").wait(Duration::from_secs(10)))
        .await
        .unwrap()
        .pop()
        .expect("the job is given back to the queue");
    assert_eq!((claimed.job.id, claimed.job.attempt), (id, 1));
    t.close().await;
}

/// A queue named twice in one dequeue offers its jobs once.
#[tokio::test]
async fn a_queue_named_twice_hands_each_job_out_once() {
    let t = TestQueue::new().await;
    let id = t.push("job").await;
    for order in [QueueOrder::Ordered, QueueOrder::RoundRobin] {
        let got = t
            .queue
            .dequeue(
                Dequeue::new("w")
                    .queue("default")
                    .queue("default")
                    .order(order)
                    .limit(2),
            )
            .await
            .unwrap();
        assert_eq!(got.len(), 1, "{order:?}");
        assert_eq!((got[0].job.id, got[0].job.attempt), (id, 1));
        t.queue.release(&got[0].lease).await.unwrap();
    }
    t.close().await;
}

#[tokio::test]
async fn a_claim_may_take_only_one_priority() {
    let t = TestQueue::new().await;
    for priority in [0, 5, 0, 5] {
        t.queue
            .enqueue(Push::new("x").priority(priority))
            .await
            .unwrap();
    }
    let fives = t
        .queue
        .dequeue(Dequeue::new("w").priority(5).limit(10))
        .await
        .unwrap();
    assert_eq!(fives.len(), 2);
    assert!(fives.iter().all(|c| c.job.priority == 5));
    let none = t
        .queue
        .dequeue(Dequeue::new("w").priority(5).limit(10))
        .await
        .unwrap();
    assert!(none.is_empty(), "the priority-0 jobs stay");
    t.close().await;
}

#[tokio::test]
async fn weighted_round_robin_gives_each_queue_its_share_per_turn() {
    let t = TestQueue::new().await;
    for queue in ["busy", "quiet"] {
        for i in 0..20 {
            t.queue
                .enqueue(Push::new(format!("{queue}-{i}")).queue(queue))
                .await
                .unwrap();
        }
    }
    let request = Dequeue {
        queues: vec!["busy".into(), "quiet".into()],
        order: QueueOrder::RoundRobin,
        weights: vec![3, 1],
        limit: 8,
        ..Dequeue::new("w")
    };
    for _ in 0..2 {
        let got = t.queue.dequeue(request.clone()).await.unwrap();
        let busy = got
            .iter()
            .filter(|c| c.job.queue.as_str() == "busy")
            .count();
        assert_eq!(
            (busy, got.len() - busy),
            (6, 2),
            "three to one, whichever queue starts"
        );
    }
    // The weights must match the queues, and go with round-robin order.
    for (weights, order) in [
        (vec![3], QueueOrder::RoundRobin),
        (vec![0, 1], QueueOrder::RoundRobin),
        (vec![3, 1], QueueOrder::Ordered),
    ] {
        let err = t
            .queue
            .dequeue(Dequeue {
                weights,
                order,
                ..request.clone()
            })
            .await
            .unwrap_err();
        assert_eq!(err.field(), Some("weights"), "{err}");
    }
    t.close().await;
}

/// Many dequeues in flight at once (on PostgreSQL, those of one filter are leased by one statement): every ready job
/// goes to one of them at most, each gets no more than its limit and in claim order, every lease it gets is its
/// own, and no dequeue passes over a ready job that another left behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dequeues_in_flight_together_take_each_job_once_in_claim_order() {
    let t = TestQueue::new().await;
    let pushes = (0..100)
        .map(|i| Push::new(format!("job-{i}")).priority(i % 3))
        .collect();
    let ids = t.push_batch(pushes).await;
    // Claim order: highest priority first, then by id (one batch: one `run_at`).
    let mut order: Vec<(i64, cairn::JobId)> = (0..100).map(|i| (i as i64 % 3, ids[i])).collect();
    order.sort_by_key(|(priority, id)| (-priority, id.0));
    let order: Vec<cairn::JobId> = order.into_iter().map(|(_, id)| id).collect();
    let rank = |id: cairn::JobId| order.iter().position(|x| *x == id).unwrap();

    // 30 dequeues of any job (limits 1, 2 and 3: 60 jobs) and 10 of priority 0 only, all at once.
    let requests: Vec<(Dequeue, bool)> = (0..40u32)
        .map(|i| {
            let request = Dequeue::new(format!("w{i}")).limit(i % 3 + 1);
            if i < 30 {
                (request, false)
            } else {
                (request.priority(0), true)
            }
        })
        .collect();
    let dequeues = requests.iter().map(|(request, _)| {
        let queue = t.queue.clone();
        let request = request.clone();
        async move { queue.dequeue(request).await.unwrap() }
    });
    let results = crate::harness::futures_join_all(dequeues).await;

    let mut taken = std::collections::HashSet::new();
    let mut last_rank_of_any = 0;
    for ((request, only_priority_0), claimed) in requests.iter().zip(&results) {
        assert!(claimed.len() <= request.limit as usize);
        let ranks: Vec<usize> = claimed.iter().map(|c| rank(c.job.id)).collect();
        assert!(
            ranks.is_sorted(),
            "{} got jobs out of claim order: {ranks:?}",
            request.worker
        );
        for c in claimed {
            assert!(taken.insert(c.job.id), "{:?} was taken twice", c.job.id);
            assert_eq!(c.lease.worker.as_str(), request.worker);
            assert_eq!(
                c.job.worker.as_ref().map(|w| w.as_str()),
                Some(request.worker.as_str())
            );
            if *only_priority_0 {
                assert_eq!(c.job.priority, 0);
            } else {
                last_rank_of_any = last_rank_of_any.max(rank(c.job.id));
            }
        }
    }
    let any_count: usize = results[..30].iter().map(Vec::len).sum();
    assert_eq!(any_count, 60, "60 ready jobs of any kind for 60 slots");
    let priority_0: usize = results[30..].iter().map(Vec::len).sum();
    assert_eq!(
        priority_0,
        (10 / 3) * 6 + 1,
        "limits 1, 2, 3 ... over 10 dequeues"
    );
    // Nothing left ready was passed over by a dequeue of any job.
    for id in &ids {
        if !taken.contains(id) {
            assert!(rank(*id) > last_rank_of_any, "{id:?} was passed over");
        }
    }
    // Each lease is the one its job holds.
    for claimed in results.iter().flatten() {
        t.queue.finish(&claimed.lease, None).await.unwrap();
    }
    t.close().await;
}

/// Dequeues parked on an empty queue are served as jobs arrive: as many as there are jobs, each job once, each
/// waiter up to its limit, and the rest keep waiting for the next jobs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parked_dequeues_are_served_as_many_as_jobs_arrive() {
    let t = TestQueue::new().await;
    let waiters: Vec<_> = (0..12u32)
        .map(|i| {
            let queue = t.queue.clone();
            tokio::spawn(async move {
                queue
                    .dequeue(
                        Dequeue::new(format!("w{i}"))
                            .queue("q")
                            .limit(if i == 0 { 3 } else { 1 })
                            .wait(Duration::from_secs(30)),
                    )
                    .await
                    .unwrap()
            })
        })
        .collect();
    for i in 0..12 {
        t.until_parked(&format!("w{i}")).await;
    }

    let push_to_q = |n: usize, from: usize| {
        (from..from + n)
            .map(|i| Push::new(format!("j{i}")).queue("q"))
            .collect::<Vec<_>>()
    };
    t.queue.enqueue_batch(push_to_q(6, 0)).await.unwrap();
    // Six jobs for fourteen slots: six are filled, and no job is left ready.
    let ready_after = |t: &TestQueue| {
        let queue = t.queue.clone();
        async move {
            queue.settle().await.unwrap();
            queue.peek("q", 100).await.unwrap().len()
        }
    };
    assert_eq!(ready_after(&t).await, 0);
    // Ten more: enough for every waiter, whatever each took of the first six.
    t.queue.enqueue_batch(push_to_q(10, 6)).await.unwrap();

    let mut taken = std::collections::HashSet::new();
    for waiter in waiters {
        let claimed = tokio::time::timeout(Duration::from_secs(10), waiter)
            .await
            .expect("every waiter is served by the 16 jobs")
            .unwrap();
        assert!(!claimed.is_empty());
        for c in claimed {
            assert!(taken.insert(c.job.id), "{:?} was taken twice", c.job.id);
            t.queue.finish(&c.lease, None).await.unwrap();
        }
    }
    // 16 jobs for 14 slots (3 + 11); a waiter served with fewer jobs than its limit leaves its other slots.
    assert!((12..=14).contains(&taken.len()), "{}", taken.len());
    assert_eq!(ready_after(&t).await, 16 - taken.len());
    t.close().await;
}

/// Dequeues with weight budgets in flight at once (on PostgreSQL, shared out from one select): each stays within
/// its budget (or takes one job, however heavy), takes jobs in claim order, and no job goes to two.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weight_budgets_of_dequeues_in_flight_together_hold_each() {
    let t = TestQueue::new().await;
    let weights = [1, 2, 3, 5, 8];
    let pushes = (0..80)
        .map(|i| Push::new("job").weight(weights[i % weights.len()]))
        .collect();
    t.queue.enqueue_batch(pushes).await.unwrap();
    let dequeues = (0..20).map(|i| {
        let queue = t.queue.clone();
        async move {
            queue
                .dequeue(Dequeue::new(format!("w{i}")).limit(4).max_weight(6))
                .await
                .unwrap()
        }
    });
    let results = crate::harness::futures_join_all(dequeues).await;
    let mut taken = std::collections::HashSet::new();
    for claimed in &results {
        assert!(claimed.len() <= 4);
        let total: u32 = claimed.iter().map(|c| c.job.weight).sum();
        assert!(
            total <= 6 || claimed.len() == 1,
            "{} jobs of weight {total} against a budget of 6",
            claimed.len()
        );
        let ids: Vec<i64> = claimed.iter().map(|c| c.job.id.0).collect();
        assert!(ids.is_sorted(), "{ids:?}");
        for c in claimed {
            assert!(taken.insert(c.job.id), "{:?} was taken twice", c.job.id);
        }
    }
    assert!(taken.len() >= 20, "every dequeue takes at least one job");
    for claimed in results.iter().flatten() {
        t.queue.finish(&claimed.lease, None).await.unwrap();
    }
    t.close().await;
}

/// A dequeue names at most 1,000 queues; more is refused naming the field, before anything is parked.
#[tokio::test]
async fn a_dequeue_names_at_most_a_thousand_queues() {
    let t = TestQueue::new().await;
    t.queue
        .enqueue(cairn::Push::new("last").queue("q999"))
        .await
        .unwrap();
    let too_many = Dequeue {
        queues: (0..=cairn::MAX_DEQUEUE_QUEUES)
            .map(|i| format!("q{i}"))
            .collect(),
        ..Dequeue::new("w")
    };
    let err = t.queue.dequeue(too_many).await.unwrap_err();
    assert_eq!(err.kind(), cairn::ErrorKind::InvalidInput);
    assert_eq!(err.field(), Some("queues"));
    assert!(err.to_string().contains("at most 1000"), "{err}");

    let most = Dequeue {
        queues: (0..cairn::MAX_DEQUEUE_QUEUES)
            .map(|i| format!("q{i}"))
            .collect(),
        ..Dequeue::new("w")
    };
    let got = t.queue.dequeue(most).await.unwrap();
    assert_eq!(got.len(), 1, "the thousandth queue gave its job");
    t.close().await;
}

/// A dequeue carries at most 1,000 name patterns (each is a branch of the claim's statement on PostgreSQL); more is
/// refused naming the field, and a run of `*` alone is any name.
#[tokio::test]
async fn a_dequeue_names_at_most_a_thousand_patterns_and_stars_alone_match_any_name() {
    let t = TestQueue::new().await;
    t.push("email.send").await;
    let too_many = Dequeue {
        names: (0..=cairn::MAX_DEQUEUE_NAMES)
            .map(|i| format!("n{i}"))
            .collect(),
        ..Dequeue::new("w")
    };
    let err = t.queue.dequeue(too_many).await.unwrap_err();
    assert_eq!(err.kind(), cairn::ErrorKind::InvalidInput);
    assert_eq!(err.field(), Some("names"));
    assert!(err.to_string().contains("at most 1000"), "{err}");

    let most = Dequeue {
        names: (1..cairn::MAX_DEQUEUE_NAMES)
            .map(|i| format!("n{i}"))
            .chain(["email.*".to_owned()])
            .collect(),
        ..Dequeue::new("w")
    };
    let got = t.queue.dequeue(most).await.unwrap();
    assert_eq!(got.len(), 1, "the thousandth pattern matched");
    t.queue.release(&got[0].lease).await.unwrap();

    assert_eq!(names_matching(&t, "**").await, ["email.send"]);
    assert!(NamePattern::parse("***").unwrap().is_any());
    assert!(!NamePattern::parse("*a*").unwrap().is_any());
    t.close().await;
}
