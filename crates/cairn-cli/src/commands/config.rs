//! `cairn config list|get|set|unset`: the engine's options, read and changed while the server runs. A value set
//! here is stored in the database: it outlives restarts and wins over `cairn serve`'s flags, environment and
//! file until it is unset.

use anyhow::Context as _;
use cairn::Jobs;
use cairn::{ConfigKey, ConfigUnit, ConfigValue};
use cairn_api::{ConfigEntryBody, ConfigListBody};
use clap::{Args, Subcommand};

use crate::commands::args::{CommonArgs, invalid};
use crate::commands::output::{self, Table};
use crate::exit::Code;

/// `cairn config` commands.
#[derive(Debug, Clone, Args)]
pub struct ConfigArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: ConfigCommand,
}

/// What `cairn config` can do.
#[derive(Debug, Clone, Subcommand)]
pub enum ConfigCommand {
    /// List every option with the value in force, the server's default, and when it was set.
    List(ConfigListArgs),
    /// Show one option.
    Get(ConfigKeyArgs),
    /// Set an option: durations as `30s`, `5m`, `72h`; counts and numbers as digits; `off` where the option
    /// allows it (retention.max_age, retention.max_count, retention.worker_max_age).
    Set(ConfigSetArgs),
    /// Go back to the server's default for an option.
    Unset(ConfigKeyArgs),
}

/// `cairn config list` arguments.
#[derive(Debug, Clone, Args)]
pub struct ConfigListArgs {
    /// The server, and `--json`.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// `cairn config get` and `cairn config unset` arguments.
#[derive(Debug, Clone, Args)]
pub struct ConfigKeyArgs {
    /// The option, such as `retention.max_age` (`cairn config list` shows them all).
    #[arg(value_parser = parse_key)]
    pub key: ConfigKey,
    /// The server, and `--json`.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// `cairn config set` arguments.
#[derive(Debug, Clone, Args)]
pub struct ConfigSetArgs {
    /// The option, such as `retention.max_age`.
    #[arg(value_parser = parse_key)]
    pub key: ConfigKey,
    /// Its new value.
    pub value: String,
    /// The server, and `--json`.
    #[command(flatten)]
    pub common: CommonArgs,
}

fn parse_key(text: &str) -> Result<ConfigKey, String> {
    ConfigKey::parse(text).map_err(|e| e.message().to_owned())
}

/// A value typed on the command line, read in the option's unit.
fn parse_value(key: ConfigKey, text: &str) -> Result<ConfigValue, cairn::Error> {
    if text == "off" {
        return if key.can_be_off() {
            Ok(ConfigValue::Off)
        } else {
            Err(invalid(key.as_str(), "cannot be off"))
        };
    }
    match key.unit() {
        ConfigUnit::Duration => crate::duration::parse(text)
            .map(ConfigValue::Duration)
            .map_err(|rule| invalid(key.as_str(), rule)),
        ConfigUnit::Count => text.parse().map(ConfigValue::Count).map_err(|_| {
            invalid(
                key.as_str(),
                format!("must be a whole number or off, got {text:?}"),
            )
        }),
        ConfigUnit::Number => text
            .parse()
            .map(ConfigValue::Number)
            .map_err(|_| invalid(key.as_str(), format!("must be a number, got {text:?}"))),
    }
}

impl ConfigArgs {
    /// Runs the `cairn config` command.
    ///
    /// # Errors
    /// A bad key or value, or the server's refusal.
    pub async fn run(self) -> anyhow::Result<Code> {
        match self.command {
            ConfigCommand::List(args) => {
                let body = args
                    .common
                    .client()?
                    .answer(cairn::ListConfig)
                    .await
                    .context("reading the options")?;
                output::emit(&if args.common.json {
                    output::json(&body)
                } else {
                    render_list(&body)
                })?;
            }
            ConfigCommand::Get(args) => {
                let body = args
                    .common
                    .client()?
                    .answer(cairn::GetConfig { key: args.key })
                    .await
                    .with_context(|| format!("reading option {}", args.key))?;
                output::outcome(args.common.json, &body, || render_one(&body))?;
            }
            ConfigCommand::Set(args) => {
                let value = parse_value(args.key, &args.value)?;
                let entry = args
                    .common
                    .client()?
                    .set_config(args.key, value)
                    .await
                    .with_context(|| format!("setting option {}", args.key))?;
                let body = ConfigEntryBody::from(&entry);
                output::outcome(args.common.json, &body, || render_one(&body))?;
            }
            ConfigCommand::Unset(args) => {
                let entry = args
                    .common
                    .client()?
                    .unset_config(args.key)
                    .await
                    .with_context(|| format!("unsetting option {}", args.key))?;
                let body = ConfigEntryBody::from(&entry);
                output::outcome(args.common.json, &body, || render_one(&body))?;
            }
        }
        Ok(Code::Success)
    }
}

/// A value in the human form: `72h`, `100000`, `0.2`, `off`.
fn human(unit: &str, value: &serde_json::Value) -> String {
    match (unit, value.as_u64()) {
        (_, None) if value.is_null() => "off".to_owned(),
        ("ms", Some(ms)) => crate::duration::format(std::time::Duration::from_millis(ms)),
        _ => value.to_string(),
    }
}

/// `KEY: VALUE (set at …; default …)`.
fn render_one(body: &ConfigEntryBody) -> String {
    let value = human(&body.unit, &body.value);
    let default = human(&body.unit, &body.default);
    match body.set_at {
        Some(at) => format!(
            "{}: {value} (set {}; default {default})",
            body.key,
            output::time(at)
        ),
        None => format!("{}: {value} (default)", body.key),
    }
}

/// The human form of `cairn config list`.
fn render_list(body: &ConfigListBody) -> String {
    let mut table = Table::new(&["KEY", "VALUE", "DEFAULT", "SET AT"]);
    for entry in &body.config {
        table.row(vec![
            entry.key.clone(),
            human(&entry.unit, &entry.value),
            human(&entry.unit, &entry.default),
            entry.set_at.map_or_else(|| "-".to_owned(), output::time),
        ]);
    }
    table.render("")
}
