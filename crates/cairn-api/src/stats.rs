//! Statistics over the last hour, day or week (transition counts, wait, run and service times) and worker
//! utilization. The activity log is in `activity`.

use std::time::Duration;

use cairn::{Counts, Stats, StatsPeriod, StatsQuery, Summary, WorkerStats, WorkerStatsQuery};
use jiff::Timestamp;
use serde::{Deserialize, Serialize};

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

use crate::READ;
use crate::millis::to_millis;
use crate::route::{Answer, RouteVisitor, route};

/// Transition counts over a window or a bucket.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct CountsBody {
    /// Jobs created (or moved on to the queue).
    pub added: u64,
    /// Attempts started.
    pub started: u64,
    /// Attempts that completed their job.
    pub finished: u64,
    /// Attempts that ended with another one scheduled.
    pub retried: u64,
    /// Jobs that failed for good.
    pub failed: u64,
}

impl From<Counts> for CountsBody {
    fn from(c: Counts) -> Self {
        CountsBody {
            added: c.added,
            started: c.started,
            finished: c.finished,
            retried: c.retried,
            failed: c.failed,
        }
    }
}

impl From<CountsBody> for Counts {
    fn from(c: CountsBody) -> Self {
        Counts {
            added: c.added,
            started: c.started,
            finished: c.finished,
            retried: c.retried,
            failed: c.failed,
        }
    }
}

/// One bucket of a series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct StatsPointBody {
    /// The bucket's start.
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub at: Timestamp,
    /// Jobs created in it.
    pub added: u64,
    /// Attempts started in it.
    pub started: u64,
    /// Attempts that completed their job in it.
    pub finished: u64,
    /// Attempts retried in it.
    pub retried: u64,
    /// Jobs that failed for good in it.
    pub failed: u64,
    /// The mean wait of the attempts that started in it.
    pub wait_mean_ms: Option<f64>,
    /// The longest wait.
    pub wait_max_ms: Option<u64>,
    /// The mean run time of the attempts that ended in it.
    pub run_mean_ms: Option<f64>,
    /// The longest run time.
    pub run_max_ms: Option<u64>,
}

/// One bucket of a histogram: durations from `from_ms` (inclusive) to `to_ms` (exclusive).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct HistogramBucketBody {
    /// The lower bound.
    pub from_ms: u64,
    /// The upper bound.
    pub to_ms: u64,
    /// How many durations fell in it.
    pub count: u64,
}

/// A summary of durations.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct SummaryBody {
    /// How many.
    pub count: u64,
    /// Their mean.
    pub mean_ms: Option<f64>,
    /// Their standard deviation (of the population); absent for service times.
    pub stddev_ms: Option<f64>,
    /// The shortest.
    pub min_ms: Option<u64>,
    /// The longest.
    pub max_ms: Option<u64>,
    /// Non-empty buckets, shortest first (qless's resolution: seconds under a minute, minutes under an hour, hours
    /// under a day, then days); empty for service times.
    #[serde(default)]
    pub histogram: Vec<HistogramBucketBody>,
}

impl From<&Summary> for SummaryBody {
    fn from(s: &Summary) -> Self {
        SummaryBody {
            count: s.count,
            mean_ms: mean_ms(s.mean),
            stddev_ms: mean_ms(s.stddev),
            min_ms: opt_ms(s.min),
            max_ms: opt_ms(s.max),
            histogram: s
                .histogram
                .iter()
                .map(|b| HistogramBucketBody {
                    from_ms: to_millis(b.from),
                    to_ms: to_millis(b.to),
                    count: b.count,
                })
                .collect(),
        }
    }
}

impl From<&SummaryBody> for Summary {
    fn from(b: &SummaryBody) -> Self {
        Summary {
            count: b.count,
            mean: b.mean_ms.map(from_mean),
            stddev: b.stddev_ms.map(from_mean),
            min: b.min_ms.map(from_ms),
            max: b.max_ms.map(from_ms),
            histogram: b
                .histogram
                .iter()
                .map(|h| cairn::HistogramBucket {
                    from: from_ms(h.from_ms),
                    to: from_ms(h.to_ms),
                    count: h.count,
                })
                .collect(),
        }
    }
}

