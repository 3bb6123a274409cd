//! `cairn work`, the worker manager, run as an operator runs it: the real binary against a real server, running
//! real `sh -c` commands in the server's temp directory. Commands and tests meet through marker files there; every
//! wait in a command is bounded, so a bug fails a test rather than hangs it.

use cairn::Jobs;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use cairn::{AttemptOutcome, Job, JobId, JobState, Push, RetryPolicy};
use cairn_client::Client;
use serde_json::json;

use super::harness::{TestServer, cairn_binary, eventually, signal, stderr, wait_with_timeout};

/// How long any one condition may take before the test fails.
const PATIENCE: Duration = Duration::from_secs(60);

/// A shell function that waits for a file, for at most 30 s (then exits 99).
const WAIT_FOR: &str = "wait_for() { i=0; while [ ! -e \"$1\" ]; do i=$((i+1)); [ $i -gt 600 ] && exit 99; sleep 0.05; done; }";

/// A `cairn work` running in the background, its stdout and stderr collected as they come.
struct Manager {
    child: Child,
    stdout: Arc<Mutex<String>>,
    stderr: Arc<Mutex<String>>,
    readers: Vec<JoinHandle<()>>,
}

/// How a manager ended.
struct Ended {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Manager {
    /// Starts `cairn work` against `server`, in its temp directory, logging at info.
    fn start(server: &TestServer, args: &[&str]) -> Manager {
        Manager::start_at(server.url(), server.dir(), args)
    }

    /// Starts `cairn work` against the server at `url`, in `dir`, logging at info.
    fn start_at(url: &str, dir: &Path, args: &[&str]) -> Manager {
        let mut child = Command::new(cairn_binary())
            .arg("work")
            .args(args)
            .current_dir(dir)
            .env("CAIRN_SERVER", url)
            .env_remove("CAIRN_TOKEN")
            .env("CAIRN_LOG", "info")
            .env("CAIRN_LOG_FORMAT", "text")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawning cairn work");
        let stdout = Arc::new(Mutex::new(String::new()));
        let stderr = Arc::new(Mutex::new(String::new()));
        let readers = vec![
            collect(child.stdout.take().unwrap(), stdout.clone()),
            collect(child.stderr.take().unwrap(), stderr.clone()),
        ];
        Manager {
            child,
            stdout,
            stderr,
            readers,
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits until the manager's log says `text`.
    async fn wait_for_log(&self, text: &str) {
        eventually(PATIENCE, &format!("the log to say {text:?}"), || async {
            self.stderr.lock().unwrap().contains(text)
        })
        .await;
    }

    /// Waits for the manager to exit, and for everything it wrote.
    async fn wait(mut self) -> Ended {
        let code = wait_with_timeout(&mut self.child, PATIENCE);
        // The readers end when the last holder of the pipes (the manager or a command it left behind) is gone.
        eventually(PATIENCE, "the manager's output to close", || async {
            self.readers.iter().all(JoinHandle::is_finished)
        })
        .await;
        let ended = Ended {
            code,
            stdout: self.stdout.lock().unwrap().clone(),
            stderr: self.stderr.lock().unwrap().clone(),
        };
        eprintln!("--- cairn work stderr ---\n{}", ended.stderr);
        ended
    }
}

impl Drop for Manager {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn collect(pipe: impl Read + Send + 'static, into: Arc<Mutex<String>>) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let mut reader = BufReader::new(pipe);
        let mut line = String::new();
        while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
            into.lock().unwrap().push_str(&line);
            line.clear();
        }
    })
}

async fn push(client: &Client, push: Push) -> JobId {
    client.enqueue(push).await.unwrap().id
}

async fn get(client: &Client, id: JobId) -> Job {
    client.get(id).await.unwrap()
}

async fn wait_for_state(client: &Client, id: JobId, state: JobState) {
    eventually(PATIENCE, &format!("job {id} to be {state}"), || async {
        get(client, id).await.state == state
    })
    .await;
}

async fn wait_for_file(path: &Path) {
    eventually(
        PATIENCE,
        &format!("{} to exist", path.display()),
        || async { path.exists() },
    )
    .await;
}

/// Whether a process with this id is running: it exists and is not a zombie. For a process that is not our child,
/// whose zombie only its new parent can reap.
fn is_running(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name, which is in parentheses and may itself hold spaces.
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z')),
        Err(_) => false,
    }
}

