//! The engine's options that can change while the queue runs: default lease and retry policy, retention, the
//! largest job data. A value set at run time ([`SetConfig`]) is stored in the database (`config`, migration 0011),
//! so it survives restarts and wins over the value the queue is opened with until it is unset again.
//!
//! The writer keeps the values in force in memory ([`RuntimeConfig`], part of the settings cache), like the queues'
//! settings: loaded at start, changed in the transaction that changes them, loaded again after a rollback.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use crate::store::db::{Db, Params, Sql, params};

use crate::clock::{duration_millis, from_millis};
use crate::error::{Error, Result};
use crate::ops::limits::{MAX_LEASE_TIMEOUT, MIN_LEASE_TIMEOUT};
use crate::ops::{Limits, Operation, WriteCtx};
use crate::options::Retention;

/// An option that can be read and changed at run time. Its name ([`ConfigKey::as_str`]) is what the CLI and the
/// HTTP API use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ConfigKey {
    /// The lease timeout of jobs pushed without one.
    DefaultLeaseTimeout,
    /// Attempts in all of jobs pushed without a retry policy.
    RetryMaxAttempts,
    /// Their delay after the first failed attempt.
    RetryInitialDelay,
    /// How much each further delay grows.
    RetryMultiplier,
    /// Their longest delay.
    RetryMaxDelay,
    /// The random spread of their delays (0 to 1).
    RetryJitter,
    /// Completed and cancelled jobs older than this are removed (or never, when off).
    RetentionMaxAge,
    /// At most this many completed and cancelled jobs are kept (any number, when off).
    RetentionMaxCount,
    /// Workers not seen for this long are forgotten (never, when off).
    WorkerMaxAge,
    /// Activity log rows older than this are removed (never, when off).
    ActivityMaxAge,
    /// At most about this many activity log rows are kept (any number, when off).
    ActivityMaxCount,
    /// Statistics older than this are removed (never, when off).
    StatsMaxAge,
    /// How often retention looks.
    RetentionInterval,
    /// The largest job data, progress or checkpoint, as JSON text, in bytes.
    MaxDataBytes,
}

/// What kind of value a key takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigUnit {
    /// A duration; milliseconds on the wire and in the database.
    Duration,
    /// A whole number.
    Count,
    /// A real number.
    Number,
}

/// A value of an option.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ConfigValue {
    /// A duration.
    Duration(Duration),
    /// A whole number.
    Count(u64),
    /// A real number.
    Number(f64),
    /// No limit: keep forever, any number. Only for the keys that allow it ([`ConfigKey::can_be_off`]).
    Off,
}

/// The longest duration any option takes: ten years.
const MAX_DURATION: Duration = Duration::from_secs(10 * 365 * 24 * 3600);
/// The largest job data an option may allow: 256 MiB.
const MAX_DATA_BYTES: u64 = 256 * 1024 * 1024;

impl ConfigKey {
    /// Every key, in the order they are listed.
    pub const ALL: [ConfigKey; 14] = [
        ConfigKey::DefaultLeaseTimeout,
        ConfigKey::RetryMaxAttempts,
        ConfigKey::RetryInitialDelay,
        ConfigKey::RetryMultiplier,
        ConfigKey::RetryMaxDelay,
        ConfigKey::RetryJitter,
        ConfigKey::RetentionMaxAge,
        ConfigKey::RetentionMaxCount,
        ConfigKey::WorkerMaxAge,
        ConfigKey::ActivityMaxAge,
        ConfigKey::ActivityMaxCount,
        ConfigKey::StatsMaxAge,
        ConfigKey::RetentionInterval,
        ConfigKey::MaxDataBytes,
    ];

