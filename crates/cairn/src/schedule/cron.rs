//! [`Cron`]: cron expressions in an IANA time zone, right across daylight-saving changes.
//!
//! Five fields (minute, hour, day of month, month, day of week) or six (seconds first), and the aliases `@yearly`,
//! `@annually`, `@monthly`, `@weekly`, `@daily`, `@midnight`, `@hourly`. Each field takes `*`, numbers, ranges
//! `a-b`, steps `*/n` and `a-b/n` and `a/n`, and lists; months and days take names (`JAN`, `MON`); Sunday is 0 or
//! 7. The day of month also takes `L` (the last day), `LW` (the last weekday) and `15W` (the weekday nearest the
//! 15th, within the month); the day of week takes `5L` (the month's last Friday) and `1#2` (its second Monday).
//! A step restricts its field even after `*`: `*/2` in the day of month is the 1st, 3rd, 5th and so on.
//! The two day fields combine as in Vixie cron: if either field's text begins with `*`, a day runs when it matches
//! both (`0 9 */2 * MON` is odd days that are Mondays; with a plain `*` that is simply the other field), otherwise
//! when it matches either (`0 9 13 * FRI` is the 13th and every Friday). A field that is `?` is `*`.
//!
//! Times are matched in local civil time. Across a clock change a schedule follows one of two rules, as in Debian's
//! cron (Vixie cron's `MIN_STAR`/`HR_STAR` jobs), by the text of its time fields:
//! - A *fixed-time* schedule, whose second, minute and hour fields do not begin with `*` (`30 2 * * *`,
//!   `0 0-23/2 * * *`, `@daily`), keeps to local time: the local times a clock change skips run once, at the
//!   instant the clock jumps (once however many of them match), and a local time that happens twice runs once, the
//!   first time.
//! - A *wildcard* schedule, where one of those fields begins with `*` (`*/30 * * * *`, `0 * * * *`, `@hourly`),
//!   follows real time: it runs whenever the local clock shows a matching time. A skipped local time does not run,
//!   and a repeated one runs again, so `*/30 * * * *` runs every 30 real minutes through the hour that repeats.
//!
//! Where this departs from Debian's cron: the skipped times of a fixed-time schedule run once at the jump together
//! (Debian runs each skipped minute's jobs in turn, so `0 2,3 * * *` runs twice at a 02:00 → 03:00 jump there and
//! once here); and a clock change is taken to come at least a day after the one before, as in every zone today, so
//! only the latest change decides what a fixed-time schedule has already run.
//!
//! `L`, `W` and `#` (which Vixie cron does not have) follow the same day rule: a field such as `L` or `5L` does not
//! begin with `*`, so `0 0 L * MON` runs on the last day and on every Monday, and `0 0 L * */2` on the last day when
//! it is a Sunday, Tuesday, Thursday or Saturday. They choose days only, and play no part in which rule a clock
//! change follows.

use std::fmt;

use jiff::civil::{Date, DateTime, Time};
use jiff::tz::{Offset, TimeZone};
use jiff::{RoundMode, SignedDuration, Span, Timestamp, TimestampRound, Unit};

use crate::error::{Error, Result};

/// How far ahead a schedule is searched before it is declared never to run: one full Gregorian cycle, after which
/// the calendar (weekdays included) repeats.
const SEARCH_YEARS: i64 = 400;

/// A parsed cron schedule in a time zone.
#[derive(Clone)]
pub struct Cron {
    seconds: u64,
    minutes: u64,
    hours: u64,
    months: u64,
    days: DayRule,
    /// A wildcard schedule (its second, minute or hour field begins with `*`) follows real time across clock
    /// changes; a fixed-time one keeps to local time (see the module's notes).
    wildcard: bool,
    tz: TimeZone,
    text: String,
    zone: String,
}

/// A stretch of real time with one UTC offset, from one clock change to the next.
struct Segment {
    /// The clock change it starts with, and the offset before it; `None` before the zone's first change.
    change: Option<(Timestamp, Offset)>,
    offset: Offset,
    /// The next clock change; `None` after the zone's last.
    end: Option<Timestamp>,
}

#[derive(Clone, Default)]
struct DayRule {
    /// Days of the month, bit 1 to 31.
    dom: u64,
    last_day: bool,
    last_weekday: bool,
    /// `NW`: the weekday nearest day N.
    nearest_weekday: Vec<i8>,
    /// Days of the week, bit 0 (Sunday) to 6.
    dow: u64,
    /// `NL`: the last such weekday of the month, bit per weekday.
    last_of_month: u64,
    /// `N#K`: the K-th such weekday of the month.
    nth: Vec<(u8, u8)>,
    /// The day-of-month field's text begins with `*` (or is `?`): Vixie cron's `DOM_STAR`.
    dom_star: bool,
    /// The day-of-week field's text begins with `*` (or is `?`): Vixie cron's `DOW_STAR`.
    dow_star: bool,
}

const FIELD_NAMES: [&str; 6] = [
    "second",
    "minute",
    "hour",
    "day of month",
    "month",
    "day of week",
];
const MONTHS: [&str; 12] = [
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];
const DAYS: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

fn invalid(rule: impl fmt::Display) -> Error {
    Error::invalid("cron", rule)
}

impl Cron {
    /// Parses `expression` for the IANA time zone `zone` (such as `Europe/Berlin`, or `UTC`).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) on `cron`, naming the field and token, or on
    /// `time_zone` for an unknown zone; also for a schedule that never runs (`0 0 30 2 *`).
    pub fn parse(expression: &str, zone: &str) -> Result<Cron> {
        let tz = TimeZone::get(zone).map_err(|_| {
            Error::invalid(
                "time_zone",
                format!("{zone:?} is not a known IANA time zone"),
            )
        })?;
        let text = expression.trim().to_owned();
        let expanded = match text.to_ascii_lowercase().as_str() {
            "@yearly" | "@annually" => "0 0 1 1 *".to_owned(),
            "@monthly" => "0 0 1 * *".to_owned(),
            "@weekly" => "0 0 * * 0".to_owned(),
            "@daily" | "@midnight" => "0 0 * * *".to_owned(),
            "@hourly" => "0 * * * *".to_owned(),
            other if other.starts_with('@') => {
                return Err(invalid(format!(
                    "{text:?} is not an alias; expected @yearly, @annually, @monthly, @weekly, @daily, @midnight or @hourly"
                )));
            }
            _ => text.to_ascii_uppercase(),
        };
        let fields: Vec<&str> = expanded.split_whitespace().collect();
        let fields: [&str; 6] = match fields.len() {
            5 => ["0", fields[0], fields[1], fields[2], fields[3], fields[4]],
            6 => [
                fields[0], fields[1], fields[2], fields[3], fields[4], fields[5],
            ],
            n => {
                return Err(invalid(format!(
                    "{text:?} has {n} fields; expected 5 (minute hour day-of-month month day-of-week) or 6 (seconds first)"
                )));
            }
        };
        let cron = Cron {
            seconds: parse_field(fields[0], 0, 0, 59, &[])?,
            minutes: parse_field(fields[1], 1, 0, 59, &[])?,
            hours: parse_field(fields[2], 2, 0, 23, &[])?,
            months: parse_field(fields[4], 4, 1, 12, &MONTHS)?,
            days: parse_days(fields[3], fields[5])?,
            // `@hourly` is `0 * * * *`, so it is a wildcard schedule, as Vixie cron's `HR_STAR` makes it.
            wildcard: fields[..3].iter().any(|field| is_star(field)),
            tz,
            text,
            zone: zone.to_owned(),
        };
        if cron.next_after(Timestamp::UNIX_EPOCH).is_none() {
            return Err(invalid(format!("{:?} never runs", cron.text)));
        }
        Ok(cron)
    }

