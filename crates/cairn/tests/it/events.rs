//! The event stream: the activity log's events as they are committed, in order, resumable from an id.

use cairn::Jobs;
use std::time::Duration;

use cairn::{ActivityEvent, ActivityKind, ErrorKind, EventFilter, Events, EventsFrom, Push};

use super::harness::{TestQueue, poll_once};

/// The next event, or a failure after ten seconds.
async fn next(events: &mut Events) -> ActivityEvent {
    tokio::time::timeout(Duration::from_secs(10), events.next())
        .await
        .expect("an event within ten seconds")
        .unwrap()
}

/// Whether no event comes for a moment.
async fn quiet(events: &mut Events) -> bool {
    tokio::time::timeout(Duration::from_millis(300), events.next())
        .await
        .is_err()
}

/// A consumer gone during a burst of 1,000 transitions resumes from the last event it saw and gets exactly the
/// ones it missed, in order, then the live ones.
#[tokio::test]
async fn a_subscription_resumed_after_a_burst_gets_exactly_what_it_missed() {
    let t = TestQueue::new().await;
    let mut events = t
        .queue
        .events(EventsFrom::Now, EventFilter::default())
        .await
        .unwrap();
    let first = t.push("before").await;
    let seen = next(&mut events).await;
    assert_eq!((seen.kind, seen.job), (ActivityKind::Added, Some(first)));
    let resume_at = events.position();
    drop(events);

    let burst = t
        .push_batch((0..1_000).map(|_| Push::new("burst")).collect())
        .await;
    let mut resumed = t
        .queue
        .events(EventsFrom::After(resume_at), EventFilter::default())
        .await
        .unwrap();
    let mut got = Vec::new();
    let mut last_id = resume_at;
    for _ in 0..1_000 {
        let e = next(&mut resumed).await;
        assert!(e.id > last_id, "in order: {} after {last_id}", e.id);
        last_id = e.id;
        assert_eq!(e.kind, ActivityKind::Added);
        got.push(e.job.unwrap());
    }
    assert_eq!(got, burst);
    assert!(quiet(&mut resumed).await, "nothing more than the burst");
    let live = t.push("after").await;
    assert_eq!(next(&mut resumed).await.job, Some(live));
    t.close().await;
}

