//! Concurrency keys: a limit per key that claims pass over without blocking the jobs behind it, keys that take
//! turns, and a freed slot that wakes a waiting worker.

use cairn::Jobs;
use std::collections::HashMap;
use std::time::Duration;

use cairn::{Dequeue, ErrorKind, JobState, Push};

use super::harness::TestQueue;

/// A job named `name` with concurrency key `key`.
fn keyed(name: &str, key: &str) -> Push {
    Push::new(name).concurrency_key(key)
}

/// The concurrency keys of claimed jobs, in order.
fn keys(claimed: &[cairn::ClaimedJob]) -> Vec<String> {
    claimed
        .iter()
        .map(|c| {
            c.job
                .concurrency_key
                .as_ref()
                .map_or_else(|| "-".to_owned(), |k| k.to_string())
        })
        .collect()
}

#[tokio::test]
async fn a_key_at_its_limit_is_passed_over_and_its_next_job_wakes_a_waiting_worker() {
    let t = TestQueue::new().await;
    t.queue.limit_keys("default", Some(2)).await.unwrap();
    let mut pushes: Vec<Push> = (0..5).map(|i| keyed(&format!("a{i}"), "a")).collect();
    pushes.extend((0..2).map(|i| keyed(&format!("b{i}"), "b")));
    t.push_batch(pushes).await;
    let first = t.queue.dequeue(Dequeue::new("w1").limit(10)).await.unwrap();
    let mut got = keys(&first);
    got.sort();
    assert_eq!(
        got,
        ["a", "a", "b", "b"],
        "two of each key, b's not blocked"
    );
    assert!(t.take("w2").await.is_none(), "both keys are at their limit");
    // The queue shows its keys: both at their limit, and a's three ready jobs waiting on it.
    let stats = t.queue.queue_stats().await.unwrap();
    assert_eq!(stats[0].key_concurrency, Some(2));
    assert_eq!(stats[0].waiting_on_keys, 3);
    let top: Vec<(&str, u64, u64, bool)> = stats[0]
        .top_keys
        .iter()
        .map(|k| (k.key.as_str(), k.running, k.queued, k.is_full()))
        .collect();
    assert_eq!(top, [("a", 2, 3, true), ("b", 2, 0, true)]);
    // A worker waiting on the full key gets its next job the moment one of its jobs ends.
    let queue = t.queue.clone();
    let waiter = tokio::spawn(async move {
        queue
            .dequeue(Dequeue::new("w3").limit(10).wait(Duration::from_secs(60)))
            .await
            .unwrap()
    });
    tokio::task::yield_now().await;
    let a = first.iter().find(|c| c.job.name.as_str().starts_with('a'));
    t.queue.finish(&a.unwrap().lease, None).await.unwrap();
    let woken = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("woken by the freed slot")
        .unwrap();
    assert_eq!(keys(&woken), ["a"]);
    // A failed attempt frees its slot too.
    t.queue
        .fail(&woken[0].lease, "broken", "broken")
        .await
        .unwrap();
    assert_eq!(
        keys(&t.take("w4").await.into_iter().collect::<Vec<_>>()),
        ["a"]
    );
    // Without the limit, the rest of a's jobs go at once.
    t.queue.limit_keys("default", None).await.unwrap();
    let rest = t.queue.dequeue(Dequeue::new("w5").limit(10)).await.unwrap();
    assert_eq!(keys(&rest), ["a"]);
    let stats = t.queue.queue_stats().await.unwrap();
    assert_eq!(stats[0].running, 5);
    t.close().await;
}

#[tokio::test]
async fn a_job_may_carry_its_own_limit_for_its_key() {
    let t = TestQueue::new().await;
    t.queue.limit_keys("default", Some(3)).await.unwrap();
    let pushes = (0..4)
        .map(|i| keyed(&format!("x{i}"), "solo").concurrency_limit(1))
        .collect();
    t.push_batch(pushes).await;
    let got = t.queue.dequeue(Dequeue::new("w").limit(10)).await.unwrap();
    assert_eq!(got.len(), 1, "the jobs' own limit, not the queue's");
    assert_eq!(got[0].job.concurrency_limit, Some(1));
    // Without a queue limit, a job's own limit still holds.
    let other = TestQueue::new().await;
    other
        .push_batch(
            (0..3)
                .map(|i| keyed(&format!("y{i}"), "k").concurrency_limit(2))
                .collect(),
        )
        .await;
    let got = other
        .queue
        .dequeue(Dequeue::new("w").limit(10))
        .await
        .unwrap();
    assert_eq!(got.len(), 2);
    t.close().await;
    other.close().await;
}