/// Statistics over the last hour, day or week.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct StatsBody {
    /// `hour`, `day` or `week`.
    pub period: String,
    /// The window's start.
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub from: Timestamp,
    /// The window's end (the end of the current bucket).
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub to: Timestamp,
    /// How long one point is: a minute for the hour, an hour for the day and the week.
    pub bucket_ms: u64,
    /// One point per bucket, oldest first.
    pub series: Vec<StatsPointBody>,
    /// Counts over the window.
    pub totals: CountsBody,
    /// Wait times: ready → started.
    pub wait: SummaryBody,
    /// Run times: started → ended by the worker.
    pub run: SummaryBody,
    /// Service times: added → finished or failed for good.
    pub service: SummaryBody,
}

impl From<&Stats> for StatsBody {
    fn from(s: &Stats) -> Self {
        StatsBody {
            period: s.period.as_str().to_owned(),
            from: s.from,
            to: s.to,
            bucket_ms: to_millis(s.bucket),
            series: s
                .series
                .iter()
                .map(|p| StatsPointBody {
                    at: p.at,
                    added: p.counts.added,
                    started: p.counts.started,
                    finished: p.counts.finished,
                    retried: p.counts.retried,
                    failed: p.counts.failed,
                    wait_mean_ms: mean_ms(p.wait_mean),
                    wait_max_ms: opt_ms(p.wait_max),
                    run_mean_ms: mean_ms(p.run_mean),
                    run_max_ms: opt_ms(p.run_max),
                })
                .collect(),
            totals: s.totals.into(),
            wait: (&s.wait).into(),
            run: (&s.run).into(),
            service: (&s.service).into(),
        }
    }
}

impl StatsBody {
    /// The engine's form.
    ///
    /// # Errors
    /// A period this version does not know.
    pub fn to_stats(&self) -> cairn::Result<Stats> {
        Ok(Stats {
            period: cairn::StatsPeriod::parse(&self.period)?,
            from: self.from,
            to: self.to,
            bucket: from_ms(self.bucket_ms),
            series: self
                .series
                .iter()
                .map(|p| cairn::StatsPoint {
                    at: p.at,
                    counts: Counts {
                        added: p.added,
                        started: p.started,
                        finished: p.finished,
                        retried: p.retried,
                        failed: p.failed,
                    },
                    wait_mean: p.wait_mean_ms.map(from_mean),
                    wait_max: p.wait_max_ms.map(from_ms),
                    run_mean: p.run_mean_ms.map(from_mean),
                    run_max: p.run_max_ms.map(from_ms),
                })
                .collect(),
            totals: self.totals.into(),
            wait: (&self.wait).into(),
            run: (&self.run).into(),
            service: (&self.service).into(),
        })
    }
}

/// One worker's use over a window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct WorkerUsageBody {
    /// The worker.
    pub worker: String,
    /// How long it ran jobs (summed over its attempts).
    pub busy_ms: u64,
    /// How long it was there.
    pub available_ms: u64,
    /// busy / available; above 1 for a worker running several jobs at once.
    pub utilization: Option<f64>,
    /// Attempts it ended.
    pub attempts: u64,
}

/// One queue's use of the workers that ran its jobs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct QueueUsageBody {
    /// The queue.
    pub queue: String,
    /// How long workers ran its jobs.
    pub busy_ms: u64,
    /// How long those workers were there, in the hours they ran its jobs.
    pub available_ms: u64,
    /// busy / available.
    pub utilization: Option<f64>,
}

/// Worker utilization over a window (kept per clock hour).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct WorkerStatsBody {
    /// Per worker.
    pub workers: Vec<WorkerUsageBody>,
    /// Per queue.
    pub queues: Vec<QueueUsageBody>,
}

impl From<&WorkerStats> for WorkerStatsBody {
    fn from(w: &WorkerStats) -> Self {
        WorkerStatsBody {
            workers: w
                .workers
                .iter()
                .map(|u| WorkerUsageBody {
                    worker: u.worker.clone(),
                    busy_ms: to_millis(u.busy),
                    available_ms: to_millis(u.present),
                    utilization: u.utilization,
                    attempts: u.attempts,
                })
                .collect(),
            queues: w
                .queues
                .iter()
                .map(|u| QueueUsageBody {
                    queue: u.queue.clone(),
                    busy_ms: to_millis(u.busy),
                    available_ms: to_millis(u.present),
                    utilization: u.utilization,
                })
                .collect(),
        }
    }
}

