//! `cairn serve` nodes whose PostgreSQL server restarts under them, on a cluster of the test's own (the shared one
//! serves the other tests meanwhile): once the database is back, no request fails, and a job pushed on one node
//! wakes a worker parked on another as before; stopped hard three times and one node SIGKILLed under load, nothing
//! acknowledged is lost, no job is held by two workers at once, and both nodes serve at the end.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cairn::__private::PrivateCluster;
use cairn::{Dequeue, ErrorKind, Job, JobId, JobState, Push, RetryPolicy};
use cairn_client::Client;
use serde_json::json;

use crate::harness::{TestServer, all_jobs};

async fn start_cluster() -> PrivateCluster {
    tokio::task::spawn_blocking(PrivateCluster::start)
        .await
        .unwrap()
}

/// Stops the database (`fast` or `immediate`) and starts it again; returns once it accepts sessions.
async fn restart(cluster: &Arc<PrivateCluster>, mode: &'static str, down_for: Duration) {
    let c = cluster.clone();
    tokio::task::spawn_blocking(move || c.down(mode))
        .await
        .unwrap();
    tokio::time::sleep(down_for).await;
    let c = cluster.clone();
    tokio::task::spawn_blocking(move || c.up()).await.unwrap();
}

/// An error a client may see while the database is down: a status that says to try again. Anything else (a `500`
/// is [`ErrorKind::Storage`]) fails the test.
fn assert_retryable(what: &str, e: &cairn::Error) {
    assert_eq!(e.kind(), ErrorKind::Unavailable, "{what}: {e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_postgresql_restarts_no_request_fails_and_nodes_still_wake_each_other() {
    let cluster = Arc::new(start_cluster().await);
    let nodes = [
        TestServer::spawn_on_postgres(&cluster.url, &[]),
        TestServer::spawn_on_postgres(&cluster.url, &[]),
    ];
    let clients: Vec<Client> = nodes.iter().map(TestServer::client).collect();
    let mut ids = Vec::new();
    for client in &clients {
        for _ in 0..5 {
            ids.push(client.enqueue(Push::new("kept")).await.unwrap().id);
        }
    }
    for mode in ["fast", "immediate"] {
        // Reads at once on every node, so that each holds several pooled read sessions for the restart to close.
        read_all(&clients, &ids).await.unwrap();
        restart(&cluster, mode, Duration::from_millis(500)).await;

        // The database is back: every request from now on succeeds, the first ones too.
        read_all(&clients, &ids)
            .await
            .unwrap_or_else(|e| panic!("a read after a {mode} restart failed: {e}"));
        for client in &clients {
            let pushed = client
                .enqueue(Push::new("after").data(json!(mode)))
                .await
                .unwrap_or_else(|e| panic!("a push after a {mode} restart failed: {e}"));
            ids.push(pushed.id);
        }

        // A worker parked on the second node is woken by a push on the first, as before the restart.
        let parked = clients[1].clone();
        let waiting = tokio::spawn(async move {
            parked
                .dequeue(
                    Dequeue::new("parked")
                        .queue(format!("wake-{mode}"))
                        .wait(Duration::from_secs(20)),
                )
                .await
        });
        tokio::time::sleep(Duration::from_millis(500)).await;
        let pushed_at = Instant::now();
        let woken = clients[0]
            .enqueue(Push::new("wake").queue(format!("wake-{mode}")))
            .await
            .unwrap()
            .id;
        let claimed = waiting.await.unwrap().unwrap();
        let waited = pushed_at.elapsed();
        assert_eq!(claimed.len(), 1, "the parked worker got the job");
        assert_eq!(claimed[0].job.id, woken);
        assert!(
            waited < Duration::from_secs(10),
            "after a {mode} restart, the parked worker was woken by the push ({waited:?}), not by its wait's end"
        );
        clients[1].finish(&claimed[0].lease, None).await.unwrap();
    }
    for id in &ids {
        clients[0].get(*id).await.unwrap();
    }
}

/// Reads every job in `ids` on every node, eight at a time per node, so that each node needs several sessions.
async fn read_all(clients: &[Client], ids: &[JobId]) -> cairn::Result<()> {
    for client in clients {
        for chunk in ids.chunks(8) {
            let mut reads = tokio::task::JoinSet::new();
            for id in chunk {
                let (client, id) = (client.clone(), *id);
                reads.spawn(async move { client.get(id).await });
            }
            while let Some(read) = reads.join_next().await {
                read.unwrap()?;
            }
        }
    }
    Ok(())
}

/// What the clients were told: jobs enqueued (with their data) and finishes acknowledged.
#[derive(Default)]
struct Acknowledged {
    enqueued: BTreeMap<JobId, u64>,
    finished: BTreeSet<JobId>,
}

/// The lease the consumers ask for: jobs a killed node's workers held come back this long after they took them.
const CONSUMER_LEASE: Duration = Duration::from_secs(5);

/// How long a client waits after a refusal that says to try again.
const RETRY_PAUSE: Duration = Duration::from_millis(100);

/// Enqueues one job after another on `client` until told to stop, riding out refusals.
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
            .retry(RetryPolicy::immediate(100));
        match client.enqueue(push).await {
            Ok(enqueued) => {
                acked.lock().unwrap().enqueued.insert(enqueued.id, value);
            }
            Err(e) => {
                assert_retryable("a push", &e);
                tokio::time::sleep(RETRY_PAUSE).await;
            }
        }
    }
}

