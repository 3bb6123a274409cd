//! How client commands print: the primitives every human form is made of (aligned tables, `key: value` lines,
//! times, durations, sizes), the `--json` form, and writing to stdout. What each command shows is decided by the
//! command; renderers return strings so that tests can read them.

use std::io::Write as _;
use std::time::Duration;

use anyhow::Context as _;
use jiff::Timestamp;
use serde::Serialize;
use serde_json::Value;

/// Writes `text` to stdout. A closed pipe (`cairn list | head`) is not an error: the reader has what it wanted.
///
/// # Errors
/// Any other write error.
pub fn emit(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other.context("writing to stdout"),
    }
}

/// Writes `text` to stdout, where a closed pipe is an error: for output that must be read, such as the lease
/// tokens `cairn dequeue` prints (jobs taken and never seen stay leased until their leases expire).
///
/// # Errors
/// Any write error.
pub fn emit_required(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .context("writing the taken jobs to stdout")
}

/// The `--json` form of a wire body: pretty-printed, one value, ending in a newline.
pub fn json<T: Serialize>(body: &T) -> String {
    let mut text = serde_json::to_string_pretty(body).expect("wire bodies always serialize");
    text.push('\n');
    text
}

/// Prints the outcome of a call that succeeded: `body` (the server's answer) with `--json`, else the one line
/// `human` makes.
///
/// # Errors
/// Writing to stdout failed.
pub fn outcome<T: Serialize>(
    json: bool,
    body: &T,
    human: impl FnOnce() -> String,
) -> anyhow::Result<()> {
    if json {
        emit(&self::json(body))
    } else {
        emit(&format!("{}\n", human()))
    }
}

/// A time in the human form: UTC to the second, always 20 characters (`2025-01-31T09:00:00Z`), so columns line
/// up. `--json` keeps the full precision.
pub fn time(at: Timestamp) -> String {
    at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// A duration given in milliseconds: `250ms`, `1.5s`, `2m 5s`, `1h 30m`.
pub fn millis(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        format!("{:.1}s", ms as f64 / 1000.0)
    } else {
        crate::duration::format(Duration::from_secs(ms / 1000))
    }
}

/// A size in bytes: `512 B`, `1.5 KiB`, `12.0 MiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// A JSON value on one line, as the human forms show data and progress.
pub fn compact(value: &Value) -> String {
    serde_json::to_string(value).expect("a JSON value always serializes")
}

/// Text on one line: control characters (newlines in an error, say) become spaces, so a table stays a table.
pub fn one_line(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// `key: value` lines. A value of several lines keeps them, indented under its key.
#[derive(Debug, Default)]
pub struct Fields {
    text: String,
}

impl Fields {
    /// No lines yet.
    pub fn new() -> Fields {
        Fields::default()
    }

    /// Adds `key: value`.
    pub fn add(&mut self, key: &str, value: impl std::fmt::Display) -> &mut Fields {
        let value = value.to_string();
        let mut lines = value.lines();
        self.text.push_str(key);
        self.text.push(':');
        if let Some(first) = lines.next() {
            self.text.push(' ');
            self.text.push_str(first);
        }
        self.text.push('\n');
        for line in lines {
            self.text.push_str("  ");
            self.text.push_str(line);
            self.text.push('\n');
        }
        self
    }

    /// Adds `key: value` when there is a value.
    pub fn add_some<T: std::fmt::Display>(&mut self, key: &str, value: Option<T>) -> &mut Fields {
        if let Some(value) = value {
            self.add(key, value);
        }
        self
    }

    /// Appends text as it is (a table under a `key:` line, say).
    pub fn append(&mut self, text: &str) -> &mut Fields {
        self.text.push_str(text);
        self
    }

    /// The lines.
    pub fn finish(&mut self) -> String {
        std::mem::take(&mut self.text)
    }
}

/// A table with a header row and columns padded to their widest cell.
#[derive(Debug)]
pub struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// An empty table with these column headers.
    pub fn new<S: AsRef<str>>(headers: &[S]) -> Table {
        Table {
            headers: headers.iter().map(|h| one_line(h.as_ref())).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row; each cell is put on one line.
    pub fn row(&mut self, cells: Vec<String>) {
        debug_assert_eq!(cells.len(), self.headers.len(), "one cell per column");
        self.rows.push(cells.iter().map(|c| one_line(c)).collect());
    }

    /// The table, each line starting with `indent`, two spaces between columns, no trailing spaces.
    pub fn render(&self, indent: &str) -> String {
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (width, cell) in widths.iter_mut().zip(row) {
                *width = (*width).max(cell.chars().count());
            }
        }
        let mut text = String::new();
        for row in std::iter::once(&self.headers).chain(&self.rows) {
            let mut line = indent.to_owned();
            for (cell, width) in row.iter().zip(&widths) {
                line.push_str(&format!("{cell:<width$}  "));
            }
            text.push_str(line.trim_end());
            text.push('\n');
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_pad_columns_to_the_widest_cell() {
        let mut table = Table::new(&["ID", "NAME"]);
        table.row(vec!["1".into(), "email.send".into()]);
        table.row(vec!["12".into(), "a\nb".into()]);
        assert_eq!(
            table.render("  "),
            "  ID  NAME\n  1   email.send\n  12  a b\n"
        );
    }

    #[test]
    fn fields_indent_the_lines_of_a_long_value() {
        let text = Fields::new()
            .add("id", 1)
            .add_some("error", Some("first\nsecond"))
            .add_some("worker", None::<&str>)
            .finish();
        assert_eq!(text, "id: 1\nerror: first\n  second\n");
    }

    #[test]
    fn quantities_read_at_a_glance() {
        assert_eq!(millis(250), "250ms");
        assert_eq!(millis(1500), "1.5s");
        assert_eq!(millis(125_000), "2m 5s");
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(3 * 1024 * 1024 / 2), "1.5 MiB");
        assert_eq!(
            time("2025-01-31T09:00:00.123Z".parse().unwrap()),
            "2025-01-31T09:00:00Z"
        );
    }
}
