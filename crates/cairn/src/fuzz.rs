//! The harnesses of the fuzz targets over the engine's parsers (`fuzz/` at the repository's root runs them under
//! libFuzzer; see `docs/fuzzing.md`), and what `cairn-api`'s harness needs to check a request without a database.
//! Not part of the API: `lib.rs` exposes it hidden, as `__fuzz`, for those two and nothing else.
//!
//! A harness takes any bytes and panics only on a bug: a parser that panics or overflows, or a parsed schedule that
//! breaks one of the rules checked here. The tests at the bottom replay every committed corpus file, so `cargo
//! test` runs each target over its corpus without cargo-fuzz.

use jiff::Timestamp;

use crate::error::Result;
use crate::ops::Limits;
use crate::ops::claim::Dequeue;
use crate::ops::push::{Push, check};
use crate::ops::recurring::SetRecurring;
use crate::ops::retry::Retry;
use crate::options::QueueOptions;
use crate::schedule::Schedule;
use crate::schedule::cron::Cron;
use crate::schedule::repeat::{Repeat, RunTimes};

/// "Now" for the checks that need one: 2025-06-18T12:00:00Z.
const NOW_MS: i64 = 1_750_248_000_000;

/// How many runs a harness computes after a successful parse.
const RUNS: usize = 4;

/// The repeat target: Bedrock's repeat syntax, then runs computed from the parsed specification.
///
/// The input is text: the specification on the first line, and optionally on the second up to three times in
/// milliseconds since 1970 (when the run was scheduled, started, and now; each missing one is the one before).
pub fn repeat(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut lines = text.split('\n');
    let spec = lines.next().unwrap_or_default();
    let times = lines.next().unwrap_or_default();
    let mut times = times.split_whitespace().map(timestamp);
    let scheduled = times
        .next()
        .unwrap_or(Timestamp::from_millisecond(NOW_MS).expect("in range"));
    let started = times.next().unwrap_or(scheduled);
    let now = times.next().unwrap_or(started);
    let run = RunTimes {
        scheduled,
        started: Some(started),
        now,
    };
    if let Ok(parsed) = Repeat::parse(spec) {
        let again = Repeat::parse(parsed.as_str()).expect("a repeat's stored text parses");
        assert_eq!(again, parsed, "{spec:?} stored as {:?}", parsed.as_str());
        if let Ok(next) = parsed.next_run(run) {
            assert_eq!(next.subsec_nanosecond(), 0, "{spec:?} gave {next}");
        }
        let never_started = RunTimes {
            started: None,
            ..run
        };
        let _ = parsed.next_run(never_started);
        if let Ok(runs) = parsed.next_runs(scheduled, RUNS) {
            assert_eq!(runs.len(), RUNS);
            assert!(runs.windows(2).all(|w| w[0] < w[1]), "{spec:?}: {runs:?}");
        }
    }
    schedule(spec, None, run);
}

/// The cron target: a cron expression in a time zone, then the runs after a start.
///
/// The input is text: the expression on the first line, optionally the time zone on the second (`UTC` when
/// absent) and the start in milliseconds since 1970 on the third.
pub fn cron(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut lines = text.split('\n');
    let expression = lines.next().unwrap_or_default();
    let zone = lines.next().unwrap_or("UTC");
    let start = lines.next().map_or(
        Timestamp::from_millisecond(NOW_MS).expect("in range"),
        timestamp,
    );
    if let Ok(cron) = Cron::parse(expression, zone) {
        let mut last = start;
        for run in cron.next_runs(start, RUNS) {
            assert!(run > last, "{expression:?} in {zone}: {run} after {last}");
            assert_eq!(
                run.subsec_nanosecond(),
                0,
                "{expression:?} in {zone}: {run}"
            );
            // The first run after any moment before `run` (and not before `last`) is `run`: the runs are one
            // fixed set of times, whatever moment the search starts from.
            let middle = last + (run.duration_since(last) / 2);
            assert_eq!(
                cron.next_after(middle),
                Some(run),
                "{expression:?} in {zone}: after {last} comes {run}, but not after {middle}"
            );
            last = run;
        }
    }
    let run = RunTimes {
        scheduled: start,
        started: Some(start),
        now: start,
    };
    schedule(expression, Some(zone), run);
}

