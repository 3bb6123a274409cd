//! `TestServer`: the real `cairn serve` binary on a loopback port over a fresh SQLite file (or a PostgreSQL
//! database that several servers share), a `Client` for it, and the `cairn` binary for CLI tests. Kill it with
//! SIGKILL and start it again on the same database to test recovery.

use cairn::Jobs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use cairn_client::Client;

/// The `cairn` binary under test.
pub fn cairn_binary() -> &'static str {
    env!("CARGO_BIN_EXE_cairn")
}

pub use cairn::__private::{TestDatabase, is_postgres_module};

/// A server on SQLite, for the modules that test one backend (or run servers on PostgreSQL themselves).
pub type TestServer = TestServerOn<false>;

/// A running `cairn serve` on its own database: a SQLite file, or with `POSTGRES` a PostgreSQL database of its
/// own on the test cluster.
pub struct TestServerOn<const POSTGRES: bool> {
    dir: tempfile::TempDir,
    child: Option<Child>,
    url: String,
    bedrock: String,
    banner: String,
    extra_args: Vec<String>,
    token: Option<String>,
    /// A PostgreSQL URL to serve instead of the SQLite file in `dir`.
    database: Option<String>,
    /// A SQLite file elsewhere than in `dir`.
    sqlite_file: Option<PathBuf>,
    /// The database this server made for itself, dropped with it.
    _own_database: Option<TestDatabase>,
}

impl<const POSTGRES: bool> TestServerOn<POSTGRES> {
    /// A server on a fresh database.
    pub fn spawn() -> Self {
        Self::spawn_with(&[])
    }

    /// A server on a fresh database with extra `cairn serve` arguments.
    pub fn spawn_with(args: &[&str]) -> Self {
        if POSTGRES {
            let own = TestDatabase::new();
            let mut server = Self::spawn_on(Some(own.url.clone()), args);
            server._own_database = Some(own);
            server
        } else {
            Self::spawn_on(None, args)
        }
    }

    /// A server on the PostgreSQL database at `url`, which other servers may share.
    pub fn spawn_on_postgres(url: &str, args: &[&str]) -> Self {
        Self::spawn_on(Some(url.to_owned()), args)
    }

    /// A server on the SQLite file at `path` (on a file system of the test's choosing).
    pub fn spawn_on_file(path: &Path, args: &[&str]) -> Self {
        let mut server = Self::spawn_on(None, &[]);
        server.kill();
        server.sqlite_file = Some(path.to_owned());
        server.extra_args = args.iter().map(|a| a.to_string()).collect();
        server.start();
        server
    }

    /// Whether the server runs on PostgreSQL.
    pub fn is_postgres(&self) -> bool {
        self.database.is_some()
    }

    fn spawn_on(database: Option<String>, args: &[&str]) -> Self {
        let dir = tempfile::tempdir().expect("a temp dir");
        let mut server = TestServerOn {
            dir,
            child: None,
            url: String::new(),
            bedrock: String::new(),
            banner: String::new(),
            extra_args: args.iter().map(|a| a.to_string()).collect(),
            token: None,
            database,
            sqlite_file: None,
            _own_database: None,
        };
        if let Some(i) = args.iter().position(|a| *a == "--token") {
            server.token = args.get(i + 1).map(|t| t.to_string());
        }
        server.start();
        server
    }

    /// The database: the SQLite file, or the PostgreSQL URL.
    pub fn db(&self) -> PathBuf {
        match (&self.database, &self.sqlite_file) {
            (Some(url), _) => PathBuf::from(url),
            (None, Some(file)) => file.clone(),
            (None, None) => self.dir.path().join("cairn.db"),
        }
    }

    /// The temp directory the server runs in (for files tests write).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Starts the server (again) on the same database and waits until it listens.
    pub fn start(&mut self) {
        assert!(self.child.is_none(), "the server is already running");
        let mut child = Command::new(cairn_binary())
            .arg("serve")
            .arg("--db")
            .arg(self.db())
            .args(["--http", "127.0.0.1:0", "--bedrock", "127.0.0.1:0"])
            .args(&self.extra_args)
            .current_dir(self.dir.path())
            .env_remove("CAIRN_TOKEN")
            .env_remove("CAIRN_CONFIG")
            .env("CAIRN_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawning cairn serve");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("reading the server's first line");
        let url = line
            .split_whitespace()
            .find(|w| w.starts_with("http://") || w.starts_with("https://"))
            .unwrap_or_else(|| panic!("no address in the server's first line: {line:?}"))
            .to_owned();
        self.url = url;
        // The line ends with the Bedrock protocol's address (or `off`).
        self.bedrock = line
            .split_whitespace()
            .last()
            .unwrap_or_default()
            .to_owned();
        self.banner = line.trim_end().to_owned();
        self.child = Some(child);
    }

    /// The line the server printed when it started listening.
    pub fn banner(&self) -> &str {
        &self.banner
    }

