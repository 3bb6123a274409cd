//! `cairn bench` flags, and their checks: [`BenchArgs::validate`] turns the flags into [`Settings`] or an error
//! naming the flag. Runs nothing.

use std::path::{Path, PathBuf};
use std::time::Duration;

use cairn::{Error, ErrorKind};
use clap::{Args, ValueEnum};

use super::sustained::{Load, Plan};
use crate::cli::ClientArgs;

/// The most concurrent clients.
pub const MAX_CLIENTS: usize = 1024;
/// The most requests one client keeps in flight.
pub const MAX_IN_FLIGHT: usize = 256;
/// The most jobs a scenario pushes. Every latency sample is kept (16 bytes each, three per job in the throughput
/// scenario), so this also bounds the bench's memory to about 500 MB.
pub const MAX_JOBS: u64 = 10_000_000;
/// The largest batch: the server's default `--max-batch`, so that a default server accepts every batch.
pub const MAX_BATCH_SIZE: usize = 10_000;
/// The most idle connections; loopback has about 28,000 ephemeral ports per server address by default anyway.
pub const MAX_CONNECTIONS: usize = 100_000;
/// The most concurrency keys the workers scenario spreads its jobs over.
pub const MAX_KEYS: u64 = 1_000_000;
/// The most wake-up samples, or due times.
pub const MAX_SAMPLES: usize = 1_000_000;
/// The longest sustained run: a week. Its samples are kept in memory (a few hundred bytes each).
pub const MAX_DURATION: Duration = Duration::from_secs(7 * 24 * 3600);
/// The longest time between samples.
pub const MAX_INTERVAL: Duration = Duration::from_secs(60);
/// The longest a sustained handler may work.
pub const MAX_WORK: Duration = Duration::from_secs(10);
/// The deepest ready set a sustained run keeps.
pub const MAX_DEPTH: u64 = 1_000_000;
/// The highest rate a sustained run enqueues at.
pub const MAX_RATE: u64 = 1_000_000;
const SECOND: Duration = Duration::from_secs(1);

