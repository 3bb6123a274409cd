//! [`ConnectionBudget`]: one cap on the connections the HTTP and Bedrock listeners hold together, sized from the
//! process's open-file limit so that the server never runs out of descriptors for its database or for the
//! connection that matters.
//!
//! When the budget is full and a connection arrives, the connection idle the longest is closed to make room (one
//! with no request under way: between requests, or with a request still arriving). A connection with a request
//! under way, a parked long poll included, is never closed for room; when every connection has one, the new
//! connection is refused with a clear answer and closed. What counts as a request under way is for each listener
//! to say, through its [`Slot`]; this module does not read sockets, beyond answering refused connections.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use std::net::SocketAddr;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// Descriptors left out of the budget for everything else the server opens: standard streams, the runtime's own,
/// the listeners, the database's files and sessions (the writer, the syncer, the read pool), and refused
/// connections on their way out ([`REFUSALS_AT_ONCE`]).
pub const RESERVED_DESCRIPTORS: u64 = 128;

/// The smallest budget the open-file limit gives, however low it is.
const MIN_CONNECTIONS: u64 = 16;

/// The largest budget the open-file limit gives (when it is unlimited, say).
const MAX_CONNECTIONS: u64 = 1 << 20;

/// How many refused connections may wait at once to be answered properly; beyond that a refusal is written and the
/// connection closed at once.
pub const REFUSALS_AT_ONCE: usize = 32;

/// How long a refused connection waits for the client's request, for its answer to be written, and for the
/// client to close after it (see [`ConnectionBudget::refuse`]).
const REFUSAL_LINGER: Duration = Duration::from_secs(1);

/// How often at most a full budget or a failing accept is logged.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// The process's open-file limit (`RLIMIT_NOFILE`'s soft limit), when it can be read.
pub fn open_file_limit() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes the struct passed to it.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0 {
        Some(limit.rlim_cur)
    } else {
        None
    }
}

/// The most connections the open-file limit leaves room for: the limit less [`RESERVED_DESCRIPTORS`] (at least
/// 16); 1,024 less the reserve when the limit cannot be read.
pub fn connections_for_open_file_limit() -> usize {
    let limit = open_file_limit().unwrap_or(1024);
    let budget = limit
        .saturating_sub(RESERVED_DESCRIPTORS)
        .clamp(MIN_CONNECTIONS, MAX_CONNECTIONS);
    usize::try_from(budget).unwrap_or(usize::MAX)
}

/// The connections open on both listeners, and the choice made when there is no room for another.
pub struct ConnectionBudget {
    capacity: usize,
    state: Mutex<State>,
    refusals: Arc<Semaphore>,
}

struct State {
    open: usize,
    /// Stamps the order in which connections became idle.
    next_order: u64,
    /// The connections with no request under way, the longest idle first, each with the token that closes it.
    idle: BTreeMap<u64, CancellationToken>,
    closed_for_room: u64,
    refused: u64,
    last_warned: Option<Instant>,
}

impl State {
    /// Whether a warning is due (at most one every [`WARN_EVERY`]).
    fn warning_due(&mut self) -> bool {
        let now = Instant::now();
        let due = self
            .last_warned
            .is_none_or(|at| now.duration_since(at) >= WARN_EVERY);
        if due {
            self.last_warned = Some(now);
        }
        due
    }
}

impl std::fmt::Debug for ConnectionBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectionBudget")
            .field("capacity", &self.capacity)
            .field("open", &self.open())
            .finish()
    }
}

