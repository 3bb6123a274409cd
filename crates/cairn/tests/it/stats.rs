//! Statistics and the activity log, checked against values computed by hand on a manual clock.

use cairn::Jobs;
use std::time::Duration;

use cairn::{
    ActivityFilter, ActivityKind, ConfigKey, ConfigValue, Dequeue, HistogramBucket, Push,
    StatsPeriod, StatsQuery,
};

use super::harness::TestQueue;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn buckets(seconds: &[u64]) -> Vec<HistogramBucket> {
    seconds
        .iter()
        .map(|&s| HistogramBucket {
            from: secs(s),
            to: secs(s + 1),
            count: 1,
        })
        .collect()
}

/// Three `mail` jobs and a `report`, pushed at 00:00:00. One worker takes `a` at +10 s and finishes it at +12 s,
/// takes `b` at +12 s and retries it at +15 s, takes `c` at +15 s and fails it at +16 s, and asks again at +16 s.
async fn three_attempts() -> (TestQueue, [cairn::JobId; 3]) {
    let t = TestQueue::new().await;
    let ids = [
        t.push("mail").await,
        t.push("mail").await,
        t.push("mail").await,
    ];
    t.queue
        .enqueue(Push::new("report").queue("reports"))
        .await
        .unwrap();
    t.advance(secs(10));
    let a = t.take("w").await.unwrap();
    t.advance(secs(2));
    t.queue.finish(&a.lease, None).await.unwrap();
    let b = t.take("w").await.unwrap();
    t.advance(secs(3));
    t.queue.retry(&b.lease, "smtp timeout", None).await.unwrap();
    let c = t.take("w").await.unwrap();
    t.advance(secs(1));
    t.queue
        .fail(&c.lease, "bounced", "no such user")
        .await
        .unwrap();
    assert!(t.take("w").await.is_none());
    (t, ids)
}

