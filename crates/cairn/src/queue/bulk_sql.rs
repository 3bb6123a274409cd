//! The two requests that are neither one write nor one read: an action over many jobs, a chunk per transaction,
//! and read-only SQL on a connection of its own.

use crate::error::{Error, ErrorKind, Result};
use crate::names::JobId;
use crate::query::JobFilter;
use crate::queue::Queue;
use crate::sql::{SqlQuery, SqlResult};

impl Queue {
    /// What [`Jobs::sql`](crate::Jobs::sql) runs embedded.
    pub(crate) async fn run_sql(&self, query: SqlQuery) -> Result<SqlResult> {
        let _turn = self
            .inner
            .sql_turns
            .acquire()
            .await
            .map_err(|_| Error::closed())?;
        let path = self.inner.path.clone();
        let url = self.inner.postgres_url.clone();
        #[cfg(feature = "postgres")]
        let hosts = self.inner.postgres_hosts.clone();
        tokio::task::spawn_blocking(move || match url {
            #[cfg(feature = "postgres")]
            Some(_) => crate::store::postgres::sql::run(
                hosts.as_ref().expect("a queue on PostgreSQL has its hosts"),
                &query,
            ),
            #[cfg(feature = "sqlite")]
            None => crate::store::sqlite::sql::run(&path, &query),
            #[allow(unreachable_patterns)]
            _ => unreachable!(
                "a queue is open only on a backend this build has ({path:?}, {query:?})"
            ),
        })
        .await
        .map_err(|e| {
            Error::new(
                ErrorKind::Storage,
                format!("the query's thread failed: {e}"),
            )
        })?
    }

    /// What [`Jobs::bulk`](crate::Jobs::bulk) runs embedded.
    pub(crate) async fn run_bulk(
        &self,
        action: crate::BulkAction,
        selection: crate::BulkSelection,
    ) -> Result<crate::BulkOutcome> {
        use crate::ops::bulk_action::{BULK_CHUNK, BulkChunk, check};
        check(&action, &selection)?;
        let mut total = crate::BulkOutcome::default();
        let run = |jobs: Vec<JobId>| {
            let chunk = BulkChunk {
                action: action.clone(),
                jobs,
            };
            self.write(chunk)
        };
        match selection {
            crate::BulkSelection::Ids(ids) => {
                for jobs in ids.chunks(BULK_CHUNK) {
                    add(&mut total, run(jobs.to_vec()).await?);
                }
            }
            crate::BulkSelection::Filter(filter) => {
                // Newest first, a page at a time from where the last one ended: jobs created meanwhile have higher
                // ids, and are not reached.
                let mut page_filter = JobFilter {
                    before: None,
                    limit: crate::query::MAX_PAGE,
                    ..filter
                };
                loop {
                    let page = self.read(page_filter.clone()).await?;
                    let ids: Vec<JobId> = page.jobs.iter().map(|j| j.id).collect();
                    for jobs in ids.chunks(BULK_CHUNK) {
                        add(&mut total, run(jobs.to_vec()).await?);
                    }
                    match page.next {
                        Some(next) => page_filter.before = Some(next),
                        None => break,
                    }
                }
            }
        }
        Ok(total)
    }
}

/// Adds a chunk's counts to a bulk action's.
fn add(total: &mut crate::BulkOutcome, chunk: crate::BulkOutcome) {
    total.matched += chunk.matched;
    total.done += chunk.done;
    total.skipped += chunk.skipped;
}
