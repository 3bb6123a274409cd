//! [`Route`]: how a request travels over HTTP, declared once beside its body, so that the server mounts it and the
//! client calls it through one generic path each (`cairn_client::Client::run`).

use std::collections::BTreeMap;
use std::time::Duration;

use cairn::{Error, ErrorKind, JobId, Request, Result};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// The HTTP method of a [`Route`]. A route that reads is a `GET`, whose body travels as the query string; the others
/// take a JSON body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// `GET`: the body's fields are the query's parameters.
    Get,
    /// `POST`.
    Post,
    /// `PUT`.
    Put,
    /// `DELETE`.
    Delete,
}

/// A parameter in a route's path, such as `{id}`: its name, what it is, and the rule it follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathParam {
    /// The name between braces.
    pub name: &'static str,
    /// What it is, for the OpenAPI document.
    pub description: &'static str,
    /// The schema of `rules.rs` it follows (`JobId`, `QueueName`, …), which the document names.
    pub rule: &'static str,
}

/// The `{id}` of a job's path.
pub const JOB_ID: PathParam = PathParam {
    name: "id",
    description: "The job's id",
    rule: "JobId",
};

/// The `{queue}` of a queue's path.
pub const QUEUE_NAME: PathParam = PathParam {
    name: "queue",
    description: "The queue's name",
    rule: "QueueName",
};

/// What the server received besides the body: the path's parameters, by name, and the request's W3C trace context.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Received {
    /// The path's parameters, percent-decoded.
    pub path: BTreeMap<String, String>,
    /// The request's `traceparent` header, if it is a valid one (an invalid one is ignored, as W3C asks).
    pub trace_parent: Option<String>,
}

impl Received {
    /// A request with these path parameters and no trace context.
    pub fn with_path(path: BTreeMap<String, String>) -> Received {
        Received {
            path,
            trace_parent: None,
        }
    }

    /// The parameter `name` as text.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] naming it when it is missing.
    pub fn text(&self, name: &str) -> Result<&str> {
        self.path
            .get(name)
            .map(String::as_str)
            .ok_or_else(|| invalid(name, "is missing from the path"))
    }

    /// The job of `{id}`.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] (field `id`) unless it is a positive integer.
    pub fn job(&self) -> Result<JobId> {
        let text = self.text("id")?;
        text.parse::<i64>()
            .ok()
            .filter(|id| *id > 0)
            .map(JobId)
            .ok_or_else(|| invalid("id", format!("must be a positive integer, got {text:?}")))
    }

    /// What the path of a request to `R` names, for a token limited to some queues: its `{queue}`, its job's
    /// `{id}` or its batch's. A parameter that is not a valid one names nothing: the route refuses it itself.
    pub fn named<R: Route>(&self) -> crate::Named {
        let mut named = crate::Named::default();
        if R::PARAMS.contains(&QUEUE_NAME)
            && let Ok(queue) = self.text(QUEUE_NAME.name)
        {
            named.queues.push(queue.to_owned());
        }
        if R::PARAMS.contains(&JOB_ID)
            && let Ok(job) = self.job()
        {
            named.jobs.push(job);
        }
        if R::PARAMS.contains(&crate::BATCH_ID) {
            named.batch = self.batch().ok();
        }
        named
    }
}

/// What the server holds every request to, from its flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerLimits {
    /// The longest a request may wait (a dequeue's long poll, a wait for a job to end): a longer wait is cut to it,
    /// and the caller asks again.
    pub max_wait: Duration,
    /// The most jobs one batch enqueue may carry.
    pub max_batch_jobs: usize,
}

/// What the server answers a request that waits when it stops: a stopping server does not hold its callers.
#[derive(Debug)]
pub enum WhenStopping<R: Request> {
    /// Let it finish, as a write does: the server waits for it before it stops.
    Finish,
    /// Answer this at once.
    Answer(R::Output),
    /// Run this request instead, which does not wait.
    RunInstead(R),
}

