//! [`Repeat`]: Bedrock's repeat syntax. A base (`SCHEDULED`, `STARTED`, `FINISHED`) and date modifiers, or a canned
//! schedule (`HOURLY`, `DAILY`, `WEEKLY`), validated as Bedrock validates them and evaluated as Bedrock evaluates
//! them, canned schedules and `SCHEDULED` catch-up included (see `shared/reference/bedrock-jobs.md`, §6).

use std::fmt;

use jiff::{SignedDuration, Timestamp};

use crate::error::{Error, Result};
use crate::schedule::modifier::{Modifier, Start, Unit};

/// The moment a repeat counts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RepeatBase {
    /// When the run was due, whatever time it actually ran.
    Scheduled,
    /// When the run started.
    Started,
    /// When the run finished.
    Finished,
}

/// A parsed repeat specification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repeat {
    kind: Kind,
    /// The specification as stored: upper-cased, as Bedrock stores it.
    text: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    Hourly,
    Daily,
    Weekly,
    Advanced {
        base: RepeatBase,
        modifiers: Vec<Modifier>,
    },
}

/// The moments a repeat can count from, for one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunTimes {
    /// When the run was due.
    pub scheduled: Timestamp,
    /// When it started, if it did.
    pub started: Option<Timestamp>,
    /// Now: when it finished (or was retried).
    pub now: Timestamp,
}

/// Intervals shorter than this skip missed slots under `SCHEDULED`; longer ones catch up one run at a time.
const CATCH_UP_LIMIT: SignedDuration = SignedDuration::from_hours(4);

const EXPECTED_MODIFIER: &str = "expected +N or -N followed by SECONDS, MINUTES, HOURS, DAYS, MONTHS or YEARS, \
     START OF HOUR, DAY, MONTH or YEAR, or WEEKDAY 0 to 6";

impl Repeat {
    /// Parses a repeat specification, case-insensitively, with Bedrock's rules: components are separated by
    /// commas, a component's leading spaces are dropped (its trailing spaces are not), empty components are
    /// dropped, and the base must be followed by at least one modifier.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) on the field `repeat`, naming the offending
    /// component and what was expected.
    pub fn parse(spec: &str) -> Result<Repeat> {
        let text = spec.to_uppercase();
        let kind = match text.as_str() {
            "HOURLY" => Kind::Hourly,
            "DAILY" => Kind::Daily,
            "WEEKLY" => Kind::Weekly,
            _ => parse_advanced(&text)?,
        };
        Ok(Repeat { kind, text })
    }

    /// The specification as stored (upper-cased).
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The base, for advanced specifications; `None` for canned ones.
    pub fn base(&self) -> Option<RepeatBase> {
        match &self.kind {
            Kind::Advanced { base, .. } => Some(*base),
            _ => None,
        }
    }

    /// When the next run is due, after a run with these times.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) on `repeat` for a `STARTED` base of a run that
    /// never started, or a result outside the years 0000 to 9999.
    pub fn next_run(&self, run: RunTimes) -> Result<Timestamp> {
        let (base, modifiers) = match &self.kind {
            // Canned schedules count from now and snap to a boundary (Bedrock's code, not its documentation).
            Kind::Hourly => {
                return chain(
                    run.now,
                    &[
                        Modifier::Add(1, Unit::Hours),
                        Modifier::StartOf(Start::Hour),
                    ],
                );
            }
            Kind::Daily => {
                return chain(
                    run.now,
                    &[Modifier::Add(1, Unit::Days), Modifier::StartOf(Start::Day)],
                );
            }
            Kind::Weekly => {
                let steps = [
                    Modifier::Add(1, Unit::Days),
                    Modifier::Weekday(0),
                    Modifier::StartOf(Start::Day),
                ];
                return chain(run.now, &steps);
            }
            Kind::Advanced { base, modifiers } => (*base, modifiers),
        };
        let from = match base {
            RepeatBase::Scheduled => run.scheduled,
            RepeatBase::Started => run.started.ok_or_else(|| {
                Error::invalid("repeat", "a STARTED repeat needs a run that has started")
            })?,
            RepeatBase::Finished => run.now,
        };
        let next = chain(from, modifiers)?;
        if base == RepeatBase::Scheduled
            && next <= run.now
            && modifiers.iter().all(|m| m.is_offset())
        {
            return Ok(catch_up(truncate(from), next, run.now));
        }
        Ok(next)
    }
}

