//! Reading the statistics: "how long does it take?" per queue and job name, over the last hour, day or week.
//!
//! The writer keeps them incrementally (see `ops/events.rs`): per minute, counts of jobs added, started, finished,
//! retried and failed, and the count, sum, sum of squares, min and max of wait, run and service times; per hour,
//! wait and run time histograms with qless's resolution; per hour and worker, presence and busy time. Reads sum
//! those rows; none reads a job.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use crate::store::db::{Db, Sql, params};
use jiff::Timestamp;

use crate::clock::from_millis;
use crate::error::Result;
use crate::ops::events::bucket_end;

/// The window a statistics read covers, ending now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StatsPeriod {
    /// The last hour, in 60 one-minute points.
    #[default]
    Hour,
    /// The last day, in 24 one-hour points.
    Day,
    /// The last week, in 168 one-hour points.
    Week,
}

impl StatsPeriod {
    /// The period's name: `hour`, `day`, `week`.
    pub fn as_str(self) -> &'static str {
        match self {
            StatsPeriod::Hour => "hour",
            StatsPeriod::Day => "day",
            StatsPeriod::Week => "week",
        }
    }

    /// The period named `name`.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) on `period`.
    pub fn parse(name: &str) -> Result<StatsPeriod> {
        match name {
            "hour" => Ok(StatsPeriod::Hour),
            "day" => Ok(StatsPeriod::Day),
            "week" => Ok(StatsPeriod::Week),
            other => Err(crate::Error::invalid(
                "period",
                format!("must be hour, day or week, got {other:?}"),
            )),
        }
    }

    /// How long one point of the series is.
    pub fn bucket(self) -> Duration {
        match self {
            StatsPeriod::Hour => Duration::from_secs(60),
            StatsPeriod::Day | StatsPeriod::Week => Duration::from_secs(3600),
        }
    }

    /// How many points the series has.
    pub fn points(self) -> u32 {
        match self {
            StatsPeriod::Hour => 60,
            StatsPeriod::Day => 24,
            StatsPeriod::Week => 168,
        }
    }
}

/// Which statistics to read: a period, and optionally one queue and one job name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatsQuery {
    /// The window, ending now.
    pub period: StatsPeriod,
    /// Only this queue's jobs.
    pub queue: Option<String>,
    /// Only jobs of this name.
    pub name: Option<String>,
}

/// Transition counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Jobs created (or moved on to this queue).
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

/// One point of a series: what happened in one bucket of time.
#[derive(Debug, Clone, PartialEq)]
pub struct StatsPoint {
    /// The bucket's start.
    pub at: Timestamp,
    /// What happened in it.
    pub counts: Counts,
    /// The mean and longest wait of the attempts that started in it, if any did.
    pub wait_mean: Option<Duration>,
    /// The longest wait.
    pub wait_max: Option<Duration>,
    /// The mean run time of the attempts that ended in it, if any did.
    pub run_mean: Option<Duration>,
    /// The longest run time.
    pub run_max: Option<Duration>,
}

/// A summary of durations: how many, mean, standard deviation, shortest, longest, and their histogram.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Summary {
    /// How many durations.
    pub count: u64,
    /// Their mean.
    pub mean: Option<Duration>,
    /// Their standard deviation (of the population).
    pub stddev: Option<Duration>,
    /// The shortest.
    pub min: Option<Duration>,
    /// The longest.
    pub max: Option<Duration>,
    /// How many fell in each bucket (qless's resolution: seconds under a minute, minutes under an hour, hours
    /// under a day, then days); only buckets that were hit, shortest first. Empty for service times.
    pub histogram: Vec<HistogramBucket>,
}

/// One bucket of a histogram: durations from `from` (inclusive) to `to` (exclusive).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistogramBucket {
    /// The bucket's lower bound.
    pub from: Duration,
    /// Its upper bound.
    pub to: Duration,
    /// How many durations fell in it.
    pub count: u64,
}

