//! The event stream ([`Queue::events`](crate::Queue::events)): the activity log's events as they are committed,
//! to follow the queue without polling it, resumable from any event still retained.
//!
//! One tail per queue reads the log on (one statement, whoever listens) and hands each event to every
//! subscription through a broadcast channel: a thousand idle subscriptions cost a receiver each, not a query each.
//! It reads when the writer says it committed events (once durable), and on PostgreSQL also every
//! [`FOLLOW_OTHER_NODES`], for the events other nodes wrote; it runs only while someone listens.
//!
//! On PostgreSQL, ids come from a sequence in the order transactions asked, not the order they committed: a
//! transaction still open may hold a lower id than one committed. The tail hands out events in id order and only
//! up to the first id it has not seen; an id missing for longer than [`GAP_GRACE`] is taken as a transaction that
//! rolled back (its id is never used) and passed over. A subscription that falls behind the channel reads what it
//! missed from the log, up to where the tail stands, and goes on from the channel.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::{Notify, broadcast, watch};

use crate::activity::{ActivityEvent, after, newest, oldest};
use crate::error::{Error, Result};
use crate::names::JobId;
use crate::names::NamePattern;
use crate::ops::events::ActivityKind;

/// How often the tail looks for other nodes' events on PostgreSQL while someone listens.
pub const FOLLOW_OTHER_NODES: Duration = Duration::from_millis(250);

/// How long a missing id holds back the events after it (PostgreSQL): longer than a writer's transaction between
/// taking ids and committing them, short enough that a rolled-back id delays little.
pub const GAP_GRACE: Duration = Duration::from_secs(2);

/// Events the channel holds for subscriptions that read slower than they come; one further behind reads the log.
const CHANNEL: usize = 4096;

/// Events one read of the log brings.
const READ: u32 = 1000;

/// How far below the newest id the tail starts after nobody listened: ids that transactions still open may hold.
const IN_FLIGHT: i64 = 1000;

/// Where a subscription starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventsFrom {
    /// With the next event committed.
    Now,
    /// With the event after this id (an SSE client's `Last-Event-ID`): every event still retained after it.
    After(i64),
}

/// A resumed subscription's position was before the oldest event the log still holds: the events between may have
/// been pruned by retention (or never committed), and the subscription goes on from `oldest`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventsMissed {
    /// Where the subscription asked to resume after.
    pub after: i64,
    /// The oldest event still retained, the first it gets.
    pub oldest: i64,
}

/// Which events a subscription gets. Filters combine with AND; the default gets every event.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventFilter {
    /// Only events of jobs in this queue (or, for an unfail, the queue the jobs went to).
    pub queue: Option<String>,
    /// Only events of jobs whose name matches this GLOB.
    pub name: Option<String>,
    /// Only this job's events.
    pub job: Option<JobId>,
    /// Only events of these kinds; every kind when empty.
    pub kinds: Vec<ActivityKind>,
}

/// A validated [`EventFilter`].
#[derive(Debug, Clone)]
struct Matcher {
    queue: Option<String>,
    name: Option<NamePattern>,
    job: Option<JobId>,
    kinds: Vec<ActivityKind>,
}

impl Matcher {
    fn new(filter: EventFilter) -> Result<Matcher> {
        Ok(Matcher {
            name: filter
                .name
                .as_deref()
                .map(NamePattern::parse)
                .transpose()
                .map_err(|e| e.renamed("name"))?,
            queue: filter.queue,
            job: filter.job,
            kinds: filter.kinds,
        })
    }

    fn matches(&self, e: &ActivityEvent) -> bool {
        self.queue
            .as_deref()
            .is_none_or(|q| e.queue.as_deref() == Some(q))
            && self.job.is_none_or(|j| e.job == Some(j))
            && self.kinds.is_empty() | self.kinds.contains(&e.kind)
            && self
                .name
                .as_ref()
                .is_none_or(|p| e.name.as_deref().is_some_and(|n| p.matches(n)))
    }
}

/// The queue's tail of the activity log, shared by its subscriptions.
pub(crate) struct Tail {
    events: broadcast::Sender<Arc<ActivityEvent>>,
    /// The id of the last event handed out: every event up to it went to the channel (or was passed over as
    /// rolled back).
    handed: AtomicI64,
    started: AtomicBool,
    /// Rung by the writer after each commit that wrote events (a counter; the value means nothing).
    bell: watch::Sender<u64>,
    /// Wakes the tail when the first subscription comes.
    listener: Notify,
    /// True once the queue closed: every subscription ends.
    closed: watch::Sender<bool>,
}

impl Tail {
    pub fn new() -> Arc<Tail> {
        Arc::new(Tail {
            events: broadcast::channel(CHANNEL).0,
            handed: AtomicI64::new(0),
            started: AtomicBool::new(false),
            bell: watch::channel(0).0,
            listener: Notify::new(),
            closed: watch::channel(false).0,
        })
    }

