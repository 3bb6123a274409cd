//! The sustained scenario: a long run at a steady load, sampled as it goes, to show what short runs hide
//! (housekeeping stalls, throughput that decays as tables grow, latency that creeps). Each of `--clients` clients
//! runs a producer and a `cairn::Worker` of `--in-flight` slots, with default worker settings, as an application
//! would. Producers either keep `--depth` jobs ready (topping up in batches of up to `--batch-size` once a tenth
//! of the depth has been taken) or enqueue at `--rate` jobs per second; handlers wait `--work` and return.
//!
//! Every `--interval` a [`Sample`] is printed (and written to `--record` as a JSON line): completions and
//! enqueues per second, depth, claim latency percentiles (from the enqueue call to the handler's start, timed by
//! the bench's one clock), the CPU of the measured process, and what the database holds. Every 30 seconds a
//! [`Window`] of claim latency; at the end the run's [`Steadiness`] against issue 25's bar, and `--plot`.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use cairn::{Backend, Push, Worker};
use serde_json::json;
use tokio::task::JoinSet;

use super::report::{Goal, ScenarioReport, bytes, human, thousands};
use super::series::{self, Counts, Sample, Steadiness, WINDOW, Window};
use super::stats::Latencies;
use super::storage::Probe;
use super::target::Target;
use super::{drain, plot, procfs};

/// The queue this scenario uses.
pub const QUEUE: &str = "bench-sustained";

/// How long the workers have, at the end, to finish the jobs they hold.
const STOP_DEADLINE: Duration = Duration::from_secs(60);

/// How long a producer waits after a failed enqueue before it tries again: a long run goes on through a blip.
const RETRY_PAUSE: Duration = Duration::from_millis(100);

/// The load the producers keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Load {
    /// Keep this many jobs enqueued and not yet started.
    Depth(u64),
    /// Enqueue this many jobs per second, whatever the workers manage.
    Rate(u64),
}

/// How a sustained run goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// How long the load runs.
    pub duration: Duration,
    /// Time between samples.
    pub interval: Duration,
    /// What the producers keep up.
    pub load: Load,
    /// How long each handler works.
    pub work: Duration,
    /// Worker slots per client.
    pub slots: u32,
    /// The most jobs per enqueue call.
    pub batch_size: u64,
    /// Where to write the samples as JSON lines.
    pub record: Option<PathBuf>,
    /// Where to write the plot (SVG).
    pub plot: Option<PathBuf>,
}

/// Where the run's figures about its surroundings come from.
#[derive(Debug, Clone)]
pub struct Surroundings<'a> {
    /// The process whose CPU is measured: the bench itself for an embedded queue, the server if its pid is known.
    pub cpu_pid: Option<u32>,
    /// The embedded queue's SQLite file, whose size is read; `None` for PostgreSQL or a server.
    pub file: Option<&'a Path>,
    /// What the run is against, in words, for the record and the plot's title.
    pub title: String,
}

/// The counters producers and handlers share with the sampler.
struct Meter {
    start: Instant,
    /// Jobs enqueued or being enqueued: a producer counts a batch before its call, so that another does not add
    /// the same room again.
    enqueued: AtomicU64,
    /// Jobs whose handler started.
    started: AtomicU64,
    /// Jobs whose handler ended.
    completed: AtomicU64,
    /// Enqueue calls that failed.
    failed_enqueues: AtomicU64,
    /// Claim latencies since the last sample.
    claims: Mutex<Vec<Duration>>,
    stop: AtomicBool,
}

impl Meter {
    fn depth(&self) -> u64 {
        self.enqueued
            .load(Ordering::SeqCst)
            .saturating_sub(self.started.load(Ordering::SeqCst))
    }

    /// Microseconds since the start, the time stamp a job carries.
    fn now_us(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_micros()).unwrap_or(u64::MAX)
    }
}

