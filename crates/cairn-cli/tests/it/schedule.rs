//! `cairn schedule next`: previewing schedules from the command line.

use std::process::Command;

use crate::harness::{cairn_binary, run_with_stdin, stderr, stdout};

fn cairn(args: &[&str]) -> std::process::Output {
    let mut command = Command::new(cairn_binary());
    command.args(args);
    run_with_stdin(command, None)
}

#[test]
fn next_prints_the_run_times_of_a_repeat_spec() {
    let out = cairn(&[
        "schedule",
        "next",
        "SCHEDULED, +1 DAY, START OF DAY, +4 HOURS",
        "--from",
        "2026-03-01T10:00:00Z",
        "-n",
        "3",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "2026-03-02T04:00:00Z\n2026-03-03T04:00:00Z\n2026-03-04T04:00:00Z\n"
    );
}

#[test]
fn next_prints_cron_times_across_a_daylight_saving_change() {
    // 02:30 does not exist in Berlin on 2026-03-29: that day's run is at the jump, 03:00 local (01:00 UTC).
    let out = cairn(&[
        "schedule",
        "next",
        "30 2 * * *",
        "--time-zone",
        "Europe/Berlin",
        "--from",
        "2026-03-28T00:00:00Z",
        "-n",
        "3",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "2026-03-28T01:30:00Z\n2026-03-29T01:00:00Z\n2026-03-30T00:30:00Z\n"
    );
}

#[test]
fn a_bad_spec_names_the_field_and_exits_2() {
    let out = cairn(&["schedule", "next", "EVERY TUESDAY"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).starts_with("error: schedule: "),
        "{}",
        stderr(&out)
    );
    let out = cairn(&[
        "schedule",
        "next",
        "0 4 * * *",
        "--time-zone",
        "Mars/Olympus",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).starts_with("error: time_zone: "),
        "{}",
        stderr(&out)
    );
}
