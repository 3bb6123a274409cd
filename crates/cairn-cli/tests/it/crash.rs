//! SIGKILL during load: clients enqueue and workers take and finish jobs over HTTP while the server is killed
//! again and again. After each restart, everything acknowledged is there, nothing is held twice, a worker that
//! outlived the server finishes its job under the lease it had, and jobs whose worker is gone run again when their
//! lease expires.

use cairn::Jobs;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cairn::{Dequeue, JobId, JobState, Lease, Push, RetryPolicy};
use cairn_client::Client;
use serde_json::json;

use crate::harness::{TestServer, all_jobs, eventually};

/// What the clients were told.
#[derive(Default)]
struct Acknowledged {
    /// Enqueues the server acknowledged, with the data sent.
    enqueued: BTreeMap<JobId, u64>,
    /// Finishes the server acknowledged.
    finished: BTreeSet<JobId>,
    /// The leases of jobs a worker took and has not finished (it held them when the server died).
    held: BTreeMap<JobId, Lease>,
}

/// How long a lease lasts: long enough for a round, short enough that a job claimed for a reply that never
/// arrived comes back quickly.
const LEASE: Duration = Duration::from_secs(3);

/// Enqueues one job after another until the server goes away.
async fn produce(client: Client, acked: Arc<Mutex<Acknowledged>>, producer: u64) {
    for n in 0.. {
        let value = producer * 1_000_000 + n;
        match client
            .enqueue(
                Push::new("crash.job")
                    .data(json!(value))
                    .lease_timeout(LEASE)
                    .retry(RetryPolicy::immediate(100)),
            )
            .await
        {
            Ok(enqueued) => {
                acked.lock().unwrap().enqueued.insert(enqueued.id, value);
            }
            Err(_) => return,
        }
    }
}

/// Takes and finishes jobs until the server goes away.
async fn consume(client: Client, acked: Arc<Mutex<Acknowledged>>, worker: String) {
    loop {
        let request = Dequeue::new(worker.as_str())
            .limit(4)
            .wait(Duration::from_millis(200));
        let Ok(claimed) = client.dequeue(request).await else {
            return;
        };
        for c in claimed {
            acked.lock().unwrap().held.insert(c.job.id, c.lease.clone());
            match client.finish(&c.lease, None).await {
                Ok(()) => {
                    let mut acked = acked.lock().unwrap();
                    acked.held.remove(&c.job.id);
                    acked.finished.insert(c.job.id);
                }
                Err(e) if e.is_lease_lost() => panic!("a live lease was refused: {e}"),
                Err(_) => return,
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_during_load_loses_nothing_acknowledged() {
    let mut server = TestServer::spawn();
    let acked = Arc::new(Mutex::new(Acknowledged::default()));
    for round in 0..4u64 {
        let client = server.client();
        let finished_before = acked.lock().unwrap().finished.len();
        let mut tasks = tokio::task::JoinSet::new();
        for p in 0..3 {
            tasks.spawn(produce(client.clone(), acked.clone(), round * 10 + p));
        }
        for w in 0..2 {
            tasks.spawn(consume(
                client.clone(),
                acked.clone(),
                format!("w{round}-{w}"),
            ));
        }
        // Let the load run, then kill the server in the middle of it, at a different moment each round: once it
        // has acknowledged 20 finishes more each round.
        let finishes = 20 * (round as usize + 1);
        eventually(Duration::from_secs(30), "the load runs", || async {
            acked.lock().unwrap().finished.len() >= finished_before + finishes
        })
        .await;
        let mut killed = tokio::task::spawn_blocking(move || {
            server.kill();
            server
        })
        .await
        .unwrap();
        while tasks.join_next().await.is_some() {}

        killed.start();
        server = killed;
        let client = server.client();
        let jobs = all_jobs(&client).await;
        let still_held = check_round(round, &jobs, &acked.lock().unwrap());
        // The workers outlived the server: they finish what they held, under the leases they had.
        for lease in still_held {
            client.finish(&lease, None).await.unwrap_or_else(|e| {
                panic!(
                    "round {round}: job {}'s lease survives the restart: {e}",
                    lease.job
                )
            });
            let mut acked = acked.lock().unwrap();
            acked.held.remove(&lease.job);
            acked.finished.insert(lease.job);
        }
    }
    // After the last restart, every job can be taken and finished exactly once: those claimed for replies that
    // never arrived come back when their leases expire.
    let client = server.client();
    let mut seen = BTreeSet::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let claimed = client
            .dequeue(
                // A lease long enough to finish a hundred jobs one by one on a loaded machine: the jobs' own
                // 3 s lease is for the crash rounds, where it brings orphans back quickly.
                Dequeue::new("final")
                    .limit(100)
                    .wait(Duration::from_millis(500))
                    .lease_timeout(Duration::from_secs(120)),
            )
            .await
            .unwrap();
        if claimed.is_empty() {
            let jobs = all_jobs(&client).await;
            if jobs.iter().all(|j| j.state == JobState::Completed) {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "orphaned jobs came back in time"
            );
            continue;
        }
        for c in claimed {
            assert!(
                seen.insert(c.job.id),
                "job {} was handed out twice",
                c.job.id
            );
            client.finish(&c.lease, None).await.unwrap();
        }
    }
    let jobs = all_jobs(&client).await;
    assert!(jobs.iter().all(|j| j.state == JobState::Completed));
}

/// Checks the database after a restart against what the clients were told; returns the leases of the jobs a
/// worker held when the server died, which must still be running under those leases.
fn check_round(round: u64, jobs: &[cairn::Job], acked: &Acknowledged) -> Vec<Lease> {
    let by_id: BTreeMap<JobId, &cairn::Job> = jobs.iter().map(|j| (j.id, j)).collect();
    assert!(
        acked.enqueued.len() > 10 * (round as usize + 1),
        "round {round}: the load ran ({} enqueues)",
        acked.enqueued.len()
    );
    for (id, value) in &acked.enqueued {
        let job = by_id
            .get(id)
            .unwrap_or_else(|| panic!("round {round}: acknowledged job {id} is missing"));
        assert_eq!(
            job.data,
            json!(value),
            "round {round}: job {id} has its data"
        );
    }
    for id in &acked.finished {
        assert_eq!(
            by_id[id].state,
            JobState::Completed,
            "round {round}: acknowledged finish of {id}"
        );
    }
    let mut still_held = Vec::new();
    for (id, lease) in &acked.held {
        let job = by_id[id];
        match job.state {
            // The finish was committed, but its answer was lost with the server.
            JobState::Completed => {}
            JobState::Running => {
                assert_eq!(
                    job.worker.as_ref(),
                    Some(&lease.worker),
                    "round {round}: job {id} is still held by the worker that took it"
                );
                still_held.push(lease.clone());
            }
            other => panic!("round {round}: job {id}, held at the kill, is {other}"),
        }
    }
    still_held
}