    /// The key's name.
    pub fn as_str(self) -> &'static str {
        match self {
            ConfigKey::DefaultLeaseTimeout => "default_lease_timeout",
            ConfigKey::RetryMaxAttempts => "default_retry.max_attempts",
            ConfigKey::RetryInitialDelay => "default_retry.initial_delay",
            ConfigKey::RetryMultiplier => "default_retry.multiplier",
            ConfigKey::RetryMaxDelay => "default_retry.max_delay",
            ConfigKey::RetryJitter => "default_retry.jitter",
            ConfigKey::RetentionMaxAge => "retention.max_age",
            ConfigKey::RetentionMaxCount => "retention.max_count",
            ConfigKey::WorkerMaxAge => "retention.worker_max_age",
            ConfigKey::ActivityMaxAge => "retention.activity_max_age",
            ConfigKey::ActivityMaxCount => "retention.activity_max_count",
            ConfigKey::StatsMaxAge => "retention.stats_max_age",
            ConfigKey::RetentionInterval => "retention.interval",
            ConfigKey::MaxDataBytes => "max_data_bytes",
        }
    }

    /// The key named `name`.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) on `key`, listing the keys there are.
    pub fn parse(name: &str) -> Result<ConfigKey> {
        ConfigKey::ALL
            .into_iter()
            .find(|k| k.as_str() == name)
            .ok_or_else(|| {
                let known: Vec<_> = ConfigKey::ALL.iter().map(|k| k.as_str()).collect();
                Error::invalid(
                    "key",
                    format!("must be one of {}, got {name:?}", known.join(", ")),
                )
            })
    }

    /// What kind of value it takes.
    pub fn unit(self) -> ConfigUnit {
        match self {
            ConfigKey::RetryMaxAttempts
            | ConfigKey::RetentionMaxCount
            | ConfigKey::ActivityMaxCount
            | ConfigKey::MaxDataBytes => ConfigUnit::Count,
            ConfigKey::RetryMultiplier | ConfigKey::RetryJitter => ConfigUnit::Number,
            _ => ConfigUnit::Duration,
        }
    }

    /// Whether it is part of the default retry policy, which is checked as a whole.
    fn is_retry(self) -> bool {
        matches!(
            self,
            ConfigKey::RetryMaxAttempts
                | ConfigKey::RetryInitialDelay
                | ConfigKey::RetryMultiplier
                | ConfigKey::RetryMaxDelay
                | ConfigKey::RetryJitter
        )
    }

    /// Whether it can be [`ConfigValue::Off`].
    pub fn can_be_off(self) -> bool {
        matches!(
            self,
            ConfigKey::RetentionMaxAge
                | ConfigKey::RetentionMaxCount
                | ConfigKey::WorkerMaxAge
                | ConfigKey::ActivityMaxAge
                | ConfigKey::ActivityMaxCount
                | ConfigKey::StatsMaxAge
        )
    }

    /// Reads a value of this key from JSON: a number in the key's unit (milliseconds for durations), or `null`
    /// for off. Ranges are checked when the value is set.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) naming the key.
    pub fn value_from_json(self, json: &serde_json::Value) -> Result<ConfigValue> {
        let field = self.as_str();
        let wrong = |what: &str| Error::invalid(field, format!("must be {what}, got {json}"));
        match (json, self.unit()) {
            (serde_json::Value::Null, _) if self.can_be_off() => Ok(ConfigValue::Off),
            (serde_json::Value::Null, _) => Err(wrong("set (it cannot be off)")),
            (serde_json::Value::Number(n), ConfigUnit::Duration) => n
                .as_u64()
                .map(|ms| ConfigValue::Duration(Duration::from_millis(ms)))
                .ok_or_else(|| wrong("a whole number of milliseconds")),
            (serde_json::Value::Number(n), ConfigUnit::Count) => n
                .as_u64()
                .map(ConfigValue::Count)
                .ok_or_else(|| wrong("a whole number")),
            (serde_json::Value::Number(n), ConfigUnit::Number) => n
                .as_f64()
                .map(ConfigValue::Number)
                .ok_or_else(|| wrong("a number")),
            _ if self.can_be_off() => Err(wrong("a number, or null for off")),
            _ => Err(wrong("a number")),
        }
    }

    /// The value in force, from the options `limits` and `retention`.
    fn get(self, limits: &Limits, retention: &Retention) -> ConfigValue {
        let retry = &limits.default_retry;
        let maybe = |d: Option<Duration>| d.map_or(ConfigValue::Off, ConfigValue::Duration);
        match self {
            ConfigKey::DefaultLeaseTimeout => ConfigValue::Duration(limits.default_lease_timeout),
            ConfigKey::RetryMaxAttempts => ConfigValue::Count(u64::from(retry.max_attempts)),
            ConfigKey::RetryInitialDelay => ConfigValue::Duration(retry.initial_delay),
            ConfigKey::RetryMultiplier => ConfigValue::Number(retry.multiplier),
            ConfigKey::RetryMaxDelay => ConfigValue::Duration(retry.max_delay),
            ConfigKey::RetryJitter => ConfigValue::Number(retry.jitter),
            ConfigKey::RetentionMaxAge => maybe(retention.max_age),
            ConfigKey::RetentionMaxCount => retention
                .max_count
                .map_or(ConfigValue::Off, ConfigValue::Count),
            ConfigKey::WorkerMaxAge => maybe(retention.worker_max_age),
            ConfigKey::ActivityMaxAge => maybe(retention.activity_max_age),
            ConfigKey::ActivityMaxCount => retention
                .activity_max_count
                .map_or(ConfigValue::Off, ConfigValue::Count),
            ConfigKey::StatsMaxAge => maybe(retention.stats_max_age),
            ConfigKey::RetentionInterval => ConfigValue::Duration(retention.interval),
            ConfigKey::MaxDataBytes => ConfigValue::Count(limits.max_data_bytes as u64),
        }
    }

    /// Sets this key to `value` in `limits` and `retention`, checking the value's kind and range (but not how it
    /// fits with the others: `RuntimeConfig::with` checks the whole).
    fn put(self, value: ConfigValue, limits: &mut Limits, retention: &mut Retention) -> Result<()> {
        let field = self.as_str();
        let out_of = |rule: String| Error::invalid(field, rule);
        let duration = |range: std::ops::RangeInclusive<Duration>| match value {
            ConfigValue::Duration(d) if range.contains(&d) => Ok(Some(d)),
            ConfigValue::Duration(d) => Err(out_of(format!(
                "must be between {:?} and {:?}, got {d:?}",
                range.start(),
                range.end()
            ))),
            ConfigValue::Off if self.can_be_off() => Ok(None),
            other => Err(out_of(format!("must be a duration, got {other}"))),
        };
        let count = |range: std::ops::RangeInclusive<u64>| match value {
            ConfigValue::Count(n) if range.contains(&n) => Ok(Some(n)),
            ConfigValue::Count(n) => Err(out_of(format!(
                "must be between {} and {}, got {n}",
                range.start(),
                range.end()
            ))),
            ConfigValue::Off if self.can_be_off() => Ok(None),
            other => Err(out_of(format!("must be a whole number, got {other}"))),
        };
        let number = || match value {
            ConfigValue::Number(x) if x.is_finite() => Ok(x),
            other => Err(out_of(format!("must be a finite number, got {other}"))),
        };
        let second = Duration::from_secs(1);
        let day = Duration::from_secs(24 * 3600);
        let retry = &mut limits.default_retry;
        match self {
            ConfigKey::DefaultLeaseTimeout => {
                limits.default_lease_timeout =
                    required(duration(MIN_LEASE_TIMEOUT..=MAX_LEASE_TIMEOUT)?)
            }
            ConfigKey::RetryMaxAttempts => {
                retry.max_attempts = required(count(1..=u64::from(u32::MAX))?) as u32
            }
            ConfigKey::RetryInitialDelay => {
                retry.initial_delay = required(duration(Duration::ZERO..=MAX_DURATION)?)
            }
            ConfigKey::RetryMultiplier => retry.multiplier = number()?,
            ConfigKey::RetryMaxDelay => {
                retry.max_delay = required(duration(Duration::ZERO..=MAX_DURATION)?)
            }
            ConfigKey::RetryJitter => retry.jitter = number()?,
            ConfigKey::RetentionMaxAge => retention.max_age = duration(second..=MAX_DURATION)?,
            ConfigKey::RetentionMaxCount => retention.max_count = count(0..=u64::from(u32::MAX))?,
            ConfigKey::WorkerMaxAge => retention.worker_max_age = duration(second..=MAX_DURATION)?,
            ConfigKey::ActivityMaxAge => {
                retention.activity_max_age = duration(second..=MAX_DURATION)?
            }
            ConfigKey::ActivityMaxCount => {
                retention.activity_max_count = count(1..=u64::from(u32::MAX))?
            }
            ConfigKey::StatsMaxAge => retention.stats_max_age = duration(second..=MAX_DURATION)?,
            ConfigKey::RetentionInterval => retention.interval = required(duration(second..=day)?),
            ConfigKey::MaxDataBytes => {
                limits.max_data_bytes = required(count(1..=MAX_DATA_BYTES)?) as usize
            }
        }
        Ok(())
    }
}

