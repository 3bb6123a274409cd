//! Cairn's benchmark workloads (`crates/cairn/benches/throughput.rs`) run against effectum 0.7, the Rust SQLite job
//! queue, so `bench/compare.sh` can print the two side by side.
//!
//! Effectum has no dequeue call: jobs reach code only through its `Worker`, which runs a registered handler. So the
//! drain and wake-up workloads use workers whose handler completes the job explicitly (the same commit a Cairn
//! `finish` makes) and then records the time. Effectum has no queues either; "another queue" is another job type,
//! which a worker filters on the same way.
//!
//! Effectum is measured as published: `Queue::new` runs `PRAGMA journal = wal`, which is not a pragma SQLite knows
//! (it is `journal_mode`), so the database stays in rollback-journal mode, with `synchronous = NORMAL`.
//! `baseline/commit-effectum-settings` measures a raw one-row commit with those settings.
//!
//! Same command line as Cairn's bench: filters as arguments, `CAIRN_BENCH_SCALE`, `CAIRN_BENCH_TSV`,
//! `CAIRN_BENCH_DIR`.

#[path = "../../../crates/cairn/benches/throughput/config.rs"]
mod config;
#[path = "../../../crates/cairn/benches/throughput/disk.rs"]
mod disk;
#[allow(dead_code)]
#[path = "../../../crates/cairn/benches/throughput/report.rs"]
mod report;

use std::convert::Infallible;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use effectum::{Job, JobBuilder, JobRunner, Queue, RunningJob, Worker};
use rusqlite::{Connection, params};
use tempfile::TempDir;
use tokio::runtime::Runtime;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use config::{BenchResult, Config, Group};
use report::{Results, Row};

const GROUPS: &[Group] = &[
    Group {
        name: "baseline",
        rows: &["baseline/commit-effectum-settings"],
        run: run_baseline,
    },
    Group {
        name: "enqueue-batch",
        rows: &["enqueue/batch-1000", "enqueue/batch-1000-x4"],
        run: run_enqueue_batch,
    },
    Group {
        name: "enqueue-single",
        rows: &["enqueue/single-x64"],
        run: run_enqueue_single,
    },
    Group {
        name: "dequeue",
        rows: &["dequeue-finish/8x32"],
        run: run_dequeue,
    },
    Group {
        name: "durable",
        rows: &[
            "disk/fdatasync-4k",
            "enqueue/one-at-a-time",
            "worker/1-slot",
            "worker/8-slots",
        ],
        run: run_durable,
    },
    Group {
        name: "wakeup",
        rows: &["wakeup/after-enqueue", "wakeup/from-enqueue-call"],
        run: run_wakeup,
    },
    Group {
        name: "scan",
        rows: &[
            "scan/empty",
            "scan/1m-future-same-queue",
            "scan/1m-ready-other-queue",
        ],
        run: run_scan,
    },
];

fn main() -> BenchResult<()> {
    let config = Config::from_env()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    println!(
        "effectum 0.7 throughput: scale {}, filter {:?}",
        config.scale, config.filters
    );
    let mut results = Results::default();
    for group in GROUPS.iter().filter(|g| config.wants(g)) {
        println!("{}:", group.name);
        (group.run)(&runtime, &config, &mut results)?;
    }
    println!("\n{}", results.render());
    if let Ok(path) = std::env::var("CAIRN_BENCH_TSV") {
        std::fs::write(&path, results.to_tsv())?;
    }
    Ok(())
}

fn temp_dir() -> BenchResult<TempDir> {
    let builder = &mut tempfile::Builder::new();
    builder.prefix("effectum-bench-");
    Ok(match std::env::var_os("CAIRN_BENCH_DIR") {
        Some(dir) => builder.tempdir_in(dir)?,
        None => builder.tempdir()?,
    })
}

async fn fresh_queue() -> BenchResult<(TempDir, Queue)> {
    let dir = temp_dir()?;
    let queue = Queue::new(&dir.path().join("bench.db")).await?;
    Ok((dir, queue))
}

const CLOSE_DEADLINE: Duration = Duration::from_secs(30);

/// The job every scenario adds: a no-op with a little data, as in Cairn's bench.
fn job(i: u64) -> BenchResult<Job> {
    Ok(JobBuilder::new("noop")
        .json_payload(&serde_json::json!({ "i": i }))?
        .build())
}

