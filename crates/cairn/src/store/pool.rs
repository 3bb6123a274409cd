//! Sessions kept for reuse: taken (or opened when none is idle) and given back, up to a limit.

use std::sync::Mutex;

use crate::error::Result;

pub(crate) struct Pool<T> {
    idle: Mutex<Vec<T>>,
    keep: usize,
}

impl<T> Pool<T> {
    /// A pool that keeps at most `keep` idle sessions.
    pub fn new(keep: usize) -> Self {
        Pool {
            idle: Mutex::new(Vec::new()),
            keep,
        }
    }

    /// An idle session, or a new one from `open`.
    pub fn take(&self, open: impl FnOnce() -> Result<T>) -> Result<T> {
        let pooled = self.idle.lock().expect("pool lock is never poisoned").pop();
        match pooled {
            Some(session) => Ok(session),
            None => open(),
        }
    }

    /// Keeps `session` for reuse, unless enough are idle already.
    pub fn give_back(&self, session: T) {
        let mut idle = self.idle.lock().expect("pool lock is never poisoned");
        if idle.len() < self.keep {
            idle.push(session);
        }
    }

    /// The idle sessions, taken out (to close them).
    pub fn drain(&mut self) -> Vec<T> {
        std::mem::take(
            self.idle
                .get_mut()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }
}
