//! What a transaction did to jobs and workers, recorded as it happens and written once, at its end: the activity
//! log (a row per transition) and the statistics (per minute, queue and job name; histograms per hour; worker
//! presence and busy time per hour). Writing once per batch turns thousands of transitions into a few upserts.
//!
//! Operations record through [`EventLog`], which lives in the [`WriteCtx`](crate::ops::WriteCtx). An operation
//! that fails inside its savepoint has its events dropped with it ([`EventLog::mark`], [`EventLog::undo_to`]);
//! a transaction that rolls back drops them all.

use std::collections::HashMap;

use crate::store::activity::ActivityRows;
use crate::store::db::{Db, ToValue, Value};

use crate::error::Result;
use crate::name_families::NameFamilies;
use crate::ops::HeldJob;

/// One kind of transition in the activity log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ActivityKind {
    /// A job was created (pushed, or created by a recurring template), or moved on to its next queue.
    Added,
    /// A debounced push landed in it: its data was replaced and its run moved (`detail` says to when).
    Debounced,
    /// A worker took it.
    Started,
    /// Its lease ran out: its worker is gone or hung.
    HeartbeatLost,
    /// An attempt ended and another is scheduled.
    Retried,
    /// An attempt completed it.
    Finished,
    /// It failed for good (permanently, or out of attempts).
    Failed,
    /// It was cancelled (or deleted), or cancelled with a job it depended on.
    Cancelled,
    /// Its worker gave it back unrun (shutting down); the attempt does not count.
    Released,
    /// Someone ran it again with fresh attempts.
    Requeued,
    /// Failed jobs of a failure group went back to a queue (one row for the whole group; `detail` says how many).
    Unfailed,
    /// A worker took jobs or heartbeated for the first time, or again after it was stopped or lost.
    WorkerStarted,
    /// A worker said it stops.
    WorkerStopped,
    /// A worker gave no sign of life for [`WORKER_LOST_AFTER`].
    WorkerLost,
    /// Someone moved it to another queue (`detail` says from which); the event names the queue it is in now.
    Moved,
    /// Someone moved its run to another time (`detail` says to when).
    Rescheduled,
    /// Someone changed its priority (`detail` says to what).
    Prioritized,
    /// Someone deleted it (a live one is cancelled first, and has that event too).
    Deleted,
    /// Someone changed a queue's settings: paused or resumed it, or set a limit, rate or aging (`detail` says
    /// what). Names the queue, no job.
    QueueChanged,
    /// Scheduled jobs of a queue came due and are ready (one row per queue and pass; `detail` says how many).
    /// Names the queue, no job.
    Promoted,
    /// A change was made through the server with a token, or SQL was run: `detail` names the token and the
    /// request (`token "ops": POST /v1/jobs/7/cancel`); the job or queue it named, if any.
    Audit,
    /// Its handler recorded a step of its run (`detail` names the step).
    StepRecorded,
    /// Its handler slept: it gave up its worker until a time (`detail` says which step, and until when).
    Suspended,
    /// A signal it waited for came (`detail` names the step and the key): the job is ready to run again, or
    /// received the signal at once, when it was kept before the job waited.
    SignalReceived,
    /// An event of a kind this version does not know, written by a newer Cairn on the same database (a cluster in
    /// the middle of an upgrade): read and passed on as it is, never written. Not in [`ActivityKind::ALL`].
    Unknown,
}

/// A worker that gives no sign of life (a dequeue, even a waiting one, or a heartbeat) for this long counts as
/// lost. Longer than a long poll (a day at most, but servers cap it at a minute by default) is not needed: a
/// waiting worker is seen when its poll starts.
pub const WORKER_LOST_AFTER: std::time::Duration = std::time::Duration::from_secs(5 * 60);

