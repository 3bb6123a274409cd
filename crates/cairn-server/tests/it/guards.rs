//! The listeners' guards through the wire, on real TCP loopback: a request must arrive in time, idle connections
//! close, and a connection budget shared by the HTTP and Bedrock ports keeps real clients answered while idle
//! connections are held against it. Bounds are short here (a second or two) and every wait has a generous limit.

use std::sync::Arc;
use std::time::Duration;

use cairn::Queue;
use cairn_server::bedrock::{BedrockCommands, BedrockConfig};
use cairn_server::{ConnectionBudget, Server, ServerConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Long enough for anything that should happen; only a failing test waits this long.
const PATIENCE: Duration = Duration::from_secs(20);

/// A server on a fresh SQLite file, with the Bedrock protocol beside it sharing its connection budget.
struct Guarded {
    _dir: tempfile::TempDir,
    queue: Queue,
    server: Server,
    http: std::net::SocketAddr,
    bedrock: std::net::SocketAddr,
    bedrock_stop: CancellationToken,
    bedrock_task: JoinHandle<()>,
}

impl Guarded {
    async fn start(config: ServerConfig) -> Guarded {
        let dir = tempfile::tempdir().unwrap();
        let queue = Queue::open(dir.path().join("cairn.db")).await.unwrap();
        let bedrock_config = BedrockConfig {
            request_timeout: config.request_timeout,
            idle_timeout: config.idle_timeout,
            ..BedrockConfig::default()
        };
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let server = Server::start(queue.clone(), listener, config).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let bedrock = listener.local_addr().unwrap();
        let bedrock_stop = CancellationToken::new();
        let bedrock_task = tokio::spawn({
            let commands = Arc::new(BedrockCommands::new(queue.clone()));
            let (budget, stop) = (server.connections(), bedrock_stop.clone());
            async move {
                cairn_server::bedrock::serve(
                    listener,
                    commands,
                    bedrock_config,
                    budget,
                    stop,
                    None,
                )
                .await
                .unwrap();
            }
        });
        Guarded {
            _dir: dir,
            queue,
            http: server.local_addr(),
            server,
            bedrock,
            bedrock_stop,
            bedrock_task,
        }
    }

    fn budget(&self) -> Arc<ConnectionBudget> {
        self.server.connections()
    }

    async fn stop(self) {
        self.bedrock_stop.cancel();
        tokio::time::timeout(PATIENCE, async {
            self.server.shutdown().await.unwrap();
            self.bedrock_task.await.unwrap();
        })
        .await
        .expect("the server stops");
        self.queue.close(Duration::from_secs(5)).await.unwrap();
    }
}

/// A config with the given bounds and budget, the rest as in production.
fn config(request_timeout: Duration, idle_timeout: Duration, budget: usize) -> ServerConfig {
    ServerConfig {
        request_timeout,
        idle_timeout,
        max_connections: budget,
        ..ServerConfig::default()
    }
}

/// One HTTP response: its status line, its headers (lowercase names) and its body.
#[derive(Debug)]
struct Answer {
    status: String,
    headers: Vec<(String, String)>,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Reads one response (with a `Content-Length`) off `stream`, leaving the connection open.
async fn read_answer(stream: &mut TcpStream) -> Answer {
    tokio::time::timeout(PATIENCE, async {
        let mut bytes = Vec::new();
        let head_end = loop {
            if let Some(at) = bytes.windows(4).position(|w| w == b"\r\n\r\n") {
                break at + 4;
            }
            let mut chunk = [0u8; 4096];
            let n = stream.read(&mut chunk).await.unwrap();
            assert!(
                n > 0,
                "the connection closed before a whole answer: {bytes:?}"
            );
            bytes.extend_from_slice(&chunk[..n]);
        };
        let head = String::from_utf8(bytes[..head_end].to_vec()).unwrap();
        let mut lines = head.trim_end().split("\r\n");
        let status = lines.next().unwrap().to_owned();
        let headers: Vec<(String, String)> = lines
            .map(|line| {
                let (name, value) = line.split_once(':').unwrap();
                (name.to_ascii_lowercase(), value.trim().to_owned())
            })
            .collect();
        let length: usize = headers
            .iter()
            .find(|(n, _)| n == "content-length")
            .map_or(0, |(_, v)| v.parse().unwrap());
        let mut body = bytes[head_end..].to_vec();
        while body.len() < length {
            let mut chunk = [0u8; 4096];
            let n = stream.read(&mut chunk).await.unwrap();
            assert!(n > 0, "the connection closed inside a body");
            body.extend_from_slice(&chunk[..n]);
        }
        Answer {
            status,
            headers,
            body: String::from_utf8(body).unwrap(),
        }
    })
    .await
    .expect("an answer in time")
}

/// Waits until the server closes `stream`, and returns what it sent before.
async fn closed_by_server(stream: &mut TcpStream) -> String {
    let mut out = Vec::new();
    tokio::time::timeout(PATIENCE, stream.read_to_end(&mut out))
        .await
        .expect("the server closes the connection")
        .unwrap();
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether the server has closed `stream` already (without waiting for it to).
async fn is_closed(stream: &mut TcpStream) -> bool {
    let mut byte = [0u8; 1];
    matches!(
        tokio::time::timeout(Duration::from_millis(50), stream.read(&mut byte)).await,
        Ok(Ok(0) | Err(_))
    )
}

/// Waits until `condition` holds.
async fn until(what: &str, mut condition: impl FnMut() -> bool) {
    crate::poll::eventually(PATIENCE, what, || {
        let holds = condition();
        async move { holds }
    })
    .await;
}

const HEALTH: &[u8] = b"GET /v1/health HTTP/1.1\r\nHost: localhost\r\n\r\n";

fn long_poll(wait_ms: u64) -> Vec<u8> {
    let body = format!(r#"{{"worker":"w","queues":["empty"],"wait_ms":{wait_ms}}}"#);
    format!(
        "POST /v1/dequeue HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

#[tokio::test]
async fn a_half_sent_request_is_closed_within_the_request_timeout() {
    let guarded = Guarded::start(config(
        Duration::from_secs(1),
        Duration::from_secs(600),
        100,
    ))
    .await;
    // The issue's client: a request line and one header, then silence.
    let mut half = TcpStream::connect(guarded.http).await.unwrap();
    half.write_all(b"POST /v1/jobs HTTP/1.1\r\nHost: localhost\r\n")
        .await
        .unwrap();
    // A connection that never sends a byte gets no more time for its first request.
    let mut silent = TcpStream::connect(guarded.http).await.unwrap();
    // Meanwhile another client is answered.
    let mut quick = TcpStream::connect(guarded.http).await.unwrap();
    quick.write_all(HEALTH).await.unwrap();
    assert_eq!(read_answer(&mut quick).await.status, "HTTP/1.1 200 OK");
    let started = tokio::time::Instant::now();
    assert_eq!(closed_by_server(&mut half).await, "");
    assert_eq!(closed_by_server(&mut silent).await, "");
    assert!(started.elapsed() < Duration::from_secs(10));
    guarded.stop().await;
}

#[tokio::test]
async fn a_body_that_trickles_is_cut_at_the_request_timeout() {
    let guarded = Guarded::start(config(
        Duration::from_secs(1),
        Duration::from_secs(600),
        100,
    ))
    .await;
    let mut slow = TcpStream::connect(guarded.http).await.unwrap();
    slow.write_all(
        b"POST /v1/jobs HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{",
    )
    .await
    .unwrap();
    // A byte well inside the bound each time, but never the whole body.
    let trickle = async {
        for _ in 0..98 {
            // Real time: the request timeout is by the real clock, and what is tested is that bytes arriving more
            // often than it do not stretch it.
            tokio::time::sleep(Duration::from_millis(100)).await;
            if slow.write_all(b" ").await.is_err() {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(5), trickle).await;
    let answer = read_answer(&mut slow).await;
    assert_eq!(answer.status, "HTTP/1.1 408 Request Timeout", "{answer:?}");
    assert!(answer.body.contains("request_timeout"), "{answer:?}");
    assert_eq!(closed_by_server(&mut slow).await, "");
    guarded.stop().await;
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed_after_the_idle_timeout() {
    let guarded =
        Guarded::start(config(Duration::from_secs(30), Duration::from_secs(1), 100)).await;
    let mut client = TcpStream::connect(guarded.http).await.unwrap();
    // Kept alive between requests...
    for _ in 0..2 {
        client.write_all(HEALTH).await.unwrap();
        assert_eq!(read_answer(&mut client).await.status, "HTTP/1.1 200 OK");
    }
    // ...and closed once idle for the bound.
    assert_eq!(closed_by_server(&mut client).await, "");
    guarded.stop().await;
}

#[tokio::test]
async fn a_long_poll_outlives_the_request_timeout() {
    let guarded = Guarded::start(config(
        Duration::from_millis(500),
        Duration::from_millis(500),
        100,
    ))
    .await;
    let mut worker = TcpStream::connect(guarded.http).await.unwrap();
    worker.write_all(&long_poll(2_000)).await.unwrap();
    let started = tokio::time::Instant::now();
    let answer = read_answer(&mut worker).await;
    assert_eq!(answer.status, "HTTP/1.1 200 OK", "{answer:?}");
    assert_eq!(answer.body, r#"{"jobs":[]}"#);
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "the poll waited"
    );
    guarded.stop().await;
}

#[tokio::test]
async fn idle_connections_on_both_ports_make_room_for_a_real_client() {
    let guarded = Guarded::start(config(
        Duration::from_secs(30),
        Duration::from_secs(600),
        20,
    ))
    .await;
    // Thirty idle connections against a budget of twenty, half of them having sent half a request.
    let mut held = Vec::new();
    for i in 0..30 {
        let addr = if i % 2 == 0 {
            guarded.http
        } else {
            guarded.bedrock
        };
        let mut stream = TcpStream::connect(addr).await.unwrap();
        if i % 4 < 2 {
            let half: &[u8] = if i % 2 == 0 {
                b"POST /v1/jobs HTTP/1.1\r\nHost: localhost\r\n"
            } else {
                b"CreateJob\r\nname: half"
            };
            stream.write_all(half).await.unwrap();
        }
        held.push(stream);
    }
    let budget = guarded.budget();
    until("the budget fills", || budget.open() == 20).await;
    let mut real = TcpStream::connect(guarded.http).await.unwrap();
    real.write_all(HEALTH).await.unwrap();
    assert_eq!(read_answer(&mut real).await.status, "HTTP/1.1 200 OK");
    let mut real = TcpStream::connect(guarded.bedrock).await.unwrap();
    real.write_all(b"Ping\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    assert!(!closed_by_server(&mut real).await.starts_with("503"));
    assert!(budget.open() <= 20);
    // The oldest went first.
    assert_eq!(closed_by_server(&mut held[0]).await, "");
    assert_eq!(closed_by_server(&mut held[1]).await, "");
    let mut closed = 0;
    for stream in &mut held {
        if is_closed(stream).await {
            closed += 1;
        }
    }
    assert!(closed >= 10, "only {closed} closed");
    // Shutdown does not wait for the half-sent requests still held.
    guarded.stop().await;
}

#[tokio::test]
async fn a_budget_full_of_long_polls_refuses_a_new_connection_with_a_clear_503() {
    let guarded =
        Guarded::start(config(Duration::from_secs(30), Duration::from_secs(600), 4)).await;
    let mut polls = Vec::new();
    for _ in 0..3 {
        let mut worker = TcpStream::connect(guarded.http).await.unwrap();
        worker.write_all(&long_poll(60_000)).await.unwrap();
        polls.push(worker);
    }
    // A Bedrock GetJob that waits counts as a request under way too.
    let mut waiting = TcpStream::connect(guarded.bedrock).await.unwrap();
    waiting
        .write_all(b"GetJob\r\nname: nothing.*\r\nConnection: wait\r\ntimeout: 60000\r\n\r\n")
        .await
        .unwrap();
    let budget = guarded.budget();
    until("four requests under way", || budget.busy() == 4).await;

    let mut refused = TcpStream::connect(guarded.http).await.unwrap();
    refused.write_all(HEALTH).await.unwrap();
    let answer = read_answer(&mut refused).await;
    assert_eq!(answer.status, "HTTP/1.1 503 Service Unavailable");
    assert_eq!(answer.header("retry-after"), Some("1"));
    assert_eq!(answer.header("content-type"), Some("application/json"));
    let body: serde_json::Value = serde_json::from_str(&answer.body).unwrap();
    assert_eq!(body["error"]["kind"], "unavailable", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no room for another connection"),
        "{body}"
    );
    assert_eq!(closed_by_server(&mut refused).await, "");
    // hyper's client, as `cairn` uses it, hears the refusal as the answer to its request (written before the
    // request, hyper would call it an unexpected message).
    cairn_client::install_ring_provider();
    let response = reqwest::get(format!("http://{}/v1/health", guarded.http))
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 503);
    assert!(
        response
            .text()
            .await
            .unwrap()
            .contains("no room for another connection")
    );
    let mut refused = TcpStream::connect(guarded.bedrock).await.unwrap();
    assert!(
        closed_by_server(&mut refused)
            .await
            .starts_with("503 Too many connections")
    );

    // Shutdown still answers the long polls, at once, with no job.
    let started = tokio::time::Instant::now();
    let stopping = tokio::spawn(guarded.stop());
    for mut worker in polls {
        let answer = read_answer(&mut worker).await;
        assert_eq!(answer.body, r#"{"jobs":[]}"#);
    }
    assert!(closed_by_server(&mut waiting).await.starts_with("404"));
    stopping.await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(30));
}
