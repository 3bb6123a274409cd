//! The idle scenario: the server's memory per idle long poll. Opens `--connections` TCP connections, each writing
//! one raw HTTP/1.1 `POST /v1/dequeue` with a long `wait_ms` on an empty queue and reading nothing, waits until the
//! server has accepted them (its open descriptors, from `/proc`) and settled, and compares the server's resident
//! memory before and after. Then it closes them all and checks that the server still answers.
//!
//! The figure is the growth of the server's resident memory, so memory the server freed earlier (after holding as
//! many connections before, say) is reused and hides part of the cost: measure on a freshly started server.
//!
//! Raw HTTP rather than a client per connection: ten thousand reqwest clients would cost the bench far more than
//! the server, on the same two cores.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use cairn::Dequeue;

use crate::bench::args::invalid;
use cairn_api::DequeueRequest;
use cairn_client::Client;
use indicatif::ProgressBar;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::task::JoinSet;

use super::report::{Memory, ScenarioReport, thousands};
use super::{drain, procfs, progress};

/// The queue the long polls wait on; nothing is ever enqueued in it.
pub const QUEUE: &str = "bench-idle";

/// The wait each long poll asks for; the server cuts it to its `--max-wait` (60 s by default).
const POLL_WAIT: Duration = Duration::from_secs(3600);

/// Connections opened at once.
const OPENERS: usize = 32;

/// Connections opened beyond those the server has accepted. A connect completes in the kernel before the server
/// accepts it, so openers can outrun a busy server; past its listen backlog (128 by default) SYNs are dropped and
/// retried a second later, which makes opening slow and uneven.
const AHEAD: u64 = 64;

/// How often the pacer counts the server's descriptors; listing ten thousand of them costs a few milliseconds.
const PACE_INTERVAL: Duration = Duration::from_millis(10);

/// How long an opener waits for the server to catch up before opening anyway (other connections to the server may
/// have closed meanwhile, leaving the count short).
const PACE_PATIENCE: Duration = Duration::from_secs(1);

/// Descriptors the bench keeps for itself beyond the connections (runtime, clients, stdio).
const SPARE_FDS: u64 = 256;

/// How long to wait for the server to accept every connection, at most.
const ACCEPT_DEADLINE: Duration = Duration::from_secs(60);

/// When the server's descriptor count has not grown for this long, it has accepted all it will.
const ACCEPT_STALL: Duration = Duration::from_secs(2);

/// The pause between the last accept and the memory reading, for the requests to be parsed and parked.
const SETTLE: Duration = Duration::from_secs(1);

/// How long to wait for the server to close its side after the bench closed the connections.
const RELEASE_DEADLINE: Duration = Duration::from_secs(10);

/// The server under test.
#[derive(Debug, Clone)]
pub struct IdleTarget {
    /// A client for the server (the queue's cleanup and the health check afterwards).
    pub client: Client,
    /// The server's bearer token, for the raw requests.
    pub token: Option<String>,
    /// The server's process id, for `/proc`.
    pub pid: u32,
}

