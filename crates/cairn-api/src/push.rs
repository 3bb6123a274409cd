//! Enqueueing: a job to push, with its retry policy, a batch of them, and what the server answers, to and from the
//! engine's [`Push`], [`RetryPolicy`] and [`Enqueued`]. A job as it is read back is in `jobs`.

use cairn::{
    Concurrency, Debounce, Enqueued, Error, JobId, JobState, Push, PushBatch, RetryOverrides,
    RetryPolicy, Throttle,
};
// Named only in doc links.
#[cfg(doc)]
use cairn::ErrorKind;
use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::Value;

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

use crate::ENQUEUE;
use crate::Named;
use crate::errors::malformed;
use crate::millis::{millis, to_millis};
use crate::route::{Answer, Received, RouteVisitor, invalid, route};

/// A job to enqueue. Only `name` is required.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PushRequest {
    /// The queue; `default` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<crate::rules::QueueName>))]
    pub queue: Option<String>,
    /// What the job is, such as `email.send`; workers take jobs by name.
    #[cfg_attr(feature = "openapi", schema(value_type = crate::rules::JobName))]
    pub name: String,
    /// The job's input (any JSON value); `{}` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    /// Higher runs first; 0 when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    /// How much of a worker's concurrency the job takes; 1 when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 1000))]
    pub weight: Option<u32>,
    /// Do not run before this time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub run_at: Option<Timestamp>,
    /// Do not run for this many milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(format = "uint64", maximum = 18_446_744_073_709_551_615_u64)
    )]
    pub delay_ms: Option<u64>,
    /// Attempts and backoff: the parts given, and the server's default policy (`default_retry`) for the rest, so
    /// that `{"max_attempts": 1}` runs the job once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<RetryOverridesBody>,
    /// How long a lease lasts without a heartbeat, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 100, maximum = 86_400_000))]
    pub lease_timeout_ms: Option<u64>,
    /// The longest one attempt may run, heartbeats or not, in milliseconds (at most a day); no limit when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 100, maximum = 86_400_000))]
    pub timeout_ms: Option<u64>,
    /// While a live job holds this key, enqueueing another with it returns that job (`existing: true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<crate::rules::UniqueKey>))]
    pub unique_key: Option<String>,
    /// Labels for listing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<crate::rules::Tag>))]
    pub tags: Vec<String>,
    /// The job creating this one: it must be running (the child then starts when that run finishes) or waiting for
    /// its children (a child adding a sibling).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<crate::rules::JobId>))]
    pub parent: Option<i64>,
    /// Jobs that must complete before this one runs; it is `waiting` until then.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<crate::rules::JobId>, max_items = 1000))]
    pub depends_on: Vec<i64>,
    /// Run again on this schedule: Bedrock's repeat syntax (`FINISHED, +5 MINUTES`) or a cron expression.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    /// The IANA time zone of a cron `schedule`; UTC when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
    /// Debounce the job: a push whose key a pending job holds lands in that job (`existing: true`), replacing its
    /// data and moving its run. Not with `run_at`, `delay_ms`, `unique_key`, `parent`, `depends_on` or `schedule`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub debounce: Option<DebounceBody>,
    /// At most one job per key per period, whatever became of the earlier one: a push whose key a job created
    /// less than `period_ms` ago holds answers with that job (`existing: true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throttle: Option<ThrottleBody>,
    /// The job's concurrency key: keyed jobs take turns by key, and at most the queue's limit per key (or the
    /// job's own `limit`) run at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<ConcurrencyBody>,
    /// The W3C trace context of the request that pushes the job (a `traceparent`), which its worker runs the job
    /// in. `POST /v1/jobs` takes the request's own `traceparent` header when this is absent. Not in a recurring
    /// template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<crate::rules::TraceParent>))]
    pub trace_parent: Option<String>,
    /// The batch the job joins, which must not have completed (see `POST /v1/batches`). Not with `schedule`,
    /// `unique_key`, `debounce` or `throttle`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<crate::rules::BatchId>))]
    pub batch: Option<i64>,
    /// Whose the children are that the job's runs create: `run` when absent, or `job`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub children: Option<ChildrenBody>,
}