#[tokio::test]
async fn wait_run_and_service_times_match_the_hand_computed_values() {
    let (t, _) = three_attempts().await;
    let stats = t
        .queue
        .stats(StatsQuery {
            period: StatsPeriod::Hour,
            queue: Some("default".into()),
            name: Some("mail".into()),
        })
        .await
        .unwrap();
    let totals = stats.totals;
    assert_eq!(
        (
            totals.added,
            totals.started,
            totals.finished,
            totals.retried,
            totals.failed
        ),
        (3, 3, 1, 1, 1)
    );
    // Waits 10, 12 and 15 s: mean 37/3 s, population deviation sqrt(38/9) s.
    assert_eq!(stats.wait.count, 3);
    let mean = stats.wait.mean.unwrap().as_secs_f64();
    assert!((mean - 37.0 / 3.0).abs() < 1e-9, "{mean}");
    let stddev = stats.wait.stddev.unwrap().as_secs_f64();
    assert!((stddev - (38.0f64 / 9.0).sqrt()).abs() < 1e-6, "{stddev}");
    assert_eq!(
        (stats.wait.min, stats.wait.max),
        (Some(secs(10)), Some(secs(15)))
    );
    assert_eq!(stats.wait.histogram, buckets(&[10, 12, 15]));
    // Runs 2, 3 and 1 s, each ended by the worker.
    assert_eq!(stats.run.count, 3);
    assert_eq!(stats.run.mean, Some(secs(2)));
    assert_eq!(
        (stats.run.min, stats.run.max),
        (Some(secs(1)), Some(secs(3)))
    );
    assert_eq!(stats.run.histogram, buckets(&[1, 2, 3]));
    // Service: a finished after 12 s, c failed after 16 s; b is not done.
    assert_eq!(stats.service.count, 2);
    assert_eq!(stats.service.mean, Some(secs(14)));
    assert_eq!(
        (stats.service.min, stats.service.max),
        (Some(secs(12)), Some(secs(16)))
    );
    // The series: 60 one-minute points ending with the current minute, which holds everything.
    assert_eq!(stats.series.len(), 60);
    assert_eq!(stats.bucket, secs(60));
    let last = stats.series.last().unwrap();
    assert_eq!(last.at, crate::harness::start_time());
    assert_eq!(last.counts, totals);
    assert_eq!(last.wait_max, Some(secs(15)));
    assert_eq!(last.run_mean, Some(secs(2)));
    assert!(stats.series[..59].iter().all(|p| p.counts.added == 0));

    // The in-memory metrics saw the same.
    let metrics = t.queue.metrics();
    let mail = &metrics.jobs[&("default".to_owned(), "mail".to_owned())];
    assert_eq!(
        (
            mail.count(ActivityKind::Added),
            mail.count(ActivityKind::Finished),
            mail.count(ActivityKind::Retried),
            mail.count(ActivityKind::Failed)
        ),
        (3, 1, 1, 1)
    );
    assert_eq!((mail.wait.count, mail.wait.sum_seconds), (3, 37.0));
    assert_eq!((mail.run.count, mail.run.sum_seconds), (3, 6.0));
    assert_eq!(
        (mail.wait.buckets[10], mail.wait.buckets[11]),
        (1, 2),
        "10 s is within the 10 s bound; 12 and 15 s within 30 s"
    );

    // Without filters, the report counts too; another queue alone has only it.
    let all = t.queue.stats(StatsQuery::default()).await.unwrap();
    assert_eq!(all.totals.added, 4);
    let reports = t
        .queue
        .stats(StatsQuery {
            queue: Some("reports".into()),
            ..StatsQuery::default()
        })
        .await
        .unwrap();
    assert_eq!((reports.totals.added, reports.totals.started), (1, 0));
    assert_eq!(reports.wait.mean, None);

    // A day later the hour is empty, but the day and the week still hold it.
    t.advance(secs(3600));
    let hour = t.queue.stats(StatsQuery::default()).await.unwrap();
    assert_eq!(hour.totals.added, 0);
    for period in [StatsPeriod::Day, StatsPeriod::Week] {
        let stats = t
            .queue
            .stats(StatsQuery {
                period,
                ..StatsQuery::default()
            })
            .await
            .unwrap();
        assert_eq!(stats.totals.added, 4, "{period:?}");
        assert_eq!(stats.series.len(), period.points() as usize);
        assert_eq!(stats.bucket, secs(3600));
    }
    t.close().await;
}

#[tokio::test]
async fn worker_utilization_is_busy_time_over_presence() {
    let (t, _) = three_attempts().await;
    let usage = t.queue.worker_stats(StatsPeriod::Hour).await.unwrap();
    // Seen at +10, +12, +15 and +16 s: present 6 s; busy 2 + 3 + 1 s.
    assert_eq!(usage.workers.len(), 1);
    let w = &usage.workers[0];
    assert_eq!(
        (w.worker.as_str(), w.present, w.busy, w.attempts),
        ("w", secs(6), secs(6), 3)
    );
    assert_eq!(w.utilization, Some(1.0));
    assert_eq!(usage.queues.len(), 1);
    assert_eq!(usage.queues[0].queue, "default");
    assert_eq!(usage.queues[0].busy, secs(6));
    t.close().await;
}

