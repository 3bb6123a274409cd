//! `cairn schedule next "<spec>"`: the next run times of a repeat spec or cron expression, to check a schedule
//! before trusting it.

use clap::{Args, Subcommand};
use jiff::Timestamp;

use crate::exit::Code;

/// `cairn schedule` commands.
#[derive(Debug, Clone, Args)]
pub struct ScheduleArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: ScheduleCommand,
}

/// What `cairn schedule` can do.
#[derive(Debug, Clone, Subcommand)]
pub enum ScheduleCommand {
    /// Print the next run times of a schedule: Bedrock's repeat syntax (`SCHEDULED, +1 HOUR`, `DAILY`) or a cron
    /// expression (`0 4 * * *`).
    Next {
        /// The schedule.
        spec: String,
        /// The time zone of a cron expression.
        #[arg(long, default_value = "UTC")]
        time_zone: String,
        /// How many run times to print.
        #[arg(long, short = 'n', default_value_t = 5)]
        count: usize,
        /// Count from this time (RFC 3339) instead of now.
        #[arg(long)]
        from: Option<Timestamp>,
    },
}

/// Runs a `cairn schedule` command, printing one RFC 3339 time per line.
///
/// # Errors
/// A bad spec or time zone (the message names which).
pub fn run(args: ScheduleArgs) -> anyhow::Result<Code> {
    match args.command {
        ScheduleCommand::Next {
            spec,
            time_zone,
            count,
            from,
        } => {
            if !(1..=1000).contains(&count) {
                anyhow::bail!("count: must be between 1 and 1000, got {count}");
            }
            let schedule = cairn::Schedule::parse(&spec, Some(&time_zone))?;
            for at in schedule.next_runs(from.unwrap_or_else(Timestamp::now), count)? {
                println!("{at}");
            }
            Ok(Code::Success)
        }
    }
}