/// Whose the children are that a job's runs create.
///
/// - `run` (the default): a child starts when the run that created it finishes, and is cancelled if that run ends
///   any other way; a child that fails holds its waiting parent until it is requeued, cancelled or deleted.
/// - `job`, as in Bedrock: a child starts when any later run of the job finishes, so a run that times out, is
///   retried, released or requeued leaves it waiting; a failed child does not hold its parent once another child
///   completes, or is cancelled or deleted, last.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub enum ChildrenBody {
    /// The run's.
    #[default]
    Run,
    /// The job's.
    Job,
}

impl From<cairn::Children> for ChildrenBody {
    fn from(children: cairn::Children) -> Self {
        match children {
            cairn::Children::OfTheRun => ChildrenBody::Run,
            cairn::Children::OfTheJob => ChildrenBody::Job,
        }
    }
}

impl From<ChildrenBody> for cairn::Children {
    fn from(children: ChildrenBody) -> Self {
        match children {
            ChildrenBody::Run => cairn::Children::OfTheRun,
            ChildrenBody::Job => cairn::Children::OfTheJob,
        }
    }
}

/// A push's concurrency key, and maybe its own limit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ConcurrencyBody {
    /// The key, such as `customer:42`. Keys are per queue.
    #[cfg_attr(feature = "openapi", schema(value_type = crate::rules::ConcurrencyKey))]
    pub key: String,
    /// The most jobs of this key that may run at once when this job is next to start, instead of the queue's
    /// limit per key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 1_000_000))]
    pub limit: Option<u32>,
}

/// A push's throttle: one job per key per period.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ThrottleBody {
    /// The key, such as `welcome:ada@example.com`.
    #[cfg_attr(feature = "openapi", schema(value_type = crate::rules::ThrottleKey))]
    pub key: String,
    /// How long after a job was created its key refuses another, in milliseconds (at most 366 days).
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 31_622_400_000_u64))]
    pub period_ms: u64,
    /// The states of the earlier job that count; any state when absent or empty.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "state_names::read",
        serialize_with = "state_names::write"
    )]
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<crate::rules::JobStateName>))]
    pub states: Vec<JobState>,
}

/// Job states by name (`queued`, `completed`, …), as the API writes them.
mod state_names {
    use cairn::JobState;
    use serde::{Deserialize, Deserializer, Serializer, de::Error as _};

    pub fn read<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<JobState>, D::Error> {
        Vec::<String>::deserialize(d)?
            .iter()
            .map(|name| {
                name.parse::<JobState>()
                    .map_err(|e| D::Error::custom(e.to_string()))
            })
            .collect()
    }

    pub fn write<S: Serializer>(states: &[JobState], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(states.iter().map(|state| state.as_str()))
    }
}

/// A push's debounce: pushes of one key in a burst make one job, which runs `delay_ms` after the latest of them and
/// no later than `max_wait_ms` after the first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct DebounceBody {
    /// The key the pushes of a burst share, such as `reindex:customer:42`.
    #[cfg_attr(feature = "openapi", schema(value_type = crate::rules::DebounceKey))]
    pub key: String,
    /// How long after the latest push the job runs, in milliseconds; at most `max_wait_ms`.
    #[cfg_attr(feature = "openapi", schema(maximum = 2_592_000_000_u64))]
    pub delay_ms: u64,
    /// The longest the job waits after the first push of its burst, in milliseconds (at most 30 days).
    #[cfg_attr(feature = "openapi", schema(maximum = 2_592_000_000_u64))]
    pub max_wait_ms: u64,
}