/// `cairn bench` flags.
///
/// Run it against a server of its own: the jobs it pushes (in queues named `bench-*`) finish and then count
/// toward the server's retention like any other job.
#[derive(Debug, Clone, Args)]
#[command(
    after_help = "Run it against a server of its own: the jobs it pushes (in queues named bench-*) finish \
    and then count toward the server's retention like any other job. Throughput and latency targets are for \
    a release build over HTTP on loopback."
)]
pub struct BenchArgs {
    /// The server to load.
    #[command(flatten)]
    pub client: ClientArgs,
    /// Another server on the same PostgreSQL database as --server; repeat for several. The clients are spread
    /// over all the servers in turn, and the wake-up scenario enqueues on one server while it waits on another.
    #[arg(long = "also", value_name = "URL")]
    pub also: Vec<String>,
    /// Load an embedded queue on this file instead of a server; the file must not exist or be empty.
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// Load an embedded queue on a temporary file (deleted afterwards) instead of a server.
    #[arg(long)]
    pub embedded: bool,
    /// A scenario to run; repeat the flag for several. By default throughput, batch and wakeup, and when
    /// --server-pid is given idle first (so that memory the other scenarios freed does not hide what connections
    /// take).
    #[arg(long = "scenario", value_enum, value_name = "NAME")]
    pub scenarios: Vec<Scenario>,
    /// Jobs pushed by the throughput, batch and workers scenarios.
    #[arg(long, default_value_t = 100_000, value_name = "N")]
    pub jobs: u64,
    /// Concurrent clients (each with its own connections) in the throughput, batch and workers scenarios.
    #[arg(long, default_value_t = 8, value_name = "N")]
    pub clients: usize,
    /// Requests each client keeps in flight in the throughput and batch scenarios (a loop each, sharing the
    /// client's connection pool); 1 is one request at a time, as a simple program makes them. In the workers
    /// scenario, each worker's slots: the most jobs it takes per dequeue.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub in_flight: usize,
    /// Jobs per enqueue call in the batch and workers scenarios.
    #[arg(long, default_value_t = 1000, value_name = "N")]
    pub batch_size: usize,
    /// Spread the workers scenario's jobs over N concurrency keys (`key-0` …, each job the next key in turn), so
    /// that its claims take turns by key: compared with a run without it, what turns cost.
    #[arg(long, value_name = "N")]
    pub keys: Option<u64>,
    /// Push each enqueue call of the workers scenario as a batch (`cairn batch`) whose on_complete callback goes to
    /// the queue `bench-callbacks`: compared with a run without it, what a batch's counting and callback cost.
    #[arg(long)]
    pub batch_groups: bool,
    /// Steps each job of the workers scenario records in its handler (`JobContext::step`, a number each): compared
    /// with a run without them, what a step costs.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub steps: u32,
    /// Jobs of the workers scenario's queue that sleep or wait for a signal an hour (half each), pushed and
    /// suspended before the clock starts: compared with a run without them, what suspended jobs cost the others.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub waiting: u64,
    /// Wake-ups measured by the wakeup scenario; due times made by the due scenario.
    #[arg(long, default_value_t = 1000, value_name = "N")]
    pub samples: usize,
    /// Idle long polls the idle scenario holds open at once, each on its own TCP connection.
    #[arg(long, default_value_t = 10_000, value_name = "N")]
    pub connections: usize,
    /// The server's process id: the idle scenario reads its memory from /proc/PID/status.
    #[arg(long, value_name = "PID")]
    pub server_pid: Option<u32>,
    /// How long the sustained scenario runs.
    #[arg(long, default_value = "10m", allow_hyphen_values = true, value_parser = crate::duration::parse, value_name = "DURATION")]
    pub duration: Duration,
    /// Jobs the sustained scenario's producers keep ready (enqueued and not yet started).
    #[arg(
        long,
        default_value_t = 1000,
        value_name = "N",
        conflicts_with = "rate"
    )]
    pub depth: u64,
    /// Jobs per second the sustained scenario enqueues, instead of keeping a depth.
    #[arg(long, value_name = "N")]
    pub rate: Option<u64>,
    /// How long each job's handler works in the sustained scenario.
    #[arg(long, default_value = "1ms", allow_hyphen_values = true, value_parser = crate::duration::parse, value_name = "DURATION")]
    pub work: Duration,
    /// Time between the sustained scenario's samples.
    #[arg(long, default_value = "5s", allow_hyphen_values = true, value_parser = crate::duration::parse, value_name = "DURATION")]
    pub interval: Duration,
    /// Write the sustained scenario's samples to this file, as JSON lines.
    #[arg(long, value_name = "PATH")]
    pub record: Option<PathBuf>,
    /// Draw the sustained scenario's samples into this SVG file.
    #[arg(long, value_name = "PATH")]
    pub plot: Option<PathBuf>,
    /// Print the results as JSON (for scripts) instead of text.
    #[arg(long)]
    pub json: bool,
}

/// One workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Scenario {
    /// Jobs through enqueue, dequeue and finish: each client loops enqueue one, dequeue one, finish it.
    Throughput,
    /// Jobs enqueued in batches.
    Batch,
    /// Jobs through a fleet: producers enqueue in batches, workers take several jobs per dequeue and finish them
    /// with one call.
    Workers,
    /// The time from an enqueue to a waiting dequeue returning the job.
    Wakeup,
    /// How late due times (delayed pushes, lease expiries, retries with a delay) come under load: --samples of
    /// them while --clients x --in-flight loops enqueue, take and finish.
    Due,
    /// The server's memory per idle long poll (server only).
    Idle,
    /// A long run at a steady depth or rate, sampled every --interval for --duration: completions, enqueues,
    /// claim latency, CPU and storage over time.
    Sustained,
}