/// Takes and finishes jobs on `client` until told to stop, riding out refusals.
async fn consume(
    client: Client,
    acked: Arc<Mutex<Acknowledged>>,
    worker: String,
    stop: Arc<AtomicBool>,
) {
    while !stop.load(Ordering::SeqCst) {
        let request = Dequeue::new(worker.as_str())
            .limit(4)
            .wait(Duration::from_millis(200))
            .lease_timeout(CONSUMER_LEASE);
        let claimed = match client.dequeue(request).await {
            Ok(claimed) => claimed,
            Err(e) => {
                assert_retryable("a dequeue", &e);
                tokio::time::sleep(RETRY_PAUSE).await;
                continue;
            }
        };
        for c in claimed {
            match client.finish(&c.lease, None).await {
                Ok(()) => {
                    acked.lock().unwrap().finished.insert(c.job.id);
                }
                // The finish may or may not have been applied: the job ends, or comes back when its lease runs out.
                Err(e) if e.kind() == ErrorKind::Unavailable => {}
                // A finish answered `Unavailable` and applied is finished again by nobody; anything else is a bug.
                Err(e) => panic!("a finish under a live lease failed: {e}"),
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgresql_stopped_hard_three_times_and_a_node_killed_under_load_loses_nothing() {
    let cluster = Arc::new(start_cluster().await);
    let mut nodes = [
        TestServer::spawn_on_postgres(&cluster.url, &[]),
        TestServer::spawn_on_postgres(&cluster.url, &[]),
    ];
    let acked = Arc::new(Mutex::new(Acknowledged::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = tokio::task::JoinSet::new();
    let start_load =
        |tasks: &mut tokio::task::JoinSet<()>, node: usize, client: Client, generation: u64| {
            tasks.spawn(produce(
                client.clone(),
                acked.clone(),
                generation * 10 + node as u64,
                stop.clone(),
            ));
            for w in 0..2 {
                tasks.spawn(consume(
                    client.clone(),
                    acked.clone(),
                    format!("g{generation}-n{node}-w{w}"),
                    stop.clone(),
                ));
            }
        };
    for (i, node) in nodes.iter().enumerate() {
        start_load(&mut tasks, i, node.client(), 0);
    }
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_secs(2)).await;
        restart(&cluster, "immediate", Duration::from_secs(1)).await;
    }
    // One node dies with SIGKILL, holding whatever its workers had taken; it comes back on the same database.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let killed = &mut nodes[1];
    tokio::task::block_in_place(|| killed.kill());
    tokio::time::sleep(Duration::from_millis(500)).await;
    tokio::task::block_in_place(|| nodes[1].start());
    start_load(&mut tasks, 1, nodes[1].client(), 1);
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.store(true, Ordering::SeqCst);
    while let Some(result) = tasks.join_next().await {
        result.unwrap();
    }

    // Both nodes serve, and drain what is left: every job comes back, none is handed out twice.
    let clients: Vec<Client> = nodes.iter().map(TestServer::client).collect();
    let mut seen = BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let mut idle = true;
        for client in &clients {
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
                    "job {} was handed out twice in the drain",
                    c.job.id
                );
                client.finish(&c.lease, None).await.unwrap();
            }
        }
        if idle {
            let stats = clients[0].queue_stats().await.unwrap();
            let open: u64 = stats
                .iter()
                .map(|q| q.scheduled + q.queued + q.running + q.stalled)
                .sum();
            if open == 0 {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "every job came back in time ({open} still open)"
            );
        }
    }

    let jobs = {
        let mut full = Vec::new();
        for job in all_jobs(&clients[0]).await {
            full.push(clients[0].get(job.id).await.unwrap());
        }
        full
    };
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
    for job in &jobs {
        let completed = job
            .history
            .iter()
            .filter(|a| a.outcome == Some(cairn::AttemptOutcome::Completed))
            .count();
        assert!(
            completed <= 1,
            "job {} was finished {completed} times",
            job.id
        );
        for pair in job.history.windows(2) {
            let ended = pair[0].finished_at.unwrap_or_else(|| {
                panic!("job {}: attempt {} never ended", job.id, pair[0].number)
            });
            assert!(
                ended <= pair[1].started_at,
                "job {}: attempt {} overlaps attempt {}",
                job.id,
                pair[0].number,
                pair[1].number
            );
        }
    }
    eprintln!(
        "three hard stops and a node killed: {} jobs acknowledged, {} finishes acknowledged, none lost",
        acked.enqueued.len(),
        acked.finished.len()
    );
}
