//! Crash safety: a child process enqueues and finishes jobs under load and is killed with SIGKILL at a random point,
//! many times over, on one database file. After each kill the file is opened again as a queue (which recovers
//! jobs left running) and every acknowledged write must be there: enqueued jobs exist, finished jobs are completed,
//! no job is left running, jobs that were running record a crash, and no job completes twice.
//!
//! The child is this test binary run again with only [`child_process`] selected and `CAIRN_CRASH_CHILD` naming the
//! database. It prints one line per acknowledged operation, so the parent knows what was promised.

use cairn::Jobs;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cairn::{
    AttemptOutcome, Dequeue, Durability, JobFilter, JobId, JobState, Push, Queue, QueueOptions,
};
use serde_json::json;

/// Set (to the database path) in the child's environment; the child test does nothing without it.
const CHILD_ENV: &str = "CAIRN_CRASH_CHILD";
/// The iteration number, so that worker ids differ from one child to the next.
const ITERATION_ENV: &str = "CAIRN_CRASH_ITERATION";
/// Set when the child should run with `Durability::Normal`, which also promises to survive a process crash.
const NORMAL_ENV: &str = "CAIRN_CRASH_NORMAL";
/// Every line the child prints about an acknowledged operation starts with this; the test harness prints others.
const PREFIX: &str = "cairn-crash:";
const ITERATIONS: u32 = 30;
const ENQUEUERS: usize = 3;
const WORKERS: usize = 3;
/// No child runs longer than this, even if the parent is gone; the parent gives up on a child after it too.
const CHILD_LIFETIME: Duration = Duration::from_secs(20);

/// A small reproducible random source (SplitMix64), so that a failing run can be replayed from its seed.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Prints one acknowledgement line and flushes it; exits if the parent stopped listening.
fn say(line: std::fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    if writeln!(out, "{PREFIX} {line}")
        .and_then(|()| out.flush())
        .is_err()
    {
        std::process::exit(1);
    }
}

