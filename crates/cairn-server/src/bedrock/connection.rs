//! The Bedrock listener and its connections: accept within the [`ConnectionBudget`] (which it may share with the
//! HTTP listener), read requests (pipelined, in order), run each through the [`Commands`], write the response, and
//! close on `Connection: close`, on a framing error, at the limits, when chosen to make room while idle, or at
//! shutdown. Every connection is its own task, so a slow or hostile client holds up nobody else.
//!
//! What a command means is not decided here: see `Commands`.

use crate::tls::{Socket, Tls, handshake};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::bedrock::frame::{FrameLimits, Request, RequestReader, Response};
use crate::budget::{ConnectionBudget, Slot};

/// The limits of the Bedrock listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BedrockConfig {
    /// Request size limits.
    pub frame: FrameLimits,
    /// A request that has started arriving must be complete within this long (a slow client is cut off).
    pub request_timeout: Duration,
    /// An idle connection (no request under way) is closed after this long.
    pub idle_timeout: Duration,
}

impl Default for BedrockConfig {
    fn default() -> Self {
        BedrockConfig {
            frame: FrameLimits::default(),
            request_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(120),
        }
    }
}

/// What a running command may watch.
#[derive(Debug, Clone, Default)]
pub struct Signals {
    /// Cancelled when the server starts shutting down: a command that waits should answer then.
    pub shutdown: CancellationToken,
    /// Cancelled when the client closes its side of the connection while the command runs: a command that waits
    /// for a job should stop waiting (Bedrock aborts such a command). A client that only half-closed after sending
    /// still gets its answers; jobs handed to one that had gone come back (see `reached_a_reader`).
    pub client_gone: CancellationToken,
}

/// What runs a request.
pub trait Commands: Send + Sync + 'static {
    /// Runs one request to its response.
    fn run<'a>(
        &'a self,
        request: Request,
        signals: &'a Signals,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Response> + Send + 'a>>;

    /// Called when `response` could not be written to its client: jobs it hands out must be given back.
    fn undelivered(&self, response: &Response) {
        let _ = response;
    }
}

/// Accepts connections within `budget` until `shutdown`, then waits for open connections to finish the command
/// they are running (one still arriving is closed). Beyond the budget, a new connection takes the place of the one idle the longest, or, when every one
/// has a request under way, is answered `503 Too many connections` and closed.
///
/// # Errors
/// None at present: failed accepts are logged and retried.
pub async fn serve(
    listener: TcpListener,
    commands: Arc<dyn Commands>,
    config: BedrockConfig,
    budget: Arc<ConnectionBudget>,
    shutdown: CancellationToken,
    tls: Option<Arc<Tls>>,
) -> std::io::Result<()> {
    let busy: Arc<[u8]> = close(Response::status("503 Too many connections"))
        .to_bytes()
        .into();
    let mut connections = JoinSet::new();
    while let Some((stream, peer, slot)) = budget
        .next_connection(&listener, &mut connections, &shutdown, &busy, "bedrock")
        .await
    {
        let (commands, shutdown) = (commands.clone(), shutdown.clone());
        let acceptor = tls.as_ref().map(|tls| tls.acceptor());
        connections.spawn(async move {
            let served = match acceptor {
                None => handle(stream, commands.as_ref(), &config, &slot, &shutdown).await,
                Some(acceptor) => {
                    let limit = config.request_timeout;
                    match handshake(acceptor, stream, limit, &shutdown, peer).await {
                        Some(stream) => {
                            handle(stream, commands.as_ref(), &config, &slot, &shutdown).await
                        }
                        None => Ok(()),
                    }
                }
            };
            if let Err(e) = served {
                tracing::debug!(%peer, error = %e, "Bedrock connection ended with an error");
            }
        });
    }
    while connections.join_next().await.is_some() {}
    Ok(())
}

/// Adds `Connection: close` to a response.
fn close(mut response: Response) -> Response {
    response
        .headers
        .push(("Connection".to_owned(), "close".to_owned()));
    response
}

/// Whether the request asks for the connection to close after it: `Connection: close`, or `forget` (whose
/// sender reads no answer).
fn wants_close(request: &Request) -> bool {
    request
        .headers
        .get("connection")
        .is_some_and(|v| v.eq_ignore_ascii_case("close") || v.eq_ignore_ascii_case("forget"))
}

