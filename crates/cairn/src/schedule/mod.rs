//! Schedules: when a recurring job runs next. Bedrock's repeat syntax (`repeat`), with the date arithmetic of
//! SQLite's `datetime()` modifiers (`modifier`); cron expressions in a time zone (`cron`). Pure functions of their inputs: no clock, no storage.

pub(crate) mod cron;
pub(crate) mod modifier;
pub(crate) mod repeat;