/// Runs the load for `plan.duration` over `handles`, sampling as it goes.
///
/// # Errors
/// A worker that would not start or stop, a record or plot file that cannot be written.
pub async fn run<T: Target + Backend>(
    handles: &[T],
    plan: &Plan,
    around: Surroundings<'_>,
) -> anyhow::Result<ScenarioReport> {
    let leftovers = drain::drain(handles, QUEUE).await?;
    let probe = Probe::find(&handles[0], around.file).await;
    let title = format!("{}: {}", around.title, brief(plan, handles.len()));
    let mut record = Record::create(plan.record.as_deref())?;
    if let Some(path) = &plan.plot {
        // Fail now, not after an hour's run.
        std::fs::write(path, "").with_context(|| format!("writing the plot {}", path.display()))?;
    }
    record.line(&json!({
        "type": "run",
        "title": title,
        "duration_s": plan.duration.as_secs_f64(),
        "interval_s": plan.interval.as_secs_f64(),
        "depth": match plan.load { Load::Depth(d) => Some(d), Load::Rate(_) => None },
        "rate": match plan.load { Load::Rate(r) => Some(r), Load::Depth(_) => None },
        "clients": handles.len(),
        "slots": plan.slots,
        "work_ms": plan.work.as_secs_f64() * 1000.0,
        "batch_size": plan.batch_size,
    }))?;

    let meter = Arc::new(Meter {
        start: Instant::now(),
        enqueued: AtomicU64::new(0),
        started: AtomicU64::new(0),
        completed: AtomicU64::new(0),
        failed_enqueues: AtomicU64::new(0),
        claims: Mutex::new(Vec::new()),
        stop: AtomicBool::new(false),
    });
    let mut workers = Vec::with_capacity(handles.len());
    for (i, handle) in handles.iter().enumerate() {
        workers.push(start_worker(handle, i, plan, meter.clone())?);
    }
    let mut producers = JoinSet::new();
    let clients = handles.len() as u64;
    for (i, handle) in handles.iter().enumerate() {
        let load = match plan.load {
            Load::Depth(depth) => Load::Depth(depth),
            // Each producer keeps its share of the rate; the first ones take the remainder.
            Load::Rate(rate) => Load::Rate(rate / clients + u64::from((i as u64) < rate % clients)),
        };
        producers.spawn(produce(
            handle.clone(),
            load,
            plan.batch_size,
            meter.clone(),
        ));
    }

    let (samples, windows) = sample(plan, &around, &probe, &meter, &mut record).await?;

    meter.stop.store(true, Ordering::SeqCst);
    while let Some(done) = producers.join_next().await {
        done.context("a producer stopped")?;
    }
    for worker in workers {
        worker
            .stop(STOP_DEADLINE)
            .await
            .context("stopping a worker")?;
    }
    let elapsed = meter.start.elapsed();
    let drained = drain::drain(handles, QUEUE).await?;

    let steadiness = Steadiness::of(&samples, &windows);
    record.line(&json!({"type": "summary", "steadiness": steadiness}))?;
    if let Some(path) = &plan.plot {
        std::fs::write(path, plot::svg(&title, &samples))
            .with_context(|| format!("writing the plot {}", path.display()))?;
    }
    let completed: u64 = samples.iter().map(|s| s.completed).sum();
    let mut report = ScenarioReport::new(
        "sustained",
        shape(plan, handles.len()),
        completed,
        samples
            .last()
            .map_or(elapsed, |s| Duration::from_secs_f64(s.at_s)),
    )
    .with_leftovers(leftovers, QUEUE);
    if let Some(s) = &steadiness {
        report.goal = Some(Goal {
            text: format!(
                "steady: no sample below {:.0} % of the median completion rate, no 30 s window's claim p99 \
                 above {}x the median",
                series::RATE_FLOOR * 100.0,
                series::P99_CEILING
            ),
            met: s.rate_held && s.latency_held,
        });
        report.notes.push(format!(
            "completions per second: median {}, lowest {} ({:.0} % of the median, in the sample ending at {:.0} s)",
            thousands(s.median_completions_per_s),
            thousands(s.lowest_completions_per_s),
            s.lowest_over_median * 100.0,
            s.lowest_at_s
        ));
        report.notes.push(format!(
            "claim p99: median {:.2} ms over the 30 s windows, worst {:.2} ms ({:.2}x, in the window from {:.0} s)",
            s.median_claim_p99_ms,
            s.worst_window_p99_ms,
            s.worst_over_median,
            s.worst_window_from_s
        ));
    }
    let failed = meter.failed_enqueues.load(Ordering::SeqCst);
    if failed > 0 {
        report
            .notes
            .push(format!("{failed} enqueue calls failed and were retried"));
    }
    if drained > 0 {
        report.notes.push(format!(
            "afterwards the {drained} jobs still queued were dequeued and finished (not measured)"
        ));
    }
    for (what, path) in [("samples", &plan.record), ("plot", &plan.plot)] {
        if let Some(path) = path {
            report
                .notes
                .push(format!("{what} written to {}", path.display()));
        }
    }
    Ok(report)
}

