//! The HTTP listener and its connections, guarded as the Bedrock listener is: connections are admitted within the
//! shared [`ConnectionBudget`] (refused with a `503` when every one has a request under way), a request must arrive
//! whole, headers and body, within the request timeout of its first byte (a new connection's first request, of the
//! connection), and a connection with no request under way is closed after the idle timeout. At shutdown, or when
//! chosen to make room, a connection closes at once unless a request is under way, which is answered first.
//!
//! What a request means is the router's business; this module only watches the bytes and the request's progress.
//! hyper's own `header_read_timeout` is not used: its clock starts when the previous response ends, so it would
//! close idle keep-alive connections at the request bound too.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::Request;
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tokio::time::{Instant, Sleep};
use tokio_util::sync::CancellationToken;
use tower_service::Service as _;

use crate::budget::{ConnectionBudget, Slot};
use crate::error::ApiError;
use crate::tls::{Tls, handshake};

/// How long a request and an idle connection may take.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Guards {
    /// A request must arrive whole within this long of its first byte.
    pub request_timeout: Duration,
    /// A connection with no request under way is closed after this long.
    pub idle_timeout: Duration,
}

/// Accepts connections until `shutdown`, then waits for those with a request under way to answer it. With `tls`,
/// each connection is served after its handshake, which must end within the request timeout.
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    budget: Arc<ConnectionBudget>,
    guards: Guards,
    shutdown: CancellationToken,
    tls: Option<Arc<Tls>>,
) {
    let refusal: Arc<[u8]> = refusal().into();
    let mut connections = JoinSet::new();
    while let Some((stream, peer, slot)) = budget
        .next_connection(&listener, &mut connections, &shutdown, &refusal, "http")
        .await
    {
        let (app, shutdown) = (app.clone(), shutdown.clone());
        match &tls {
            None => connections.spawn(serve_connection(stream, app, slot, guards, shutdown)),
            Some(tls) => {
                let acceptor = tls.acceptor();
                connections.spawn(async move {
                    let limit = guards.request_timeout;
                    if let Some(stream) = handshake(acceptor, stream, limit, &shutdown, peer).await
                    {
                        serve_connection(stream, app, slot, guards, shutdown).await;
                    }
                })
            }
        };
    }
    drop(listener);
    while connections.join_next().await.is_some() {}
}

/// The answer to a connection there is no room for: `503` with `Retry-After` and the API's error body
/// ([`ApiError::no_room`]), written by hand: the connection is not served.
fn refusal() -> Vec<u8> {
    let refused = ApiError::no_room();
    let body = serde_json::to_vec(refused.body()).expect("an error body always serializes");
    let mut answer = format!(
        "HTTP/1.1 {}\r\ncontent-type: application/json\r\nretry-after: 1\r\n\
         connection: close\r\ncontent-length: {}\r\n\r\n",
        refused.status(),
        body.len()
    )
    .into_bytes();
    answer.extend_from_slice(&body);
    answer
}

/// Serves one connection until it ends, its deadline passes, it is chosen to make room, or the server shuts down.
async fn serve_connection<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(
    stream: S,
    app: Router,
    slot: Slot,
    guards: Guards,
    shutdown: CancellationToken,
) {
    let activity = Arc::new(Activity::new(slot));
    let io = TokioIo::new(Watched {
        stream,
        activity: activity.clone(),
    });
    let service = {
        let activity = activity.clone();
        hyper::service::service_fn(move |request: Request<Incoming>| {
            let started = activity.request_arrived();
            let ended = ResponseEnd(activity.clone());
            let deadline = started + guards.request_timeout;
            let request = request.map(|body| Body::new(ArrivingBody::new(body, deadline, guards)));
            let call = app.clone().call(request);
            async move {
                let response = call.await.unwrap_or_else(|never| match never {});
                Ok::<_, Infallible>(response.map(|body| Answer {
                    body,
                    _ended: ended,
                }))
            }
        })
    };
    let mut http = hyper::server::conn::http1::Builder::new();
    http.header_read_timeout(None);
    let connection = http.serve_connection(io, service);
    let mut connection = std::pin::pin!(connection);
    let mut closing = false;
    loop {
        tokio::select! {
            served = connection.as_mut() => {
                if let Err(e) = served {
                    tracing::debug!(error = %e, "HTTP connection ended with an error");
                }
                return;
            }
            () = activity.expired(guards) => {
                tracing::debug!("closing an HTTP connection at its deadline: idle, or a request too slow to arrive");
                return;
            }
            () = shutdown.cancelled(), if !closing => {}
            () = activity.slot.closed_for_room(), if !closing => {}
        }
        // Shutting down, or chosen to make room: a request under way is answered first; otherwise there is nothing
        // to wait for.
        if !activity.is_busy() {
            return;
        }
        connection.as_mut().graceful_shutdown();
        closing = true;
    }
}