/// A value of a key that cannot be off: `put`'s range checks have refused `Off` already.
fn required<T>(value: Option<T>) -> T {
    value.expect("only keys that can be off accept Off")
}

impl fmt::Display for ConfigKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl ConfigValue {
    /// The value as JSON: milliseconds for a duration, `null` for off.
    pub fn to_json(self) -> serde_json::Value {
        match self {
            ConfigValue::Duration(d) => serde_json::Value::from(duration_millis(d)),
            ConfigValue::Count(n) => serde_json::Value::from(n),
            ConfigValue::Number(x) => serde_json::Value::from(x),
            ConfigValue::Off => serde_json::Value::Null,
        }
    }
}

impl fmt::Display for ConfigValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigValue::Duration(d) => write!(f, "{d:?}"),
            ConfigValue::Count(n) => write!(f, "{n}"),
            ConfigValue::Number(x) => write!(f, "{x}"),
            ConfigValue::Off => f.write_str("off"),
        }
    }
}

/// One option as [`Jobs::config`](crate::Jobs::config) lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigEntry {
    /// The option.
    pub key: ConfigKey,
    /// The value in force.
    pub value: ConfigValue,
    /// The value the queue was opened with, which is in force when nothing is set.
    pub default: ConfigValue,
    /// When the value was set at run time; `None` when it is the default.
    pub set_at: Option<jiff::Timestamp>,
}

