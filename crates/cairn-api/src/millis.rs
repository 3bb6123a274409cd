//! Durations as the wire carries them: whole milliseconds, in fields ending in `_ms`.
//!
//! Shared by the modules of every resource; a few statistics keep their own fractional forms in `stats`.

use std::time::Duration;

pub(crate) fn millis(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

pub(crate) fn to_millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