    /// The Bedrock protocol's address, such as `127.0.0.1:40123`.
    pub fn bedrock(&self) -> &str {
        &self.bedrock
    }

    /// The server's base URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A client for the server (with its token, if it has one).
    pub fn client(&self) -> Client {
        let client = Client::new(&self.url).expect("a valid URL");
        match &self.token {
            Some(token) => client.with_token(token),
            None => client,
        }
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("the server is running").id()
    }

    /// Kills the server with SIGKILL and reaps it.
    pub fn kill(&mut self) {
        let mut child = self.child.take().expect("the server is running");
        child.kill().expect("SIGKILL");
        child.wait().expect("reaping the server");
    }

    /// Sends SIGTERM and waits for a clean exit; returns the exit status code.
    pub fn terminate(&mut self) -> Option<i32> {
        let mut child = self.child.take().expect("the server is running");
        signal(child.id(), libc::SIGTERM);
        wait_with_timeout(&mut child, Duration::from_secs(30))
    }

    /// Runs the `cairn` binary against this server, with `stdin` as its input.
    pub fn cairn(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let mut command = Command::new(cairn_binary());
        command
            .args(args)
            .current_dir(self.dir.path())
            .env("CAIRN_SERVER", &self.url)
            .env_remove("CAIRN_TOKEN")
            // A suite run from inside `cairn work` must not hand its own lease to the commands under test.
            .env_remove("CAIRN_LEASE_TOKEN")
            .env("CAIRN_LOG", "warn");
        if let Some(token) = &self.token {
            command.env("CAIRN_TOKEN", token);
        }
        run_with_stdin(command, stdin)
    }
}

impl<const POSTGRES: bool> Drop for TestServerOn<POSTGRES> {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Runs `command` to completion, feeding it `stdin`.
pub fn run_with_stdin(mut command: Command, stdin: Option<&str>) -> Output {
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().expect("spawning cairn");
    let mut input = child.stdin.take().expect("piped stdin");
    if let Some(text) = stdin {
        std::io::Write::write_all(&mut input, text.as_bytes()).expect("writing stdin");
    }
    drop(input);
    child.wait_with_output().expect("waiting for cairn")
}

/// Sends `sig` to `pid`.
pub fn signal(pid: u32, sig: i32) {
    let pid = i32::try_from(pid).expect("a pid fits in i32");
    // SAFETY: kill only sends a signal.
    assert_eq!(unsafe { libc::kill(pid, sig) }, 0, "sending signal {sig}");
}

/// Waits for `child` to exit, killing it after `timeout`; its exit code (None when killed by a signal).
pub fn wait_with_timeout(child: &mut Child, timeout: Duration) -> Option<i32> {
    // The wait for the exit blocks; a watchdog beside it kills the process if the exit does not come in time.
    let pid = i32::try_from(child.id()).expect("a pid fits in i32");
    let (exited, exit) = std::sync::mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        let late = exit.recv_timeout(timeout).is_err();
        if late {
            // SAFETY: kill only sends a signal, to the child that has not been reaped (the wait below reaps it).
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        late
    });
    let status = child.wait().expect("waiting for the child");
    let _ = exited.send(());
    let late = watchdog.join().expect("the watchdog ends");
    assert!(!late, "the process did not exit within {timeout:?}");
    status.code()
}

#[path = "../../../cairn/tests/it/poll.rs"]
mod poll;

#[path = "../../../cairn-server/tests/it/http/wire.rs"]
mod wire;
pub use wire::{http, raw, take};

pub use poll::{eventually, poll, until_waiting};

/// A raw POST of `body` to `path`: (status, JSON body).
pub async fn post<const POSTGRES: bool>(
    server: &TestServerOn<POSTGRES>,
    path: &str,
    body: &str,
) -> (u16, serde_json::Value) {
    raw(
        reqwest::Method::POST,
        format!("{}{path}", server.url()),
        None,
        Some(body),
    )
    .await
}

/// The text of a process's stdout.
pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The text of a process's stderr.
pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Every job the server has, newest first, page by page (without their histories).
pub async fn all_jobs(client: &Client) -> Vec<cairn::Job> {
    let mut jobs = Vec::new();
    let mut before = None;
    loop {
        let page = client
            .list(cairn::JobFilter {
                before,
                limit: 1000,
                ..cairn::JobFilter::default()
            })
            .await
            .unwrap();
        jobs.extend(page.jobs);
        match page.next {
            Some(next) => before = Some(next),
            None => return jobs,
        }
    }
}

/// The SHA-256 of `secret` in hexadecimal, as `sha256sum` gives it (and as the docs tell users to make a token
/// file's `secret_sha256`).
pub fn sha256(secret: &str) -> String {
    let out = std::process::Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(secret.as_bytes())?;
            child.wait_with_output()
        })
        .expect("sha256sum, as the docs tell users to run it");
    String::from_utf8(out.stdout).unwrap()[..64].to_owned()
}
