//! Schedules: when a recurring job runs next. Bedrock's repeat syntax (`repeat`), with the date arithmetic of
//! SQLite's `datetime()` modifiers (`modifier`); cron expressions in a time zone (`cron`); and [`Schedule`], either
//! of the two, as a job or `cairn schedule next` takes it. Pure functions of their inputs: no clock, no storage.

pub(crate) mod cron;
pub(crate) mod modifier;
pub(crate) mod repeat;

use std::fmt;

use jiff::Timestamp;

use crate::error::{Error, Result};
use cron::Cron;
use repeat::{Repeat, RunTimes};

/// Parses a first run time as Bedrock's `firstRun` takes it, in UTC: `YYYY-MM-DD` (midnight) or
/// `YYYY-MM-DD HH:MM:SS`.
///
/// # Errors
/// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) on the field `first_run`.
pub fn parse_first_run(text: &str) -> Result<Timestamp> {
    let invalid = || {
        Error::invalid(
            "first_run",
            format!("must be YYYY-MM-DD or YYYY-MM-DD HH:MM:SS (UTC), got {text:?}"),
        )
    };
    let civil = match text.len() {
        10 => jiff::civil::Date::strptime("%Y-%m-%d", text)
            .map_err(|_| invalid())?
            .to_datetime(jiff::civil::Time::midnight()),
        19 => jiff::civil::DateTime::strptime("%Y-%m-%d %H:%M:%S", text).map_err(|_| invalid())?,
        _ => return Err(invalid()),
    };
    jiff::tz::TimeZone::UTC
        .to_timestamp(civil)
        .map_err(|_| invalid())
}

/// A recurring job's schedule.
#[derive(Debug, Clone, PartialEq)]
pub enum Schedule {
    /// Bedrock's repeat syntax, in UTC: `FINISHED, +1 HOUR`, `DAILY`, …
    Repeat(Repeat),
    /// A cron expression in a time zone: `0 4 * * *` in `Europe/Berlin`.
    Cron(Cron),
}

/// Words that start a repeat specification; anything else is read as cron.
const REPEAT_WORDS: [&str; 6] = [
    "SCHEDULED",
    "STARTED",
    "FINISHED",
    "HOURLY",
    "DAILY",
    "WEEKLY",
];

impl Schedule {
    /// Parses `spec`: a repeat specification if it starts with a repeat base or canned name, else a cron
    /// expression. `time_zone` (default `UTC`) applies to cron; repeat specifications are always in UTC.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) on the field `schedule` (or `time_zone`),
    /// naming the offending token and what was expected.
    pub fn parse(spec: &str, time_zone: Option<&str>) -> Result<Schedule> {
        let first = spec.split(',').next().unwrap_or("").trim().to_uppercase();
        if REPEAT_WORDS.contains(&first.as_str()) {
            if time_zone.is_some_and(|zone| zone != "UTC") {
                return Err(Error::invalid(
                    "time_zone",
                    "applies to cron schedules only; repeat specifications are in UTC",
                ));
            }
            return Repeat::parse(spec)
                .map(Schedule::Repeat)
                .map_err(|e| e.renamed("schedule"));
        }
        Cron::parse(spec, time_zone.unwrap_or("UTC"))
            .map(Schedule::Cron)
            .map_err(|e| match e.field() {
                Some("time_zone") => e,
                _ => e.renamed("schedule"),
            })
    }

    /// The stored form: the spec (upper-cased for repeat) and, for cron, the time zone.
    pub fn to_stored(&self) -> (String, Option<String>) {
        match self {
            Schedule::Repeat(r) => (r.as_str().to_owned(), None),
            Schedule::Cron(c) => (c.as_str().to_owned(), Some(c.time_zone().to_owned())),
        }
    }

    /// When the next run is due after a run with these times. Cron counts from the later of the run's slot and
    /// now, so slots that passed during a long run are skipped, as cron does.
    ///
    /// # Errors
    /// As [`Repeat::next_run`]; for cron, when the schedule has no more runs.
    pub fn next_run(&self, run: RunTimes) -> Result<Timestamp> {
        match self {
            Schedule::Repeat(r) => r.next_run(run),
            Schedule::Cron(c) => c.next_after(run.scheduled.max(run.now)).ok_or_else(|| {
                Error::invalid("schedule", format!("{c} has no run after {}", run.now))
            }),
        }
    }

    /// The next `count` run times after `from`, as a job that always runs on time would see them.
    ///
    /// # Errors
    /// As [`Repeat::next_runs`].
    pub fn next_runs(&self, from: Timestamp, count: usize) -> Result<Vec<Timestamp>> {
        match self {
            Schedule::Repeat(r) => r.next_runs(from, count).map_err(|e| e.renamed("schedule")),
            Schedule::Cron(c) => Ok(c.next_runs(from, count)),
        }
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Schedule::Repeat(r) => r.fmt(f),
            Schedule::Cron(c) => c.fmt(f),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_run_takes_bedrocks_two_formats() {
        assert_eq!(
            parse_first_run("2025-06-18").unwrap().to_string(),
            "2025-06-18T00:00:00Z"
        );
        assert_eq!(
            parse_first_run("2025-06-18 13:45:00").unwrap().to_string(),
            "2025-06-18T13:45:00Z"
        );
        for bad in [
            "2025-6-18",
            "2025-06-18T13:45:00",
            "2025-02-30",
            "2025-06-18 25:00:00",
            "tomorrow",
            "",
        ] {
            let err = parse_first_run(bad).unwrap_err();
            assert_eq!(err.field(), Some("first_run"), "{bad}");
        }
    }

    #[test]
    fn either_grammar_by_its_first_word() {
        assert!(matches!(
            Schedule::parse("finished, +1 hour", None).unwrap(),
            Schedule::Repeat(_)
        ));
        assert!(matches!(
            Schedule::parse("daily", None).unwrap(),
            Schedule::Repeat(_)
        ));
        assert!(matches!(
            Schedule::parse("0 4 * * *", Some("Europe/Berlin")).unwrap(),
            Schedule::Cron(_)
        ));
        assert!(matches!(
            Schedule::parse("@hourly", None).unwrap(),
            Schedule::Cron(_)
        ));
        let err = Schedule::parse("FINISHED, +1 FORTNIGHT", None).unwrap_err();
        assert_eq!(err.field(), Some("schedule"));
        assert!(
            err.to_string()
                .starts_with("schedule: \"+1 FORTNIGHT\" is not a modifier"),
            "{err}"
        );
        let err = Schedule::parse("0 25 * * *", None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "schedule: hour field: 25 is out of range 0-23"
        );
        let err = Schedule::parse("DAILY", Some("Europe/Berlin")).unwrap_err();
        assert_eq!(err.field(), Some("time_zone"));
        let err = Schedule::parse("@daily", Some("Atlantis/Central")).unwrap_err();
        assert_eq!(err.field(), Some("time_zone"));
    }
}
