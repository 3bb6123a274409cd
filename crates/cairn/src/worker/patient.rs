//! Recording a job's outcome (finish, retry, fail) through a short outage: a call refused for a reason that passes
//! with time (the queue's database out of reach, restarting, or out of room) is made again, so that a job whose
//! handler succeeded does not run a second time for a blip. The lease bounds it: an outcome sent again after the
//! lease ran out is refused with `LeaseLost`, as it would have been.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use crate::error::{Error, ErrorKind, Result};

/// How long a worker keeps trying to record an outcome.
const PATIENCE: Duration = Duration::from_secs(30);

/// The first wait between tries; each next one is twice as long, up to [`LONGEST_WAIT`].
const FIRST_WAIT: Duration = Duration::from_millis(250);
const LONGEST_WAIT: Duration = Duration::from_secs(4);

/// Whether a call that failed with `e` may succeed if made again in a while: the queue's database was out of
/// reach, restarting, or out of room.
pub(crate) fn is_passing(e: &Error) -> bool {
    matches!(e.kind(), ErrorKind::Unavailable | ErrorKind::StorageFull)
}

/// The tries left to record an outcome: until [`PATIENCE`] runs out, waiting longer after each.
pub(crate) struct Patience {
    give_up_at: Instant,
    wait: Duration,
}

impl Patience {
    pub fn new() -> Patience {
        Patience {
            give_up_at: Instant::now() + PATIENCE,
            wait: FIRST_WAIT,
        }
    }

    /// Whether a call that failed with `e` is worth making again; if so, waits before returning.
    pub async fn again(&mut self, what: &str, e: &Error) -> bool {
        if !is_passing(e) || Instant::now() + self.wait >= self.give_up_at {
            return false;
        }
        tracing::warn!(error = %e, "{what} failed for now; trying again in {:?}", self.wait);
        tokio::time::sleep(self.wait).await;
        self.wait = (self.wait * 2).min(LONGEST_WAIT);
        true
    }
}

/// Makes `call` until it succeeds, fails for good, or [`PATIENCE`] runs out.
///
/// A try that failed while committing may have been applied; the next one is then refused with `LeaseLost` (the
/// job already ended), which the caller reports as it would any lost lease.
pub(crate) async fn patiently<T, F, Fut>(what: &str, mut call: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let mut patience = Patience::new();
    loop {
        match call().await {
            Err(e) if patience.again(what, &e).await => {}
            done => return done,
        }
    }
}
