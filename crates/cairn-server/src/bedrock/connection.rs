//! The Bedrock listener and its connections: accept, read requests (pipelined, in order), run each through the
//! [`Commands`], write the response, and close on `Connection: close`, on a framing error, at the limits, or at
//! shutdown. Every connection is its own task, so a slow or hostile client holds up nobody else.
//!
//! What a command means is not decided here: see `Commands`.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::bedrock::frame::{FrameLimits, Request, RequestReader, Response};

/// The limits of the Bedrock listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BedrockConfig {
    /// Request size limits.
    pub frame: FrameLimits,
    /// A request that has started arriving must be complete within this long (a slow client is cut off).
    pub request_timeout: Duration,
    /// An idle connection (no request under way) is closed after this long.
    pub idle_timeout: Duration,
    /// At most this many connections at once; more are answered `503` and closed.
    pub max_connections: usize,
}

impl Default for BedrockConfig {
    fn default() -> Self {
        BedrockConfig {
            frame: FrameLimits::default(),
            request_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(300),
            max_connections: 10_000,
        }
    }
}

/// What a running command may watch.
#[derive(Debug, Clone, Default)]
pub struct Signals {
    /// Cancelled when the server starts shutting down: a command that waits should answer then.
    pub shutdown: CancellationToken,
    /// Cancelled when the client closes its side of the connection while the command runs: a command that waits
    /// for a job should stop waiting (Bedrock aborts such a command). A client that only half-closed after
    /// sending still gets the answer, so quick commands simply finish.
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

/// Accepts connections until `shutdown`, then waits for open connections to finish their current request.
///
/// # Errors
/// None at present: failed accepts are logged and retried.
pub async fn serve(
    listener: TcpListener,
    commands: Arc<dyn Commands>,
    config: BedrockConfig,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let slots = Arc::new(Semaphore::new(config.max_connections));
    let mut connections = JoinSet::new();
    loop {
        let accepted = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => accepted,
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
        };
        let (mut stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of descriptors, most likely: wait a little rather than spin.
                tracing::warn!(error = %e, "accepting a Bedrock connection failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            connections.spawn(async move {
                let busy = close(Response::status("503 Too many connections"));
                let _ = tokio::time::timeout(
                    Duration::from_secs(1),
                    stream.write_all(&busy.to_bytes()),
                )
                .await;
            });
            continue;
        };
        let (commands, shutdown) = (commands.clone(), shutdown.clone());
        connections.spawn(async move {
            let _slot = slot;
            if let Err(e) = handle(stream, commands.as_ref(), &config, &shutdown).await {
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

/// Whether the request asks for the connection to close after it.
fn wants_close(request: &Request) -> bool {
    request
        .headers
        .get("connection")
        .is_some_and(|v| v.eq_ignore_ascii_case("close"))
}

/// Serves one connection: requests in order, one at a time.
async fn handle(
    mut stream: TcpStream,
    commands: &dyn Commands,
    config: &BedrockConfig,
    shutdown: &CancellationToken,
) -> std::io::Result<()> {
    let mut reader = RequestReader::new(config.frame);
    let mut buffer: Vec<u8> = Vec::with_capacity(1024);
    // The client closed its side: finish what it sent, then close.
    let mut eof = false;
    let mut chunk = vec![0u8; 16 * 1024];
    loop {
        // A request already in the buffer (pipelined) runs before anything more is read.
        match reader.next(&buffer) {
            Err(e) => {
                let response = close(Response::status(e.status_line()));
                stream.write_all(&response.to_bytes()).await?;
                return Ok(());
            }
            Ok(Some((request, used))) => {
                buffer.drain(..used);
                let closing = wants_close(&request);
                let (response, client_gone) =
                    run_watching_peer(&mut stream, &mut buffer, commands, request, shutdown, eof)
                        .await;
                eof |= client_gone;
                let response = if closing { close(response) } else { response };
                // A client that closed its side may still read (it may only have half-closed): the answer goes out
                // anyway, and so do those of the requests it sent before closing.
                if let Err(e) = stream.write_all(&response.to_bytes()).await {
                    commands.undelivered(&response);
                    return Err(e);
                }
                if closing {
                    stream.shutdown().await?;
                    return Ok(());
                }
                continue;
            }
            Ok(None) => {}
        }
        if eof {
            stream.shutdown().await?;
            return Ok(());
        }
        // Between requests, wait for the next one (or shutdown); within one, a slow client gets a deadline.
        let limit = if buffer.is_empty() {
            config.idle_timeout
        } else {
            config.request_timeout
        };
        let read = tokio::select! {
            () = shutdown.cancelled(), if buffer.is_empty() => return Ok(()),
            read = tokio::time::timeout(limit, stream.read(&mut chunk)) => read,
        };
        match read {
            Err(_) if buffer.is_empty() => return Ok(()),
            Err(_) => {
                let response = close(Response::status("408 Request timeout"));
                stream.write_all(&response.to_bytes()).await?;
                return Ok(());
            }
            Ok(Ok(0)) => return Ok(()),
            Ok(Ok(n)) => buffer.extend_from_slice(&chunk[..n]),
            Ok(Err(e)) => return Err(e),
        }
    }
}

/// Runs a command while watching the connection: bytes that arrive meanwhile (the next pipelined request) are
/// kept, and if the client closes its side, the command is told (and nothing more is read). Returns the response
/// and whether the client went away.
async fn run_watching_peer(
    stream: &mut TcpStream,
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
    }

    impl Commands for Echo {
        fn run<'a>(
            &'a self,
            request: Request,
            signals: &'a Signals,
        ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Response> + Send + 'a>> {
            Box::pin(async move {
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
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let shutdown = CancellationToken::new();
        let echo = Arc::new(Echo::default());
        let task = tokio::spawn({
            let (shutdown, echo) = (shutdown.clone(), echo.clone());
            async move {
                serve(listener, echo, config, shutdown).await.unwrap();
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
        let mut waiting = TcpStream::connect(server.addr).await.unwrap();
        waiting.write_all(b"Sleep\r\n\r\n").await.unwrap();
        server.echo.sleeping.notified().await;
        server.shutdown.cancel();
        assert!(
            read_all(&mut waiting).await.starts_with("200 Woke"),
            "the waiting command is answered"
        );
        assert_eq!(read_all(&mut idle).await, "");
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
    async fn beyond_the_connection_limit_clients_are_told_and_closed() {
        let config = BedrockConfig {
            max_connections: 1,
            ..BedrockConfig::default()
        };
        let server = start(config).await;
        // Connections are accepted in the order they were made, so the first takes the only slot.
        let first = TcpStream::connect(server.addr).await.unwrap();
        let mut second = TcpStream::connect(server.addr).await.unwrap();
        assert!(
            read_all(&mut second)
                .await
                .starts_with("503 Too many connections")
        );
        drop(first);
        server.stop().await;
    }
}
