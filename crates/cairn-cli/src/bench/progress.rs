//! Progress bars on stderr, one per scenario step; hidden when stderr is not a terminal, so that logs and
//! `--json` output stay clean.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

/// A bar counting `len` units (jobs, samples, connections) for the step `label`.
pub fn bar(label: &str, len: u64) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let style = ProgressStyle::with_template(
        "{prefix:>12} [{bar:30}] {human_pos}/{human_len} {per_sec:>12} {elapsed:>4} {msg}",
    )
    .expect("the template is valid")
    .progress_chars("=> ");
    let bar = ProgressBar::new(len)
        .with_style(style)
        .with_prefix(label.to_owned());
    // A steady tick keeps the rate and the elapsed time moving while the work waits on something.
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

/// A spinner for a step whose length is unknown, such as waiting for a server to settle.
pub fn spinner(label: &str, message: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let style = ProgressStyle::with_template("{prefix:>12} {spinner} {elapsed:>4} {msg}")
        .expect("the template is valid");
    let bar = ProgressBar::new_spinner()
        .with_style(style)
        .with_prefix(label.to_owned())
        .with_message(message.to_owned());
    bar.enable_steady_tick(Duration::from_millis(100));
    bar
}