/// Reads a pid a command wrote to `path`.
async fn read_pid(path: &Path) -> i32 {
    wait_for_file(path).await;
    std::fs::read_to_string(path)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// How long a command may take to die once stopped: the 5 s SIGTERM grace, 2 s for its stderr, and a margin. Far
/// below the commands' own `sleep 3600`, so a command that was never killed fails the test.
const DEATH: Duration = Duration::from_secs(20);

/// Whether a process with this id exists (a zombie counts: it has not been reaped).
fn is_alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    unsafe { libc::kill(pid, 0) == 0 }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn command_gets_the_data_and_the_job_environment_and_a_finish_records_usage() {
    let server = TestServer::spawn();
    let client = server.client();
    let id = push(
        &client,
        Push::new("email.send").data(json!({"to": "ada@example.com"})),
    )
    .await;
    let script = "cat > input.json; env | grep '^CAIRN_' > env.txt; echo \"stdout of $CAIRN_JOB_ID\"; \
                  i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done";
    let manager = Manager::start(
        &server,
        &["email.*", "--exit-when-idle", "--", "sh", "-c", script],
    );
    let ended = manager.wait().await;
    assert_eq!(ended.code, Some(0));
    assert!(
        ended.stdout.contains(&format!("stdout of {id}\n")),
        "{}",
        ended.stdout
    );

    let input = std::fs::read_to_string(server.dir().join("input.json")).unwrap();
    assert_eq!(input, "{\"to\":\"ada@example.com\"}\n");
    let env: BTreeMap<String, String> = std::fs::read_to_string(server.dir().join("env.txt"))
        .unwrap()
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    assert_eq!(env["CAIRN_JOB_ID"], id.to_string());
    assert_eq!(env["CAIRN_JOB_NAME"], "email.send");
    assert_eq!(env["CAIRN_JOB_QUEUE"], "default");
    assert_eq!(env["CAIRN_JOB_ATTEMPT"], "1");
    assert!(env["CAIRN_LEASE_TOKEN"].parse::<i64>().is_ok(), "{env:?}");
    assert_eq!(env["CAIRN_SERVER"], server.url());

    let job = get(&client, id).await;
    assert_eq!(job.state, JobState::Completed);
    assert_eq!(job.history.len(), 1);
    let attempt = &job.history[0];
    assert_eq!(attempt.outcome, Some(AttemptOutcome::Completed));
    let usage = attempt.usage.expect("the run's usage is recorded");
    assert!(usage.run_time > Duration::ZERO, "{usage:?}");
    assert!(usage.cpu_time > Duration::ZERO, "{usage:?}");
    assert!(usage.peak_memory > 0, "{usage:?}");
    assert!(ended.stderr.contains("job ended"), "{}", ended.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_command_is_retried_with_the_tail_of_its_stderr() {
    let server = TestServer::spawn();
    let client = server.client();
    let id = push(
        &client,
        Push::new("report.build").retry(RetryPolicy::attempts(3)),
    )
    .await;
    let script = "head -c 6000 /dev/zero | tr '\\000' x >&2; echo >&2; echo 'it broke' >&2; exit 3";
    let manager = Manager::start(
        &server,
        &["report.*", "--exit-when-idle", "--", "sh", "-c", script],
    );
    let ended = manager.wait().await;
    assert_eq!(ended.code, Some(0));
    // The stderr also passes through.
    assert!(ended.stderr.contains("it broke"));

    let job = get(&client, id).await;
    assert!(job.state.is_live(), "{:?}", job.state);
    let error = job.error.expect("the error is recorded");
    assert!(error.starts_with("exit status 3: …xxx"), "{error}");
    assert!(error.ends_with("xxx\nit broke"), "{error}");
    assert!(
        error.len() <= 4096 + "exit status 3: …".len(),
        "{}",
        error.len()
    );
    let attempt = &job.history[0];
    assert_eq!(attempt.outcome, Some(AttemptOutcome::Retried));
    assert_eq!(attempt.error.as_deref(), Some(error.as_str()));
    assert!(attempt.usage.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_when_idle_drains_the_matching_jobs_then_exits() {
    let server = TestServer::spawn();
    let client = server.client();
    let mut ids = Vec::new();
    for n in 0..5 {
        ids.push(push(&client, Push::new("thumb.make").data(json!({"n": n}))).await);
    }
    let other = push(&client, Push::new("email.send")).await;
    let manager = Manager::start(
        &server,
        &[
            "thumb.*",
            "--exit-when-idle",
            "--concurrency",
            "2",
            "--",
            "sh",
            "-c",
            "cat > /dev/null",
        ],
    );
    assert_eq!(manager.wait().await.code, Some(0));
    for id in ids {
        assert_eq!(get(&client, id).await.state, JobState::Completed);
    }
    assert_eq!(get(&client, other).await.state, JobState::Queued);
    // It said goodbye: the activity log has it stopped, not lost.
    let page = client
        .activity(cairn::ActivityFilter {
            limit: 1,
            ..cairn::ActivityFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(page.events[0].kind, cairn::ActivityKind::WorkerStopped);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrency_runs_that_many_commands_at_once() {
    let server = TestServer::spawn();
    let client = server.client();
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(push(&client, Push::new("part")).await);
    }
    // Each command waits until all three have started, which only happens if they run at the same time.
    let script = "touch \"started.$CAIRN_JOB_ID\"; i=0; \
                  while [ \"$(ls started.* | wc -l)\" -lt 3 ]; do \
                    i=$((i+1)); [ $i -gt 600 ] && { echo 'not all ran at once' >&2; exit 1; }; sleep 0.05; \
                  done";
    let manager = Manager::start(
        &server,
        &[
            "part",
            "--concurrency",
            "3",
            "--exit-when-idle",
            "--",
            "sh",
            "-c",
            script,
        ],
    );
    assert_eq!(manager.wait().await.code, Some(0));
    for id in ids {
        let job = get(&client, id).await;
        assert_eq!(job.state, JobState::Completed, "{:?}", job.error);
        assert_eq!(job.history.len(), 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_the_running_command_finish_and_takes_no_new_job() {
    let server = TestServer::spawn();
    let client = server.client();
    let first = push(&client, Push::new("slow")).await;
    let script = format!(
        "{WAIT_FOR}; touch \"started.$CAIRN_JOB_ID\"; wait_for go; echo \"finished $CAIRN_JOB_ID\""
    );
    // Room for two, so a long poll is waiting when the signal comes.
    let manager = Manager::start(
        &server,
        &["slow", "--concurrency", "2", "--", "sh", "-c", &script],
    );
    wait_for_file(&server.dir().join(format!("started.{first}"))).await;
    signal(manager.pid(), libc::SIGTERM);
    manager.wait_for_log("stopping: taking no new jobs").await;
    let second = push(&client, Push::new("slow")).await;
    std::fs::write(server.dir().join("go"), "").unwrap();

    let ended = manager.wait().await;
    assert_eq!(ended.code, Some(0));
    assert!(
        ended.stdout.contains(&format!("finished {first}\n")),
        "{}",
        ended.stdout
    );
    assert_eq!(get(&client, first).await.state, JobState::Completed);
    assert!(!ended.stdout.contains(&format!("finished {second}")));
    wait_for_state(&client, second, JobState::Queued).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_signal_stops_the_commands_and_gives_their_jobs_back() {
    let server = TestServer::spawn();
    let client = server.client();
    let id = push(&client, Push::new("slow")).await;
    // The command starts a process of its own that ignores SIGTERM: it must not outlive the released job.
    let script = "(trap '' TERM; exec sleep 3600) & echo $! > child.tmp; mv child.tmp \"child.$CAIRN_JOB_ID\"; \
                  echo $$ > pid.tmp; mv pid.tmp \"pid.$CAIRN_JOB_ID\"; exec sleep 3600";
    let manager = Manager::start(&server, &["slow", "--", "sh", "-c", script]);
    let pid = read_pid(&server.dir().join(format!("pid.{id}"))).await;
    let grandchild = read_pid(&server.dir().join(format!("child.{id}"))).await;
    signal(manager.pid(), libc::SIGTERM);
    manager.wait_for_log("stopping: taking no new jobs").await;
    signal(manager.pid(), libc::SIGINT);

    let ended = manager.wait().await;
    assert_eq!(ended.code, Some(0));
    let job = get(&client, id).await;
    assert_eq!(job.state, JobState::Queued);
    assert_eq!(job.history[0].outcome, Some(AttemptOutcome::Released));
    eventually(
        DEATH,
        "the command and what it started to be gone",
        || async { !is_running(pid) && !is_running(grandchild) },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manager_killed_outright_takes_its_commands_with_it() {
    let server = TestServer::spawn();
    let client = server.client();
    let id = push(&client, Push::new("slow")).await;
    let script = "echo $$ > pid.tmp; mv pid.tmp \"pid.$CAIRN_JOB_ID\"; exec sleep 3600";
    let mut manager = Manager::start(&server, &["slow", "--", "sh", "-c", script]);
    let pid = read_pid(&server.dir().join(format!("pid.{id}"))).await;
    manager.child.kill().unwrap();
    manager.child.wait().unwrap();
    eventually(DEATH, "the command to die with its manager", || async {
        !is_running(pid)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_cancelled_while_running_has_its_command_killed_and_work_goes_on() {
    let server = TestServer::spawn();
    let client = server.client();
    // A short lease, so that heartbeats (a third of it) notice the cancel quickly.
    let slow = push(
        &client,
        Push::new("task")
            .data(json!({"kind": "slow"}))
            .lease_timeout(Duration::from_secs(3)),
    )
    .await;
    let script = "if grep -q slow; then echo $$ > pid.tmp; mv pid.tmp \"pid.$CAIRN_JOB_ID\"; exec sleep 3600; fi";
    let manager = Manager::start(&server, &["task", "--", "sh", "-c", script]);
    let pid_file = server.dir().join(format!("pid.{slow}"));
    wait_for_file(&pid_file).await;
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();

    client.cancel(slow).await.unwrap();
    eventually(
        DEATH,
        "the cancelled job's command to be killed and reaped",
        || async { !is_alive(pid) },
    )
    .await;
    manager
        .wait_for_log("lease lost; stopping the command")
        .await;

    let quick = push(&client, Push::new("task").data(json!({"kind": "quick"}))).await;
    wait_for_state(&client, quick, JobState::Completed).await;
    assert_eq!(get(&client, slow).await.state, JobState::Cancelled);

    signal(manager.pid(), libc::SIGTERM);
    assert_eq!(manager.wait().await.code, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_runtime_stops_taking_jobs_and_lets_the_running_one_finish() {
    let server = TestServer::spawn();
    let client = server.client();
    let first = push(&client, Push::new("slow")).await;
    let script = format!("{WAIT_FOR}; touch \"started.$CAIRN_JOB_ID\"; wait_for go");
    let mut manager = Manager::start(
        &server,
        &["slow", "--max-runtime", "2s", "--", "sh", "-c", &script],
    );
    let started = server.dir().join(format!("started.{first}"));
    eventually(PATIENCE, "the job to start or the manager to exit", || {
        let is_done = started.exists() || manager.child.try_wait().unwrap().is_some();
        async move { is_done }
    })
    .await;
    if !started.exists() {
        // A machine too slow to take the job within the runtime: the manager still must have stopped cleanly.
        assert_eq!(manager.wait().await.code, Some(0));
        assert_eq!(get(&client, first).await.state, JobState::Queued);
        return;
    }
    manager.wait_for_log("--max-runtime reached").await;
    let second = push(&client, Push::new("slow")).await;
    std::fs::write(server.dir().join("go"), "").unwrap();
    assert_eq!(manager.wait().await.code, Some(0));
    assert_eq!(get(&client, first).await.state, JobState::Completed);
    assert_eq!(get(&client, second).await.state, JobState::Queued);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_comes_up_late_is_waited_for() {
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let manager = Manager::start_at(
        &url,
        dir.path(),
        &["*", "--", "sh", "-c", "cat > /dev/null"],
    );
    manager
        .wait_for_log("cannot take jobs from the server; trying again")
        .await;

    let mut server = Command::new(cairn_binary())
        .args(["serve", "--db"])
        .arg(dir.path().join("cairn.db"))
        .args(["--http", &format!("127.0.0.1:{port}"), "--bedrock", "off"])
        .env_remove("CAIRN_TOKEN")
        .env_remove("CAIRN_CONFIG")
        .env("CAIRN_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.contains("listening"), "{line}");

    let client = Client::new(&url).unwrap();
    let id = push(&client, Push::new("late")).await;
    wait_for_state(&client, id, JobState::Completed).await;
    signal(manager.pid(), libc::SIGTERM);
    assert_eq!(manager.wait().await.code, Some(0));
    server.kill().unwrap();
    server.wait().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_token_stops_the_manager_with_its_exit_code() {
    let server = TestServer::spawn_with(&["--token", "a-token-of-twenty-chars"]);
    let manager = Manager::start(&server, &["*", "--", "true"]);
    let ended = manager.wait().await;
    assert_eq!(ended.code, Some(6), "unauthorized");
    assert!(
        ended.stderr.contains("taking jobs from the server"),
        "{}",
        ended.stderr
    );
}

#[test]
fn bad_arguments_are_refused_naming_the_flag() {
    let server = TestServer::spawn();
    let check = |args: &[&str], names: &str| {
        let out = server.cairn(args, None);
        let text = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {text}");
        assert!(text.contains(names), "{args:?} should name {names}: {text}");
    };
    check(&["work", "email.[x", "--", "true"], "PATTERN");
    check(
        &["work", "x", "--concurrency", "0", "--", "true"],
        "--concurrency",
    );
    check(
        &["work", "x", "--max-load", "lots", "--", "true"],
        "--max-load",
    );
    check(
        &["work", "x", "--max-runtime", "0s", "--", "true"],
        "--max-runtime",
    );
    check(&["work", "x", "--queue", "", "--", "true"], "--queue");
    check(&["work", "x"], "COMMAND");
    check(
        &["work", "x", "--", "no-such-program-for-cairn"],
        "COMMAND: no executable named \"no-such-program-for-cairn\" in PATH",
    );
    check(
        &["work", "x", "--server", "ftp://nope", "--", "true"],
        "--server",
    );
}

/// A job pushed over HTTP in a trace (the request's W3C `traceparent` header) runs its command with `TRACEPARENT`
/// set to it, and a `cairn push` in that command puts its job in the same trace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trace_pushed_over_http_reaches_the_command_and_the_jobs_it_pushes() {
    let server = TestServer::spawn();
    let client = server.client();
    let trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let answer = crate::harness::http()
        .post(format!("{}/v1/jobs", server.url()))
        .header("traceparent", trace)
        .body(r#"{"name": "report.build"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status().as_u16(), 201);
    let body: serde_json::Value = serde_json::from_str(&answer.text().await.unwrap()).unwrap();
    let id = JobId(body["id"].as_i64().unwrap());
    let script = format!(
        "echo \"$TRACEPARENT\" > trace.txt; {} push report.mail",
        super::harness::cairn_binary()
    );
    let manager = Manager::start(
        &server,
        &[
            "report.build",
            "--exit-when-idle",
            "--",
            "sh",
            "-c",
            &script,
        ],
    );
    let ended = manager.wait().await;
    assert_eq!(ended.code, Some(0), "{}", ended.stderr);
    let seen = std::fs::read_to_string(server.dir().join("trace.txt")).unwrap();
    assert_eq!(seen.trim(), trace);
    assert_eq!(get(&client, id).await.state, JobState::Completed);
    let follow_up = client
        .list(cairn::JobFilter {
            name: Some("report.mail".into()),
            ..cairn::JobFilter::default()
        })
        .await
        .unwrap();
    let parents: Vec<Option<String>> = follow_up
        .jobs
        .iter()
        .map(|j| j.trace_parent.as_ref().map(|t| t.to_string()))
        .collect();
    assert_eq!(parents, [Some(trace.to_owned())]);
}