/// What a route's body and answer must be: JSON both ways, and with the `openapi` feature a schema in the server's
/// OpenAPI document.
#[cfg(feature = "openapi")]
pub trait Wire: Serialize + DeserializeOwned + Send + Sync + 'static + utoipa::ToSchema {}
#[cfg(feature = "openapi")]
impl<T: Serialize + DeserializeOwned + Send + Sync + 'static + utoipa::ToSchema> Wire for T {}

/// What a route's body and answer must be: JSON both ways, and with the `openapi` feature a schema in the server's
/// OpenAPI document.
#[cfg(not(feature = "openapi"))]
pub trait Wire: Serialize + DeserializeOwned + Send + Sync + 'static {}
#[cfg(not(feature = "openapi"))]
impl<T: Serialize + DeserializeOwned + Send + Sync + 'static> Wire for T {}

/// How a [`Request`] travels over HTTP: its method and path, its body and answer on the wire with the conversions
/// both ways, and what the OpenAPI document says of it. The server mounts every route through one handler and the
/// client calls every route through one method, so a route is declared here and nowhere else.
pub trait Route: Request + Sized {
    /// The method.
    const METHOD: Method;
    /// The path as the router mounts it, `{name}` for each parameter (`/v1/jobs/{id}/move`).
    const PATH: &'static str;
    /// The path's parameters.
    const PARAMS: &'static [PathParam];
    /// The OpenAPI document's tag (the resource) and operation id.
    const TAG: &'static str;
    /// The OpenAPI operation id.
    const OPERATION_ID: &'static str;
    /// Who may call it: the roles of the tokens the server answers (see [`Access`](crate::Access)).
    const ACCESS: crate::Access;
    /// How far it reaches: the whole server, or only the queues it names (see [`Reach`](crate::Reach)).
    const REACH: crate::Reach;
    /// What the route does, in one sentence.
    const SUMMARY: &'static str;
    /// What a `200` means.
    const DONE: &'static str;
    /// The other statuses it answers, each with what it means; their body is an [`ErrorBody`](crate::ErrorBody).
    const ERRORS: &'static [(u16, &'static str)];

    /// Whether the request carries a body. One without (`cancel`, `DELETE`) has [`EmptyBody`](crate::EmptyBody) for
    /// [`Self::Body`], and neither reads nor sends one.
    const BODY: bool = true;
    /// Whether the request may change the queue (and so find its disk full): every route but a `GET` and those
    /// declared `reads`.
    const WRITES: bool = !matches!(Self::METHOD, Method::Get);
    /// The successes besides `200` that [`Self::status`] may answer, each with what it means.
    const SUCCESSES: &'static [(u16, &'static str)] = &[];
    /// Whether [`Self::names`] finds anything in the body: a test of who may call the route must then send a body
    /// that names something.
    const NAMES_IN_BODY: bool = false;

    /// The request's body on the wire.
    type Body: Wire;
    /// The answer's body on the wire, which converts from and to the request's output.
    type Answer: Wire + Answer<Self::Output>;

    /// This request's path: [`Self::PATH`] with its parameters filled in.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] naming a parameter that is empty, which a path cannot carry.
    fn path(&self) -> Result<String>;
    /// This request's body.
    fn body(&self) -> Self::Body;
    /// The request that arrived, from its path's parameters and its body.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] naming a bad parameter or field.
    fn from_wire(received: &Received, body: Self::Body) -> Result<Self>;
    /// The status of a success: `200`, or one of [`Self::SUCCESSES`].
    fn status(_output: &Self::Output) -> u16 {
        200
    }
    /// Holds the request to the server's limits, as it arrives: cuts a wait to the longest the server allows,
    /// refuses a batch larger than it takes.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] naming the field over a limit.
    fn limit(&mut self, _limits: &ServerLimits) -> Result<()> {
        Ok(())
    }
    /// What to answer if the server stops while the request runs.
    fn when_stopping(&self) -> WhenStopping<Self> {
        WhenStopping::Finish
    }
    /// How long the server may hold the request before it answers, besides the time the work takes (a long poll's
    /// wait): the client waits that much longer for the answer.
    fn waits(&self) -> Duration {
        Duration::ZERO
    }
    /// What the request names besides its path's queue, job or batch (which [`Received::named`] gives), for a
    /// token limited to some queues: the queues, jobs and batch in its body.
    fn names(&self) -> crate::Named {
        crate::Named::default()
    }
    /// The answer to send for what the request gave.
    fn answer(output: Self::Output) -> Self::Answer {
        Self::Answer::from_output(output)
    }
    /// What the request gave, from the answer received.
    ///
    /// # Errors
    /// [`ErrorKind::Unavailable`] when the answer is not one Cairn sends.
    fn output(answer: Self::Answer) -> Result<Self::Output> {
        answer.into_output()
    }
}