fn start_worker<T: Backend + Clone>(
    handle: &T,
    i: usize,
    plan: &Plan,
    meter: Arc<Meter>,
) -> anyhow::Result<Worker> {
    let work = plan.work;
    Worker::builder(handle, format!("bench-sustained-{i}"))
        .queue(QUEUE)
        .max_concurrency(plan.slots)
        .handler("bench.noop", move |ctx| {
            let meter = meter.clone();
            async move {
                if let Some(at) = ctx.data()["t"].as_u64() {
                    let waited = meter
                        .start
                        .elapsed()
                        .saturating_sub(Duration::from_micros(at));
                    meter
                        .claims
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .push(waited);
                }
                meter.started.fetch_add(1, Ordering::SeqCst);
                if !work.is_zero() {
                    tokio::time::sleep(work).await;
                }
                meter.completed.fetch_add(1, Ordering::SeqCst);
                Ok(())
            }
        })
        .start()
        .context("starting a worker")
}

/// One producer: keeps the load until told to stop. Failed calls are counted and tried again.
async fn produce<T: Target>(target: T, load: Load, batch_size: u64, meter: Arc<Meter>) {
    let mut next = 0u64;
    let mut sent = 0u64;
    while !meter.stop.load(Ordering::SeqCst) {
        let count = match load {
            Load::Depth(depth) => {
                let room = depth.saturating_sub(meter.depth());
                // Top up once a tenth of the depth is gone, so that batches stay batches.
                if room < (depth / 10).clamp(1, batch_size) {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    continue;
                }
                room.min(batch_size)
            }
            Load::Rate(rate) => {
                let due = (meter.start.elapsed().as_secs_f64() * rate as f64) as u64;
                if due <= sent {
                    let next_due = Duration::from_secs_f64((sent + 1) as f64 / rate as f64);
                    let wait = next_due.saturating_sub(meter.start.elapsed());
                    tokio::time::sleep(
                        wait.clamp(Duration::from_millis(1), Duration::from_millis(10)),
                    )
                    .await;
                    continue;
                }
                (due - sent).min(batch_size)
            }
        };
        meter.enqueued.fetch_add(count, Ordering::SeqCst);
        let now = meter.now_us();
        let jobs: Vec<Push> = (0..count)
            .map(|k| {
                // At a rate, a job's latency counts from when it was due, not from when a late call sent it: a
                // stalled enqueue must not hide the wait of the jobs it held up.
                let t = match load {
                    Load::Rate(rate) => ((sent + k) as f64 * 1e6 / rate as f64) as u64,
                    Load::Depth(_) => now,
                };
                Push::new("bench.noop")
                    .queue(QUEUE)
                    .data(json!({ "i": next + k, "t": t }))
            })
            .collect();
        match target.enqueue_batch(jobs).await {
            Ok(_) => {
                next += count;
                sent += count;
            }
            Err(e) => {
                meter.enqueued.fetch_sub(count, Ordering::SeqCst);
                meter.failed_enqueues.fetch_add(1, Ordering::SeqCst);
                tracing::warn!(error = %e, "an enqueue failed; trying again");
                tokio::time::sleep(RETRY_PAUSE).await;
            }
        }
    }
}