/// Holds `connections` idle long polls open and measures the server's memory. `after_others` says whether other
/// scenarios ran on the server first in this run.
///
/// # Errors
/// Too low an open-file limit (here or in the server), a connection that cannot be opened, unreadable `/proc`
/// files, or a server that no longer answers afterwards.
pub async fn run(
    target: &IdleTarget,
    connections: usize,
    after_others: bool,
) -> anyhow::Result<ScenarioReport> {
    let pid = target.pid;
    check_fd_limits(pid, connections as u64)?;
    let leftovers = drain::drain(std::slice::from_ref(&target.client), QUEUE).await?;
    let endpoint = Endpoint::parse(target.client.url())?;
    let addr = tokio::net::lookup_host(&endpoint.connect_to)
        .await
        .with_context(|| format!("resolving {}", endpoint.connect_to))?
        .next()
        .with_context(|| format!("{} resolves to no address", endpoint.connect_to))?;
    let request: Arc<[u8]> = long_poll_request(&endpoint, target.token.as_deref()).into();

    let fds_before = procfs::open_fds(pid).ok();
    let rss_before = procfs::rss_bytes(pid)?;
    let start = Instant::now();
    let streams = open_paced(pid, fds_before, addr, request, connections).await?;
    let opened_in = start.elapsed();
    let spinner = progress::spinner("idle", "waiting for the server to accept and settle");
    let accepted = match fds_before {
        Some(before) => Some(wait_accepted(pid, before, connections as u64).await),
        None => None,
    };
    tokio::time::sleep(SETTLE).await;
    let rss_open = procfs::rss_bytes(pid)?;
    let waiting = count_waiting(&streams);
    let elapsed = start.elapsed();

    spinner.set_message("closing the connections");
    drop(streams);
    if let Some(before) = fds_before {
        wait_released(pid, before).await;
    }
    let rss_closed = procfs::rss_bytes(pid)?;
    target
        .client
        .health()
        .await
        .context("the server did not answer a health check after the idle connections closed")?;
    spinner.finish_and_clear();

    let memory = Memory {
        connections: connections as u64,
        opened_in,
        accepted,
        waiting,
        rss_before,
        rss_open,
        rss_closed,
    };
    let mut report = report(pid, memory, elapsed, leftovers);
    if after_others {
        report.notes.push(
            "idle ran after other scenarios in this run: connections reuse heap they freed, so the figure may be \
             low; run idle alone on a freshly started server for a clean one"
                .to_owned(),
        );
    }
    Ok(report)
}

/// The scenario's report, with a note for anything that makes the figure less certain.
fn report(pid: u32, memory: Memory, elapsed: Duration, leftovers: u64) -> ScenarioReport {
    let connections = memory.connections;
    let mut report = ScenarioReport::new(
        "idle",
        format!(
            "{} idle long polls (raw HTTP/1.1 POST /v1/dequeue, one TCP connection each) on an empty \
             queue; server memory (VmRSS of pid {pid}) before and with all open; health checked after closing",
            thousands(connections as f64)
        ),
        connections,
        elapsed,
    )
    .latency_only();
    if memory.accepted.is_none() {
        report.notes.push(format!(
            "/proc/{pid}/fd could not be read, so accepted connections were not counted"
        ));
    }
    if memory.waiting < connections {
        report.notes.push(format!(
            "{} long polls were answered (or closed) before the measurement: is the server's --max-wait shorter \
             than the run?",
            connections - memory.waiting
        ));
    }
    if leftovers > 0 {
        report.notes.push(format!(
            "{leftovers} jobs left in {QUEUE} by an earlier run were finished before the run"
        ));
    }
    report.memory = Some(memory);
    report
}

/// Refuses to start when this process or the server cannot hold `connections` more descriptors.
fn check_fd_limits(pid: u32, connections: u64) -> anyhow::Result<()> {
    let own = procfs::own_open_file_limit();
    if own < connections + SPARE_FDS {
        return Err(invalid(
            "--connections",
            format!(
                "{connections} connections need about {} open files, but this process may open {own}; \
                 raise the limit (ulimit -n)",
                connections + SPARE_FDS
            ),
        )
        .into());
    }
    if let Some(limit) = procfs::open_file_limit(pid) {
        let used = procfs::open_fds(pid).unwrap_or(0);
        if limit < connections + used {
            return Err(invalid(
                "--connections",
                format!(
                    "the server (pid {pid}) may open {limit} files and has {used} open, too few for {connections} \
                     more connections; cairn serve raises its limit to the hard limit, so raise that (ulimit -Hn) \
                     before starting it"
                ),
            )
            .into());
        }
    }
    Ok(())
}

/// Where the raw requests go.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Endpoint {
    /// `host:port` to connect to.
    connect_to: String,
    /// The `Host` header: the URL's authority as written.
    host: String,
    /// Anything in the URL after the authority, such as `/cairn`; empty for most servers.
    path_prefix: String,
}

