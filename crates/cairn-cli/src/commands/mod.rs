//! The client commands: `cairn push`, `dequeue`, `show`, `list`, the calls under a lease (`update`, `heartbeat`,
//! `checkpoint`, `finish`, `retry`, `fail`), management (`cancel`, `delete`, `priority`, `reschedule`,
//! `requeue`, `set-data`, `deps`, `tag`, `track`, `untrack`), workflows (`signal`), operating queues (`queues`, `queue
//! pause|resume|peek|limit|rate|aging`, `failures`, `unfail`, `workers`), cron templates (`recurring
//! set|list|remove`), the engine's options at run time (`config list|get|set|unset`), and seeing the queue
//! (`stats`, `activity`, `sql`).
//! Each is a thin layer over [`cairn_client::Client`], which talks to a running server.
//!
//! Modules: `args` (what the commands share, and the parsers for outside input), `output` (tables, `key: value`
//! lines, `--json`), then one file per command or group of alike commands. Every command prints the server's wire
//! body with `--json`, and a compact human form otherwise. Errors are returned, not printed: `exit::report` prints
//! them as `error: …` and picks the exit code.
//!
//! Exit codes (the numbers are part of the interface; see `crate::exit`):
//!
//! | code | meaning |
//! | --- | --- |
//! | 0 | success |
//! | 1 | something unexpected failed (a storage error on the server, an I/O error here) |
//! | 2 | invalid input or usage (the message names the argument or field) |
//! | 3 | no job has that id |
//! | 4 | conflict: the lease was lost, or the job's state does not allow the operation |
//! | 5 | the server could not be reached, or is shutting down |
//! | 6 | the server refused the token (`--token`, `CAIRN_TOKEN`) |
//! | 7 | `cairn dequeue` found no job before its wait ended |

mod args;
mod batch;
mod bulk;
mod config;
mod deps;
mod dequeue;
mod events;
mod failures;
mod lease;
mod list;
mod manage;
mod output;
mod push;
mod queues;
mod recurring;
mod show;
mod signal;
mod sql;
mod stats;
mod tag;
mod track;
mod wait;
mod workers;

use clap::Subcommand;

use crate::exit::Code;

pub use args::{CommonArgs, JsonInput, LeaseArgs};
pub use batch::{BatchArgs, BatchCommand};
pub use bulk::BulkArgs;
pub use config::{ConfigArgs, ConfigCommand};
pub use deps::DepsArgs;
pub use dequeue::DequeueArgs;
pub use events::EventsArgs;
pub use failures::{FailuresArgs, UnfailArgs};
pub use lease::{CheckpointArgs, FailArgs, FinishArgs, HeartbeatArgs, RetryArgs, UpdateArgs};
pub use list::ListArgs;
pub use manage::{JobArgs, MoveArgs, PriorityArgs, RequeueArgs, RescheduleArgs, SetDataArgs};
pub use push::PushArgs;
pub use queues::{QueueArgs, QueueCommand, QueuesArgs};
pub use recurring::{RecurringArgs, RecurringCommand};
pub use show::ShowArgs;
pub use signal::SignalArgs;
pub use sql::SqlArgs;
pub use stats::{ActivityArgs, StatsArgs};
pub use tag::TagArgs;
pub use track::TrackArgs;
pub use wait::WaitArgs;
pub use workers::WorkersArgs;

/// The exit codes, as every client command's `--help` ends.
pub const EXIT_CODES: &str = "\
Exit codes:
  0  success
  1  something unexpected failed
  2  invalid input or usage
  3  no job has that id
  4  conflict: the lease was lost, or the job's state does not allow it
  5  the server could not be reached, or is shutting down
  6  the server refused the token
  7  no job was ready before the wait ended (cairn dequeue)
  8  the job failed or was cancelled (cairn wait)
  9  the job had not ended when the wait ran out (cairn wait)";

