//! `cairn sql "SELECT …"`: one read-only statement over the server's database, as a table (or `--json`). The
//! documented views are `cairn_jobs`, `cairn_attempts`, `cairn_activity`, `cairn_stats_minute`,
//! `cairn_stats_hour` and `cairn_workers`; the tables are readable too.

use anyhow::Context as _;
use cairn_api::{SqlBody, SqlRequest};
use clap::Args;

use crate::commands::args::CommonArgs;
use crate::commands::output::{self, Table};
use crate::exit::Code;

/// `cairn sql` arguments.
#[derive(Debug, Clone, Args)]
pub struct SqlArgs {
    /// One SELECT statement, such as `SELECT state, count(*) FROM cairn_jobs GROUP BY state`.
    pub query: String,
    /// At most this many rows (1 to 10,000).
    #[arg(long, default_value_t = 1000, allow_negative_numbers = true, value_parser = crate::commands::args::whole_number::<u32>)]
    pub limit: u32,
    /// Stop the query after this long (at most 30s).
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, value_parser = crate::duration::parse)]
    pub timeout: Option<std::time::Duration>,
    /// The server, and `--json`.
    #[command(flatten)]
    pub common: CommonArgs,
}

impl SqlArgs {
    /// Prints the rows (with `--json`, the `SqlBody`).
    ///
    /// # Errors
    /// The server's refusal: not one read, SQLite's complaint, or too slow.
    pub async fn run(self) -> anyhow::Result<Code> {
        let request = SqlRequest {
            query: self.query,
            limit: Some(self.limit),
            timeout_ms: self
                .timeout
                .map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX)),
        };
        let body = self
            .common
            .client()?
            .answer(request.to_query())
            .await
            .context("running the query")?;
        output::emit(&if self.common.json {
            output::json(&body)
        } else {
            render(&body)
        })?;
        Ok(Code::Success)
    }
}

/// The human form: a table (text as is, null as `NULL`), and a line when rows were cut off.
fn render(body: &SqlBody) -> String {
    let mut table = Table::new(&body.columns);
    for row in &body.rows {
        table.row(
            row.iter()
                .map(|v| match v {
                    serde_json::Value::Null => "NULL".to_owned(),
                    serde_json::Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect(),
        );
    }
    let mut out = table.render("");
    if body.truncated {
        out.push_str(&format!("(cut off at {} rows)\n", body.rows.len()));
    }
    out
}