impl From<&WorkerStatsBody> for WorkerStats {
    fn from(b: &WorkerStatsBody) -> Self {
        WorkerStats {
            workers: b
                .workers
                .iter()
                .map(|w| cairn::WorkerUsage {
                    worker: w.worker.clone(),
                    busy: from_ms(w.busy_ms),
                    present: from_ms(w.available_ms),
                    utilization: w.utilization,
                    attempts: w.attempts,
                })
                .collect(),
            queues: b
                .queues
                .iter()
                .map(|q| cairn::QueueUsage {
                    queue: q.queue.clone(),
                    busy: from_ms(q.busy_ms),
                    present: from_ms(q.available_ms),
                    utilization: q.utilization,
                })
                .collect(),
        }
    }
}

fn opt_ms(d: Option<Duration>) -> Option<u64> {
    d.map(to_millis)
}

fn mean_ms(d: Option<Duration>) -> Option<f64> {
    d.map(|d| d.as_secs_f64() * 1000.0)
}

fn from_ms(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

fn from_mean(ms: f64) -> Duration {
    Duration::from_secs_f64(ms.max(0.0) / 1000.0)
}

/// Which statistics (`GET /v1/stats`'s parameters).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct StatsParams {
    /// `hour` (60 one-minute points, the default), `day` (24 one-hour points) or `week` (168 one-hour points).
    #[cfg_attr(feature = "openapi", schema(value_type = Option<crate::rules::StatsPeriodName>))]
    pub period: Option<String>,
    /// Only this queue's jobs.
    pub queue: Option<String>,
    /// Only jobs of this name.
    pub name: Option<String>,
}

/// Which window of worker utilization (`GET /v1/stats/workers`'s parameters).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PeriodParams {
    /// `hour` (the default), `day` or `week`; kept per clock hour, so the window covers the hours it touches.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<crate::rules::StatsPeriodName>))]
    pub period: Option<String>,
}

/// The period a parameter names, an hour when it is absent.
fn period(text: Option<&str>) -> cairn::Result<StatsPeriod> {
    text.map_or(Ok(StatsPeriod::Hour), StatsPeriod::parse)
}

impl Answer<Stats> for StatsBody {
    fn from_output(stats: Stats) -> Self {
        StatsBody::from(&stats)
    }

    fn into_output(self) -> cairn::Result<Stats> {
        self.to_stats()
    }
}

impl Answer<WorkerStats> for WorkerStatsBody {
    fn from_output(stats: WorkerStats) -> Self {
        WorkerStatsBody::from(&stats)
    }

    fn into_output(self) -> cairn::Result<WorkerStats> {
        Ok(WorkerStats::from(&self))
    }
}

/// The statistics' routes, for [`visit_routes`](crate::visit_routes).
pub(crate) fn visit_stats_routes(visitor: &mut impl RouteVisitor) {
    visitor.visit::<StatsQuery>();
    visitor.visit::<WorkerStatsQuery>();
}

route! {
    StatsQuery: Get "/v1/stats", params [], tag "stats", id "stats", access READ, reach Server,
    summary "Counts, wait, run and service times over a window ending now, with one point per bucket for graphs.",
    done "The statistics",
    errors [(400, "A bad period or an unknown parameter")],
    path |_r| [],
    body StatsParams = |r| StatsParams {
        period: Some(r.period.as_str().to_owned()),
        queue: r.queue.clone(),
        name: r.name.clone(),
    },
    answer StatsBody,
    from |_received, query| Ok(StatsQuery {
        period: period(query.period.as_deref())?,
        queue: query.queue,
        name: query.name,
    }),
}

route! {
    WorkerStatsQuery: Get "/v1/stats/workers", params [], tag "stats", id "worker_stats", access READ, reach Server,
    summary "Worker utilization: busy time over the time each worker was there, per worker and per queue.",
    done "Utilization",
    errors [(400, "A bad period or an unknown parameter")],
    path |_r| [],
    body PeriodParams = |r| PeriodParams { period: Some(r.period.as_str().to_owned()) },
    answer WorkerStatsBody,
    from |_received, query| Ok(WorkerStatsQuery { period: period(query.period.as_deref())? }),
}
