//! Fan-out and fan-in as steps of a running attempt: `POST /v1/jobs/{id}/spawn` pushes child jobs once
//! (`cairn::Spawn`), `POST /v1/jobs/{id}/join` waits for the job's children without holding a worker
//! (`cairn::Join`).

use cairn::{Error, JobId, JobState, Join, Joined, JoinedChild, Push, Spawn, StepName};
use serde::{Deserialize, Serialize};
use serde_json::Value;

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

use crate::leases::parse_token;
use crate::push::{PushRequest, in_trace};
use crate::route::{JOB_ID, RouteVisitor, invalid, route};
use crate::{Answer, Named, WORK};

/// Spawn child jobs as a step of the running attempt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct SpawnRequest {
    /// The lease's token.
    #[cfg_attr(feature = "openapi", schema(value_type = crate::rules::LeaseToken))]
    pub token: String,
    /// The step's name within the job.
    #[cfg_attr(feature = "openapi", schema(value_type = crate::rules::StepName))]
    pub name: String,
    /// The jobs to push, as `POST /v1/jobs` takes each: their parent is the job (one naming another is refused).
    pub jobs: Vec<PushRequest>,
}

/// The jobs a spawn pushed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct SpawnedBody {
    /// Their ids, in request order.
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<crate::rules::JobId>))]
    pub children: Vec<i64>,
}

impl Answer<Vec<JobId>> for SpawnedBody {
    fn from_output(ids: Vec<JobId>) -> Self {
        SpawnedBody {
            children: ids.iter().map(|id| id.0).collect(),
        }
    }

    fn into_output(self) -> Result<Vec<JobId>, Error> {
        Ok(self.children.into_iter().map(JobId).collect())
    }
}

/// Wait for the job's children as a step of the running attempt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct JoinRequest {
    /// The lease's token.
    #[cfg_attr(feature = "openapi", schema(value_type = crate::rules::LeaseToken))]
    pub token: String,
    /// The step's name within the job.
    #[cfg_attr(feature = "openapi", schema(value_type = crate::rules::StepName))]
    pub name: String,
}

/// How a child ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct JoinedChildBody {
    /// The child's id.
    #[cfg_attr(feature = "openapi", schema(value_type = crate::rules::JobId))]
    pub id: i64,
    /// `completed`, `cancelled`, or `failed` (when failed children do not hold their parent).
    pub state: String,
    /// Its result, if it completed with one.
    #[serde(default)]
    pub result: Option<Value>,
}

/// What came of a join.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct JoinedBody {
    /// Whether the job now waits for its children: its lease is over, and the handler must stop. It runs again
    /// once they have ended, and this step then answers them.
    pub suspended: bool,
    /// How each child ended, oldest first, once none holds the job (empty while it waits).
    pub children: Vec<JoinedChildBody>,
}

impl Answer<Joined> for JoinedBody {
    fn from_output(joined: Joined) -> Self {
        match joined {
            Joined::Suspended => JoinedBody {
                suspended: true,
                children: Vec::new(),
            },
            Joined::Ended(children) => JoinedBody {
                suspended: false,
                children: children
                    .into_iter()
                    .map(|c| JoinedChildBody {
                        id: c.id.0,
                        state: c.state.as_str().to_owned(),
                        result: c.result,
                    })
                    .collect(),
            },
        }
    }

    fn into_output(self) -> Result<Joined, Error> {
        if self.suspended {
            return Ok(Joined::Suspended);
        }
        let children = self
            .children
            .into_iter()
            .map(|c| {
                Ok(JoinedChild {
                    id: JobId(c.id),
                    state: c
                        .state
                        .parse::<JobState>()
                        .map_err(|_| crate::errors::malformed("a child in an unknown state"))?,
                    result: c.result,
                })
            })
            .collect::<Result<Vec<_>, Error>>()?;
        Ok(Joined::Ended(children))
    }
}

/// The fan-out routes declared here, for [`visit_routes`](crate::visit_routes).
pub(crate) fn visit_fan_out_routes(visitor: &mut impl RouteVisitor) {
    visitor.visit::<Spawn>();
    visitor.visit::<Join>();
}

route! {
    Spawn: Post "/v1/jobs/{id}/spawn", params [JOB_ID], tag "workers", id "spawn",
        access WORK, reach Queues,
    summary "Spawns child jobs as a step of the running attempt: pushes them as the job's children, all or none, and \
        records their ids, so that a later attempt gets the ids back and pushes nothing. They start at once: they \
        neither wait for the run to finish nor go if it fails. At most 1,000 jobs.",
    done "The children's ids, in request order (a step already recorded answers its ids)",
    errors [
        (409, "The lease was lost"),
        (
            400,
            "Bad input: a bad id or name, a job refused (naming its index and field), a job naming another parent, \
             or more than 1,000 jobs; `field` names it"
        ),
    ],
    path |r| [r.job],
    body SpawnRequest = |r| SpawnRequest {
        token: r.token.to_string(),
        name: r.name.as_str().to_owned(),
        jobs: r.children.iter().map(PushRequest::from).collect(),
    },
    answer SpawnedBody,
    from |received, body| {
        let job = received.job()?;
        let token = parse_token("token", &body.token)?;
        let name = StepName::parse(body.name).map_err(|e| e.renamed("name"))?;
        if body.jobs.len() > cairn::MAX_SPAWN {
            return Err(invalid(
                "jobs",
                format!("must hold at most {} jobs, got {}", cairn::MAX_SPAWN, body.jobs.len()),
            ));
        }
        let children: Vec<Push> =
            body.jobs.into_iter().map(|push| in_trace(Push::from(push), received)).collect();
        Ok(Spawn { job, token, name, children })
    },
    names |r| Named::jobs([r.job]).and(Named::pushes(&r.children)),
}

route! {
    Join: Post "/v1/jobs/{id}/join", params [JOB_ID], tag "workers", id "join",
        access WORK, reach Queues,
    summary "Waits for the job's children as a step of the running attempt. Once none holds the job (each has ended, \
        and a failed one holds it unless the job's children are its own), it answers how each ended and records it, \
        so that a later attempt reads the same. Otherwise the job gives up its worker (the lease ends, the attempt \
        does not count) until they have, when it runs again and replays its steps.",
    done "The children as they ended, or (`suspended`) the job waits for them",
    errors [
        (409, "The lease was lost"),
        (400, "Bad input: a bad id or name, or a step of that name that is not a join; `field` names it"),
    ],
    path |r| [r.job],
    body JoinRequest = |r| JoinRequest {
        token: r.token.to_string(),
        name: r.name.as_str().to_owned(),
    },
    answer JoinedBody,
    from |received, body| Ok(Join {
        job: received.job()?,
        token: parse_token("token", &body.token)?,
        name: StepName::parse(body.name).map_err(|e| e.renamed("name"))?,
    }),
}