/// The statistics of a window.
#[derive(Debug, Clone, PartialEq)]
pub struct Stats {
    /// The window.
    pub period: StatsPeriod,
    /// Its start (the first point's).
    pub from: Timestamp,
    /// Its end (the end of the current bucket).
    pub to: Timestamp,
    /// How long one point is.
    pub bucket: Duration,
    /// One point per bucket, oldest first, empty buckets included.
    pub series: Vec<StatsPoint>,
    /// Counts over the whole window.
    pub totals: Counts,
    /// Wait times: ready (enqueued, due, or retried) → started. Histograms are kept per hour, so the hour
    /// period's histogram covers the clock hours the window touches.
    pub wait: Summary,
    /// Run times: started → ended by the worker (finished, retried or failed).
    pub run: Summary,
    /// Service times: added → finished or failed for good.
    pub service: Summary,
}

/// One worker's use over a window.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerUsage {
    /// The worker.
    pub worker: String,
    /// How long it ran jobs (attempts summed: a worker running four jobs at once counts four times).
    pub busy: Duration,
    /// How long it was there (between signs of life close enough that it did not count as lost).
    pub present: Duration,
    /// busy / present, when it was there at all.
    pub utilization: Option<f64>,
    /// Attempts it ended.
    pub attempts: u64,
}

/// One queue's use of the workers that ran its jobs.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueUsage {
    /// The queue.
    pub queue: String,
    /// How long workers ran its jobs.
    pub busy: Duration,
    /// How long the workers that ran its jobs were there, in the hours they did.
    pub present: Duration,
    /// busy / present.
    pub utilization: Option<f64>,
}

/// Worker utilization over a window. Kept per clock hour: the window covers the hours it touches.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WorkerStats {
    /// Per worker, by id.
    pub workers: Vec<WorkerUsage>,
    /// Per queue, by name.
    pub queues: Vec<QueueUsage>,
}

const HOUR: i64 = 3_600_000;

/// The window of `period` at `now_ms`: (from, to, bucket), all in ms; `to` is the end of the current bucket.
fn window(period: StatsPeriod, now_ms: i64) -> (i64, i64, i64) {
    let bucket = crate::clock::duration_millis(period.bucket());
    let to = now_ms.div_euclid(bucket) * bucket + bucket;
    (to - bucket * i64::from(period.points()), to, bucket)
}

// Integer sums are cast back to integers: PostgreSQL sums a BIGINT column as NUMERIC.
/// `$1` from, `$2` the width of a point, `$3` to, `$4` the queue, `$5` the name; each point's index first.
pub(crate) const SERIES: Sql = Sql::both(
    "SELECT (minute - $1) / $2, CAST(SUM(added) AS BIGINT), \
     CAST(SUM(started) AS BIGINT), CAST(SUM(finished) AS BIGINT), CAST(SUM(retried) AS BIGINT), \
     CAST(SUM(failed) AS BIGINT), CAST(SUM(wait_count) AS BIGINT), SUM(wait_sum), MAX(wait_max), \
     CAST(SUM(run_count) AS BIGINT), SUM(run_sum), MAX(run_max) \
     FROM stats_minute WHERE minute >= $1 AND minute < $3 \
     AND (CAST($4 AS TEXT) IS NULL OR queue = $4) AND (CAST($5 AS TEXT) IS NULL OR name = $5) GROUP BY 1",
);

pub(crate) const TOTALS: Sql = Sql::both(
    "SELECT CAST(SUM(added) AS BIGINT), CAST(SUM(started) AS BIGINT), \
     CAST(SUM(finished) AS BIGINT), CAST(SUM(retried) AS BIGINT), CAST(SUM(failed) AS BIGINT), \
     CAST(SUM(wait_count) AS BIGINT), SUM(wait_sum), SUM(wait_sumsq), MIN(wait_min), MAX(wait_max), \
     CAST(SUM(run_count) AS BIGINT), SUM(run_sum), SUM(run_sumsq), MIN(run_min), MAX(run_max), \
     CAST(SUM(service_count) AS BIGINT), SUM(service_sum), MIN(service_min), MAX(service_max) \
     FROM stats_minute WHERE minute >= $1 AND minute < $2 \
     AND (CAST($3 AS TEXT) IS NULL OR queue = $3) AND (CAST($4 AS TEXT) IS NULL OR name = $4)",
);