/// An answer's body as the output of the request it answers, both ways (`EmptyBody` for `()`, `StateBody` for a
/// job's state).
pub trait Answer<Output>: Sized {
    /// The body for `output`.
    fn from_output(output: Output) -> Self;
    /// The output this body says.
    ///
    /// # Errors
    /// [`ErrorKind::Unavailable`] when the body is not one Cairn sends.
    fn into_output(self) -> Result<Output>;
}

impl Answer<()> for crate::EmptyBody {
    fn from_output((): ()) -> Self {
        crate::EmptyBody {}
    }

    fn into_output(self) -> Result<()> {
        Ok(())
    }
}

impl Answer<cairn::JobState> for crate::StateBody {
    fn from_output(state: cairn::JobState) -> Self {
        state.into()
    }

    fn into_output(self) -> Result<cairn::JobState> {
        self.into_state()
    }
}

/// Something given every declared route in turn: the server mounts each, a test can list them.
pub trait RouteVisitor {
    /// Takes route `R`.
    fn visit<R: Route>(&mut self);
}

/// Gives `visitor` every route declared in this crate, resource by resource.
pub fn visit_routes(visitor: &mut impl RouteVisitor) {
    crate::push::visit_push_routes(visitor);
    crate::jobs::visit_job_routes(visitor);
    crate::job_reads::visit_job_read_routes(visitor);
    crate::leases::visit_lease_routes(visitor);
    crate::steps::visit_step_routes(visitor);
    crate::signals::visit_signal_routes(visitor);
    crate::fan_out::visit_fan_out_routes(visitor);
    crate::queues::visit_queue_routes(visitor);
    crate::config::visit_config_routes(visitor);
    crate::workers::visit_worker_routes(visitor);
    crate::batches::visit_batch_routes(visitor);
    crate::recurring::visit_recurring_routes(visitor);
    crate::stats::visit_stats_routes(visitor);
    crate::activity::visit_activity_routes(visitor);
    crate::sql::visit_sql_routes(visitor);
    crate::health::visit_health_routes(visitor);
}