/// Writes all of `bytes`, or fails: a client that does not read for a whole request timeout holds nothing up.
async fn write_bounded(
    stream: &mut impl Socket,
    bytes: &[u8],
    limit: Duration,
) -> std::io::Result<()> {
    match tokio::time::timeout(limit, stream.write_all(bytes)).await {
        Ok(written) => written,
        Err(_) => Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "the client stopped reading",
        )),
    }
}

/// Serves one connection: requests in order, one at a time.
async fn handle(
    mut stream: impl Socket,
    commands: &dyn Commands,
    config: &BedrockConfig,
    slot: &Slot,
    shutdown: &CancellationToken,
) -> std::io::Result<()> {
    let mut reader = RequestReader::new(config.frame);
    let mut buffer: Vec<u8> = Vec::with_capacity(1024);
    // The client closed its side: finish what it sent, then close.
    let mut eof = false;
    // When the request being read started arriving: it must be whole by this plus the request timeout, however
    // the bytes trickle in.
    let mut request_started: Option<tokio::time::Instant> = None;
    let mut chunk = vec![0u8; 16 * 1024];
    loop {
        // A request already in the buffer (pipelined) runs before anything more is read.
        match reader.next(&buffer) {
            Err(e) => {
                let response = close(Response::status(e.status_line()));
                write_bounded(&mut stream, &response.to_bytes(), config.request_timeout).await?;
                return Ok(());
            }
            Ok(Some((request, used))) => {
                buffer.drain(..used);
                request_started = None;
                slot.busy();
                let asked_to_close = wants_close(&request);
                let (response, client_gone) =
                    run_watching_peer(&mut stream, &mut buffer, commands, request, shutdown, eof)
                        .await;
                // Chosen to make room just as the request arrived: it is answered, then the connection closes.
                let closing = asked_to_close || slot.is_closed_for_room();
                eof |= client_gone;
                let response = if closing { close(response) } else { response };
                // A client that closed its side may still read (it may only have half-closed, as `printf … | nc`
                // does): the answer goes out anyway, and so do those of the requests it sent before closing.
                if let Err(e) =
                    write_bounded(&mut stream, &response.to_bytes(), config.request_timeout).await
                {
                    commands.undelivered(&response);
                    return Err(e);
                }
                if client_gone
                    && !response.handed_out.is_empty()
                    && !reached_a_reader(stream.tcp()).await
                {
                    // The client had gone: the jobs go back rather than stay with nobody.
                    commands.undelivered(&response);
                    return Ok(());
                }
                if closing {
                    stream.shutdown().await?;
                    return Ok(());
                }
                slot.idle();
                continue;
            }
            Ok(None) => {}
        }
        if eof {
            stream.shutdown().await?;
            return Ok(());
        }
        // Between requests, wait for the next one (or shutdown); within one, a slow client gets a deadline.
        if buffer.is_empty() {
            request_started = None;
        } else if request_started.is_none() {
            request_started = Some(tokio::time::Instant::now());
            // A request starts arriving: the connection goes to the back of the idle ones.
            slot.idle();
        }
        let deadline = match request_started {
            Some(started) => started + config.request_timeout,
            None => tokio::time::Instant::now() + config.idle_timeout,
        };
        let read = tokio::select! {
            // No command is under way (a request may be arriving, but nothing of it has run): nothing is lost, and
            // a client that sends half a request cannot hold up shutdown.
            () = shutdown.cancelled() => return Ok(()),
            () = slot.closed_for_room() => return Ok(()),
            read = tokio::time::timeout_at(deadline, stream.read(&mut chunk)) => read,
        };
        match read {
            Err(_) if buffer.is_empty() => return Ok(()),
            Err(_) => {
                let response = close(Response::status("408 Request timeout"));
                write_bounded(&mut stream, &response.to_bytes(), config.request_timeout).await?;
                return Ok(());
            }
            Ok(Ok(0)) => return Ok(()),
            Ok(Ok(n)) => buffer.extend_from_slice(&chunk[..n]),
            Ok(Err(e)) => return Err(e),
        }
    }
}

/// How long an answer handed to a client that had closed its side is given to be refused: a few round trips of a
/// slow link. A job handed to a client that had gone but whose refusal comes later stays with it until its lease
/// ends.
const DELIVERY_CHECK: Duration = Duration::from_secs(2);