#[tokio::test]
async fn a_key_with_ten_thousand_ready_jobs_delays_another_keys_job_by_at_most_one_claim() {
    let t = TestQueue::new().await;
    for chunk in 0..10 {
        let pushes = (0..1000)
            .map(|i| keyed(&format!("bulk-{chunk}-{i}"), "a"))
            .collect();
        t.push_batch(pushes).await;
    }
    t.push_batch(vec![keyed("single", "b")]).await;
    let mut names = Vec::new();
    for _ in 0..2 {
        let claimed = t.take("w").await.unwrap();
        names.push(claimed.job.name.to_string());
    }
    assert!(names.contains(&"single".to_owned()), "{names:?}");
    t.close().await;
}

#[tokio::test]
async fn keys_take_turns_and_the_jobs_without_a_key_take_one_turn_among_them() {
    let t = TestQueue::new().await;
    let mut pushes = Vec::new();
    for key in ["c", "a", "b"] {
        pushes.extend((0..3).map(|i| keyed(&format!("{key}{i}"), key)));
    }
    pushes.extend((0..3).map(|i| Push::new(format!("plain{i}"))));
    t.push_batch(pushes).await;
    let mut order = Vec::new();
    while let Some(claimed) = t.take("w").await {
        order.push(claimed);
    }
    let order = keys(&order);
    assert_eq!(order.len(), 12);
    // Every window of four consecutive claims holds each of the four turns once.
    for window in order.chunks(4) {
        let mut seen = window.to_vec();
        seen.sort();
        assert_eq!(seen, ["-", "a", "b", "c"], "{order:?}");
    }
    t.close().await;
}

#[tokio::test]
async fn priority_comes_before_turns_and_a_key_keeps_its_own_order() {
    let t = TestQueue::new().await;
    t.push_batch(vec![
        keyed("a-low-1", "a"),
        keyed("a-low-2", "a"),
        keyed("b-low", "b"),
        keyed("b-high", "b").priority(5),
        Push::new("plain-high").priority(5),
        Push::new("plain-higher").priority(9),
    ])
    .await;
    let mut names = Vec::new();
    while let Some(claimed) = t.take("w").await {
        names.push(claimed.job.name.to_string());
    }
    assert_eq!(names[0], "plain-higher");
    let mut high = names[1..3].to_vec();
    high.sort();
    assert_eq!(high, ["b-high", "plain-high"]);
    let low = &names[3..];
    let position = |n: &str| low.iter().position(|x| x == n).unwrap();
    assert!(position("a-low-1") < position("a-low-2"), "{names:?}");
    t.close().await;
}

#[tokio::test]
async fn a_claim_for_some_names_and_one_priority_keeps_to_them_on_a_keyed_queue() {
    let t = TestQueue::new().await;
    t.queue.limit_keys("default", Some(1)).await.unwrap();
    t.push_batch(vec![
        keyed("mail.send", "a"),
        keyed("mail.send", "a"),
        keyed("pdf.render", "b"),
        keyed("mail.send", "c").priority(3),
        Push::new("mail.digest"),
    ])
    .await;
    let mail = t
        .queue
        .dequeue(Dequeue::new("w").name("mail.*").limit(10))
        .await
        .unwrap();
    let mut names: Vec<String> = mail.iter().map(|c| c.job.name.to_string()).collect();
    names.sort();
    assert_eq!(names, ["mail.digest", "mail.send", "mail.send"]);
    assert_eq!(keys(&mail).iter().filter(|k| *k == "a").count(), 1);
    let pdf = t
        .queue
        .dequeue(Dequeue::new("w").priority(0).name("pdf.*"))
        .await
        .unwrap();
    assert_eq!(keys(&pdf), ["b"]);
    t.close().await;
}

/// A pattern that matches one name (as a worker's handlers ask, GLOB's characters escaped) is compared as that name.
#[tokio::test]
async fn a_claim_for_exact_names_on_a_keyed_queue_takes_those_names_only() {
    let t = TestQueue::new().await;
    t.push_batch(vec![
        keyed("odd*name", "a"),
        keyed("oddXname", "b"),
        keyed("mail.send", "c"),
        keyed("mail.digest", "d"),
        Push::new("mail.send"),
    ])
    .await;
    let got = t
        .queue
        .dequeue(
            Dequeue::new("w")
                .name("odd[*]name")
                .name("mail.send")
                .limit(10),
        )
        .await
        .unwrap();
    let mut names: Vec<String> = got.iter().map(|c| c.job.name.to_string()).collect();
    names.sort();
    assert_eq!(names, ["mail.send", "mail.send", "odd*name"]);
    let mut keys = keys(&got);
    keys.sort();
    assert_eq!(keys, ["-", "a", "c"]);
    t.close().await;
}

