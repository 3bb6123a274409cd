//! SIGKILL during load: clients enqueue and workers take and finish jobs over HTTP while the server is killed
//! again and again. After each restart, everything acknowledged is there, nothing is held twice, and jobs that
//! were running are recovered.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cairn::{Dequeue, JobFilter, JobId, JobState, Push};
use cairn_client::Client;
use serde_json::json;

use crate::harness::TestServer;

/// What the clients were told.
#[derive(Default)]
struct Acknowledged {
    /// Enqueues the server acknowledged, with the data sent.
    enqueued: BTreeMap<JobId, u64>,
    /// Finishes the server acknowledged.
    finished: BTreeSet<JobId>,
    /// Jobs some worker held when the server died (its finish was never acknowledged).
    taken: BTreeSet<JobId>,
}

/// Enqueues one job after another until the server goes away.
async fn produce(client: Client, acked: Arc<Mutex<Acknowledged>>, producer: u64) {
    for n in 0.. {
        let value = producer * 1_000_000 + n;
        match client
            .enqueue(Push::new("crash.job").data(json!(value)))
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
            acked.lock().unwrap().taken.insert(c.job.id);
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

async fn all_jobs(client: &Client) -> Vec<cairn::Job> {
    let mut jobs = Vec::new();
    let mut before = None;
    loop {
        let page = client
            .list(JobFilter {
                before,
                limit: 1000,
                ..JobFilter::default()
            })
            .await
            .unwrap();
        jobs.extend(page.jobs);
        match page.next {
            Some(next) => before = Some(next),
            None => return jobs,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_during_load_loses_nothing_acknowledged() {
    let mut server = TestServer::spawn();
    let acked = Arc::new(Mutex::new(Acknowledged::default()));
    for round in 0..4u64 {
        let client = server.client();
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
        // Let the load run, then kill the server in the middle of it, at a different moment each round.
        tokio::time::sleep(Duration::from_millis(300 + 150 * round)).await;
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
        let held_at_kill = check_round(round, &jobs, &acked.lock().unwrap());
        for id in held_at_kill {
            let history = client.get(id).await.unwrap().history;
            assert!(
                history
                    .iter()
                    .any(|a| a.outcome == Some(cairn::AttemptOutcome::Crashed)),
                "round {round}: job {id}'s history records the crash: {history:?}"
            );
        }
    }
    // After the last restart, every job can be taken and finished exactly once.
    let client = server.client();
    let mut seen = BTreeSet::new();
    loop {
        let claimed = client
            .dequeue(Dequeue::new("final").limit(100))
            .await
            .unwrap();
        if claimed.is_empty() {
            break;
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

/// Checks the database after a restart against what the clients were told; returns the jobs a worker held when
/// the server died and that are queued again (their history must say they crashed).
fn check_round(round: u64, jobs: &[cairn::Job], acked: &Acknowledged) -> Vec<JobId> {
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
    for job in jobs {
        // Recovery at open: nothing is left running for a worker that is gone.
        assert_ne!(
            job.state,
            JobState::Running,
            "round {round}: job {} still running",
            job.id
        );
        if acked.taken.contains(&job.id) && !acked.finished.contains(&job.id) {
            assert!(
                matches!(job.state, JobState::Queued | JobState::Completed),
                "round {round}: a job held at the kill is recovered, got {:?}",
                job.state
            );
        }
    }
    jobs.iter()
        .filter(|j| acked.taken.contains(&j.id) && j.state == JobState::Queued)
        .map(|j| j.id)
        .collect()
}