    /// The queue closed: every subscription ends with [`ErrorKind::Closed`](crate::ErrorKind::Closed).
    pub fn close(&self) {
        self.closed.send_replace(true);
    }

    /// The writer committed events (durably, when the batch had to be).
    pub fn ring(&self) {
        self.bell.send_modify(|n| *n = n.wrapping_add(1));
    }
}

/// The readers the tail and the subscriptions read the log with; gone once the queue is.
type Log = Weak<crate::store::readers::Readers>;

/// The events after `id`, oldest first, at most [`READ`].
async fn read_after(log: &Log, id: i64) -> Result<Vec<ActivityEvent>> {
    let readers = log.upgrade().ok_or_else(Error::closed)?;
    readers.read(move |db| after(db, id, READ)).await
}

/// Refuses a resume point no subscriber of this log can have seen: below 0, or after the newest event (an id from
/// another server's log, or a database restored from an older copy), where the stream would stay silent until ids
/// caught up with it.
fn check_resume_point(after: i64, newest: i64) -> Result<()> {
    if after < 0 {
        return Err(Error::invalid(
            "after",
            format!("must be an event's id, 0 or more (0 for every event kept), got {after}"),
        ));
    }
    if after > newest {
        return Err(Error::invalid(
            "after",
            format!(
                "{after} is after the newest event, {newest}: it comes from another server's log (or this database was \
                 restored); start again without it, or after {newest}"
            ),
        ));
    }
    Ok(())
}

/// The oldest event's id still retained.
async fn read_oldest(log: &Log) -> Result<Option<i64>> {
    let readers = log.upgrade().ok_or_else(Error::closed)?;
    readers.read(oldest).await
}

/// The newest event's id.
async fn read_newest(log: &Log) -> Result<i64> {
    let readers = log.upgrade().ok_or_else(Error::closed)?;
    readers.read(newest).await
}

/// Starts the tail's task once (on the caller's runtime), from the newest event at that moment. Started again by the
/// next subscription if that runtime shuts down under it.
pub(crate) async fn start(tail: &Arc<Tail>, log: Log, shared: bool) -> Result<()> {
    if tail.started.swap(true, Ordering::SeqCst) {
        return Ok(());
    }
    // Listening before the log is read: a commit between the two rings a bell this task hears.
    let mut bell = tail.bell.subscribe();
    match read_newest(&log).await {
        Ok(id) => {
            tail.handed.fetch_max(id, Ordering::SeqCst);
        }
        Err(e) => {
            tail.started.store(false, Ordering::SeqCst);
            return Err(e);
        }
    }
    bell.mark_changed();
    tokio::spawn(follow(Running(tail.clone()), bell, log, shared));
    Ok(())
}

/// The tail's task while it runs: dropped with it (also by a runtime shutting down), it lets the next
/// subscription start another.
struct Running(Arc<Tail>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.started.store(false, Ordering::SeqCst);
    }
}

/// The tail's task: while someone listens, reads the log on at each ring of the writer's bell (and, where nodes
/// share the database (`shared`), every [`FOLLOW_OTHER_NODES`]) and hands the events out in order. Ends when the
/// queue closes.
async fn follow(running: Running, mut bell: watch::Receiver<u64>, log: Log, shared: bool) {
    let t = &running.0;
    let mut closed = t.closed.subscribe();
    // The ids found missing, as ranges (first, last, when first seen): the events after one wait for it until
    // `GAP_GRACE` after it was first seen (see the module's documentation).
    let mut gaps: Vec<(i64, i64, tokio::time::Instant)> = Vec::new();
    loop {
        if *closed.borrow() {
            return;
        }
        if t.events.receiver_count() == 0 {
            tokio::select! {
                () = t.listener.notified() => {}
                _ = closed.changed() => {}
            }
            // Nobody listened meanwhile: the tail goes on from near the newest event (a subscription that wants
            // older ones reads them from the log), short of it by as many ids as transactions still open may hold,
            // which the gaps then wait for.
            if let Ok(newest) = read_newest(&log).await {
                t.handed
                    .fetch_max(newest.saturating_sub(IN_FLIGHT), Ordering::SeqCst);
            }
            gaps.clear();
            continue;
        }
        let poll = async {
            if shared || !gaps.is_empty() {
                tokio::time::sleep(FOLLOW_OTHER_NODES).await;
            } else {
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            rung = bell.changed() => if rung.is_err() { return },
            () = poll => {}
            _ = closed.changed() => continue,
        }
        loop {
            let from = t.handed.load(Ordering::SeqCst);
            let events = match read_after(&log, from).await {
                Ok(events) => events,
                Err(e) if e.kind() == crate::ErrorKind::Closed => return,
                Err(e) => {
                    tracing::warn!(error = %e, "the event stream could not read the activity log; trying again");
                    break;
                }
            };
            let full = events.len() == READ as usize;
            let now = tokio::time::Instant::now();
            // Every range missing among what was read, with when it was first seen.
            let mut expected = from + 1;
            for event in &events {
                if event.id > expected {
                    let (first, last) = (expected, event.id - 1);
                    if !gaps.iter().any(|&(f, l, _)| f == first && l == last) {
                        gaps.push((first, last, now));
                    }
                }
                expected = event.id + 1;
            }
            let mut handed = from;
            let mut waiting = false;
            for event in events {
                if event.id > handed + 1 {
                    // A range missing: held back until it fills, or until it has been missing long enough to
                    // have rolled back.
                    let young = gaps.iter().any(|&(f, l, seen)| {
                        f <= handed + 1 && handed < l && seen.elapsed() < GAP_GRACE
                    });
                    if young {
                        waiting = true;
                        break;
                    }
                }
                handed = event.id;
                t.handed.store(handed, Ordering::SeqCst);
                // No receiver left is not an error: the next subscription starts from `handed`.
                let _ = t.events.send(Arc::new(event));
            }
            gaps.retain(|&(_, last, _)| last > handed);
            if !full || waiting {
                break;
            }
        }
    }
}

/// A subscription to the event stream; see [`Queue::events`](crate::Queue::events).
pub struct Events {
    tail: Arc<Tail>,
    log: Log,
    events: broadcast::Receiver<Arc<ActivityEvent>>,
    matcher: Matcher,
    /// The id of the last event this subscription went past (handed to the caller or filtered out).
    last: i64,
    /// Events read from the log to catch up, oldest first.
    backlog: VecDeque<ActivityEvent>,
    closed: watch::Receiver<bool>,
    missed: Option<EventsMissed>,
}

impl std::fmt::Debug for Events {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Events")
            .field("last", &self.last)
            .field("matcher", &self.matcher)
            .finish_non_exhaustive()
    }
}

