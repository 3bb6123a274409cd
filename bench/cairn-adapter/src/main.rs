//! Cairn's adapter for the long-horizon benchmark of PostgreSQL job queues
//! (hardbyte/postgresql-job-queue-benchmarking; its contract is CONTRIBUTING_ADAPTERS.md there).
//!
//! One long-running process, as an application embedding Cairn would be: a [`cairn::Queue`] opened on
//! `DATABASE_URL` with default options (retention, vacuum and all), a producer enqueueing at the load the
//! harness sets, and one [`cairn::Worker`] of `WORKER_COUNT` slots whose handler works `JOB_WORK_MS`. Standard
//! output carries the contract's JSON lines (a descriptor, then samples), standard error the logs. SIGTERM or
//! Ctrl-C stops it within five seconds with status 0; a bad setting exits with status 2 before anything starts.

mod depth;
mod latency;
mod meter;
mod producer;
mod settings;
mod telemetry;

use cairn::Jobs;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use cairn::{Queue, SqlQuery, Worker};

use meter::Meter;
use producer::{JOB, Producer, QUEUE};
use settings::Settings;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// How long running handlers get to finish at shutdown; with the rest, well inside the contract's five seconds.
const WORKER_STOP: Duration = Duration::from_secs(2);

fn main() -> ExitCode {
    let settings = match Settings::from_env() {
        Ok(settings) => settings,
        Err(e) => {
            eprintln!("cairn-adapter: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("cairn-adapter: starting the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(run(settings));
    runtime.shutdown_timeout(Duration::from_millis(500));
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cairn-adapter: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(settings: Settings) -> Result<(), String> {
    let queue = Queue::open(&settings.database).await.map_err(|e| {
        format!(
            "opening {}: {e}",
            cairn::redacted_location(&settings.database)
        )
    })?;
    telemetry::emit_descriptor(
        settings.instance,
        &settings.db_name(),
        &schema_version(&queue).await,
    );

    let meter = Arc::new(Meter::new(settings.sample_every));
    let stop = Arc::new(AtomicBool::new(false));
    let worker = start_worker(&queue, &settings, meter.clone())?;
    let producer = settings.load.map(|load| {
        tokio::spawn(
            Producer {
                queue: queue.clone(),
                meter: meter.clone(),
                stop: stop.clone(),
                batch_max: settings.batch_max,
                padding: "x".repeat(settings.payload_bytes.saturating_sub(64)),
                next_seq: 0,
            }
            .run(load),
        )
    });
    let depth = tokio::spawn(depth::poll(queue.clone(), meter.clone(), stop.clone()));
    let sampler = tokio::spawn(telemetry::sample(
        meter.clone(),
        settings.sample_every,
        settings.instance,
        stop.clone(),
    ));

    shutdown_signal().await;
    eprintln!("cairn-adapter: stopping");
    stop.store(true, Ordering::SeqCst);
    sampler.abort();
    depth.abort();
    if let Some(producer) = producer
        && tokio::time::timeout(Duration::from_secs(1), producer)
            .await
            .is_err()
    {
        eprintln!("cairn-adapter: the producer's last enqueue did not end in time");
    }
    match tokio::time::timeout(
        WORKER_STOP + Duration::from_millis(500),
        worker.stop(WORKER_STOP),
    )
    .await
    {
        Ok(Ok(report)) => eprintln!(
            "cairn-adapter: the worker ran {} jobs; {} given back at shutdown",
            report.finished, report.released
        ),
        Ok(Err(e)) => eprintln!("cairn-adapter: stopping the worker: {e}"),
        Err(_) => eprintln!("cairn-adapter: the worker did not stop in time"),
    }
    if let Err(e) = queue.close(Duration::from_secs(1)).await {
        eprintln!("cairn-adapter: closing the queue: {e}");
    }
    Ok(())
}

fn start_worker(queue: &Queue, settings: &Settings, meter: Arc<Meter>) -> Result<Worker, String> {
    let work = settings.work;
    Worker::builder(
        queue,
        format!("cairn-adapter-{}-{}", settings.instance, std::process::id()),
    )
    .queue(QUEUE)
    .max_concurrency(settings.workers)
    .handler(JOB, move |ctx| {
        let meter = meter.clone();
        async move {
            meter.started(ctx.data()["produced_at_us"].as_u64());
            if !work.is_zero() {
                tokio::time::sleep(work).await;
            }
            meter.completed.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
    })
    .start()
    .map_err(|e| format!("starting the worker: {e}"))
}

/// The newest migration the database has, for the descriptor.
async fn schema_version(queue: &Queue) -> String {
    let query = SqlQuery::new("SELECT max(version) FROM cairn_migrations");
    match queue.sql(query).await {
        Ok(result) => result
            .rows
            .first()
            .and_then(|row| row.first())
            .map_or_else(|| "unknown".to_owned(), ToString::to_string),
        Err(e) => {
            eprintln!("cairn-adapter: reading the schema's version: {e}");
            "unknown".to_owned()
        }
    }
}

/// Waits for SIGTERM (the harness's stop) or Ctrl-C.
async fn shutdown_signal() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(term) => term,
        Err(e) => {
            eprintln!("cairn-adapter: cannot watch for SIGTERM ({e}); only Ctrl-C stops it");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}
