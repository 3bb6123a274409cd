//! [`Modifier`]: one step of date arithmetic, with exactly the meaning SQLite's `datetime()` modifiers give it.
//!
//! SQLite works in the proleptic Gregorian calendar, UTC, and keeps the day of the month when it adds months or
//! years, letting a day past the month's end overflow into the next month (`2025-01-31, +1 month` is 2025-03-03).
//! Each step also drops fractional seconds, as Bedrock evaluates every step as `DATETIME(t, modifier)`, whose text
//! result has whole seconds. Times outside the years 0000 to 9999 are errors, where SQLite returns NULL.

use jiff::civil::{Date, DateTime, Time};
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};

use crate::error::{Error, Result};

/// A unit that can be added.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unit {
    Seconds,
    Minutes,
    Hours,
    Days,
    Months,
    Years,
}

/// A unit that a time can be truncated to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Start {
    /// Bedrock's own: SQLite has no `start of hour`.
    Hour,
    Day,
    Month,
    Year,
}

/// One date modifier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Modifier {
    /// `+N UNIT` or `-N UNIT`.
    Add(i64, Unit),
    /// `START OF UNIT`.
    StartOf(Start),
    /// `WEEKDAY N`: forward to the next day that is weekday `N` (0 is Sunday), or stay if it already is.
    Weekday(u8),
}

impl Modifier {
    /// Whether the modifier only moves time by a fixed amount (no snapping to a boundary).
    pub fn is_offset(self) -> bool {
        matches!(self, Modifier::Add(..))
    }

    /// Applies the modifier to `t`, then drops fractional seconds.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) on the field `repeat` when the result falls
    /// outside the years 0000 to 9999.
    pub fn apply(self, t: Timestamp) -> Result<Timestamp> {
        let out_of_range = || {
            Error::invalid(
                "repeat",
                "the next run falls outside the years 0000 to 9999",
            )
        };
        let dt = TimeZone::UTC.to_datetime(t);
        let moved = match self {
            Modifier::Add(n, unit @ (Unit::Seconds | Unit::Minutes | Unit::Hours | Unit::Days)) => {
                let seconds = match unit {
                    Unit::Seconds => n,
                    Unit::Minutes => n * 60,
                    Unit::Hours => n * 3600,
                    _ => n * 86_400,
                };
                return truncate_and_check(
                    t.checked_add(SignedDuration::from_secs(seconds))
                        .map_err(|_| out_of_range())?,
                );
            }
            Modifier::Add(n, Unit::Months) => add_months(dt, n).ok_or_else(out_of_range)?,
            Modifier::Add(n, Unit::Years) => {
                add_months(dt, n.checked_mul(12).ok_or_else(out_of_range)?)
                    .ok_or_else(out_of_range)?
            }
            Modifier::StartOf(Start::Hour) => dt
                .date()
                .to_datetime(Time::new(dt.hour(), 0, 0, 0).expect("a valid hour")),
            Modifier::StartOf(Start::Day) => dt.date().to_datetime(Time::midnight()),
            Modifier::StartOf(Start::Month) => {
                dt.date().first_of_month().to_datetime(Time::midnight())
            }
            Modifier::StartOf(Start::Year) => {
                dt.date().first_of_year().to_datetime(Time::midnight())
            }
            Modifier::Weekday(n) => {
                let today = i64::from(dt.weekday().to_sunday_zero_offset());
                let ahead = (i64::from(n) - today).rem_euclid(7);
                dt.checked_add(SignedDuration::from_secs(ahead * 86_400))
                    .map_err(|_| out_of_range())?
            }
        };
        let t = TimeZone::UTC
            .to_timestamp(moved)
            .map_err(|_| out_of_range())?;
        truncate_and_check(t)
    }
}