/// The child's side of [`acknowledged_writes_survive_sigkill_at_random_points`]: not a test of its own. It returns
/// at once unless `CAIRN_CRASH_CHILD` is set, and otherwise runs load until it is killed.
#[test]
fn child_process() {
    let Some(path) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let iteration: u32 = std::env::var(ITERATION_ENV).unwrap().parse().unwrap();
    let durability = if std::env::var_os(NORMAL_ENV).is_some() {
        Durability::Normal
    } else {
        Durability::Full
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(run_child(PathBuf::from(path), iteration, durability));
}

async fn run_child(path: PathBuf, iteration: u32, durability: Durability) {
    let options = QueueOptions {
        durability,
        ..QueueOptions::default()
    };
    let queue = Queue::open_with(&path, options).await.unwrap();
    say(format_args!("opened"));
    let deadline = Instant::now() + CHILD_LIFETIME;
    let mut tasks = tokio::task::JoinSet::new();
    for task in 0..ENQUEUERS {
        tasks.spawn(enqueue_until(queue.clone(), task, deadline));
    }
    for task in 0..WORKERS {
        let worker = format!("c{iteration}-w{task}");
        tasks.spawn(work_until(queue.clone(), worker, deadline));
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
    queue.close(Duration::from_secs(5)).await.unwrap();
}

/// Enqueues jobs one at a time and in small batches (one transaction each), announcing each acknowledged id.
async fn enqueue_until(queue: Queue, task: usize, deadline: Instant) {
    let mut n = 0u64;
    while Instant::now() < deadline {
        n += 1;
        let push = |i: u64| Push::new("crash.job").data(json!({ "task": task, "n": n, "i": i }));
        if n.is_multiple_of(3) {
            let batch = (0..1 + n % 5).map(push).collect();
            for enqueued in queue.enqueue_batch(batch).await.unwrap() {
                say(format_args!("enqueued {}", enqueued.id));
            }
        } else {
            let enqueued = queue.enqueue(push(0)).await.unwrap();
            say(format_args!("enqueued {}", enqueued.id));
        }
    }
}

/// Takes jobs and finishes them, announcing each acknowledged claim and finish.
async fn work_until(queue: Queue, worker: String, deadline: Instant) {
    while Instant::now() < deadline {
        let request = Dequeue::new(worker.as_str())
            .limit(8)
            .wait(Duration::from_millis(100));
        for claimed in queue.dequeue(request).await.unwrap() {
            say(format_args!("claimed {} {worker}", claimed.job.id));
            queue.finish(&claimed.lease, None).await.unwrap();
            say(format_args!("finished {}", claimed.job.id));
        }
    }
}

/// What one child announced before it died.
#[derive(Debug, Default)]
struct Announced {
    enqueued: Vec<i64>,
    /// Job id to the worker that claimed it.
    claimed: Vec<(i64, String)>,
    finished: Vec<i64>,
    lines: usize,
}

impl Announced {
    fn record(&mut self, line: &str) {
        // The test harness prints its own lines, and may start a line that the child's first line then ends.
        let Some(at) = line.find(PREFIX) else {
            return;
        };
        let rest = &line[at + PREFIX.len()..];
        self.lines += 1;
        let words: Vec<&str> = rest.split_whitespace().collect();
        match words.as_slice() {
            ["opened"] => {}
            ["enqueued", id] => self.enqueued.push(id.parse().unwrap()),
            ["claimed", id, worker] => self.claimed.push((id.parse().unwrap(), worker.to_string())),
            ["finished", id] => self.finished.push(id.parse().unwrap()),
            other => panic!("unexpected line from the child: {other:?}"),
        }
    }
}

/// Runs one child on `db`, kills it with SIGKILL once it has announced `kill_after` operations, and returns what
/// it announced. A child that exits by itself, or not within [`CHILD_LIFETIME`], fails the test.
fn run_child_until_killed(db: &Path, iteration: u32, kill_after: usize) -> Announced {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args([
            "crash::child_process",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, db)
        .env(ITERATION_ENV, iteration.to_string());
    // Every third child runs in the faster durability mode, which makes the same promise for a process crash.
    if iteration % 3 == 2 {
        command.env(NORMAL_ENV, "1");
    }
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let child: Arc<Mutex<Child>> = Arc::new(Mutex::new(child));
    let kill = |child: &Mutex<Child>| child.lock().unwrap().kill().unwrap();

    // A watchdog, so that a child that hangs fails the test instead of blocking it.
    let (done, finished) = mpsc::channel::<()>();
    let watched = child.clone();
    let watchdog = std::thread::spawn(move || match finished.recv_timeout(CHILD_LIFETIME) {
        Err(RecvTimeoutError::Timeout) => {
            kill(&watched);
            true
        }
        _ => false,
    });

    let mut announced = Announced::default();
    let mut killed = false;
    if kill_after == 0 {
        kill(&child);
        killed = true;
    }
    let mut reader = BufReader::new(stdout);
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).unwrap() == 0 {
            break;
        }
        // A line cut short by the kill was never completely announced.
        if line.ends_with('\n') {
            announced.record(line.trim_end());
        }
        if !killed && announced.lines >= kill_after {
            kill(&child);
            killed = true;
        }
    }
    let status = child.lock().unwrap().wait().unwrap();
    let _ = done.send(());
    let timed_out = watchdog.join().unwrap();
    assert!(
        !timed_out,
        "child {iteration} hung; announced {announced:?}"
    );
    assert!(
        killed,
        "child {iteration} exited by itself ({status}) after {} lines",
        announced.lines
    );
    {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(9), "child {iteration}: {status}");
    }
    announced
}

/// Every job in the file, newest first, without history.
async fn all_jobs(queue: &Queue) -> Vec<cairn::Job> {
    let mut jobs = Vec::new();
    let mut before = None;
    loop {
        let filter = JobFilter {
            before,
            limit: 1000,
            ..JobFilter::default()
        };
        let page = queue.list(filter).await.unwrap();
        jobs.extend(page.jobs);
        match page.next {
            Some(next) => before = Some(next),
            None => return jobs,
        }
    }
}

/// Checks a job's history: no open attempt, at most one completion, and nothing after it.
fn check_history(job: &cairn::Job) {
    let id = job.id;
    assert!(
        job.history.iter().all(|a| a.outcome.is_some()),
        "job {id} has an open attempt with no live process: {job:?}"
    );
    let completions = job
        .history
        .iter()
        .filter(|a| a.outcome == Some(AttemptOutcome::Completed))
        .count();
    assert!(
        completions <= 1,
        "job {id} completed {completions} times: {job:?}"
    );
    if completions == 1 {
        assert_eq!(job.state, JobState::Completed, "job {id}");
        assert_eq!(
            job.history.last().unwrap().outcome,
            Some(AttemptOutcome::Completed),
            "job {id} ran again after completing: {job:?}"
        );
    }
}