impl ConnectionBudget {
    /// A budget of `capacity` connections (at least one).
    pub fn new(capacity: usize) -> Arc<ConnectionBudget> {
        Arc::new(ConnectionBudget {
            capacity: capacity.max(1),
            state: Mutex::new(State {
                open: 0,
                next_order: 1,
                idle: BTreeMap::new(),
                closed_for_room: 0,
                refused: 0,
                last_warned: None,
            }),
            refusals: Arc::new(Semaphore::new(REFUSALS_AT_ONCE)),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .expect("the budget's lock is never held across a panic")
    }

    /// The most connections at once.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The connections open now.
    pub fn open(&self) -> usize {
        self.lock().open
    }

    /// The connections open now with a request under way.
    pub fn busy(&self) -> usize {
        let state = self.lock();
        state.open - state.idle.len()
    }

    /// A slot for a new connection, which starts idle: room to spare, or the room of the connection idle the
    /// longest, which is told to close. `None` when every connection has a request under way: refuse this one.
    pub fn admit(self: &Arc<Self>) -> Option<Slot> {
        let mut warn_closed = None;
        let mut state = self.lock();
        if state.open >= self.capacity {
            let Some((_, closing)) = state.idle.pop_first() else {
                state.refused += 1;
                let (refused, warn) = (state.refused, state.warning_due());
                drop(state);
                if warn {
                    tracing::warn!(
                        capacity = self.capacity,
                        refused,
                        "refusing connections: every connection has a request under way (see max_connections)"
                    );
                }
                return None;
            };
            closing.cancel();
            state.open -= 1;
            state.closed_for_room += 1;
            if state.warning_due() {
                warn_closed = Some(state.closed_for_room);
            }
        }
        state.open += 1;
        let order = state.next_order;
        state.next_order += 1;
        let closing = CancellationToken::new();
        state.idle.insert(order, closing.clone());
        drop(state);
        if let Some(closed) = warn_closed {
            tracing::warn!(
                capacity = self.capacity,
                closed,
                "the connection budget is full: closing idle connections to make room (see max_connections)"
            );
        }
        Some(Slot {
            budget: self.clone(),
            order: AtomicU64::new(order),
            closing,
        })
    }

    /// Closes the connection idle the longest, if there is one (the process ran out of descriptors).
    fn make_room(&self) -> bool {
        let mut state = self.lock();
        match state.idle.pop_first() {
            Some((_, closing)) => {
                closing.cancel();
                state.open -= 1;
                state.closed_for_room += 1;
                true
            }
            None => false,
        }
    }

    /// What a listener does when accepting fails: a connection that went away before it was accepted is
    /// nothing; otherwise (out of descriptors, most likely) the connection idle the longest is closed, and the
    /// listener waits a moment, so that it neither stops nor spins.
    pub async fn after_accept_error(&self, error: &std::io::Error, listener: &'static str) {
        use std::io::ErrorKind;
        if matches!(
            error.kind(),
            ErrorKind::ConnectionAborted | ErrorKind::ConnectionReset | ErrorKind::Interrupted
        ) {
            return;
        }
        let out_of_descriptors = matches!(error.raw_os_error(), Some(libc::EMFILE | libc::ENFILE));
        let made_room = out_of_descriptors && self.make_room();
        if self.lock().warning_due() {
            tracing::warn!(listener, error = %error, made_room, "accepting a connection failed");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    /// The next connection `listener` accepts that there is room for, with its slot; `None` once `shutdown` is
    /// cancelled. Meanwhile: connections that ended are reaped from `connections`, a failed accept is waited out
    /// ([`after_accept_error`](Self::after_accept_error)), and a connection there is no room for is answered
    /// `refusal` and closed. Both listeners take their connections this way; `name` names one in the logs.
    pub async fn next_connection(
        self: &Arc<Self>,
        listener: &TcpListener,
        connections: &mut JoinSet<()>,
        shutdown: &CancellationToken,
        refusal: &Arc<[u8]>,
        name: &'static str,
    ) -> Option<(TcpStream, SocketAddr, Slot)> {
        loop {
            let accepted = tokio::select! {
                () = shutdown.cancelled() => return None,
                accepted = listener.accept() => accepted,
                Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            };
            let (stream, peer) = match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    self.after_accept_error(&e, name).await;
                    continue;
                }
            };
            // Small answers must not wait for the peer's delayed ACK (Nagle's algorithm): without TCP_NODELAY, a
            // response written in two pieces can stall for 40 ms.
            if let Err(e) = stream.set_nodelay(true) {
                tracing::debug!(error = %e, "could not set TCP_NODELAY on a connection");
            }
            match self.admit() {
                Some(slot) => return Some((stream, peer, slot)),
                None => self.refuse(stream, refusal.clone()),
            }
        }
    }

    /// Answers a connection there is no room for with `answer` and closes it.
    ///
    /// The answer waits a moment for the client's request to start arriving, so that it answers that request: an
    /// HTTP client that hears before it speaks takes the answer for a broken connection (hyper's "unexpected
    /// message"). Then the connection lingers until the client closes, so that the rest of its request does not
    /// turn the close into a reset that destroys the answer in flight. At most [`REFUSALS_AT_ONCE`] wait so; beyond
    /// that the answer is written and the connection closed at once.
    pub fn refuse(&self, stream: TcpStream, answer: Arc<[u8]>) {
        let Ok(permit) = self.refusals.clone().try_acquire_owned() else {
            if let Ok(stream) = stream.into_std() {
                // A new connection's send buffer is empty, so the answer goes out whole without waiting (the
                // socket is non-blocking: a write that would wait is given up).
                let _ = (&stream).write_all(&answer);
            }
            return;
        };
        tokio::spawn(async move {
            let _permit = permit;
            let mut stream = stream;
            let mut discard = [0u8; 4096];
            let _ = tokio::time::timeout(REFUSAL_LINGER, stream.read(&mut discard)).await;
            if let Ok(Ok(())) =
                tokio::time::timeout(REFUSAL_LINGER, stream.write_all(&answer)).await
            {
                let _ = stream.shutdown().await;
                let drain = async { while let Ok(1..) = stream.read(&mut discard).await {} };
                let _ = tokio::time::timeout(REFUSAL_LINGER, drain).await;
            }
        });
    }
}

/// One connection's place in the budget, given back when dropped. A listener says when a request is under way
/// ([`Slot::busy`]) and when the connection waits for one ([`Slot::idle`]), and closes the connection when
/// [`Slot::closed_for_room`] completes.
pub struct Slot {
    budget: Arc<ConnectionBudget>,
    /// The connection's place among the idle ones; 0 while a request is under way. Changed under the budget's
    /// lock.
    order: AtomicU64,
    closing: CancellationToken,
}

impl std::fmt::Debug for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slot")
            .field("idle", &(self.order.load(Ordering::Relaxed) != 0))
            .field("closed_for_room", &self.closing.is_cancelled())
            .finish()
    }
}

