//! `cairn work PATTERN -- COMMAND`: the worker manager. It takes jobs whose names match PATTERN from a server and
//! runs COMMAND once per job, with the job's data as JSON on stdin, heartbeating the lease meanwhile; exit status 0
//! finishes the job, anything else retries it, and each run's time, CPU time and peak memory go into the job's
//! history.
//!
//! This module owns the command line and checks it; the rest is in submodules, each with one job: `manager` (the
//! loop: free room, long polls, the load gate, stopping), `job` (one job from start to recorded outcome),
//! `runner` (one child process: start, measure, signal), `tail` (the end of a command's stderr), `load` (the
//! load average), `backoff` (riding out a server that is down).

mod backoff;
mod job;
mod load;
mod manager;
mod runner;
mod tail;

use cairn::Jobs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use cairn::{ErrorKind, NamePattern, QueueName, WorkerId};
use clap::Args;

use crate::cli::ClientArgs;
use crate::exit::Code;
use crate::work::job::JobCommand;
use crate::work::manager::Settings;

/// `cairn work` arguments.
#[derive(Debug, Clone, Args)]
pub struct WorkArgs {
    /// The jobs to take: a GLOB pattern over job names, such as `email.*` (`*` for every job).
    #[arg(value_name = "PATTERN", value_parser = parse_pattern)]
    pub pattern: String,
    /// A queue to take jobs from; repeat it for several, drained in the order given [default: default].
    #[arg(long = "queue", value_name = "QUEUE", value_parser = parse_queue)]
    pub queues: Vec<String>,
    /// The most job weight running at once: a job of weight 1 (the default weight) is one command.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 1,
        value_parser = clap::value_parser!(u32).range(1..=i64::from(cairn::MAX_DEQUEUE))
    )]
    pub concurrency: u32,
    /// Take no new jobs while the 1-minute load average (`/proc/loadavg`) is above this.
    #[arg(long, value_name = "LOAD", value_parser = parse_max_load)]
    pub max_load: Option<f64>,
    /// After this long, take no new jobs, let running commands finish, and exit.
    #[arg(long, value_name = "DURATION", value_parser = parse_max_runtime)]
    pub max_runtime: Option<Duration>,
    /// Exit as soon as no matching job is ready and no command is running.
    #[arg(long)]
    pub exit_when_idle: bool,
    /// The name jobs are taken under, shown in their history [default: HOST:PID].
    #[arg(long, value_name = "ID", value_parser = parse_worker)]
    pub worker: Option<String>,
    /// How to reach the server.
    #[command(flatten)]
    pub client: ClientArgs,
    /// The command to run for each job, after `--`. It gets the job's data as JSON on stdin and `CAIRN_JOB_ID`,
    /// `CAIRN_JOB_NAME`, `CAIRN_JOB_QUEUE`, `CAIRN_JOB_ATTEMPT`, `CAIRN_LEASE_TOKEN` and `CAIRN_SERVER` (and
    /// `CAIRN_TOKEN` when the manager has one, `TRACEPARENT` when the job was pushed with a trace context) in its
    /// environment.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// Runs the worker manager until SIGTERM or Ctrl-C, `--max-runtime`, or (with `--exit-when-idle`) no more work.
///
/// # Errors
/// Bad arguments (naming the flag), a command that cannot be found, a load average that cannot be read with
/// `--max-load`, or a server that refuses the manager for good (a bad token). A server that is down is waited for.
pub async fn run(args: WorkArgs) -> anyhow::Result<Code> {
    let client = args.client.client().context("checking --server")?;
    check_command(&args.command)?;
    if args.max_load.is_some() {
        load::one_minute().context("--max-load: reading the load average from /proc/loadavg")?;
    }
    let settings = Settings {
        worker: args.worker.unwrap_or_else(default_worker_id),
        queues: if args.queues.is_empty() {
            vec![cairn::QueueName::default().to_string()]
        } else {
            args.queues
        },
        pattern: args.pattern,
        concurrency: args.concurrency,
        max_load: args.max_load,
        max_runtime: args.max_runtime,
        exit_when_idle: args.exit_when_idle,
        command: Arc::new(JobCommand {
            argv: args.command,
            server: args.client.server,
            token: args.client.token,
        }),
    };
    let worker = settings.worker.clone();
    let outcome = manager::run(client.clone(), settings).await;
    // Stopped, not lost: the server's activity log says so. A server that cannot be reached counts it lost later.
    if let Err(e) = client.worker_stopped(&worker).await {
        tracing::debug!(error = %e, "could not tell the server the worker stopped");
    }
    outcome?;
    Ok(Code::Success)
}