/// Whether an answer just written to a client that had closed its side reached someone who reads. One that only
/// half-closed reads it; one that had gone answers the bytes with a reset, which shows as the socket's error within
/// a round trip.
async fn reached_a_reader(stream: &TcpStream) -> bool {
    let deadline = tokio::time::Instant::now() + DELIVERY_CHECK;
    while tokio::time::Instant::now() < deadline {
        if matches!(stream.take_error(), Ok(Some(_)) | Err(_)) {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    true
}

/// Runs a command while watching the connection: bytes that arrive meanwhile (the next pipelined request) are
/// kept, and if the client closes its side, the command is told (and nothing more is read). Returns the response
/// and whether the client went away.
async fn run_watching_peer(
    stream: &mut impl Socket,
    buffer: &mut Vec<u8>,
    commands: &dyn Commands,
    request: Request,
    shutdown: &CancellationToken,
    already_gone: bool,
) -> (Response, bool) {
    let signals = Signals {
        shutdown: shutdown.clone(),
        client_gone: CancellationToken::new(),
    };
    if already_gone {
        signals.client_gone.cancel();
    }
    let mut command = commands.run(request, &signals);
    let mut chunk = [0u8; 4096];
    let mut reading = !already_gone;
    loop {
        tokio::select! {
            response = &mut command => return (response, signals.client_gone.is_cancelled()),
            read = stream.read(&mut chunk), if reading => match read {
                Ok(n) if n > 0 => {
                    buffer.extend_from_slice(&chunk[..n]);
                    // A client that pipelines more than a few requests' worth while one runs is not read further
                    // until it completes.
                    reading = buffer.len() < 4 * 1024 * 1024;
                }
                _ => {
                    signals.client_gone.cancel();
                    reading = false;
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use super::*;

    /// Echoes the verb and the `name` header; `Sleep` says it started, then waits until shutdown.
    #[derive(Default)]
    struct Echo {
        sleeping: tokio::sync::Notify,
        abandoned: tokio::sync::Notify,
        undelivered: std::sync::Mutex<Vec<cairn::JobId>>,
    }

    impl Commands for Echo {
        fn undelivered(&self, response: &Response) {
            self.undelivered
                .lock()
                .unwrap()
                .extend(response.handed_out.iter().copied());
        }

        fn run<'a>(
            &'a self,
            request: Request,
            signals: &'a Signals,
        ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Response> + Send + 'a>> {
            Box::pin(async move {
                if request.verb.eq_ignore_ascii_case("take") {
                    // Hands out a pretend job, for the undelivered path.
                    return Response {
                        handed_out: vec![cairn::JobId(7)],
                        ..Response::status("200 Taken")
                    };
                }
                if request.verb.eq_ignore_ascii_case("sleep") {
                    self.sleeping.notify_one();
                    tokio::select! {
                        () = signals.shutdown.cancelled() => return Response::status("200 Woke"),
                        () = signals.client_gone.cancelled() => {
                            self.abandoned.notify_one();
                            return Response::status("200 Nobody there");
                        }
                    }
                }
                let name = request.headers.get("name").unwrap_or("").to_owned();
                Response::json(format!(
                    "{{\"verb\":\"{}\",\"name\":\"{name}\"}}",
                    request.verb
                ))
            })
        }
    }

    struct Running {
        addr: SocketAddr,
        shutdown: CancellationToken,
        task: tokio::task::JoinHandle<()>,
        echo: Arc<Echo>,
    }

    async fn start(config: BedrockConfig) -> Running {
        start_within(config, ConnectionBudget::new(10_000)).await
    }

    async fn start_within(config: BedrockConfig, budget: Arc<ConnectionBudget>) -> Running {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let shutdown = CancellationToken::new();
        let echo = Arc::new(Echo::default());
        let task = tokio::spawn({
            let (shutdown, echo) = (shutdown.clone(), echo.clone());
            async move {
                serve(listener, echo, config, budget, shutdown, None)
                    .await
                    .unwrap();
            }
        });
        Running {
            addr,
            shutdown,
            task,
            echo,
        }
    }

    impl Running {
        async fn stop(self) {
            self.shutdown.cancel();
            tokio::time::timeout(Duration::from_secs(10), self.task)
                .await
                .expect("the listener stops")
                .unwrap();
        }
    }

    async fn read_all(stream: &mut TcpStream) -> String {
        let mut out = Vec::new();
        tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut out))
            .await
            .expect("the server closes the connection")
            .unwrap();
        String::from_utf8_lossy(&out).into_owned()
    }

    #[tokio::test]
    async fn pipelined_requests_are_answered_in_order_and_close_ends_the_connection() {
        let server = start(BedrockConfig::default()).await;
        let mut stream = TcpStream::connect(server.addr).await.unwrap();
        stream
            .write_all(b"GetJob\r\nname: a\r\n\r\nquery / HTTP/1.1\nname: b\n\nX\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let text = read_all(&mut stream).await;
        assert_eq!(
            text,
            "200 OK\r\nContent-Length: 28\r\n\r\n{\"verb\":\"GetJob\",\"name\":\"a\"}\
             200 OK\r\nContent-Length: 27\r\n\r\n{\"verb\":\"query\",\"name\":\"b\"}\
             200 OK\r\nConnection: close\r\nContent-Length: 22\r\n\r\n{\"verb\":\"X\",\"name\":\"\"}"
        );
        server.stop().await;
    }

    #[tokio::test]
    async fn garbage_and_oversized_requests_get_an_error_and_a_closed_connection() {
        let config = BedrockConfig {
            frame: FrameLimits {
                max_header_bytes: 128,
                max_body_bytes: 16,
            },
            ..BedrockConfig::default()
        };
        let server = start(config).await;
        for (input, status) in [
            (
                &b"X\r\nContent-Length: 99\r\n\r\n"[..],
                "413 Request body larger than 16 bytes",
            ),
            (
                &[0xffu8; 300][..],
                "413 Request headers larger than 128 bytes",
            ),
            (&b"\r\n\r\n"[..], "400 Missing method line"),
        ] {
            let mut stream = TcpStream::connect(server.addr).await.unwrap();
            stream.write_all(input).await.unwrap();
            let text = read_all(&mut stream).await;
            assert!(text.starts_with(status), "{text:?}");
            assert!(text.contains("Connection: close\r\n"), "{text:?}");
        }
        // The listener still serves.
        let mut stream = TcpStream::connect(server.addr).await.unwrap();
        stream
            .write_all(b"Ping\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        assert!(read_all(&mut stream).await.starts_with("200 OK"));
        server.stop().await;
    }

    #[tokio::test]
    async fn a_slow_client_is_cut_off_without_holding_up_others() {
        let config = BedrockConfig {
            request_timeout: Duration::from_millis(300),
            ..BedrockConfig::default()
        };
        let server = start(config).await;
        let mut slow = TcpStream::connect(server.addr).await.unwrap();
        slow.write_all(b"GetJob\r\nname: a").await.unwrap();
        // Meanwhile another client is served.
        let mut quick = TcpStream::connect(server.addr).await.unwrap();
        quick
            .write_all(b"Ping\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        assert!(read_all(&mut quick).await.starts_with("200 OK"));
        assert!(read_all(&mut slow).await.starts_with("408 Request timeout"));
        server.stop().await;
    }

    #[tokio::test]
    async fn shutdown_answers_a_waiting_command_and_closes_idle_connections() {
        let server = start(BedrockConfig::default()).await;
        let mut idle = TcpStream::connect(server.addr).await.unwrap();
        let mut half_sent = TcpStream::connect(server.addr).await.unwrap();
        half_sent.write_all(b"GetJob\r\nname: a").await.unwrap();
        let mut waiting = TcpStream::connect(server.addr).await.unwrap();
        waiting.write_all(b"Sleep\r\n\r\n").await.unwrap();
        server.echo.sleeping.notified().await;
        server.shutdown.cancel();
        assert!(
            read_all(&mut waiting).await.starts_with("200 Woke"),
            "the waiting command is answered"
        );
        assert_eq!(read_all(&mut idle).await, "");
        assert_eq!(read_all(&mut half_sent).await, "", "not left to time out");
        server.stop().await;
    }

    #[tokio::test]
    async fn a_waiting_command_hears_when_its_client_goes_away() {
        let server = start(BedrockConfig::default()).await;
        let mut waiting = TcpStream::connect(server.addr).await.unwrap();
        waiting.write_all(b"Sleep\r\n\r\n").await.unwrap();
        server.echo.sleeping.notified().await;
        drop(waiting);
        server.echo.abandoned.notified().await;
        server.stop().await;
    }

    #[tokio::test]
    async fn a_client_that_half_closes_after_sending_still_gets_its_answers() {
        let server = start(BedrockConfig::default()).await;
        let mut stream = TcpStream::connect(server.addr).await.unwrap();
        stream.write_all(b"A\r\n\r\nB\r\n\r\n").await.unwrap();
        stream.shutdown().await.unwrap();
        let text = read_all(&mut stream).await;
        assert!(text.contains("\"verb\":\"A\""), "{text:?}");
        assert!(text.contains("\"verb\":\"B\""), "{text:?}");
        server.stop().await;
    }

    #[tokio::test]
    async fn a_slow_client_gets_one_deadline_for_the_whole_request() {
        let config = BedrockConfig {
            request_timeout: Duration::from_millis(400),
            ..BedrockConfig::default()
        };
        let server = start(config).await;
        let mut slow = TcpStream::connect(server.addr).await.unwrap();
        // A byte well inside the timeout each time, but never a whole request.
        let trickle = async {
            for byte in b"GetJob\r\nname: abcdefghij" {
                if slow.write_all(&[*byte]).await.is_err() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        };
        let _ = tokio::time::timeout(Duration::from_secs(3), trickle).await;
        assert!(read_all(&mut slow).await.starts_with("408 Request timeout"));
        server.stop().await;
    }

    #[tokio::test]
    async fn jobs_handed_to_a_client_that_left_are_given_back() {
        let server = start(BedrockConfig::default()).await;
        let client = TcpStream::connect(server.addr).await.unwrap();
        let mut client = client.into_std().unwrap();
        std::io::Write::write_all(&mut client, b"Sleep\r\n\r\nTake\r\n\r\n").unwrap();
        server.echo.sleeping.notified().await;
        // The client is gone while Sleep runs (closed, not half-closed); Take then runs for nobody, and the reset
        // that answers its bytes gives the job back.
        drop(client);
        server.echo.abandoned.notified().await;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while server.echo.undelivered.lock().unwrap().is_empty() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the job never came back"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(*server.echo.undelivered.lock().unwrap(), [cairn::JobId(7)]);
        server.stop().await;
    }

    #[tokio::test]
    async fn jobs_handed_to_a_client_that_half_closed_reach_it() {
        let server = start(BedrockConfig::default()).await;
        let mut client = TcpStream::connect(server.addr).await.unwrap();
        // As `printf 'GetJob…' | nc` sends it: the request, then the end of what it will send.
        client.write_all(b"Take\r\n\r\n").await.unwrap();
        client.shutdown().await.unwrap();
        let text = read_all(&mut client).await;
        assert!(text.starts_with("200 Taken"), "{text:?}");
        tokio::time::sleep(DELIVERY_CHECK * 2).await;
        assert!(server.echo.undelivered.lock().unwrap().is_empty());
        server.stop().await;
    }

    #[tokio::test]
    async fn beyond_the_connection_limit_clients_are_told_and_closed() {
        let server = start_within(BedrockConfig::default(), ConnectionBudget::new(1)).await;
        // The only connection has a command under way, so it is not closed to make room.
        let mut first = TcpStream::connect(server.addr).await.unwrap();
        first.write_all(b"Sleep\r\n\r\n").await.unwrap();
        server.echo.sleeping.notified().await;
        let mut second = TcpStream::connect(server.addr).await.unwrap();
        assert!(
            read_all(&mut second)
                .await
                .starts_with("503 Too many connections")
        );
        server.shutdown.cancel();
        assert!(read_all(&mut first).await.starts_with("200 Woke"));
        server.stop().await;
    }

    #[tokio::test]
    async fn beyond_the_connection_limit_the_longest_idle_connection_makes_room() {
        let server = start_within(BedrockConfig::default(), ConnectionBudget::new(2)).await;
        let mut oldest = TcpStream::connect(server.addr).await.unwrap();
        let mut newer = TcpStream::connect(server.addr).await.unwrap();
        // A request on each, the oldest's last, puts the oldest behind the newer in the idle order.
        for stream in [&mut newer, &mut oldest] {
            stream.write_all(b"Ping\r\n\r\n").await.unwrap();
            let mut answer = [0u8; 64];
            let n = stream.read(&mut answer).await.unwrap();
            assert!(answer[..n].starts_with(b"200 OK"));
        }
        let mut newcomer = TcpStream::connect(server.addr).await.unwrap();
        assert_eq!(read_all(&mut newer).await, "", "closed without a word");
        newcomer
            .write_all(b"Ping\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        assert!(read_all(&mut newcomer).await.starts_with("200 OK"));
        oldest
            .write_all(b"Ping\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        assert!(read_all(&mut oldest).await.starts_with("200 OK"));
        server.stop().await;
    }
}