    /// The expression as given.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The time zone's name.
    pub fn time_zone(&self) -> &str {
        &self.zone
    }

    /// The first run strictly after `after`, or `None` if there is none in the 400 years after it (the search
    /// stops at the end of 9999-12-30).
    pub fn next_after(&self, after: Timestamp) -> Option<Timestamp> {
        // Candidates are whole seconds, from the first after `after`.
        let mut from = after
            .checked_add(SignedDuration::from_secs(1))
            .ok()?
            .round(
                TimestampRound::new()
                    .smallest(Unit::Second)
                    .mode(RoundMode::Floor),
            )
            .ok()?;
        let end_of_range = Date::new(9999, 12, 31).expect("a valid date");
        let limit = self
            .tz
            .to_datetime(after)
            .date()
            .checked_add(Span::new().years(SEARCH_YEARS).days(1))
            .unwrap_or(end_of_range)
            .min(end_of_range)
            .to_datetime(Time::midnight());
        // Within a segment local time runs straight on; the two rules differ only where a segment starts.
        loop {
            let segment = self.segment_at(from);
            if let Some(run) = self.first_in(&segment, from, after, limit) {
                return Some(run);
            }
            from = segment.end?;
            if segment.offset.to_datetime(from) >= limit {
                return None;
            }
        }
    }

    /// The next `count` runs after `from`.
    pub fn next_runs(&self, from: Timestamp, count: usize) -> Vec<Timestamp> {
        let mut runs = Vec::with_capacity(count.min(1000));
        let mut last = from;
        while runs.len() < count {
            let Some(next) = self.next_after(last) else {
                break;
            };
            runs.push(next);
            last = next;
        }
        runs
    }

    /// The segment of constant offset that `t` falls in.
    fn segment_at(&self, t: Timestamp) -> Segment {
        // `preceding` finds changes strictly before its argument: look from just after `t`, so that a change at
        // `t` itself starts the segment.
        let change = t
            .checked_add(SignedDuration::from_nanos(1))
            .ok()
            .and_then(|just_after| self.tz.preceding(just_after).next())
            .map(|change| {
                let at = change.timestamp();
                let before = at - SignedDuration::from_nanos(1);
                (at, self.tz.to_offset(before))
            });
        Segment {
            change,
            offset: self.tz.to_offset(t),
            end: self.tz.following(t).next().map(|change| change.timestamp()),
        }
    }

    /// The first run in `segment` at or after `from` (a whole second within it) and strictly after `after`, if
    /// any comes before the local time `limit`.
    fn first_in(
        &self,
        segment: &Segment,
        from: Timestamp,
        after: Timestamp,
        limit: DateTime,
    ) -> Option<Timestamp> {
        let mut earliest = segment.offset.to_datetime(from);
        if let (false, Some((at, before))) = (self.wildcard, segment.change) {
            // The local time the clock reached at the change, and the one it showed after.
            let reached = before.to_datetime(at);
            let shown = segment.offset.to_datetime(at);
            if shown > reached && at > after && self.next_civil(reached, shown).is_some() {
                // A fixed-time schedule runs the local times the clock skipped once, at the jump.
                return Some(at);
            }
            // After the clock went back, the local times up to `reached` have run already, the first time.
            earliest = earliest.max(reached);
        }
        let until = segment
            .end
            .map_or(limit, |end| segment.offset.to_datetime(end).min(limit));
        let civil = self.next_civil(earliest, until)?;
        segment.offset.to_timestamp(civil).ok()
    }

    /// The first local time at or after `from` and before `until` that the fields match.
    fn next_civil(&self, from: DateTime, until: DateTime) -> Option<DateTime> {
        let mut date = from.date();
        while date <= until.date() {
            if self.months & (1 << date.month()) == 0 {
                date = date.last_of_month().tomorrow().ok()?;
                continue;
            }
            if self.days.matches(date) {
                let earliest = if date == from.date() {
                    from.time()
                } else {
                    Time::midnight()
                };
                if let Some(time) = self.first_time(earliest) {
                    let civil = date.to_datetime(time);
                    return (civil < until).then_some(civil);
                }
            }
            date = date.tomorrow().ok()?;
        }
        None
    }

    /// The first time of day at or after `from` that the second, minute and hour fields match.
    fn first_time(&self, from: Time) -> Option<Time> {
        let (hour, minute) = (from.hour(), from.minute());
        for h in bits(self.hours).filter(|&h| h >= hour) {
            for m in bits(self.minutes).filter(|&m| h > hour || m >= minute) {
                let later = (h, m) != (hour, minute);
                if let Some(s) = bits(self.seconds).find(|&s| later || s >= from.second()) {
                    return Time::new(h, m, s, 0).ok();
                }
            }
        }
        None
    }
}

impl DayRule {
    fn matches(&self, date: Date) -> bool {
        let day = date.day();
        let month_days = date.days_in_month();
        let weekday = date.weekday().to_sunday_zero_offset() as u8;
        let dom = self.dom & (1 << day) != 0
            || (self.last_day && day == month_days)
            || (self.last_weekday && Some(day) == nearest_weekday(date, month_days))
            || self
                .nearest_weekday
                .iter()
                .any(|&n| Some(day) == nearest_weekday(date, n));
        let dow = self.dow & (1 << weekday) != 0
            || (self.last_of_month & (1 << weekday) != 0 && day + 7 > month_days)
            || self
                .nth
                .iter()
                .any(|&(d, k)| d == weekday && (day - 1) / 7 + 1 == k as i8);
        // Vixie cron's rule: a field that begins with `*` still restricts by its step (`*/2` is the odd days), and
        // only decides whether the two fields are ANDed (either begins with `*`) or ORed (neither does). A plain
        // `*` matches every day, so ANDing with it leaves the other field.
        if self.dom_star || self.dow_star {
            dom && dow
        } else {
            dom || dow
        }
    }
}

/// The weekday nearest day `target` of `date`'s month, staying within the month; `None` if the month is shorter.
fn nearest_weekday(date: Date, target: i8) -> Option<i8> {
    let month_days = date.days_in_month();
    if target > month_days {
        return None;
    }
    let target_date = Date::new(date.year(), date.month(), target).ok()?;
    let weekday = target_date.weekday().to_sunday_zero_offset();
    Some(match weekday {
        6 if target == 1 => 3,                   // Saturday the 1st: Monday the 3rd
        6 => target - 1,                         // Saturday: Friday before
        0 if target == month_days => target - 2, // Sunday the last: Friday before
        0 => target + 1,                         // Sunday: Monday after
        _ => target,
    })
}

fn bits(mask: u64) -> impl Iterator<Item = i8> {
    (0..64)
        .filter(move |b| mask & (1 << b) != 0)
        .map(|b| b as i8)
}

