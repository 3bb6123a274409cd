//! Signals: data sent to a key (`POST /v1/signals`, `cairn::SendSignal`), which a job's handler waits for as a
//! step of its run without holding a worker (`POST /v1/jobs/{id}/wait_for_signal`, `cairn::WaitForSignal`).

use cairn::{Error, JobId, SendSignal, SignalKey, SignalSent, SignalWait, StepName};
use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::Value;

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

use crate::leases::parse_token;
use crate::millis::{millis, to_millis};
use crate::route::{JOB_ID, RouteVisitor, invalid, route};
use crate::steps::MAX_SLEEP_MS;
use crate::{Answer, ENQUEUE, WORK};

/// Send a signal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct SignalRequest {
    /// The key: the job that waits for it receives the signal, or the first that waits later does.
    #[cfg_attr(feature = "openapi", schema(value_type = crate::rules::SignalKey))]
    pub key: String,
    /// What the job receives: any JSON, at most the largest job data. Absent, `null`.
    #[serde(default)]
    pub data: Value,
}

/// What came of a signal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct SignalSentBody {
    /// Whether a job waited for the key and received the signal; false when it is kept for the first job that
    /// waits.
    pub delivered: bool,
    /// The job that received it, when one did.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<crate::rules::JobId>))]
    pub job: Option<i64>,
}

impl Answer<SignalSent> for SignalSentBody {
    fn from_output(sent: SignalSent) -> Self {
        match sent {
            SignalSent::Delivered { job } => SignalSentBody {
                delivered: true,
                job: Some(job.0),
            },
            SignalSent::Kept => SignalSentBody {
                delivered: false,
                job: None,
            },
        }
    }

    fn into_output(self) -> Result<SignalSent, Error> {
        match (self.delivered, self.job) {
            (true, Some(job)) => Ok(SignalSent::Delivered { job: JobId(job) }),
            (false, _) => Ok(SignalSent::Kept),
            (true, None) => Err(crate::errors::malformed(
                "a delivered signal without its job",
            )),
        }
    }
}

/// Wait for a signal as a step of the running attempt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct SignalWaitRequest {
    /// The lease's token.
    #[cfg_attr(feature = "openapi", schema(value_type = crate::rules::LeaseToken))]
    pub token: String,
    /// The step's name within the job.
    #[cfg_attr(feature = "openapi", schema(value_type = crate::rules::StepName))]
    pub name: String,
    /// The key the signal is sent to.
    #[cfg_attr(feature = "openapi", schema(value_type = crate::rules::SignalKey))]
    pub key: String,
    /// How long to wait, in milliseconds from when the step is first reached, by the server's clock: at most ten
    /// years.
    #[cfg_attr(
        feature = "openapi",
        schema(format = "uint64", maximum = 315_360_000_000_u64)
    )]
    pub timeout_ms: u64,
}

/// What came of a wait for a signal: exactly one of `suspended`, `received` and `timed_out` is true.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct SignalWaitBody {
    /// Whether the job now waits: its lease is over, and the handler must stop. It runs again when the signal
    /// comes or at `until`, and this step then answers what came.
    pub suspended: bool,
    /// When the wait times out, while the job waits.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub until: Option<Timestamp>,
    /// Whether the signal came: its data is `data`. The handler goes on.
    pub received: bool,
    /// The signal's data, once received.
    #[serde(default)]
    pub data: Value,
    /// Whether the wait's time passed with no signal. The handler goes on, and decides.
    pub timed_out: bool,
}

impl Answer<SignalWait> for SignalWaitBody {
    fn from_output(wait: SignalWait) -> Self {
        let mut body = SignalWaitBody {
            suspended: false,
            until: None,
            received: false,
            data: Value::Null,
            timed_out: false,
        };
        match wait {
            SignalWait::Suspended { until } => {
                body.suspended = true;
                body.until = Some(until);
            }
            SignalWait::Received(data) => {
                body.received = true;
                body.data = data;
            }
            SignalWait::TimedOut => body.timed_out = true,
        }
        body
    }

    fn into_output(self) -> Result<SignalWait, Error> {
        match (self.suspended, self.until, self.received, self.timed_out) {
            (true, Some(until), false, false) => Ok(SignalWait::Suspended { until }),
            (false, _, true, false) => Ok(SignalWait::Received(self.data)),
            (false, _, false, true) => Ok(SignalWait::TimedOut),
            _ => Err(crate::errors::malformed(
                "a wait for a signal that is not exactly one of suspended, received and timed out",
            )),
        }
    }
}

/// The signals' routes declared here, for [`visit_routes`](crate::visit_routes).
pub(crate) fn visit_signal_routes(visitor: &mut impl RouteVisitor) {
    visitor.visit::<SendSignal>();
    visitor.visit::<cairn::WaitForSignal>();
}

route! {
    SendSignal: Post "/v1/signals", params [], tag "signals", id "send_signal",
        access ENQUEUE, reach Server,
    summary "Sends a signal to a key. The job that waits for the key (the oldest, if several do) receives the data as \
        its waiting step's result and is ready to run again at once; with no job waiting, the signal is kept for the \
        first that waits. Each signal is received once. A token limited to some queues may not send one: a key may \
        wake a job in any queue.",
    done "Delivered to `job`, or kept",
    errors [
        (
            400,
            "Bad input: a bad key, data larger than the largest job data, or a waiting job at its limit of steps; \
             `field` names it"
        ),
        (409, "Only a cancelled job waited for the key: the signal is refused, not kept"),
    ],
    path |_r| [],
    body SignalRequest = |r| SignalRequest {
        key: r.key.as_str().to_owned(),
        data: r.data.clone(),
    },
    answer SignalSentBody,
    from |_received, body| Ok(SendSignal {
        key: SignalKey::parse(body.key)?,
        data: body.data,
    }),
}

route! {
    cairn::WaitForSignal: Post "/v1/jobs/{id}/wait_for_signal", params [JOB_ID], tag "workers",
        id "wait_for_signal", access WORK, reach Queues,
    summary "Waits for a signal as a step of the running attempt. A signal kept for the key, or one that came while \
        the job waited, is received at once (`received`, with its `data`); once the wait's time has passed, it answers \
        `timed_out`. Otherwise the job gives up its worker (the lease ends, the attempt does not count) until the \
        signal comes or the time passes, when it runs again and replays its steps; the time is set the first time \
        the step is reached.",
    done "Received, timed out, or (`suspended`) waiting until `until`",
    errors [
        (409, "The lease was lost"),
        (
            400,
            "Bad input: a bad id, name or key, a timeout over ten years, or a step of that name that is not a wait \
             for a signal; `field` names it"
        ),
    ],
    path |r| [r.job],
    body SignalWaitRequest = |r| SignalWaitRequest {
        token: r.token.to_string(),
        name: r.name.as_str().to_owned(),
        key: r.key.as_str().to_owned(),
        timeout_ms: to_millis(r.timeout),
    },
    answer SignalWaitBody,
    from |path, body| Ok(cairn::WaitForSignal {
        job: path.job()?,
        token: parse_token("token", &body.token)?,
        name: StepName::parse(body.name).map_err(|e| e.renamed("name"))?,
        key: SignalKey::parse(body.key)?,
        timeout: if body.timeout_ms <= MAX_SLEEP_MS {
            millis(body.timeout_ms)
        } else {
            return Err(invalid(
                "timeout_ms",
                format!("must be at most {MAX_SLEEP_MS} (ten years), got {}", body.timeout_ms),
            ));
        },
    }),
}