impl From<PushRequest> for Push {
    fn from(r: PushRequest) -> Self {
        let mut push = Push::new(r.name);
        if let Some(queue) = r.queue {
            push.queue = queue;
        }
        if let Some(data) = r.data {
            push.data = data;
        }
        if let Some(priority) = r.priority {
            push.priority = priority;
        }
        if let Some(weight) = r.weight {
            push.weight = weight;
        }
        push.run_at = r.run_at;
        push.delay = r.delay_ms.map(millis);
        push.retry = r.retry.map(RetryOverrides::from).unwrap_or_default();
        push.lease_timeout = r.lease_timeout_ms.map(millis);
        push.timeout = r.timeout_ms.map(millis);
        push.unique_key = r.unique_key;
        push.tags = r.tags;
        push.parent = r.parent.map(JobId);
        push.depends_on = r.depends_on.into_iter().map(JobId).collect();
        push.schedule = r.schedule;
        push.time_zone = r.time_zone;
        push.debounce = r.debounce.map(|d| Debounce {
            key: d.key,
            delay: millis(d.delay_ms),
            max_wait: millis(d.max_wait_ms),
        });
        push.throttle = r.throttle.map(|t| Throttle {
            key: t.key,
            period: millis(t.period_ms),
            states: t.states,
        });
        push.concurrency = r.concurrency.map(|c| Concurrency {
            key: c.key,
            limit: c.limit,
        });
        push.trace_parent = r.trace_parent;
        push.batch = r.batch.map(cairn::BatchId);
        push.children = r.children.unwrap_or_default().into();
        push
    }
}

impl From<&Push> for PushRequest {
    fn from(p: &Push) -> Self {
        PushRequest {
            queue: Some(p.queue.clone()),
            name: p.name.clone(),
            data: Some(p.data.clone()),
            priority: Some(p.priority),
            weight: Some(p.weight),
            run_at: p.run_at,
            delay_ms: p.delay.map(to_millis),
            retry: (!p.retry.is_empty()).then(|| RetryOverridesBody::from(p.retry)),
            lease_timeout_ms: p.lease_timeout.map(to_millis),
            timeout_ms: p.timeout.map(to_millis),
            unique_key: p.unique_key.clone(),
            tags: p.tags.clone(),
            parent: p.parent.map(|j| j.0),
            depends_on: p.depends_on.iter().map(|j| j.0).collect(),
            schedule: p.schedule.clone(),
            time_zone: p.time_zone.clone(),
            debounce: p.debounce.as_ref().map(|d| DebounceBody {
                key: d.key.clone(),
                delay_ms: to_millis(d.delay),
                max_wait_ms: to_millis(d.max_wait),
            }),
            throttle: p.throttle.as_ref().map(|t| ThrottleBody {
                key: t.key.clone(),
                period_ms: to_millis(t.period),
                states: t.states.clone(),
            }),
            concurrency: p.concurrency.as_ref().map(|c| ConcurrencyBody {
                key: c.key.clone(),
                limit: c.limit,
            }),
            trace_parent: p.trace_parent.clone(),
            batch: p.batch.map(|b| b.0),
            children: (p.children != cairn::Children::OfTheRun).then(|| p.children.into()),
        }
    }
}

/// A job's attempts and the backoff between them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RetryPolicyBody {
    /// Attempts in all, counting the first.
    #[cfg_attr(
        feature = "openapi",
        schema(minimum = 1, format = "uint32", maximum = 4_294_967_295_u32)
    )]
    pub max_attempts: u32,
    /// The delay after the first failed attempt.
    #[cfg_attr(
        feature = "openapi",
        schema(format = "uint64", maximum = 18_446_744_073_709_551_615_u64)
    )]
    pub initial_delay_ms: u64,
    /// Each further delay is this many times the previous one.
    #[cfg_attr(feature = "openapi", schema(minimum = 1.0))]
    pub multiplier: f64,
    /// No delay is longer than this.
    #[cfg_attr(
        feature = "openapi",
        schema(format = "uint64", maximum = 18_446_744_073_709_551_615_u64)
    )]
    pub max_delay_ms: u64,
    /// The fraction by which a delay is randomly lengthened or shortened.
    #[cfg_attr(feature = "openapi", schema(minimum = 0.0, maximum = 1.0))]
    pub jitter: f64,
}

impl From<RetryPolicyBody> for RetryPolicy {
    fn from(b: RetryPolicyBody) -> Self {
        RetryPolicy {
            max_attempts: b.max_attempts,
            initial_delay: millis(b.initial_delay_ms),
            multiplier: b.multiplier,
            max_delay: millis(b.max_delay_ms),
            jitter: b.jitter,
        }
    }
}

impl From<RetryPolicy> for RetryPolicyBody {
    fn from(p: RetryPolicy) -> Self {
        RetryPolicyBody {
            max_attempts: p.max_attempts,
            initial_delay_ms: to_millis(p.initial_delay),
            multiplier: p.multiplier,
            max_delay_ms: to_millis(p.max_delay),
            jitter: p.jitter,
        }
    }
}