impl Repeat {
    /// The next `count` run times after `from`, assuming each run starts when due and finishes at once: what
    /// people look at before they trust a specification.
    ///
    /// # Errors
    /// As [`Repeat::next_run`]; also when a run would not come after the one before (for example `SCHEDULED,
    /// START OF DAY`, which stays on the same midnight forever).
    pub fn next_runs(&self, from: Timestamp, count: usize) -> Result<Vec<Timestamp>> {
        let mut runs = Vec::with_capacity(count.min(1000));
        let mut last = from;
        for _ in 0..count {
            let next = self.next_run(RunTimes {
                scheduled: last,
                started: Some(last),
                now: last,
            })?;
            if next <= last {
                return Err(Error::invalid(
                    "repeat",
                    format!("{self} does not move forward: after {last} it gives {next}"),
                ));
            }
            runs.push(next);
            last = next;
        }
        Ok(runs)
    }
}

impl fmt::Display for Repeat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Applies modifiers left to right.
fn chain(from: Timestamp, modifiers: &[Modifier]) -> Result<Timestamp> {
    modifiers.iter().try_fold(from, |t, m| m.apply(t))
}

/// Rounds down to the whole second, as the first modifier step does.
fn truncate(t: Timestamp) -> Timestamp {
    Timestamp::from_second(t.as_millisecond().div_euclid(1000)).unwrap_or(t)
}

/// Bedrock's re-anchoring: a short interval that fell behind skips to the first slot after now on its phase.
fn catch_up(last: Timestamp, next: Timestamp, now: Timestamp) -> Timestamp {
    let interval = next.as_second() - last.as_second();
    if interval <= 0 || SignedDuration::from_secs(interval) >= CATCH_UP_LIMIT {
        return next;
    }
    let behind = now.as_second() - last.as_second();
    Timestamp::from_second(last.as_second() + (behind.div_euclid(interval) + 1) * interval)
        .unwrap_or(next)
}

