//! Seeing the queue: `/v1/stats` (counts, wait, run and service times over the last hour, day or week, with
//! series for graphs and histograms), `/v1/stats/workers` (utilization), `/v1/activity` (the activity log),
//! `/v1/sql` (read-only SQL), and `/metrics` (Prometheus's text format).

use std::fmt::Write as _;

use axum::Json;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use cairn::{ActivityFilter, ActivityKind, HISTOGRAM_BOUNDS, JobMetrics, StatsPeriod, StatsQuery};
use cairn_api::{ActivityPageBody, ErrorBody, SqlBody, SqlRequest, StatsBody, WorkerStatsBody};
use serde::Deserialize;
use utoipa::IntoParams;

use crate::body::JsonBody;
use crate::error::{ApiError, ApiResult};
use crate::openapi::{ReadErrors, ReadWithBodyErrors};
use crate::routes::{QueryParams, id_param, time_param};
use crate::state::AppState;

/// Which statistics.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct StatsParams {
    /// `hour` (60 one-minute points, the default), `day` (24 one-hour points) or `week` (168 one-hour points).
    #[param(value_type = cairn_api::rules::StatsPeriodName, required = false)]
    period: Option<String>,
    /// Only this queue's jobs.
    queue: Option<String>,
    /// Only jobs of this name.
    name: Option<String>,
}

fn period(text: Option<&str>) -> Result<StatsPeriod, ApiError> {
    text.map_or(Ok(StatsPeriod::Hour), |t| {
        StatsPeriod::parse(t).map_err(ApiError::from)
    })
}

/// Counts, wait, run and service times over a window ending now, with one point per bucket for graphs.
#[utoipa::path(get, path = "/v1/stats", tag = "stats", params(StatsParams),
    responses(
        (status = 200, description = "The statistics", body = StatsBody),
        (status = 400, description = "A bad period or an unknown parameter", body = ErrorBody),
        ReadErrors,
    ))]
pub async fn stats(
    State(state): State<AppState>,
    QueryParams(params): QueryParams<StatsParams>,
) -> ApiResult<Json<StatsBody>> {
    let query = StatsQuery {
        period: period(params.period.as_deref())?,
        queue: params.queue,
        name: params.name,
    };
    let stats = state.queue.stats(query).await?;
    Ok(Json(StatsBody::from(&stats)))
}

/// Which window of worker utilization.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct PeriodParams {
    /// `hour` (the default), `day` or `week`; kept per clock hour, so the window covers the hours it touches.
    #[param(value_type = cairn_api::rules::StatsPeriodName, required = false)]
    period: Option<String>,
}

/// Worker utilization: busy time over the time each worker was there, per worker and per queue.
#[utoipa::path(get, path = "/v1/stats/workers", tag = "stats", params(PeriodParams),
    responses(
        (status = 200, description = "Utilization", body = WorkerStatsBody),
        (status = 400, description = "A bad period or an unknown parameter", body = ErrorBody),
        ReadErrors,
    ))]
pub async fn worker_stats(
    State(state): State<AppState>,
    QueryParams(params): QueryParams<PeriodParams>,
) -> ApiResult<Json<WorkerStatsBody>> {
    let stats = state
        .queue
        .worker_stats(period(params.period.as_deref())?)
        .await?;
    Ok(Json(WorkerStatsBody::from(&stats)))
}

/// Which events.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ActivityParams {
    /// Only this job's events.
    #[param(value_type = cairn_api::rules::JobId, required = false)]
    job: Option<String>,
    /// Only this worker's.
    worker: Option<String>,
    /// Only this queue's.
    queue: Option<String>,
    /// Only events at or after this time (RFC 3339).
    #[param(value_type = String, format = DateTime, required = false)]
    since: Option<String>,
    /// Only events before this time (RFC 3339).
    #[param(value_type = String, format = DateTime, required = false)]
    until: Option<String>,
    /// Only events older than this id (the `next_before` of the previous page).
    #[param(value_type = cairn_api::rules::JobId, required = false)]
    before: Option<String>,
    /// The most events (default 100, at most 1000).
    #[param(value_type = u32, required = false, minimum = 1, maximum = 1000)]
    limit: Option<String>,
}

/// The activity log, newest first: every job and worker transition.
#[utoipa::path(get, path = "/v1/activity", tag = "stats", params(ActivityParams),
    responses(
        (status = 200, description = "A page of events", body = ActivityPageBody),
        (status = 400, description = "A bad filter", body = ErrorBody),
        ReadErrors,
    ))]
pub async fn activity(
    State(state): State<AppState>,
    QueryParams(params): QueryParams<ActivityParams>,
) -> ApiResult<Json<ActivityPageBody>> {
    let filter = ActivityFilter {
        job: params
            .job
            .as_deref()
            .map(|t| id_param("job", t))
            .transpose()?,
        worker: params.worker,
        queue: params.queue,
        since: params
            .since
            .as_deref()
            .map(|t| time_param("since", t))
            .transpose()?,
        until: params
            .until
            .as_deref()
            .map(|t| time_param("until", t))
            .transpose()?,
        before: params
            .before
            .as_deref()
            .map(|t| id_param("before", t).map(|id| id.0))
            .transpose()?,
        limit: match params.limit.as_deref() {
            None => 0,
            Some(t) => t.parse().ok().filter(|n| *n > 0).ok_or_else(|| {
                ApiError::invalid(
                    "limit",
                    format!(
                        "must be an integer between 1 and {}, got {t:?}",
                        cairn::MAX_ACTIVITY_PAGE
                    ),
                )
            })?,
        },
    };
    let page = state.queue.activity(filter).await?;
    Ok(Json(ActivityPageBody::from(&page)))
}