/// The parts of a retry policy a push sets: each one left out (or null) is the server's default policy's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields, from = "RetryOverridesObject")]
pub struct RetryOverridesBody {
    /// Attempts in all, counting the first: 1 runs the job once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(minimum = 1, format = "uint32", maximum = 4_294_967_295_u32)
    )]
    pub max_attempts: Option<u32>,
    /// The delay after the first failed attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(format = "uint64", maximum = 18_446_744_073_709_551_615_u64)
    )]
    pub initial_delay_ms: Option<u64>,
    /// Each further delay is this many times the previous one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1.0))]
    pub multiplier: Option<f64>,
    /// No delay is longer than this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(format = "uint64", maximum = 18_446_744_073_709_551_615_u64)
    )]
    pub max_delay_ms: Option<u64>,
    /// The fraction by which a delay is randomly lengthened or shortened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 0.0, maximum = 1.0))]
    pub jitter: Option<f64>,
}

/// A retry policy's parts as they arrive: read from an object only. serde reads a struct from a list of its fields
/// in order too, and with every part optional, `[]` or `[3]` would be a policy.
struct RetryOverridesObject(RetryOverridesBody);

impl<'de> Deserialize<'de> for RetryOverridesObject {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        /// The same fields, read by serde's derive from the map it is handed.
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Parts {
            #[serde(default)]
            max_attempts: Option<u32>,
            #[serde(default)]
            initial_delay_ms: Option<u64>,
            #[serde(default)]
            multiplier: Option<f64>,
            #[serde(default)]
            max_delay_ms: Option<u64>,
            #[serde(default)]
            jitter: Option<f64>,
        }

        struct ObjectOnly;

        impl<'de> serde::de::Visitor<'de> for ObjectOnly {
            type Value = Parts;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("struct RetryOverridesBody")
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Parts, A::Error> {
                Parts::deserialize(serde::de::value::MapAccessDeserializer::new(map))
            }
        }

        let p = deserializer.deserialize_map(ObjectOnly)?;
        Ok(RetryOverridesObject(RetryOverridesBody {
            max_attempts: p.max_attempts,
            initial_delay_ms: p.initial_delay_ms,
            multiplier: p.multiplier,
            max_delay_ms: p.max_delay_ms,
            jitter: p.jitter,
        }))
    }
}

impl From<RetryOverridesObject> for RetryOverridesBody {
    fn from(object: RetryOverridesObject) -> Self {
        object.0
    }
}

impl From<RetryOverridesBody> for RetryOverrides {
    fn from(b: RetryOverridesBody) -> Self {
        RetryOverrides {
            max_attempts: b.max_attempts,
            initial_delay: b.initial_delay_ms.map(millis),
            multiplier: b.multiplier,
            max_delay: b.max_delay_ms.map(millis),
            jitter: b.jitter,
        }
    }
}

impl From<RetryOverrides> for RetryOverridesBody {
    fn from(o: RetryOverrides) -> Self {
        RetryOverridesBody {
            max_attempts: o.max_attempts,
            initial_delay_ms: o.initial_delay.map(to_millis),
            multiplier: o.multiplier,
            max_delay_ms: o.max_delay.map(to_millis),
            jitter: o.jitter,
        }
    }
}

impl From<RetryPolicy> for RetryOverridesBody {
    fn from(p: RetryPolicy) -> Self {
        RetryOverridesBody::from(RetryOverrides::from(p))
    }
}

/// Many jobs to enqueue in one transaction: all or none.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PushBatchRequest {
    /// The jobs, in order.
    pub jobs: Vec<PushRequest>,
}

/// An enqueued job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct EnqueuedBody {
    /// The job's id.
    pub id: i64,
    /// Its state: `queued`, or `scheduled` when it waits for its time.
    pub state: String,
    /// Whether a live job already held the unique key (and this is that job).
    pub existing: bool,
}

impl From<Enqueued> for EnqueuedBody {
    fn from(e: Enqueued) -> Self {
        EnqueuedBody {
            id: e.id.0,
            state: e.state.as_str().to_owned(),
            existing: e.existing,
        }
    }
}