impl Endpoint {
    /// Reads a server URL as [`Client::url`] gives it: `http://host[:port][/prefix]`.
    fn parse(url: &str) -> anyhow::Result<Endpoint> {
        let rest = url
            .strip_prefix("http://")
            .with_context(|| format!("--server: must be an http:// URL, got {url:?}"))?;
        let (host, path_prefix) = match rest.find('/') {
            Some(i) => (&rest[..i], rest[i..].trim_end_matches('/')),
            None => (rest, ""),
        };
        // A port is what follows the last colon, unless that colon is inside an IPv6 literal.
        let has_port = host.rsplit_once(':').is_some_and(|(before, port)| {
            !port.contains(']') && (!before.contains(':') || before.ends_with(']'))
        });
        let connect_to = if has_port {
            host.to_owned()
        } else {
            format!("{host}:80")
        };
        Ok(Endpoint {
            connect_to,
            host: host.to_owned(),
            path_prefix: path_prefix.to_owned(),
        })
    }
}

/// The bytes of one long poll: `POST /v1/dequeue` on [`QUEUE`], waiting [`POLL_WAIT`].
fn long_poll_request(endpoint: &Endpoint, token: Option<&str>) -> Vec<u8> {
    let dequeue = Dequeue::new("bench-idle").queue(QUEUE).wait(POLL_WAIT);
    let body = serde_json::to_vec(&DequeueRequest::from(&dequeue))
        .expect("a dequeue request always serializes");
    let auth = token.map_or_else(String::new, |t| format!("Authorization: Bearer {t}\r\n"));
    let mut request = format!(
        "POST {}/v1/dequeue HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{auth}\r\n",
        endpoint.path_prefix,
        endpoint.host,
        body.len()
    )
    .into_bytes();
    request.extend_from_slice(&body);
    request
}

/// Opens the connections, paced by the server's accepted count when its descriptors (`fds_before` of them now)
/// can be counted.
async fn open_paced(
    pid: u32,
    fds_before: Option<u64>,
    addr: SocketAddr,
    request: Arc<[u8]>,
    connections: usize,
) -> anyhow::Result<Vec<TcpStream>> {
    // Without the server's descriptors to count, nothing paces the openers.
    let allowed = Arc::new(AtomicU64::new(fds_before.map_or(u64::MAX, |_| AHEAD)));
    let pacer = fds_before.map(|before| tokio::spawn(pace(pid, before, allowed.clone())));
    let opened = open_all(addr, request, connections, allowed).await;
    if let Some(pacer) = pacer {
        pacer.abort();
    }
    opened
}

/// Keeps `allowed` at [`AHEAD`] connections beyond those the server has accepted (descriptors beyond `before`).
async fn pace(pid: u32, before: u64, allowed: Arc<AtomicU64>) {
    loop {
        if let Ok(now) = procfs::open_fds(pid) {
            allowed.store(now.saturating_sub(before) + AHEAD, Ordering::Relaxed);
        }
        tokio::time::sleep(PACE_INTERVAL).await;
    }
}

/// Opens `n` connections to `addr`, [`OPENERS`] at a time and only as far as `allowed` says, and writes
/// `request` on each.
async fn open_all(
    addr: SocketAddr,
    request: Arc<[u8]>,
    n: usize,
    allowed: Arc<AtomicU64>,
) -> anyhow::Result<Vec<TcpStream>> {
    let bar = progress::bar("idle", n as u64);
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = JoinSet::new();
    for _ in 0..OPENERS.min(n) {
        let opener = Opener {
            addr,
            request: request.clone(),
            n,
            next: next.clone(),
            allowed: allowed.clone(),
            bar: bar.clone(),
        };
        tasks.spawn(opener.run());
    }
    let mut streams = Vec::with_capacity(n);
    while let Some(done) = tasks.join_next().await {
        streams.extend(done.context("a connection opener stopped")??);
    }
    bar.finish_and_clear();
    Ok(streams)
}

