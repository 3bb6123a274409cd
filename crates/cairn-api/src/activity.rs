//! The activity log: one transition per event, a page at a time, newest first.

use cairn::{ActivityEvent, ActivityFilter, ActivityPage, Error, JobId};
use jiff::Timestamp;
use serde::{Deserialize, Serialize};

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

use crate::READ;
use crate::query::{id_param, optional, time_param};
use crate::route::{Answer, RouteVisitor, invalid, route};

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
    /// worker_started, worker_stopped, worker_lost, moved, rescheduled, prioritized, deleted, queue_changed,
    /// promoted, audit, step_recorded or suspended.
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

/// Which events (`GET /v1/activity`'s parameters).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ActivityQuery {
    /// Only this job's events.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<crate::rules::JobId>))]
    pub job: Option<String>,
    /// Only this worker's.
    pub worker: Option<String>,
    /// Only this queue's.
    pub queue: Option<String>,
    /// Only events at or after this time (RFC 3339).
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub since: Option<String>,
    /// Only events before this time (RFC 3339).
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub until: Option<String>,
    /// Only events older than this id (the `next_before` of the previous page).
    #[cfg_attr(feature = "openapi", schema(value_type = Option<crate::rules::JobId>))]
    pub before: Option<String>,
    /// The most events (default 100, at most 1000).
    #[cfg_attr(feature = "openapi", schema(value_type = Option<u32>, minimum = 1, maximum = 1000))]
    pub limit: Option<String>,
}

impl From<&ActivityFilter> for ActivityQuery {
    fn from(filter: &ActivityFilter) -> Self {
        ActivityQuery {
            job: filter.job.map(|job| job.to_string()),
            worker: filter.worker.clone(),
            queue: filter.queue.clone(),
            since: filter.since.map(|at| at.to_string()),
            until: filter.until.map(|at| at.to_string()),
            before: filter.before.map(|id| id.to_string()),
            limit: (filter.limit > 0).then(|| filter.limit.to_string()),
        }
    }
}

impl ActivityQuery {
    /// The engine's filter.
    ///
    /// # Errors
    /// [`cairn::ErrorKind::InvalidInput`] naming the parameter that is not of its kind.
    pub fn into_filter(self) -> cairn::Result<ActivityFilter> {
        Ok(ActivityFilter {
            job: optional(self.job.as_ref(), |t| id_param("job", t))?,
            worker: self.worker,
            queue: self.queue,
            since: optional(self.since.as_ref(), |t| time_param("since", t))?,
            until: optional(self.until.as_ref(), |t| time_param("until", t))?,
            before: optional(self.before.as_ref(), |t| {
                id_param("before", t).map(|id| id.0)
            })?,
            limit: match self.limit.as_deref() {
                None => 0,
                Some(t) => t.parse().ok().filter(|n| *n > 0).ok_or_else(|| {
                    invalid(
                        "limit",
                        format!(
                            "must be an integer between 1 and {}, got {t:?}",
                            cairn::MAX_ACTIVITY_PAGE
                        ),
                    )
                })?,
            },
        })
    }
}

impl Answer<ActivityPage> for ActivityPageBody {
    fn from_output(page: ActivityPage) -> Self {
        ActivityPageBody::from(&page)
    }

    fn into_output(self) -> cairn::Result<ActivityPage> {
        self.to_page()
    }
}

/// The activity log's routes, for [`visit_routes`](crate::visit_routes).
pub(crate) fn visit_activity_routes(visitor: &mut impl RouteVisitor) {
    visitor.visit::<ActivityFilter>();
}

route! {
    ActivityFilter: Get "/v1/activity", params [], tag "stats", id "activity", access READ, reach Server,
    summary "The activity log, newest first: every job and worker transition.",
    done "A page of events",
    errors [(400, "A bad filter")],
    path |_r| [],
    body ActivityQuery = |r| ActivityQuery::from(r),
    answer ActivityPageBody,
    from |_received, query| query.into_filter(),
}
