//! What a node does when its link to PostgreSQL goes silent: it answers its callers within a bound and with a
//! status that says to try again, another node takes over the timed work, and once the link is back the node
//! serves again by itself. The link runs through a proxy that black-holes it (`proxy.rs`).

use cairn::Jobs;
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cairn::__private::TestDatabase;
use cairn::{
    BoxFuture, ClaimedJob, Dequeue, ErrorKind, Finish, JobId, JobState, Lease, Push, Queue,
};
use jiff::Timestamp;
use serde_json::Value;

use crate::harness::poll;
use crate::proxy::Proxy;

/// How long the link stays cut: as long as the trial, past every bound below.
const CUT: Duration = Duration::from_secs(30);

/// The bound each check below allows: the design gives about 10 s (a call's deadline, a term of the lead and its
/// takeover); the rest is room for a loaded machine.
const BOUND: Duration = Duration::from_secs(20);

/// The database's address and the same URL through `proxy`.
fn through(url: &str, proxy: &Proxy) -> String {
    let rest = url.strip_prefix("postgres://").expect("a postgres:// URL");
    let (user, rest) = rest.split_once('@').expect("a user in the URL");
    let (_, path) = rest.split_once('/').expect("a database in the URL");
    format!("postgres://{user}@{}/{path}", proxy.addr)
}

fn address(url: &str) -> SocketAddr {
    let rest = url.split_once('@').expect("a user in the URL").1;
    let host_port = rest.split_once('/').expect("a database in the URL").0;
    host_port.parse().expect("a host:port address")
}

/// The node named in `cairn_leader`, if any.
fn leader(db: &TestDatabase) -> Option<String> {
    let url = db.url.clone();
    std::thread::spawn(move || {
        let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        client
            .query_opt("SELECT node FROM cairn_leader", &[])
            .unwrap()
            .map(|row| row.get(0))
    })
    .join()
    .unwrap()
}