impl Scenario {
    /// The scenario's name, as `--scenario` reads it.
    pub fn as_str(self) -> &'static str {
        match self {
            Scenario::Throughput => "throughput",
            Scenario::Batch => "batch",
            Scenario::Workers => "workers",
            Scenario::Wakeup => "wakeup",
            Scenario::Due => "due",
            Scenario::Idle => "idle",
            Scenario::Sustained => "sustained",
        }
    }
}

/// What the bench runs against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// A server, over HTTP.
    Server,
    /// An embedded queue on this fresh file, or on a temporary file when `None`.
    Embedded(Option<PathBuf>),
}

/// The checked settings of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Server or embedded.
    pub mode: Mode,
    /// The scenarios, in the order given, each once.
    pub scenarios: Vec<Scenario>,
    /// `--jobs`.
    pub jobs: u64,
    /// `--clients`.
    pub clients: usize,
    /// `--in-flight`.
    pub in_flight: usize,
    /// `--batch-size`.
    pub batch_size: usize,
    /// `--keys`.
    pub keys: Option<u64>,
    /// `--batch-groups`.
    pub batch_groups: bool,
    /// `--steps`.
    pub steps: u32,
    /// `--waiting`.
    pub waiting: u64,
    /// `--samples`.
    pub samples: usize,
    /// `--connections`.
    pub connections: usize,
    /// `--server-pid`, checked to name a live process when the idle scenario runs.
    pub server_pid: Option<u32>,
    /// The sustained scenario's plan, when it runs.
    pub sustained: Option<Plan>,
}

impl BenchArgs {
    /// Checks every flag and the flags against each other.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`], with the flag as the field: `--clients: must be between 1 and 1024, got 0`.
    pub fn validate(&self) -> cairn::Result<Settings> {
        check_range("--clients", self.clients as u64, 1, MAX_CLIENTS as u64)?;
        check_range(
            "--in-flight",
            self.in_flight as u64,
            1,
            MAX_IN_FLIGHT as u64,
        )?;
        check_range("--jobs", self.jobs, 1, MAX_JOBS)?;
        check_range(
            "--batch-size",
            self.batch_size as u64,
            1,
            MAX_BATCH_SIZE as u64,
        )?;
        check_range("--samples", self.samples as u64, 1, MAX_SAMPLES as u64)?;
        check_range(
            "--connections",
            self.connections as u64,
            1,
            MAX_CONNECTIONS as u64,
        )?;
        let mode = match (&self.db, self.embedded) {
            // A PostgreSQL database is checked before it is opened: the bench refuses one with Cairn's tables.
            (Some(path), _) if path.to_str().is_some_and(cairn::is_postgres_url) => {
                Mode::Embedded(Some(path.clone()))
            }
            (Some(path), _) => {
                check_fresh_db(path)?;
                Mode::Embedded(Some(path.clone()))
            }
            (None, true) => Mode::Embedded(None),
            (None, false) => Mode::Server,
        };
        if !self.also.is_empty() && mode != Mode::Server {
            return Err(invalid(
                "--also",
                "names more servers to load, so it cannot go with an embedded queue",
            ));
        }
        let scenarios = self.scenarios(&mode);
        if scenarios.contains(&Scenario::Idle) {
            if mode != Mode::Server {
                return Err(invalid(
                    "--scenario",
                    "idle measures a server's memory, so it needs --server, not an embedded queue",
                ));
            }
            let pid = self.server_pid.ok_or_else(|| {
                invalid(
                    "--server-pid",
                    "the idle scenario needs the server's process id to read its memory",
                )
            })?;
            check_pid(pid)?;
        }
        if let Some(keys) = self.keys {
            check_range("--keys", keys, 1, MAX_KEYS)?;
            if !scenarios.contains(&Scenario::Workers) {
                return Err(invalid(
                    "--keys",
                    "spreads the workers scenario's jobs over keys, so it needs --scenario workers",
                ));
            }
        }
        if self.batch_groups && !scenarios.contains(&Scenario::Workers) {
            return Err(invalid(
                "--batch-groups",
                "pushes the workers scenario's jobs as batches, so it needs --scenario workers",
            ));
        }
        if self.steps > 0 && !scenarios.contains(&Scenario::Workers) {
            return Err(invalid(
                "--steps",
                "records steps in the workers scenario's handler, so it needs --scenario workers",
            ));
        }
        if self.waiting > 0 && !scenarios.contains(&Scenario::Workers) {
            return Err(invalid(
                "--waiting",
                "puts sleeping and waiting jobs beside the workers scenario's, so it needs --scenario workers",
            ));
        }
        let sustained = scenarios
            .contains(&Scenario::Sustained)
            .then(|| self.plan())
            .transpose()?;
        Ok(Settings {
            sustained,
            mode,
            scenarios,
            jobs: self.jobs,
            clients: self.clients,
            in_flight: self.in_flight,
            batch_size: self.batch_size,
            keys: self.keys,
            batch_groups: self.batch_groups,
            steps: self.steps,
            waiting: self.waiting,
            samples: self.samples,
            connections: self.connections,
            server_pid: self.server_pid,
        })
    }