/// Sets an option at run time. The change is stored, so it outlives restarts, and applies at once: to jobs pushed
/// from then on (defaults, data limit) and to the next pruning (retention).
#[derive(Debug, Clone, PartialEq)]
pub struct SetConfig {
    /// The option.
    pub key: ConfigKey,
    /// The new value.
    pub value: ConfigValue,
}

/// Goes back to the value an option had when the queue was opened, from now on (see [`SetConfig`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnsetConfig {
    /// The option.
    pub key: ConfigKey,
}

/// The options the queue was opened with.
#[derive(Debug, Clone)]
pub(crate) struct Defaults {
    pub limits: Limits,
    pub retention: Retention,
}

/// The options in force: the defaults with the values set at run time over them.
#[derive(Debug, Clone)]
pub(crate) struct RuntimeConfig {
    defaults: Defaults,
    /// Values set at run time, with when (ms).
    set: BTreeMap<ConfigKey, (ConfigValue, i64)>,
    pub limits: Limits,
    pub retention: Retention,
}

const ALL_CONFIG: Sql = Sql::both("SELECT key, value, updated_at FROM config");
const UPSERT_CONFIG: Sql = Sql::both(
    "INSERT INTO config (key, value, updated_at) VALUES ($1, $2, $3) \
     ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
);
const DELETE_CONFIG: Sql = Sql::both("DELETE FROM config WHERE key = $1");

impl RuntimeConfig {
    /// The defaults with the values stored in the database over them. A stored value that no longer fits (a key
    /// this version does not know, or a retry policy that no longer adds up with the defaults it was opened with)
    /// is left out with a warning rather than keep the queue from opening.
    pub fn load(db: &Db<'_>, defaults: &Defaults) -> Result<RuntimeConfig> {
        let mut config = RuntimeConfig {
            defaults: defaults.clone(),
            set: BTreeMap::new(),
            limits: defaults.limits.clone(),
            retention: defaults.retention,
        };
        let rows = db.query(ALL_CONFIG, &Params::NONE, |r| {
            Ok((r.get::<String>(0)?, r.get::<String>(1)?, r.get::<i64>(2)?))
        })?;
        let mut stored = BTreeMap::new();
        for (name, text, at) in rows {
            let parsed = ConfigKey::parse(&name).and_then(|key| {
                let json = serde_json::from_str(&text)
                    .map_err(|e| Error::invalid("value", format!("is not JSON: {e}")))?;
                Ok((key, key.value_from_json(&json)?))
            });
            // Each value alone must still be in range (a later version may have narrowed one).
            let parsed = parsed.and_then(|(key, value)| {
                let (mut limits, mut retention) = (defaults.limits.clone(), defaults.retention);
                key.put(value, &mut limits, &mut retention)
                    .map(|()| (key, value))
            });
            match parsed {
                Ok((key, value)) => {
                    stored.insert(key, (value, at));
                }
                Err(e) => tracing::warn!(key = name, value = text, error = %e,
                    "ignoring an option set at run time that this version does not accept; unset it or set it again"),
            }
        }
        // All at once: the retry policy is checked as a whole, so one by one an order could refuse a valid set.
        match config.with_all(stored.clone()) {
            Ok(all) => config = all,
            Err(e) => {
                // Values that do not add up with the defaults the queue was opened with now: keep the others.
                tracing::warn!(error = %e,
                    "ignoring the retry options set at run time: they do not fit the defaults the queue was opened with");
                stored.retain(|key, _| !key.is_retry());
                config = config.with_all(stored)?;
            }
        }
        Ok(config)
    }

