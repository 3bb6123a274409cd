//! Queues: their counts and settings (pause, concurrency, rate limit, priority aging), a peek at their next jobs, and
//! failure groups with unfail.

use std::time::Duration;

use cairn::{
    AgeQueue, FailureGroup, KeyStats, LimitKeys, LimitQueue, ListFailures, ListQueues, PauseQueue,
    Peek, QueueStats, RateLimitQueue, ResumeQueue, Unfail, WeighKey,
};
use jiff::Timestamp;
use serde::{Deserialize, Serialize};

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

use crate::EmptyBody;
use crate::jobs::JobBody;
use crate::millis::to_millis;
use crate::query::limit_param;
use crate::route::{Answer, PathParam, QUEUE_NAME, RouteVisitor, route};
use crate::{ADMIN, READ};

/// One queue: whether it is paused, and its jobs counted by state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct QueueStatsBody {
    /// The queue.
    pub queue: String,
    /// Whether it hands out nothing for now (everything else works).
    pub paused: bool,
    /// The most of its jobs that may run at once across all workers, if limited.
    pub concurrency: Option<u32>,
    /// How many of its jobs may start per period across all workers, if limited.
    pub rate_limit: Option<RateLimitBody>,
    /// With priority aging, a ready job gains one priority point per this many milliseconds of waiting.
    #[serde(default)]
    pub priority_aging_ms: Option<u64>,
    /// Jobs waiting for their `run_at`.
    pub scheduled: u64,
    /// Jobs ready to be taken.
    pub queued: u64,
    /// Jobs waiting on other jobs.
    pub waiting: u64,
    /// Of the scheduled and waiting jobs, those their handler suspended (a sleep, a wait for a signal or for its
    /// children), which hold no worker.
    #[serde(default)]
    pub suspended: u64,
    /// Jobs leased to a worker whose lease has not run out.
    pub running: u64,
    /// Jobs whose lease ran out and that the queue has not retried yet (their worker is lost or hung).
    pub stalled: u64,
    /// Failed jobs.
    pub failed: u64,
    /// Completed jobs (until retention deletes them).
    pub completed: u64,
    /// Cancelled jobs (until retention deletes them).
    pub cancelled: u64,
    /// The most jobs of one concurrency key that may run at once, unless a job carries its own limit.
    #[serde(default)]
    pub key_concurrency: Option<u32>,
    /// Ready jobs whose concurrency key is at its limit: they wait for a job of their key to end.
    #[serde(default)]
    pub waiting_on_keys: u64,
    /// The concurrency keys with the most running jobs, then the most ready ones (at most 10).
    #[serde(default)]
    pub top_keys: Vec<KeyStatsBody>,
}

/// One concurrency key of a queue.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct KeyStatsBody {
    /// The key.
    #[cfg_attr(feature = "openapi", schema(value_type = crate::rules::ConcurrencyKey))]
    pub key: String,
    /// Its jobs leased to a worker.
    pub running: u64,
    /// Its jobs ready to be taken.
    pub queued: u64,
    /// The most of its jobs that may run at once, if limited.
    pub limit: Option<u32>,
    /// Whether it is at its limit: its ready jobs wait for one of its jobs to end.
    pub full: bool,
    /// Jobs it takes per turn.
    #[serde(default = "one")]
    pub weight: u32,
}

fn one() -> u32 {
    1
}

impl From<&KeyStats> for KeyStatsBody {
    fn from(k: &KeyStats) -> Self {
        KeyStatsBody {
            key: k.key.clone(),
            running: k.running,
            queued: k.queued,
            limit: k.limit,
            full: k.is_full(),
            weight: k.weight,
        }
    }
}

impl From<KeyStatsBody> for KeyStats {
    fn from(b: KeyStatsBody) -> Self {
        KeyStats {
            key: b.key,
            running: b.running,
            queued: b.queued,
            limit: b.limit,
            weight: b.weight,
        }
    }
}