/// Runs one read-only SQL statement over the queue's database. Anything but a read is refused; a query stops at
/// its time limit and never blocks the queue's writes.
#[utoipa::path(post, path = "/v1/sql", tag = "stats", request_body = SqlRequest,
    responses(
        (status = 200, description = "The rows", body = SqlBody),
        (status = 400, description = "Not one read, SQLite's complaint, too slow, or a bad limit", body = ErrorBody),
        ReadWithBodyErrors,
    ))]
pub async fn sql(
    State(state): State<AppState>,
    JsonBody(request): JsonBody<SqlRequest>,
) -> ApiResult<Json<SqlBody>> {
    let result = state.queue.sql(request.to_query()).await?;
    Ok(Json(SqlBody::from(result)))
}

/// The transitions `/metrics` counts, with the counter each one feeds.
const COUNTERS: [(ActivityKind, &str, &str); 7] = [
    (
        ActivityKind::Added,
        "cairn_jobs_added_total",
        "Jobs created, or moved on to the queue.",
    ),
    (
        ActivityKind::Started,
        "cairn_jobs_started_total",
        "Attempts started.",
    ),
    (
        ActivityKind::Finished,
        "cairn_jobs_finished_total",
        "Attempts that completed their job.",
    ),
    (
        ActivityKind::Retried,
        "cairn_jobs_retried_total",
        "Attempts that ended with another one scheduled.",
    ),
    (
        ActivityKind::Failed,
        "cairn_jobs_failed_total",
        "Jobs that failed for good.",
    ),
    (
        ActivityKind::Cancelled,
        "cairn_jobs_cancelled_total",
        "Jobs cancelled or deleted.",
    ),
    (
        ActivityKind::HeartbeatLost,
        "cairn_jobs_heartbeat_lost_total",
        "Attempts whose lease ran out.",
    ),
];

/// Prometheus's text format: job counters and wait and run time histograms per queue and name since the server
/// started, and the jobs of each queue by state now.
#[utoipa::path(get, path = "/metrics", tag = "stats",
    responses((status = 200, description = "Prometheus text format 0.0.4", content_type = "text/plain"), ReadErrors))]
pub async fn metrics(State(state): State<AppState>) -> ApiResult<impl IntoResponse> {
    let snapshot = state.queue.metrics();
    let queues = state.queue.queue_stats().await?;
    let mut out = String::new();
    for (kind, metric, help) in COUNTERS {
        let _ = writeln!(out, "# HELP {metric} {help}\n# TYPE {metric} counter");
        for ((queue, name), m) in &snapshot.jobs {
            let _ = writeln!(out, "{metric}{{{}}} {}", labels(queue, name), m.count(kind));
        }
    }
    histogram(
        &mut out,
        "cairn_job_wait_seconds",
        "How long jobs waited between ready and started.",
        &snapshot.jobs,
        |m| &m.wait,
    );
    histogram(
        &mut out,
        "cairn_job_run_seconds",
        "How long attempts ran, started to ended by the worker.",
        &snapshot.jobs,
        |m| &m.run,
    );
    let _ = writeln!(
        out,
        "# HELP cairn_queue_jobs Jobs in the queue by state.\n# TYPE cairn_queue_jobs gauge"
    );
    for q in &queues {
        let queue = escape(&q.queue);
        for (state, n) in [
            ("scheduled", q.scheduled),
            ("queued", q.queued),
            ("waiting", q.waiting),
            ("running", q.running),
            ("stalled", q.stalled),
            ("failed", q.failed),
            ("completed", q.completed),
            ("cancelled", q.cancelled),
        ] {
            let _ = writeln!(
                out,
                "cairn_queue_jobs{{queue=\"{queue}\",state=\"{state}\"}} {n}"
            );
        }
    }
    let _ = writeln!(
        out,
        "# HELP cairn_queue_paused 1 while the queue hands out nothing.\n# TYPE cairn_queue_paused gauge"
    );
    for q in &queues {
        let _ = writeln!(
            out,
            "cairn_queue_paused{{queue=\"{}\"}} {}",
            escape(&q.queue),
            u8::from(q.paused)
        );
    }
    Ok((
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        out,
    ))
}

/// One histogram family, cumulative as Prometheus wants it.
fn histogram(
    out: &mut String,
    metric: &str,
    help: &str,
    jobs: &std::collections::BTreeMap<(String, String), JobMetrics>,
    pick: impl Fn(&JobMetrics) -> &cairn::DurationHistogram,
) {
    let _ = writeln!(out, "# HELP {metric} {help}\n# TYPE {metric} histogram");
    for ((queue, name), m) in jobs {
        let h = pick(m);
        let labels = labels(queue, name);
        let mut cumulative = 0;
        for (bound, count) in HISTOGRAM_BOUNDS.iter().zip(h.buckets) {
            cumulative += count;
            let _ = writeln!(
                out,
                "{metric}_bucket{{{labels},le=\"{bound}\"}} {cumulative}"
            );
        }
        let _ = writeln!(out, "{metric}_bucket{{{labels},le=\"+Inf\"}} {}", h.count);
        let _ = writeln!(out, "{metric}_sum{{{labels}}} {}", h.sum_seconds);
        let _ = writeln!(out, "{metric}_count{{{labels}}} {}", h.count);
    }
}

fn labels(queue: &str, name: &str) -> String {
    format!("queue=\"{}\",name=\"{}\"", escape(queue), escape(name))
}

/// A label value as the text format wants it: backslash, double quote and line feed escaped.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(
            escape(
                r#"a"b\c
d"#
            ),
            r#"a\"b\\c\nd"#
        );
    }
}