    /// The sustained scenario's flags, checked.
    fn plan(&self) -> cairn::Result<Plan> {
        check_duration("--duration", self.duration, SECOND, MAX_DURATION)?;
        check_duration("--interval", self.interval, SECOND, MAX_INTERVAL)?;
        if self.interval > self.duration {
            return Err(invalid(
                "--interval",
                format!(
                    "must not be longer than --duration ({}), got {}",
                    crate::duration::format(self.duration),
                    crate::duration::format(self.interval)
                ),
            ));
        }
        check_duration("--work", self.work, Duration::ZERO, MAX_WORK)?;
        let load = match self.rate {
            Some(rate) => {
                check_range("--rate", rate, 1, MAX_RATE)?;
                Load::Rate(rate)
            }
            None => {
                check_range("--depth", self.depth, 1, MAX_DEPTH)?;
                Load::Depth(self.depth)
            }
        };
        Ok(Plan {
            duration: self.duration,
            interval: self.interval,
            load,
            work: self.work,
            slots: u32::try_from(self.in_flight).expect("--in-flight is checked to be at most 256"),
            batch_size: self.batch_size as u64,
            record: self.record.clone(),
            plot: self.plot.clone(),
        })
    }

    /// The scenarios asked for without repeats, or the default set.
    fn scenarios(&self, mode: &Mode) -> Vec<Scenario> {
        if self.scenarios.is_empty() {
            let mut all = vec![Scenario::Throughput, Scenario::Batch, Scenario::Wakeup];
            // Idle goes first: the server's memory grows less for new connections once the other scenarios
            // have left freed heap behind, and the point is what a connection costs.
            if *mode == Mode::Server && self.server_pid.is_some() {
                all.insert(0, Scenario::Idle);
            }
            return all;
        }
        let mut unique = Vec::new();
        for scenario in &self.scenarios {
            if !unique.contains(scenario) {
                unique.push(*scenario);
            }
        }
        unique
    }
}

pub(crate) fn invalid(flag: &str, rule: impl std::fmt::Display) -> Error {
    Error::from_parts(
        ErrorKind::InvalidInput,
        Some(flag.to_owned()),
        format!("{flag}: {rule}"),
    )
}

fn check_duration(flag: &str, value: Duration, min: Duration, max: Duration) -> cairn::Result<()> {
    if (min..=max).contains(&value) {
        Ok(())
    } else {
        Err(invalid(
            flag,
            format!(
                "must be between {} and {}, got {}",
                crate::duration::format(min),
                crate::duration::format(max),
                crate::duration::format(value)
            ),
        ))
    }
}

fn check_range(flag: &str, value: u64, min: u64, max: u64) -> cairn::Result<()> {
    if (min..=max).contains(&value) {
        Ok(())
    } else {
        Err(invalid(
            flag,
            format!("must be between {min} and {max}, got {value}"),
        ))
    }
}