impl Events {
    pub(crate) async fn new(
        tail: Arc<Tail>,
        log: Log,
        from: EventsFrom,
        filter: EventFilter,
    ) -> Result<Events> {
        let matcher = Matcher::new(filter)?;
        // Subscribed before reading where the log stands: nothing handed out after that is missed.
        let events = tail.events.subscribe();
        let closed = tail.closed.subscribe();
        tail.listener.notify_one();
        let (last, missed) = match from {
            EventsFrom::Now => (read_newest(&log).await?, None),
            EventsFrom::After(id) => {
                check_resume_point(id, read_newest(&log).await?)?;
                let missed = read_oldest(&log)
                    .await?
                    .filter(|oldest| *oldest > id.saturating_add(1))
                    .map(|oldest| EventsMissed { after: id, oldest });
                (id, missed)
            }
        };
        Ok(Events {
            tail,
            log,
            events,
            matcher,
            last,
            backlog: VecDeque::new(),
            closed,
            missed,
        })
    }

    /// Whether a resumed subscription starts past events the log no longer holds (see [`EventsMissed`]).
    pub fn missed(&self) -> Option<EventsMissed> {
        self.missed
    }

    /// The id of the last event this subscription went past: where a new one would resume.
    pub fn position(&self) -> i64 {
        self.last
    }

    /// The next event the filter lets through, in the log's order, waiting as long as it takes.
    ///
    /// # Errors
    /// [`ErrorKind::Closed`](crate::ErrorKind::Closed) once the queue closes; storage errors reading the log to
    /// catch up.
    pub async fn next(&mut self) -> Result<ActivityEvent> {
        loop {
            if *self.closed.borrow() {
                return Err(Error::closed());
            }
            if let Some(event) = self.backlog.pop_front() {
                self.last = event.id;
                if self.matcher.matches(&event) {
                    return Ok(event);
                }
                continue;
            }
            // Behind where the tail stands (a resumed subscription, or one the channel left behind): from the log.
            if self.last < self.tail.handed.load(Ordering::SeqCst) {
                self.catch_up().await?;
                if !self.backlog.is_empty() {
                    continue;
                }
            }
            let received = tokio::select! {
                received = self.events.recv() => received,
                _ = self.closed.changed() => continue,
            };
            match received {
                Ok(event) if event.id <= self.last => {}
                Ok(event) => {
                    self.last = event.id;
                    if self.matcher.matches(&event) {
                        return Ok((*event).clone());
                    }
                }
                // The channel moved on without this subscription: the log has what it missed.
                Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => return Err(Error::closed()),
            }
        }
    }

    /// Reads the log after `last`, up to where the tail stands (never past it: what lies beyond may still have
    /// gaps that fill).
    async fn catch_up(&mut self) -> Result<()> {
        let upto = self.tail.handed.load(Ordering::SeqCst);
        let events = read_after(&self.log, self.last).await?;
        self.backlog
            .extend(events.into_iter().take_while(|e| e.id <= upto));
        if self.backlog.is_empty() {
            // Nothing retained between here and the tail (pruned, or rolled back): go on from the tail.
            self.last = upto;
        }
        Ok(())
    }
}
