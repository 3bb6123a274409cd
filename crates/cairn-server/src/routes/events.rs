//! `GET /v1/events`: the activity log's events as they are committed, as Server-Sent Events, resumable with
//! `Last-Event-ID` (see `cairn::Queue::events`).

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, Method};
use axum::response::sse::{Event, KeepAlive, Sse};
use cairn::{ActivityKind, EventFilter, EventsFrom};
use cairn_api::{ActivityEventBody, ErrorBody};
use futures_util::{Stream, StreamExt as _};
use serde::Deserialize;
use utoipa::IntoParams;

use crate::auth::{CallerOf, allow};
use crate::error::{ApiError, ApiResult};
use crate::openapi::ReadErrors;
use crate::routes::QueryParams;
use crate::state::AppState;
use cairn_api::{READ, Reach};

/// A comment every so often keeps a quiet stream's connection from being cut by a proxy, and finds out when the
/// other end went away.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Which events to follow, and from where.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct EventParams {
    /// Only events of jobs in this queue.
    #[param(value_type = cairn_api::rules::QueueName, required = false)]
    queue: Option<String>,
    /// Only events of jobs whose name matches this GLOB.
    #[param(value_type = cairn_api::rules::NamePattern, required = false)]
    name: Option<String>,
    /// Only this job's events.
    #[param(value_type = cairn_api::rules::JobId, required = false)]
    job: Option<String>,
    /// Only events of these kinds, separated by commas (`added,finished,failed`).
    #[param(value_type = String, required = false)]
    kinds: Option<String>,
    /// Start after this event's id (as a reconnecting client's `Last-Event-ID` header does, which wins): every
    /// event still retained after it, then the new ones. Absent: from the next event committed.
    #[param(value_type = u64, required = false, minimum = 0)]
    after: Option<String>,
}

/// The activity log's events as Server-Sent Events (`text/event-stream`): each with its id (to resume from with
/// `Last-Event-ID`), its kind as the event's name, and its body as JSON.
#[utoipa::path(get, path = "/v1/events", tag = "stats", params(EventParams),
    responses(
        (status = 200, description = "A stream of events that does not end (`text/event-stream`): `id: <id>`, `event: <kind>`, `data: <the event as GET /v1/activity shows it>`, and a comment line now and then to keep the connection. A resumed stream whose start is older than the oldest event the log keeps begins with `event: missed`, `data: {\"after\": <where it asked to resume>, \"oldest\": <the first event it gets>}`, without an id: the events between were pruned", content_type = "text/event-stream", body = ActivityEventBody),
        (status = 400, description = "A bad filter or start", body = ErrorBody),
        ReadErrors,
    ))]
pub async fn events(
    State(state): State<AppState>,
    CallerOf(caller): CallerOf,
    headers: HeaderMap,
    QueryParams(params): QueryParams<EventParams>,
) -> ApiResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    allow(
        state.config.has_tokens(),
        caller.as_ref(),
        READ,
        Reach::Server,
        &Method::GET,
        "/v1/events",
    )?;
    let from = match headers.get("last-event-id") {
        Some(value) => {
            let text = value.to_str().unwrap_or_default();
            EventsFrom::After(text.trim().parse().map_err(|_| {
                ApiError::invalid(
                    "Last-Event-ID",
                    format!("must be an event's id, got {text:?}"),
                )
            })?)
        }
        None => match params.after.as_deref() {
            None => EventsFrom::Now,
            Some(text) => EventsFrom::After(text.parse().map_err(|_| {
                ApiError::invalid("after", format!("must be an event's id, got {text:?}"))
            })?),
        },
    };
    let kinds = params
        .kinds
        .as_deref()
        .map(|text| {
            text.split(',')
                .map(|k| {
                    ActivityKind::parse(k.trim()).ok_or_else(|| {
                        ApiError::invalid(
                            "kinds",
                            format!("must name kinds of events (added, finished, …), got {k:?}"),
                        )
                    })
                })
                .collect::<Result<Vec<_>, _>>()
        })
        .transpose()?
        .unwrap_or_default();
    let filter = EventFilter {
        queue: params.queue,
        name: params.name,
        job: params
            .job
            .as_deref()
            .map(|t| cairn_api::id_param("job", t))
            .transpose()?,
        kinds,
    };
    let from_header = headers.contains_key("last-event-id");
    let subscription =
        state
            .queue
            .events(from, filter)
            .await
            .map_err(|e| match (from_header, e.field()) {
                // The engine names its own parameter; this one came as the header.
                (true, Some("after")) => ApiError::invalid(
                    "Last-Event-ID",
                    e.message().trim_start_matches("after: ").to_owned(),
                ),
                _ => ApiError::from(e),
            })?;
    // First, if the resume point is older than what the log keeps, say so: an event without an id, so that a
    // client's Last-Event-ID stays where it was.
    let missed = subscription.missed().map(|m| {
        Ok(Event::default()
            .event("missed")
            .data(format!(r#"{{"after":{},"oldest":{}}}"#, m.after, m.oldest)))
    });
    let stopping = state.shutdown.clone();
    let stream = futures_util::stream::unfold(subscription, move |mut subscription| {
        let stopping = stopping.clone();
        async move {
            // The stream ends when the server stops (or its queue closes); a client reconnects with its last id.
            let event = tokio::select! {
                event = subscription.next() => event.ok()?,
                () = stopping.cancelled() => return None,
            };
            let body = ActivityEventBody::from(&event);
            let sse = Event::default()
                .id(event.id.to_string())
                .event(event.kind.as_str())
                .json_data(&body)
                .unwrap_or_else(|_| Event::default().comment("an event that could not be written"));
            Some((Ok(sse), subscription))
        }
    });
    let stream = futures_util::stream::iter(missed).chain(stream);
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(KEEP_ALIVE)))
}