impl ActivityKind {
    /// Every kind.
    pub const ALL: [ActivityKind; 24] = [
        ActivityKind::Added,
        ActivityKind::Debounced,
        ActivityKind::Started,
        ActivityKind::HeartbeatLost,
        ActivityKind::Retried,
        ActivityKind::Finished,
        ActivityKind::Failed,
        ActivityKind::Cancelled,
        ActivityKind::Released,
        ActivityKind::Requeued,
        ActivityKind::Unfailed,
        ActivityKind::WorkerStarted,
        ActivityKind::WorkerStopped,
        ActivityKind::WorkerLost,
        ActivityKind::Moved,
        ActivityKind::Rescheduled,
        ActivityKind::Prioritized,
        ActivityKind::Deleted,
        ActivityKind::QueueChanged,
        ActivityKind::Promoted,
        ActivityKind::Audit,
        ActivityKind::StepRecorded,
        ActivityKind::Suspended,
        ActivityKind::SignalReceived,
    ];

    /// The name as stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            ActivityKind::Added => "added",
            ActivityKind::Debounced => "debounced",
            ActivityKind::Started => "started",
            ActivityKind::HeartbeatLost => "heartbeat_lost",
            ActivityKind::Retried => "retried",
            ActivityKind::Finished => "finished",
            ActivityKind::Failed => "failed",
            ActivityKind::Cancelled => "cancelled",
            ActivityKind::Released => "released",
            ActivityKind::Requeued => "requeued",
            ActivityKind::Unfailed => "unfailed",
            ActivityKind::WorkerStarted => "worker_started",
            ActivityKind::WorkerStopped => "worker_stopped",
            ActivityKind::WorkerLost => "worker_lost",
            ActivityKind::Moved => "moved",
            ActivityKind::Rescheduled => "rescheduled",
            ActivityKind::Prioritized => "prioritized",
            ActivityKind::Deleted => "deleted",
            ActivityKind::QueueChanged => "queue_changed",
            ActivityKind::Promoted => "promoted",
            ActivityKind::Audit => "audit",
            ActivityKind::StepRecorded => "step_recorded",
            ActivityKind::Suspended => "suspended",
            ActivityKind::SignalReceived => "signal_received",
            ActivityKind::Unknown => "unknown",
        }
    }

    /// The kind named `name`.
    pub fn parse(name: &str) -> Option<ActivityKind> {
        ActivityKind::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

impl std::fmt::Display for ActivityKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One transition, as recorded during the transaction.
#[derive(Debug, Clone)]
struct Recorded {
    at: i64,
    kind: ActivityKind,
    job: Option<i64>,
    queue: Option<String>,
    name: Option<String>,
    worker: Option<String>,
    detail: Option<String>,
    /// ready → started, for a start.
    wait_ms: Option<i64>,
    /// started → ended, for an attempt its worker ended (finished, retried or failed by the worker).
    run_ms: Option<i64>,
    /// added → finished or failed for good.
    service_ms: Option<i64>,
}

impl Recorded {
    fn new(at: i64, kind: ActivityKind) -> Recorded {
        Recorded {
            at,
            kind,
            job: None,
            queue: None,
            name: None,
            worker: None,
            detail: None,
            wait_ms: None,
            run_ms: None,
            service_ms: None,
        }
    }
}

/// A job as the log names it.
pub(crate) struct JobRef<'a> {
    pub id: i64,
    pub queue: &'a str,
    pub name: &'a str,
}

impl<'a> From<&'a HeldJob> for JobRef<'a> {
    fn from(held: &'a HeldJob) -> Self {
        JobRef {
            id: held.id.0,
            queue: &held.queue,
            name: &held.name,
        }
    }
}

/// What the current transaction did, to write at its end.
#[derive(Debug, Default)]
pub(crate) struct EventLog {
    events: Vec<Recorded>,
    /// (worker, from, to): a stretch of time a worker was there.
    presence: Vec<(String, i64, i64)>,
}

/// A point in an [`EventLog`] to go back to.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Mark(usize, usize);

