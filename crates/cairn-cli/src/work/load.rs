//! The machine's load average, for `--max-load`: reading `/proc/loadavg`, and [`LoadGate`], which says whether to
//! take work now and logs when it starts and stops holding back. When to ask again is `manager`'s business.

use std::io;

/// Where Linux publishes the load averages.
const LOADAVG: &str = "/proc/loadavg";

/// The 1-minute load average out of the text of `/proc/loadavg` (`0.52 0.58 0.59 1/467 12345`).
///
/// # Errors
/// A message saying what the text lacks.
pub(crate) fn parse_loadavg(text: &str) -> Result<f64, String> {
    let first = text
        .split_whitespace()
        .next()
        .ok_or_else(|| format!("{LOADAVG} is empty"))?;
    match first.parse::<f64>() {
        Ok(load) if load.is_finite() && load >= 0.0 => Ok(load),
        _ => Err(format!(
            "{LOADAVG} must start with a load average such as 0.52, got {first:?}"
        )),
    }
}

/// Reads the 1-minute load average now.
///
/// # Errors
/// When `/proc/loadavg` cannot be read (not Linux, no `/proc`) or does not hold a load average.
pub(crate) fn one_minute() -> io::Result<f64> {
    let text = std::fs::read_to_string(LOADAVG)?;
    parse_loadavg(&text).map_err(io::Error::other)
}

/// Decides whether the load allows taking work, remembering whether it held back last time so that it logs only
/// the changes.
#[derive(Debug)]
pub(crate) struct LoadGate {
    max: f64,
    is_holding: bool,
}

impl LoadGate {
    /// A gate that holds back while the load is above `max`.
    pub(crate) fn new(max: f64) -> Self {
        LoadGate {
            max,
            is_holding: false,
        }
    }

    /// Reads the load and says whether to take work now.
    pub(crate) fn allows_work(&mut self) -> bool {
        self.allows(one_minute())
    }

    /// Says whether to take work at the load `reading`. A reading that fails lets work through: the gate is
    /// there to protect the machine, not to stop work on a machine it cannot measure.
    fn allows(&mut self, reading: io::Result<f64>) -> bool {
        let load = match reading {
            Ok(load) => load,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the load average; ignoring --max-load this time");
                return true;
            }
        };
        let allows = load <= self.max;
        if allows && self.is_holding {
            tracing::info!(load, max_load = self.max, "load is down; taking jobs again");
        } else if !allows && !self.is_holding {
            tracing::info!(
                load,
                max_load = self.max,
                "load is above --max-load; taking no new jobs"
            );
        }
        self.is_holding = !allows;
        allows
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str, expected: Result<f64, &str>) {
        assert_eq!(
            parse_loadavg(text),
            expected.map_err(str::to_owned),
            "text {text:?}"
        );
    }

    #[test]
    fn reads_the_one_minute_average() {
        check("0.52 0.58 0.59 1/467 12345\n", Ok(0.52));
        check("12.00 3.10 1.00 9/900 1\n", Ok(12.0));
        check("0.00 0.00 0.00 1/1 1", Ok(0.0));
        check("", Err("/proc/loadavg is empty"));
        check(
            "high 0.58 0.59",
            Err("/proc/loadavg must start with a load average such as 0.52, got \"high\""),
        );
        check(
            "-1 0 0",
            Err("/proc/loadavg must start with a load average such as 0.52, got \"-1\""),
        );
    }

    #[test]
    fn this_machine_has_a_load_average() {
        if cfg!(target_os = "linux") {
            assert!(one_minute().unwrap() >= 0.0);
        }
    }

    #[test]
    fn gate_holds_back_above_the_maximum_and_lets_unreadable_loads_through() {
        let mut gate = LoadGate::new(2.0);
        assert!(gate.allows(Ok(1.5)));
        assert!(gate.allows(Ok(2.0)));
        assert!(!gate.allows(Ok(2.5)));
        assert!(gate.is_holding);
        assert!(!gate.allows(Ok(3.0)));
        assert!(gate.allows(Err(io::Error::other("no /proc"))));
        assert!(gate.allows(Ok(0.1)));
        assert!(!gate.is_holding);
    }
}