/// Refuses a database that already holds something: the bench must never pollute someone's data.
fn check_fresh_db(path: &Path) -> cairn::Result<()> {
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(invalid(
            "--db",
            format!("cannot read {}: {e}", path.display()),
        )),
        Ok(meta) if meta.is_file() && meta.len() == 0 => Ok(()),
        Ok(_) => Err(invalid(
            "--db",
            format!(
                "{} exists and is not an empty file; the bench needs a fresh database (or use --embedded for a \
                 temporary one)",
                path.display()
            ),
        )),
    }
}

fn check_pid(pid: u32) -> cairn::Result<()> {
    let status = format!("/proc/{pid}/status");
    std::fs::metadata(&status)
        .map(drop)
        .map_err(|e| invalid("--server-pid", format!("cannot read {status}: {e}")))
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Command {
        #[command(flatten)]
        args: BenchArgs,
    }

    fn parse(flags: &[&str]) -> BenchArgs {
        let argv = std::iter::once("bench").chain(flags.iter().copied());
        Command::try_parse_from(argv).unwrap().args
    }

    /// Checks that `flags` are refused with exactly `message`, naming the flag as the field.
    fn check_refused(flags: &[&str], flag: &str, message: &str) {
        let e = parse(flags).validate().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput, "{flags:?}");
        assert_eq!(e.field(), Some(flag), "{flags:?}");
        assert_eq!(e.to_string(), message, "{flags:?}");
    }

    #[test]
    fn numbers_out_of_range_are_refused_naming_the_flag() {
        check_refused(
            &["--clients", "0"],
            "--clients",
            "--clients: must be between 1 and 1024, got 0",
        );
        check_refused(
            &["--clients", "1025"],
            "--clients",
            "--clients: must be between 1 and 1024, got 1025",
        );
        check_refused(
            &["--in-flight", "257"],
            "--in-flight",
            "--in-flight: must be between 1 and 256, got 257",
        );
        check_refused(
            &["--jobs", "0"],
            "--jobs",
            "--jobs: must be between 1 and 10000000, got 0",
        );
        check_refused(
            &["--batch-size", "10001"],
            "--batch-size",
            "--batch-size: must be between 1 and 10000, got 10001",
        );
        check_refused(
            &["--samples", "0"],
            "--samples",
            "--samples: must be between 1 and 1000000, got 0",
        );
        check_refused(
            &["--connections", "0"],
            "--connections",
            "--connections: must be between 1 and 100000, got 0",
        );
    }

    #[test]
    fn keys_spread_the_workers_scenario_and_nothing_else() {
        check_refused(
            &["--keys", "10"],
            "--keys",
            "--keys: spreads the workers scenario's jobs over keys, so it needs --scenario workers",
        );
        check_refused(
            &["--scenario", "workers", "--keys", "0"],
            "--keys",
            "--keys: must be between 1 and 1000000, got 0",
        );
        let settings = parse(&["--scenario", "workers", "--keys", "1000"])
            .validate()
            .unwrap();
        assert_eq!(settings.keys, Some(1000));
    }

    #[test]
    fn batch_groups_shape_the_workers_scenario_and_nothing_else() {
        check_refused(
            &["--batch-groups"],
            "--batch-groups",
            "--batch-groups: pushes the workers scenario's jobs as batches, so it needs --scenario workers",
        );
        let settings = parse(&["--scenario", "workers", "--batch-groups"])
            .validate()
            .unwrap();
        assert!(settings.batch_groups);
    }

    #[test]
    fn defaults_run_three_scenarios_against_a_server() {
        let settings = parse(&[]).validate().unwrap();
        assert_eq!(settings.mode, Mode::Server);
        assert_eq!(
            settings.scenarios,
            [Scenario::Throughput, Scenario::Batch, Scenario::Wakeup]
        );
        assert_eq!(
            (
                settings.jobs,
                settings.clients,
                settings.in_flight,
                settings.batch_size
            ),
            (100_000, 8, 1, 1000)
        );
    }

    #[test]
    fn a_server_pid_adds_idle_to_the_defaults() {
        let pid = std::process::id().to_string();
        let settings = parse(&["--server-pid", &pid]).validate().unwrap();
        assert_eq!(
            settings.scenarios,
            [
                Scenario::Idle,
                Scenario::Throughput,
                Scenario::Batch,
                Scenario::Wakeup
            ]
        );
    }

    #[test]
    fn scenarios_run_in_the_order_given_each_once() {
        let settings = parse(&[
            "--scenario",
            "wakeup",
            "--scenario",
            "throughput",
            "--scenario",
            "wakeup",
        ])
        .validate()
        .unwrap();
        assert_eq!(settings.scenarios, [Scenario::Wakeup, Scenario::Throughput]);
    }

    #[test]
    fn the_sustained_plan_is_checked_flag_by_flag() {
        let plan = parse(&["--scenario", "sustained", "--in-flight", "32"])
            .validate()
            .unwrap()
            .sustained
            .unwrap();
        assert_eq!(plan.duration, Duration::from_secs(600));
        assert_eq!(plan.interval, Duration::from_secs(5));
        assert_eq!(plan.load, Load::Depth(1000));
        assert_eq!((plan.slots, plan.work), (32, Duration::from_millis(1)));
        let sustained = |flags: &[&str]| {
            let mut all = vec!["--scenario", "sustained"];
            all.extend_from_slice(flags);
            all.iter().map(|f| f.to_string()).collect::<Vec<_>>()
        };
        let check = |flags: &[&str], flag: &str, message: &str| {
            let flags = sustained(flags);
            let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
            check_refused(&flags, flag, message);
        };
        check(
            &["--interval", "500ms"],
            "--interval",
            "--interval: must be between 1s and 1m, got 500ms",
        );
        check(
            &["--duration", "3s", "--interval", "5s"],
            "--interval",
            "--interval: must not be longer than --duration (3s), got 5s",
        );
        check(
            &["--rate", "0"],
            "--rate",
            "--rate: must be between 1 and 1000000, got 0",
        );
        check(
            &["--work", "11s"],
            "--work",
            "--work: must be between 0s and 10s, got 11s",
        );
        let rate = parse(
            &sustained(&["--rate", "800"])
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
        )
        .validate()
        .unwrap();
        assert_eq!(rate.sustained.unwrap().load, Load::Rate(800));
        assert_eq!(
            parse(&[]).validate().unwrap().sustained,
            None,
            "no plan unless it runs"
        );
    }

    #[test]
    fn idle_needs_a_server_and_its_pid() {
        check_refused(
            &["--scenario", "idle"],
            "--server-pid",
            "--server-pid: the idle scenario needs the server's process id to read its memory",
        );
        check_refused(
            &["--embedded", "--scenario", "idle"],
            "--scenario",
            "--scenario: idle measures a server's memory, so it needs --server, not an embedded queue",
        );
        let e = parse(&["--scenario", "idle", "--server-pid", "4000000000"])
            .validate()
            .unwrap_err();
        assert_eq!(e.field(), Some("--server-pid"));
    }

    #[test]
    fn db_must_be_missing_or_empty() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("new.db");
        let settings = parse(&["--db", missing.to_str().unwrap()])
            .validate()
            .unwrap();
        assert_eq!(settings.mode, Mode::Embedded(Some(missing)));

        let used = dir.path().join("used.db");
        std::fs::write(&used, b"SQLite format 3\0").unwrap();
        let e = parse(&["--db", used.to_str().unwrap()])
            .validate()
            .unwrap_err();
        assert_eq!(e.field(), Some("--db"));
        assert!(e.to_string().contains("not an empty file"), "{e}");

        let e = parse(&["--db", dir.path().to_str().unwrap()])
            .validate()
            .unwrap_err();
        assert_eq!(e.field(), Some("--db"));
    }
}