/// Parses one plain field (`*`, lists, ranges, steps, names) into a bit mask.
fn parse_field(field: &str, index: usize, min: u8, max: u8, names: &[&str]) -> Result<u64> {
    let what = FIELD_NAMES[index];
    let value = |token: &str| -> Result<u8> {
        if let Some(i) = names.iter().position(|n| *n == token) {
            return Ok(i as u8 + min);
        }
        let n: u8 = token
            .parse::<u32>()
            .map(|n| n.min(255) as u8)
            .map_err(|_| {
                invalid(format!(
                    "{what} field: {token:?} is not a number{}",
                    if names.is_empty() { "" } else { " or a name" }
                ))
            })?;
        if !(min..=max).contains(&n) {
            return Err(invalid(format!(
                "{what} field: {n} is out of range {min}-{max}"
            )));
        }
        Ok(n)
    };
    let mut mask = 0u64;
    for part in field.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((range, step)) => {
                let step: u8 = step.parse().ok().filter(|s| *s > 0).ok_or_else(|| {
                    invalid(format!(
                        "{what} field: step {step:?} must be a positive number"
                    ))
                })?;
                (range, step)
            }
            None => (part, 1),
        };
        let (low, high) = match range {
            "*" | "?" => (min, max),
            _ => match range.split_once('-') {
                Some((a, b)) => (value(a)?, value(b)?),
                None if part.contains('/') => (value(range)?, max),
                None => {
                    let v = value(range)?;
                    (v, v)
                }
            },
        };
        if low > high {
            return Err(invalid(format!(
                "{what} field: range {range:?} runs backwards"
            )));
        }
        for v in (low..=high).step_by(step as usize) {
            mask |= 1 << v;
        }
    }
    Ok(mask)
}

/// Parses a day-of-week list into a mask of bits 0 (Sunday) to 6: 7 is Sunday too, also inside ranges (`5-7`).
fn parse_dow(field: &str) -> Result<u64> {
    let mask = parse_field(field, 5, 0, 7, &DAYS)?;
    Ok((mask & 0x7f) | ((mask >> 7) & 1))
}

/// Whether a field counts as `*` for Vixie cron's special cases: its text begins with `*` (so `*/2` does), or it
/// is `?`, which means `*`.
fn is_star(field: &str) -> bool {
    field.starts_with('*') || field == "?"
}

/// Parses the two day fields with their extensions (`L`, `W`, `#`).
fn parse_days(dom: &str, dow: &str) -> Result<DayRule> {
    let mut rule = DayRule {
        dom_star: is_star(dom),
        dow_star: is_star(dow),
        ..DayRule::default()
    };
    let mut plain = Vec::new();
    for part in dom.split(',') {
        match part {
            "L" => rule.last_day = true,
            "LW" => rule.last_weekday = true,
            _ if part.ends_with('W') => {
                let n: i8 = part[..part.len() - 1]
                    .parse()
                    .ok()
                    .filter(|n| (1..=31).contains(n))
                    .ok_or_else(|| {
                        invalid(format!(
                            "day of month field: {part:?} needs a day 1-31 before W"
                        ))
                    })?;
                rule.nearest_weekday.push(n);
            }
            _ => plain.push(part),
        }
    }
    if !plain.is_empty() {
        rule.dom = parse_field(&plain.join(","), 3, 1, 31, &[])?;
    }
    let mut plain = Vec::new();
    for part in dow.split(',') {
        if let Some(day) = part.strip_suffix('L').filter(|d| !d.is_empty()) {
            rule.last_of_month |= parse_dow(day)?;
        } else if let Some((day, k)) = part.split_once('#') {
            let mask = parse_dow(day)?;
            if mask.count_ones() != 1 {
                return Err(invalid(format!(
                    "day of week field: {part:?} needs a single day before #"
                )));
            }
            let d = mask.trailing_zeros() as u8;
            let k: u8 = k
                .parse()
                .ok()
                .filter(|k| (1..=5).contains(k))
                .ok_or_else(|| {
                    invalid(format!(
                        "day of week field: {part:?} needs an occurrence 1-5 after #"
                    ))
                })?;
            rule.nth.push((d, k));
        } else {
            plain.push(part);
        }
    }
    if !plain.is_empty() {
        rule.dow = parse_dow(&plain.join(","))?;
    }
    Ok(rule)
}

impl fmt::Debug for Cron {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cron")
            .field("expression", &self.text)
            .field("time_zone", &self.zone)
            .finish()
    }
}

impl fmt::Display for Cron {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.text, self.zone)
    }
}