fn run_baseline(rt: &Runtime, config: &Config, results: &mut Results) -> BenchResult<()> {
    // The journal mode effectum's own file ends up in. WAL is recorded in the file, so a new connection would
    // read back `wal` had effectum turned it on.
    let mode = rt.block_on(async {
        let (dir, queue) = fresh_queue().await?;
        queue.close(CLOSE_DEADLINE).await?;
        let conn = Connection::open(dir.path().join("bench.db"))?;
        let mode: String = conn.query_row("PRAGMA journal_mode", [], |row| row.get(0))?;
        BenchResult::Ok(mode)
    })?;
    results.notes.push(format!(
        "a database created by effectum's Queue::new reads back journal_mode = {mode}"
    ));

    // A raw one-row commit with the settings effectum runs with: the default rollback journal, synchronous = NORMAL.
    let dir = temp_dir()?;
    let conn = Connection::open(dir.path().join("commit.db"))?;
    conn.pragma_update(None, "synchronous", "normal")?;
    conn.execute_batch(
        "CREATE TABLE jobs (id INTEGER PRIMARY KEY, job_type TEXT NOT NULL, payload BLOB)",
    )?;
    let commits = config.size(1000, 100);
    let mut samples = Vec::new();
    let start = Instant::now();
    for i in 0..commits {
        let t = Instant::now();
        conn.execute(
            "INSERT INTO jobs (job_type, payload) VALUES (?1, ?2)",
            params!["noop", i.to_string()],
        )?;
        samples.push(t.elapsed());
    }
    results.push(
        Row::new(
            "baseline/commit-effectum-settings",
            commits,
            start.elapsed(),
        )
        .with_latency("one-row commit", samples),
    );
    Ok(())
}

fn run_enqueue_batch(rt: &Runtime, config: &Config, results: &mut Results) -> BenchResult<()> {
    let total = config.size(250_000, 10_000);
    for (name, callers) in [("enqueue/batch-1000", 1u64), ("enqueue/batch-1000-x4", 4)] {
        let (elapsed, samples) = rt.block_on(async {
            let (_dir, queue) = fresh_queue().await?;
            let queue = Arc::new(queue);
            let next = Arc::new(AtomicU64::new(0));
            let start = Instant::now();
            let mut tasks = JoinSet::new();
            for _ in 0..callers {
                let (queue, next) = (queue.clone(), next.clone());
                tasks.spawn(async move {
                    let mut samples = Vec::new();
                    loop {
                        let first = next.fetch_add(1000, Ordering::Relaxed);
                        if first >= total {
                            return BenchResult::Ok(samples);
                        }
                        let jobs = (first..(first + 1000).min(total))
                            .map(job)
                            .collect::<BenchResult<Vec<_>>>()?;
                        let t = Instant::now();
                        queue.add_jobs(jobs).await?;
                        samples.push(t.elapsed());
                    }
                });
            }
            let samples = join_all(tasks).await?;
            let elapsed = start.elapsed();
            queue.close(CLOSE_DEADLINE).await?;
            BenchResult::Ok((elapsed, samples))
        })?;
        results.push(Row::new(name, total, elapsed).with_latency("add_jobs call", samples));
    }
    Ok(())
}

fn run_enqueue_single(rt: &Runtime, config: &Config, results: &mut Results) -> BenchResult<()> {
    let total = config.size(30_000, 3_000);
    let (elapsed, samples) = rt.block_on(async {
        let (_dir, queue) = fresh_queue().await?;
        let queue = Arc::new(queue);
        let next = Arc::new(AtomicU64::new(0));
        let start = Instant::now();
        let mut tasks = JoinSet::new();
        for _ in 0..64 {
            let (queue, next) = (queue.clone(), next.clone());
            tasks.spawn(async move {
                let mut samples = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= total {
                        return BenchResult::Ok(samples);
                    }
                    let job = job(i)?;
                    let t = Instant::now();
                    queue.add_job(job).await?;
                    samples.push(t.elapsed());
                }
            });
        }
        let samples = join_all(tasks).await?;
        let elapsed = start.elapsed();
        queue.close(CLOSE_DEADLINE).await?;
        BenchResult::Ok((elapsed, samples))
    })?;
    results
        .push(Row::new("enqueue/single-x64", total, elapsed).with_latency("add_job call", samples));
    Ok(())
}

