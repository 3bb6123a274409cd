//! [`RetryPolicy`]: how many attempts a job gets and how long it waits between them; [`RetryOverrides`]: the parts
//! of one a job sets itself.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::names::JobId;

/// How many attempts a job gets, and the exponential backoff between them.
///
/// The delay before attempt `n + 1` is `initial × multiplier^(n − 1)`, capped at `max`, then spread by up to
/// `± jitter` of itself. The spread is derived from the job id and attempt, so it is different for every job (no
/// thundering herd) and yet reproducible.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    /// Attempts in all, counting the first; at least 1.
    pub max_attempts: u32,
    /// The delay after the first failed attempt.
    pub initial_delay: Duration,
    /// Each further delay is this many times the previous one; at least 1.0.
    pub multiplier: f64,
    /// No delay is longer than this.
    pub max_delay: Duration,
    /// The fraction (0.0 to 1.0) by which a delay is randomly lengthened or shortened.
    pub jitter: f64,
}

impl Default for RetryPolicy {
    /// Five attempts, 5 s, 10 s, 20 s, 40 s apart (± 20 %), never more than an hour.
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 5,
            initial_delay: Duration::from_secs(5),
            multiplier: 2.0,
            max_delay: Duration::from_secs(3600),
            jitter: 0.2,
        }
    }
}

impl RetryPolicy {
    /// A policy of `max_attempts` attempts with the default backoff.
    pub fn attempts(max_attempts: u32) -> Self {
        RetryPolicy {
            max_attempts,
            ..RetryPolicy::default()
        }
    }

    /// A policy with no delay between attempts.
    pub fn immediate(max_attempts: u32) -> Self {
        RetryPolicy {
            max_attempts,
            initial_delay: Duration::ZERO,
            jitter: 0.0,
            ..RetryPolicy::default()
        }
    }

    /// Checks the rules; used when a job is enqueued.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) naming the field.
    pub fn validate(&self) -> Result<()> {
        if self.max_attempts == 0 {
            return Err(Error::invalid("max_attempts", "must be at least 1, got 0"));
        }
        if !(self.multiplier.is_finite() && self.multiplier >= 1.0) {
            return Err(Error::invalid(
                "backoff_multiplier",
                format!("must be at least 1.0, got {}", self.multiplier),
            ));
        }
        if !(self.jitter.is_finite() && (0.0..=1.0).contains(&self.jitter)) {
            return Err(Error::invalid(
                "backoff_jitter",
                format!("must be between 0.0 and 1.0, got {}", self.jitter),
            ));
        }
        if self.initial_delay > self.max_delay {
            return Err(Error::invalid(
                "backoff_initial",
                format!(
                    "must not exceed the longest delay ({:?}), got {:?}",
                    self.max_delay, self.initial_delay
                ),
            ));
        }
        Ok(())
    }

    /// The delay before the attempt after `failed_attempt` (1 for the first attempt).
    pub fn delay_after(&self, job: JobId, failed_attempt: u32) -> Duration {
        let exponent = failed_attempt.saturating_sub(1).min(1000) as i32;
        let base = self.initial_delay.as_secs_f64() * self.multiplier.powi(exponent);
        let capped = base.min(self.max_delay.as_secs_f64());
        let unit = spread(job.0 as u64, u64::from(failed_attempt)); // in [-1, 1)
        let spread = capped * (1.0 + self.jitter * unit);
        Duration::from_secs_f64(spread.clamp(0.0, self.max_delay.as_secs_f64()))
    }
}

/// The parts of a retry policy a job sets itself: each one it leaves unset is the default policy's
/// (`default_retry`), as it stands when the job is pushed. "Try this job once" is `max_attempts` alone.
///
/// A whole [`RetryPolicy`] converts into one that sets every part.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RetryOverrides {
    /// Attempts in all, counting the first.
    pub max_attempts: Option<u32>,
    /// The delay after the first failed attempt.
    pub initial_delay: Option<Duration>,
    /// Each further delay is this many times the previous one.
    pub multiplier: Option<f64>,
    /// No delay is longer than this.
    pub max_delay: Option<Duration>,
    /// The fraction (0.0 to 1.0) by which a delay is randomly lengthened or shortened.
    pub jitter: Option<f64>,
}

