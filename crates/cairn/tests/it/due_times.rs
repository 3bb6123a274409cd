//! Every kind of due time is met while the queue is busy, on the real clock: a delayed push, a retry after a lease
//! expiry, after an attempt's timeout, after a failure and after a worker's own delay, a reschedule, a requeue with
//! a time, a finish that continues after a delay, a debounce, a repeating job's next run, a dependent whose
//! dependency completed before its time, a lease a heartbeat extended, and a recurring template's slot. Each is
//! made a few seconds ahead, longer than a term of PostgreSQL's lead of the timed work, while steady traffic keeps
//! the writer busy, and the test records how late each job became ready.
//!
//! On SQLite and PostgreSQL with one node, and with two PostgreSQL nodes where every due time is made on the node
//! that does not lead the timed work, and watched there too.
//!
//! (A throttle gives no job a time: it refuses pushes for its period, whoever asks, so there is nothing to come
//! due.)

use cairn::Jobs;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use cairn::__private::TestDatabase;
use cairn::{
    Continue, Dequeue, Finish, JobFilter, JobId, JobState, MissedSlots, Overlap, Push, Queue,
    Recurring, RetryPolicy,
};
use jiff::{SignedDuration, Timestamp};

/// How far ahead each due time is made: past a term of the lead of the timed work (5 s), so that a node that lets
/// its term lapse while it is busy would miss them.
const AHEAD: Duration = Duration::from_secs(7);

/// How late a job may come. The design meets due times within milliseconds; a loaded CI machine needs room, and
/// the fault this guards against made jobs tens of seconds late, or never due.
const ALLOWED: Duration = Duration::from_secs(2);

/// The queue the jobs under test come due in; traffic runs in its own.
const DUE: &str = "due";

/// Steady traffic on a node: a push and a take of up to 16 jobs (a 200 ms long poll) about 15 times a second,
/// each job finished, until dropped. Each node's traffic has a queue of its own (named after its worker), so that
/// every take finds the job just pushed: a take that finds nothing parks, and its deadline wakes the writer, which
/// would hide a writer that no longer wakes for its due times.
pub(crate) struct Traffic {
    stop: Arc<AtomicBool>,
    /// The rounds done so far.
    rounds: Arc<AtomicU64>,
    running: Option<tokio::task::JoinHandle<()>>,
}

