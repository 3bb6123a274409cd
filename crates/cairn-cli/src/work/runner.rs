//! One child process: start a command with its input on stdin and extra environment, pass its stdout through
//! (it inherits the manager's), copy its stderr through while keeping the [`Tail`], and reap it with `wait4` to
//! measure its run time, CPU time and peak memory. Signals go to the child's process group. Deciding what a
//! run's outcome means for the job is `job`'s business.
//!
//! The child is reaped here, never by tokio or `std::process::Child::wait`: `wait4` is the one call that returns
//! both the exit status and the child's resource usage.

use std::fmt;
use std::io::{self, Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cairn::RunUsage;
use tokio::task::JoinHandle;

use crate::work::tail::{TAIL_BYTES, Tail};

/// How long to wait, after the command exits, for the rest of its stderr. A background process it left behind
/// may hold stderr open for ever; the job does not wait for it.
const STDERR_GRACE: Duration = Duration::from_secs(2);

/// What to run.
#[derive(Debug)]
pub(crate) struct Spec<'a> {
    /// The program and its arguments.
    pub argv: &'a [String],
    /// Variables added to the manager's environment.
    pub env: Vec<(&'static str, String)>,
    /// Written to the command's stdin, which is then closed.
    pub input: Vec<u8>,
}

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exit {
    /// It exited with this status.
    Code(i32),
    /// A signal killed it.
    Signal(i32),
}

impl Exit {
    /// Whether it exited with status 0.
    pub(crate) fn is_success(self) -> bool {
        self == Exit::Code(0)
    }

    fn from_wait_status(status: libc::c_int) -> Exit {
        if libc::WIFSIGNALED(status) {
            Exit::Signal(libc::WTERMSIG(status))
        } else {
            Exit::Code(libc::WEXITSTATUS(status))
        }
    }
}

impl fmt::Display for Exit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Exit::Code(code) => write!(f, "exit status {code}"),
            Exit::Signal(signal) => write!(f, "killed by signal {signal}"),
        }
    }
}

/// A command that has ended, and what it used.
#[derive(Debug)]
pub(crate) struct Finished {
    /// How it ended.
    pub exit: Exit,
    /// Wall-clock time, CPU time and peak memory.
    pub usage: RunUsage,
    /// The end of its stderr, trimmed.
    pub stderr_tail: String,
}

impl Finished {
    /// The error text for a run that failed: `exit status 3: <stderr tail>`.
    pub(crate) fn error_message(&self) -> String {
        if self.stderr_tail.is_empty() {
            self.exit.to_string()
        } else {
            format!("{}: {}", self.exit, self.stderr_tail)
        }
    }
}

/// Sends signals to a running command's process group, and never to a process that merely reuses its pid.
#[derive(Debug, Clone)]
pub(crate) struct Signaller {
    pid: libc::pid_t,
    /// Set, under this lock, in the same breath as the child is reaped.
    is_reaped: Arc<Mutex<bool>>,
}

impl Signaller {
    /// The child's process id (also its process group's).
    pub(crate) fn pid(&self) -> u32 {
        self.pid.unsigned_abs()
    }

    /// SIGKILLs whatever is left of the command's process group, even after the command itself was reaped: a
    /// process it started that ignores SIGTERM must not outlive a job that is being given back.
    ///
    /// Once the leader is reaped, its id stays reserved while any member of its group lives, so this reaches the
    /// group's own leftovers; if none are left, the call fails harmlessly (`ESRCH`).
    pub(crate) fn kill_group(&self) {
        // SAFETY: kill only sends a signal.
        unsafe { libc::kill(-self.pid, libc::SIGKILL) };
    }

    /// Sends `signal` to the command and everything it started (its process group), unless it was reaped.
    pub(crate) fn signal(&self, signal: libc::c_int) {
        let is_reaped = self
            .is_reaped
            .lock()
            .expect("the reap lock is never poisoned");
        if !*is_reaped {
            // SAFETY: kill only sends a signal. The child is not reaped (we hold the lock that reaping takes),
            // so its pid, and the process group it leads, still belong to it.
            unsafe { libc::kill(-self.pid, signal) };
        }
    }
}

