//! Cairn's throughput and latency benchmarks, against the targets of the engine issue ("Speed").
//!
//! `cargo bench -p cairn --bench throughput` runs every scenario and prints a table; a trailing argument keeps only
//! the scenarios whose group or name contains it (`-- enqueue`, `-- scan`), and `CAIRN_BENCH_SCALE=0.1` shrinks
//! every size for a quick run. `CAIRN_BENCH_TSV=path` also writes the rows as tab-separated values, which
//! `bench/compare.sh` sets beside effectum's. Each scenario opens a fresh SQLite file in a temporary directory
//! (`CAIRN_BENCH_DIR` chooses where; the default is the system's temporary directory).
//!
//! Results and the machine they were taken on are recorded in `BENCHMARKS.md`.

#[path = "throughput/baseline.rs"]
mod baseline;
#[path = "throughput/config.rs"]
mod config;
#[path = "throughput/disk.rs"]
mod disk;
#[path = "throughput/drain.rs"]
mod drain;
#[path = "throughput/durable.rs"]
mod durable;
#[path = "throughput/enqueue.rs"]
mod enqueue;
#[path = "throughput/report.rs"]
mod report;
#[path = "throughput/wakeup.rs"]
mod wakeup;

use cairn::Jobs;
use std::time::Duration;

use cairn::{Durability, Push, Queue, QueueOptions};
use tempfile::TempDir;
use tokio::runtime::Runtime;

pub use config::BenchResult;
use config::{Config, Group};
use report::{Latencies, Results, Row, human, thousands};