impl PartialEq for Cron {
    fn eq(&self, other: &Cron) -> bool {
        self.text == other.text && self.zone == other.zone
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runs(expression: &str, zone: &str, from: &str, count: usize) -> Vec<String> {
        let cron = Cron::parse(expression, zone).unwrap();
        cron.next_runs(from.parse().unwrap(), count)
            .iter()
            .map(|t| t.to_string())
            .collect()
    }

    /// Asserts that `expression` in `zone` runs at the `expected` instants, in order, after `from`. Instants are
    /// RFC 3339, in UTC or with the local offset; a failure lists the actual runs in local time with their offset.
    fn check(expression: &str, zone: &str, from: &str, expected: &[&str]) {
        let cron = Cron::parse(expression, zone).unwrap();
        let tz = TimeZone::get(zone).unwrap();
        let actual = cron.next_runs(from.parse().unwrap(), expected.len());
        let expected: Vec<Timestamp> = expected.iter().map(|e| e.parse().unwrap()).collect();
        let local = |ts: &[Timestamp]| -> Vec<String> {
            ts.iter()
                .map(|t| t.to_zoned(tz.clone()).strftime("%FT%T%:z").to_string())
                .collect()
        };
        assert_eq!(
            local(&actual),
            local(&expected),
            "{expression:?} in {zone} after {from}"
        );
    }

    #[test]
    fn a_step_restricts_a_day_field_that_begins_with_a_star() {
        // 2025-06-01 is a Sunday.
        let cases: &[(&str, &str, &[&str])] = &[
            // Every other day is the odd days, so the 31st and the 1st run back to back.
            (
                "0 3 */2 * *",
                "2025-05-28T12:00:00Z",
                &[
                    "2025-05-29T03:00:00Z",
                    "2025-05-31T03:00:00Z",
                    "2025-06-01T03:00:00Z",
                    "2025-06-03T03:00:00Z",
                ],
            ),
            // Sunday, Tuesday, Thursday, Saturday.
            (
                "0 9 * * */2",
                "2025-06-01T12:00:00Z",
                &[
                    "2025-06-03T09:00:00Z",
                    "2025-06-05T09:00:00Z",
                    "2025-06-07T09:00:00Z",
                    "2025-06-08T09:00:00Z",
                ],
            ),
            (
                "0 12 */10 * *",
                "2025-05-20T00:00:00Z",
                &[
                    "2025-05-21T12:00:00Z",
                    "2025-05-31T12:00:00Z",
                    "2025-06-01T12:00:00Z",
                    "2025-06-11T12:00:00Z",
                ],
            ),
            // A range with a step, which never began with `*`.
            (
                "0 12 1-31/10 * *",
                "2025-05-20T00:00:00Z",
                &[
                    "2025-05-21T12:00:00Z",
                    "2025-05-31T12:00:00Z",
                    "2025-06-01T12:00:00Z",
                    "2025-06-11T12:00:00Z",
                ],
            ),
            // A day field that begins with `*` ANDs the two: odd days that are Mondays.
            (
                "0 0 */2 * MON",
                "2025-05-31T12:00:00Z",
                &[
                    "2025-06-09T00:00:00Z",
                    "2025-06-23T00:00:00Z",
                    "2025-07-07T00:00:00Z",
                    "2025-07-21T00:00:00Z",
                ],
            ),
            (
                "0 12 */10 * MON",
                "2025-05-31T12:00:00Z",
                &[
                    "2025-07-21T12:00:00Z",
                    "2025-08-11T12:00:00Z",
                    "2025-09-01T12:00:00Z",
                    "2025-12-01T12:00:00Z",
                ],
            ),
            // The same days without the `*` are ORed with Mondays.
            (
                "0 12 1-31/10 * MON",
                "2025-05-31T12:00:00Z",
                &[
                    "2025-06-01T12:00:00Z",
                    "2025-06-02T12:00:00Z",
                    "2025-06-09T12:00:00Z",
                    "2025-06-11T12:00:00Z",
                ],
            ),
            // Odd days that are Sunday, Wednesday or Saturday.
            (
                "0 0 */2 * */3",
                "2025-05-31T12:00:00Z",
                &[
                    "2025-06-01T00:00:00Z",
                    "2025-06-07T00:00:00Z",
                    "2025-06-11T00:00:00Z",
                    "2025-06-15T00:00:00Z",
                ],
            ),
            // The 13th when it is a Sunday, Tuesday, Thursday or Saturday; and the 13th or any Monday, Wednesday or
            // Friday.
            (
                "0 0 13 * */2",
                "2025-05-31T12:00:00Z",
                &[
                    "2025-07-13T00:00:00Z",
                    "2025-09-13T00:00:00Z",
                    "2025-11-13T00:00:00Z",
                ],
            ),
            (
                "0 0 13 * 1-5/2",
                "2025-06-09T12:00:00Z",
                &[
                    "2025-06-11T00:00:00Z",
                    "2025-06-13T00:00:00Z",
                    "2025-06-16T00:00:00Z",
                    "2025-06-18T00:00:00Z",
                ],
            ),
            // `L`, `W` and `#` do not begin with `*`: the last day or any Monday; the last day if it is a Sunday,
            // Tuesday, Thursday or Saturday; the month's last Friday if it is an odd day.
            (
                "0 0 L * MON",
                "2025-07-25T12:00:00Z",
                &[
                    "2025-07-28T00:00:00Z",
                    "2025-07-31T00:00:00Z",
                    "2025-08-04T00:00:00Z",
                ],
            ),
            (
                "0 0 L * */2",
                "2025-07-25T12:00:00Z",
                &[
                    "2025-07-31T00:00:00Z",
                    "2025-08-31T00:00:00Z",
                    "2025-09-30T00:00:00Z",
                    "2025-11-30T00:00:00Z",
                ],
            ),
            (
                "0 0 */2 * 5L",
                "2025-07-01T12:00:00Z",
                &[
                    "2025-07-25T00:00:00Z",
                    "2025-08-29T00:00:00Z",
                    "2025-10-31T00:00:00Z",
                    "2026-02-27T00:00:00Z",
                ],
            ),
            // February 1st only: `*/30` is the 1st and the 31st.
            (
                "0 0 */30 2 *",
                "2025-01-15T00:00:00Z",
                &["2025-02-01T00:00:00Z", "2026-02-01T00:00:00Z"],
            ),
        ];
        for (expression, from, expected) in cases {
            check(expression, "UTC", from, expected);
        }
        assert_eq!(
            Cron::parse("0 0 30/5 2 *", "UTC").unwrap_err().to_string(),
            "cron: \"0 0 30/5 2 *\" never runs"
        );
    }

    #[test]
    fn new_york_spring_gap_runs_once_at_the_jump() {
        // 2025-03-09: 02:00 EST jumps to 03:00 EDT (07:00Z). 02:30 does not exist that day.
        assert_eq!(
            runs("30 2 * * *", "America/New_York", "2025-03-08T12:00:00Z", 3),
            [
                "2025-03-09T07:00:00Z",
                "2025-03-10T06:30:00Z",
                "2025-03-11T06:30:00Z"
            ]
        );
        // Four skipped times of a fixed-time schedule, one run. (`*/15 2 * * *` is a wildcard schedule: it does
        // not run that day; see `wildcard_schedules_follow_real_time_across_clock_changes`.)
        assert_eq!(
            runs(
                "0,15,30,45 2 * * *",
                "America/New_York",
                "2025-03-09T06:00:00Z",
                2
            ),
            ["2025-03-09T07:00:00Z", "2025-03-10T06:00:00Z"]
        );
    }

    #[test]
    fn a_time_at_the_very_start_of_a_gap_still_runs_that_day() {
        assert_eq!(
            runs("0 2 * * *", "America/New_York", "2025-03-08T12:00:00Z", 2),
            ["2025-03-09T07:00:00Z", "2025-03-10T06:00:00Z"]
        );
        assert_eq!(
            runs("0 2 * * *", "Europe/Berlin", "2025-03-29T12:00:00Z", 2),
            ["2025-03-30T01:00:00Z", "2025-03-31T00:00:00Z"]
        );
        // Chile springs forward at midnight: 2025-09-07 00:00 does not exist.
        assert_eq!(
            runs("0 0 * * *", "America/Santiago", "2025-09-05T12:00:00Z", 3),
            [
                "2025-09-06T04:00:00Z",
                "2025-09-07T04:00:00Z",
                "2025-09-08T03:00:00Z"
            ]
        );
    }

    /// Clock changes, in 2025 and 2026: Berlin springs forward at 01:00Z on 2025-03-30 (02:00 CET is 03:00 CEST)
    /// and falls back at 01:00Z on 2025-10-26 (03:00 CEST is 02:00 CET again); Auckland springs forward at 14:00Z
    /// on 2025-09-27 (02:00 NZST is 03:00 NZDT) and falls back at 14:00Z on 2026-04-04 (03:00 NZDT is 02:00 NZST
    /// again); Lord Howe Island moves by half an hour, forward at 15:30Z on 2025-10-04 (02:00 +10:30 is 02:30 +11:00)
    /// and back at 15:00Z on 2026-04-04 (02:00 +11:00 is 01:30 +10:30 again).
    #[test]
    fn fixed_time_schedules_keep_to_local_time_across_clock_changes() {
        let cases: &[(&str, &str, &str, &[&str])] = &[
            // A skipped local time runs at the jump.
            (
                "30 2 * * *",
                "Europe/Berlin",
                "2025-03-29T12:00:00Z",
                &["2025-03-30T03:00:00+02:00", "2025-03-31T02:30:00+02:00"],
            ),
            (
                "30 2 * * *",
                "Pacific/Auckland",
                "2025-09-27T00:00:00Z",
                &["2025-09-28T03:00:00+13:00", "2025-09-29T02:30:00+13:00"],
            ),
            (
                "15 2 * * *",
                "Australia/Lord_Howe",
                "2025-10-04T00:00:00Z",
                &["2025-10-05T02:30:00+11:00", "2025-10-06T02:15:00+11:00"],
            ),
            // 02:45 is not skipped on Lord Howe Island.
            (
                "45 2 * * *",
                "Australia/Lord_Howe",
                "2025-10-04T00:00:00Z",
                &["2025-10-05T02:45:00+11:00", "2025-10-06T02:45:00+11:00"],
            ),
            // Several skipped times run once.
            (
                "0,15,30,45 2 * * *",
                "Europe/Berlin",
                "2025-03-29T12:00:00Z",
                &["2025-03-30T03:00:00+02:00", "2025-03-31T02:00:00+02:00"],
            ),
            // A repeated local time runs the first time only.
            (
                "30 2 * * *",
                "Europe/Berlin",
                "2025-10-25T12:00:00Z",
                &["2025-10-26T02:30:00+02:00", "2025-10-27T02:30:00+01:00"],
            ),
            (
                "30 2 * * *",
                "Pacific/Auckland",
                "2026-04-04T00:00:00Z",
                &["2026-04-05T02:30:00+13:00", "2026-04-06T02:30:00+12:00"],
            ),
            (
                "45 1 * * *",
                "Australia/Lord_Howe",
                "2026-04-04T00:00:00Z",
                &["2026-04-05T01:45:00+11:00", "2026-04-06T01:45:00+10:30"],
            ),
            // A range of hours is not `*`: every hour by local time, 02:00 once.
            (
                "0 0-23 * * *",
                "Europe/Berlin",
                "2025-10-25T23:30:00Z",
                &["2025-10-26T02:00:00+02:00", "2025-10-26T03:00:00+01:00"],
            ),
            // Europe changes its clocks on the last Sunday of March and of October: `L` leaves the rule as it is.
            (
                "30 2 * 3,10 7L",
                "Europe/Berlin",
                "2025-03-29T12:00:00Z",
                &[
                    "2025-03-30T03:00:00+02:00",
                    "2025-10-26T02:30:00+02:00",
                    "2026-03-29T03:00:00+02:00",
                ],
            ),
            // `@daily` is a fixed-time schedule: Chile springs forward at midnight, so 2025-09-07 runs at the jump.
            (
                "@daily",
                "America/Santiago",
                "2025-09-06T12:00:00Z",
                &["2025-09-07T01:00:00-03:00", "2025-09-08T00:00:00-03:00"],
            ),
        ];
        for (expression, zone, from, expected) in cases {
            check(expression, zone, from, expected);
        }
    }

    /// The clock changes of `fixed_time_schedules_keep_to_local_time_across_clock_changes`.
    #[test]
    fn wildcard_schedules_follow_real_time_across_clock_changes() {
        let cases: &[(&str, &str, &str, &[&str])] = &[
            // Springing forward: a skipped local time does not run, and nothing runs at the jump.
            // The example: no run at 03:00 NZDT, 12 minutes after the last.
            (
                "48 * * * *",
                "Pacific/Auckland",
                "2025-09-27T13:30:00Z",
                &[
                    "2025-09-28T01:48:00+12:00",
                    "2025-09-28T03:48:00+13:00",
                    "2025-09-28T04:48:00+13:00",
                ],
            ),
            (
                "15 * * * *",
                "Europe/Berlin",
                "2025-03-29T23:30:00Z",
                &["2025-03-30T01:15:00+01:00", "2025-03-30T03:15:00+02:00"],
            ),
            (
                "*/30 * * * *",
                "Europe/Berlin",
                "2025-03-30T00:10:00Z",
                &[
                    "2025-03-30T01:30:00+01:00",
                    "2025-03-30T03:00:00+02:00",
                    "2025-03-30T03:30:00+02:00",
                ],
            ),
            (
                "@hourly",
                "Europe/Berlin",
                "2025-03-29T23:30:00Z",
                &[
                    "2025-03-30T01:00:00+01:00",
                    "2025-03-30T03:00:00+02:00",
                    "2025-03-30T04:00:00+02:00",
                ],
            ),
            // Every minute of 02:xx, which 2025-03-30 does not have.
            (
                "* 2 * * *",
                "Europe/Berlin",
                "2025-03-29T12:00:00Z",
                &["2025-03-31T02:00:00+02:00", "2025-03-31T02:01:00+02:00"],
            ),
            (
                "*/15 2 * * *",
                "America/New_York",
                "2025-03-09T06:00:00Z",
                &["2025-03-10T02:00:00-04:00", "2025-03-10T02:15:00-04:00"],
            ),
            (
                "*/30 * * * *",
                "Australia/Lord_Howe",
                "2025-10-04T14:50:00Z",
                &[
                    "2025-10-05T01:30:00+10:30",
                    "2025-10-05T02:30:00+11:00",
                    "2025-10-05T03:00:00+11:00",
                ],
            ),
            (
                "@hourly",
                "Australia/Lord_Howe",
                "2025-10-04T14:00:00Z",
                &["2025-10-05T01:00:00+10:30", "2025-10-05T03:00:00+11:00"],
            ),
            // Falling back: the repeated hour runs again.
            // The example: every 30 real minutes throughout.
            (
                "*/30 * * * *",
                "Europe/Berlin",
                "2025-10-25T23:10:00Z",
                &[
                    "2025-10-26T01:30:00+02:00",
                    "2025-10-26T02:00:00+02:00",
                    "2025-10-26T02:30:00+02:00",
                    "2025-10-26T02:00:00+01:00",
                    "2025-10-26T02:30:00+01:00",
                    "2025-10-26T03:00:00+01:00",
                ],
            ),
            // Starting in the second pass.
            (
                "*/30 * * * *",
                "Europe/Berlin",
                "2025-10-26T01:10:00Z",
                &["2025-10-26T02:30:00+01:00", "2025-10-26T03:00:00+01:00"],
            ),
            (
                "@hourly",
                "Europe/Berlin",
                "2025-10-25T23:30:00Z",
                &[
                    "2025-10-26T02:00:00+02:00",
                    "2025-10-26T02:00:00+01:00",
                    "2025-10-26T03:00:00+01:00",
                ],
            ),
            (
                "0 * * * *",
                "America/New_York",
                "2025-11-02T04:30:00Z",
                &[
                    "2025-11-02T01:00:00-04:00",
                    "2025-11-02T01:00:00-05:00",
                    "2025-11-02T02:00:00-05:00",
                ],
            ),
            (
                "48 * * * *",
                "Pacific/Auckland",
                "2026-04-04T13:00:00Z",
                &[
                    "2026-04-05T02:48:00+13:00",
                    "2026-04-05T02:48:00+12:00",
                    "2026-04-05T03:48:00+12:00",
                ],
            ),
            // Lord Howe Island repeats only half an hour, 01:30 to 02:00.
            (
                "*/30 * * * *",
                "Australia/Lord_Howe",
                "2026-04-04T14:10:00Z",
                &[
                    "2026-04-05T01:30:00+11:00",
                    "2026-04-05T01:30:00+10:30",
                    "2026-04-05T02:00:00+10:30",
                    "2026-04-05T02:30:00+10:30",
                ],
            ),
            (
                "45 * * * *",
                "Australia/Lord_Howe",
                "2026-04-04T13:30:00Z",
                &[
                    "2026-04-05T00:45:00+11:00",
                    "2026-04-05T01:45:00+11:00",
                    "2026-04-05T01:45:00+10:30",
                    "2026-04-05T02:45:00+10:30",
                ],
            ),
            (
                "@hourly",
                "Australia/Lord_Howe",
                "2026-04-04T13:30:00Z",
                &[
                    "2026-04-05T01:00:00+11:00",
                    "2026-04-05T02:00:00+10:30",
                    "2026-04-05T03:00:00+10:30",
                ],
            ),
            // Europe changes its clocks on the last Sunday of March and of October: this never runs in March.
            (
                "*/30 2 * 3,10 7L",
                "Europe/Berlin",
                "2025-03-29T12:00:00Z",
                &[
                    "2025-10-26T02:00:00+02:00",
                    "2025-10-26T02:30:00+02:00",
                    "2025-10-26T02:00:00+01:00",
                    "2025-10-26T02:30:00+01:00",
                    "2026-10-25T02:00:00+02:00",
                ],
            ),
            // A seconds field that begins with `*` makes a wildcard schedule too.
            (
                "*/20 30 2 * * *",
                "Europe/Berlin",
                "2025-03-29T12:00:00Z",
                &["2025-03-31T02:30:00+02:00", "2025-03-31T02:30:20+02:00"],
            ),
        ];
        for (expression, zone, from, expected) in cases {
            check(expression, zone, from, expected);
        }
    }

    #[test]
    fn sunday_is_seven_inside_ranges_too() {
        assert_eq!(
            runs("0 0 * * 0-7", "UTC", "2025-06-01T12:00:00Z", 2),
            ["2025-06-02T00:00:00Z", "2025-06-03T00:00:00Z"]
        );
        // Friday to Sunday: 2025-06-06 is a Friday.
        assert_eq!(
            runs("0 0 * * 5-7", "UTC", "2025-06-02T00:00:00Z", 4),
            [
                "2025-06-06T00:00:00Z",
                "2025-06-07T00:00:00Z",
                "2025-06-08T00:00:00Z",
                "2025-06-13T00:00:00Z"
            ]
        );
        assert_eq!(
            Cron::parse("0 0 * * MON-FRI#2", "UTC")
                .unwrap_err()
                .to_string(),
            "cron: day of week field: \"MON-FRI#2\" needs a single day before #"
        );
        assert_eq!(
            Cron::parse("300 * * * *", "UTC").unwrap_err().to_string(),
            "cron: minute field: 255 is out of range 0-59"
        );
    }

    #[test]
    fn new_york_autumn_fold_runs_once_the_first_time() {
        // 2025-11-02: 02:00 EDT falls back to 01:00 EST; 01:30 happens at 05:30Z and again at 06:30Z.
        assert_eq!(
            runs("30 1 * * *", "America/New_York", "2025-11-01T12:00:00Z", 2),
            ["2025-11-02T05:30:00Z", "2025-11-03T06:30:00Z"]
        );
        // Every hour by local time: 01:00 runs once (05:00Z, EDT), so the next run is 02:00 EST. (`0 * * * *` is a
        // wildcard schedule, which runs at 01:00 EST too.)
        assert_eq!(
            runs(
                "0 0-23 * * *",
                "America/New_York",
                "2025-11-02T04:30:00Z",
                2
            ),
            ["2025-11-02T05:00:00Z", "2025-11-02T07:00:00Z"]
        );
        // Starting inside the second 01:xx, the repeated 01:30 does not run again.
        assert_eq!(
            runs("30 1 * * *", "America/New_York", "2025-11-02T06:10:00Z", 1),
            ["2025-11-03T06:30:00Z"]
        );
    }

    #[test]
    fn berlin_4am_keeps_local_time_across_both_changes() {
        assert_eq!(
            runs("0 4 * * *", "Europe/Berlin", "2025-03-28T12:00:00Z", 3),
            [
                "2025-03-29T03:00:00Z",
                "2025-03-30T02:00:00Z",
                "2025-03-31T02:00:00Z"
            ]
        );
        assert_eq!(
            runs("0 4 * * *", "Europe/Berlin", "2025-10-25T12:00:00Z", 2),
            ["2025-10-26T03:00:00Z", "2025-10-27T03:00:00Z"]
        );
        // 2025-03-30 02:30 is skipped (jump at 01:00Z); 2025-10-26 02:30 happens twice (00:30Z and 01:30Z).
        assert_eq!(
            runs("30 2 * * *", "Europe/Berlin", "2025-03-29T12:00:00Z", 1),
            ["2025-03-30T01:00:00Z"]
        );
        assert_eq!(
            runs("30 2 * * *", "Europe/Berlin", "2025-10-25T12:00:00Z", 2),
            ["2025-10-26T00:30:00Z", "2025-10-27T01:30:00Z"]
        );
    }

    #[test]
    fn last_days_and_weekdays() {
        assert_eq!(
            runs("0 0 L * *", "UTC", "2024-01-15T00:00:00Z", 4),
            [
                "2024-01-31T00:00:00Z",
                "2024-02-29T00:00:00Z",
                "2024-03-31T00:00:00Z",
                "2024-04-30T00:00:00Z"
            ]
        );
        // May 31 2025 is a Saturday, Aug 31 a Sunday: the last weekday is the Friday before.
        assert_eq!(
            runs("0 0 LW 5 *", "UTC", "2025-01-01T00:00:00Z", 1),
            ["2025-05-30T00:00:00Z"]
        );
        assert_eq!(
            runs("0 0 LW 8 *", "UTC", "2025-01-01T00:00:00Z", 1),
            ["2025-08-29T00:00:00Z"]
        );
        // March 15 2025 is a Saturday (Friday 14th), June 15 a Sunday (Monday 16th).
        assert_eq!(
            runs("0 0 15W 3 *", "UTC", "2025-01-01T00:00:00Z", 1),
            ["2025-03-14T00:00:00Z"]
        );
        assert_eq!(
            runs("0 0 15W 6 *", "UTC", "2025-01-01T00:00:00Z", 1),
            ["2025-06-16T00:00:00Z"]
        );
        // November 1 2025 is a Saturday: the nearest weekday within the month is Monday the 3rd.
        assert_eq!(
            runs("0 0 1W 11 *", "UTC", "2025-01-01T00:00:00Z", 1),
            ["2025-11-03T00:00:00Z"]
        );
        // The last Friday, and the second Monday.
        assert_eq!(
            runs("0 0 * * 5L", "UTC", "2025-01-01T00:00:00Z", 2),
            ["2025-01-31T00:00:00Z", "2025-02-28T00:00:00Z"]
        );
        assert_eq!(
            runs("0 0 * * MON#2", "UTC", "2025-01-01T00:00:00Z", 2),
            ["2025-01-13T00:00:00Z", "2025-02-10T00:00:00Z"]
        );
    }

    #[test]
    fn both_day_fields_restricted_means_either() {
        // The 13th or any Friday: Friday June 6, then Friday the 13th, then Friday the 20th.
        assert_eq!(
            runs("0 0 13 * fri", "UTC", "2025-06-01T00:00:00Z", 3),
            [
                "2025-06-06T00:00:00Z",
                "2025-06-13T00:00:00Z",
                "2025-06-20T00:00:00Z"
            ]
        );
        // With the day of month `*`, only the day of week counts: Fridays in June.
        assert_eq!(
            runs("0 9 * 6 5", "UTC", "2025-06-01T00:00:00Z", 1),
            ["2025-06-06T09:00:00Z"]
        );
    }

    #[test]
    fn aliases_seconds_steps_and_names() {
        assert_eq!(
            runs("@hourly", "UTC", "2025-06-01T10:15:00Z", 2),
            ["2025-06-01T11:00:00Z", "2025-06-01T12:00:00Z"]
        );
        assert_eq!(
            runs("@monthly", "UTC", "2025-06-15T00:00:00Z", 1),
            ["2025-07-01T00:00:00Z"]
        );
        assert_eq!(
            runs("*/20 * * * * *", "UTC", "2025-06-01T10:15:05Z", 3),
            [
                "2025-06-01T10:15:20Z",
                "2025-06-01T10:15:40Z",
                "2025-06-01T10:16:00Z"
            ]
        );
        assert_eq!(
            runs("0 1 * * 1-5/2", "UTC", "2025-06-01T00:00:00Z", 2),
            ["2025-06-02T01:00:00Z", "2025-06-04T01:00:00Z"]
        );
        assert_eq!(
            runs("0 0 1 jan-mar/2 *", "UTC", "2025-01-02T00:00:00Z", 1),
            ["2025-03-01T00:00:00Z"]
        );
        assert_eq!(
            runs("0 0 * * 7", "UTC", "2025-06-01T00:00:00Z", 1),
            ["2025-06-08T00:00:00Z"],
            "7 is Sunday"
        );
    }

    #[test]
    fn bad_expressions_name_the_field_and_rule() {
        let err = |e: &str, zone: &str| Cron::parse(e, zone).unwrap_err().to_string();
        assert_eq!(
            err("61 * * * *", "UTC"),
            "cron: minute field: 61 is out of range 0-59"
        );
        assert_eq!(
            err("* * * *", "UTC"),
            "cron: \"* * * *\" has 4 fields; expected 5 (minute hour day-of-month month day-of-week) or 6 (seconds first)"
        );
        assert_eq!(err("0 0 30 2 *", "UTC"), "cron: \"0 0 30 2 *\" never runs");
        assert_eq!(
            err("0 0 * * FOO", "UTC"),
            "cron: day of week field: \"FOO\" is not a number or a name"
        );
        assert_eq!(
            err("0 0 32W * *", "UTC"),
            "cron: day of month field: \"32W\" needs a day 1-31 before W"
        );
        assert_eq!(
            err("*/0 * * * *", "UTC"),
            "cron: minute field: step \"0\" must be a positive number"
        );
        assert_eq!(
            err("5-1 * * * *", "UTC"),
            "cron: minute field: range \"5-1\" runs backwards"
        );
        assert_eq!(
            err("@sometimes", "UTC").split(';').next().unwrap(),
            "cron: \"@sometimes\" is not an alias"
        );
        assert_eq!(
            err("0 0 * * *", "Mars/Olympus"),
            "time_zone: \"Mars/Olympus\" is not a known IANA time zone"
        );
    }

    /// A model of the rules to test against, sharing nothing with the code under test: the fields as generated
    /// rather than as parsed, matched item by item, and a walk through real time, minute by minute, that applies the
    /// rules as the module's notes state them.
    mod model {
        use jiff::civil::DateTime;
        use jiff::tz::TimeZone;
        use jiff::{SignedDuration, Timestamp};
        use proptest::prelude::*;

        /// One item of a field's list.
        #[derive(Clone, Debug)]
        enum Item {
            Star,
            StarStep(u8),
            Value(u8),
            Range(u8, u8),
            RangeStep(u8, u8, u8),
        }

        /// A field as a list of items, with its range.
        #[derive(Clone, Debug)]
        struct Field {
            min: u8,
            items: Vec<Item>,
        }

        impl Field {
            fn text(&self) -> String {
                let items: Vec<String> = self
                    .items
                    .iter()
                    .map(|item| match *item {
                        Item::Star => "*".to_owned(),
                        Item::StarStep(n) => format!("*/{n}"),
                        Item::Value(v) => v.to_string(),
                        Item::Range(a, b) => format!("{a}-{b}"),
                        Item::RangeStep(a, b, n) => format!("{a}-{b}/{n}"),
                    })
                    .collect();
                items.join(",")
            }

            fn begins_with_star(&self) -> bool {
                matches!(self.items[0], Item::Star | Item::StarStep(_))
            }

            fn has(&self, v: i8) -> bool {
                let v = v as u8;
                self.items.iter().any(|item| match *item {
                    Item::Star => true,
                    Item::StarStep(n) => (v - self.min).is_multiple_of(n),
                    Item::Value(x) => v == x,
                    Item::Range(a, b) => (a..=b).contains(&v),
                    Item::RangeStep(a, b, n) => (a..=b).contains(&v) && (v - a).is_multiple_of(n),
                })
            }
        }

        /// A field of `min..=max`, its values (in values, ranges and their steps) drawn from `value`. An item is `*`
        /// or `*/n` with weight `stars` each, against 2 for a value and 1 each for a range with and without a step.
        fn field(
            min: u8,
            max: u8,
            value: impl Strategy<Value = u8> + Clone,
            stars: u32,
        ) -> impl Strategy<Value = Field> {
            let item = prop_oneof![
                stars => Just(Item::Star),
                stars => (1..=max).prop_map(Item::StarStep),
                2 => value.clone().prop_map(Item::Value),
                1 => (value.clone(), value.clone()).prop_map(|(a, b)| Item::Range(a.min(b), a.max(b))),
                1 => (value.clone(), value, 1..=max)
                    .prop_map(|(a, b, n)| Item::RangeStep(a.min(b), a.max(b), n)),
            ];
            prop::collection::vec(item, 1..=3).prop_map(move |items| Field { min, items })
        }

        /// A five-field schedule.
        #[derive(Clone, Debug)]
        pub struct Schedule {
            minute: Field,
            hour: Field,
            dom: Field,
            month: Field,
            dow: Field,
        }

        /// Fixed-time and wildcard schedules about equally; mostly every month and often every day, so that most
        /// schedules run within days; hours from 23:00 to 03:00 half the time, when clocks change.
        pub fn schedule() -> impl Strategy<Value = Schedule> {
            let every_month = Field {
                min: 1,
                items: vec![Item::Star],
            };
            let month = prop_oneof![3 => Just(every_month), 1 => field(1, 12, 1..=12u8, 3)];
            let hour = prop_oneof![0..=23u8, prop::sample::select(vec![23u8, 0, 1, 2, 3])];
            let fields = (
                field(0, 59, 0..=59u8, 1),
                field(0, 23, hour, 1),
                field(1, 31, 1..=31u8, 3),
                month,
                field(0, 7, 0..=7u8, 3),
            );
            fields.prop_map(|(minute, hour, dom, month, dow)| Schedule {
                minute,
                hour,
                dom,
                month,
                dow,
            })
        }

        impl Schedule {
            pub fn text(&self) -> String {
                let fields = [&self.minute, &self.hour, &self.dom, &self.month, &self.dow];
                fields.map(Field::text).join(" ")
            }

            /// Vixie cron's `MIN_STAR`/`HR_STAR`.
            fn is_wildcard(&self) -> bool {
                self.minute.begins_with_star() || self.hour.begins_with_star()
            }

            fn matches(&self, civil: DateTime) -> bool {
                let weekday = civil.weekday().to_sunday_zero_offset();
                let dom = self.dom.has(civil.day());
                let dow = self.dow.has(weekday) || (weekday == 0 && self.dow.has(7));
                let day = if self.dom.begins_with_star() || self.dow.begins_with_star() {
                    dom && dow
                } else {
                    dom || dow
                };
                self.minute.has(civil.minute())
                    && self.hour.has(civil.hour())
                    && self.month.has(civil.month())
                    && day
            }

            /// The runs strictly after `start` and no later than `end`, at most `count` of them.
            pub fn runs(
                &self,
                tz: &TimeZone,
                start: Timestamp,
                end: Timestamp,
                count: usize,
            ) -> Vec<Timestamp> {
                let minute = SignedDuration::from_mins(1);
                // Start three hours early, so that the first pass of a repeated hour has been seen (Troll repeats
                // two).
                let mut t = Timestamp::from_second(start.as_second().div_euclid(60) * 60).unwrap()
                    - SignedDuration::from_hours(3);
                let mut previous: Option<DateTime> = None;
                let mut latest: Option<DateTime> = None;
                let mut runs = Vec::new();
                while t <= end && runs.len() < count {
                    let civil = tz.to_datetime(t);
                    let mut runs_now = self.matches(civil);
                    if !self.is_wildcard() {
                        // A local time the clock showed before runs no more.
                        if latest.is_some_and(|latest| civil <= latest) {
                            runs_now = false;
                        }
                        // The local times the clock skipped run now, once.
                        if let Some(previous) = previous {
                            let mut skipped = previous + minute;
                            while skipped < civil {
                                runs_now |= self.matches(skipped);
                                skipped += minute;
                            }
                        }
                    }
                    if runs_now && t > start {
                        runs.push(t);
                    }
                    previous = Some(civil);
                    latest = latest.max(Some(civil));
                    t += minute;
                }
                runs
            }
        }
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        /// Northern and southern zones, zones that change at midnight (Santiago, Havana, Cairo), by half an hour
        /// (Lord Howe) or by two hours (Troll), with half-hour and 45-minute offsets, and zones without changes.
        const ZONES: [&str; 22] = [
            "UTC",
            "Europe/Berlin",
            "Europe/London",
            "Europe/Dublin",
            "America/New_York",
            "America/Los_Angeles",
            "America/St_Johns",
            "America/Santiago",
            "America/Havana",
            "America/Sao_Paulo",
            "Pacific/Auckland",
            "Pacific/Chatham",
            "Australia/Sydney",
            "Australia/Adelaide",
            "Australia/Lord_Howe",
            "Australia/Brisbane",
            "Asia/Kolkata",
            "Asia/Kathmandu",
            "Asia/Tehran",
            "Asia/Tokyo",
            "Africa/Cairo",
            "Antarctica/Troll",
        ];

        fn local(tz: &TimeZone, runs: &[Timestamp]) -> Vec<String> {
            runs.iter()
                .map(|t| t.to_zoned(tz.clone()).strftime("%FT%T%:z").to_string())
                .collect()
        }

        fn list(max: u8) -> impl Strategy<Value = Vec<u8>> {
            prop::collection::btree_set(0..=max, 1..4).prop_map(|s| s.into_iter().collect())
        }

        fn join(values: &[u8]) -> String {
            values
                .iter()
                .map(u8::to_string)
                .collect::<Vec<_>>()
                .join(",")
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 200, failure_persistence: None, ..ProptestConfig::default() })]