#[tokio::test]
async fn a_weight_budget_stops_a_claim_on_a_keyed_queue() {
    let t = TestQueue::new().await;
    t.push_batch(vec![
        keyed("light", "a").weight(2),
        keyed("heavy", "b").weight(5),
        keyed("light-2", "c").weight(1),
    ])
    .await;
    let got = t
        .queue
        .dequeue(Dequeue::new("w").limit(10).max_weight(4))
        .await
        .unwrap();
    assert_eq!(keys(&got), ["a"], "stops at the job that does not fit");
    t.close().await;
}

#[tokio::test]
async fn a_job_shows_its_key_and_bad_keys_and_limits_are_named() {
    let t = TestQueue::new().await;
    let id = t
        .queue
        .enqueue(keyed("x", "customer:42").concurrency_limit(3))
        .await
        .unwrap()
        .id;
    let job = t.queue.get(id).await.unwrap();
    assert_eq!(job.concurrency_key.unwrap().as_str(), "customer:42");
    assert_eq!(job.concurrency_limit, Some(3));
    assert_eq!(job.state, JobState::Queued);
    let cases = [
        (Push::new("x").concurrency_key(""), "concurrency.key"),
        (
            Push::new("x").concurrency_key("k".repeat(256)),
            "concurrency.key",
        ),
        (
            Push::new("x").concurrency_key("k").concurrency_limit(0),
            "concurrency.limit",
        ),
        (Push::new("x").concurrency_limit(2), "concurrency.key"),
    ];
    for (push, field) in cases {
        let err = t.queue.enqueue(push).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        assert_eq!(err.field(), Some(field), "{err}");
    }
    let err = t.queue.limit_keys("default", Some(0)).await.unwrap_err();
    assert_eq!(err.field(), Some("limit"));
    t.close().await;
}

#[tokio::test]
async fn a_keyed_job_moved_to_another_queue_is_claimed_there_under_its_limit() {
    let t = TestQueue::new().await;
    t.queue.limit_keys("other", Some(1)).await.unwrap();
    let ids = t.push_batch(vec![keyed("x", "k"), keyed("y", "k")]).await;
    for id in &ids {
        t.queue
            .run(cairn::MoveJob::new(*id, "other"))
            .await
            .unwrap();
    }
    let got = t
        .queue
        .dequeue(Dequeue::new("w").queue("other").limit(10))
        .await
        .unwrap();
    assert_eq!(keys(&got), ["k"]);
    let mut by_state: HashMap<JobState, usize> = HashMap::new();
    for id in ids {
        *by_state
            .entry(t.queue.get(id).await.unwrap().state)
            .or_default() += 1;
    }
    assert_eq!(by_state[&JobState::Queued], 1);
    t.close().await;
}

#[tokio::test]
async fn a_weighted_key_takes_as_many_jobs_per_turn_as_its_weight() {
    let t = TestQueue::new().await;
    t.queue.weigh_key("default", "gold", Some(3)).await.unwrap();
    let mut pushes: Vec<Push> = (0..6).map(|i| keyed(&format!("g{i}"), "gold")).collect();
    pushes.extend((0..6).map(|i| keyed(&format!("s{i}"), "silver")));
    t.push_batch(pushes).await;
    let mut order = Vec::new();
    for _ in 0..8 {
        order.extend(keys(&t.take("w").await.into_iter().collect::<Vec<_>>()));
    }
    // Three of gold's for every one of silver's, one claim at a time.
    let gold = order.iter().filter(|k| *k == "gold").count();
    assert_eq!(gold, 6, "{order:?}");
    // And within one claim of many.
    let t2 = TestQueue::new().await;
    t2.queue
        .weigh_key("default", "gold", Some(3))
        .await
        .unwrap();
    let mut pushes: Vec<Push> = (0..6).map(|i| keyed(&format!("g{i}"), "gold")).collect();
    pushes.extend((0..6).map(|i| keyed(&format!("s{i}"), "silver")));
    t2.push_batch(pushes).await;
    let got = t2.queue.dequeue(Dequeue::new("w").limit(4)).await.unwrap();
    let mut got = keys(&got);
    got.sort();
    assert_eq!(got, ["gold", "gold", "gold", "silver"]);
    let stats = t2.queue.queue_stats().await.unwrap();
    let gold = stats[0].top_keys.iter().find(|k| k.key == "gold").unwrap();
    assert_eq!(gold.weight, 3);
    // Back to one each.
    t2.queue.weigh_key("default", "gold", None).await.unwrap();
    let got = t2.queue.dequeue(Dequeue::new("w").limit(2)).await.unwrap();
    let mut got = keys(&got);
    got.sort();
    assert_eq!(got, ["gold", "silver"]);
    for (weight, field) in [(Some(0), "weight"), (Some(1001), "weight")] {
        let err = t
            .queue
            .weigh_key("default", "gold", weight)
            .await
            .unwrap_err();
        assert_eq!(err.field(), Some(field));
    }
    let err = t.queue.weigh_key("default", "", Some(2)).await.unwrap_err();
    assert_eq!(err.field(), Some("key"));
    t.close().await;
    t2.close().await;
}