    /// The options the queue was opened with.
    pub fn defaults(&self) -> &Defaults {
        &self.defaults
    }

    /// This configuration with `key` set (or unset, with `None`), checked as a whole.
    fn with(&self, key: ConfigKey, value: Option<(ConfigValue, i64)>) -> Result<RuntimeConfig> {
        let mut set = self.set.clone();
        match value {
            Some(value) => set.insert(key, value),
            None => set.remove(&key),
        };
        self.build(set, key.as_str())
    }

    /// The defaults with exactly `set` over them, checked as a whole.
    fn with_all(&self, set: BTreeMap<ConfigKey, (ConfigValue, i64)>) -> Result<RuntimeConfig> {
        self.build(set, "default_retry")
    }

    /// The defaults with `set` over them; a retry policy that does not add up is refused naming `field`.
    fn build(
        &self,
        set: BTreeMap<ConfigKey, (ConfigValue, i64)>,
        field: &'static str,
    ) -> Result<RuntimeConfig> {
        let mut limits = self.defaults.limits.clone();
        let mut retention = self.defaults.retention;
        for (key, (value, _)) in &set {
            key.put(*value, &mut limits, &mut retention)?;
        }
        // The retry policy must add up as a whole; name the key being set, since that is what the caller can fix.
        limits.default_retry.validate().map_err(|e| {
            Error::invalid(
                field,
                format!("would make the default retry policy invalid: {e}"),
            )
        })?;
        Ok(RuntimeConfig {
            defaults: self.defaults.clone(),
            set,
            limits,
            retention,
        })
    }

    /// Every option with its value, default and whether it was set at run time.
    pub fn entries(&self) -> Vec<ConfigEntry> {
        ConfigKey::ALL
            .into_iter()
            .map(|key| self.entry(key))
            .collect()
    }

    fn entry(&self, key: ConfigKey) -> ConfigEntry {
        ConfigEntry {
            key,
            value: key.get(&self.limits, &self.retention),
            default: key.get(&self.defaults.limits, &self.defaults.retention),
            set_at: self.set.get(&key).map(|&(_, at)| from_millis(at)),
        }
    }
}

impl Operation for SetConfig {
    type Output = ConfigEntry;

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<ConfigEntry> {
        set(ctx, self.key, Some(self.value))
    }
}

impl Operation for UnsetConfig {
    type Output = ConfigEntry;

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<ConfigEntry> {
        set(ctx, self.key, None)
    }
}

/// Sets option `key` to `value`, or back to its value at open with `None`.
fn set(ctx: &mut WriteCtx<'_>, key: ConfigKey, value: Option<ConfigValue>) -> Result<ConfigEntry> {
    let next = ctx
        .settings
        .config
        .with(key, value.map(|v| (v, ctx.now_ms)))?;
    match value {
        Some(value) => ctx.db.execute(
            UPSERT_CONFIG,
            &params![key.as_str(), value.to_json().to_string(), ctx.now_ms],
        )?,
        None => ctx.db.execute(DELETE_CONFIG, &params![key.as_str()])?,
    };
    ctx.settings.config = next;
    ctx.settings.changed = true;
    Ok(ctx.settings.config.entry(key))
}