            /// In any zone: runs strictly increase and fall on the listed local minutes and hours.
            #[test]
            fn runs_increase_and_match_their_fields(
                minutes in list(59),
                hours in list(23),
                zone in prop::sample::select(vec!["UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe"]),
                from in 1_700_000_000i64..1_800_000_000,
            ) {
                let cron = Cron::parse(&format!("{} {} * * *", join(&minutes), join(&hours)), zone).unwrap();
                let tz = TimeZone::get(zone).unwrap();
                let mut last = Timestamp::from_second(from).unwrap();
                for run in cron.next_runs(last, 5) {
                    prop_assert!(run > last);
                    let local = tz.to_datetime(run);
                    // A run at a clock jump lands on the jump's local time instead; everything else matches exactly.
                    let at_jump = tz.preceding(run + SignedDuration::from_secs(1)).next().is_some_and(|t| t.timestamp() == run);
                    prop_assert!(at_jump || (minutes.contains(&(local.minute() as u8)) && hours.contains(&(local.hour() as u8))));
                    last = run;
                }
            }

            /// In UTC, no matching minute between `from` and the next run is skipped.
            #[test]
            fn utc_runs_skip_no_matching_minute(minutes in list(59), hours in list(23), from in 1_700_000_000i64..1_800_000_000) {
                let cron = Cron::parse(&format!("{} {} * * *", join(&minutes), join(&hours)), "UTC").unwrap();
                let start = Timestamp::from_second(from).unwrap();
                let next = cron.next_after(start).unwrap();
                let mut t = Timestamp::from_second((from / 60 + 1) * 60).unwrap();
                while t < next {
                    let dt = TimeZone::UTC.to_datetime(t);
                    prop_assert!(!(minutes.contains(&(dt.minute() as u8)) && hours.contains(&(dt.hour() as u8))), "skipped {}", t);
                    t += SignedDuration::from_secs(60);
                }
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 1024, failure_persistence: None, ..ProptestConfig::default() })]

            /// In any zone, from any instant (half of them from four hours before a clock change to one after): the
            /// next five runs within eight days are the model's.
            #[test]
            fn runs_agree_with_a_minute_by_minute_model(
                schedule in model::schedule(),
                zone in prop::sample::select(&ZONES[..]),
                from in 1_735_689_600i64..1_893_456_000, // 2025 to 2029
                near_a_change in any::<bool>(),
                shift in -3 * 3600i64..3600,
                whole_minute in any::<bool>(),
            ) {
                let tz = TimeZone::get(zone).unwrap();
                let from = Timestamp::from_second(from).unwrap();
                let change = tz.following(from).next().filter(|_| near_a_change);
                let mut start = change.map_or(from, |change| change.timestamp()).as_second() + shift;
                if whole_minute {
                    start -= start.rem_euclid(60);
                }
                let start = Timestamp::from_second(start).unwrap();
                let end = start + SignedDuration::from_hours(8 * 24);
                let expected = schedule.runs(&tz, start, end, 8);
                let text = schedule.text();
                match Cron::parse(&text, zone) {
                    Ok(cron) => {
                        let mut actual = cron.next_runs(start, 8);
                        actual.retain(|run| *run <= end);
                        prop_assert_eq!(local(&tz, &actual), local(&tz, &expected), "{:?} in {} after {}", text, zone, start);
                    }
                    Err(e) => {
                        prop_assert!(e.to_string().ends_with("never runs"), "{}", e);
                        prop_assert!(expected.is_empty(), "{:?} in {} runs at {:?}", text, zone, local(&tz, &expected));
                    }
                }
            }
        }
    }
}