/// Cairn's `durable` group on effectum: the disk's rate, one caller adding one job per call, and one worker of one
/// and of eight slots running the jobs. A filter that names one row runs that row alone.
fn run_durable(rt: &Runtime, config: &Config, results: &mut Results) -> BenchResult<()> {
    let wants = |row: &str| config.wants_row("durable", row);
    if wants("disk/fdatasync-4k") {
        disk::record_disk_row(temp_dir()?.path(), config.size(2_000, 200), results)?;
    }
    if wants("enqueue/one-at-a-time") {
        let total = config.size(5_000, 500);
        let (elapsed, samples, written) = rt.block_on(async {
            let (_dir, queue) = fresh_queue().await?;
            let mut samples = Vec::with_capacity(total as usize);
            let before = disk::bytes_written();
            let start = Instant::now();
            for i in 0..total {
                let job = job(i)?;
                let t = Instant::now();
                queue.add_job(job).await?;
                samples.push(t.elapsed());
            }
            let elapsed = start.elapsed();
            let written = disk::bytes_written()
                .zip(before)
                .map(|(after, before)| after - before);
            queue.close(CLOSE_DEADLINE).await?;
            BenchResult::Ok((elapsed, samples, written))
        })?;
        results.push(
            Row::new("enqueue/one-at-a-time", total, elapsed).with_latency("add_job call", samples),
        );
        if let Some(bytes) = written {
            results.notes.push(format!(
                "enqueue/one-at-a-time: {} bytes written per job (write calls: journal and database)",
                bytes / total
            ));
        }
    }
    for (name, slots, jobs) in [
        ("worker/1-slot", 1, config.size(5_000, 500)),
        ("worker/8-slots", 8, config.size(20_000, 2_000)),
    ] {
        if wants(name) {
            let (finished, elapsed) = drain_scenario(rt, jobs, 0, job, (1, slots))?;
            results.push(Row::new(name, finished, elapsed));
        }
    }
    Ok(())
}

async fn join_all(mut tasks: JoinSet<BenchResult<Vec<Duration>>>) -> BenchResult<Vec<Duration>> {
    let mut all = Vec::new();
    while let Some(done) = tasks.join_next().await {
        all.extend(done??);
    }
    Ok(all)
}

/// What the drain workers' handler sees: how many jobs are done, and when the last one was.
struct Progress {
    total: u64,
    finished: AtomicU64,
    end: OnceLock<Instant>,
    done: tokio::sync::Notify,
}

impl fmt::Debug for Progress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Progress")
            .field("total", &self.total)
            .finish_non_exhaustive()
    }
}

async fn complete_and_count(job: RunningJob, progress: Arc<Progress>) -> Result<(), Infallible> {
    match job.complete(()).await {
        Ok(()) => {
            if progress.finished.fetch_add(1, Ordering::Relaxed) + 1 == progress.total {
                let _ = progress.end.set(Instant::now());
                progress.done.notify_one();
            }
        }
        Err(e) => eprintln!("effectum: completing a job failed: {e}"),
    }
    Ok(())
}

/// The longest a drain runs: effectum's claim query walks every ready job of other types, so with a million of them
/// finishing 20,000 jobs would take minutes. A capped run reports the jobs finished so far.
const DRAIN_CAP: Duration = Duration::from_secs(30);

/// Adds `filler` jobs made by `make_filler` and `jobs` ready jobs, untimed, then times `workers` workers of
/// concurrency `slots` running the ready ones (for at most [`DRAIN_CAP`]). Returns how many finished, and in what
/// time.
fn drain_scenario(
    rt: &Runtime,
    jobs: u64,
    filler: u64,
    make_filler: MakeJob,
    (worker_count, slots): (usize, u16),
) -> BenchResult<(u64, Duration)> {
    rt.block_on(async {
        let (_dir, queue) = fresh_queue().await?;
        fill(&queue, filler, make_filler).await?;
        fill(&queue, jobs, job).await?;
        let progress = Arc::new(Progress {
            total: jobs,
            finished: AtomicU64::new(0),
            end: OnceLock::new(),
            done: tokio::sync::Notify::new(),
        });
        let runner = JobRunner::builder("noop", complete_and_count).build();
        let start = Instant::now();
        let mut workers = Vec::new();
        for _ in 0..worker_count {
            let worker = Worker::builder(&queue, progress.clone())
                .max_concurrency(slots)
                .jobs([runner.clone()])
                .build()
                .await?;
            workers.push(worker);
        }
        while progress.end.get().is_none() && start.elapsed() < DRAIN_CAP {
            let _ =
                tokio::time::timeout(Duration::from_millis(100), progress.done.notified()).await;
        }
        let (finished, elapsed) = match progress.end.get() {
            Some(end) => (jobs, *end - start),
            None => (progress.finished.load(Ordering::Relaxed), start.elapsed()),
        };
        for worker in workers {
            worker.unregister(Some(CLOSE_DEADLINE)).await?;
        }
        queue.close(CLOSE_DEADLINE).await?;
        BenchResult::Ok((finished, elapsed))
    })
}

async fn fill(queue: &Queue, count: u64, make: MakeJob) -> BenchResult<()> {
    let mut first = 0;
    while first < count {
        let last = (first + 1000).min(count);
        queue
            .add_jobs((first..last).map(make).collect::<BenchResult<_>>()?)
            .await?;
        first = last;
    }
    Ok(())
}