impl RetryOverrides {
    /// Whether it sets nothing, so that the job takes the default policy whole.
    pub fn is_empty(&self) -> bool {
        *self == RetryOverrides::default()
    }

    /// The policy it makes over `defaults`: its own parts where it sets them, the defaults' elsewhere.
    pub fn over(self, defaults: RetryPolicy) -> RetryPolicy {
        RetryPolicy {
            max_attempts: self.max_attempts.unwrap_or(defaults.max_attempts),
            initial_delay: self.initial_delay.unwrap_or(defaults.initial_delay),
            multiplier: self.multiplier.unwrap_or(defaults.multiplier),
            max_delay: self.max_delay.unwrap_or(defaults.max_delay),
            jitter: self.jitter.unwrap_or(defaults.jitter),
        }
    }
}

impl From<RetryPolicy> for RetryOverrides {
    fn from(p: RetryPolicy) -> Self {
        RetryOverrides {
            max_attempts: Some(p.max_attempts),
            initial_delay: Some(p.initial_delay),
            multiplier: Some(p.multiplier),
            max_delay: Some(p.max_delay),
            jitter: Some(p.jitter),
        }
    }
}

/// A reproducible number in [-1, 1) from two integers (SplitMix64 finaliser).
fn spread(a: u64, b: u64) -> f64 {
    let mut z = a.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ b.wrapping_add(0xD1B5_4A32_D192_ED03);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 52) as f64 - 1.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn backoff_grows_by_the_multiplier_until_the_cap() {
        let policy = RetryPolicy {
            max_attempts: 10,
            initial_delay: Duration::from_secs(1),
            multiplier: 3.0,
            max_delay: Duration::from_secs(20),
            jitter: 0.0,
        };
        let delays: Vec<u64> = (1..=5)
            .map(|n| policy.delay_after(JobId(1), n).as_secs())
            .collect();
        assert_eq!(delays, [1, 3, 9, 20, 20]);
    }

    #[test]
    fn invalid_policies_name_the_field() {
        let bad = RetryPolicy {
            max_attempts: 0,
            ..RetryPolicy::default()
        };
        assert_eq!(bad.validate().unwrap_err().field(), Some("max_attempts"));
        let bad = RetryPolicy {
            jitter: 1.5,
            ..RetryPolicy::default()
        };
        assert_eq!(
            bad.validate().unwrap_err().to_string(),
            "backoff_jitter: must be between 0.0 and 1.0, got 1.5"
        );
    }

    #[test]
    fn overrides_take_the_defaults_for_what_they_leave_unset() {
        let defaults = RetryPolicy {
            max_attempts: 7,
            initial_delay: Duration::from_secs(2),
            multiplier: 3.0,
            max_delay: Duration::from_secs(90),
            jitter: 0.1,
        };
        let once = RetryOverrides {
            max_attempts: Some(1),
            ..RetryOverrides::default()
        };
        assert_eq!(
            once.over(defaults),
            RetryPolicy {
                max_attempts: 1,
                ..defaults
            }
        );
        assert_eq!(RetryOverrides::default().over(defaults), defaults);
        let whole = RetryPolicy::immediate(4);
        assert_eq!(RetryOverrides::from(whole).over(defaults), whole);
    }

    proptest! {
        #[test]
        fn jittered_delay_stays_within_bounds(job in any::<i64>(), attempt in 1u32..100, jitter in 0.0f64..=1.0) {
            let policy = RetryPolicy { jitter, ..RetryPolicy::attempts(100) };
            let exponent = (attempt - 1) as i32;
            let nominal = (5.0 * 2f64.powi(exponent)).min(3600.0);
            let delay = policy.delay_after(JobId(job), attempt).as_secs_f64();
            prop_assert!(delay >= nominal * (1.0 - jitter) - 1e-6);
            prop_assert!(delay <= (nominal * (1.0 + jitter)).min(3600.0) + 1e-6);
        }
    }
}
