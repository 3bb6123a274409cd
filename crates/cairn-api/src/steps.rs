//! Steps inside a handler's run: recorded under the job's lease, and read back with the job by every later attempt
//! (see `cairn::RecordStep`); and sleeps, steps that give up the worker until a time (`cairn::Sleep`).

use cairn::{Error, RecordStep, Sleep, Slept, Step, StepName, Wake};
use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::Value;

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

use crate::WORK;
use crate::leases::parse_token;
use crate::millis::{millis, to_millis};
use crate::route::{Answer, JOB_ID, RouteVisitor, invalid, route};

/// Record a step of the running attempt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct StepRequest {
    /// The lease's token.
    #[cfg_attr(feature = "openapi", schema(value_type = crate::rules::LeaseToken))]
    pub token: String,
    /// The step's name within the job; a client numbers a name its handler uses again in one run (`charge#2`).
    #[cfg_attr(feature = "openapi", schema(value_type = crate::rules::StepName))]
    pub name: String,
    /// What the step produced: any JSON, which a later attempt reads instead of running the step again.
    pub result: Value,
}

/// A step as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct StepBody {
    /// Its name within the job.
    pub name: String,
    /// What it produced.
    pub result: Value,
    /// The attempt that recorded it.
    pub attempt: u32,
    /// When it was recorded.
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub recorded_at: Timestamp,
}

impl From<&Step> for StepBody {
    fn from(s: &Step) -> Self {
        StepBody {
            name: s.name.clone(),
            result: s.result.clone(),
            attempt: s.attempt,
            recorded_at: s.recorded_at,
        }
    }
}

impl From<&StepBody> for Step {
    fn from(b: &StepBody) -> Self {
        Step {
            name: b.name.clone(),
            result: b.result.clone(),
            attempt: b.attempt,
            recorded_at: b.recorded_at,
        }
    }
}

impl Answer<Step> for StepBody {
    fn from_output(step: Step) -> Self {
        StepBody::from(&step)
    }

    fn into_output(self) -> Result<Step, Error> {
        Ok(Step::from(&self))
    }
}

/// The steps' routes declared here, for [`visit_routes`](crate::visit_routes).
pub(crate) fn visit_step_routes(visitor: &mut impl RouteVisitor) {
    visitor.visit::<RecordStep>();
    visitor.visit::<Sleep>();
}

route! {
    RecordStep: Post "/v1/jobs/{id}/steps", params [JOB_ID], tag "workers", id "record_step",
        access WORK, reach Queues,
    summary "Records a step of the running attempt, and extends the lease. A step already recorded keeps its first \
        result, which the answer gives, so a request sent again after its answer was lost changes nothing.",
    done "The step as recorded",
    errors [
        (409, "The lease was lost"),
        (
            400,
            "Bad input: a bad id or name, a result larger than the largest job data, or a job at its limit of steps \
             or of their bytes; `field` names it"
        ),
    ],
    path |r| [r.job],
    body StepRequest = |r| StepRequest {
        token: r.token.to_string(),
        name: r.name.as_str().to_owned(),
        result: r.result.clone(),
    },
    answer StepBody,
    from |path, body| Ok(RecordStep {
        job: path.job()?,
        token: parse_token("token", &body.token)?,
        // The engine names a step's name `step`; the body calls it `name`.
        name: StepName::parse(body.name).map_err(|e| e.renamed("name"))?,
        result: body.result,
    }),
}

/// Sleep as a step of the running attempt: give up the worker until a time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct SleepRequest {
    /// The lease's token.
    #[cfg_attr(feature = "openapi", schema(value_type = crate::rules::LeaseToken))]
    pub token: String,
    /// The step's name within the job.
    #[cfg_attr(feature = "openapi", schema(value_type = crate::rules::StepName))]
    pub name: String,
    /// Wake at this time; give this or `for_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub until: Option<Timestamp>,
    /// Wake this many milliseconds after the step is first reached, by the server's clock, at most ten years; give
    /// this or `until`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(format = "uint64", maximum = 315_360_000_000_u64)
    )]
    pub for_ms: Option<u64>,
}

/// The longest sleep `for_ms` gives: ten years, in milliseconds.
pub(crate) const MAX_SLEEP_MS: u64 = 10 * 365 * 24 * 3600 * 1000;

/// What came of a sleep.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct SleptBody {
    /// Whether the job now sleeps: its lease is over, and the handler must stop. False when the step's time had
    /// passed already (a job woken from this sleep), and the handler goes on.
    pub suspended: bool,
    /// When it wakes, while it sleeps.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub until: Option<Timestamp>,
}

impl Answer<Slept> for SleptBody {
    fn from_output(slept: Slept) -> Self {
        match slept {
            Slept::Suspended { until } => SleptBody {
                suspended: true,
                until: Some(until),
            },
            Slept::Woke => SleptBody {
                suspended: false,
                until: None,
            },
        }
    }

    fn into_output(self) -> Result<Slept, Error> {
        match (self.suspended, self.until) {
            (true, Some(until)) => Ok(Slept::Suspended { until }),
            (false, _) => Ok(Slept::Woke),
            (true, None) => Err(crate::errors::malformed("a sleep without its wake time")),
        }
    }
}

route! {
    Sleep: Post "/v1/jobs/{id}/sleep", params [JOB_ID], tag "workers", id "sleep",
        access WORK, reach Queues,
    summary "Sleeps as a step of the running attempt: the first time, the wake time is recorded as the step's result \
        and the job gives up its worker (the lease ends, the attempt does not count) until then, when it runs again and \
        replays its steps. Once the time has passed, the step answers at once and the handler goes on.",
    done "Asleep until `until`, or (`suspended: false`) the time has passed",
    errors [
        (409, "The lease was lost"),
        (
            400,
            "Bad input: a bad id or name, neither or both of `until` and `for_ms`, or a step of that name that is not a \
             sleep; `field` names it"
        ),
    ],
    path |r| [r.job],
    body SleepRequest = |r| SleepRequest {
        token: r.token.to_string(),
        name: r.name.as_str().to_owned(),
        until: match r.wake { Wake::At(at) => Some(at), Wake::After(_) => None },
        for_ms: match r.wake { Wake::After(span) => Some(to_millis(span)), Wake::At(_) => None },
    },
    answer SleptBody,
    from |path, body| Ok(Sleep {
        job: path.job()?,
        token: parse_token("token", &body.token)?,
        name: StepName::parse(body.name).map_err(|e| e.renamed("name"))?,
        wake: match (body.until, body.for_ms) {
            (Some(at), None) => Wake::At(at),
            (None, Some(ms)) if ms <= MAX_SLEEP_MS => Wake::After(millis(ms)),
            (None, Some(ms)) => {
                return Err(invalid("for_ms", format!("must be at most {MAX_SLEEP_MS} (ten years), got {ms}")))
            }
            _ => return Err(invalid("until", "give either until (a time) or for_ms (milliseconds), not both nor neither")),
        },
    }),
}
