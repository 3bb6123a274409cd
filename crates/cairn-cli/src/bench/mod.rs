//! `cairn bench`: a load generator for a server (over HTTP) or an embedded queue, reporting throughput and latency
//! percentiles per request type, and the targets they are held to.
//!
//! Modules: `args` (the flags and their checks), `target` (the calls every scenario makes, on a server or an
//! embedded queue), `embedded` (the embedded mode's database), one module per scenario (`throughput`, `batch`,
//! `workers`, `wakeup`, `due`, `idle`, `sustained`), `drain` (emptying a bench queue), `stats` (percentiles), `report`
//! (text and JSON), `progress` (progress bars), `procfs` (what the idle and sustained scenarios read about a
//! process), and for the sustained scenario `series` (samples, windows and how steady they were), `storage` (what
//! the database holds) and `plot` (an SVG of the run). Each scenario uses a queue of its
//! own, `bench-<scenario>`, so that nothing mixes with real jobs.

mod args;
mod batch;
mod drain;
mod due;
mod embedded;
mod idle;
mod plot;
mod procfs;
mod progress;
mod report;
mod series;
mod stats;
mod storage;
mod sustained;
mod target;
mod throughput;
mod wakeup;
mod workers;

use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use cairn::{Push, Queue};
use serde_json::json;

pub use args::BenchArgs;

use crate::exit::Code;
use args::{Mode, Scenario, Settings};
use embedded::BenchDb;
use idle::IdleTarget;
use report::Report;
use target::Target;

/// How long closing the embedded queue may take.
const CLOSE_DEADLINE: Duration = Duration::from_secs(30);

/// Runs the scenarios asked for and prints what they measured.
///
/// # Errors
/// Bad flags (naming the flag), a server that cannot be reached, a database that cannot be opened, a request that
/// fails during a scenario.
pub async fn run(args: BenchArgs) -> anyhow::Result<Code> {
    let settings = args.validate()?;
    // The idle scenario holds thousands of sockets, and the usual soft limit of 1024 descriptors is far too low.
    crate::serve::raise_open_file_limit();
    match &settings.mode {
        Mode::Server => run_on_server(&args, &settings).await?,
        Mode::Embedded(path) => run_embedded(path.as_deref(), &args, &settings).await?,
    }
    Ok(Code::Success)
}