/// Client commands against a running server (`--server`, `CAIRN_SERVER`).
#[derive(Debug, Clone, Subcommand)]
pub enum ClientCommand {
    /// Enqueue a job and print its id.
    #[command(after_long_help = EXIT_CODES)]
    Push(Box<PushArgs>),
    /// Take (lease) ready jobs whose name matches a GLOB, and print each with its lease token.
    #[command(after_long_help = EXIT_CODES)]
    Dequeue(DequeueArgs),
    /// The former name of `cairn dequeue`, which still works and says so (`cairn get` reads as reading a job, which
    /// is `cairn show`).
    #[command(hide = true)]
    Get(DequeueArgs),
    /// Show one job with its history.
    #[command(after_long_help = EXIT_CODES)]
    Show(ShowArgs),
    /// Wait for a job to end, then show it with its result or error; the exit code says how it ended.
    #[command(after_long_help = EXIT_CODES)]
    Wait(WaitArgs),
    /// Cancel, delete, retry or move every job a filter lists (`cairn list`'s filters), or the ids given.
    #[command(after_long_help = EXIT_CODES)]
    Bulk(BulkArgs),
    /// List jobs, newest first.
    #[command(after_long_help = EXIT_CODES)]
    List(ListArgs),
    /// Record a held job's progress.
    #[command(after_long_help = EXIT_CODES)]
    Update(UpdateArgs),
    /// Extend a held job's lease.
    #[command(after_long_help = EXIT_CODES)]
    Heartbeat(HeartbeatArgs),
    /// Save the data a held job's retry starts from.
    #[command(after_long_help = EXIT_CODES)]
    Checkpoint(CheckpointArgs),
    /// Complete a held job, or with `--next-queue`, this step of it: the job goes on in another queue.
    #[command(after_long_help = EXIT_CODES)]
    Finish(FinishArgs),
    /// Retry a held job later, after an error.
    #[command(after_long_help = EXIT_CODES)]
    Retry(RetryArgs),
    /// Fail a held job for good.
    #[command(after_long_help = EXIT_CODES)]
    Fail(FailArgs),
    /// Cancel a job that has not finished.
    #[command(after_long_help = EXIT_CODES)]
    Cancel(JobArgs),
    /// Delete a job and its history.
    #[command(after_long_help = EXIT_CODES)]
    Delete(JobArgs),
    /// Change the priority of a job that has not finished.
    #[command(after_long_help = EXIT_CODES)]
    Priority(PriorityArgs),
    /// Move a job that has not started to another time.
    #[command(after_long_help = EXIT_CODES)]
    Reschedule(RescheduleArgs),
    /// Move a job that is not running to another queue: as it is if it has not started, to run again there if it
    /// ended (failed, cancelled or completed).
    #[command(name = "move", after_long_help = EXIT_CODES)]
    Move(MoveArgs),
    /// Run a job again with a fresh count of attempts: a failed, cancelled or completed one, or one taken from
    /// its worker.
    #[command(after_long_help = EXIT_CODES)]
    Requeue(RequeueArgs),
    /// Replace the data of a job that is not running.
    #[command(name = "set-data", after_long_help = EXIT_CODES)]
    SetData(SetDataArgs),
    /// Show what a job waits for, each dependency with its state; change them with `--add` and `--remove`.
    #[command(after_long_help = EXIT_CODES)]
    Deps(DepsArgs),
    /// Add and remove a job's tags, whatever its state.
    #[command(after_long_help = EXIT_CODES)]
    Tag(TagArgs),
    /// Track a job: `cairn list --tracked` lists it, whatever its state, until it is untracked.
    #[command(after_long_help = EXIT_CODES)]
    Track(TrackArgs),
    /// Stop tracking a job.
    #[command(after_long_help = EXIT_CODES)]
    Untrack(TrackArgs),
    /// Send a signal to a key: the job waiting for it receives the data and runs again, or the first job that waits
    /// later does.
    #[command(after_long_help = EXIT_CODES)]
    Signal(SignalArgs),
    /// List every queue with its jobs counted by state, and whether it is paused.
    #[command(after_long_help = EXIT_CODES)]
    Queues(QueuesArgs),
    /// Operate one queue: `pause`, `resume`, `peek`, `limit`, `rate`, `aging`.
    #[command(after_long_help = EXIT_CODES)]
    Queue(QueueArgs),
    /// List the failure groups with their counts; with a GROUP, that group's failed jobs.
    #[command(after_long_help = EXIT_CODES)]
    Failures(FailuresArgs),
    /// Put the oldest failed jobs of a failure group back in a queue, with fresh attempts.
    #[command(after_long_help = EXIT_CODES)]
    Unfail(UnfailArgs),
    /// List the workers the server has seen, with when each was last seen, the jobs it holds, and which stalled.
    #[command(after_long_help = EXIT_CODES)]
    Workers(WorkersArgs),
    /// Groups of jobs with callbacks, pushed once every job has ended or completed: `create`, `add`, `close`,
    /// `show`, `list`.
    #[command(after_long_help = EXIT_CODES)]
    Batch(BatchArgs),
    /// Cron templates that create a job at every slot: `set`, `list`, `remove`.
    #[command(after_long_help = EXIT_CODES)]
    Recurring(RecurringArgs),
    /// The engine's options while the server runs (default lease and retry, retention, data limit): `list`,
    /// `get`, `set`, `unset`. Values set are stored and win over the server's flags until unset.
    #[command(after_long_help = EXIT_CODES)]
    Config(ConfigArgs),
    /// Statistics over the last hour, day or week: jobs added, started, finished, retried and failed, and their
    /// wait, run and service times (`--json` adds the series and histograms).
    #[command(after_long_help = EXIT_CODES)]
    Stats(StatsArgs),
    /// The activity log, newest first: every job and worker transition, by job, worker, queue and time.
    #[command(after_long_help = EXIT_CODES)]
    Activity(ActivityArgs),
    /// Follow the event stream: each job and worker transition as it is committed, resumable with --after.
    #[command(after_long_help = EXIT_CODES)]
    Events(EventsArgs),
    /// Run one read-only SQL statement over the server's database: the tables, or the views `cairn_jobs`,
    /// `cairn_attempts`, `cairn_activity`, `cairn_stats_minute`, `cairn_stats_hour`, `cairn_workers`.
    #[command(after_long_help = EXIT_CODES)]
    Sql(SqlArgs),
}