fn parse_pattern(text: &str) -> Result<String, String> {
    NamePattern::parse(text)
        .map(|p| p.to_string())
        .map_err(|e| e.message().to_owned())
}

fn parse_queue(text: &str) -> Result<String, String> {
    QueueName::parse(text)
        .map(|q| q.to_string())
        .map_err(|e| e.message().to_owned())
}

fn parse_worker(text: &str) -> Result<String, String> {
    WorkerId::parse(text)
        .map(|w| w.to_string())
        .map_err(|e| e.message().to_owned())
}

fn parse_max_load(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(load) if load.is_finite() && load > 0.0 => Ok(load),
        _ => Err(format!(
            "must be a load average above 0, such as 4 or 1.5, got {text:?}"
        )),
    }
}

fn parse_max_runtime(text: &str) -> Result<Duration, String> {
    match crate::duration::parse(text)? {
        Duration::ZERO => Err(format!("must be longer than 0, got {text:?}")),
        runtime => Ok(runtime),
    }
}

/// Checks that the command can be run before taking any job: a typo would otherwise fail every job it takes, and
/// use up their attempts.
fn check_command(argv: &[String]) -> anyhow::Result<()> {
    let program = argv.first().map(String::as_str).unwrap_or_default();
    let is_executable = |path: &Path| {
        path.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    let problem = if program.is_empty() {
        Some("must name a program to run, got an empty string".to_owned())
    } else if program.contains('/') {
        (!is_executable(Path::new(program)))
            .then(|| format!("{program:?} is not an executable file"))
    } else {
        // Without PATH, the system's default search path applies; leave that to the first start.
        std::env::var_os("PATH").and_then(|path| {
            (!std::env::split_paths(&path).any(|dir| is_executable(&dir.join(program))))
                .then(|| format!("no executable named {program:?} in PATH"))
        })
    };
    match problem {
        Some(rule) => Err(cairn::Error::from_parts(
            ErrorKind::InvalidInput,
            Some("COMMAND".into()),
            format!("COMMAND: {rule}"),
        )
        .into()),
        None => Ok(()),
    }
}

/// `HOST:PID`: unique among the managers running at one time, and says where to look.
fn default_worker_id() -> String {
    let mut buffer = [0u8; 256];
    // SAFETY: gethostname writes at most `buffer.len()` bytes into the buffer.
    let rc = unsafe { libc::gethostname(buffer.as_mut_ptr().cast(), buffer.len()) };
    let end = buffer.iter().position(|&b| b == 0).unwrap_or(buffer.len());
    let host = match String::from_utf8_lossy(&buffer[..end]) {
        host if rc == 0 && !host.is_empty() => host.into_owned(),
        _ => "localhost".to_owned(),
    };
    format!("{host}:{}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_refuse_bad_values_with_the_rule() {
        assert_eq!(parse_max_load("1.5"), Ok(1.5));
        assert_eq!(
            parse_max_load("0"),
            Err("must be a load average above 0, such as 4 or 1.5, got \"0\"".to_owned())
        );
        assert!(parse_max_load("NaN").is_err());
        assert_eq!(parse_max_runtime("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(
            parse_max_runtime("0s"),
            Err("must be longer than 0, got \"0s\"".to_owned())
        );
        assert!(
            parse_pattern("email.[abc")
                .unwrap_err()
                .starts_with("name_pattern: ")
        );
        assert!(parse_queue("").is_err());
    }

    #[test]
    fn a_missing_command_is_refused_before_any_job_is_taken() {
        let check = |argv: &[&str]| {
            let argv: Vec<String> = argv.iter().map(|a| a.to_string()).collect();
            check_command(&argv).map_err(|e| e.to_string())
        };
        assert!(check(&["sh", "-c", "true"]).is_ok());
        assert!(check(&["/bin/sh"]).is_ok());
        assert_eq!(
            check(&["no-such-program-here"]),
            Err("COMMAND: no executable named \"no-such-program-here\" in PATH".to_owned())
        );
        assert_eq!(
            check(&["./nope"]),
            Err("COMMAND: \"./nope\" is not an executable file".to_owned())
        );
        assert_eq!(
            check(&[""]),
            Err("COMMAND: must name a program to run, got an empty string".to_owned())
        );
    }

    #[test]
    fn the_default_worker_id_is_host_and_pid() {
        let id = default_worker_id();
        assert!(id.ends_with(&format!(":{}", std::process::id())), "{id}");
        assert!(WorkerId::parse(id).is_ok());
    }
}
