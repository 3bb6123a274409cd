//! Steps inside a handler's run: recorded under the job's lease, and read back with the job by every later attempt
//! (see `cairn::RecordStep`).

use cairn::{Error, RecordStep, Step, StepName};
use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::Value;

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

use crate::WORK;
use crate::leases::parse_token;
use crate::route::{Answer, JOB_ID, RouteVisitor, route};

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