async fn run_on_server(args: &BenchArgs, settings: &Settings) -> anyhow::Result<()> {
    let client = args.client.client()?;
    let health = client
        .health()
        .await
        .with_context(|| format!("reaching the server at {}", client.url()))?;
    // Every server, --server first: client i loads server i mod n.
    let mut servers = vec![client.clone()];
    for url in &args.also {
        let mut other = args.client.clone();
        other.server = url.clone();
        let other = other.client().map_err(|e| anyhow::anyhow!("--also: {e}"))?;
        other
            .health()
            .await
            .with_context(|| format!("reaching the server at {url}"))?;
        servers.push(other);
    }
    // A client each, so that each has connections of its own, as separate programs would.
    let handles = (0..settings.clients.max(2))
        .map(|i| {
            let mut args = args.client.clone();
            args.server = servers[i % servers.len()].url().to_owned();
            args.client()
        })
        .collect::<cairn::Result<Vec<_>>>()?;
    let idle = settings.server_pid.map(|pid| IdleTarget {
        client: client.clone(),
        token: args.client.token.clone(),
        pid,
    });
    let mut report = Report::start(
        format!(
            "{} (cairn {}), {}",
            match servers.len() {
                1 => format!("server {}", client.url()),
                n => format!(
                    "{n} servers ({})",
                    servers
                        .iter()
                        .map(|s| s.url())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            },
            health.version.as_deref().unwrap_or("?"),
            describe(settings)
        ),
        "server",
        settings_json(settings),
        args.json,
    );
    let around = sustained::Surroundings {
        cpu_pid: settings.server_pid,
        file: None,
        title: format!(
            "cairn {} at {}",
            health.version.as_deref().unwrap_or("?"),
            client.url()
        ),
    };
    run_scenarios(settings, &handles, true, idle.as_ref(), around, &mut report).await?;
    report.finish();
    Ok(())
}

async fn run_embedded(
    path: Option<&Path>,
    args: &BenchArgs,
    settings: &Settings,
) -> anyhow::Result<()> {
    let db = BenchDb::new(path)?;
    if let Some(url) = db.path().to_str().filter(|p| cairn::is_postgres_url(p)) {
        refuse_used_database(url).await?;
    }
    let queue = Queue::open(db.path())
        .await
        .with_context(|| format!("opening the database {}", db.path().display()))?;
    let handles = vec![queue.clone(); settings.clients.max(2)];
    let on = if queue.is_postgres() {
        format!("PostgreSQL {}", queue.path().display())
    } else if db.is_temporary() {
        format!("a temporary file {} (durability full)", db.path().display())
    } else {
        format!("the fresh file {} (durability full)", db.path().display())
    };
    let mut report = Report::start(
        format!("embedded queue on {on}, {}", describe(settings)),
        "embedded",
        settings_json(settings),
        args.json,
    );
    let around = sustained::Surroundings {
        cpu_pid: Some(std::process::id()),
        file: (!queue.is_postgres()).then(|| db.path()),
        title: if queue.is_postgres() {
            "embedded queue on PostgreSQL".to_owned()
        } else {
            "embedded queue on a SQLite file (durability full)".to_owned()
        },
    };
    let outcome = run_scenarios(settings, &handles, false, None, around, &mut report).await;
    drop(handles);
    queue
        .close(CLOSE_DEADLINE)
        .await
        .context("closing the queue")?;
    outcome?;
    report.finish();
    Ok(())
}

/// Refuses a PostgreSQL database that holds Cairn's tables already, before a queue migrates it: the bench must
/// never touch someone's queue, nor upgrade its schema.
async fn refuse_used_database(url: &str) -> anyhow::Result<()> {
    let url = url.to_owned();
    let used = tokio::task::spawn_blocking(move || -> anyhow::Result<bool> {
        let mut client = cairn::connect_postgres(&url)?;
        let row = client.query_one(
            "SELECT to_regclass('cairn_migrations') IS NOT NULL OR to_regclass('jobs') IS NOT NULL",
            &[],
        )?;
        Ok(row.get(0))
    })
    .await
    .context("looking at the database")??;
    if used {
        return Err(args::invalid(
            "--db",
            "the database holds Cairn's tables already; the bench needs a database of its own (CREATE DATABASE)",
        )
        .into());
    }
    Ok(())
}

/// Runs each scenario in turn and adds it to the report. `over_http` says whether the targets apply.
async fn run_scenarios<T: Target + cairn::Backend>(
    settings: &Settings,
    handles: &[T],
    over_http: bool,
    idle: Option<&IdleTarget>,
    around: sustained::Surroundings<'_>,
    report: &mut Report,
) -> anyhow::Result<()> {
    let clients = &handles[..settings.clients];
    for (i, scenario) in settings.scenarios.iter().enumerate() {
        let after_others = i > 0;
        let result = match scenario {
            Scenario::Throughput => {
                throughput::run(clients, settings.in_flight, settings.jobs, over_http).await
            }
            Scenario::Batch => {
                let (jobs, size) = (settings.jobs, settings.batch_size);
                batch::run(clients, settings.in_flight, jobs, size, over_http).await
            }
            Scenario::Workers => {
                let (jobs, size) = (settings.jobs, settings.batch_size);
                workers::run(
                    clients,
                    settings.in_flight,
                    jobs,
                    size,
                    batch::Shape {
                        keys: settings.keys,
                        batch_groups: settings.batch_groups,
                    },
                    workers::Durable {
                        steps: settings.steps,
                        waiting: settings.waiting,
                    },
                    over_http,
                )
                .await
            }
            Scenario::Wakeup => {
                wakeup::run(&handles[0], &handles[1], settings.samples, over_http).await
            }
            Scenario::Due => {
                // The second handle: on the second server with --also, which does not lead the timed work.
                due::run(
                    clients,
                    settings.in_flight,
                    &handles[1],
                    settings.samples,
                    over_http,
                )
                .await
            }
            Scenario::Idle => {
                let idle = idle.expect("the arguments check that idle runs only with a server pid");
                idle::run(idle, settings.connections, after_others).await
            }
            Scenario::Sustained => {
                let plan = settings
                    .sustained
                    .as_ref()
                    .expect("the arguments make a plan when sustained runs");
                sustained::run(clients, plan, around.clone()).await
            }
        };
        report.push(result.with_context(|| format!("the {} scenario", scenario.as_str()))?);
    }
    Ok(())
}

/// The job every scenario pushes: a no-op with a little data, as in the engine's `cargo bench`.
fn job(queue: &str, i: u64) -> Push {
    Push::new("bench.noop").queue(queue).data(json!({ "i": i }))
}

/// Job `i` for `queue`, with concurrency key `key-{i % keys}` when the jobs are spread over keys.
fn keyed_job(queue: &str, i: u64, keys: Option<u64>) -> Push {
    match keys {
        Some(keys) => job(queue, i).concurrency_key(format!("key-{}", i % keys)),
        None => job(queue, i),
    }
}

/// The scenarios and the settings that shape them, in words.
fn describe(settings: &Settings) -> String {
    let parts: Vec<String> = settings
        .scenarios
        .iter()
        .map(|s| match s {
            Scenario::Throughput | Scenario::Batch | Scenario::Workers => format!(
                "{} ({} jobs, {} clients x {} in flight)",
                s.as_str(),
                report::thousands(settings.jobs as f64),
                settings.clients,
                settings.in_flight
            ),
            Scenario::Wakeup => format!("wakeup ({} samples)", settings.samples),
            Scenario::Due => format!(
                "due ({} due times, {} clients x {} in flight beside them)",
                settings.samples, settings.clients, settings.in_flight
            ),
            Scenario::Sustained => format!(
                "sustained ({} clients x {} slots)",
                settings.clients, settings.in_flight
            ),
            Scenario::Idle => format!(
                "idle ({} connections)",
                report::thousands(settings.connections as f64)
            ),
        })
        .collect();
    format!("scenarios {}", parts.join(", "))
}

fn settings_json(settings: &Settings) -> serde_json::Value {
    json!({
        "scenarios": settings.scenarios.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
        "jobs": settings.jobs,
        "clients": settings.clients,
        "in_flight": settings.in_flight,
        "batch_size": settings.batch_size,
        "samples": settings.samples,
        "connections": settings.connections,
        "server_pid": settings.server_pid,
        "sustained": settings.sustained.as_ref().map(|plan| json!({
            "duration_s": plan.duration.as_secs_f64(),
            "interval_s": plan.interval.as_secs_f64(),
            "work_ms": plan.work.as_secs_f64() * 1000.0,
        })),
    })
}
