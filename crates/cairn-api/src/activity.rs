//! The activity log: one transition per event, a page at a time, newest first.

use cairn::{ActivityEvent, ActivityPage, Error, JobId};
use jiff::Timestamp;
use serde::{Deserialize, Serialize};

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

/// One transition in the activity log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct ActivityEventBody {
    /// Its position in the log.
    pub id: i64,
    /// When it happened.
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub at: Timestamp,
    /// added, debounced, started, heartbeat_lost, retried, finished, failed, cancelled, released, requeued, unfailed,
    /// worker_started, worker_stopped, worker_lost, moved, rescheduled, prioritized, deleted, queue_changed or
    /// promoted.
    pub event: String,
    /// The job, for a job's transition.
    pub job: Option<i64>,
    /// The queue.
    pub queue: Option<String>,
    /// The job's name.
    pub name: Option<String>,
    /// The worker.
    pub worker: Option<String>,
    /// An error message, a reason, a count.
    pub detail: Option<String>,
}

impl ActivityEventBody {
    /// The engine's event; one of a kind this client does not know (a newer server's) is
    /// [`ActivityKind::Unknown`](cairn::ActivityKind::Unknown).
    ///
    /// # Errors
    /// None today; kept for bodies that may one day not convert.
    pub fn to_event(&self) -> Result<ActivityEvent, Error> {
        let kind = cairn::ActivityKind::parse(&self.event).unwrap_or(cairn::ActivityKind::Unknown);
        Ok(ActivityEvent {
            id: self.id,
            at: self.at,
            kind,
            job: self.job.map(JobId),
            queue: self.queue.clone(),
            name: self.name.clone(),
            worker: self.worker.clone(),
            detail: self.detail.clone(),
        })
    }
}

impl From<&ActivityEvent> for ActivityEventBody {
    fn from(e: &ActivityEvent) -> Self {
        ActivityEventBody {
            id: e.id,
            at: e.at,
            event: e.kind.as_str().to_owned(),
            job: e.job.map(|j| j.0),
            queue: e.queue.clone(),
            name: e.name.clone(),
            worker: e.worker.clone(),
            detail: e.detail.clone(),
        }
    }
}

/// A page of the activity log, newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct ActivityPageBody {
    /// The events.
    pub events: Vec<ActivityEventBody>,
    /// Pass as `before` for the next page; absent on the last.
    pub next_before: Option<i64>,
}

impl From<&ActivityPage> for ActivityPageBody {
    fn from(p: &ActivityPage) -> Self {
        ActivityPageBody {
            events: p.events.iter().map(ActivityEventBody::from).collect(),
            next_before: p.next_before,
        }
    }
}

impl ActivityPageBody {
    /// The engine's form.
    ///
    /// # Errors
    /// An event kind this version does not know.
    pub fn to_page(&self) -> cairn::Result<ActivityPage> {
        let events = self
            .events
            .iter()
            .map(ActivityEventBody::to_event)
            .collect::<cairn::Result<_>>()?;
        Ok(ActivityPage {
            events,
            next_before: self.next_before,
        })
    }
}