/// Rounds down to the whole second (before 1970 too: `as_second` would round toward 1970) and checks the year range
/// SQLite supports.
pub(crate) fn truncate_and_check(t: Timestamp) -> Result<Timestamp> {
    let whole = Timestamp::from_second(t.as_millisecond().div_euclid(1000)).map_err(|_| {
        Error::invalid(
            "repeat",
            "the next run falls outside the years 0000 to 9999",
        )
    })?;
    let year = TimeZone::UTC.to_datetime(whole).year();
    if !(0..=9999).contains(&year) {
        return Err(Error::invalid(
            "repeat",
            "the next run falls outside the years 0000 to 9999",
        ));
    }
    Ok(whole)
}

/// Adds months as SQLite does: the year and month move, the day of the month stays, and a day past the new
/// month's end overflows into the following month.
fn add_months(dt: DateTime, months: i64) -> Option<DateTime> {
    let index = i64::from(dt.year()) * 12 + i64::from(dt.month()) - 1 + months;
    let year = i16::try_from(index.div_euclid(12)).ok()?;
    let month = i8::try_from(index.rem_euclid(12) + 1).ok()?;
    let first = Date::new(year, month, 1).ok()?;
    let day = first
        .checked_add(jiff::Span::new().days(i64::from(dt.day() - 1)))
        .ok()?;
    Some(day.to_datetime(dt.time()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Timestamp {
        format!("{text}Z").parse().unwrap()
    }

    fn check(start: &str, modifier: Modifier, expected: &str) {
        let got = modifier.apply(at(start)).unwrap();
        assert_eq!(got, at(expected), "{start} {modifier:?}");
    }

    #[test]
    fn months_keep_the_day_and_overflow_like_sqlite() {
        check(
            "2025-01-31T10:00:00",
            Modifier::Add(1, Unit::Months),
            "2025-03-03T10:00:00",
        );
        check(
            "2024-01-31T10:00:00",
            Modifier::Add(1, Unit::Months),
            "2024-03-02T10:00:00",
        );
        check(
            "2024-03-31T00:00:00",
            Modifier::Add(-1, Unit::Months),
            "2024-03-02T00:00:00",
        );
        check(
            "2024-02-29T00:00:00",
            Modifier::Add(1, Unit::Years),
            "2025-03-01T00:00:00",
        );
        check(
            "2025-12-15T00:00:00",
            Modifier::Add(1, Unit::Months),
            "2026-01-15T00:00:00",
        );
        check(
            "2025-01-15T00:00:00",
            Modifier::Add(-13, Unit::Months),
            "2023-12-15T00:00:00",
        );
    }

    #[test]
    fn starts_and_weekdays() {
        check(
            "2025-06-18T13:45:12.345",
            Modifier::StartOf(Start::Hour),
            "2025-06-18T13:00:00",
        );
        check(
            "2025-06-18T13:45:12",
            Modifier::StartOf(Start::Day),
            "2025-06-18T00:00:00",
        );
        check(
            "2025-06-18T13:45:12",
            Modifier::StartOf(Start::Month),
            "2025-06-01T00:00:00",
        );
        check(
            "2025-06-18T13:45:12",
            Modifier::StartOf(Start::Year),
            "2025-01-01T00:00:00",
        );
        // 2025-06-18 is a Wednesday (3).
        check(
            "2025-06-18T13:45:12",
            Modifier::Weekday(3),
            "2025-06-18T13:45:12",
        );
        check(
            "2025-06-18T13:45:12",
            Modifier::Weekday(0),
            "2025-06-22T13:45:12",
        );
        check(
            "2025-06-18T13:45:12",
            Modifier::Weekday(1),
            "2025-06-23T13:45:12",
        );
    }

    #[test]
    fn fractional_seconds_are_dropped_and_range_is_checked() {
        check(
            "2025-06-18T13:45:12.999",
            Modifier::Add(1, Unit::Seconds),
            "2025-06-18T13:45:13",
        );
        let err = Modifier::Add(1, Unit::Years)
            .apply(at("9999-06-01T00:00:00"))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "repeat: the next run falls outside the years 0000 to 9999"
        );
    }
}
