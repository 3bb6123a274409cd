//! A durable workflow survives SIGKILL: a job of ten steps (eight bodies, a sleep and a wait for a signal) is run by
//! a worker in a child process that is killed at random moments and started again, thirty rounds on each backend.
//! Every round's job completes with the signal's data, and only the step in flight at a kill runs its body twice.
//!
//! The child is this test binary run again with only [`workflow_child`] selected. It embeds the queue (on SQLite it
//! owns the file, so a kill is the whole engine's crash; on PostgreSQL it is a node, whose job comes back when its
//! lease expires) and runs a [`Worker`] until the round's job completed. Each step's body appends its name to a log
//! outside the queue, and the parent appends `kill` after each kill, so the log says which bodies ran around which
//! kill.

use cairn::Jobs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use cairn::{JobError, JobId, JobState, Push, Queue, RetryPolicy, SignalKey, SignalSent, Worker};
use serde_json::{Value, json};

use crate::crash::Rng;
use crate::harness::TestDatabase;

/// Set in the child's environment: the database's location, the log, the job.
const LOCATION_ENV: &str = "CAIRN_WORKFLOW_CHILD";
const LOG_ENV: &str = "CAIRN_WORKFLOW_LOG";
const JOB_ENV: &str = "CAIRN_WORKFLOW_JOB";
const ROUNDS: u64 = 30;
/// The most kills in a round; then a last child runs the job to its end.
const MOST_KILLS: u64 = 3;
/// A child is killed this long after it starts, at most.
const MOST_LIFE_MS: u64 = 700;
/// A killed worker's job comes back after this on PostgreSQL (on SQLite, when the next child opens the file).
const LEASE: Duration = Duration::from_secs(1);
/// No child runs longer than this, even if the parent is gone.
const CHILD_LIFETIME: Duration = Duration::from_secs(60);
const BODIES: [&str; 8] = ["s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8"];

/// The child's side of the rounds below: not a test of its own. It returns at once unless `CAIRN_WORKFLOW_CHILD` is
/// set, and otherwise works until the job completed (or it is killed).
#[test]
fn workflow_child() {
    let Some(location) = std::env::var_os(LOCATION_ENV) else {
        return;
    };
    let log = PathBuf::from(std::env::var_os(LOG_ENV).unwrap());
    let job = JobId(std::env::var(JOB_ENV).unwrap().parse().unwrap());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(run_child(location.to_str().unwrap(), log, job));
}