/// Declares how a request travels over HTTP, in one place: `impl Route` from its method and path, who may call it
/// (`access`: one of the [`Access`](crate::Access) rules) and how far it reaches (`reach Server` or `reach Queues`:
/// see [`Reach`](crate::Reach)), its OpenAPI words, its body and answer and the
/// conversions both ways. The path's parameters are filled, in order and
/// percent-encoded, from the values `path` gives. A request without a body says `no body` instead of `body …`, and
/// its `from` takes the path alone. After `from` come the hooks it needs, each optional, in any order:
/// `reads` (a `POST` that changes nothing), `status [(201, "…")] |output| …`, `limit |request, limits| …`,
/// `stopping |request| …`, `waits |request| …`, `names |request| …` (see [`Route`]).
///
/// ```ignore
/// route! {
///     CloseBatch: Post "/v1/batches/{id}/close", params [BATCH_ID], tag "batches", id "close_batch",
///     access ENQUEUE, reach Queues,
///     summary "Closes an open batch …",
///     done "Closed; the batch",
///     errors [(404, "No such batch")],
///     path |r| [r.batch],
///     body EmptyBody = |_r| EmptyBody {},
///     answer BatchBody,
///     from |received, _body| Ok(CloseBatch { batch: received.batch()? }),
/// }
/// ```
macro_rules! route {
    (@hooks) => {};
    (@hooks reads, $($rest:tt)*) => {
        const WRITES: bool = false;
        $crate::route::route!(@hooks $($rest)*);
    };
    (@hooks status [$($success:expr),* $(,)?] |$output:pat_param| $status:expr, $($rest:tt)*) => {
        const SUCCESSES: &'static [(u16, &'static str)] = &[$($success),*];
        fn status($output: &Self::Output) -> u16 {
            $status
        }
        $crate::route::route!(@hooks $($rest)*);
    };
    (@hooks limit |$request:pat_param, $limits:pat_param| $limit:expr, $($rest:tt)*) => {
        fn limit(&mut self, $limits: &$crate::route::ServerLimits) -> cairn::Result<()> {
            let $request = self;
            $limit
        }
        $crate::route::route!(@hooks $($rest)*);
    };
    (@hooks stopping |$request:pat_param| $stopping:expr, $($rest:tt)*) => {
        fn when_stopping(&self) -> $crate::route::WhenStopping<Self> {
            let $request = self;
            $stopping
        }
        $crate::route::route!(@hooks $($rest)*);
    };
    (@hooks names |$request:pat_param| $names:expr, $($rest:tt)*) => {
        const NAMES_IN_BODY: bool = true;
        fn names(&self) -> $crate::Named {
            let $request = self;
            $names
        }
        $crate::route::route!(@hooks $($rest)*);
    };
    (@hooks waits |$request:pat_param| $waits:expr, $($rest:tt)*) => {
        fn waits(&self) -> std::time::Duration {
            let $request = self;
            $waits
        }
        $crate::route::route!(@hooks $($rest)*);
    };
    (
        @body $has_body:literal,
        $request:ty : $method:ident $path:literal, params [$($param:expr),* $(,)?],
        tag $tag:literal, id $id:literal, access $access:expr, reach $reach:ident,
        summary $summary:expr,
        done $done:expr,
        errors [$($error:expr),* $(,)?],
        path |$path_self:pat_param| [$($value:expr),* $(,)?],
        body $body:ty = |$body_self:pat_param| $to_body:expr,
        answer $answer:ty,
        from |$received:pat_param, $wire:pat_param| $from:expr,
        $($hooks:tt)*
    ) => {
        impl $crate::route::Route for $request {
            const METHOD: $crate::route::Method = $crate::route::Method::$method;
            const PATH: &'static str = $path;
            const PARAMS: &'static [$crate::route::PathParam] = &[$($param),*];
            const TAG: &'static str = $tag;
            const OPERATION_ID: &'static str = $id;
            const ACCESS: $crate::Access = $access;
            const REACH: $crate::Reach = $crate::Reach::$reach;
            const SUMMARY: &'static str = $summary;
            const DONE: &'static str = $done;
            const ERRORS: &'static [(u16, &'static str)] = &[$($error),*];
            const BODY: bool = $has_body;
            type Body = $body;
            type Answer = $answer;

            fn path(&self) -> cairn::Result<String> {
                let $path_self = self;
                $crate::route::fill_path($path, &[$(($value).to_string()),*])
            }

            fn body(&self) -> $body {
                let $body_self = self;
                $to_body
            }

            fn from_wire(
                $received: &$crate::route::Received,
                $wire: $body,
            ) -> cairn::Result<Self> {
                $from
            }

            $crate::route::route!(@hooks $($hooks)*);
        }
    };
    (
        $request:ty : $method:ident $path:literal, params [$($param:expr),* $(,)?],
        tag $tag:literal, id $id:literal, access $access:expr, reach $reach:ident,
        summary $summary:expr,
        done $done:expr,
        errors [$($error:expr),* $(,)?],
        path |$path_self:pat_param| [$($value:expr),* $(,)?],
        no body,
        answer $answer:ty,
        from |$received:pat_param| $from:expr,
        $($hooks:tt)*
    ) => {
        $crate::route::route! {
            @body false,
            $request : $method $path, params [$($param),*],
            tag $tag, id $id, access $access, reach $reach,
            summary $summary,
            done $done,
            errors [$($error),*],
            path |$path_self| [$($value),*],
            body $crate::EmptyBody = |_| $crate::EmptyBody {},
            answer $answer,
            from |$received, _| $from,
            $($hooks)*
        }
    };
    (
        $request:ty : $method:ident $path:literal, params [$($param:expr),* $(,)?],
        tag $tag:literal, id $id:literal, access $access:expr, reach $reach:ident,
        summary $summary:expr,
        done $done:expr,
        errors [$($error:expr),* $(,)?],
        path |$path_self:pat_param| [$($value:expr),* $(,)?],
        body $body:ty = |$body_self:pat_param| $to_body:expr,
        answer $answer:ty,
        from |$received:pat_param, $wire:pat_param| $from:expr,
        $($hooks:tt)*
    ) => {
        $crate::route::route! {
            @body true,
            $request : $method $path, params [$($param),*],
            tag $tag, id $id, access $access, reach $reach,
            summary $summary,
            done $done,
            errors [$($error),*],
            path |$path_self| [$($value),*],
            body $body = |$body_self| $to_body,
            answer $answer,
            from |$received, $wire| $from,
            $($hooks)*
        }
    };
}
pub(crate) use route;

