//! Bedrock's repeat syntax against SQLite itself: the same base times and modifier chains, evaluated by Cairn and by
//! SQLite's `datetime()` step by step (as Bedrock evaluates them), must give the same next run, or both no run.

use cairn::rusqlite::{Connection, params_from_iter};
use cairn::{Repeat, RunTimes};
use jiff::Timestamp;
use proptest::prelude::*;

/// One modifier as text, and the SQL that applies it to the expression `X`.
#[derive(Debug, Clone)]
struct Step {
    text: String,
    sql: &'static str,
}

fn unit_name(unit: usize, plural: bool) -> String {
    let name = ["SECOND", "MINUTE", "HOUR", "DAY", "MONTH", "YEAR"][unit];
    if plural {
        format!("{name}S")
    } else {
        name.to_owned()
    }
}

/// Modifiers of every kind, with Bedrock's digit limits, in random letter case.
fn step() -> impl Strategy<Value = Step> {
    let offset = (any::<bool>(), 0usize..6, any::<bool>(), 0u32..100_000_000).prop_map(
        |(negative, unit, plural, n)| {
            // Bedrock allows 8 digits of seconds and 3 of other units. Years stay under 200 a step, so that no chain of
            // up to 5 steps from 1900 or later leaves the years 1 to 9999, outside which SQLite's own calendar
            // arithmetic departs from the Gregorian calendar (its C integer division truncates negative years).
            let n = match unit {
                0 => n,
                5 => n % 200,
                _ => n % 1000,
            };
            let sign = if negative { '-' } else { '+' };
            Step {
                text: format!("{sign}{n} {}", unit_name(unit, plural)),
                sql: "datetime(X, ?)",
            }
        },
    );
    let start = prop_oneof![Just("DAY"), Just("MONTH"), Just("YEAR")].prop_map(|unit| Step {
        text: format!("START OF {unit}"),
        sql: "datetime(X, ?)",
    });
    // SQLite has no `start of hour`: Bedrock truncates to the hour, which strftime does too.
    // The step's text is bound but unused (`substr(?, 1, 0)` is empty), so every step binds one parameter.
    let hour = Just(Step {
        text: "START OF HOUR".into(),
        sql: "(strftime('%Y-%m-%d %H:00:00', X) || substr(?, 1, 0))",
    });
    let weekday = (0u8..7).prop_map(|d| Step {
        text: format!("WEEKDAY {d}"),
        sql: "datetime(X, ?)",
    });
    let step = prop_oneof![4 => offset, 1 => start, 1 => hour, 1 => weekday];
    (step, any::<bool>()).prop_map(|(mut step, lower)| {
        if lower {
            step.text = step.text.to_lowercase();
        }
        step
    })
}

/// Base times biased to the hard places: month ends, leap days, year boundaries, midnight.
fn base_time() -> impl Strategy<Value = Timestamp> {
    let edgy = (
        1900i16..2200,
        1i8..=12,
        prop_oneof![Just(1i8), Just(28), Just(29), Just(30), Just(31)],
        0i8..24,
        0u32..1000,
    )
        .prop_filter_map("a real date", |(y, m, d, h, ms)| {
            let date = jiff::civil::Date::new(y, m, d).ok()?;
            let dt =
                date.to_datetime(jiff::civil::Time::new(h, 59, 59, (ms * 1_000_000) as i32).ok()?);
            jiff::tz::TimeZone::UTC.to_timestamp(dt).ok()
        });
    let anywhere = (-2_208_988_800_000i64..7_258_118_400_000)
        .prop_map(|ms| Timestamp::from_millisecond(ms).unwrap());
    prop_oneof![edgy, anywhere]
}

fn sqlite_next(conn: &Connection, base: Timestamp, steps: &[Step]) -> Option<String> {
    let mut expr = "?".to_owned();
    for step in steps {
        expr = step.sql.replace('X', &expr);
    }
    let base_text = base.strftime("%Y-%m-%d %H:%M:%S%.3f").to_string();
    let args = std::iter::once(base_text).chain(steps.iter().map(|s| s.text.clone()));
    conn.query_row(&format!("SELECT {expr}"), params_from_iter(args), |row| {
        row.get(0)
    })
    .unwrap()
}

fn cairn_next(base: Timestamp, steps: &[Step]) -> Option<String> {
    let texts: Vec<&str> = steps.iter().map(|s| s.text.as_str()).collect();
    let repeat = Repeat::parse(&format!("finished, {}", texts.join(", "))).unwrap();
    let run = RunTimes {
        scheduled: base,
        started: Some(base),
        now: base,
    };
    repeat
        .next_run(run)
        .ok()
        .map(|t| t.strftime("%Y-%m-%d %H:%M:%S").to_string())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn next_run_matches_sqlite_datetime(base in base_time(), steps in prop::collection::vec(step(), 1..6)) {
        thread_local! { static SQLITE: Connection = Connection::open_in_memory().unwrap(); }
        let expected = SQLITE.with(|conn| sqlite_next(conn, base, &steps));
        prop_assert_eq!(cairn_next(base, &steps), expected, "base {} steps {:?}", base, steps);
    }
}

/// Past the year 9999 SQLite gives NULL and Cairn no run. (Cairn's timestamps end at 9999-12-30T22:00Z, a day
/// before SQLite's, so a schedule landing on the last day of 9999 is no run in Cairn alone.)
#[test]
fn results_past_year_9999_are_no_run_as_in_sqlite() {
    let conn = Connection::open_in_memory().unwrap();
    let base: Timestamp = "9999-12-30T12:00:00Z".parse().unwrap();
    let step = |text: &str| Step {
        text: text.into(),
        sql: "datetime(X, ?)",
    };
    for text in ["+2 DAYS", "+1 MONTH", "+1 YEAR", "+48 HOURS"] {
        let steps = [step(text)];
        assert_eq!(
            cairn_next(base, &steps),
            sqlite_next(&conn, base, &steps),
            "{text}"
        );
    }
}
