//! The run's settings, read from the environment the benchmark's harness sets (CONTRIBUTING_ADAPTERS.md, "Env
//! in"). Every variable has the contract's default; a value that does not parse or is out of range is an error
//! that names the variable and the rule, never a silent default.

use std::time::Duration;

/// How the producer decides how many jobs to enqueue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Load {
    /// `rate` jobs per second, credited on the real clock every `tick`.
    Rate { rate: u64, tick: Duration },
    /// As many jobs as the harness asks for, in `ENQUEUE <n>` lines on standard input.
    Harness,
    /// Keep this many of the producer's jobs enqueued and not yet started.
    Depth(u64),
}

/// Everything a run needs to know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// A PostgreSQL URL or a SQLite file (the harness always gives PostgreSQL).
    pub database: String,
    /// What the producer keeps up, or `None` when this instance does not produce.
    pub load: Option<Load>,
    /// The most jobs in one enqueue call.
    pub batch_max: u64,
    /// The worker's slots.
    pub workers: u32,
    /// Roughly how large a job's data is, in bytes.
    pub payload_bytes: usize,
    /// How long each handler works.
    pub work: Duration,
    /// Time between samples.
    pub sample_every: Duration,
    /// This process's number among several on one database.
    pub instance: u32,
}

/// A variable that is set but wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadSetting {
    pub variable: &'static str,
    pub rule: String,
}

impl std::fmt::Display for BadSetting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.variable, self.rule)
    }
}

impl std::error::Error for BadSetting {}

impl Settings {
    /// Reads the settings from the process's environment.
    ///
    /// # Errors
    /// The first variable that is missing or wrong.
    pub fn from_env() -> Result<Settings, BadSetting> {
        Settings::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads the settings through `lookup`, which gives a variable's value if it is set.
    ///
    /// # Errors
    /// The first variable that is missing or wrong.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Settings, BadSetting> {
        let env = Env(&lookup);
        let database = env.text("DATABASE_URL").ok_or_else(|| BadSetting {
            variable: "DATABASE_URL",
            rule: "must be set: a PostgreSQL URL (postgres://user:password@host/database) or a SQLite file".into(),
        })?;
        let scenario = env
            .text("SCENARIO")
            .unwrap_or_else(|| "long_horizon".into());
        if scenario != "long_horizon" {
            return Err(BadSetting {
                variable: "SCENARIO",
                rule: format!("only long_horizon is implemented, got {scenario:?}"),
            });
        }
        let instance = env.number("BENCH_INSTANCE_ID", 0, 0..=u32::MAX.into())? as u32;
        let only_zero = env.flag("PRODUCER_ONLY_INSTANCE_ZERO")?;
        let mode = env.text("PRODUCER_MODE").unwrap_or_else(|| "fixed".into());
        let pacing = env
            .text("PRODUCER_PACING")
            .unwrap_or_else(|| "adapter".into());
        let load = match (mode.as_str(), pacing.as_str()) {
            ("fixed", "adapter") => Load::Rate {
                rate: env.number("PRODUCER_RATE", 800, 1..=10_000_000)?,
                tick: Duration::from_millis(env.number("PRODUCER_BATCH_MS", 10, 1..=60_000)?),
            },
            ("fixed", "harness") => Load::Harness,
            ("fixed", _) => {
                return Err(BadSetting {
                    variable: "PRODUCER_PACING",
                    rule: format!("must be adapter or harness, got {pacing:?}"),
                });
            }
            ("depth-target", _) => {
                Load::Depth(env.number("TARGET_DEPTH", 1000, 1..=100_000_000)?)
            }
            _ => {
                return Err(BadSetting {
                    variable: "PRODUCER_MODE",
                    rule: format!("must be fixed or depth-target, got {mode:?}"),
                });
            }
        };
        Ok(Settings {
            database,
            load: (!only_zero || instance == 0).then_some(load),
            batch_max: env.number("PRODUCER_BATCH_MAX", 128, 1..=10_000)?,
            workers: env.number("WORKER_COUNT", 32, 1..=10_000)? as u32,
            payload_bytes: env.number("JOB_PAYLOAD_BYTES", 256, 0..=1_000_000)? as usize,
            work: Duration::from_millis(env.number("JOB_WORK_MS", 1, 0..=3_600_000)?),
            sample_every: Duration::from_secs(env.number("SAMPLE_EVERY_S", 5, 1..=3600)?),
            instance,
        })
    }