const GROUPS: &[Group] = &[
    Group {
        name: "baseline",
        rows: &[
            "baseline/commit",
            "baseline/batch-insert-1000",
            "baseline/batch-insert-1000-cairn-schema",
        ],
        run: run_baseline,
    },
    Group {
        name: "enqueue-batch",
        rows: &["enqueue/batch-1000", "enqueue/batch-1000-x4"],
        run: run_enqueue_batch,
    },
    Group {
        name: "enqueue-single",
        rows: &["enqueue/single-x64-full", "enqueue/single-x64-normal"],
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
        name: "unfail",
        rows: &["unfail/100k"],
        run: run_unfail,
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
    Group {
        name: "names",
        rows: &[
            "names/exact-alone",
            "names/exact-beside-1m",
            "names/prefix-alone",
            "names/prefix-beside-1m",
            "names/postgres-exact-alone",
            "names/postgres-exact-beside-1m",
            "names/postgres-prefix-alone",
            "names/postgres-prefix-beside-1m",
        ],
        run: run_names,
    },
];

fn main() -> BenchResult<()> {
    let config = Config::from_env()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    println!(
        "cairn throughput: scale {}, {} runtime threads, filter {:?}",
        config.scale,
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        config.filters
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
    builder.prefix("cairn-bench-");
    Ok(match std::env::var_os("CAIRN_BENCH_DIR") {
        Some(dir) => builder.tempdir_in(dir)?,
        None => builder.tempdir()?,
    })
}

/// A queue on a fresh file. The directory must outlive the queue.
async fn fresh_queue(durability: Durability) -> BenchResult<(TempDir, Queue)> {
    let dir = temp_dir()?;
    let options = QueueOptions {
        durability,
        ..QueueOptions::default()
    };
    let queue = Queue::open_with(dir.path().join("bench.db"), options).await?;
    Ok((dir, queue))
}

const CLOSE_DEADLINE: Duration = Duration::from_secs(30);

/// One `unfail` of 100,000 failed jobs (qless's bulk retry of a failure group). Failing them first takes a while:
/// every job is claimed and failed through the API.
fn run_unfail(rt: &Runtime, config: &Config, results: &mut Results) -> BenchResult<()> {
    let total = config.size(100_000, 10_000);
    let elapsed = rt.block_on(async {
        let (_dir, queue) = fresh_queue(Durability::Full).await?;
        let mut jobs = Vec::with_capacity(1000);
        let mut made = 0;
        while made < total {
            jobs.clear();
            let n = (total - made).min(1000);
            jobs.extend((0..n).map(|i| {
                cairn::Push::new("import")
                    .data(serde_json::json!({"i": made + i}))
                    .retry(cairn::RetryPolicy::immediate(1))
            }));
            queue.enqueue_batch(jobs.clone()).await?;
            let claimed = queue.dequeue(cairn::Dequeue::new("w").limit(1000)).await?;
            // Failed concurrently, so that group commit keeps the setup short.
            let mut tasks = tokio::task::JoinSet::new();
            for c in claimed {
                let queue = queue.clone();
                tasks.spawn(async move { queue.fail(&c.lease, "bad-input", "no").await });
            }
            while let Some(result) = tasks.join_next().await {
                result??;
            }
            made += n;
        }
        let start = std::time::Instant::now();
        let moved = queue
            .unfail(cairn::Unfail {
                group: "bad-input".into(),
                queue: Some("retry".into()),
                limit: cairn::MAX_UNFAIL,
            })
            .await?;
        let elapsed = start.elapsed();
        assert_eq!(moved, total, "every failed job moved");
        queue.close(CLOSE_DEADLINE).await?;
        BenchResult::Ok(elapsed)
    })?;
    results.push(Row::new("unfail/100k", total, elapsed));
    results.verdict(
        "unfail of 100,000 failed jobs well under a second".into(),
        human(elapsed).to_string(),
        elapsed < Duration::from_secs(1) || total < 100_000,
    );
    Ok(())
}

fn run_baseline(rt: &Runtime, config: &Config, results: &mut Results) -> BenchResult<()> {
    let dir = temp_dir()?;
    let conn = baseline::open_durable(&dir.path().join("commit.db"))?;
    baseline::create_plain_table(&conn)?;
    let (elapsed, samples) = baseline::commit_times(&conn, config.size(1000, 100))?;
    let commits = samples.len() as u64;
    results.push(
        Row::new("baseline/commit", commits, elapsed).with_latency("one-row commit", samples),
    );

    let rows = config.size(250_000, 10_000);
    let conn = baseline::open_durable(&dir.path().join("batch.db"))?;
    baseline::create_plain_table(&conn)?;
    let (elapsed, samples) = baseline::batch_insert(&conn, rows, 1000)?;
    results.push(
        Row::new("baseline/batch-insert-1000", rows, elapsed)
            .with_latency("1000-row transaction", samples),
    );

    // The same inserts into Cairn's own schema (its indexes included), created by opening a queue.
    let path = dir.path().join("schema.db");
    rt.block_on(async {
        let queue = Queue::open(&path).await?;
        queue.close(CLOSE_DEADLINE).await
    })?;
    let conn = baseline::open_durable(&path)?;
    let (elapsed, samples) = baseline::batch_insert(&conn, rows, 1000)?;
    results.push(
        Row::new("baseline/batch-insert-1000-cairn-schema", rows, elapsed)
            .with_latency("1000-row transaction", samples),
    );
    Ok(())
}

fn run_enqueue_batch(rt: &Runtime, config: &Config, results: &mut Results) -> BenchResult<()> {
    let total = config.size(250_000, 10_000);
    for (name, callers) in [("enqueue/batch-1000", 1), ("enqueue/batch-1000-x4", 4)] {
        let (elapsed, samples) = rt.block_on(async {
            let (_dir, queue) = fresh_queue(Durability::Full).await?;
            let measured = enqueue::batches(&queue, total, 1000, callers).await?;
            queue.close(CLOSE_DEADLINE).await?;
            BenchResult::Ok(measured)
        })?;
        results.push(Row::new(name, total, elapsed).with_latency("enqueue_batch call", samples));
    }
    let row = results.row("enqueue/batch-1000").expect("just measured");
    let rate = row.per_second();
    results.verdict(
        "enqueue/batch-1000 (one caller) >= 250,000 jobs/s".into(),
        format!("{} jobs/s", thousands(rate)),
        rate >= 250_000.0,
    );
    Ok(())
}

fn run_enqueue_single(rt: &Runtime, config: &Config, results: &mut Results) -> BenchResult<()> {
    let commit = commit_time(config, results)?;
    let runs = [
        (
            "enqueue/single-x64-full",
            Durability::Full,
            config.size(30_000, 3_000),
        ),
        (
            "enqueue/single-x64-normal",
            Durability::Normal,
            config.size(200_000, 10_000),
        ),
    ];
    for (name, durability, total) in runs {
        let (elapsed, samples) = rt.block_on(async {
            let (_dir, queue) = fresh_queue(durability).await?;
            let measured = enqueue::singles(&queue, total, 64).await?;
            queue.close(CLOSE_DEADLINE).await?;
            BenchResult::Ok(measured)
        })?;
        results.push(Row::new(name, total, elapsed).with_latency("enqueue call", samples));
    }
    let limit = 64.0 / commit.as_secs_f64();
    let full = results
        .row("enqueue/single-x64-full")
        .expect("just measured")
        .per_second();
    results.verdict(
        format!(
            "enqueue/single-x64-full >= 60% of 64 / commit time ({}): {} jobs/s",
            human(commit),
            thousands(0.6 * limit)
        ),
        format!(
            "{} jobs/s, {:.0}% of the limit",
            thousands(full),
            100.0 * full / limit
        ),
        full >= 0.6 * limit,
    );
    let normal = results
        .row("enqueue/single-x64-normal")
        .expect("just measured")
        .per_second();
    results.verdict(
        "enqueue/single-x64-normal >= 50,000 jobs/s".into(),
        format!("{} jobs/s", thousands(normal)),
        normal >= 50_000.0,
    );
    Ok(())
}

/// The mean durable one-row commit: from `baseline/commit` if it ran, else measured briefly now.
fn commit_time(config: &Config, results: &mut Results) -> BenchResult<Duration> {
    if let Some((_, latencies)) = results
        .row("baseline/commit")
        .and_then(|r| r.latency.as_ref())
    {
        return Ok(latencies.mean());
    }
    let dir = temp_dir()?;
    let conn = baseline::open_durable(&dir.path().join("commit.db"))?;
    baseline::create_plain_table(&conn)?;
    let (_, samples) = baseline::commit_times(&conn, config.size(200, 50))?;
    let mean = Latencies::new(samples).mean();
    results.notes.push(format!(
        "baseline/commit did not run; a short measurement gave a mean commit of {}",
        human(mean)
    ));
    Ok(mean)
}

/// Fills a fresh queue with `filler` other jobs (made by `make_filler`) and `jobs` ready ones, then drains the
/// ready ones with 8 workers of 32 slots.
fn drain_scenario(
    rt: &Runtime,
    jobs: u64,
    filler: u64,
    make_filler: MakeJob,
) -> BenchResult<(Duration, Vec<Duration>)> {
    rt.block_on(async {
        let (_dir, queue) = fresh_queue(Durability::Full).await?;
        enqueue::fill(&queue, filler, make_filler).await?;
        enqueue::fill(&queue, jobs, enqueue::job).await?;
        let measured = drain::drain(&queue, jobs, 8, 32).await?;
        queue.close(CLOSE_DEADLINE).await?;
        BenchResult::Ok(measured)
    })
}

fn run_dequeue(rt: &Runtime, config: &Config, results: &mut Results) -> BenchResult<()> {
    let jobs = config.size(100_000, 5_000);
    let (elapsed, samples) = drain_scenario(rt, jobs, 0, enqueue::job)?;
    results
        .push(Row::new("dequeue-finish/8x32", jobs, elapsed).with_latency("finish call", samples));
    let rate = results
        .row("dequeue-finish/8x32")
        .expect("just measured")
        .per_second();
    results.verdict(
        "dequeue-finish/8x32 >= 50,000 jobs/s".into(),
        format!("{} jobs/s", thousands(rate)),
        rate >= 50_000.0,
    );
    Ok(())
}

/// Issue 19: one durable operation at a time against the disk's own rate, measured just before: one caller's
/// one-job enqueues, and `cairn::Worker`s of one and eight slots running no-op handlers. Each row also notes the
/// bytes written per job (WAL frames and checkpoints' copies). A filter that names one row runs that row alone
/// (`bench/compare.sh` counts one row's fsyncs that way).
fn run_durable(rt: &Runtime, config: &Config, results: &mut Results) -> BenchResult<()> {
    let wants = |row: &str| config.wants_row("durable", row);
    if wants("disk/fdatasync-4k") {
        disk::record_disk_row(temp_dir()?.path(), config.size(2_000, 200), results)?;
    }
    if wants("enqueue/one-at-a-time") {
        let jobs = config.size(5_000, 500);
        let (written, (elapsed, samples)) = rt.block_on(async {
            let (_dir, queue) = fresh_queue(Durability::Full).await?;
            let before = disk::bytes_written();
            let measured = durable::one_at_a_time(&queue, jobs).await?;
            let written = disk::bytes_written()
                .zip(before)
                .map(|(after, before)| after - before);
            queue.close(CLOSE_DEADLINE).await?;
            BenchResult::Ok((written, measured))
        })?;
        results.push(
            Row::new("enqueue/one-at-a-time", jobs, elapsed).with_latency("enqueue call", samples),
        );
        note_bytes_per_job(results, "enqueue/one-at-a-time", written, jobs);
    }
    for (name, slots, jobs) in [
        ("worker/1-slot", 1, config.size(5_000, 500)),
        ("worker/8-slots", 8, config.size(20_000, 2_000)),
    ] {
        if !wants(name) {
            continue;
        }
        let (written, elapsed) = rt.block_on(async {
            let (_dir, queue) = fresh_queue(Durability::Full).await?;
            enqueue::fill(&queue, jobs, enqueue::job).await?;
            let before = disk::bytes_written();
            let elapsed = durable::worker_drain(&queue, jobs, slots).await?;
            let written = disk::bytes_written()
                .zip(before)
                .map(|(after, before)| after - before);
            queue.close(CLOSE_DEADLINE).await?;
            BenchResult::Ok((written, elapsed))
        })?;
        results.push(Row::new(name, jobs, elapsed));
        note_bytes_per_job(results, name, written, jobs);
    }

    let Some(disk) = results.row("disk/fdatasync-4k").map(Row::per_second) else {
        return Ok(());
    };
    for name in ["enqueue/one-at-a-time", "worker/1-slot"] {
        let Some(rate) = results.row(name).map(Row::per_second) else {
            continue;
        };
        results.verdict(
            format!(
                "{name} >= 70% of disk/fdatasync-4k ({} syncs/s)",
                thousands(disk)
            ),
            format!("{} jobs/s, {:.0}%", thousands(rate), 100.0 * rate / disk),
            rate >= 0.7 * disk,
        );
    }
    Ok(())
}

fn note_bytes_per_job(results: &mut Results, name: &str, written: Option<u64>, jobs: u64) {
    if let Some(bytes) = written {
        results.notes.push(format!(
            "{name}: {} bytes written per job (write calls: WAL frames and checkpoints)",
            thousands(bytes as f64 / jobs as f64)
        ));
    }
}

fn run_wakeup(rt: &Runtime, config: &Config, results: &mut Results) -> BenchResult<()> {
    let samples = config.size(1000, 100) as usize;
    let measured = rt.block_on(async {
        let (_dir, queue) = fresh_queue(Durability::Full).await?;
        let measured = wakeup::measure(&queue, samples).await?;
        queue.close(CLOSE_DEADLINE).await?;
        BenchResult::Ok(measured)
    })?;
    let n = samples as u64;
    results.push(
        Row::new("wakeup/after-enqueue", n, measured.elapsed)
            .with_latency("enqueue return -> dequeue return", measured.after_enqueue)
            .latency_only(),
    );
    results.push(
        Row::new("wakeup/from-enqueue-call", n, measured.elapsed)
            .with_latency("enqueue call -> dequeue return", measured.from_call)
            .latency_only(),
    );
    if measured.dequeue_first > 0 {
        results.notes.push(format!(
            "wakeup: in {} of {samples} samples the parked dequeue returned before enqueue did (counted as 0)",
            measured.dequeue_first
        ));
    }
    let (_, after) = results
        .row("wakeup/after-enqueue")
        .and_then(|r| r.latency.as_ref())
        .expect("just measured");
    let p99 = after.percentile(99.0);
    results.verdict(
        "wakeup/after-enqueue p99 < 1ms (the enqueue's one commit also claims the job)".into(),
        format!("p99 {}, over {} samples", human(p99), after.len()),
        p99 < Duration::from_millis(1),
    );
    Ok(())
}

fn future_job(i: u64) -> Push {
    enqueue::job(i).delay(Duration::from_secs(24 * 3600))
}

fn other_queue_job(i: u64) -> Push {
    enqueue::job(i).queue("other")
}

/// Makes the `i`th job of a fill.
type MakeJob = fn(u64) -> Push;

fn run_scan(rt: &Runtime, config: &Config, results: &mut Results) -> BenchResult<()> {
    let jobs = config.size(20_000, 2_000);
    let filler = config.size(1_000_000, 10_000);
    let runs: [(&str, u64, MakeJob); 3] = [
        ("scan/empty", 0, enqueue::job),
        ("scan/1m-future-same-queue", filler, future_job),
        ("scan/1m-ready-other-queue", filler, other_queue_job),
    ];
    for (name, filler, make) in runs {
        let (elapsed, samples) = drain_scenario(rt, jobs, filler, make)?;
        results.push(Row::new(name, jobs, elapsed).with_latency("finish call", samples));
    }
    let empty = results
        .row("scan/empty")
        .expect("just measured")
        .per_second();
    for name in ["scan/1m-future-same-queue", "scan/1m-ready-other-queue"] {
        let rate = results.row(name).expect("just measured").per_second();
        let ratio = empty / rate;
        results.verdict(
            format!("{name}: cost <= 1.5x scan/empty ({filler} filler jobs)"),
            format!(
                "{ratio:.2}x ({} vs {} jobs/s)",
                thousands(rate),
                thousands(empty)
            ),
            ratio <= 1.5,
        );
    }
    Ok(())
}

fn other_name_job(i: u64) -> Push {
    Push::new("other.report").data(serde_json::json!({ "i": i }))
}

/// Issue 19: one worker of one slot drains 10,000 jobs named `bench.noop`, asking for that name exactly or for
/// `bench.*`, alone in its queue and beside 1,000,000 ready jobs named `other.report` (enqueued first, so ahead in
/// claim order), each claim against itself alone; on SQLite, and on PostgreSQL when `CAIRN_BENCH_POSTGRES_URL` names a server to create a fresh
/// database on. A claim that reads only the names it asks for costs the same beside the crowd as alone.
fn run_names(rt: &Runtime, config: &Config, results: &mut Results) -> BenchResult<()> {
    let jobs = config.size(10_000, 1_000);
    let filler = config.size(1_000_000, 10_000);
    let postgres = std::env::var("CAIRN_BENCH_POSTGRES_URL").ok();
    if postgres.is_none() {
        results.notes.push(
            "names: PostgreSQL rows skipped; set CAIRN_BENCH_POSTGRES_URL=postgres://user@host:port/db to run them"
                .into(),
        );
    }
    for server in [None].into_iter().chain(postgres.as_deref().map(Some)) {
        let prefix = if server.is_some() {
            "names/postgres-"
        } else {
            "names/"
        };
        let runs: [(&str, u64, &[&str]); 4] = [
            ("exact-alone", 0, &["bench.noop"]),
            ("exact-beside-1m", filler, &["bench.noop"]),
            ("prefix-alone", 0, &["bench.*"]),
            ("prefix-beside-1m", filler, &["bench.*"]),
        ];
        for (row, filler, names) in runs {
            let name = format!("{prefix}{row}");
            let (elapsed, samples) = rt.block_on(async {
                let (_place, queue) = fresh_queue_on(server).await?;
                enqueue::fill(&queue, filler, other_name_job).await?;
                enqueue::fill(&queue, jobs, enqueue::job).await?;
                let measured = drain::drain_named(&queue, jobs, 1, 1, names).await?;
                queue.close(CLOSE_DEADLINE).await?;
                BenchResult::Ok(measured)
            })?;
            results.push(Row::new(&name, jobs, elapsed).with_latency("finish call", samples));
        }
        for claim in ["exact", "prefix"] {
            let alone = results
                .row(&format!("{prefix}{claim}-alone"))
                .expect("just measured")
                .per_second();
            let name = format!("{prefix}{claim}-beside-1m");
            let rate = results.row(&name).expect("just measured").per_second();
            let ratio = alone / rate;
            results.verdict(
                format!(
                    "{name}: cost <= 1.2x {prefix}{claim}-alone ({filler} jobs of another name)"
                ),
                format!(
                    "{ratio:.2}x ({} vs {} jobs/s)",
                    thousands(rate),
                    thousands(alone)
                ),
                ratio <= 1.2,
            );
        }
    }
    Ok(())
}

/// A durable queue on a fresh SQLite file, or on a fresh database of the PostgreSQL server `server` (an admin URL);
/// the returned guard removes the file or drops the database.
async fn fresh_queue_on(server: Option<&str>) -> BenchResult<(FreshPlace, Queue)> {
    let Some(server) = server else {
        let (dir, queue) = fresh_queue(Durability::Full).await?;
        return Ok((FreshPlace::Dir { _dir: dir }, queue));
    };
    let database = format!("cairn_bench_{}_{}", std::process::id(), next_database());
    let admin = server.to_owned();
    let sql = format!("CREATE DATABASE {database}");
    tokio::task::spawn_blocking(move || -> BenchResult<()> {
        postgres::Client::connect(&admin, postgres::NoTls)?.batch_execute(&sql)?;
        Ok(())
    })
    .await??;
    let (base, _) = server
        .rsplit_once('/')
        .ok_or("CAIRN_BENCH_POSTGRES_URL: expected postgres://user@host:port/database")?;
    let queue = Queue::open(format!("{base}/{database}")).await?;
    Ok((
        FreshPlace::Database {
            admin: server.to_owned(),
            name: database,
        },
        queue,
    ))
}

fn next_database() -> u32 {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// Where a fresh queue lives, removed when dropped.
enum FreshPlace {
    /// Kept for its drop, which removes the directory.
    Dir {
        _dir: TempDir,
    },
    Database {
        admin: String,
        name: String,
    },
}

impl Drop for FreshPlace {
    fn drop(&mut self) {
        if let FreshPlace::Database { admin, name } = self {
            let (admin, sql) = (
                admin.clone(),
                format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
            );
            // On a thread of its own: the synchronous client cannot run on the runtime's threads.
            let _ = std::thread::spawn(move || {
                if let Ok(mut client) = postgres::Client::connect(&admin, postgres::NoTls) {
                    let _ = client.batch_execute(&sql);
                }
            })
            .join();
        }
    }
}
