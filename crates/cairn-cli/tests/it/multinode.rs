//! Several `cairn serve` processes on one PostgreSQL database (a database of its own on the cluster `scripts/test`
//! starts): a job enqueued on one node wakes a worker waiting on another; a node killed with SIGKILL mid-load loses
//! nothing acknowledged and its workers' jobs are taken by the others once their leases expire; no job is ever held
//! by two workers at once; a recurring template's slot runs once, even when the node leading the timed work dies.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cairn::{Dequeue, Job, JobId, JobState, MissedSlots, Push, Recurring, RetryPolicy};
use cairn_client::Client;
use serde_json::json;

use crate::harness::{TestDatabase, TestServer, all_jobs};

/// Three servers on one fresh database, started one after another (the first leads the timed work).
fn cluster(database: &TestDatabase) -> Vec<TestServer> {
    (0..3)
        .map(|_| TestServer::spawn_on_postgres(&database.url, &[]))
        .collect()
}

/// Every job, with its history, read through `client`.
async fn all_jobs_with_history(client: &Client) -> Vec<Job> {
    let mut full = Vec::new();
    for job in all_jobs(client).await {
        full.push(client.get(job.id).await.unwrap());
    }
    full
}

/// No job was ever held by two workers at once: each attempt in its history ended before the next began.
fn assert_never_held_twice(jobs: &[Job]) {
    for job in jobs {
        for pair in job.history.windows(2) {
            let ended = pair[0].finished_at.unwrap_or_else(|| {
                panic!("job {}: attempt {} never ended", job.id, pair[0].number)
            });
            assert!(
                ended <= pair[1].started_at,
                "job {}: attempt {} ({} to {ended}) overlaps attempt {} from {}",
                job.id,
                pair[0].number,
                pair[0].started_at,
                pair[1].number,
                pair[1].started_at
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_enqueued_on_one_node_wakes_workers_waiting_on_the_others() {
    let database = TestDatabase::new();
    let nodes = cluster(&database);
    let mut waiting = Vec::new();
    for i in [1, 2] {
        let client = nodes[i].client();
        waiting.push(tokio::spawn(async move {
            client
                .dequeue(Dequeue::new(format!("w{i}").as_str()).wait(Duration::from_secs(50)))
                .await
                .unwrap()
        }));
    }
    // Both workers are parked on their nodes (a waiting worker counts as seen) before anything is enqueued.
    let observer = nodes[0].client();
    crate::harness::eventually(Duration::from_secs(20), "both workers wait", || {
        let observer = observer.clone();
        async move {
            let workers = observer.workers().await.unwrap();
            ["w1", "w2"]
                .iter()
                .all(|w| workers.iter().any(|seen| seen.id.as_str() == *w))
        }
    })
    .await;
    let pushed: BTreeSet<JobId> = [
        observer.enqueue(Push::new("a")).await.unwrap().id,
        observer.enqueue(Push::new("b")).await.unwrap().id,
    ]
    .into();
    // Without a wake-up from node 0, each would return empty only after its 50 s wait.
    let mut taken = BTreeSet::new();
    for handle in waiting {
        let claimed = handle.await.unwrap();
        assert_eq!(claimed.len(), 1, "each waiting worker gets a job");
        assert!(taken.insert(claimed[0].job.id));
    }
    assert_eq!(taken, pushed);
}

/// What the clients were told.
#[derive(Default)]
struct Acknowledged {
    enqueued: BTreeMap<JobId, u64>,
    finished: BTreeSet<JobId>,
}

/// How long a job's lease lasts: the jobs the doomed worker held come back this long after it took them.
const LEASE: Duration = Duration::from_secs(3);

/// The lease the consumers ask for: the killed node's consumers' jobs come back after it, in the drain.
const CONSUMER_LEASE: Duration = Duration::from_secs(10);

/// Enqueues one job after another on `client` until told to stop or the node goes away.
async fn produce(
    client: Client,
    acked: Arc<Mutex<Acknowledged>>,
    producer: u64,
    stop: Arc<AtomicBool>,
) {
    for n in 0.. {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let value = producer * 1_000_000 + n;
        let push = Push::new("load")
            .data(json!(value))
            .lease_timeout(LEASE)
            .retry(RetryPolicy::immediate(100));
        match client.enqueue(push).await {
            Ok(enqueued) => {
                acked.lock().unwrap().enqueued.insert(enqueued.id, value);
            }
            Err(_) => return,
        }
    }
}

/// Takes and finishes jobs on `client` until told to stop or the node goes away.
async fn consume(
    client: Client,
    acked: Arc<Mutex<Acknowledged>>,
    worker: String,
    stop: Arc<AtomicBool>,
) {
    while !stop.load(Ordering::SeqCst) {
        // A lease far longer than a finish takes, even on a loaded machine: a refused finish would be the test's
        // doing. The jobs' own short lease is for those a dead node's workers held.
        let request = Dequeue::new(worker.as_str())
            .limit(4)
            .wait(Duration::from_millis(200))
            .lease_timeout(CONSUMER_LEASE);
        let Ok(claimed) = client.dequeue(request).await else {
            return;
        };
        for c in claimed {
            match client.finish(&c.lease, None).await {
                Ok(()) => {
                    acked.lock().unwrap().finished.insert(c.job.id);
                }
                Err(e) if e.is_lease_lost() => panic!("a live lease was refused: {e}"),
                Err(_) => return,
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_killed_mid_load_loses_nothing_and_the_others_take_its_jobs() {
    let database = TestDatabase::new();
    let mut nodes = cluster(&database);
    let acked = Arc::new(Mutex::new(Acknowledged::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = tokio::task::JoinSet::new();
    for (i, node) in nodes.iter().enumerate() {
        let client = node.client();
        tasks.spawn(produce(
            client.clone(),
            acked.clone(),
            i as u64,
            stop.clone(),
        ));
        for w in 0..2 {
            tasks.spawn(consume(
                client.clone(),
                acked.clone(),
                format!("n{i}-w{w}"),
                stop.clone(),
            ));
        }
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // A worker on node 0 takes jobs it will never finish: it dies with the node.
    let orphaned: Vec<JobId> = nodes[0]
        .client()
        .dequeue(Dequeue::new("doomed").limit(5).wait(Duration::from_secs(5)))
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.job.id)
        .collect();
    assert!(!orphaned.is_empty(), "the doomed worker took jobs");
    // Node 0 started first and leads the timed work: killing it also tests that another node takes the lead.
    // Its other workers die with it too, holding whatever they had taken.
    let mut killed = nodes.remove(0);
    tokio::task::spawn_blocking(move || killed.kill())
        .await
        .unwrap();
    // The others go on, past the lease of every job the dead node's workers held.
    tokio::time::sleep(LEASE + Duration::from_secs(2)).await;
    stop.store(true, Ordering::SeqCst);
    while let Some(result) = tasks.join_next().await {
        result.unwrap();
    }

    // Drain through the survivors: every job comes back, and none is handed out twice.
    let survivors: Vec<Client> = nodes.iter().map(TestServer::client).collect();
    let mut seen = BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(90);
    'drain: loop {
        let mut idle = true;
        for client in &survivors {
            let claimed = client
                .dequeue(
                    Dequeue::new("drain")
                        .limit(100)
                        .wait(Duration::from_millis(200))
                        .lease_timeout(Duration::from_secs(120)),
                )
                .await
                .unwrap();
            for c in claimed {
                idle = false;
                assert!(
                    seen.insert(c.job.id),
                    "job {} was handed out twice",
                    c.job.id
                );
                client.finish(&c.lease, None).await.unwrap();
                acked.lock().unwrap().finished.insert(c.job.id);
            }
        }
        if idle {
            let stats = survivors[0].queue_stats().await.unwrap();
            let open: u64 = stats
                .iter()
                .map(|q| q.scheduled + q.queued + q.running + q.stalled)
                .sum();
            if open == 0 {
                break 'drain;
            }
            assert!(
                Instant::now() < deadline,
                "the dead node's jobs came back in time"
            );
        }
    }

    let jobs = all_jobs_with_history(&survivors[1]).await;
    let by_id: BTreeMap<JobId, &Job> = jobs.iter().map(|j| (j.id, j)).collect();
    let acked = acked.lock().unwrap();
    assert!(
        acked.enqueued.len() > 30,
        "the load ran ({} enqueues)",
        acked.enqueued.len()
    );
    for (id, value) in &acked.enqueued {
        let job = by_id
            .get(id)
            .unwrap_or_else(|| panic!("acknowledged job {id} is missing"));
        assert_eq!(job.data, json!(value), "job {id} has its data");
        assert_eq!(job.state, JobState::Completed, "job {id} ran to the end");
    }
    for id in &acked.finished {
        assert_eq!(
            by_id[id].state,
            JobState::Completed,
            "acknowledged finish of {id}"
        );
    }
    assert_never_held_twice(&jobs);
    // What the dead node's worker held ran again after its leases expired, on another node.
    for id in &orphaned {
        let job = by_id[id];
        assert_eq!(job.history[0].worker.as_str(), "doomed");
        assert_eq!(
            job.history[0].outcome,
            Some(cairn::AttemptOutcome::LeaseExpired),
            "job {id}, held on the killed node, came back through lease expiry"
        );
        assert_ne!(job.history.last().unwrap().worker.as_str(), "doomed");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recurring_slot_runs_once_across_nodes_even_when_the_leader_dies() {
    let database = TestDatabase::new();
    let mut nodes = cluster(&database);
    nodes[1]
        .client()
        .set_recurring(Recurring {
            key: "tick".into(),
            cron: "* * * * * *".into(),
            time_zone: "UTC".into(),
            missed: MissedSlots::RunAll,
            job: Push::new("tick").lease_timeout(LEASE),
        })
        .await
        .unwrap();
    let acked = Arc::new(Mutex::new(Acknowledged::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = tokio::task::JoinSet::new();
    for (i, node) in nodes.iter().enumerate() {
        tasks.spawn(consume(
            node.client(),
            acked.clone(),
            format!("n{i}"),
            stop.clone(),
        ));
    }
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let mut leader = nodes.remove(0);
    tokio::task::spawn_blocking(move || leader.kill())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(3500)).await;
    stop.store(true, Ordering::SeqCst);
    while let Some(result) = tasks.join_next().await {
        result.unwrap();
    }

    let jobs = all_jobs_with_history(&nodes[0].client()).await;
    let mut slots = BTreeSet::new();
    for job in &jobs {
        assert!(
            slots.insert(job.run_at),
            "two jobs for the slot {}",
            job.run_at
        );
    }
    // One job a second over about six seconds, created by the first leader and then by its successor.
    assert!(
        jobs.len() >= 4,
        "slots kept coming after the leader died: {}",
        jobs.len()
    );
    let first = slots.first().copied().unwrap();
    let last = slots.last().copied().unwrap();
    assert_eq!(
        slots.len() as i64,
        first.duration_until(last).as_secs() + 1,
        "every second between the first and the last slot has its job, once"
    );
    assert_never_held_twice(&jobs);
}
