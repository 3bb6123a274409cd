//! Schedules: when a recurring job runs next. Today: Bedrock's repeat syntax (`repeat`), with the date arithmetic
//! of SQLite's `datetime()` modifiers (`modifier`). Pure functions of their inputs: no clock, no storage.

pub(crate) mod modifier;
pub(crate) mod repeat;