impl From<&QueueStats> for QueueStatsBody {
    fn from(s: &QueueStats) -> Self {
        QueueStatsBody {
            queue: s.queue.clone(),
            paused: s.paused,
            concurrency: s.concurrency,
            rate_limit: s.rate_limit.map(RateLimitBody::from),
            priority_aging_ms: s.priority_aging.map(to_millis),
            scheduled: s.scheduled,
            queued: s.queued,
            waiting: s.waiting,
            suspended: s.suspended,
            running: s.running,
            stalled: s.stalled,
            failed: s.failed,
            completed: s.completed,
            cancelled: s.cancelled,
            key_concurrency: s.key_concurrency,
            waiting_on_keys: s.waiting_on_keys,
            top_keys: s.top_keys.iter().map(KeyStatsBody::from).collect(),
        }
    }
}

impl From<QueueStatsBody> for QueueStats {
    fn from(b: QueueStatsBody) -> Self {
        QueueStats {
            queue: b.queue,
            paused: b.paused,
            concurrency: b.concurrency,
            rate_limit: b.rate_limit.map(cairn::RateLimit::from),
            priority_aging: b.priority_aging_ms.map(Duration::from_millis),
            scheduled: b.scheduled,
            queued: b.queued,
            waiting: b.waiting,
            suspended: b.suspended,
            running: b.running,
            stalled: b.stalled,
            failed: b.failed,
            completed: b.completed,
            cancelled: b.cancelled,
            key_concurrency: b.key_concurrency,
            waiting_on_keys: b.waiting_on_keys,
            top_keys: b.top_keys.into_iter().map(KeyStats::from).collect(),
        }
    }
}

/// Every queue that has jobs or settings, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct QueueListBody {
    /// The queues.
    pub queues: Vec<QueueStatsBody>,
}

/// Set or remove a queue's concurrency limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ConcurrencyRequest {
    /// The most of the queue's jobs that may run at once across all workers; `null` removes the limit.
    #[cfg_attr(
        feature = "openapi",
        schema(minimum = 1, format = "uint32", maximum = 4_294_967_295_u32)
    )]
    pub concurrency: Option<u32>,
}

/// Set or remove a queue's limit per concurrency key.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct KeyConcurrencyRequest {
    /// The most of the queue's jobs with one key that may run at once across all workers and nodes, unless a job
    /// carries its own limit; `null` removes the limit.
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 1_000_000))]
    pub limit: Option<u32>,
}

/// Set or remove a concurrency key's weight in a queue: jobs it takes per turn.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct KeyWeightRequest {
    /// The key.
    #[cfg_attr(feature = "openapi", schema(value_type = crate::rules::ConcurrencyKey))]
    pub key: String,
    /// Jobs it takes per turn where other keys take one; `null` goes back to 1.
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 1000))]
    pub weight: Option<u32>,
}

/// Set or remove a queue's rate limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RateRequest {
    /// At most this many of the queue's jobs start per period across all workers; `null` removes the limit.
    pub rate: Option<RateLimitBody>,
}

/// A rate limit: at most `jobs` starts per `per_ms` milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RateLimitBody {
    /// How many jobs may start per period.
    #[cfg_attr(
        feature = "openapi",
        schema(minimum = 1, format = "uint32", maximum = 4_294_967_295_u32)
    )]
    pub jobs: u32,
    /// The period, in milliseconds.
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 31_622_400_000_u64))]
    pub per_ms: u64,
}

impl From<cairn::RateLimit> for RateLimitBody {
    fn from(r: cairn::RateLimit) -> Self {
        RateLimitBody {
            jobs: r.jobs,
            per_ms: u64::try_from(r.per.as_millis()).unwrap_or(u64::MAX),
        }
    }
}

impl From<RateLimitBody> for cairn::RateLimit {
    fn from(r: RateLimitBody) -> Self {
        cairn::RateLimit {
            jobs: r.jobs,
            per: Duration::from_millis(r.per_ms),
        }
    }
}

/// Turn a queue's priority aging on or off.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct AgingRequest {
    /// A ready job gains one priority point per this many milliseconds of waiting (1 to 86,400,000); `null` for
    /// strict priority.
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 86_400_000))]
    pub every_ms: Option<u64>,
}

/// The next jobs a worker taking from a queue would get, in that order, without taking them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct PeekBody {
    /// The jobs, in claim order (without their history); empty while the queue is paused.
    pub jobs: Vec<JobBody>,
}