/// Starts the command. It gets its own process group, so that a Ctrl-C at the terminal reaches the manager alone
/// (which then lets it finish) and so that a kill reaches whatever the command started.
///
/// Returns the signaller and the task that reaps it: the task ends when the command has exited and its stderr is
/// read (or [`STDERR_GRACE`] has passed).
///
/// # Errors
/// When the command cannot be started.
pub(crate) fn start(spec: Spec<'_>) -> io::Result<(Signaller, JoinHandle<io::Result<Finished>>)> {
    let started = Instant::now();
    let mut child = spawn(spec.argv, spec.env)?;
    let pid = libc::pid_t::try_from(child.id()).expect("a pid fits in pid_t");
    let signaller = Signaller {
        pid,
        is_reaped: Arc::new(Mutex::new(false)),
    };
    let stdin = child.stdin.take().expect("stdin is piped");
    let stderr = child.stderr.take().expect("stderr is piped");
    // The child is reaped by `reap` below, not through `child`, which is dropped here (that neither waits nor kills).
    drop(child);
    let tail = Arc::new(Mutex::new(Tail::new(TAIL_BYTES)));
    let (stderr_done, stderr_closed) = mpsc::channel();
    // Plain threads, not tokio's blocking pool: a command that never reads its stdin, or a background process that
    // keeps stderr open, would keep the runtime from shutting down.
    let threads = std::thread::Builder::new()
        .name("cairn-work-stdin".into())
        .spawn(move || write_input(stdin, &spec.input))
        .and_then(|_| {
            let tail = tail.clone();
            std::thread::Builder::new()
                .name("cairn-work-stderr".into())
                .spawn(move || copy_stderr(stderr, &tail, &stderr_done))
        });
    if let Err(e) = threads {
        signaller.signal(libc::SIGKILL);
        let _ = reap(&signaller);
        return Err(e);
    }
    let reaper = signaller.clone();
    let finished = tokio::task::spawn_blocking(move || {
        let (status, rusage) = reap(&reaper)?;
        let run_time = started.elapsed();
        let _ = stderr_closed.recv_timeout(STDERR_GRACE);
        let stderr_tail = tail.lock().expect("the tail lock is never poisoned").text();
        Ok(Finished {
            exit: Exit::from_wait_status(status),
            usage: usage(run_time, &rusage),
            stderr_tail,
        })
    });
    Ok((signaller, finished))
}