pub(crate) const HISTOGRAM: Sql = Sql::both(
    "SELECT metric, bucket, CAST(SUM(count) AS BIGINT) FROM stats_histogram \
     WHERE hour >= $1 AND hour < $2 AND (CAST($3 AS TEXT) IS NULL OR queue = $3) \
     AND (CAST($4 AS TEXT) IS NULL OR name = $4) GROUP BY metric, bucket ORDER BY metric, bucket",
);

fn millis(ms: f64) -> Duration {
    Duration::from_secs_f64(ms.max(0.0) / 1000.0)
}

/// A whole number of milliseconds.
fn ms(m: i64) -> Duration {
    Duration::from_millis(m.max(0) as u64)
}

fn count(n: Option<i64>) -> u64 {
    n.unwrap_or(0).max(0) as u64
}

/// A summary from its count, sum, sum of squares, min and max (in ms).
fn summary(
    n: Option<i64>,
    sum: Option<f64>,
    sumsq: Option<f64>,
    min: Option<i64>,
    max: Option<i64>,
) -> Summary {
    let n = count(n);
    if n == 0 {
        return Summary::default();
    }
    let mean = sum.unwrap_or(0.0) / n as f64;
    let stddev = sumsq.map(|sq| (sq / n as f64 - mean * mean).max(0.0).sqrt());
    Summary {
        count: n,
        mean: Some(millis(mean)),
        stddev: stddev.map(millis),
        min: min.map(ms),
        max: max.map(ms),
        histogram: Vec::new(),
    }
}

/// The statistics `query` asks for, at `now_ms`.
pub(crate) fn read(db: &Db<'_>, query: &StatsQuery, now_ms: i64) -> Result<Stats> {
    let (from, to, bucket) = window(query.period, now_ms);
    let mut series: Vec<StatsPoint> = (0..i64::from(query.period.points()))
        .map(|i| StatsPoint {
            at: from_millis(from + i * bucket),
            counts: Counts::default(),
            wait_mean: None,
            wait_max: None,
            run_mean: None,
            run_max: None,
        })
        .collect();
    let params = params![
        from,
        bucket,
        to,
        query.queue.as_deref(),
        query.name.as_deref()
    ];
    db.query(SERIES, &params, |r| {
        let index: i64 = r.get(0)?;
        let Some(point) = usize::try_from(index).ok().and_then(|i| series.get_mut(i)) else {
            return Ok(());
        };
        point.counts = Counts {
            added: count(r.get(1)?),
            started: count(r.get(2)?),
            finished: count(r.get(3)?),
            retried: count(r.get(4)?),
            failed: count(r.get(5)?),
        };
        let mean = |n: Option<i64>, sum: Option<f64>| {
            let n = count(n);
            (n > 0).then(|| millis(sum.unwrap_or(0.0) / n as f64))
        };
        point.wait_mean = mean(r.get(6)?, r.get(7)?);
        point.wait_max = r.get::<Option<i64>>(8)?.map(ms);
        point.run_mean = mean(r.get(9)?, r.get(10)?);
        point.run_max = r.get::<Option<i64>>(11)?.map(ms);
        Ok(())
    })?;
    let (totals, mut wait, mut run, service) = db.query_one(
        TOTALS,
        &params![from, to, query.queue.as_deref(), query.name.as_deref()],
        |r| {
            let totals = Counts {
                added: count(r.get(0)?),
                started: count(r.get(1)?),
                finished: count(r.get(2)?),
                retried: count(r.get(3)?),
                failed: count(r.get(4)?),
            };
            let wait = summary(r.get(5)?, r.get(6)?, r.get(7)?, r.get(8)?, r.get(9)?);
            let run = summary(r.get(10)?, r.get(11)?, r.get(12)?, r.get(13)?, r.get(14)?);
            let mut service = summary(r.get(15)?, r.get(16)?, None, r.get(17)?, r.get(18)?);
            service.stddev = None;
            Ok((totals, wait, run, service))
        },
    )?;
    let hours_from = from.div_euclid(HOUR) * HOUR;
    let rows = db.query(
        HISTOGRAM,
        &params![
            hours_from,
            to,
            query.queue.as_deref(),
            query.name.as_deref()
        ],
        |r| Ok((r.get::<String>(0)?, r.get::<i64>(1)?, r.get::<i64>(2)?)),
    )?;
    for (metric, lower, n) in rows {
        let bucket = HistogramBucket {
            from: ms(lower),
            to: ms(bucket_end(lower)),
            count: count(Some(n)),
        };
        match metric.as_str() {
            "wait" => wait.histogram.push(bucket),
            "run" => run.histogram.push(bucket),
            _ => {}
        }
    }
    Ok(Stats {
        period: query.period,
        from: from_millis(from),
        to: from_millis(to),
        bucket: ms(bucket),
        series,
        totals,
        wait,
        run,
        service,
    })
}