/// One failure group: how many failed jobs it holds, and when they failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct FailureGroupBody {
    /// The group: `retries-exhausted`, or the group a worker failed the job with.
    pub group: String,
    /// How many jobs are failed in it.
    pub count: u64,
    /// When the first of them failed.
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub first_failed_at: Timestamp,
    /// When the last of them failed.
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub last_failed_at: Timestamp,
}

impl From<&FailureGroup> for FailureGroupBody {
    fn from(g: &FailureGroup) -> Self {
        FailureGroupBody {
            group: g.group.clone(),
            count: g.count,
            first_failed_at: g.first_failed_at,
            last_failed_at: g.last_failed_at,
        }
    }
}

impl From<FailureGroupBody> for FailureGroup {
    fn from(b: FailureGroupBody) -> Self {
        FailureGroup {
            group: b.group,
            count: b.count,
            first_failed_at: b.first_failed_at,
            last_failed_at: b.last_failed_at,
        }
    }
}

/// Every failure group that holds failed jobs, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct FailureGroupListBody {
    /// The groups.
    pub groups: Vec<FailureGroupBody>,
}

/// Put the oldest failed jobs of a failure group back in a queue, ready now, with fresh attempts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct UnfailRequest {
    /// The queue to move them to; each job's own when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<crate::rules::QueueName>))]
    pub queue: Option<String>,
    /// How many at most, oldest first (1 to 1,000,000); all of them (up to 1,000,000) when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 1_000_000))]
    pub limit: Option<u32>,
}

impl From<&Unfail> for UnfailRequest {
    fn from(u: &Unfail) -> Self {
        UnfailRequest {
            queue: u.queue.clone(),
            limit: Some(u.limit),
        }
    }
}

impl UnfailRequest {
    /// The engine's unfail of `group`; without a limit, as many as one unfail moves ([`cairn::MAX_UNFAIL`]).
    pub fn into_unfail(self, group: String) -> Unfail {
        Unfail {
            group,
            queue: self.queue,
            limit: self.limit.unwrap_or(cairn::MAX_UNFAIL),
        }
    }
}

/// What an unfail did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct UnfailBody {
    /// How many jobs went back (a job whose unique key another live job holds stays failed).
    pub moved: u64,
}

/// The `{group}` of a failure group's path.
pub const FAILURE_GROUP: PathParam = PathParam {
    name: "group",
    description: "The failure group",
    rule: "GroupToUnfail",
};

/// The queues' routes declared here, for [`visit_routes`](crate::visit_routes).
pub(crate) fn visit_queue_routes(visitor: &mut impl RouteVisitor) {
    visitor.visit::<PauseQueue>();
    visitor.visit::<ResumeQueue>();
    visitor.visit::<LimitQueue>();
    visitor.visit::<LimitKeys>();
    visitor.visit::<WeighKey>();
    visitor.visit::<RateLimitQueue>();
    visitor.visit::<AgeQueue>();
    visitor.visit::<Unfail>();
    visitor.visit::<ListQueues>();
    visitor.visit::<Peek>();
    visitor.visit::<ListFailures>();
}

impl Answer<u64> for UnfailBody {
    fn from_output(moved: u64) -> Self {
        UnfailBody { moved }
    }

    fn into_output(self) -> Result<u64, cairn::Error> {
        Ok(self.moved)
    }
}

route! {
    PauseQueue: Post "/v1/queues/{queue}/pause", params [QUEUE_NAME], tag "queues", id "pause",
        access ADMIN, reach Queues,
    summary "Pauses a queue: it hands out no job until it is resumed; enqueue, cancel, finish and everything else \
        work as usual. A queue may be paused before it has any job.",
    done "Paused",
    errors [(400, "A bad queue name")],
    path |r| [r.queue],
    no body,
    answer EmptyBody,
    from |path| Ok(PauseQueue { queue: path.text("queue")?.to_owned() }),
}