/// Runs `call` and checks that it failed with a status that says to try again (or, for a long poll, ended with
/// nothing) within [`BOUND`]. Returns how long it took.
async fn answered_quickly<T: std::fmt::Debug>(
    what: &str,
    call: impl std::future::Future<Output = cairn::Result<T>>,
) -> Duration {
    let started = Instant::now();
    let result = tokio::time::timeout(BOUND, call)
        .await
        .unwrap_or_else(|_| panic!("{what} on the cut-off node had no answer within {BOUND:?}"));
    if let Err(e) = &result {
        assert_eq!(e.kind(), ErrorKind::Unavailable, "{what}: {e}");
    }
    started.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_cut_off_from_postgresql_answers_quickly_hands_over_its_timed_work_and_comes_back() {
    let db = TestDatabase::new();
    let proxy = Proxy::start(address(&db.url));
    // The node that will be cut off opens first, so that it leads the timed work when its link goes silent.
    let cut = Queue::open(&through(&db.url, &proxy)).await.unwrap();
    poll(BOUND, || async { leader(&db) })
        .await
        .expect("the first node leads");
    let cut_leader = leader(&db).unwrap();
    let other = Queue::open(&db.url).await.unwrap();

    // Acknowledged before the cut, on each node: none may be lost.
    let mut acknowledged: Vec<JobId> = vec![
        cut.enqueue(Push::new("before").queue("kept"))
            .await
            .unwrap()
            .id,
        other
            .enqueue(Push::new("before").queue("kept"))
            .await
            .unwrap()
            .id,
    ];
    // A job that comes due during the cut, and one whose lease runs out during it.
    let delay = Duration::from_secs(6);
    let delayed = other
        .enqueue(Push::new("delayed").queue("delayed").delay(delay))
        .await
        .unwrap()
        .id;
    let due_at = Instant::now() + delay;
    other
        .enqueue(Push::new("abandoned").queue("leased"))
        .await
        .unwrap();
    let lease = Duration::from_secs(4);
    let claimed = other
        .dequeue(Dequeue::new("gone").queue("leased").lease_timeout(lease))
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    let abandoned = claimed[0].job.id;
    let expires_at = Instant::now() + lease;

    proxy.black_hole();
    let cut_at = Instant::now();
    // Calls on the cut-off node answer within the bound, with a status that says to try again; meanwhile the other
    // node takes over the timed work: the delayed job comes due, the abandoned one comes back.
    let on_the_cut_node = async {
        let push = answered_quickly("a push", cut.enqueue(Push::new("during").queue("kept"))).await;
        let read = answered_quickly("a read", cut.get(acknowledged[0])).await;
        let long_poll = answered_quickly(
            "a long poll",
            cut.dequeue(Dequeue::new("w").queue("kept").wait(Duration::from_secs(3))),
        )
        .await;
        (push, read, long_poll)
    };
    let came_due = poll(BOUND + delay, || async {
        let jobs = other
            .dequeue(Dequeue::new("w").queue("delayed"))
            .await
            .unwrap();
        jobs.into_iter().find(|c| c.job.id == delayed)
    });
    let came_back = poll(BOUND + lease, || async {
        let job = other.get(abandoned).await.unwrap();
        (job.state == JobState::Queued || job.state == JobState::Scheduled).then_some(job)
    });
    let ((push, read, long_poll), came_due, came_back) =
        tokio::join!(on_the_cut_node, came_due, came_back);
    let (_, came_due) = came_due.expect("the delayed job came due on the other node");
    let (_, came_back) = came_back.expect("the abandoned job's lease expired on the other node");
    let new_leader = leader(&db).unwrap();
    assert_ne!(new_leader, cut_leader, "the other node leads now");

    // Real time: the trial cuts the link for 30 s, past every bound of the node's (a call's deadline, the
    // lead's term, the sessions' keepalives), and what the node does after such a cut is what is tested. Then the
    // link comes back: the node serves again by itself, within seconds.
    tokio::time::sleep(CUT.saturating_sub(cut_at.elapsed())).await;
    proxy.heal();
    let healed_at = Instant::now();
    let (after, serving) = poll(BOUND, || async {
        cut.enqueue(Push::new("after").queue("kept")).await.ok()
    })
    .await
    .expect("the node serves again once its link is back");
    acknowledged.push(after.id);
    let (_, reading) = poll(BOUND, || async { cut.get(after.id).await.ok() })
        .await
        .expect("the node reads again once its link is back");

    // Nothing acknowledged was lost, whichever node is asked.
    for id in &acknowledged {
        other.get(*id).await.unwrap();
        cut.get(*id).await.unwrap();
    }
    eprintln!(
        "cut {CUT:?}: push answered in {push:?}, read in {read:?}, long poll (3 s) in {long_poll:?}; delayed job due \
         {:?} late; lease back {:?} after expiry; serving {:?} and reading {:?} after the heal",
        came_due.saturating_duration_since(due_at),
        came_back.saturating_duration_since(expires_at),
        serving.duration_since(healed_at),
        reading.duration_since(healed_at),
    );
    cut.close(Duration::from_secs(10)).await.unwrap();
    other.close(Duration::from_secs(10)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_records_its_jobs_outcomes_once_its_link_to_postgresql_is_back() {
    let db = TestDatabase::new();
    let proxy = Proxy::start(address(&db.url));
    let queue = Queue::open(&through(&db.url, &proxy)).await.unwrap();
    let mut ids = Vec::new();
    for _ in 0..4 {
        let push = Push::new("held").lease_timeout(Duration::from_secs(120));
        ids.push(queue.enqueue(push).await.unwrap().id);
    }
    // The handlers end when told to: after the link went silent, so that every finish meets the cut.
    let (release, released) = tokio::sync::watch::channel(false);
    let noting = NotingFailedFinishes {
        queue: queue.clone(),
        failed: Arc::default(),
    };
    let worker = cairn::Worker::builder(&noting, "patient")
        .handler("held", move |_| {
            let mut released = released.clone();
            async move {
                let _ = released.wait_for(|r| *r).await;
                Ok(())
            }
        })
        .start()
        .unwrap();
    poll(BOUND, || async {
        let mut running = 0;
        for id in &ids {
            if queue.get(*id).await.unwrap().state == JobState::Running {
                running += 1;
            }
        }
        (running == ids.len()).then_some(())
    })
    .await
    .expect("the worker runs every job");

    proxy.black_hole();
    release.send(true).unwrap();
    // The link comes back once a finish has failed for the cut (a call's deadline), to be made again; the others
    // are failing too or held in the cut link, to go through when it heals. (Waiting for all four to fail took
    // longer than the bound on a loaded machine, where calls queue behind each other's deadlines.)
    poll(BOUND, || async {
        (!noting.failed.lock().unwrap().is_empty()).then_some(())
    })
    .await
    .expect("a finish meets the cut");
    proxy.heal();

    poll(Duration::from_secs(40), || async {
        let mut done = 0;
        for id in &ids {
            if let Ok(job) = queue.get(*id).await
                && job.state == JobState::Completed
            {
                done += 1;
            }
        }
        (done == ids.len()).then_some(())
    })
    .await
    .expect("every job is finished once the link is back");
    for id in &ids {
        let job = queue.get(*id).await.unwrap();
        assert_eq!(job.history.len(), 1, "job {id} ran once: {:?}", job.history);
    }
    let report = worker.stop(Duration::from_secs(10)).await.unwrap();
    assert_eq!(report.finished, 4);
    // The writer has run a batch since the link came back (its sessions of the cut replaced), before it is asked
    // to stop within a deadline: what is tested here is the worker's outcomes, not a close racing the reconnect.
    queue.settle().await.unwrap();
    queue.close(Duration::from_secs(10)).await.unwrap();
}

/// A job leased through the node that leads the timed work, whose link then goes silent: the other node, busy with
/// traffic of its own, takes over the lead, finds the lease run out and hands the job out again within the lease,
/// the retry's delay and 2 s of the claim.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_leased_through_a_node_cut_off_comes_back_within_its_lease_and_retry_delay() {
    let db = TestDatabase::new();
    let proxy = Proxy::start(address(&db.url));
    let cut = Queue::open(&through(&db.url, &proxy)).await.unwrap();
    poll(BOUND, || async { leader(&db) })
        .await
        .expect("the first node leads");
    let other = Queue::open(&db.url).await.unwrap();
    let traffic = crate::due_times::Traffic::start(other.clone(), "traffic");
    let lease = Duration::from_secs(10);
    let delay = Duration::from_secs(1);
    let retry = cairn::RetryPolicy {
        max_attempts: 2,
        initial_delay: delay,
        multiplier: 1.0,
        max_delay: delay,
        jitter: 0.0,
    };
    let id = cut
        .enqueue(Push::new("held").queue("leased").retry(retry))
        .await
        .unwrap()
        .id;
    let claimed = cut
        .dequeue(Dequeue::new("gone").queue("leased").lease_timeout(lease))
        .await
        .unwrap();
    let claimed_at = Instant::now();
    assert_eq!(claimed.len(), 1);
    proxy.black_hole();

    let bound = lease + delay + Duration::from_secs(2);
    let (_, came) = poll(bound + Duration::from_secs(20), || async {
        other
            .dequeue(
                Dequeue::new("rescuer")
                    .queue("leased")
                    .wait(Duration::from_millis(500)),
            )
            .await
            .unwrap()
            .into_iter()
            .find(|c| c.job.id == id)
    })
    .await
    .expect("the job came back on the other node");
    let took = came - claimed_at;
    traffic.finish().await;
    eprintln!(
        "the job came back {took:?} after it was taken (lease {lease:?}, retry delay {delay:?})"
    );
    assert!(
        took <= bound,
        "came back {took:?} after the claim, past {bound:?}"
    );
    proxy.heal();
    cut.close(Duration::from_secs(10)).await.unwrap();
    other.close(Duration::from_secs(10)).await.unwrap();
}

/// The queue as a worker's backend, noting each job whose finish failed (a call refused, or its answer for the
/// job); every call goes to the queue unchanged.
#[derive(Clone)]
struct NotingFailedFinishes {
    queue: Queue,
    failed: Arc<Mutex<BTreeSet<JobId>>>,
}

impl NotingFailedFinishes {
    fn note(&self, finishes: &[Finish], answers: &cairn::Result<Vec<cairn::Result<()>>>) {
        let mut failed = self.failed.lock().unwrap();
        match answers {
            Err(_) => failed.extend(finishes.iter().map(|f| f.job)),
            Ok(answers) => failed.extend(
                finishes
                    .iter()
                    .zip(answers)
                    .filter(|(_, answer)| answer.is_err())
                    .map(|(f, _)| f.job),
            ),
        }
    }
}

impl cairn::Backend for NotingFailedFinishes {
    fn dequeue(&self, request: Dequeue) -> BoxFuture<'_, cairn::Result<Vec<ClaimedJob>>> {
        cairn::Backend::dequeue(&self.queue, request)
    }
    fn heartbeat<'a>(
        &'a self,
        lease: &'a Lease,
        progress: Option<Value>,
    ) -> BoxFuture<'a, cairn::Result<Timestamp>> {
        cairn::Backend::heartbeat(&self.queue, lease, progress)
    }
    fn checkpoint<'a>(
        &'a self,
        lease: &'a Lease,
        data: Value,
    ) -> BoxFuture<'a, cairn::Result<Timestamp>> {
        cairn::Backend::checkpoint(&self.queue, lease, data)
    }
    fn record_step<'a>(
        &'a self,
        lease: &'a Lease,
        name: cairn::StepName,
        result: Value,
    ) -> BoxFuture<'a, cairn::Result<cairn::Step>> {
        cairn::Backend::record_step(&self.queue, lease, name, result)
    }
    fn sleep<'a>(
        &'a self,
        lease: &'a Lease,
        name: cairn::StepName,
        wake: cairn::Wake,
    ) -> BoxFuture<'a, cairn::Result<cairn::Slept>> {
        cairn::Backend::sleep(&self.queue, lease, name, wake)
    }
    fn spawn<'a>(
        &'a self,
        lease: &'a Lease,
        name: cairn::StepName,
        children: Vec<cairn::Push>,
    ) -> BoxFuture<'a, cairn::Result<Vec<cairn::JobId>>> {
        cairn::Backend::spawn(&self.queue, lease, name, children)
    }
    fn join<'a>(
        &'a self,
        lease: &'a Lease,
        name: cairn::StepName,
    ) -> BoxFuture<'a, cairn::Result<cairn::Joined>> {
        cairn::Backend::join(&self.queue, lease, name)
    }
    fn wait_for_signal<'a>(
        &'a self,
        lease: &'a Lease,
        name: cairn::StepName,
        key: cairn::SignalKey,
        timeout: std::time::Duration,
    ) -> BoxFuture<'a, cairn::Result<cairn::SignalWait>> {
        cairn::Backend::wait_for_signal(&self.queue, lease, name, key, timeout)
    }
    fn update<'a>(&'a self, lease: &'a Lease, progress: Value) -> BoxFuture<'a, cairn::Result<()>> {
        cairn::Backend::update(&self.queue, lease, progress)
    }
    fn finish<'a>(
        &'a self,
        lease: &'a Lease,
        data: Option<Value>,
    ) -> BoxFuture<'a, cairn::Result<()>> {
        Box::pin(async move {
            let answer = cairn::Backend::finish(&self.queue, lease, data).await;
            if answer.is_err() {
                self.failed.lock().unwrap().insert(lease.job);
            }
            answer
        })
    }
    fn finish_many(
        &self,
        finishes: Vec<Finish>,
    ) -> BoxFuture<'_, cairn::Result<Vec<cairn::Result<()>>>> {
        Box::pin(async move {
            let answers = cairn::Backend::finish_many(&self.queue, finishes.clone()).await;
            self.note(&finishes, &answers);
            answers
        })
    }
    fn finish_many_unhurried(
        &self,
        finishes: Vec<Finish>,
        taken: tokio::sync::oneshot::Sender<()>,
    ) -> BoxFuture<'_, cairn::Result<Vec<cairn::Result<()>>>> {
        Box::pin(async move {
            let answers =
                cairn::Backend::finish_many_unhurried(&self.queue, finishes.clone(), taken).await;
            self.note(&finishes, &answers);
            answers
        })
    }
    fn holds_finishes_for_company(&self) -> bool {
        cairn::Backend::holds_finishes_for_company(&self.queue)
    }
    fn retry<'a>(
        &'a self,
        lease: &'a Lease,
        error: &'a str,
        delay: Option<Duration>,
    ) -> BoxFuture<'a, cairn::Result<JobState>> {
        cairn::Backend::retry(&self.queue, lease, error, delay)
    }
    fn fail<'a>(
        &'a self,
        lease: &'a Lease,
        group: &'a str,
        message: &'a str,
    ) -> BoxFuture<'a, cairn::Result<()>> {
        cairn::Backend::fail(&self.queue, lease, group, message)
    }
    fn release<'a>(&'a self, lease: &'a Lease) -> BoxFuture<'a, cairn::Result<()>> {
        cairn::Backend::release(&self.queue, lease)
    }
    fn worker_stopped<'a>(&'a self, worker: &'a str) -> BoxFuture<'a, cairn::Result<()>> {
        cairn::Backend::worker_stopped(&self.queue, worker)
    }
}