/// Takes a sample every interval until the run's time is up; returns the samples and the windows.
async fn sample<T: Target>(
    plan: &Plan,
    around: &Surroundings<'_>,
    probe: &Probe<T>,
    meter: &Meter,
    record: &mut Record,
) -> anyhow::Result<(Vec<Sample>, Vec<Window>)> {
    let mut samples = Vec::new();
    let mut windows = Vec::new();
    let mut window_claims = Vec::new();
    let mut window_from = 0.0;
    let mut last_at = 0.0;
    let (mut last_completed, mut last_enqueued) = (0, 0);
    let mut last_cpu = around.cpu_pid.and_then(|pid| procfs::cpu_seconds(pid).ok());
    eprintln!(
        "{:>7} {:>10} {:>10} {:>7} {:>9} {:>9} {:>9} {:>6} {:>10} {:>10}",
        "at", "done/s", "queued/s", "depth", "claim p50", "p95", "p99", "cpu", "dead rows", "size"
    );
    let mut n = 1u32;
    loop {
        let due = plan.interval * n;
        let at = due.min(plan.duration);
        tokio::time::sleep_until((meter.start + at).into()).await;
        let claims = std::mem::take(
            &mut *meter
                .claims
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        let completed = meter.completed.load(Ordering::SeqCst);
        let enqueued = meter.enqueued.load(Ordering::SeqCst);
        let now = meter.start.elapsed().as_secs_f64();
        window_claims.extend_from_slice(&claims);
        let counts = Counts {
            completed: completed - last_completed,
            enqueued: enqueued.saturating_sub(last_enqueued),
            depth: meter.depth(),
            claims: Latencies::new(claims),
        };
        let mut s = Sample::new(now, now - last_at, &counts);
        let cpu = around.cpu_pid.and_then(|pid| procfs::cpu_seconds(pid).ok());
        if let (Some(before), Some(after)) = (last_cpu, cpu) {
            s.cpu_percent = Some(((after - before) / s.seconds * 1000.0).round() / 10.0);
        }
        last_cpu = cpu;
        s.storage = probe.read().await;
        eprintln!("{}", sample_line(&s));
        record.line(&json!({"type": "sample", "sample": s}))?;
        (last_at, last_completed, last_enqueued) = (now, completed, enqueued);
        samples.push(s);
        let done = at >= plan.duration;
        if now - window_from >= WINDOW.as_secs_f64() - 1e-3 || (done && !window_claims.is_empty()) {
            let w = Window::new(
                window_from,
                now,
                &Latencies::new(std::mem::take(&mut window_claims)),
            );
            record.line(&json!({"type": "window", "window": w}))?;
            windows.push(w);
            window_from = now;
        }
        if done {
            return Ok((samples, windows));
        }
        n += 1;
    }
}

fn sample_line(s: &Sample) -> String {
    let ms = |v: f64| human(Duration::from_secs_f64(v / 1000.0));
    let storage = s.storage.as_ref();
    format!(
        "{:>6.0}s {:>10} {:>10} {:>7} {:>9} {:>9} {:>9} {:>6} {:>10} {:>10}",
        s.at_s,
        thousands(s.completions_per_s),
        thousands(s.enqueues_per_s),
        thousands(s.depth as f64),
        ms(s.claim_p50_ms),
        ms(s.claim_p95_ms),
        ms(s.claim_p99_ms),
        s.cpu_percent
            .map_or_else(|| "-".to_owned(), |c| format!("{c:.0}%")),
        storage
            .and_then(|s| s.dead)
            .map_or_else(|| "-".to_owned(), |d| thousands(d as f64)),
        storage.map_or_else(|| "-".to_owned(), |s| bytes(s.bytes as f64)),
    )
}

/// The run's shape in a few words, for the plot's title.
fn brief(plan: &Plan, clients: usize) -> String {
    let load = match plan.load {
        Load::Depth(depth) => format!("depth {}", thousands(depth as f64)),
        Load::Rate(rate) => format!("{} jobs/s", thousands(rate as f64)),
    };
    format!(
        "{clients} x {} slots, {load}, {} of work per job",
        plan.slots,
        human(plan.work)
    )
}

fn shape(plan: &Plan, clients: usize) -> String {
    let load = match plan.load {
        Load::Depth(depth) => format!("keeping {} jobs ready", thousands(depth as f64)),
        Load::Rate(rate) => format!("enqueueing {} jobs/s", thousands(rate as f64)),
    };
    format!(
        "{clients} producers {load} (at most {} per call), and {clients} cairn::Workers of {} slots whose \
         handler works {}; sampled every {} for {}",
        plan.batch_size,
        plan.slots,
        human(plan.work),
        human(plan.interval),
        human(plan.duration)
    )
}

/// The JSON-lines file of a run, if one was asked for; each line is flushed, so a run cut short keeps what it
/// recorded.
struct Record {
    file: Option<std::io::BufWriter<std::fs::File>>,
    path: PathBuf,
}

impl Record {
    fn create(path: Option<&Path>) -> anyhow::Result<Record> {
        let file = path
            .map(|p| {
                std::fs::File::create(p)
                    .with_context(|| format!("creating the record {}", p.display()))
            })
            .transpose()?
            .map(std::io::BufWriter::new);
        Ok(Record {
            file,
            path: path.map(Path::to_owned).unwrap_or_default(),
        })
    }

    fn line(&mut self, value: &serde_json::Value) -> anyhow::Result<()> {
        if let Some(file) = &mut self.file {
            serde_json::to_writer(&mut *file, value)?;
            file.write_all(b"\n")?;
            file.flush()
                .with_context(|| format!("writing the record {}", self.path.display()))?;
        }
        Ok(())
    }
}
