//! Sessions kept for reuse: taken (or opened when none is idle) and given back, up to a limit kept idle, and at most
//! a limit open at once: a read beyond it waits for a session to come back. Every read runs on a blocking thread of
//! its own, and without the cap a burst of reads opened as many sessions as there were threads (hundreds), each a
//! database connection and its descriptors, past what the server leaves for its database (`RESERVED_DESCRIPTORS` in
//! `cairn-server`'s connection budget).

use std::ops::{Deref, DerefMut};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::error::{Error, ErrorKind, Result};

/// The longest a read waits for a session when `max_open` are in use: past it the read is refused as the queue
/// being busy, rather than waiting with no end.
const WAIT_FOR_SESSION: Duration = Duration::from_secs(30);

pub(crate) struct Pool<T> {
    state: Mutex<State<T>>,
    /// Rung when a session comes back or is closed.
    returned: Condvar,
    keep: usize,
    max_open: usize,
}

struct State<T> {
    idle: Vec<T>,
    /// Sessions open: idle, in use, or being opened.
    open: usize,
}

/// A session taken from a [`Pool`]: given back or discarded by its holder, and discarded if dropped (a read that
/// panicked), so that it is never counted open and lost.
pub(crate) struct Pooled<'a, T> {
    pool: &'a Pool<T>,
    session: Option<T>,
}

impl<T> Pool<T> {
    /// A pool that keeps at most `keep` idle sessions, and has at most `max_open` open (at least one, and at least
    /// `keep`).
    pub fn new(keep: usize, max_open: usize) -> Self {
        Pool {
            state: Mutex::new(State {
                idle: Vec::new(),
                open: 0,
            }),
            returned: Condvar::new(),
            keep,
            max_open: max_open.max(keep).max(1),
        }
    }

    /// An idle session, or a new one from `open`, waiting while `max_open` are open (for up to
    /// [`WAIT_FOR_SESSION`]). Blocks: call it on a thread that may.
    ///
    /// # Errors
    /// `open`'s; [`ErrorKind::Unavailable`] when no session came free in time.
    pub fn take(&self, open: impl FnOnce() -> Result<T>) -> Result<Pooled<'_, T>> {
        let give_up = Instant::now() + WAIT_FOR_SESSION;
        let mut state = self.lock();
        loop {
            if let Some(session) = state.idle.pop() {
                return Ok(self.pooled(session));
            }
            if state.open < self.max_open {
                return self.open_counted(state, open);
            }
            let left = give_up.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Error::new(
                    ErrorKind::Unavailable,
                    format!(
                        "every one of the {} read connections was busy for {WAIT_FOR_SESSION:?}",
                        self.max_open
                    ),
                ));
            }
            state = self
                .returned
                .wait_timeout(state, left)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
    }

    /// The idle sessions, taken out (to close them).
    pub fn drain(&mut self) -> Vec<T> {
        let state = self
            .state
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        state.open -= state.idle.len();
        std::mem::take(&mut state.idle)
    }

    fn pooled(&self, session: T) -> Pooled<'_, T> {
        Pooled {
            pool: self,
            session: Some(session),
        }
    }

    /// Opens a session, counted from now; the lock is not held while it opens.
    fn open_counted(
        &self,
        mut state: MutexGuard<'_, State<T>>,
        open: impl FnOnce() -> Result<T>,
    ) -> Result<Pooled<'_, T>> {
        state.open += 1;
        drop(state);
        match open() {
            Ok(session) => Ok(self.pooled(session)),
            Err(e) => {
                self.closed();
                Err(e)
            }
        }
    }

    /// One session fewer open.
    fn closed(&self) {
        self.lock().open -= 1;
        self.returned.notify_one();
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl<'a, T> Pooled<'a, T> {
    /// Keeps the session for reuse, unless enough are idle already (it is then closed).
    pub fn give_back(mut self) {
        let session = self.session.take().expect("held until given back");
        let mut state = self.pool.lock();
        if state.idle.len() < self.pool.keep {
            state.idle.push(session);
        } else {
            state.open -= 1;
            drop(state);
            drop(session);
        }
        self.pool.returned.notify_one();
    }

    /// Closes the session rather than keep it (it broke), making room for another.
    pub fn discard(mut self) {
        drop(self.session.take());
        self.pool.closed();
    }

    /// A new session from `open` in place of this one, which is closed (it broke): counted as one.
    pub fn replace(mut self, open: impl FnOnce() -> Result<T>) -> Result<Pooled<'a, T>> {
        drop(self.session.take());
        let pool = self.pool;
        let mut state = pool.lock();
        state.open -= 1;
        pool.open_counted(state, open)
    }
}

impl<T> Deref for Pooled<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.session.as_ref().expect("held until given back")
    }
}

impl<T> DerefMut for Pooled<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        self.session.as_mut().expect("held until given back")
    }
}

impl<T> Drop for Pooled<'_, T> {
    fn drop(&mut self) {
        if let Some(session) = self.session.take() {
            drop(session);
            self.pool.closed();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    /// A session that counts how many are open at once.
    struct Counted(Arc<(AtomicUsize, AtomicUsize)>);

    impl Counted {
        fn open(counts: &Arc<(AtomicUsize, AtomicUsize)>) -> Counted {
            let now = counts.0.fetch_add(1, Ordering::SeqCst) + 1;
            counts.1.fetch_max(now, Ordering::SeqCst);
            Counted(counts.clone())
        }
    }

    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.0.fetch_sub(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_burst_of_takers_opens_no_more_than_the_cap_and_keeps_no_more_than_the_limit() {
        let pool = Arc::new(Pool::new(2, 4));
        let counts = Arc::new((AtomicUsize::new(0), AtomicUsize::new(0)));
        let takers: Vec<_> = (0..32)
            .map(|i| {
                let (pool, counts) = (pool.clone(), counts.clone());
                std::thread::spawn(move || {
                    let session = pool.take(|| Ok(Counted::open(&counts))).unwrap();
                    std::thread::sleep(Duration::from_millis(5));
                    match i % 4 {
                        0 => session.discard(),
                        1 => session
                            .replace(|| Ok(Counted::open(&counts)))
                            .unwrap()
                            .give_back(),
                        // A read that panicked: its session is dropped, and counted closed.
                        2 => drop(session),
                        _ => session.give_back(),
                    }
                })
            })
            .collect();
        for taker in takers {
            taker.join().unwrap();
        }
        assert!(
            counts.1.load(Ordering::SeqCst) <= 4,
            "never more than the cap open"
        );
        assert!(
            counts.0.load(Ordering::SeqCst) <= 2,
            "no more than the limit kept"
        );
        assert_eq!(pool.lock().open, counts.0.load(Ordering::SeqCst));
    }

    #[test]
    fn a_session_that_cannot_be_opened_leaves_room_for_the_next() {
        let pool: Pool<()> = Pool::new(0, 1);
        assert!(pool.take(|| Err(crate::Error::closed())).is_err());
        pool.take(|| Ok(())).unwrap().give_back();
    }
}