/// Runs a client command.
///
/// # Errors
/// Bad input, or the server's refusal, with the context of what was being done; `exit::report` turns the
/// engine error in the chain into the exit code.
pub async fn run(command: ClientCommand) -> anyhow::Result<Code> {
    match command {
        ClientCommand::Push(args) => args.run().await,
        ClientCommand::Requeue(args) => args.run().await,
        ClientCommand::SetData(args) => args.run().await,
        ClientCommand::Recurring(args) => args.run().await,
        ClientCommand::Batch(args) => args.run().await,
        ClientCommand::Config(args) => args.run().await,
        ClientCommand::Stats(args) => args.run().await,
        ClientCommand::Activity(args) => args.run().await,
        ClientCommand::Events(args) => args.run().await,
        ClientCommand::Sql(args) => args.run().await,
        ClientCommand::Deps(args) => args.run().await,
        ClientCommand::Tag(args) => args.run().await,
        ClientCommand::Signal(args) => args.run().await,
        ClientCommand::Track(args) => args.run(true).await,
        ClientCommand::Untrack(args) => args.run(false).await,
        ClientCommand::Workers(args) => args.run().await,
        ClientCommand::Queues(args) => args.run().await,
        ClientCommand::Queue(args) => args.run().await,
        ClientCommand::Failures(args) => args.run().await,
        ClientCommand::Unfail(args) => args.run().await,
        ClientCommand::Dequeue(args) => args.run().await,
        ClientCommand::Get(args) => {
            eprintln!(
                "note: `cairn get` is now `cairn dequeue`; the old name goes in a later release"
            );
            args.run().await
        }
        ClientCommand::Show(args) => args.run().await,
        ClientCommand::Wait(args) => args.run().await,
        ClientCommand::Bulk(args) => args.run().await,
        ClientCommand::List(args) => args.run().await,
        ClientCommand::Update(args) => args.run().await,
        ClientCommand::Heartbeat(args) => args.run().await,
        ClientCommand::Checkpoint(args) => args.run().await,
        ClientCommand::Finish(args) => args.run().await,
        ClientCommand::Retry(args) => args.run().await,
        ClientCommand::Fail(args) => args.run().await,
        ClientCommand::Cancel(args) => args.cancel().await,
        ClientCommand::Delete(args) => args.delete().await,
        ClientCommand::Priority(args) => args.run().await,
        ClientCommand::Reschedule(args) => args.run().await,
        ClientCommand::Move(args) => args.run().await,
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;

    #[test]
    fn the_command_line_is_well_formed() {
        // Clap checks a command's definition only when it is used; this checks every one at once.
        crate::Cli::command().debug_assert();
    }
}