/// `template` (`/v1/jobs/{id}/move`) with each `{…}` replaced, in order, by the next of `values`, percent-encoded.
///
/// # Errors
/// [`ErrorKind::InvalidInput`] naming the parameter whose value is empty.
pub fn fill_path(template: &str, values: &[String]) -> Result<String> {
    let mut path = String::with_capacity(template.len());
    let mut values = values.iter();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        path.push_str(&rest[..open]);
        let close = rest[open..].find('}').map_or(rest.len(), |c| open + c + 1);
        let value = values.next().map_or("", String::as_str);
        if value.is_empty() {
            // An empty segment would reach another route, or none: name the field as the engine would.
            let name = rest[open + 1..close].trim_end_matches('}');
            return Err(invalid(name, "must not be empty"));
        }
        path.push_str(&percent_encode(value));
        rest = &rest[close..];
    }
    path.push_str(rest);
    Ok(path)
}

/// Percent-encodes a path segment or a query value: everything but the unreserved characters (`A-Z a-z 0-9 - . _
/// ~`), so that a template's key or a queue's name holding `/`, `%` or `?` travels as itself.
pub fn percent_encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// A bad path parameter, as the engine names a bad field.
pub(crate) fn invalid(field: &str, rule: impl std::fmt::Display) -> Error {
    Error::from_parts(
        ErrorKind::InvalidInput,
        Some(field.to_owned()),
        format!("{field}: {rule}"),
    )
}

#[cfg(test)]
mod tests {
    use super::fill_path;

    #[test]
    fn a_path_is_filled_in_order_and_encoded() {
        assert_eq!(
            fill_path("/v1/jobs/{id}/move", &["7".into()]).unwrap(),
            "/v1/jobs/7/move"
        );
        assert_eq!(
            fill_path("/v1/recurring/{key}/run", &["a/b c".into()]).unwrap(),
            "/v1/recurring/a%2Fb%20c/run"
        );
        assert_eq!(fill_path("/v1/batches", &[]).unwrap(), "/v1/batches");
    }

    #[test]
    fn an_empty_parameter_is_named_rather_than_sent() {
        let error = fill_path("/v1/failures/{group}/unfail", &[String::new()]).unwrap_err();
        assert_eq!(error.kind(), cairn::ErrorKind::InvalidInput);
        assert_eq!(error.to_string(), "group: must not be empty");
    }
}
