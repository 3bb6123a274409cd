//! The embedded queue as a worker's [`Backend`](crate::Backend): its `Jobs` calls, and the finishes a worker need not
//! wait on.

use crate::error::Result;
use crate::impl_backend_by_jobs;
use crate::ops::finish::Finish;
use crate::queue::Queue;
use crate::worker::backend::BoxFuture;

impl_backend_by_jobs!(Queue;
    fn finish_many_unhurried(
        &self,
        finishes: Vec<Finish>,
        taken: tokio::sync::oneshot::Sender<()>,
    ) -> BoxFuture<'_, Result<Vec<Result<()>>>> {
        Box::pin(Queue::finish_many_unhurried(self, finishes, taken))
    }

    fn holds_finishes_for_company(&self) -> bool {
        // Only SQLite's syncer holds; a queue on PostgreSQL, or with Durability::Normal, answers at commit.
        Queue::holds_finishes_for_company(self)
    }
);