/// Spawns the child with piped stdin and stderr, in its own process group.
fn spawn(argv: &[String], env: Vec<(&'static str, String)>) -> io::Result<std::process::Child> {
    let (program, args) = argv
        .split_first()
        .expect("the command line is checked to be non-empty");
    let mut command = Command::new(program);
    command
        .args(args)
        .envs(env)
        .stdin(Stdio::piped())
        .stdout(Stdio::inherit())
        .stderr(Stdio::piped());
    let manager = std::process::id();
    // SAFETY: the hook runs in the forked child before exec and calls only setpgid, prctl and getppid, which are
    // async-signal-safe.
    // It is a hook rather than `process_group(0)` on purpose: a hook makes std fork instead of using posix_spawn,
    // whose vfork shares the manager's memory until exec, and exec then charges the manager's own peak memory to
    // the child's `ru_maxrss` (16 MiB for a bare `sh`). After a fork, the child is charged only the manager's
    // resident anonymous pages at that moment (about 9 MiB for a release build), which is then the floor of what
    // `ru_maxrss` can report: a smaller command shows the floor, a bigger one its own peak.
    unsafe {
        command.pre_exec(move || {
            if libc::setpgid(0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            // If the manager dies without stopping its commands (SIGKILL, the OOM killer), they die with it rather
            // than run on while their leases expire and the jobs run again elsewhere. The signal follows the thread
            // that forked: a tokio worker thread, which lives as long as the manager's runtime.
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(io::Error::last_os_error());
            }
            // The manager may have died between the fork and the prctl.
            if u32::try_from(libc::getppid()).ok() != Some(manager) {
                return Err(io::Error::other("the worker manager exited"));
            }
            Ok(())
        });
    }
    command.spawn()
}

/// Writes the job's input and closes stdin. A command that exits without reading it is no error.
fn write_input(mut stdin: std::process::ChildStdin, input: &[u8]) {
    let _ = stdin.write_all(input);
}

/// Copies the child's stderr to ours as it comes, keeping the tail, until it closes.
fn copy_stderr(mut stderr: std::process::ChildStderr, tail: &Mutex<Tail>, done: &mpsc::Sender<()>) {
    let mut buffer = [0u8; 8192];
    loop {
        match stderr.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => {
                let _ = io::stderr().lock().write_all(&buffer[..n]);
                tail.lock()
                    .expect("the tail lock is never poisoned")
                    .push(&buffer[..n]);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    let _ = done.send(());
}

/// Waits for the child to exit and reaps it, returning its wait status and resource usage. Blocks.
fn reap(signaller: &Signaller) -> io::Result<(libc::c_int, libc::rusage)> {
    let pid = signaller.pid;
    // First wait without reaping: the exited child stays a zombie, so its pid cannot be reused while
    // `Signaller::signal` might still use it.
    loop {
        // SAFETY: siginfo_t is plain data, valid when zeroed; waitid only writes into it.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waitid on our own child, writing into `info`.
        let rc = unsafe {
            libc::waitid(
                libc::P_PID,
                pid.unsigned_abs(),
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        if rc == 0 {
            break;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    let mut is_reaped = signaller
        .is_reaped
        .lock()
        .expect("the reap lock is never poisoned");
    let mut status: libc::c_int = 0;
    // SAFETY: rusage is plain data, valid when zeroed.
    let mut rusage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: wait4 on our own child, which has exited, writing into `status` and `rusage`.
        let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut rusage) };
        if rc == pid {
            *is_reaped = true;
            return Ok((status, rusage));
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// The usage record for a run: `ru_maxrss` is in KiB on Linux.
fn usage(run_time: Duration, rusage: &libc::rusage) -> RunUsage {
    let cpu = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec.unsigned_abs())
            + Duration::from_micros(t.tv_usec.unsigned_abs())
    };
    RunUsage {
        run_time,
        cpu_time: cpu(rusage.ru_utime) + cpu(rusage.ru_stime),
        peak_memory: rusage.ru_maxrss.unsigned_abs().saturating_mul(1024),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(script: &str) -> Vec<String> {
        vec!["sh".into(), "-c".into(), script.into()]
    }

    async fn run(script: &str, input: &str) -> Finished {
        let argv = argv(script);
        let (_, finished) = start(Spec {
            argv: &argv,
            env: vec![("CAIRN_TEST_VAR", "here".into())],
            input: input.as_bytes().to_vec(),
        })
        .unwrap();
        finished.await.unwrap().unwrap()
    }

    #[tokio::test]
    async fn reports_the_exit_status_the_stderr_tail_and_the_usage() {
        let finished = run(
            r#"read line; [ "$line" = '{"a":1}' ] || exit 9; echo "$CAIRN_TEST_VAR" >&2; exit 3"#,
            "{\"a\":1}\n",
        )
        .await;
        assert_eq!(finished.exit, Exit::Code(3));
        assert_eq!(finished.error_message(), "exit status 3: here");
        assert!(finished.usage.peak_memory > 0);
        assert!(finished.usage.run_time > Duration::ZERO);
    }

    #[tokio::test]
    async fn a_command_that_ignores_its_input_is_fine() {
        let finished = run("exit 0", &"x".repeat(1 << 20)).await;
        assert!(finished.exit.is_success());
        assert_eq!(finished.error_message(), "exit status 0");
    }

    #[tokio::test]
    async fn signals_reach_the_whole_process_group() {
        let argv = argv("sleep 60 & wait");
        let (signaller, finished) = start(Spec {
            argv: &argv,
            env: Vec::new(),
            input: Vec::new(),
        })
        .unwrap();
        signaller.signal(libc::SIGTERM);
        let finished = finished.await.unwrap().unwrap();
        assert_eq!(finished.exit, Exit::Signal(libc::SIGTERM));
        assert_eq!(finished.error_message(), "killed by signal 15");
        // Reaped: signalling again is a no-op rather than a shot at a reused pid.
        signaller.signal(libc::SIGTERM);
    }
}