pub(crate) const WORKER_HOURS: Sql = Sql::both(
    "SELECT hour, worker, queue, present_ms, busy_ms, attempts FROM worker_hour WHERE hour >= $1 AND hour < $2",
);

/// Worker utilization over `period` at `now_ms`, from the hourly rows the window touches.
pub(crate) fn workers(db: &Db<'_>, period: StatsPeriod, now_ms: i64) -> Result<WorkerStats> {
    let (from, to, _) = window(period, now_ms);
    let from = from.div_euclid(HOUR) * HOUR;
    let rows = db.query(WORKER_HOURS, &params![from, to], |r| {
        Ok((
            r.get::<i64>(0)?,
            r.get::<String>(1)?,
            r.get::<String>(2)?,
            r.get::<i64>(3)?,
            r.get::<i64>(4)?,
            r.get::<i64>(5)?,
        ))
    })?;
    // (hour, worker) → present; worker → (busy, present, attempts); queue → (busy, present).
    let mut present_in: HashMap<(i64, &str), i64> = HashMap::new();
    let mut per_worker: BTreeMap<&str, (i64, i64, i64)> = BTreeMap::new();
    for (hour, worker, queue, present, busy, attempts) in &rows {
        let w = per_worker.entry(worker.as_str()).or_default();
        if queue.is_empty() {
            *present_in.entry((*hour, worker.as_str())).or_default() += present;
            w.1 += present;
        } else {
            w.0 += busy;
            w.2 += attempts;
        }
    }
    let mut per_queue: BTreeMap<&str, (i64, i64)> = BTreeMap::new();
    for (hour, worker, queue, _, busy, _) in &rows {
        if queue.is_empty() {
            continue;
        }
        let q = per_queue.entry(queue.as_str()).or_default();
        q.0 += busy;
        q.1 += present_in
            .get(&(*hour, worker.as_str()))
            .copied()
            .unwrap_or(0);
    }
    let ratio = |busy: i64, present: i64| (present > 0).then(|| busy as f64 / present as f64);
    Ok(WorkerStats {
        workers: per_worker
            .into_iter()
            .map(|(worker, (busy, present, attempts))| WorkerUsage {
                worker: worker.to_owned(),
                busy: ms(busy),
                present: ms(present),
                utilization: ratio(busy, present),
                attempts: attempts.max(0) as u64,
            })
            .collect(),
        queues: per_queue
            .into_iter()
            .map(|(queue, (busy, present))| QueueUsage {
                queue: queue.to_owned(),
                busy: ms(busy),
                present: ms(present),
                utilization: ratio(busy, present),
            })
            .collect(),
    })
}