impl EnqueuedBody {
    /// The engine's answer.
    ///
    /// # Errors
    /// [`ErrorKind::Unavailable`] for an unknown state.
    pub fn to_enqueued(&self) -> Result<Enqueued, Error> {
        Ok(Enqueued {
            id: JobId(self.id),
            state: self.state.parse().map_err(malformed)?,
            existing: self.existing,
        })
    }
}

/// The jobs of a batch enqueue, in request order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct EnqueuedBatchBody {
    /// One entry per requested job.
    pub jobs: Vec<EnqueuedBody>,
}

impl Answer<Enqueued> for EnqueuedBody {
    fn from_output(enqueued: Enqueued) -> Self {
        enqueued.into()
    }

    fn into_output(self) -> Result<Enqueued, Error> {
        self.to_enqueued()
    }
}

impl Answer<Vec<Enqueued>> for EnqueuedBatchBody {
    fn from_output(jobs: Vec<Enqueued>) -> Self {
        EnqueuedBatchBody {
            jobs: jobs.into_iter().map(EnqueuedBody::from).collect(),
        }
    }

    fn into_output(self) -> Result<Vec<Enqueued>, Error> {
        self.jobs.iter().map(EnqueuedBody::to_enqueued).collect()
    }
}

/// `push` in the request's trace when it has no trace context of its own, so that a caller whose HTTP client
/// propagates traces needs to do nothing more. A recurring job's runs are each a trace of their own.
pub(crate) fn in_trace(mut push: Push, received: &Received) -> Push {
    if push.trace_parent.is_none() && push.schedule.is_none() {
        push.trace_parent = received.trace_parent.clone();
    }
    push
}

/// Enqueueing's routes, for [`visit_routes`](crate::visit_routes).
pub(crate) fn visit_push_routes(visitor: &mut impl RouteVisitor) {
    visitor.visit::<Push>();
    visitor.visit::<PushBatch>();
}

route! {
    Push: Post "/v1/jobs", params [], tag "jobs", id "enqueue", access ENQUEUE, reach Queues,
    summary "Enqueues one job. Answers 201 for a new job, 200 when a live job already held the unique key or a \
        debounced push landed in the pending job of its key.",
    done "A live job holds the unique key, or the debounced push landed in the pending job of its key; this is \
        that job",
    errors [
        (400, "Bad input, naming the field (a parent or dependency that does not exist among them)"),
        (409, "The parent cannot have children now: it is neither running nor waiting for its children; or a job \
            with a concurrency key for a queue with priority aging"),
    ],
    path |_r| [],
    body PushRequest = |r| PushRequest::from(r),
    answer EnqueuedBody,
    from |received, body| Ok(in_trace(Push::from(body), received)),
    status [(201, "Enqueued")] |enqueued| if enqueued.existing { 200 } else { 201 },
    names |r| Named::pushes([r]),
}

route! {
    PushBatch: Post "/v1/jobs/batch", params [], tag "jobs", id "enqueue_batch", access ENQUEUE, reach Queues,
    summary "Enqueues many jobs in one transaction: all of them, or none (the error names the bad job's index).",
    done "Every job, in request order",
    errors [
        (400, "Bad input, naming the job and field (a parent or dependency that does not exist among them)"),
        (409, "A job's parent cannot have children now: it is neither running nor waiting for its children; or a \
            job with a concurrency key for a queue with priority aging"),
    ],
    path |_r| [],
    body PushBatchRequest = |r| PushBatchRequest { jobs: r.jobs.iter().map(PushRequest::from).collect() },
    answer EnqueuedBatchBody,
    from |received, body| Ok(PushBatch {
        jobs: body.jobs.into_iter().map(|push| in_trace(Push::from(push), received)).collect(),
    }),
    limit |r, limits| match r.jobs.len() {
        n if n > limits.max_batch_jobs => Err(invalid(
            "jobs",
            format!(
                "must hold at most {} jobs (the server's max_batch_jobs), got {n}",
                limits.max_batch_jobs
            ),
        )),
        _ => Ok(()),
    },
    names |r| Named::pushes(&r.jobs),
}