/// Either grammar, as a job's schedule: the stored form must parse back to the same schedule, since a job's next run
/// is computed from it.
fn schedule(spec: &str, zone: Option<&str>, run: RunTimes) {
    let Ok(parsed) = Schedule::parse(spec, zone) else {
        return;
    };
    let (stored, stored_zone) = parsed.to_stored();
    let again =
        Schedule::parse(&stored, stored_zone.as_deref()).expect("a schedule's stored form parses");
    assert_eq!(again, parsed, "{spec:?} stored as {stored:?}");
    let _ = parsed.next_run(run);
    let _ = parsed.next_runs(run.scheduled, RUNS);
}

/// A time from its text in milliseconds since 1970, wrapped into the range a [`Timestamp`] holds; the epoch if the
/// text is not a number.
fn timestamp(text: &str) -> Timestamp {
    let ms: i64 = text.trim().parse().unwrap_or(0);
    // The range `Timestamp::from_millisecond` takes, a little narrower than `Timestamp::MIN..=MAX`.
    let (min, max) = (-377_705_023_201_000, 253_402_207_200_000);
    let wrapped = if (min..=max).contains(&ms) {
        ms
    } else {
        min + ms.rem_euclid(max - min + 1)
    };
    Timestamp::from_millisecond(wrapped).expect("wrapped into range")
}

/// The limits a default queue applies.
fn default_limits() -> Limits {
    let options = QueueOptions::default();
    Limits {
        default_retry: options.default_retry,
        default_lease_timeout: options.default_lease_timeout,
        max_data_bytes: options.max_data_bytes,
        name_families: options.name_families,
    }
}

/// A push's checks as the writer makes them, with a default queue's limits and a fixed now. If it passes, runs of
/// its schedule are computed too.
///
/// # Errors
/// The push's validation error.
pub fn check_push(push: &Push) -> Result<()> {
    check(push, NOW_MS, &default_limits())?;
    if let Some(spec) = &push.schedule {
        let from = Timestamp::from_millisecond(NOW_MS).expect("in range");
        let parsed = Schedule::parse(spec, push.time_zone.as_deref())?;
        let _ = parsed.next_runs(from, RUNS);
    }
    Ok(())
}

/// A dequeue's checks, made once before it reaches the writer.
///
/// # Errors
/// The dequeue's validation error.
pub fn check_dequeue(dequeue: &Dequeue) -> Result<()> {
    dequeue.validate().map(drop)
}

/// A recurring template's checks, with a default queue's limits and a fixed now.
///
/// # Errors
/// The template's validation error.
pub fn check_recurring(set: &SetRecurring) -> Result<()> {
    let (_, cron) = set.check(NOW_MS, &default_limits())?;
    let from = Timestamp::from_millisecond(NOW_MS).expect("in range");
    let _ = cron.next_runs(from, RUNS);
    Ok(())
}

/// A retry's checks of when it runs again, at a fixed now.
///
/// # Errors
/// The retry's validation error.
pub fn check_retry(retry: &Retry) -> Result<()> {
    retry.run_at_ms(NOW_MS).map(drop)
}

/// Runs `harness` over every file of `fuzz/corpus/<target>/`, in name order, naming each on stderr so that a
/// failure says which; fails if there is none, so that a corpus that moved fails rather than passes empty. The
/// replay tests of every crate with a harness use it.
pub fn replay_corpus(target: &str, harness: impl Fn(&[u8])) {
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no corpus in {}", dir.display());
    for path in files {
        eprintln!("{}", path.display());
        harness(&std::fs::read(&path).expect("a corpus file"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_repeat_corpus_replays_without_a_failure() {
        replay_corpus("repeat", repeat);
    }

    #[test]
    fn the_cron_corpus_replays_without_a_failure() {
        replay_corpus("cron", cron);
    }
}