impl Slot {
    /// A request is under way: this connection is not closed for room until it is idle again.
    pub fn busy(&self) {
        let mut state = self.budget.lock();
        let order = self.order.swap(0, Ordering::Relaxed);
        if order != 0 && !self.closing.is_cancelled() {
            state.idle.remove(&order);
        }
    }

    /// The connection waits for a request from now on: it goes to the back of the idle ones (also when a request
    /// starts arriving, so that connections that have shown no sign of life for the longest go first).
    pub fn idle(&self) {
        let mut state = self.budget.lock();
        if self.closing.is_cancelled() {
            return;
        }
        let order = state.next_order;
        state.next_order += 1;
        let previous = self.order.swap(order, Ordering::Relaxed);
        if previous != 0 {
            state.idle.remove(&previous);
        }
        state.idle.insert(order, self.closing.clone());
    }

    /// Completes when the connection was chosen to close to make room for another.
    pub async fn closed_for_room(&self) {
        self.closing.cancelled().await;
    }

    /// Whether the connection was chosen to close to make room for another.
    pub fn is_closed_for_room(&self) -> bool {
        self.closing.is_cancelled()
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut state = self.budget.lock();
        // A connection closed for room was counted out when it was chosen.
        if self.closing.is_cancelled() {
            return;
        }
        let order = self.order.load(Ordering::Relaxed);
        if order != 0 {
            state.idle.remove(&order);
        }
        state.open -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_budget_closes_the_longest_idle_connection_first() {
        let budget = ConnectionBudget::new(3);
        let first = budget.admit().unwrap();
        let second = budget.admit().unwrap();
        let third = budget.admit().unwrap();
        // The first shows a sign of life: the second is now the longest idle.
        first.idle();
        let fourth = budget.admit().unwrap();
        assert!(second.is_closed_for_room());
        assert!(!first.is_closed_for_room() && !third.is_closed_for_room());
        assert_eq!(budget.open(), 3);
        drop(second);
        assert_eq!(
            budget.open(),
            3,
            "a connection closed for room was counted out already"
        );
        let _fifth = budget.admit().unwrap();
        assert!(third.is_closed_for_room());
        drop((first, fourth));
        assert_eq!(budget.open(), 1);
    }

    #[test]
    fn connections_with_a_request_under_way_are_never_closed_for_room() {
        let budget = ConnectionBudget::new(2);
        let polling = budget.admit().unwrap();
        polling.busy();
        let idle = budget.admit().unwrap();
        let newcomer = budget.admit().unwrap();
        assert!(idle.is_closed_for_room() && !polling.is_closed_for_room());
        newcomer.busy();
        assert!(
            budget.admit().is_none(),
            "every connection is busy: refused"
        );
        // A request ends: its connection is idle again, and the next newcomer takes its place.
        polling.idle();
        let _latest = budget.admit().unwrap();
        assert!(polling.is_closed_for_room());
        drop((idle, polling));
        assert_eq!(budget.open(), 2);
    }

    #[test]
    fn dropped_slots_give_their_room_back() {
        let budget = ConnectionBudget::new(1);
        let slot = budget.admit().unwrap();
        slot.busy();
        assert!(budget.admit().is_none());
        drop(slot);
        assert_eq!(budget.open(), 0);
        assert!(budget.admit().is_some());
    }

    #[test]
    fn the_budget_follows_the_open_file_limit() {
        let limit = open_file_limit().expect("the limit can be read");
        let expected = limit
            .saturating_sub(RESERVED_DESCRIPTORS)
            .clamp(MIN_CONNECTIONS, MAX_CONNECTIONS);
        assert_eq!(connections_for_open_file_limit() as u64, expected);
    }
}