    /// The database's name, for the descriptor: the URL's last path segment, or the file's name.
    pub fn db_name(&self) -> String {
        let without_query = self.database.split('?').next().unwrap_or_default();
        without_query
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_owned()
    }
}

/// The environment, read through a lookup function.
struct Env<'a>(&'a dyn Fn(&str) -> Option<String>);

impl Env<'_> {
    /// A variable's value, `None` if unset or blank.
    fn text(&self, name: &str) -> Option<String> {
        (self.0)(name)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    }

    fn number(
        &self,
        name: &'static str,
        default: u64,
        range: std::ops::RangeInclusive<u64>,
    ) -> Result<u64, BadSetting> {
        let Some(text) = self.text(name) else {
            return Ok(default);
        };
        match text.parse::<u64>() {
            Ok(n) if range.contains(&n) => Ok(n),
            _ => Err(BadSetting {
                variable: name,
                rule: format!(
                    "must be a whole number from {} to {}, got {text:?}",
                    range.start(),
                    range.end()
                ),
            }),
        }
    }

    fn flag(&self, name: &'static str) -> Result<bool, BadSetting> {
        match self.text(name).as_deref() {
            None | Some("0" | "false") => Ok(false),
            Some("1" | "true") => Ok(true),
            Some(other) => Err(BadSetting {
                variable: name,
                rule: format!("must be 0 or 1, got {other:?}"),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(vars: &[(&str, &str)]) -> Result<Settings, BadSetting> {
        Settings::from_lookup(|name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        })
    }

    #[test]
    fn the_contract_defaults_apply_to_what_is_unset() {
        let s = read(&[(
            "DATABASE_URL",
            "postgres://bench:bench@localhost:15555/cairn_bench",
        )])
        .unwrap();
        assert_eq!(
            s.load,
            Some(Load::Rate {
                rate: 800,
                tick: Duration::from_millis(10)
            })
        );
        assert_eq!(s.batch_max, 128);
        assert_eq!(s.workers, 32);
        assert_eq!(s.payload_bytes, 256);
        assert_eq!(s.work, Duration::from_millis(1));
        assert_eq!(s.sample_every, Duration::from_secs(5));
        assert_eq!(s.db_name(), "cairn_bench");
    }

    #[test]
    fn the_producer_mode_and_pacing_pick_the_load() {
        let db = ("DATABASE_URL", "/tmp/x.db");
        let depth = read(&[
            db,
            ("PRODUCER_MODE", "depth-target"),
            ("TARGET_DEPTH", "500"),
        ])
        .unwrap();
        assert_eq!(depth.load, Some(Load::Depth(500)));
        let harness = read(&[db, ("PRODUCER_PACING", "harness")]).unwrap();
        assert_eq!(harness.load, Some(Load::Harness));
        let quiet = read(&[
            db,
            ("PRODUCER_ONLY_INSTANCE_ZERO", "1"),
            ("BENCH_INSTANCE_ID", "2"),
        ])
        .unwrap();
        assert_eq!(quiet.load, None);
        assert_eq!(quiet.instance, 2);
    }

    #[test]
    fn a_wrong_value_names_its_variable_and_rule() {
        let db = ("DATABASE_URL", "/tmp/x.db");
        let err = read(&[db, ("WORKER_COUNT", "lots")]).unwrap_err();
        assert_eq!(err.variable, "WORKER_COUNT");
        assert!(err.rule.contains("from 1 to 10000"), "{err}");
        assert_eq!(
            read(&[db, ("WORKER_COUNT", "0")]).unwrap_err().variable,
            "WORKER_COUNT"
        );
        assert_eq!(
            read(&[db, ("PRODUCER_MODE", "burst")])
                .unwrap_err()
                .variable,
            "PRODUCER_MODE"
        );
        assert_eq!(
            read(&[db, ("SCENARIO", "all")]).unwrap_err().variable,
            "SCENARIO"
        );
        assert_eq!(read(&[]).unwrap_err().variable, "DATABASE_URL");
        assert_eq!(
            read(&[db, ("PRODUCER_ONLY_INSTANCE_ZERO", "yes")])
                .unwrap_err()
                .variable,
            "PRODUCER_ONLY_INSTANCE_ZERO"
        );
    }
}
