//! Recurring templates: a cron schedule in a time zone, and the job it creates at each slot.

use cairn::{
    Error, GetRecurring, ListRecurring, MissedSlots, Overlap, PauseRecurring, Push, Recurring,
    RecurringInfo, RemoveRecurring, ResumeRecurring, RunRecurring, SetRecurring,
};
use jiff::Timestamp;
use serde::{Deserialize, Serialize};

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

use crate::EmptyBody;
use crate::push::{EnqueuedBody, PushRequest};
use crate::route::{Answer, PathParam, RouteVisitor, route};
use crate::{ADMIN, READ};

/// A recurring template: at every slot of `cron` in `time_zone`, a job like `job` is created, due at the slot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RecurringRequest {
    /// A cron expression, such as `0 4 * * *`.
    pub cron: String,
    /// An IANA time zone such as `Europe/Berlin`; UTC when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
    /// Slots that passed while the server was down: `skip` them, run `once` for all of them (the default), or run
    /// `all` of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<crate::rules::MissedSlots>))]
    pub missed: Option<String>,
    /// When the job of the previous slot is still scheduled, queued, waiting or running at the next: `allow` another
    /// run (the default), `skip` the slot, or `replace` the previous run (cancelled, its worker refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<crate::rules::OverlapPolicy>))]
    pub overlap: Option<String>,
    /// The job to create at each slot; its `run_at`, `delay_ms`, `parent`, `depends_on`, `schedule`, `debounce` and
    /// `throttle` must be unset (the slot times each run). With a `unique_key`, a slot adds nothing while a live
    /// job holds the key.
    pub job: PushRequest,
}

impl RecurringRequest {
    /// The engine's template under `key`.
    ///
    /// # Errors
    /// [`cairn::ErrorKind::InvalidInput`] on `missed` when it is not `skip`, `once` or `all`, and on `overlap` when it is
    /// not `allow`, `skip` or `replace`.
    pub fn into_recurring(self, key: String) -> Result<Recurring, Error> {
        let missed = self
            .missed
            .as_deref()
            .map(MissedSlots::parse)
            .transpose()?
            .unwrap_or_default();
        let overlap = self
            .overlap
            .as_deref()
            .map(Overlap::parse)
            .transpose()?
            .unwrap_or_default();
        Ok(Recurring {
            key,
            cron: self.cron,
            time_zone: self.time_zone.unwrap_or_else(|| "UTC".to_owned()),
            missed,
            overlap,
            job: Push::from(self.job),
        })
    }
}

impl From<&Recurring> for RecurringRequest {
    fn from(r: &Recurring) -> Self {
        RecurringRequest {
            cron: r.cron.clone(),
            time_zone: Some(r.time_zone.clone()),
            missed: Some(r.missed.as_str().to_owned()),
            overlap: Some(r.overlap.as_str().to_owned()),
            job: PushRequest::from(&r.job),
        }
    }
}

/// A recurring template as stored, and when it runs next.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct RecurringBody {
    /// The template's key.
    pub key: String,
    /// Its cron expression.
    pub cron: String,
    /// Its time zone.
    pub time_zone: String,
    /// The next slot, if the schedule has one.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub next_run: Option<Timestamp>,
    /// The latest slot a job was created for.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub last_run: Option<Timestamp>,
    /// What it does at a slot when the previous run is still live: `allow`, `skip` or `replace`.
    #[cfg_attr(feature = "openapi", schema(value_type = crate::rules::OverlapPolicy))]
    pub overlap: String,
    /// Whether it is paused: it creates no job, and has no next run, until resumed.
    #[serde(default)]
    pub paused: bool,
    /// The last job it created (at a slot, or run by hand); it may be gone since.
    #[serde(default)]
    pub last_job: Option<i64>,
    /// What it does with slots that passed while the server was down: `skip`, `once` or `all`.
    #[cfg_attr(feature = "openapi", schema(value_type = crate::rules::MissedSlots))]
    pub missed: String,
    /// The job it creates at each slot, as it was set.
    pub job: PushRequest,
}

impl From<&RecurringInfo> for RecurringBody {
    fn from(info: &RecurringInfo) -> Self {
        RecurringBody {
            key: info.key.clone(),
            cron: info.cron.clone(),
            time_zone: info.time_zone.clone(),
            next_run: info.next_run,
            last_run: info.last_run,
            overlap: info.overlap.as_str().to_owned(),
            paused: info.paused,
            last_job: info.last_job.map(|j| j.0),
            missed: info.missed.as_str().to_owned(),
            job: PushRequest::from(&info.job),
        }
    }
}

impl From<RecurringBody> for RecurringInfo {
    fn from(body: RecurringBody) -> Self {
        RecurringInfo {
            key: body.key,
            cron: body.cron,
            time_zone: body.time_zone,
            next_run: body.next_run,
            last_run: body.last_run,
            // A server that answers with a policy this client does not know: the default's behaviour is the
            // nearest thing to say.
            overlap: Overlap::parse(&body.overlap).unwrap_or_default(),
            paused: body.paused,
            last_job: body.last_job.map(cairn::JobId),
            // As for `overlap` above.
            missed: MissedSlots::parse(&body.missed).unwrap_or_default(),
            job: Push::from(body.job),
        }
    }
}

