//! What a benchmark run does, from its command line and environment: filters (arguments), `CAIRN_BENCH_SCALE`, and
//! the groups of measurements to pick from. Shared by Cairn's bench and `bench/effectum-compare`, so the two sides
//! always read the same command line the same way.

use tokio::runtime::Runtime;

use crate::report::Results;

/// Errors end the run with a message; a benchmark has nobody to hand them to.
pub type BenchResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// What to run, from the command line and the environment.
pub struct Config {
    pub filters: Vec<String>,
    pub scale: f64,
}

impl Config {
    pub fn from_env() -> BenchResult<Config> {
        // Cargo passes `--bench` to every bench binary; flags are not filters.
        let filters = std::env::args()
            .skip(1)
            .filter(|a| !a.starts_with('-'))
            .collect();
        let scale = match std::env::var("CAIRN_BENCH_SCALE") {
            Ok(text) => text
                .parse::<f64>()
                .ok()
                .filter(|s| *s > 0.0)
                .ok_or_else(|| {
                    format!("CAIRN_BENCH_SCALE: must be a positive number, got {text:?}")
                })?,
            Err(_) => 1.0,
        };
        Ok(Config { filters, scale })
    }

    /// A size scaled by `CAIRN_BENCH_SCALE`, never below `min`.
    pub fn size(&self, full: u64, min: u64) -> u64 {
        ((full as f64 * self.scale).round() as u64).max(min)
    }

    /// Whether a group whose rows can run alone runs `row`: every row when a filter names the group (or there is
    /// none), else only the rows a filter names.
    pub fn wants_row(&self, group: &str, row: &str) -> bool {
        self.filters.is_empty()
            || self
                .filters
                .iter()
                .any(|f| group.contains(f.as_str()) || row.contains(f.as_str()))
    }

    pub fn wants(&self, group: &Group) -> bool {
        self.filters.is_empty()
            || self.filters.iter().any(|f| {
                group.name.contains(f.as_str()) || group.rows.iter().any(|r| r.contains(f.as_str()))
            })
    }
}

/// A set of measurements that run together (the scan ratios need all three of theirs).
pub struct Group {
    pub name: &'static str,
    pub rows: &'static [&'static str],
    pub run: fn(&Runtime, &Config, &mut Results) -> BenchResult<()>,
}