/// One of the tasks opening connections.
struct Opener {
    addr: SocketAddr,
    request: Arc<[u8]>,
    n: usize,
    /// The next connection number to open, shared by the openers.
    next: Arc<AtomicUsize>,
    /// Connection numbers below this may be opened now.
    allowed: Arc<AtomicU64>,
    bar: ProgressBar,
}

impl Opener {
    /// Takes the next connection number until `n` are taken; opens each when the pacer allows.
    async fn run(self) -> anyhow::Result<Vec<TcpStream>> {
        let n = self.n;
        let mut mine = Vec::new();
        loop {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            if i >= n {
                return Ok(mine);
            }
            let asked = Instant::now();
            while i as u64 >= self.allowed.load(Ordering::Relaxed)
                && asked.elapsed() < PACE_PATIENCE
            {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            let mut stream = TcpStream::connect(self.addr)
                .await
                .with_context(|| format!("opening connection {} of {n} to {}", i + 1, self.addr))?;
            stream
                .write_all(&self.request)
                .await
                .with_context(|| format!("writing the long poll on connection {} of {n}", i + 1))?;
            mine.push(stream);
            self.bar.inc(1);
        }
    }
}

/// Waits until the server holds `connections` more descriptors than `before`, or stops gaining them. Returns how
/// many it gained.
async fn wait_accepted(pid: u32, before: u64, connections: u64) -> u64 {
    let deadline = Instant::now() + ACCEPT_DEADLINE;
    let mut best = 0;
    let mut last_gain = Instant::now();
    loop {
        let gained = procfs::open_fds(pid)
            .unwrap_or(before)
            .saturating_sub(before);
        if gained > best {
            best = gained;
            last_gain = Instant::now();
        }
        if best >= connections || last_gain.elapsed() > ACCEPT_STALL || Instant::now() > deadline {
            return best.min(connections);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits (a while at most) until the server is back to `before` descriptors.
async fn wait_released(pid: u32, before: u64) {
    let deadline = Instant::now() + RELEASE_DEADLINE;
    while Instant::now() < deadline {
        match procfs::open_fds(pid) {
            Ok(now) if now > before => tokio::time::sleep(Duration::from_millis(50)).await,
            _ => return,
        }
    }
}

/// How many connections have had no answer yet: a read would block.
fn count_waiting(streams: &[TcpStream]) -> u64 {
    let mut buf = [0u8; 64];
    streams
        .iter()
        .filter(|s| matches!(s.try_read(&mut buf), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock))
        .count() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(url: &str, connect_to: &str, host: &str, path_prefix: &str) {
        assert_eq!(
            Endpoint::parse(url).unwrap(),
            Endpoint {
                connect_to: connect_to.to_owned(),
                host: host.to_owned(),
                path_prefix: path_prefix.to_owned(),
            },
            "{url}"
        );
    }

    #[test]
    fn endpoints_come_from_the_server_url() {
        check(
            "http://127.0.0.1:6670",
            "127.0.0.1:6670",
            "127.0.0.1:6670",
            "",
        );
        check("http://localhost", "localhost:80", "localhost", "");
        check(
            "http://[::1]:6670/cairn",
            "[::1]:6670",
            "[::1]:6670",
            "/cairn",
        );
        check("http://[::1]", "[::1]:80", "[::1]", "");
        assert!(Endpoint::parse("https://x").is_err());
    }

    #[test]
    fn a_long_poll_is_one_http_request_with_its_body() {
        let endpoint = Endpoint::parse("http://127.0.0.1:6670").unwrap();
        let request =
            String::from_utf8(long_poll_request(&endpoint, Some("s3cret-token-0123"))).unwrap();
        let body = r#"{"worker":"bench-idle","queues":["bench-idle"],"order":"ordered","limit":1,"wait_ms":3600000}"#;
        assert_eq!(
            request,
            format!(
                "POST /v1/dequeue HTTP/1.1\r\nHost: 127.0.0.1:6670\r\nContent-Type: application/json\r\n\
                 Content-Length: {}\r\nAuthorization: Bearer s3cret-token-0123\r\n\r\n{body}",
                body.len()
            )
        );
    }
}