/// Every recurring template, by key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct RecurringListBody {
    /// The templates.
    pub recurring: Vec<RecurringBody>,
}

/// The `{key}` of a recurring template's path.
pub const RECURRING_KEY: PathParam = PathParam {
    name: "key",
    description: "The template's key",
    rule: "RecurringKey",
};

/// The recurring templates' routes declared here, for [`visit_routes`](crate::visit_routes).
pub(crate) fn visit_recurring_routes(visitor: &mut impl RouteVisitor) {
    visitor.visit::<SetRecurring>();
    visitor.visit::<RemoveRecurring>();
    visitor.visit::<ListRecurring>();
    visitor.visit::<GetRecurring>();
    visitor.visit::<PauseRecurring>();
    visitor.visit::<ResumeRecurring>();
    visitor.visit::<RunRecurring>();
}

impl Answer<RecurringInfo> for RecurringBody {
    fn from_output(info: RecurringInfo) -> Self {
        RecurringBody::from(&info)
    }

    fn into_output(self) -> Result<RecurringInfo, Error> {
        Ok(RecurringInfo::from(self))
    }
}

route! {
    PauseRecurring: Post "/v1/recurring/{key}/pause", params [RECURRING_KEY], tag "recurring", id "pause_recurring",
        access ADMIN, reach Server,
    summary "Pauses a recurring template: it creates no job, and has no next run, until resumed.",
    done "Paused (or already paused); the template",
    errors [(404, "No such template")],
    path |r| [r.key],
    body EmptyBody = |_| EmptyBody {},
    answer RecurringBody,
    from |path, _| Ok(PauseRecurring {
        key: path.text("key")?.to_owned(),
    }),
}

route! {
    ResumeRecurring: Post "/v1/recurring/{key}/resume", params [RECURRING_KEY], tag "recurring", id "resume_recurring",
        access ADMIN, reach Server,
    summary "Resumes a paused recurring template: its next slot counts from now (the slots it passed paused are not made \
     up).",
    done "Resumed (or not paused); the template, with its next run",
    errors [(404, "No such template")],
    path |r| [r.key],
    body EmptyBody = |_| EmptyBody {},
    answer RecurringBody,
    from |path, _| Ok(ResumeRecurring {
        key: path.text("key")?.to_owned(),
    }),
}

route! {
    RunRecurring: Post "/v1/recurring/{key}/run", params [RECURRING_KEY], tag "recurring", id "run_recurring",
        access ADMIN, reach Server,
    summary "Creates a recurring template's job now, outside its schedule, as a slot would: its overlap policy and unique \
     key hold.",
    done "Created; the job (existing: a live job holds the template's unique key, and this is that job)",
    errors [
        (404, "No such template"),
        (
            409,
            "Its previous run is still live and its overlap policy is skip"
        ),
    ],
    path |r| [r.key],
    body EmptyBody = |_| EmptyBody {},
    answer EnqueuedBody,
    from |path, _| Ok(RunRecurring {
        key: path.text("key")?.to_owned(),
    }),
}

route! {
    SetRecurring: Put "/v1/recurring/{key}", params [RECURRING_KEY], tag "recurring", id "set_recurring",
        access ADMIN, reach Server,
    summary "Creates or replaces the template `key`; its next slot counts from now.",
    done "The template, with its next run",
    errors [(400, "Bad input, naming the field")],
    path |r| [r.recurring.key],
    body RecurringRequest = |r| RecurringRequest::from(&r.recurring),
    answer RecurringBody,
    from |path, body| Ok(SetRecurring {
        recurring: body.into_recurring(path.text("key")?.to_owned())?,
    }),
}

route! {
    RemoveRecurring: Delete "/v1/recurring/{key}", params [RECURRING_KEY], tag "recurring", id "remove_recurring",
        access ADMIN, reach Server,
    summary "Removes the template `key`; the jobs it already created stay.",
    done "Removed",
    errors [(400, "A key that is not UTF-8 text"), (404, "No such template")],
    path |r| [r.key],
    no body,
    answer EmptyBody,
    from |path| Ok(RemoveRecurring { key: path.text("key")?.to_owned() }),
}

impl Answer<Vec<RecurringInfo>> for RecurringListBody {
    fn from_output(templates: Vec<RecurringInfo>) -> Self {
        RecurringListBody {
            recurring: templates.iter().map(RecurringBody::from).collect(),
        }
    }

    fn into_output(self) -> Result<Vec<RecurringInfo>, Error> {
        Ok(self
            .recurring
            .into_iter()
            .map(RecurringInfo::from)
            .collect())
    }
}

route! {
    GetRecurring: Get "/v1/recurring/{key}", params [RECURRING_KEY], tag "recurring", id "get_recurring",
        access READ, reach Server,
    summary "One template: its schedule and policies, the job it creates, and its next and last runs.",
    done "The template",
    errors [(404, "No such template")],
    path |r| [r.key],
    no body,
    answer RecurringBody,
    from |path| Ok(GetRecurring { key: path.text("key")?.to_owned() }),
}

route! {
    ListRecurring: Get "/v1/recurring", params [], tag "recurring", id "list_recurring", access READ, reach Server,
    summary "Every template, by key, as `GET /v1/recurring/{key}` shows one.",
    done "The templates",
    errors [],
    path |_r| [],
    no body,
    answer RecurringListBody,
    from |_received| Ok(ListRecurring),
}
