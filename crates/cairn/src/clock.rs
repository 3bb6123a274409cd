//! The one source of "now" in the engine. Engine code never reads the system clock: it asks a [`Clock`],
//! so tests can hold a [`ManualClock`] and move time.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::Timestamp;

/// A source of the current time, in UTC.
pub trait Clock: Send + Sync + 'static {
    /// The current time.
    fn now(&self) -> Timestamp;

    /// How long, in real time, until the clock reads `at`; `None` if the clock does not move by itself.
    ///
    /// The writer sleeps this long before its next timed step (a due job, an expiring lease).
    fn real_time_until(&self, at: Timestamp) -> Option<Duration>;

    /// Registers a callback run after every jump of the clock, so that sleepers can look again.
    /// Clocks that only move forward with real time never call it.
    fn on_jump(&self, callback: Box<dyn Fn() + Send + Sync>);
}

/// The system's real-time clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }

    fn real_time_until(&self, at: Timestamp) -> Option<Duration> {
        let ms = at.as_millisecond() - Timestamp::now().as_millisecond();
        Some(Duration::from_millis(ms.max(0) as u64))
    }

    fn on_jump(&self, _callback: Box<dyn Fn() + Send + Sync>) {}
}

/// A clock that only moves when told to. Cloning shares the same time.
#[derive(Clone)]
pub struct ManualClock {
    inner: Arc<ManualInner>,
}

struct ManualInner {
    now: Mutex<Timestamp>,
    listeners: Mutex<Vec<Box<dyn Fn() + Send + Sync>>>,
}

impl ManualClock {
    /// A clock that reads `start` until moved.
    pub fn new(start: Timestamp) -> Self {
        ManualClock {
            inner: Arc::new(ManualInner {
                now: Mutex::new(start),
                listeners: Mutex::new(Vec::new()),
            }),
        }
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        let by = jiff::SignedDuration::try_from(by).expect("test durations fit a signed duration");
        let mut now = self.inner.now.lock().expect("clock lock is never poisoned");
        *now = now
            .checked_add(by)
            .expect("manual clock stays within the supported range");
        drop(now);
        self.notify();
    }

    /// Moves the clock forward without telling the queues that use it, which notice only at their next operation
    /// or timer. For tests that observe the moment between a deadline and the queue acting on it (a lease that
    /// ran out, not yet retried: a stalled job).
    pub fn advance_quietly(&self, by: Duration) {
        let by = jiff::SignedDuration::try_from(by).expect("test durations fit a signed duration");
        let mut now = self.inner.now.lock().expect("clock lock is never poisoned");
        *now = now
            .checked_add(by)
            .expect("manual clock stays within the supported range");
    }

    /// Sets the clock to `at`, forward or backward.
    pub fn set(&self, at: Timestamp) {
        *self.inner.now.lock().expect("clock lock is never poisoned") = at;
        self.notify();
    }

    fn notify(&self) {
        for listener in self
            .inner
            .listeners
            .lock()
            .expect("clock lock is never poisoned")
            .iter()
        {
            listener();
        }
    }
}

impl std::fmt::Debug for ManualClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ManualClock")
            .field("now", &self.now())
            .finish()
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        *self.inner.now.lock().expect("clock lock is never poisoned")
    }

    fn real_time_until(&self, _at: Timestamp) -> Option<Duration> {
        None
    }

    fn on_jump(&self, callback: Box<dyn Fn() + Send + Sync>) {
        self.inner
            .listeners
            .lock()
            .expect("clock lock is never poisoned")
            .push(callback);
    }
}

/// Milliseconds since the Unix epoch, as stored.
pub(crate) fn to_millis(t: Timestamp) -> i64 {
    t.as_millisecond()
}

/// The inverse of [`to_millis`]; out-of-range values (only possible in a hand-edited database) clamp.
pub(crate) fn from_millis(ms: i64) -> Timestamp {
    Timestamp::from_millisecond(ms).unwrap_or(if ms < 0 {
        Timestamp::MIN
    } else {
        Timestamp::MAX
    })
}

/// A duration as stored: whole milliseconds, saturating.
pub(crate) fn duration_millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn manual_clock_moves_only_when_told_and_notifies() {
        let clock = ManualClock::new(Timestamp::from_second(1_000).unwrap());
        let jumps = Arc::new(AtomicUsize::new(0));
        let seen = jumps.clone();
        clock.on_jump(Box::new(move || {
            seen.fetch_add(1, Ordering::SeqCst);
        }));
        clock.advance(Duration::from_millis(1500));
        assert_eq!(clock.now().as_millisecond(), 1_001_500);
        assert_eq!(jumps.load(Ordering::SeqCst), 1);
        assert_eq!(clock.real_time_until(clock.now()), None);
    }
}
