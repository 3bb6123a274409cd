//! `GET /metrics`: Prometheus's text format, which is not a JSON answer and so not a declared route.

use cairn::Jobs;
use std::fmt::Write as _;

use axum::extract::State;
use axum::http::{Method, header};
use axum::response::IntoResponse;
use cairn::{ActivityKind, HISTOGRAM_BOUNDS, JobMetrics};

use crate::auth::{CallerOf, allow};
use crate::error::ApiResult;
use crate::openapi::ReadErrors;
use crate::state::AppState;
use cairn_api::{READ, Reach};

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
pub async fn metrics(
    State(state): State<AppState>,
    CallerOf(caller): CallerOf,
) -> ApiResult<impl IntoResponse> {
    allow(
        state.config.has_tokens(),
        caller.as_ref(),
        READ,
        Reach::Server,
        &Method::GET,
        "/metrics",
    )?;
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
        "# HELP cairn_queue_suspended_jobs Of the scheduled and waiting jobs, those their handler suspended (a sleep, \
         a wait for a signal or for its children), which hold no worker.\n# TYPE cairn_queue_suspended_jobs gauge"
    );
    for q in &queues {
        let _ = writeln!(
            out,
            "cairn_queue_suspended_jobs{{queue=\"{}\"}} {}",
            escape(&q.queue),
            q.suspended
        );
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