async fn run_child(location: &str, log: PathBuf, job: JobId) {
    let queue = Queue::open(location).await.unwrap();
    let worker = Worker::builder(&queue, format!("child-{}", std::process::id()))
        .handler("flow", move |job| {
            let log = log.clone();
            async move {
                for name in &BODIES[..3] {
                    body(&job, &log, name).await?;
                }
                job.sleep("nap", Duration::from_millis(200)).await?;
                for name in &BODIES[3..6] {
                    body(&job, &log, name).await?;
                }
                let key = job.data()["key"].as_str().unwrap().to_owned();
                let approved: Option<Value> = job
                    .wait_for_signal("approved", &key, Duration::from_secs(60))
                    .await?;
                for name in &BODIES[6..] {
                    body(&job, &log, name).await?;
                }
                job.set_result(json!({ "approved": approved }));
                Ok(())
            }
        })
        .start()
        .unwrap();
    let deadline = Instant::now() + CHILD_LIFETIME;
    while queue.get(job).await.unwrap().state != JobState::Completed {
        assert!(Instant::now() < deadline, "the child ran out of time");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    worker.stop(Duration::from_secs(5)).await.unwrap();
    queue.close(Duration::from_secs(5)).await.unwrap();
}

/// Step `name`, whose body notes that it ran (one write, synced) and takes a moment, so that kills land inside
/// bodies as well as between them.
async fn body(job: &cairn::JobContext, log: &Path, name: &str) -> Result<(), JobError> {
    job.step(name, || async {
        append(log, name);
        tokio::time::sleep(Duration::from_millis(15)).await;
        Ok::<_, JobError>(())
    })
    .await
}

fn append(log: &Path, line: &str) {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .unwrap();
    file.write_all(format!("{line}\n").as_bytes()).unwrap();
    file.sync_data().unwrap();
}

/// The parent's view of the database: on SQLite a queue open only while no child runs (a child owns the file), on
/// PostgreSQL one open throughout, which also brings back a killed child's job when its lease expires.
struct Parent {
    location: String,
    postgres: bool,
    queue: Option<Queue>,
}

impl Parent {
    async fn queue(&mut self) -> &Queue {
        if self.queue.is_none() {
            self.queue = Some(Queue::open(&self.location).await.unwrap());
        }
        self.queue.as_ref().unwrap()
    }

    async fn let_go(&mut self) {
        if !self.postgres
            && let Some(queue) = self.queue.take()
        {
            queue.close(Duration::from_secs(5)).await.unwrap();
        }
    }
}

/// What the rounds saw, for the message at the end.
#[derive(Default)]
struct Seen {
    kills: u64,
    twice: u64,
    early_signals: u64,
}

async fn rounds(location: String, postgres: bool, seed: u64) {
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let mut parent = Parent {
        location,
        postgres,
        queue: None,
    };
    let mut rng = Rng(seed);
    let mut seen = Seen::default();
    for round in 0..ROUNDS {
        let log = dir.path().join(format!("round-{round}.log"));
        run_round(&mut parent, &mut rng, round, &log, &mut seen).await;
    }
    parent.let_go().await;
    if let Some(queue) = parent.queue.take() {
        queue.close(Duration::from_secs(5)).await.unwrap();
    }
    eprintln!(
        "workflow under SIGKILL ({}): {ROUNDS} rounds, {} kills, {} bodies run twice, {} signals sent before the \
         wait, in {:.1?}",
        if postgres { "PostgreSQL" } else { "SQLite" },
        seen.kills,
        seen.twice,
        seen.early_signals,
        started.elapsed()
    );
}

async fn run_round(parent: &mut Parent, rng: &mut Rng, round: u64, log: &Path, seen: &mut Seen) {
    let key = SignalKey::parse(format!("round-{round}/approved")).unwrap();
    let data = json!({ "round": round });
    let queue = parent.queue().await;
    let id = queue
        .enqueue(
            Push::new("flow")
                .data(json!({ "key": key.as_str() }))
                .lease_timeout(LEASE)
                .retry(RetryPolicy::immediate(20)),
        )
        .await
        .unwrap()
        .id;
    let mut sent = rng.below(2) == 0;
    if sent {
        let kept = queue.signal(key.clone(), data.clone()).await.unwrap();
        assert_eq!(kept, SignalSent::Kept);
        seen.early_signals += 1;
    }
    let kills = 1 + rng.below(MOST_KILLS);
    let mut killed = 0;
    loop {
        if killed == kills && !sent {
            parent
                .queue()
                .await
                .signal(key.clone(), data.clone())
                .await
                .unwrap();
            sent = true;
        }
        parent.let_go().await;
        let mut child = spawn_child(&parent.location, log, id);
        if killed < kills {
            tokio::time::sleep(Duration::from_millis(rng.below(MOST_LIFE_MS))).await;
            if child.try_wait().unwrap().is_none() {
                child.kill().unwrap();
                child.wait().unwrap();
                append(log, "kill");
                killed += 1;
                seen.kills += 1;
            } else {
                assert!(
                    child.wait().unwrap().success(),
                    "round {round}: the child failed"
                );
            }
        } else {
            let status = wait_for(&mut child, CHILD_LIFETIME).await;
            assert!(
                status.success(),
                "round {round}: the last child failed: {status}"
            );
        }
        let job = parent.queue().await.get(id).await.unwrap();
        if job.state == JobState::Completed {
            assert_eq!(
                job.result,
                Some(json!({ "approved": data })),
                "round {round}"
            );
            break;
        }
        if !sent && job.awaits_signal.is_some() {
            let delivered = parent
                .queue()
                .await
                .signal(key.clone(), data.clone())
                .await
                .unwrap();
            assert_eq!(delivered, SignalSent::Delivered { job: id });
            sent = true;
        }
    }
    seen.twice += check_log(log, round);
}

/// Checks what ran around the kills: every body at least once, and a body run again only as the first after a kill
/// when it was the last before it (the step in flight). Returns how many bodies ran twice.
fn check_log(log: &Path, round: u64) -> u64 {
    let text = std::fs::read_to_string(log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut ran: Vec<&str> = Vec::new();
    let mut twice = 0;
    for (at, line) in lines.iter().enumerate() {
        if *line == "kill" {
            continue;
        }
        if ran.contains(line) {
            let before = lines[..at].iter().rev().find(|l| **l != "kill");
            assert!(
                at > 0 && lines[at - 1] == "kill" && before == Some(line),
                "round {round}: step {line} ran again though it was not in flight at a kill: {lines:?}"
            );
            twice += 1;
        } else {
            ran.push(line);
        }
    }
    assert_eq!(
        ran, BODIES,
        "round {round}: every body ran, in order: {lines:?}"
    );
    twice
}

fn spawn_child(location: &str, log: &Path, job: JobId) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "workflow_kill::workflow_child",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(LOCATION_ENV, location)
        .env(LOG_ENV, log)
        .env(JOB_ENV, job.0.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

/// Waits for `child` to exit by itself, killing it (and failing) after `limit`.
async fn wait_for(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            child.kill().unwrap();
            panic!("a child that was not killed did not finish the job within {limit:?}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workflow_completes_on_sqlite_whatever_moments_its_worker_is_killed_at() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("workflow.db");
    rounds(path.to_str().unwrap().to_owned(), false, 0x5eed_0001).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workflow_completes_on_postgres_whatever_moments_its_worker_is_killed_at() {
    let db = TestDatabase::new();
    rounds(db.url.clone(), true, 0x5eed_0002).await;
}
