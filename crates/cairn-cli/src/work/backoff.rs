//! Riding out a server that is down or restarting: which errors are worth trying again ([`is_transient`]), and how
//! long to wait between tries ([`Backoff`]). What to try again is the caller's business.

use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

use cairn::ErrorKind;

/// The first wait after a failure.
const FIRST: Duration = Duration::from_millis(250);

/// The longest wait: a restarted server is found within this long.
const LONGEST: Duration = Duration::from_secs(30);

/// Whether an error from the server may go away by itself (the server is down, restarting, or its disk is
/// struggling), so the call is worth making again. Refused credentials, bad input and lost leases are answers,
/// not outages.
pub(crate) fn is_transient(e: &cairn::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::Unavailable
            | ErrorKind::Closed
            | ErrorKind::Storage
            | ErrorKind::StorageFull
            | ErrorKind::Locked
    )
}

/// Waits that double from 250 ms up to 30 s, each shortened by up to a fifth at random so that many managers
/// that lost the same server do not all come back at the same instant.
#[derive(Debug)]
pub(crate) struct Backoff {
    next: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff { next: FIRST }
    }
}

impl Backoff {
    /// The wait before the next try; each call doubles the one after.
    pub(crate) fn next_delay(&mut self) -> Duration {
        let delay = self.next;
        self.next = (self.next * 2).min(LONGEST);
        delay.mul_f64(1.0 - 0.2 * random_fraction())
    }

    /// Starts again from the shortest wait, after a call succeeded.
    pub(crate) fn reset(&mut self) {
        self.next = FIRST;
    }
}

/// A number in [0, 1) that differs between processes and calls; no need for a random-number crate for jitter.
fn random_fraction() -> f64 {
    let bits = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_the_longest_wait_and_starts_over_after_a_success() {
        let mut backoff = Backoff::default();
        let mut bases = Vec::new();
        for _ in 0..10 {
            let base = backoff.next;
            let delay = backoff.next_delay();
            assert!(
                delay <= base && delay >= base.mul_f64(0.8),
                "{delay:?} from {base:?}"
            );
            bases.push(base);
        }
        assert_eq!(bases[..3], [FIRST, FIRST * 2, FIRST * 4]);
        assert_eq!(bases[9], LONGEST);
        backoff.reset();
        assert_eq!(backoff.next, FIRST);
    }

    #[test]
    fn only_outages_are_transient() {
        let error = |kind| cairn::Error::from_parts(kind, None, "x");
        assert!(is_transient(&error(ErrorKind::Unavailable)));
        assert!(is_transient(&error(ErrorKind::Closed)));
        assert!(!is_transient(&error(ErrorKind::Unauthorized)));
        assert!(!is_transient(&error(ErrorKind::LeaseLost)));
        assert!(!is_transient(&error(ErrorKind::InvalidInput)));
    }
}