#[tokio::test]
async fn the_activity_log_tells_each_jobs_story_and_the_workers() {
    let (t, ids) = three_attempts().await;
    let story = |job| {
        let queue = t.queue.clone();
        async move {
            queue
                .activity(ActivityFilter {
                    job: Some(job),
                    ..ActivityFilter::default()
                })
                .await
                .unwrap()
                .events
        }
    };
    let a = story(ids[0]).await;
    let kinds: Vec<_> = a.iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        [
            ActivityKind::Finished,
            ActivityKind::Started,
            ActivityKind::Added
        ]
    );
    assert_eq!(a[0].worker.as_deref(), Some("w"));
    assert_eq!(a[0].at, crate::harness::start_time() + secs(12));
    assert_eq!(
        (a[2].queue.as_deref(), a[2].name.as_deref()),
        (Some("default"), Some("mail"))
    );
    let b = story(ids[1]).await;
    assert_eq!(b[0].kind, ActivityKind::Retried);
    assert_eq!(b[0].detail.as_deref(), Some("smtp timeout"));
    let c = story(ids[2]).await;
    assert_eq!(c[0].kind, ActivityKind::Failed);
    assert_eq!(c[0].detail.as_deref(), Some("bounced: no such user"));

    // Filters: by worker, by queue, by time; paging newest first.
    let by_worker = t
        .queue
        .activity(ActivityFilter {
            worker: Some("w".into()),
            ..ActivityFilter::default()
        })
        .await
        .unwrap()
        .events;
    assert_eq!(by_worker.last().unwrap().kind, ActivityKind::WorkerStarted);
    assert_eq!(by_worker.len(), 7, "started, 3 starts, 3 ends");
    let reports = t
        .queue
        .activity(ActivityFilter {
            queue: Some("reports".into()),
            ..ActivityFilter::default()
        })
        .await
        .unwrap()
        .events;
    assert_eq!(reports.len(), 1);
    let late = t
        .queue
        .activity(ActivityFilter {
            since: Some(crate::harness::start_time() + secs(15)),
            ..ActivityFilter::default()
        })
        .await
        .unwrap()
        .events;
    let kinds: Vec<_> = late.iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        [
            ActivityKind::Failed,
            ActivityKind::Started,
            ActivityKind::Retried
        ]
    );
    let first = t
        .queue
        .activity(ActivityFilter {
            limit: 2,
            ..ActivityFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(first.events.len(), 2);
    let rest = t
        .queue
        .activity(ActivityFilter {
            before: first.next_before,
            ..ActivityFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(rest.events.len(), 9, "11 events in all");
    assert_eq!(rest.next_before, None);
    assert!(rest.events[0].id < first.events[1].id);

    // Silent for five minutes, the worker is lost; back again, it starts again.
    t.advance(secs(6 * 60));
    t.queue.settle().await.unwrap();
    let page = t
        .queue
        .activity(ActivityFilter {
            worker: Some("w".into()),
            limit: 1,
            ..ActivityFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(page.events[0].kind, ActivityKind::WorkerLost);
    t.queue.dequeue(Dequeue::new("w")).await.unwrap();
    t.queue.worker_stopped("w").await.unwrap();
    let kinds: Vec<_> = t
        .queue
        .activity(ActivityFilter {
            worker: Some("w".into()),
            limit: 3,
            ..ActivityFilter::default()
        })
        .await
        .unwrap()
        .events
        .iter()
        .map(|e| e.kind)
        .collect();
    // It took the retried job back: started again, took it, stopped.
    assert_eq!(
        kinds,
        [
            ActivityKind::WorkerStopped,
            ActivityKind::Started,
            ActivityKind::WorkerStarted
        ]
    );
    t.close().await;
}

#[tokio::test]
async fn old_activity_and_statistics_are_pruned_by_age() {
    let (t, _) = three_attempts().await;
    t.queue
        .set_config(ConfigKey::ActivityMaxAge, ConfigValue::Duration(secs(600)))
        .await
        .unwrap();
    t.queue
        .set_config(ConfigKey::StatsMaxAge, ConfigValue::Duration(secs(3600)))
        .await
        .unwrap();
    t.advance(secs(2 * 3600));
    t.queue.settle().await.unwrap();
    let page = t.queue.activity(ActivityFilter::default()).await.unwrap();
    // The old events are gone but the newest of them, which retention always keeps (on SQLite a new event's id is
    // the largest plus one: an emptied log would hand ids out again); the worker's loss, and the retried jobs coming
    // due, came with the pass.
    let old: Vec<_> = page
        .events
        .iter()
        .filter(|e| !matches!(e.kind, ActivityKind::WorkerLost | ActivityKind::Promoted))
        .collect();
    assert!(old.len() <= 1, "{page:?}");
    let week = t
        .queue
        .stats(StatsQuery {
            period: StatsPeriod::Week,
            ..StatsQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(week.totals.added, 0);
    assert!(week.wait.histogram.is_empty());
    assert!(
        t.queue
            .worker_stats(StatsPeriod::Week)
            .await
            .unwrap()
            .workers
            .is_empty()
    );
    t.close().await;
}

/// The activity log also keeps at most `retention.activity_max_count` rows, the newest: every job writes three, and
/// a week of them at a busy queue's rate is more than any disk holds.
#[tokio::test]
async fn the_activity_log_keeps_only_its_newest_rows_past_its_count() {
    let t = TestQueue::new().await;
    for i in 0..10 {
        t.push(&format!("j{i}")).await;
    }
    let all = t
        .queue
        .activity(ActivityFilter::default())
        .await
        .unwrap()
        .events;
    assert!(all.len() >= 10, "{all:?}");
    t.queue
        .set_config(ConfigKey::ActivityMaxCount, ConfigValue::Count(3))
        .await
        .unwrap();
    t.advance(secs(60)); // the next pass
    t.queue.settle().await.unwrap();
    let kept = t
        .queue
        .activity(ActivityFilter::default())
        .await
        .unwrap()
        .events;
    assert_eq!(kept, all[..3], "the three newest, newest first");
    t.close().await;
}

#[tokio::test]
async fn a_dependent_waits_from_when_it_became_ready_not_from_when_it_was_pushed() {
    let t = TestQueue::new().await;
    let first = t
        .queue
        .enqueue(Push::new("first").lease_timeout(secs(2 * 3600)))
        .await
        .unwrap()
        .id;
    let then = t
        .queue
        .enqueue(Push::new("then").depends_on(first))
        .await
        .unwrap()
        .id;
    let a = t.take("w").await.unwrap();
    t.advance(secs(3600));
    t.queue.finish(&a.lease, None).await.unwrap();
    assert_eq!(t.queue.get(then).await.unwrap().run_at, t.clock_now());
    t.advance(secs(2));
    let b = t.take("w").await.unwrap();
    assert_eq!(b.job.id, then);
    let stats = t
        .queue
        .stats(StatsQuery {
            name: Some("then".into()),
            ..StatsQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(stats.wait.max, Some(secs(2)));
    t.close().await;
}

#[tokio::test]
async fn a_worker_waiting_in_a_long_poll_is_present_not_lost() {
    let t = TestQueue::new().await;
    let queue = t.queue.clone();
    let waiting = tokio::spawn(async move {
        queue
            .dequeue(Dequeue::new("patient").wait(secs(3600)))
            .await
            .unwrap()
    });
    tokio::task::yield_now().await;
    t.queue.settle().await.unwrap();
    // Ten minutes pass in steps of a minute; housekeeping sees the parked worker at each.
    for _ in 0..10 {
        t.advance(secs(60));
        t.queue.settle().await.unwrap();
    }
    let kinds: Vec<_> = t
        .queue
        .activity(ActivityFilter {
            worker: Some("patient".into()),
            ..ActivityFilter::default()
        })
        .await
        .unwrap()
        .events
        .iter()
        .map(|e| e.kind)
        .collect();
    assert_eq!(kinds, [ActivityKind::WorkerStarted]);
    let usage = t.queue.worker_stats(StatsPeriod::Hour).await.unwrap();
    assert_eq!(usage.workers[0].present, secs(600));
    t.push("at last").await;
    assert_eq!(waiting.await.unwrap()[0].job.name.as_str(), "at last");
    t.close().await;
}

#[tokio::test]
async fn busy_time_is_shared_among_the_hours_an_attempt_ran_in() {
    let t = TestQueue::new().await;
    t.advance(secs(30 * 60)); // 00:30
    t.push("long").await;
    let c = t.take("w").await.unwrap();
    t.advance(secs(50 * 60)); // 01:20
    t.queue.heartbeat(&c.lease, None).await.unwrap_err(); // the lease ran out long ago; the worker is seen
    t.queue.finish(&c.lease, None).await.unwrap_err();
    let rows = t
        .select_integers("SELECT hour, busy_ms FROM worker_hour WHERE queue != '' ORDER BY hour")
        .await;
    assert!(rows.is_empty(), "a lost lease is not busy time: {rows:?}");
    // A finished one that spans the hour is split: 30 min before 01:00, 20 after.
    let t = TestQueue::new().await;
    t.advance(secs(30 * 60));
    t.push("long").await;
    let c = t
        .queue
        .dequeue(Dequeue::new("w").lease_timeout(secs(24 * 3600)))
        .await
        .unwrap()
        .remove(0);
    t.advance(secs(50 * 60));
    t.queue.finish(&c.lease, None).await.unwrap();
    let rows = t
        .select_integers(
            "SELECT busy_ms, attempts FROM worker_hour WHERE queue != '' ORDER BY hour",
        )
        .await;
    assert_eq!(rows, [vec![30 * 60_000, 0], vec![20 * 60_000, 1]]);
    t.close().await;
}

/// The changes made from outside a lease are in the log (and so in the event stream): a job moved, rescheduled,
/// given another priority and deleted; a queue paused, resumed and limited; scheduled jobs coming due, once per
/// queue and pass.
#[tokio::test]
async fn changes_made_from_outside_are_in_the_activity_log() {
    let t = TestQueue::new().await;
    let id = t
        .queue
        .enqueue(
            Push::new("report")
                .queue("slow")
                .delay(Duration::from_secs(60)),
        )
        .await
        .unwrap()
        .id;
    t.queue.set_priority(id, 5).await.unwrap();
    t.queue
        .reschedule(id, t.clock_now() + jiff::SignedDuration::from_secs(30))
        .await
        .unwrap();
    t.queue.run(cairn::MoveJob::new(id, "fast")).await.unwrap();
    for _ in 0..2 {
        t.queue
            .enqueue(
                Push::new("later")
                    .queue("fast")
                    .delay(Duration::from_secs(10)),
            )
            .await
            .unwrap();
    }
    t.queue.pause_queue("fast", true).await.unwrap();
    t.queue.pause_queue("fast", false).await.unwrap();
    t.queue.limit_queue("fast", Some(3)).await.unwrap();
    t.advance(Duration::from_secs(40));
    t.queue.settle().await.unwrap();
    t.queue.delete(id).await.unwrap();

    let mut page = t
        .queue
        .activity(ActivityFilter {
            limit: 100,
            ..ActivityFilter::default()
        })
        .await
        .unwrap()
        .events;
    page.reverse();
    // Each change as (kind, job, queue, detail).
    type Change = (ActivityKind, Option<i64>, Option<String>, Option<String>);
    let changes: Vec<Change> = page
        .into_iter()
        .filter(|e| e.kind != ActivityKind::Added)
        .map(|e| (e.kind, e.job.map(|j| j.0), e.queue, e.detail))
        .collect();
    let job = |kind, queue: &str, detail: &str| {
        (
            kind,
            Some(id.0),
            Some(queue.to_owned()),
            Some(detail.to_owned()),
        )
    };
    let queue = |kind, detail: &str| (kind, None, Some("fast".to_owned()), Some(detail.to_owned()));
    assert_eq!(
        changes,
        [
            job(ActivityKind::Prioritized, "slow", "priority 5"),
            job(
                ActivityKind::Rescheduled,
                "slow",
                "run at 2026-01-01T00:00:30Z"
            ),
            job(ActivityKind::Moved, "fast", "from slow"),
            queue(ActivityKind::QueueChanged, "paused"),
            queue(ActivityKind::QueueChanged, "resumed"),
            queue(ActivityKind::QueueChanged, "concurrency 3"),
            queue(ActivityKind::Promoted, "3 jobs due"),
            (
                ActivityKind::Cancelled,
                Some(id.0),
                Some("fast".to_owned()),
                Some("deleted".to_owned())
            ),
            (
                ActivityKind::Deleted,
                Some(id.0),
                Some("fast".to_owned()),
                None
            ),
        ]
    );
    t.close().await;
}
