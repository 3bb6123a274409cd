//! [`Request`]: anything a queue answers. [`Queue::run`](crate::Queue::run) runs every one of them, and
//! `cairn_api::Jobs` runs them embedded or against a server alike, so an operation is declared once, as its
//! struct, and each way in reaches it through this trait.

use crate::error::Result;
use crate::queue::Queue;
use crate::worker::backend::BoxFuture;

/// A request a queue answers: an operation's struct (`Push`, `Cancel`, `MoveJob`, …).
pub trait Request: Send + 'static {
    /// What the request answers.
    type Output: Send + 'static;

    /// Runs the request on `queue`. Call [`Queue::run`] rather than this.
    #[doc(hidden)]
    fn run_on(self, queue: &Queue) -> BoxFuture<'_, Result<Self::Output>>;
}

/// Makes each operation the writer applies a [`Request`] that runs in the writer's next batch (listed below, each
/// with its output: the compiler holds it to the operation's own).
macro_rules! written_requests {
    ($($op:ty => $output:ty),* $(,)?) => {$(
        impl $crate::queue::request::Request for $op {
            type Output = $output;

            fn run_on(
                self,
                queue: &$crate::queue::Queue,
            ) -> $crate::worker::backend::BoxFuture<'_, $crate::error::Result<Self::Output>> {
                Box::pin(queue.write(self))
            }
        }
    )*};
}

// Every operation the writer applies answers `Queue::run` with its output.
written_requests!(
    crate::ops::aging::AgeQueue => (),
    crate::ops::audit::RecordAudit => (),
    crate::ops::batches::AddToBatch => Vec<crate::ops::push::Enqueued>,
    crate::ops::batches::CloseBatch => crate::ops::batches::Batch,
    crate::ops::batches::CreateBatch => crate::ops::batches::BatchCreated,
    crate::ops::cancel::Cancel => (),
    crate::ops::checkpoint::Checkpoint => jiff::Timestamp,
    crate::ops::config::SetConfig => crate::ops::config::ConfigEntry,
    crate::ops::config::UnsetConfig => crate::ops::config::ConfigEntry,
    crate::ops::delete::Delete => (),
    crate::ops::dependencies::ChangeDependencies => crate::job::JobState,
    crate::ops::fail::Fail => (),
    crate::ops::failures::Unfail => u64,
    crate::ops::fan_out::Join => crate::ops::fan_out::Joined,
    crate::ops::fan_out::Spawn => Vec<crate::names::JobId>,
    crate::ops::finish::Finish => (),
    crate::ops::heartbeat::Heartbeat => jiff::Timestamp,
    crate::ops::move_job::MoveJob => (),
    crate::ops::push::Push => crate::ops::push::Enqueued,
    crate::ops::push::PushBatch => Vec<crate::ops::push::Enqueued>,
    crate::ops::queues::LimitKeys => (),
    crate::ops::queues::LimitQueue => (),
    crate::ops::queues::PauseQueue => (),
    crate::ops::queues::ResumeQueue => (),
    crate::ops::queues::WeighKey => (),
    crate::ops::rate_limit::RateLimitQueue => (),
    crate::ops::recurring::PauseRecurring => crate::ops::recurring::RecurringInfo,
    crate::ops::recurring::RemoveRecurring => (),
    crate::ops::recurring::ResumeRecurring => crate::ops::recurring::RecurringInfo,
    crate::ops::recurring::RunRecurring => crate::ops::push::Enqueued,
    crate::ops::recurring::SetRecurring => crate::ops::recurring::RecurringInfo,
    crate::ops::release::Release => (),
    crate::ops::rename::Rename => (),
    crate::ops::requeue::Requeue => crate::job::JobState,
    crate::ops::reschedule::Reschedule => crate::job::JobState,
    crate::ops::retry::Retry => crate::job::JobState,
    crate::ops::set_data::SetData => (),
    crate::ops::set_priority::SetPriority => (),
    crate::ops::set_schedule::SetSchedule => (),
    crate::ops::signal::SendSignal => crate::ops::signal::SignalSent,
    crate::ops::signal::WaitForSignal => crate::ops::signal::SignalWait,
    crate::ops::step::RecordStep => crate::job::Step,
    crate::ops::step::Sleep => crate::ops::step::Slept,
    crate::ops::tags::ChangeTags => (),
    crate::ops::track::Track => (),
    crate::ops::track::Untrack => (),
    crate::ops::update::Update => (),
    crate::ops::workers::WorkerStopped => (),
);