fn run_dequeue(rt: &Runtime, config: &Config, results: &mut Results) -> BenchResult<()> {
    let jobs = config.size(100_000, 5_000);
    let (finished, elapsed) = drain_scenario(rt, jobs, 0, job, (8, 32))?;
    results.push(Row::new("dequeue-finish/8x32", finished, elapsed));
    Ok(())
}

fn future_job(i: u64) -> BenchResult<Job> {
    Ok(JobBuilder::new("noop")
        .json_payload(&serde_json::json!({ "i": i }))?
        .run_at(time::OffsetDateTime::now_utc() + Duration::from_secs(24 * 3600))
        .build())
}

fn other_type_job(i: u64) -> BenchResult<Job> {
    Ok(JobBuilder::new("other")
        .json_payload(&serde_json::json!({ "i": i }))?
        .build())
}

/// Makes the `i`th job of a fill.
type MakeJob = fn(u64) -> BenchResult<Job>;

fn run_scan(rt: &Runtime, config: &Config, results: &mut Results) -> BenchResult<()> {
    let jobs = config.size(20_000, 2_000);
    let filler = config.size(1_000_000, 10_000);
    let runs: [(&str, u64, MakeJob); 3] = [
        ("scan/empty", 0, job),
        ("scan/1m-future-same-queue", filler, future_job),
        ("scan/1m-ready-other-queue", filler, other_type_job),
    ];
    for (name, filler, make) in runs {
        let (finished, elapsed) = drain_scenario(rt, jobs, filler, make, (8, 32))?;
        if finished < jobs {
            results.notes.push(format!(
                "{name}: stopped after {DRAIN_CAP:?} with {finished} of {jobs} jobs finished"
            ));
        }
        results.push(Row::new(name, finished, elapsed));
    }
    let empty = results
        .row("scan/empty")
        .expect("just measured")
        .per_second();
    for name in ["scan/1m-future-same-queue", "scan/1m-ready-other-queue"] {
        let rate = results.row(name).expect("just measured").per_second();
        results.notes.push(format!(
            "{name}: {:.2}x the cost of scan/empty",
            empty / rate
        ));
    }
    Ok(())
}

/// The handler of the wake-up scenario: says when it started, completes, says it is done.
#[derive(Clone)]
struct Wake {
    started: mpsc::UnboundedSender<Instant>,
    completed: mpsc::UnboundedSender<()>,
}

impl fmt::Debug for Wake {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Wake")
    }
}

async fn note_start(job: RunningJob, wake: Wake) -> Result<(), Infallible> {
    let _ = wake.started.send(Instant::now());
    if let Err(e) = job.complete(()).await {
        eprintln!("effectum: completing a job failed: {e}");
    }
    let _ = wake.completed.send(());
    Ok(())
}

fn run_wakeup(rt: &Runtime, config: &Config, results: &mut Results) -> BenchResult<()> {
    let samples = config.size(1000, 100) as usize;
    let (elapsed, after, from_call, first) = rt.block_on(async {
        let (_dir, queue) = fresh_queue().await?;
        let (started_tx, mut started) = mpsc::unbounded_channel();
        let (completed_tx, mut completed) = mpsc::unbounded_channel();
        let wake = Wake {
            started: started_tx,
            completed: completed_tx,
        };
        let worker = Worker::builder(&queue, wake)
            .max_concurrency(1)
            .jobs([JobRunner::builder("noop", note_start).build()])
            .build()
            .await?;
        let (mut after, mut from_call, mut first) = (Vec::new(), Vec::new(), 0);
        let start = Instant::now();
        for i in 0..samples {
            // Let the idle worker settle into waiting, as the Cairn side lets its dequeue park.
            tokio::time::sleep(Duration::from_millis(3)).await;
            let job = job(i as u64)?;
            let called = Instant::now();
            queue.add_job(job).await?;
            let added = Instant::now();
            let began = started.recv().await.ok_or("the worker stopped")?;
            if began < added {
                first += 1;
            }
            after.push(began.saturating_duration_since(added));
            from_call.push(began - called);
            completed.recv().await.ok_or("the worker stopped")?;
        }
        let elapsed = start.elapsed();
        worker.unregister(Some(CLOSE_DEADLINE)).await?;
        queue.close(CLOSE_DEADLINE).await?;
        BenchResult::Ok((elapsed, after, from_call, first))
    })?;
    let n = samples as u64;
    results.push(
        Row::new("wakeup/after-enqueue", n, elapsed)
            .with_latency("add_job return -> handler start", after)
            .latency_only(),
    );
    results.push(
        Row::new("wakeup/from-enqueue-call", n, elapsed)
            .with_latency("add_job call -> handler start", from_call)
            .latency_only(),
    );
    if first > 0 {
        results.notes.push(format!(
            "wakeup: in {first} of {samples} samples the handler started before add_job returned (counted as 0)"
        ));
    }
    Ok(())
}