fn parse_advanced(text: &str) -> Result<Kind> {
    let components: Vec<&str> = text
        .split(',')
        .map(|c| c.trim_start_matches(' '))
        .filter(|c| !c.is_empty())
        .collect();
    let Some((first, rest)) = components.split_first() else {
        return Err(Error::invalid(
            "repeat",
            "must not be empty; expected HOURLY, DAILY, WEEKLY or BASE, MODIFIER…",
        ));
    };
    let base = match *first {
        "SCHEDULED" => RepeatBase::Scheduled,
        "STARTED" => RepeatBase::Started,
        "FINISHED" => RepeatBase::Finished,
        other => {
            return Err(Error::invalid(
                "repeat",
                format!(
                    "{other:?} is not a base; expected HOURLY, DAILY, WEEKLY, or SCHEDULED, STARTED or FINISHED followed by modifiers"
                ),
            ));
        }
    };
    if rest.is_empty() {
        return Err(Error::invalid(
            "repeat",
            format!("{first} needs at least one modifier after it; {EXPECTED_MODIFIER}"),
        ));
    }
    let modifiers = rest
        .iter()
        .map(|c| {
            parse_modifier(c).ok_or_else(|| {
                Error::invalid(
                    "repeat",
                    format!("{c:?} is not a modifier; {EXPECTED_MODIFIER}"),
                )
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Kind::Advanced { base, modifiers })
}

/// Parses one upper-cased modifier exactly as Bedrock's grammar allows it.
fn parse_modifier(c: &str) -> Option<Modifier> {
    if let Some(unit) = c.strip_prefix("START OF ") {
        return match unit {
            "HOUR" => Some(Modifier::StartOf(Start::Hour)),
            "DAY" => Some(Modifier::StartOf(Start::Day)),
            "MONTH" => Some(Modifier::StartOf(Start::Month)),
            "YEAR" => Some(Modifier::StartOf(Start::Year)),
            _ => None,
        };
    }
    if let Some(day) = c.strip_prefix("WEEKDAY ") {
        return match day.as_bytes() {
            [d @ b'0'..=b'6'] => Some(Modifier::Weekday(d - b'0')),
            _ => None,
        };
    }
    let (sign, rest) = match c.as_bytes().first()? {
        b'+' => (1, &c[1..]),
        b'-' => (-1, &c[1..]),
        _ => return None,
    };
    let (digits, unit) = rest.split_once(' ')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let unit = match unit.strip_suffix('S').unwrap_or(unit) {
        "SECOND" => Unit::Seconds,
        "MINUTE" => Unit::Minutes,
        "HOUR" => Unit::Hours,
        "DAY" => Unit::Days,
        "MONTH" => Unit::Months,
        "YEAR" => Unit::Years,
        _ => return None,
    };
    let max_digits = if unit == Unit::Seconds { 8 } else { 3 };
    if digits.len() > max_digits {
        return None;
    }
    Some(Modifier::Add(sign * digits.parse::<i64>().ok()?, unit))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Timestamp {
        format!("{text}Z").parse().unwrap()
    }

    fn check_parse(spec: &str, expected: &str) {
        match Repeat::parse(spec) {
            Ok(r) => assert_eq!(format!("ok {}", r.as_str()), expected, "{spec}"),
            Err(e) => assert_eq!(e.to_string(), expected, "{spec}"),
        }
    }

    #[test]
    fn parses_as_bedrock_validates() {
        check_parse("finished, +1 minute", "ok FINISHED, +1 MINUTE");
        check_parse("hourly", "ok HOURLY");
        check_parse(
            "SCHEDULED, +1 DAY, START OF DAY, +4 HOURS",
            "ok SCHEDULED, +1 DAY, START OF DAY, +4 HOURS",
        );
        check_parse("FINISHED,,+1 HOUR", "ok FINISHED,,+1 HOUR");
        check_parse(
            "STARTED, +12345678 SECONDS, WEEKDAY 6, START OF HOUR",
            "ok STARTED, +12345678 SECONDS, WEEKDAY 6, START OF HOUR",
        );
        check_parse(
            "FINISHED , +1 HOUR",
            "repeat: \"FINISHED \" is not a base; expected HOURLY, DAILY, WEEKLY, or SCHEDULED, STARTED or FINISHED followed by modifiers",
        );
        check_parse(
            "FINISHED",
            &format!("repeat: FINISHED needs at least one modifier after it; {EXPECTED_MODIFIER}"),
        );
        for bad in [
            "1 HOUR",
            "+ 1 HOUR",
            "+1  HOUR",
            "+1000 DAYS",
            "+123456789 SECONDS",
            "WEEKDAY 7",
            "START OF WEEK",
            "+1 HOURZ",
            "+1 HOUR ",
        ] {
            check_parse(
                &format!("FINISHED, {bad}"),
                &format!(
                    "repeat: {:?} is not a modifier; {EXPECTED_MODIFIER}",
                    bad.to_uppercase()
                ),
            );
        }
        check_parse(
            "",
            "repeat: must not be empty; expected HOURLY, DAILY, WEEKLY or BASE, MODIFIER…",
        );
    }

    fn next(spec: &str, scheduled: &str, started: Option<&str>, now: &str) -> String {
        let run = RunTimes {
            scheduled: at(scheduled),
            started: started.map(at),
            now: at(now),
        };
        Repeat::parse(spec)
            .unwrap()
            .next_run(run)
            .unwrap()
            .to_string()
    }

    #[test]
    fn bases_count_from_their_moment() {
        // The seed's example: due 1:00pm, started 1:15pm, finished 1:45pm.
        let (due, started, finished) = (
            "2025-06-18T13:00:00",
            Some("2025-06-18T13:15:00"),
            "2025-06-18T13:45:00",
        );
        assert_eq!(
            next("SCHEDULED, +1 HOUR", due, started, finished),
            "2025-06-18T14:00:00Z"
        );
        assert_eq!(
            next("STARTED, +1 HOUR", due, started, finished),
            "2025-06-18T14:15:00Z"
        );
        assert_eq!(
            next("FINISHED, +1 HOUR", due, started, finished),
            "2025-06-18T14:45:00Z"
        );
        assert_eq!(
            next(
                "SCHEDULED, START OF DAY, +30 MINUTES, START OF HOUR, +5 MINUTES",
                due,
                started,
                finished
            ),
            "2025-06-18T00:05:00Z"
        );
    }

    #[test]
    fn canned_schedules_snap_from_now() {
        let now = "2025-06-18T13:45:12"; // a Wednesday
        assert_eq!(next("HOURLY", now, None, now), "2025-06-18T14:00:00Z");
        assert_eq!(next("DAILY", now, None, now), "2025-06-19T00:00:00Z");
        assert_eq!(next("WEEKLY", now, None, now), "2025-06-22T00:00:00Z");
        assert_eq!(
            next("WEEKLY", "2025-06-21T10:00:00", None, "2025-06-21T10:00:00"),
            "2025-06-22T00:00:00Z",
            "Saturday: tomorrow"
        );
        assert_eq!(
            next("WEEKLY", "2025-06-22T10:00:00", None, "2025-06-22T10:00:00"),
            "2025-06-29T00:00:00Z",
            "Sunday: next week"
        );
    }

    #[test]
    fn scheduled_catches_up_as_bedrock_does() {
        // Under 4 hours: skip to the first slot after now, on the original phase.
        assert_eq!(
            next(
                "SCHEDULED, +1 HOUR",
                "2025-06-18T10:20:00",
                None,
                "2025-06-18T15:05:00"
            ),
            "2025-06-18T15:20:00Z"
        );
        assert_eq!(
            next(
                "SCHEDULED, +15 MINUTES",
                "2025-06-18T10:00:00",
                None,
                "2025-06-18T10:30:00"
            ),
            "2025-06-18T10:45:00Z"
        );
        // Four hours or more: one run at a time, even in the past.
        assert_eq!(
            next(
                "SCHEDULED, +1 DAY",
                "2025-06-10T04:00:00",
                None,
                "2025-06-18T15:00:00"
            ),
            "2025-06-11T04:00:00Z"
        );
        // Snapping modifiers never skip ahead.
        assert_eq!(
            next(
                "SCHEDULED, +1 HOUR, START OF HOUR",
                "2025-06-18T10:20:00",
                None,
                "2025-06-18T15:05:00"
            ),
            "2025-06-18T11:00:00Z"
        );
    }

    #[test]
    fn next_runs_list_the_coming_slots() {
        let runs = |spec: &str, count| {
            Repeat::parse(spec)
                .unwrap()
                .next_runs(at("2025-01-30T10:00:00"), count)
                .map(|r| r.iter().map(|t| t.to_string()).collect::<Vec<_>>())
        };
        assert_eq!(
            runs("SCHEDULED, +1 DAY, START OF DAY, +4 HOURS", 3).unwrap(),
            [
                "2025-01-31T04:00:00Z",
                "2025-02-01T04:00:00Z",
                "2025-02-02T04:00:00Z"
            ]
        );
        assert_eq!(
            runs("scheduled, +1 month", 3).unwrap(),
            [
                "2025-03-02T10:00:00Z",
                "2025-04-02T10:00:00Z",
                "2025-05-02T10:00:00Z"
            ],
            "SQLite's month overflow, carried forward"
        );
        assert_eq!(
            runs("DAILY", 2).unwrap(),
            ["2025-01-31T00:00:00Z", "2025-02-01T00:00:00Z"]
        );
        assert_eq!(
            runs("SCHEDULED, START OF DAY", 2).unwrap_err().to_string(),
            "repeat: SCHEDULED, START OF DAY does not move forward: after 2025-01-30T10:00:00Z it gives 2025-01-30T00:00:00Z"
        );
    }

    #[test]
    fn started_needs_a_start() {
        let run = RunTimes {
            scheduled: at("2025-06-18T10:00:00"),
            started: None,
            now: at("2025-06-18T10:00:00"),
        };
        let err = Repeat::parse("STARTED, +1 HOUR")
            .unwrap()
            .next_run(run)
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "repeat: a STARTED repeat needs a run that has started"
        );
    }
}