/// Where a connection stands.
#[derive(Debug, Clone, Copy)]
enum Phase {
    /// Between requests since then.
    Idle(Instant),
    /// A request's first byte (or, for a new connection, the connection) arrived then.
    Arriving(Instant),
    /// A request is with the router, or its response is being written.
    Busy,
}

/// One connection's progress, shared by its socket, its requests and its watchdog (all on the connection's task).
struct Activity {
    slot: Slot,
    phase: Mutex<Phase>,
    /// Wakes the watchdog when a deadline may have come closer.
    changed: Notify,
}

impl Activity {
    fn new(slot: Slot) -> Activity {
        Activity {
            slot,
            phase: Mutex::new(Phase::Arriving(Instant::now())),
            changed: Notify::new(),
        }
    }

    fn phase(&self) -> std::sync::MutexGuard<'_, Phase> {
        self.phase
            .lock()
            .expect("a connection's phase is never held across a panic")
    }

    fn is_busy(&self) -> bool {
        matches!(*self.phase(), Phase::Busy)
    }

    /// Bytes came in: between requests, that is the next request starting to arrive.
    fn bytes_arrived(&self) {
        let mut phase = self.phase();
        if let Phase::Idle(_) = *phase {
            *phase = Phase::Arriving(Instant::now());
            drop(phase);
            self.slot.idle();
            self.changed.notify_one();
        }
    }

    /// A request's head arrived and goes to the router; returns when the request started arriving.
    fn request_arrived(&self) -> Instant {
        let started = match std::mem::replace(&mut *self.phase(), Phase::Busy) {
            Phase::Arriving(since) => since,
            // Read with the previous request (pipelined): it started arriving no later than now.
            Phase::Idle(_) | Phase::Busy => Instant::now(),
        };
        self.slot.busy();
        started
    }

    /// A response was written (or abandoned): the connection waits for the next request.
    fn response_ended(&self) {
        *self.phase() = Phase::Idle(Instant::now());
        self.slot.idle();
        self.changed.notify_one();
    }

    /// When the connection is closed if nothing happens; never while a request is under way (a long poll waits
    /// as long as it likes, and a body that trickles is cut by [`ArrivingBody`]).
    fn deadline(&self, guards: Guards) -> Option<Instant> {
        match *self.phase() {
            Phase::Idle(since) => Some(since + guards.idle_timeout),
            Phase::Arriving(since) => Some(since + guards.request_timeout),
            Phase::Busy => None,
        }
    }

    /// Completes when the connection's deadline has passed.
    async fn expired(&self, guards: Guards) {
        loop {
            match self.deadline(guards) {
                Some(deadline) if deadline <= Instant::now() => return,
                Some(deadline) => tokio::select! {
                    () = tokio::time::sleep_until(deadline) => {}
                    () = self.changed.notified() => {}
                },
                None => self.changed.notified().await,
            }
        }
    }
}

/// The connection's socket (or its TLS stream), telling its [`Activity`] when bytes arrive.
struct Watched<S> {
    stream: S,
    activity: Arc<Activity>,
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let read = Pin::new(&mut this.stream).poll_read(cx, buf);
        if buf.filled().len() > before {
            this.activity.bytes_arrived();
        }
        read
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

/// A request body that must arrive by its request's deadline, however it trickles in.
struct ArrivingBody {
    body: Incoming,
    deadline: Instant,
    request_timeout: Duration,
    /// Set the first time the body has nothing ready, so that a body that arrives with its head costs no timer.
    timer: Option<Pin<Box<Sleep>>>,
}

impl ArrivingBody {
    fn new(body: Incoming, deadline: Instant, guards: Guards) -> ArrivingBody {
        ArrivingBody {
            body,
            deadline,
            request_timeout: guards.request_timeout,
            timer: None,
        }
    }
}

/// A request body that did not arrive in time (`body.rs` answers it `408`).
#[derive(Debug)]
pub(crate) struct TooSlow(Duration);

impl std::fmt::Display for TooSlow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the request did not arrive whole within {:?} of its start (the server's request_timeout)",
            self.0
        )
    }
}

impl std::error::Error for TooSlow {}

impl http_body::Body for ArrivingBody {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        if let Poll::Ready(frame) = Pin::new(&mut this.body).poll_frame(cx) {
            return Poll::Ready(frame.map(|frame| frame.map_err(Into::into)));
        }
        let deadline = this.deadline;
        let timer = this
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(Box::new(TooSlow(this.request_timeout))))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// Tells the connection's [`Activity`] that its request is over when dropped: after the response's last byte, or
/// when the request is abandoned.
struct ResponseEnd(Arc<Activity>);

impl Drop for ResponseEnd {
    fn drop(&mut self) {
        self.0.response_ended();
    }
}

/// A response body that ends its request when hyper is done with it.
struct Answer {
    body: Body,
    _ended: ResponseEnd,
}

impl http_body::Body for Answer {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