/// What the parent knows was acknowledged, over all children so far.
#[derive(Debug, Default)]
struct Promised {
    enqueued: BTreeSet<i64>,
    finished: BTreeSet<i64>,
}

/// Opens the file after a kill and checks every promise, and what recovery did to this child's running jobs.
async fn verify(db: &Path, promised: &Promised, child: &Announced) {
    let queue = Queue::open(db).await.unwrap();
    let jobs: BTreeMap<i64, cairn::Job> = all_jobs(&queue)
        .await
        .into_iter()
        .map(|j| (j.id.0, j))
        .collect();
    for id in &promised.enqueued {
        assert!(
            jobs.contains_key(id),
            "acknowledged enqueue of job {id} was lost"
        );
    }
    for id in &promised.finished {
        assert_eq!(
            jobs.get(id).map(|j| j.state),
            Some(JobState::Completed),
            "acknowledged finish of job {id} was lost"
        );
    }
    let running: Vec<i64> = jobs
        .values()
        .filter(|j| j.state == JobState::Running)
        .map(|j| j.id.0)
        .collect();
    assert!(
        running.is_empty(),
        "jobs left running after recovery: {running:?}"
    );

    // Every claim the child announced ended: completed (acknowledged or not), or recovered as crashed.
    for (id, worker) in &child.claimed {
        let job = queue.get(JobId(*id)).await.unwrap();
        check_history(&job);
        let attempt = job
            .history
            .iter()
            .find(|a| a.worker.as_str() == worker)
            .unwrap_or_else(|| {
                panic!("job {id}: the claim by {worker} is not in its history: {job:?}")
            });
        match attempt.outcome {
            Some(AttemptOutcome::Completed) => {}
            Some(AttemptOutcome::Crashed) => {
                assert!(
                    !child.finished.contains(id),
                    "job {id}: acknowledged finish recorded as a crash"
                );
                assert!(
                    matches!(job.state, JobState::Queued | JobState::Failed),
                    "job {id} crashed and is {}",
                    job.state
                );
            }
            other => panic!("job {id}: the claim by {worker} ended with {other:?}: {job:?}"),
        }
    }
    queue.close(Duration::from_secs(10)).await.unwrap();
}

/// Checks the history of every job in the file: nothing open, nothing completed twice.
async fn verify_all_histories(db: &Path) -> usize {
    let queue = Queue::open(db).await.unwrap();
    let jobs = all_jobs(&queue).await;
    for job in &jobs {
        check_history(&queue.get(job.id).await.unwrap());
    }
    queue.close(Duration::from_secs(10)).await.unwrap();
    jobs.len()
}

#[test]
fn acknowledged_writes_survive_sigkill_at_random_points() {
    let seed = std::env::var("CAIRN_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    // Shown when the test fails; CAIRN_CRASH_SEED replays the same kill points.
    println!("CAIRN_CRASH_SEED={seed}");
    let mut rng = Rng(seed);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("jobs.db");
    let mut promised = Promised::default();
    let mut crashed_claims = 0;
    for iteration in 0..ITERATIONS {
        // Sometimes before the child has even opened the queue, sometimes right after, mostly under load.
        let kill_after = match rng.below(10) {
            0 => 0,
            1 => 1,
            _ => 2 + rng.below(600) as usize,
        };
        let child = run_child_until_killed(&db, iteration, kill_after);
        println!(
            "child {iteration}: {} lines before the kill: {} enqueued, {} claimed, {} finished",
            child.lines,
            child.enqueued.len(),
            child.claimed.len(),
            child.finished.len()
        );
        promised.enqueued.extend(&child.enqueued);
        promised.finished.extend(&child.finished);
        crashed_claims += child
            .claimed
            .iter()
            .filter(|(id, _)| !child.finished.contains(id))
            .count();
        runtime.block_on(verify(&db, &promised, &child));
    }
    let jobs = runtime.block_on(verify_all_histories(&db));
    assert!(
        promised.finished.len() > 100 && crashed_claims > 0,
        "the children did too little to test anything: {} finished, {crashed_claims} claims cut short, {jobs} jobs",
        promised.finished.len()
    );
}