impl EventLog {
    pub fn mark(&self) -> Mark {
        Mark(self.events.len(), self.presence.len())
    }

    /// Forgets what was recorded after `mark` (the operation it belonged to was rolled back).
    pub fn undo_to(&mut self, mark: Mark) {
        self.events.truncate(mark.0);
        self.presence.truncate(mark.1);
    }

    /// Forgets everything (the transaction was rolled back).
    pub fn clear(&mut self) {
        self.events.clear();
        self.presence.clear();
    }

    /// A job transition, with an optional worker and detail.
    pub fn job(
        &mut self,
        at: i64,
        kind: ActivityKind,
        job: JobRef<'_>,
        worker: Option<&str>,
        detail: Option<&str>,
    ) {
        let mut event = Recorded::new(at, kind);
        event.job = Some(job.id);
        event.queue = Some(job.queue.to_owned());
        event.name = Some(job.name.to_owned());
        event.worker = worker.map(str::to_owned);
        event.detail = detail.map(str::to_owned);
        self.events.push(event);
    }

    /// A worker took a job that was ready since `ready_at`.
    pub fn started(&mut self, at: i64, job: JobRef<'_>, worker: &str, ready_at: i64) {
        self.job(at, ActivityKind::Started, job, Some(worker), None);
        self.last().wait_ms = Some((at - ready_at).max(0));
    }

    /// Sets the detail of the event just recorded.
    pub fn last_detail(&mut self, detail: String) {
        self.last().detail = Some(detail);
    }

    /// The held attempt ended as `kind` (finished, retried or failed), ended by its worker when `by_worker` (its
    /// run time counts then; not after a lost lease). `final_end`: the job has ended (finished or failed for good),
    /// so its service time counts.
    pub fn attempt_ended(
        &mut self,
        at: i64,
        kind: ActivityKind,
        held: &HeldJob,
        by_worker: bool,
        final_end: bool,
        detail: Option<&str>,
    ) {
        self.job(at, kind, held.into(), Some(&held.worker), detail);
        let event = self.last();
        if by_worker && held.attempt_started_at > 0 {
            event.run_ms = Some((at - held.attempt_started_at).max(0));
        }
        if final_end {
            // A recurring job's run is added at its slot; any other job when it was created.
            let added = if held.schedule.is_some() {
                held.slot_at
            } else {
                held.created_at
            };
            event.service_ms = Some((at - added).max(0));
        }
    }

    /// A transition that names no job (unfail of a group) or only a worker.
    pub fn other(
        &mut self,
        at: i64,
        kind: ActivityKind,
        queue: Option<&str>,
        worker: Option<&str>,
        detail: Option<&str>,
    ) {
        let mut event = Recorded::new(at, kind);
        event.queue = queue.map(str::to_owned);
        event.worker = worker.map(str::to_owned);
        event.detail = detail.map(str::to_owned);
        self.events.push(event);
    }

    /// A change made through the server (see [`ActivityKind::Audit`]).
    pub fn audit(&mut self, at: i64, job: Option<i64>, queue: Option<&str>, detail: &str) {
        let mut event = Recorded::new(at, ActivityKind::Audit);
        event.job = job;
        event.queue = queue.map(str::to_owned);
        event.detail = Some(detail.to_owned());
        self.events.push(event);
    }

    /// `worker` was there from `from` to `to`.
    pub fn present(&mut self, worker: &str, from: i64, to: i64) {
        if to > from {
            self.presence.push((worker.to_owned(), from, to));
        }
    }

    fn last(&mut self) -> &mut Recorded {
        self.events.last_mut().expect("just pushed")
    }