#[tokio::test]
async fn a_keyed_job_going_on_to_another_queue_is_claimed_there_under_its_limit() {
    let t = TestQueue::new().await;
    t.queue.limit_keys("next", Some(1)).await.unwrap();
    t.push_batch(vec![keyed("step", "k"), keyed("step", "k")])
        .await;
    // Both first steps run (the default queue has no limit), and both go on to `next`.
    let steps = t.queue.dequeue(Dequeue::new("w").limit(2)).await.unwrap();
    assert_eq!(steps.len(), 2);
    for step in &steps {
        t.queue
            .finish_with(cairn::Finish {
                next: Some(cairn::Continue {
                    queue: "fresh".into(),
                    delay: None,
                    depends_on: Vec::new(),
                }),
                ..cairn::Finish::new(&step.lease)
            })
            .await
            .unwrap();
    }
    // `fresh` never held a keyed job before: its claims find them, by name too, under the key's turn.
    let got = t
        .queue
        .dequeue(Dequeue::new("w").queue("fresh").name("step").limit(10))
        .await
        .unwrap();
    assert_eq!(keys(&got), ["k", "k"]);
    t.close().await;
}

#[tokio::test]
async fn a_claims_weight_budget_does_not_cost_the_key_after_it_its_turn() {
    let t = TestQueue::new().await;
    let mut pushes: Vec<Push> = (0..4)
        .map(|i| keyed(&format!("a{i}"), "a").weight(3))
        .collect();
    pushes.extend((0..4).map(|i| keyed(&format!("b{i}"), "b").weight(2)));
    t.push_batch(pushes).await;
    let mut order = Vec::new();
    for _ in 0..4 {
        // Each claim picks a's job then b's, and the budget of 4 cuts b's: b's turn is still to come.
        let got = t
            .queue
            .dequeue(Dequeue::new("w").limit(10).max_weight(4))
            .await
            .unwrap();
        assert_eq!(got.len(), 1);
        order.extend(keys(&got));
        t.queue.finish(&got[0].lease, None).await.unwrap();
    }
    assert_eq!(order, ["a", "b", "a", "b"]);
    t.close().await;
}

#[tokio::test]
async fn keys_and_priority_aging_do_not_go_together_and_each_says_why() {
    let t = TestQueue::new().await;
    t.queue
        .age_queue("aged", Some(Duration::from_secs(60)))
        .await
        .unwrap();
    let err = t
        .queue
        .enqueue(keyed("x", "k").queue("aged"))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidState);
    assert!(err.to_string().contains("priority aging"), "{err}");
    let err = t.queue.limit_keys("aged", Some(2)).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidState);
    t.push_batch(vec![keyed("y", "k")]).await;
    let err = t
        .queue
        .age_queue("default", Some(Duration::from_secs(60)))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidState);
    assert!(err.to_string().contains("concurrency keys"), "{err}");
    t.close().await;
}

#[tokio::test]
async fn a_claim_of_one_priority_keeps_to_that_level_on_a_keyed_queue() {
    let t = TestQueue::new().await;
    t.queue.limit_keys("default", Some(1)).await.unwrap();
    let mut pushes = vec![
        keyed("high-1", "a").priority(5),
        keyed("high-2", "a").priority(5),
    ];
    pushes.extend((0..50).map(|i| keyed(&format!("low{i}"), "b")));
    pushes.push(Push::new("plain-low"));
    t.push_batch(pushes).await;
    let high = t
        .queue
        .dequeue(Dequeue::new("w").priority(5).limit(10))
        .await
        .unwrap();
    let names: Vec<String> = high.iter().map(|c| c.job.name.to_string()).collect();
    assert_eq!(
        names,
        ["high-1"],
        "a is at its limit; nothing of another priority"
    );
    let none = t
        .queue
        .dequeue(Dequeue::new("w").priority(5).limit(10))
        .await
        .unwrap();
    assert!(none.is_empty());
    t.close().await;
}