route! {
    ResumeQueue: Post "/v1/queues/{queue}/resume", params [QUEUE_NAME], tag "queues", id "resume",
        access ADMIN, reach Queues,
    summary "Resumes a queue: its ready jobs go at once to the workers waiting for them.",
    done "Resumed",
    errors [(400, "A bad queue name")],
    path |r| [r.queue],
    no body,
    answer EmptyBody,
    from |path| Ok(ResumeQueue { queue: path.text("queue")?.to_owned() }),
}

route! {
    LimitQueue: Post "/v1/queues/{queue}/concurrency", params [QUEUE_NAME], tag "queues", id "set_concurrency",
        access ADMIN, reach Queues,
    summary "Sets or removes a queue's concurrency limit: at most that many of its jobs run at once, across all \
        workers.",
    done "Set",
    errors [(400, "A bad queue name or limit (0: pause the queue instead)")],
    path |r| [r.queue],
    body ConcurrencyRequest = |r| ConcurrencyRequest { concurrency: r.concurrency },
    answer EmptyBody,
    from |path, body| Ok(LimitQueue {
        queue: path.text("queue")?.to_owned(),
        concurrency: body.concurrency,
    }),
}

route! {
    LimitKeys: Post "/v1/queues/{queue}/key-concurrency", params [QUEUE_NAME], tag "queues",
        id "set_key_concurrency", access ADMIN, reach Queues,
    summary "Sets or removes a queue's limit per concurrency key: at most that many of its jobs with one key run at \
        once, across all workers and nodes, unless a job carries its own limit. Claims pass over a key at its \
        limit.",
    done "Set",
    errors [
        (400, "A bad queue name or limit"),
        (409, "The queue has priority aging, which concurrency keys do not go with"),
    ],
    path |r| [r.queue],
    body KeyConcurrencyRequest = |r| KeyConcurrencyRequest { limit: r.limit },
    answer EmptyBody,
    from |path, body| Ok(LimitKeys {
        queue: path.text("queue")?.to_owned(),
        limit: body.limit,
    }),
}

route! {
    WeighKey: Post "/v1/queues/{queue}/key-weight", params [QUEUE_NAME], tag "queues", id "set_key_weight",
        access ADMIN, reach Queues,
    summary "Sets or removes a concurrency key's weight in a queue: a key of weight N takes up to N jobs per turn \
        where the others take one.",
    done "Set",
    errors [
        (400, "A bad queue name, key or weight"),
        (409, "The queue has priority aging, which concurrency keys do not go with"),
    ],
    path |r| [r.queue],
    body KeyWeightRequest = |r| KeyWeightRequest { key: r.key.clone(), weight: r.weight },
    answer EmptyBody,
    from |path, body| Ok(WeighKey {
        queue: path.text("queue")?.to_owned(),
        key: body.key,
        weight: body.weight,
    }),
}

route! {
    RateLimitQueue: Post "/v1/queues/{queue}/rate", params [QUEUE_NAME], tag "queues", id "set_rate",
        access ADMIN, reach Queues,
    summary "Sets or removes a queue's rate limit: at most `jobs` of its jobs start per `per_ms`, across all \
        workers.",
    done "Set",
    errors [(400, "A bad queue name or rate")],
    path |r| [r.queue],
    body RateRequest = |r| RateRequest { rate: r.rate.map(RateLimitBody::from) },
    answer EmptyBody,
    from |path, body| Ok(RateLimitQueue {
        queue: path.text("queue")?.to_owned(),
        rate: body.rate.map(cairn::RateLimit::from),
    }),
}

route! {
    AgeQueue: Post "/v1/queues/{queue}/aging", params [QUEUE_NAME], tag "queues", id "set_aging",
        access ADMIN, reach Queues,
    summary "Turns a queue's priority aging on or off: with it, a ready job gains one priority point per `every_ms` \
        of waiting, so a stream of high-priority jobs cannot starve the low ones. Applies at once to the queue's \
        jobs.",
    done "Set",
    errors [
        (400, "A bad queue name or step"),
        (409, "The queue has jobs with concurrency keys, which priority aging does not go with"),
    ],
    path |r| [r.queue],
    body AgingRequest = |r| AgingRequest { every_ms: r.every.map(to_millis) },
    answer EmptyBody,
    from |path, body| Ok(AgeQueue {
        queue: path.text("queue")?.to_owned(),
        every: body.every_ms.map(Duration::from_millis),
    }),
}