#[tokio::test]
async fn a_subscription_gets_only_what_its_filter_lets_through() {
    let t = TestQueue::new().await;
    let mut mail = t
        .queue
        .events(
            EventsFrom::Now,
            EventFilter {
                queue: Some("mail".into()),
                name: Some("email.*".into()),
                kinds: vec![ActivityKind::Added, ActivityKind::Cancelled],
                ..EventFilter::default()
            },
        )
        .await
        .unwrap();
    t.queue
        .enqueue(Push::new("email.send").queue("other"))
        .await
        .unwrap();
    t.queue
        .enqueue(Push::new("pdf.render").queue("mail"))
        .await
        .unwrap();
    let wanted = t
        .queue
        .enqueue(Push::new("email.send").queue("mail"))
        .await
        .unwrap()
        .id;
    t.queue.cancel(wanted).await.unwrap();
    let added = next(&mut mail).await;
    assert_eq!((added.kind, added.job), (ActivityKind::Added, Some(wanted)));
    let cancelled = next(&mut mail).await;
    assert_eq!(
        (cancelled.kind, cancelled.job),
        (ActivityKind::Cancelled, Some(wanted))
    );
    assert!(quiet(&mut mail).await);
    let mut one = t
        .queue
        .events(
            EventsFrom::After(0),
            EventFilter {
                job: Some(wanted),
                ..EventFilter::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(next(&mut one).await.kind, ActivityKind::Added);
    assert_eq!(next(&mut one).await.kind, ActivityKind::Cancelled);
    let err = t
        .queue
        .events(
            EventsFrom::Now,
            EventFilter {
                name: Some("[unclosed".into()),
                ..EventFilter::default()
            },
        )
        .await
        .unwrap_err();
    assert_eq!(
        (err.kind(), err.field()),
        (ErrorKind::InvalidInput, Some("name"))
    );
    t.close().await;
}

#[tokio::test]
async fn closing_the_queue_ends_every_subscription() {
    let t = TestQueue::new().await;
    let mut events = t
        .queue
        .events(EventsFrom::Now, EventFilter::default())
        .await
        .unwrap();
    let mut waiting = Box::pin(events.next());
    assert!(poll_once(&mut waiting).await, "nothing happened yet");
    t.close().await;
    let err = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the subscription ended with the queue")
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Closed);
}

/// A subscription that resumes before the oldest event the log still holds (retention pruned the rest) is told so,
/// and goes on from the oldest one kept; one that resumes within the log is not.
#[tokio::test]
async fn a_subscription_resumed_past_pruned_events_is_told_it_missed_them() {
    let t = TestQueue::new().await;
    let first = t.push("old").await;
    for _ in 0..3 {
        t.push("old").await;
    }
    t.queue
        .set_config(
            cairn::ConfigKey::ActivityMaxAge,
            cairn::ConfigValue::Duration(Duration::from_secs(600)),
        )
        .await
        .unwrap();
    t.advance(Duration::from_secs(3600));
    t.queue.settle().await.unwrap();
    let kept = t
        .queue
        .activity(cairn::ActivityFilter::default())
        .await
        .unwrap()
        .events;
    let oldest = kept.iter().map(|e| e.id).min().unwrap();
    let fresh = t.push("new").await;
    let mut resumed = t
        .queue
        .events(EventsFrom::After(1), EventFilter::default())
        .await
        .unwrap();
    assert_eq!(
        resumed.missed(),
        Some(cairn::EventsMissed { after: 1, oldest }),
        "the job {first}'s events are gone"
    );
    // It goes on from what is kept.
    let mut got = Vec::new();
    loop {
        let e = next(&mut resumed).await;
        got.push(e.id);
        if e.job == Some(fresh) {
            break;
        }
    }
    assert_eq!(got[0], oldest);
    let within = t
        .queue
        .events(EventsFrom::After(oldest - 1), EventFilter::default())
        .await
        .unwrap();
    assert_eq!(within.missed(), None);
    let now = t
        .queue
        .events(EventsFrom::Now, EventFilter::default())
        .await
        .unwrap();
    assert_eq!(now.missed(), None);
    t.close().await;
}

/// An event of a kind this version does not know (written by a newer Cairn on the same database, mid-upgrade) is
/// passed on as `Unknown`, in its place: the stream and the log's listing go on past it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_of_a_kind_from_a_newer_cairn_passes_through_as_unknown() {
    let t = TestQueue::new().await;
    let mut events = t
        .queue
        .events(EventsFrom::Now, EventFilter::default())
        .await
        .unwrap();
    let before = t.push("before").await;
    assert_eq!(next(&mut events).await.job, Some(before));
    // A newer Cairn's event, written as it would write it.
    let (path, postgres) = (t.path(), t.is_postgres());
    tokio::task::spawn_blocking(move || {
        const INSERT: &str = "INSERT INTO activity (at, event, job_id, queue, name, worker, detail) \
                              VALUES (1, 'from_the_future', NULL, 'default', NULL, NULL, 'hello')";
        if postgres {
            let mut client =
                cairn::postgres::Client::connect(path.to_str().unwrap(), cairn::postgres::NoTls)
                    .unwrap();
            client.batch_execute(INSERT).unwrap();
        } else {
            let conn = cairn::rusqlite::Connection::open(&path).unwrap();
            conn.busy_timeout(Duration::from_secs(5)).unwrap();
            conn.execute_batch(INSERT).unwrap();
        }
    })
    .await
    .unwrap();
    let after = t.push("after").await;
    let unknown = next(&mut events).await;
    assert_eq!(
        (unknown.kind, unknown.detail.as_deref()),
        (ActivityKind::Unknown, Some("hello"))
    );
    assert_eq!(next(&mut events).await.job, Some(after));
    let listed = t
        .queue
        .activity(cairn::ActivityFilter::default())
        .await
        .unwrap()
        .events;
    assert!(listed.iter().any(|e| e.kind == ActivityKind::Unknown));
    t.close().await;
}
