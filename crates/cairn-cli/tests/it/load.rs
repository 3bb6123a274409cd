//! Load for the tests of servers that die or lose their database: producers and consumers that record what the
//! servers acknowledged and ride out refusals that say to try again, and the checks on the jobs afterwards.

use cairn::Jobs;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cairn::{Dequeue, ErrorKind, Job, JobId, JobState, Push, RetryPolicy};
use cairn_client::Client;
use serde_json::json;

use crate::harness::{all_jobs, eventually};

/// What the clients were told: jobs enqueued (with their data) and finishes acknowledged.
#[derive(Default)]
pub struct Acknowledged {
    pub enqueued: BTreeMap<JobId, u64>,
    pub finished: BTreeSet<JobId>,
}

/// How long a client waits after a refusal that says to try again.
const RETRY_PAUSE: Duration = Duration::from_millis(100);

/// Producers and consumers running until [`Load::stop`].
pub struct Load {
    acked: Arc<Mutex<Acknowledged>>,
    stop: Arc<AtomicBool>,
    tasks: tokio::task::JoinSet<()>,
}

impl Load {
    pub fn new() -> Load {
        Load {
            acked: Arc::default(),
            stop: Arc::default(),
            tasks: tokio::task::JoinSet::new(),
        }
    }

    /// Enqueues one job after another on `client`, each with `job_lease` and the data `producer * 1e6 + n`.
    pub fn producer(&mut self, client: Client, producer: u64, job_lease: Duration) {
        let (acked, stop) = (self.acked.clone(), self.stop.clone());
        self.tasks.spawn(async move {
            for n in 0.. {
                if stop.load(Ordering::SeqCst) {
                    return;
                }
                let value = producer * 1_000_000 + n;
                let push = Push::new("load")
                    .data(json!(value))
                    .lease_timeout(job_lease)
                    .retry(RetryPolicy::immediate(100));
                match client.enqueue(push).await {
                    Ok(enqueued) => {
                        acked.lock().unwrap().enqueued.insert(enqueued.id, value);
                    }
                    Err(e) => ride_out("a push", &e).await,
                }
            }
        });
    }

    /// Takes and finishes jobs on `client` as `worker`, with leases of `lease`.
    pub fn consumer(&mut self, client: Client, worker: String, lease: Duration) {
        self.consume(client, worker, lease, false);
    }

    /// [`Load::consumer`] across a failover to a standby: a claim answered just before the primary died may not have
    /// reached the standby (claims commit without waiting for it, by design: one lost leaves the job unleased), so a
    /// finish refused for its lease is taken as that, and the job runs again.
    pub fn consumer_across_failover(&mut self, client: Client, worker: String, lease: Duration) {
        self.consume(client, worker, lease, true);
    }

    fn consume(&mut self, client: Client, worker: String, lease: Duration, across_failover: bool) {
        let (acked, stop) = (self.acked.clone(), self.stop.clone());
        self.tasks.spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                let request = Dequeue::new(worker.as_str())
                    .limit(4)
                    .wait(Duration::from_millis(200))
                    .lease_timeout(lease);
                let claimed = match client.dequeue(request).await {
                    Ok(claimed) => claimed,
                    Err(e) => {
                        ride_out("a dequeue", &e).await;
                        continue;
                    }
                };
                for c in claimed {
                    match client.finish(&c.lease, None).await {
                        Ok(()) => {
                            acked.lock().unwrap().finished.insert(c.job.id);
                        }
                        // Applied or not: the job ended, or comes back when its lease runs out.
                        Err(e) if e.kind() == ErrorKind::Unavailable => {}
                        Err(e) if across_failover && e.kind() == ErrorKind::LeaseLost => {}
                        // The lease is far longer than a finish takes: a refusal is a bug.
                        Err(e) => panic!("a finish under a live lease failed: {e}"),
                    }
                }
            }
        });
    }

    /// Waits until the servers have acknowledged `finishes` more finishes than when called: the load runs, whatever
    /// happened before. Fails the test after a minute.
    pub async fn runs_for(&self, finishes: usize, what: &str) {
        let from = self.acked.lock().unwrap().finished.len();
        eventually(Duration::from_secs(60), what, || async {
            self.acked.lock().unwrap().finished.len() >= from + finishes
        })
        .await;
    }

    /// Stops every producer and consumer; what the servers acknowledged.
    pub async fn stop(mut self) -> Acknowledged {
        self.stop.store(true, Ordering::SeqCst);
        while let Some(result) = self.tasks.join_next().await {
            result.unwrap();
        }
        Arc::try_unwrap(self.acked)
            .map_err(|_| "every task ended")
            .unwrap()
            .into_inner()
            .unwrap()
    }
}

/// A refusal that says to try again (a node that died or lost its database) is waited out; anything else, a `500`
/// among them, fails the test.
async fn ride_out(what: &str, e: &cairn::Error) {
    assert_eq!(e.kind(), ErrorKind::Unavailable, "{what}: {e}");
    // Real time: a client told to try again pauses first, as a real one does, rather than send request after
    // request to a node that cannot serve them yet; the outage it rides out lasts seconds of real time.
    tokio::time::sleep(RETRY_PAUSE).await;
}

/// Every job, with its history, read through `client`.
pub async fn all_jobs_with_history(client: &Client) -> Vec<Job> {
    let mut full = Vec::new();
    for job in all_jobs(client).await {
        full.push(client.get(job.id).await.unwrap());
    }
    full
}

/// No job was ever held by two workers at once (each attempt in its history ended before the next began), and
/// none was finished twice.
pub fn assert_never_held_twice(jobs: &[Job]) {
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
    }
}

/// Every acknowledged job is there with its data and ran to the end; every acknowledged finish held.
pub fn assert_nothing_lost(acked: &Acknowledged, jobs: &[Job]) {
    let by_id: BTreeMap<JobId, &Job> = jobs.iter().map(|j| (j.id, j)).collect();
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
}

/// Takes and finishes every job left through `clients`, until none is open; fails if one is handed out twice or
/// the jobs do not all come back within 90 s.
pub async fn drain(clients: &[Client]) {
    let mut seen = BTreeSet::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    loop {
        let mut idle = true;
        for client in clients {
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
            }
        }
        if idle {
            let stats = clients[0].queue_stats().await.unwrap();
            let open: u64 = stats
                .iter()
                .map(|q| q.scheduled + q.queued + q.running + q.stalled)
                .sum();
            if open == 0 {
                return;
            }
            let by_queue: Vec<String> = stats
                .iter()
                .filter(|q| q.scheduled + q.queued + q.running + q.stalled > 0)
                .map(|q| {
                    format!(
                        "{}: {} scheduled, {} queued, {} running, {} stalled",
                        q.queue, q.scheduled, q.queued, q.running, q.stalled
                    )
                })
                .collect();
            assert!(
                std::time::Instant::now() < deadline,
                "every job came back in time ({open} still open: {})",
                by_queue.join("; ")
            );
        }
    }
}
