//! [`ChangeTags`]: add and remove a job's tags, whatever its state.

use crate::error::{Error, Result};
use crate::names::JobId;
use crate::names::Tag;
use crate::ops::cancel::job_state;
use crate::ops::limits::MAX_TAGS;
use crate::ops::{Operation, WriteCtx};
use crate::store::db::{Sql, params};

/// Adds and removes tags of a job, in any state. Adding a tag it has, or removing one it lacks, is not an error; a
/// change that would leave the job with more than [`MAX_TAGS`] tags is refused, and changes nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeTags {
    /// The job.
    pub job: JobId,
    /// Tags to add.
    pub add: Vec<String>,
    /// Tags to remove.
    pub remove: Vec<String>,
}

const ADD_TAG: Sql =
    Sql::both("INSERT INTO job_tags (job_id, tag) VALUES ($1, $2) ON CONFLICT DO NOTHING");
const REMOVE_TAG: Sql = Sql::both("DELETE FROM job_tags WHERE job_id = $1 AND tag = $2");
const TAGS_OF: Sql = Sql::both("SELECT tag FROM job_tags WHERE job_id = $1");

impl Operation for ChangeTags {
    type Output = ();

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<()> {
        let add = parse_tags(&self.add)?;
        let remove = parse_tags(&self.remove)?;
        job_state(ctx, self.job)?;
        for tag in &remove {
            ctx.db
                .execute(REMOVE_TAG, &params![self.job, tag.as_str()])?;
        }
        if !add.is_empty() {
            // Counted before writing: on PostgreSQL a trigger holds the application's own pushes to the same cap,
            // and would answer a 65th tag with its own error.
            let mut held: std::collections::BTreeSet<String> = ctx
                .db
                .query(TAGS_OF, &params![self.job], |row| row.get(0))?
                .into_iter()
                .collect();
            held.extend(add.iter().map(|tag| tag.as_str().to_owned()));
            if held.len() > MAX_TAGS {
                return Err(Error::invalid(
                    "add",
                    format!(
                        "a job holds at most {MAX_TAGS} tags; these would make it {}",
                        held.len()
                    ),
                ));
            }
        }
        for tag in &add {
            ctx.db.execute(ADD_TAG, &params![self.job, tag.as_str()])?;
        }
        Ok(())
    }
}

fn parse_tags(tags: &[String]) -> Result<Vec<Tag>> {
    tags.iter().map(|t| Tag::parse(t.as_str())).collect()
}