impl Traffic {
    pub(crate) fn start(queue: Queue, worker: &str) -> Traffic {
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let rounds = Arc::new(AtomicU64::new(0));
        let done = rounds.clone();
        let worker = worker.to_owned();
        let running = tokio::spawn(async move {
            while !stopping.load(Ordering::Relaxed) {
                let round = async {
                    queue
                        .enqueue(Push::new("part.x").queue(worker.as_str()))
                        .await?;
                    let taken = queue
                        .dequeue(
                            Dequeue::new(worker.as_str())
                                .queue(worker.as_str())
                                .name("part.*")
                                .limit(16)
                                .wait(Duration::from_millis(200)),
                        )
                        .await?;
                    for claimed in taken {
                        queue.finish(&claimed.lease, None).await?;
                    }
                    Ok::<_, cairn::Error>(())
                };
                if let Err(e) = round.await {
                    // The queue closes as the test ends, perhaps before the traffic is told to stop.
                    assert_eq!(e.kind(), cairn::ErrorKind::Closed, "traffic: {e}");
                    return;
                }
                done.fetch_add(1, Ordering::Relaxed);
                // Real time: traffic at a steady rate by the real clock, as the due times come due by it; without a
                // pause between rounds it would be as much as the machine can do, not steady traffic.
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
        Traffic {
            stop,
            rounds,
            running: Some(running),
        }
    }

    /// Waits until the traffic has done `rounds` more rounds: the node is busy.
    pub(crate) async fn runs_for(&self, rounds: u64) {
        let from = self.rounds.load(Ordering::Relaxed);
        crate::harness::eventually(Duration::from_secs(30), "the traffic runs", || async {
            self.rounds.load(Ordering::Relaxed) >= from + rounds
        })
        .await;
    }

    /// Stops the traffic, and fails the test if it failed: a test under traffic that died would pass without it.
    pub(crate) async fn finish(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(running) = self.running.take() {
            running.await.expect("the traffic ran to the end");
        }
    }
}

impl Drop for Traffic {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Every queue the trial uses, used once before it starts: a queue's first use changes the settings every node
/// keeps, which wakes the other nodes' writers, and would hide a leader that no longer wakes for its due times.
async fn use_queues(queue: &Queue) {
    for name in [
        DUE,
        "traffic",
        "traffic-leader",
        "traffic-follower",
        "first-step",
        "dependencies",
    ] {
        let id = queue
            .enqueue(Push::new("first").queue(name))
            .await
            .unwrap()
            .id;
        queue.delete(id).await.unwrap();
    }
}

/// A retry policy of one more attempt, a second after the first.
fn one_retry_after_a_second() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 2,
        initial_delay: Duration::from_secs(1),
        multiplier: 1.0,
        max_delay: Duration::from_secs(1),
        jitter: 0.0,
    }
}

fn ahead() -> Timestamp {
    Timestamp::now() + SignedDuration::try_from(AHEAD).unwrap()
}

/// Pushes a job named `due.<path>` into the due queue and takes it at once, with `lease`.
async fn take(queue: &Queue, push: Push, lease: Duration) -> cairn::ClaimedJob {
    let name = push.name.to_string();
    queue.enqueue(push.queue(DUE)).await.unwrap();
    let mut claimed = queue
        .dequeue(
            Dequeue::new("setup")
                .queue(DUE)
                .name(name.as_str())
                .lease_timeout(lease),
        )
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1, "{name} taken");
    claimed.pop().unwrap()
}

/// Makes a job come due about [`AHEAD`] from now by every path, on `queue`; returns each job and when it is due,
/// by path. `None`: the job's own `run_at` when it comes (the path wrote it); `Some`: a time the path's writer
/// could not know (a lease's expiry plus the retry's delay).
async fn make_due_times(queue: &Queue) -> BTreeMap<JobId, (&'static str, Option<Timestamp>)> {
    let mut due = BTreeMap::new();
    let second = SignedDuration::from_secs(1);
    let lease_ahead = AHEAD - Duration::from_secs(1);

    let id = queue
        .enqueue(Push::new("due.delay").queue(DUE).delay(AHEAD))
        .await
        .unwrap()
        .id;
    due.insert(id, ("a delayed push", None));

    let claimed = take(
        queue,
        Push::new("due.lease").retry(one_retry_after_a_second()),
        lease_ahead,
    )
    .await;
    due.insert(
        claimed.job.id,
        (
            "a retry after a lease expiry",
            Some(claimed.lease.expires_at + second),
        ),
    );

    let claimed = take(
        queue,
        Push::new("due.timeout")
            .retry(one_retry_after_a_second())
            .timeout(lease_ahead),
        Duration::from_secs(60),
    )
    .await;
    due.insert(
        claimed.job.id,
        (
            "a retry after an attempt's timeout",
            Some(claimed.lease.expires_at + second),
        ),
    );

    let claimed = take(
        queue,
        Push::new("due.heartbeat")
            .retry(one_retry_after_a_second())
            .lease_timeout(lease_ahead),
        Duration::from_secs(1),
    )
    .await;
    let extended = queue.heartbeat(&claimed.lease, None).await.unwrap();
    due.insert(
        claimed.job.id,
        (
            "a retry after a lease a heartbeat extended",
            Some(extended + second),
        ),
    );

    let claimed = take(
        queue,
        Push::new("due.backoff").retry(RetryPolicy {
            initial_delay: AHEAD,
            max_delay: AHEAD,
            jitter: 0.0,
            ..RetryPolicy::default()
        }),
        Duration::from_secs(60),
    )
    .await;
    queue.retry(&claimed.lease, "failed", None).await.unwrap();
    due.insert(claimed.job.id, ("a retry after a failure's backoff", None));

    let claimed = take(queue, Push::new("due.snooze"), Duration::from_secs(60)).await;
    queue
        .retry(&claimed.lease, "not yet", Some(AHEAD))
        .await
        .unwrap();
    due.insert(claimed.job.id, ("a retry with the worker's delay", None));

    let id = queue
        .enqueue(Push::new("due.reschedule").queue(DUE))
        .await
        .unwrap()
        .id;
    queue.reschedule(id, ahead()).await.unwrap();
    due.insert(id, ("a reschedule", None));

    let claimed = take(queue, Push::new("due.requeue"), Duration::from_secs(60)).await;
    queue.requeue(claimed.job.id, Some(ahead())).await.unwrap();
    due.insert(claimed.job.id, ("a requeue with a time", None));

    let id = queue
        .enqueue(Push::new("due.continue").queue("first-step"))
        .await
        .unwrap()
        .id;
    let step = queue
        .dequeue(Dequeue::new("setup").queue("first-step"))
        .await
        .unwrap()
        .pop()
        .unwrap();
    queue
        .finish_with(Finish {
            next: Some(Continue {
                queue: DUE.to_owned(),
                delay: Some(AHEAD),
                depends_on: Vec::new(),
            }),
            ..Finish::new(&step.lease)
        })
        .await
        .unwrap();
    due.insert(id, ("a finish that continues after a delay", None));

    let id = queue
        .enqueue(
            Push::new("due.debounce")
                .queue(DUE)
                .debounce("due-debounce", AHEAD, AHEAD * 4),
        )
        .await
        .unwrap()
        .id;
    due.insert(id, ("a debounce", None));

    let claimed = take(
        queue,
        Push::new("due.repeat").schedule(format!("FINISHED, +{} SECONDS", AHEAD.as_secs())),
        Duration::from_secs(60),
    )
    .await;
    queue.finish(&claimed.lease, None).await.unwrap();
    due.insert(claimed.job.id, ("a repeating job's next run", None));

    let first = queue
        .enqueue(Push::new("dep.first").queue("dependencies"))
        .await
        .unwrap()
        .id;
    let id = queue
        .enqueue(
            Push::new("due.dependent")
                .queue(DUE)
                .delay(AHEAD)
                .depends_on(first),
        )
        .await
        .unwrap()
        .id;
    let dependency = queue
        .dequeue(Dequeue::new("setup").queue("dependencies"))
        .await
        .unwrap()
        .pop()
        .unwrap();
    queue.finish(&dependency.lease, None).await.unwrap();
    due.insert(id, ("a dependent whose dependency completed", None));

    due
}

/// A recurring template whose one slot a minute comes [`AHEAD`] from now, rounded up to a whole second: when.
async fn set_recurring_slot(queue: &Queue) -> Timestamp {
    let slot = ahead().round(jiff::Unit::Second).unwrap() + SignedDuration::from_secs(1);
    let second = slot.to_zoned(jiff::tz::TimeZone::UTC).second();
    queue
        .set_recurring(Recurring {
            key: "due-slot".into(),
            cron: format!("{second} * * * * *"),
            time_zone: "UTC".into(),
            missed: MissedSlots::RunOnce,
            overlap: Overlap::default(),
            job: Push::new("due.recurring").queue(DUE),
        })
        .await
        .unwrap();
    slot
}

/// Watches the due queue through reads (which leave the writer alone: a worker parked in a long poll would wake it
/// at its deadline, and so hide a writer that no longer wakes for its due times) until each of `expected` is ready
/// or the time is up; returns how late each became ready, by path (`None`: never).
async fn watch(
    queue: &Queue,
    expected: &BTreeMap<JobId, (&'static str, Option<Timestamp>)>,
    slot: Timestamp,
) -> BTreeMap<&'static str, Option<Duration>> {
    let mut late: BTreeMap<&'static str, Option<Duration>> =
        expected.values().map(|(path, _)| (*path, None)).collect();
    late.insert("a recurring template's slot", None);
    let late = std::sync::Mutex::new(late);
    let noted = &late;
    // Whether every path's job came or not: the assertions on `late` say which did not.
    let _ = crate::harness::poll(AHEAD + Duration::from_secs(25), || async move {
        let ready = queue
            .list(JobFilter {
                queue: Some(DUE.to_owned()),
                state: Some(JobState::Queued),
                limit: 100,
                ..JobFilter::default()
            })
            .await
            .unwrap()
            .jobs;
        let seen = Timestamp::now();
        let mut late = noted.lock().unwrap();
        for job in ready {
            let (path, due_at) = match expected.get(&job.id) {
                Some((path, due_at)) => (*path, due_at.unwrap_or(job.run_at)),
                None if job.name.as_str() == "due.recurring" => {
                    ("a recurring template's slot", slot)
                }
                None => panic!("an unexpected job is ready: {job:?}"),
            };
            let lateness = seen.duration_since(due_at).max(SignedDuration::ZERO);
            late.entry(path)
                .or_default()
                .get_or_insert(Duration::try_from(lateness).unwrap());
        }
        late.values().all(Option::is_some).then_some(())
    })
    .await;
    late.into_inner().unwrap()
}

/// Asserts that every path's job came, and within [`ALLOWED`] of its time; prints how late each was.
fn assert_on_time(setup: &str, late: &BTreeMap<&'static str, Option<Duration>>) {
    let mut failures = Vec::new();
    for (path, lateness) in late {
        eprintln!("{setup}: {path}: {lateness:?} late");
        match lateness {
            None => failures.push(format!("{path}: never came")),
            Some(lateness) if *lateness > ALLOWED => {
                failures.push(format!("{path}: {lateness:?} late"))
            }
            Some(_) => {}
        }
    }
    assert!(
        failures.is_empty(),
        "{setup}: due times missed under traffic:\n{}",
        failures.join("\n")
    );
}

/// The whole trial on one node: traffic, every due time made, and a watch for them.
async fn on_one_node(queue: Queue, setup: &str) {
    use_queues(&queue).await;
    let traffic = Traffic::start(queue.clone(), "traffic");
    // Traffic first, so that the node is busy well before the due times are made: about a second of it.
    traffic.runs_for(15).await;
    let expected = make_due_times(&queue).await;
    let slot = set_recurring_slot(&queue).await;
    let late = watch(&queue, &expected, slot).await;
    traffic.finish().await;
    assert_on_time(setup, &late);
    queue.close(Duration::from_secs(10)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_due_time_is_met_under_traffic_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let queue = Queue::open(dir.path().join("jobs.db")).await.unwrap();
    on_one_node(queue, "SQLite").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_due_time_is_met_under_traffic_on_postgresql() {
    let db = TestDatabase::new();
    let queue = Queue::open(PathBuf::from(&db.url)).await.unwrap();
    on_one_node(queue, "PostgreSQL, one node").await;
}

/// The node that leads the timed work, and since when (the start of its first term in a row), by the database.
fn lead(url: &str) -> Option<(String, String)> {
    let url = url.to_owned();
    std::thread::spawn(move || {
        let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        client
            .query_opt("SELECT node, elected_at::text FROM cairn_leader", &[])
            .unwrap()
            .map(|row| (row.get(0), row.get(1)))
    })
    .join()
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_due_time_made_on_a_node_that_does_not_lead_is_met_under_traffic() {
    let db = TestDatabase::new();
    // The first node to open leads the timed work; the second makes every due time, and is watched.
    let leader = Queue::open(PathBuf::from(&db.url)).await.unwrap();
    let follower = Queue::open(PathBuf::from(&db.url)).await.unwrap();
    use_queues(&follower).await;
    let traffic = [
        Traffic::start(leader.clone(), "traffic-leader"),
        Traffic::start(follower.clone(), "traffic-follower"),
    ];
    // About a second of traffic on each node first.
    for traffic in &traffic {
        traffic.runs_for(15).await;
    }
    let before = lead(&db.url).expect("a node leads");
    let expected = make_due_times(&follower).await;
    let slot = set_recurring_slot(&follower).await;
    let late = watch(&follower, &expected, slot).await;
    for traffic in traffic {
        traffic.finish().await;
    }
    // A busy leader keeps its lead: it renews its term whatever its traffic.
    assert_eq!(
        lead(&db.url),
        Some(before),
        "the lead changed hands during the trial"
    );
    assert_on_time("PostgreSQL, two nodes", &late);
    follower.close(Duration::from_secs(10)).await.unwrap();
    leader.close(Duration::from_secs(10)).await.unwrap();
}

/// A due time sooner than the leader's next renewal, written on a follower, is told to the leader at the follower's
/// commit (`cairn_due`, with the time), so that an idle leader wakes for it rather than find it at its renewal, up to
/// a second late.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_due_time_a_moment_ahead_written_on_a_follower_is_told_to_the_leader() {
    let db = TestDatabase::new();
    let leader = Queue::open(PathBuf::from(&db.url)).await.unwrap();
    let follower = Queue::open(PathBuf::from(&db.url)).await.unwrap();
    use_queues(&follower).await;
    // A session of the test's own hears what the leader's listener hears.
    let (listening, listened) = tokio::sync::oneshot::channel();
    let url = db.url.clone();
    let heard = tokio::task::spawn_blocking(move || {
        let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        client.batch_execute("LISTEN cairn_due").unwrap();
        listening.send(()).unwrap();
        let mut notifications = client.notifications();
        let mut payloads = Vec::new();
        let mut heard = notifications.timeout_iter(Duration::from_secs(5));
        while let Ok(Some(n)) = postgres::fallible_iterator::FallibleIterator::next(&mut heard) {
            payloads.push(n.payload().to_owned());
        }
        payloads
    });
    listened.await.unwrap();
    let id = follower
        .enqueue(
            Push::new("soon")
                .queue(DUE)
                .delay(Duration::from_millis(300)),
        )
        .await
        .unwrap()
        .id;
    let due_at = follower.get(id).await.unwrap().run_at;
    let payloads = heard.await.unwrap();
    let told = format!("\n{}", due_at.as_millisecond());
    assert!(
        payloads.iter().any(|p| p.ends_with(&told)),
        "the follower told the leader of {due_at}: heard {payloads:?}"
    );
    let ready = leader.get(id).await.unwrap();
    assert_eq!(ready.state, JobState::Queued, "the leader made it ready");
    follower.close(Duration::from_secs(10)).await.unwrap();
    leader.close(Duration::from_secs(10)).await.unwrap();
}

/// The same for a job the application's own transaction pushes with `cairn_enqueue` (`delay_ms`), which no node
/// writes: the function tells the leader of a time before its next renewal; of a later one, nothing (the leader reads
/// it then).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_due_time_a_moment_ahead_pushed_in_the_applications_transaction_is_told_to_the_leader() {
    let db = TestDatabase::new();
    let leader = Queue::open(PathBuf::from(&db.url)).await.unwrap();
    let url = db.url.clone();
    let (soon, later, heard) = tokio::task::spawn_blocking(move || {
        let mut listener = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        listener.batch_execute("LISTEN cairn_due").unwrap();
        let mut app = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        let mut push = |delay_ms: i64| -> i64 {
            let mut tx = app.transaction().unwrap();
            let id: i64 = tx
                .query_one(
                    "SELECT cairn_enqueue('app', '{}', jsonb_build_object('queue', 'due', 'delay_ms', $1::bigint))",
                    &[&delay_ms],
                )
                .unwrap()
                .get(0);
            tx.commit().unwrap();
            id
        };
        let (soon, later) = (push(300), push(60_000));
        let mut notifications = listener.notifications();
        let mut heard = Vec::new();
        let mut waiting = notifications.timeout_iter(Duration::from_secs(2));
        while let Ok(Some(n)) = postgres::fallible_iterator::FallibleIterator::next(&mut waiting) {
            heard.push(n.payload().to_owned());
        }
        (soon, later, heard)
    })
    .await
    .unwrap();
    let at = |id: i64| {
        let leader = leader.clone();
        async move { leader.get(JobId(id)).await.unwrap().run_at.as_millisecond() }
    };
    let (soon_at, later_at) = (at(soon).await, at(later).await);
    assert_eq!(
        heard,
        [format!("cairn_enqueue\n{soon_at}")],
        "told of the one due before the leader's renewal, not of {later_at}"
    );
    leader.close(Duration::from_secs(10)).await.unwrap();
}