route! {
    Unfail: Post "/v1/failures/{group}/unfail", params [FAILURE_GROUP], tag "queues", id "unfail",
        access ADMIN, reach Server,
    summary "Puts the oldest failed jobs of a failure group back in a queue (their own, or `queue`), ready now, with \
        fresh attempts; their history is kept. A job whose unique key another live job holds now stays failed. One \
        statement, however many jobs.",
    done "How many jobs went back",
    errors [
        (400, "A bad queue name or limit"),
        (409, "A job with a concurrency key would go to a queue with priority aging"),
    ],
    path |r| [r.group],
    body UnfailRequest = |r| UnfailRequest::from(r),
    answer UnfailBody,
    from |path, body| Ok(body.into_unfail(path.text("group")?.to_owned())),
}

/// How many jobs a peek shows when it does not say.
const DEFAULT_PEEK: u32 = 10;

/// How many jobs to peek at (`GET /v1/queues/{queue}/peek`'s parameters).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PeekQuery {
    /// The most jobs to show (default 10, at most 1000).
    #[cfg_attr(feature = "openapi", schema(value_type = Option<u32>, minimum = 1, maximum = 1000))]
    pub limit: Option<String>,
}

impl Answer<Vec<QueueStats>> for QueueListBody {
    fn from_output(queues: Vec<QueueStats>) -> Self {
        QueueListBody {
            queues: queues.iter().map(QueueStatsBody::from).collect(),
        }
    }

    fn into_output(self) -> Result<Vec<QueueStats>, cairn::Error> {
        Ok(self.queues.into_iter().map(QueueStats::from).collect())
    }
}

impl Answer<Vec<cairn::Job>> for PeekBody {
    fn from_output(jobs: Vec<cairn::Job>) -> Self {
        PeekBody {
            jobs: jobs.iter().map(JobBody::from).collect(),
        }
    }

    fn into_output(self) -> Result<Vec<cairn::Job>, cairn::Error> {
        self.jobs.iter().map(JobBody::to_job).collect()
    }
}

impl Answer<Vec<FailureGroup>> for FailureGroupListBody {
    fn from_output(groups: Vec<FailureGroup>) -> Self {
        FailureGroupListBody {
            groups: groups.iter().map(FailureGroupBody::from).collect(),
        }
    }

    fn into_output(self) -> Result<Vec<FailureGroup>, cairn::Error> {
        Ok(self.groups.into_iter().map(FailureGroup::from).collect())
    }
}

route! {
    ListQueues: Get "/v1/queues", params [], tag "queues", id "list_queues", access READ, reach Server,
    summary "Every queue that has jobs or settings, by name, with its jobs counted by state (`stalled`: running jobs \
        whose lease ran out and that were not retried yet) and whether it is paused. This reads every job: it is \
        for operators and dashboards, not for a hot path.",
    done "The queues",
    errors [],
    path |_r| [],
    no body,
    answer QueueListBody,
    from |_received| Ok(ListQueues),
}

route! {
    Peek: Get "/v1/queues/{queue}/peek", params [QUEUE_NAME], tag "queues", id "peek", access READ, reach Queues,
    summary "The next jobs a worker taking from the queue would get, in that order, without taking them; none while \
        the queue is paused.",
    done "The next jobs, in claim order",
    errors [(400, "A bad queue name or limit")],
    path |r| [r.queue],
    body PeekQuery = |r| PeekQuery { limit: Some(r.limit.to_string()) },
    answer PeekBody,
    from |received, query| Ok(Peek {
        queue: received.text("queue")?.to_owned(),
        limit: match query.limit {
            None => DEFAULT_PEEK,
            Some(text) => limit_param(&text, cairn::MAX_PAGE)?,
        },
    }),
}

route! {
    ListFailures: Get "/v1/failures", params [], tag "queues", id "list_failures", access READ, reach Server,
    summary "Every failure group that holds failed jobs, by name, with how many and when they failed. A group's jobs \
        are listed by `GET /v1/jobs?failure_group=…`.",
    done "The failure groups",
    errors [],
    path |_r| [],
    no body,
    answer FailureGroupListBody,
    from |_received| Ok(ListFailures),
}