    /// Writes the activity rows and adds the statistics, then forgets them. Returns the totals, for the metrics
    /// the queue keeps in memory once the transaction commits. Where nodes share the database, `node` is the
    /// writer's node, which adds to statistics rows of its own: rows that every node added to were a lock each
    /// commit waited on. The statistics and the totals count each job under its name's family (`families`). Each
    /// database writes the rows its own way (`store/*/activity.rs`).
    pub fn flush(
        &mut self,
        db: &Db<'_>,
        node: Option<&str>,
        families: &NameFamilies,
    ) -> Result<BatchTotals> {
        if self.events.is_empty() && self.presence.is_empty() {
            return Ok(BatchTotals::default());
        }
        // Keyed by borrowed names while counting; owned once per queue and name at the end.
        let mut per_job: HashMap<(&str, &str), JobTotals> = HashMap::new();
        let mut minutes: HashMap<(i64, &str, &str), Counts> = HashMap::new();
        let mut histogram: HashMap<(i64, &str, &str, &'static str, i64), i64> = HashMap::new();
        // (hour, worker, queue or "" for presence) → (present ms, busy ms, attempts): one upsert per key.
        let mut workers: HashMap<(i64, &str, &str), (i64, i64, i64)> = HashMap::new();
        for e in &self.events {
            let (Some(queue), Some(name)) = (e.queue.as_deref(), e.name.as_deref()) else {
                continue;
            };
            let name = families.family(name);
            let counts = minutes
                .entry((floor(e.at, MINUTE), queue, name))
                .or_default();
            counts.count(e.kind);
            let hour = floor(e.at, HOUR);
            if let Some(wait) = e.wait_ms {
                counts.wait.add(wait);
                *histogram
                    .entry((hour, queue, name, "wait", bucket(wait)))
                    .or_default() += 1;
            }
            if let Some(run) = e.run_ms {
                counts.run.add(run);
                *histogram
                    .entry((hour, queue, name, "run", bucket(run)))
                    .or_default() += 1;
                if let Some(worker) = e.worker.as_deref() {
                    // Each hour the attempt ran in gets its share, as presence does; the attempt counts where
                    // it ended.
                    for (in_hour, ms) in by_hour(e.at - run, e.at) {
                        workers.entry((in_hour, worker, queue)).or_default().1 += ms;
                    }
                    workers.entry((hour, worker, queue)).or_default().2 += 1;
                }
            }
            if let Some(service) = e.service_ms {
                counts.service.add(service);
            }
            per_job.entry((queue, name)).or_default().add(e);
        }
        for (worker, from, to) in &self.presence {
            for (hour, ms) in by_hour(*from, *to) {
                workers.entry((hour, worker.as_str(), "")).or_default().0 += ms;
            }
        }
        let mut minute_rows = Vec::with_capacity(minutes.len() * 22);
        for (&key, counts) in &minutes {
            minute_values(&mut minute_rows, key, counts);
        }
        let mut histogram_rows = Vec::with_capacity(histogram.len() * 6);
        for ((hour, queue, name, metric, bucket), count) in &histogram {
            histogram_rows.extend([
                hour.to_value(),
                queue.to_value(),
                name.to_value(),
                metric.to_value(),
                bucket.to_value(),
                count.to_value(),
            ]);
        }
        let mut worker_rows = Vec::with_capacity(workers.len() * 6);
        for ((hour, worker, queue), (present, busy, attempts)) in &workers {
            worker_rows.extend([
                hour.to_value(),
                worker.to_value(),
                queue.to_value(),
                present.to_value(),
                busy.to_value(),
                attempts.to_value(),
            ]);
        }
        let ended_jobs: Vec<i64> = self
            .events
            .iter()
            .filter(|e| {
                matches!(
                    e.kind,
                    ActivityKind::Finished | ActivityKind::Failed | ActivityKind::Cancelled
                )
            })
            .filter_map(|e| e.job)
            .collect();
        let rows = ActivityRows {
            activity: activity_values(&self.events),
            minutes: minute_rows,
            histograms: histogram_rows,
            worker_hours: worker_rows,
            ended_jobs: &ended_jobs,
        };
        db.dialect()
            .write_activity(db, rows, node.unwrap_or_default())?;
        let totals = BatchTotals {
            wrote_events: !self.events.is_empty(),
            ended_jobs,
            jobs: per_job
                .into_iter()
                .map(|((queue, name), t)| ((queue.to_owned(), name.to_owned()), t))
                .collect(),
        };
        self.clear();
        Ok(totals)
    }
}

const MINUTE: i64 = 60_000;
const HOUR: i64 = 3_600_000;
const DAY: i64 = 24 * HOUR;

/// The start of the `unit`-long period holding `at`.
fn floor(at: i64, unit: i64) -> i64 {
    at.div_euclid(unit) * unit
}

/// The stretch from `from` to `to` (ms) cut at hour boundaries: (the hour's start, how much of it), so that each
/// hour gets its share of a worker's presence or of a long attempt.
fn by_hour(from: i64, to: i64) -> impl Iterator<Item = (i64, i64)> {
    let mut start = from;
    std::iter::from_fn(move || {
        (start < to).then(|| {
            let hour = floor(start, HOUR);
            let end = to.min(hour + HOUR);
            let slice = (hour, end - start);
            start = end;
            slice
        })
    })
}

/// The histogram bucket of a duration, as its lower bound: qless's resolution (seconds under a minute, minutes
/// under an hour, hours under a day, then days).
pub(crate) fn bucket(ms: i64) -> i64 {
    let unit = match ms {
        ..MINUTE => 1000,
        MINUTE..HOUR => MINUTE,
        HOUR..DAY => HOUR,
        _ => DAY,
    };
    floor(ms.max(0), unit)
}

/// The upper bound of the bucket whose lower bound is `lower`.
pub(crate) fn bucket_end(lower: i64) -> i64 {
    lower
        + match lower {
            ..MINUTE => 1000,
            MINUTE..HOUR => MINUTE,
            HOUR..DAY => HOUR,
            _ => DAY,
        }
}

/// count, sum, sum of squares, min and max of some durations.
#[derive(Debug, Default, Clone, Copy)]
struct Moments {
    count: i64,
    sum: f64,
    sumsq: f64,
    min: Option<i64>,
    max: Option<i64>,
}

impl Moments {
    fn add(&mut self, ms: i64) {
        self.count += 1;
        self.sum += ms as f64;
        self.sumsq += (ms as f64) * (ms as f64);
        self.min = Some(self.min.map_or(ms, |m| m.min(ms)));
        self.max = Some(self.max.map_or(ms, |m| m.max(ms)));
    }
}

/// One minute's counts for one queue and name.
#[derive(Debug, Default)]
struct Counts {
    added: i64,
    started: i64,
    finished: i64,
    retried: i64,
    failed: i64,
    wait: Moments,
    run: Moments,
    service: Moments,
}

impl Counts {
    fn count(&mut self, kind: ActivityKind) {
        match kind {
            ActivityKind::Added => self.added += 1,
            ActivityKind::Started => self.started += 1,
            ActivityKind::Finished => self.finished += 1,
            ActivityKind::Retried => self.retried += 1,
            ActivityKind::Failed => self.failed += 1,
            _ => {}
        }
    }
}

/// What one transaction added, per queue and name: for the in-memory metrics.
#[derive(Debug, Default)]
pub(crate) struct BatchTotals {
    pub jobs: HashMap<(String, String), JobTotals>,
    /// The jobs it completed, failed or cancelled (some may run again: a recurring job, a step that went on), for
    /// whoever waits for them to end.
    pub ended_jobs: Vec<i64>,
    /// Whether it wrote events to the activity log, for the event stream.
    pub wrote_events: bool,
}

impl BatchTotals {
    /// Jobs the batch completed or cancelled: what retention deletes once they are many.
    pub fn ended(&self) -> u64 {
        let index = |kind| {
            ActivityKind::ALL
                .iter()
                .position(|k| *k == kind)
                .expect("every kind is in ALL")
        };
        let (finished, cancelled) = (
            index(ActivityKind::Finished),
            index(ActivityKind::Cancelled),
        );
        self.jobs
            .values()
            .map(|t| t.counts[finished] + t.counts[cancelled])
            .sum()
    }
}

/// Transition counts and observed durations of one queue and name.
#[derive(Debug, Default, Clone)]
pub(crate) struct JobTotals {
    /// Counts by kind, in [`ActivityKind::ALL`] order.
    pub counts: [u64; ActivityKind::ALL.len()],
    pub wait_ms: Vec<i64>,
    pub run_ms: Vec<i64>,
}

impl JobTotals {
    fn add(&mut self, e: &Recorded) {
        let index = ActivityKind::ALL
            .iter()
            .position(|k| *k == e.kind)
            .expect("every kind is in ALL");
        self.counts[index] += 1;
        self.wait_ms.extend(e.wait_ms);
        self.run_ms.extend(e.run_ms);
    }
}

/// The values of `events`' activity rows, seven per row, in the order of [`ActivityRows::activity`].
fn activity_values(events: &[Recorded]) -> Vec<Value<'_>> {
    let mut values = Vec::with_capacity(events.len() * 7);
    for e in events {
        values.extend([
            e.at.to_value(),
            e.kind.as_str().to_value(),
            e.job.to_value(),
            e.queue.as_deref().to_value(),
            e.name.as_deref().to_value(),
            e.worker.as_deref().to_value(),
            e.detail.as_deref().to_value(),
        ]);
    }
    values
}

