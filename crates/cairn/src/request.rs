//! [`Request`]: anything a queue answers. [`Queue::run`](crate::Queue::run) runs every one of them, and
//! `cairn_api::Jobs` runs them embedded or against a server alike, so an operation is declared once, as its
//! struct, and each way in reaches it through this trait.

use crate::error::Result;
use crate::queue::Queue;
use crate::worker::BoxFuture;

/// A request a queue answers: an operation's struct (`Push`, `Cancel`, `MoveJob`, …).
pub trait Request: Send + 'static {
    /// What the request answers.
    type Output: Send + 'static;

    /// Runs the request on `queue`. Call [`Queue::run`] rather than this.
    #[doc(hidden)]
    fn run_on(self, queue: &Queue) -> BoxFuture<'_, Result<Self::Output>>;
}

/// Makes each operation the writer applies a [`Request`] that runs in the writer's next batch (`ops/mod.rs` lists
/// them, each with its output: the compiler holds it to the operation's own).
macro_rules! written_requests {
    ($($op:ty => $output:ty),* $(,)?) => {$(
        impl $crate::request::Request for $op {
            type Output = $output;

            fn run_on(
                self,
                queue: &$crate::queue::Queue,
            ) -> $crate::worker::BoxFuture<'_, $crate::error::Result<Self::Output>> {
                Box::pin(queue.write(self))
            }
        }
    )*};
}
pub(crate) use written_requests;