/// A minute's values, in the order of [`minute_columns!`](crate::store::activity::minute_columns).
fn minute_values<'v>(
    values: &mut Vec<Value<'v>>,
    (minute, queue, name): (i64, &'v str, &'v str),
    c: &Counts,
) {
    values.extend([
        minute.to_value(),
        queue.to_value(),
        name.to_value(),
        c.added.to_value(),
        c.started.to_value(),
        c.finished.to_value(),
        c.retried.to_value(),
        c.failed.to_value(),
        c.wait.count.to_value(),
        c.wait.sum.to_value(),
        c.wait.sumsq.to_value(),
        c.wait.min.to_value(),
        c.wait.max.to_value(),
        c.run.count.to_value(),
        c.run.sum.to_value(),
        c.run.sumsq.to_value(),
        c.run.min.to_value(),
        c.run.max.to_value(),
        c.service.count.to_value(),
        c.service.sum.to_value(),
        c.service.min.to_value(),
        c.service.max.to_value(),
    ]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stretches_are_cut_at_hour_boundaries() {
        let slices: Vec<_> = by_hour(HOUR - 10, 2 * HOUR + 5).collect();
        assert_eq!(slices, [(0, 10), (HOUR, HOUR), (2 * HOUR, 5)]);
        assert_eq!(by_hour(7, 7).count(), 0);
    }

    #[test]
    fn buckets_have_qless_resolution() {
        assert_eq!(bucket(0), 0);
        assert_eq!(bucket(999), 0);
        assert_eq!(bucket(1000), 1000);
        assert_eq!(bucket(59_999), 59_000);
        assert_eq!(bucket(60_000), 60_000);
        assert_eq!(bucket(119_999), 60_000);
        assert_eq!(bucket(HOUR - 1), HOUR - MINUTE);
        assert_eq!(bucket(HOUR + 5), HOUR);
        assert_eq!(bucket(DAY * 3 + 7), DAY * 3);
        assert_eq!(bucket(-5), 0);
        for lower in [0, 59_000, 60_000, HOUR - MINUTE, HOUR, DAY - HOUR, DAY] {
            assert_eq!(bucket(bucket_end(lower) - 1), lower);
            assert_eq!(bucket(bucket_end(lower)), bucket_end(lower));
        }
    }
}
