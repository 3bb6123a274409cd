//! Queue control: [`PauseQueue`] (a paused queue hands out nothing; everything else works) and the per-queue
//! counts of [`QueueStats`].

use std::collections::BTreeMap;

use crate::store::db::{Db, Params, Sql, params};

use crate::error::Result;
use crate::job::JobState;
use crate::names::QueueName;
use crate::ops::config::{Defaults, RuntimeConfig};
use crate::ops::{Operation, WriteCtx, parse_stored_state, queue_changed};

/// Pauses a queue. A paused queue's jobs stay where they are: they are enqueued, scheduled, finished, cancelled as
/// usual, but no worker is handed one until the queue is resumed ([`ResumeQueue`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PauseQueue {
    /// The queue.
    pub queue: String,
}

/// Resumes a paused queue: its ready jobs go at once to the workers that wait.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResumeQueue {
    /// The queue.
    pub queue: String,
}

const SET_PAUSED: Sql = Sql::both(
    "INSERT INTO queues (name, paused) VALUES ($1, $2) \
     ON CONFLICT (name) DO UPDATE SET paused = excluded.paused",
);

impl Operation for PauseQueue {
    type Output = ();

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<()> {
        set_paused(ctx, &self.queue, true)
    }
}

impl Operation for ResumeQueue {
    type Output = ();

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<()> {
        set_paused(ctx, &self.queue, false)
    }
}

fn set_paused(ctx: &mut WriteCtx<'_>, queue: &str, paused: bool) -> Result<()> {
    let queue = QueueName::parse(queue)?;
    ctx.db
        .execute(SET_PAUSED, &params![queue.as_str(), paused])?;
    ctx.settings.entry(queue.as_str()).paused = paused;
    if !paused {
        ctx.ready.mark(queue.as_str());
    }
    queue_changed(
        ctx,
        queue.as_str(),
        if paused { "paused" } else { "resumed" },
    );
    Ok(())
}

/// Sets or removes a queue's concurrency limit: at most `limit` of its jobs run at once, across all workers (a
/// claim takes fewer, or none, when the queue is at its limit). Lowering it below what runs now takes nothing
/// away: the queue hands out nothing until enough jobs end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitQueue {
    /// The queue.
    pub queue: String,
    /// The most of its jobs that may run at once; `None` for no limit.
    pub concurrency: Option<u32>,
}

const SET_CONCURRENCY: Sql = Sql::both(
    "INSERT INTO queues (name, concurrency) VALUES ($1, $2) \
     ON CONFLICT (name) DO UPDATE SET concurrency = excluded.concurrency",
);

impl Operation for LimitQueue {
    type Output = ();

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<()> {
        let queue = QueueName::parse(self.queue.as_str())?;
        if self.concurrency == Some(0) {
            return Err(crate::error::Error::invalid(
                "concurrency",
                "must be at least 1 (pause the queue to hand out nothing)",
            ));
        }
        ctx.db
            .execute(SET_CONCURRENCY, &params![queue.as_str(), self.concurrency])?;
        ctx.settings.entry(queue.as_str()).concurrency = self.concurrency;
        // A raised limit may let waiting workers in.
        ctx.ready.mark(queue.as_str());
        let detail = match self.concurrency {
            Some(n) => format!("concurrency {n}"),
            None => "no concurrency limit".to_owned(),
        };
        queue_changed(ctx, queue.as_str(), &detail);
        Ok(())
    }
}

/// Sets or removes a queue's limit per concurrency key: at most `limit` of its jobs with one key run at once,
/// across all workers and nodes, unless a job carries its own limit (see [`crate::Concurrency`]). Claims pass
/// over a key at its limit and take the jobs behind it. Lowering it takes nothing away from what runs now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitKeys {
    /// The queue.
    pub queue: String,
    /// The most jobs of one key that may run at once; `None` for no limit.
    pub limit: Option<u32>,
}

const SET_KEY_CONCURRENCY: Sql = Sql::both(
    "INSERT INTO queues (name, key_concurrency) VALUES ($1, $2) \
     ON CONFLICT (name) DO UPDATE SET key_concurrency = excluded.key_concurrency",
);

impl Operation for LimitKeys {
    type Output = ();

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<()> {
        let queue = QueueName::parse(self.queue.as_str())?;
        if let Some(limit) = self.limit
            && !(1..=crate::ops::limits::MAX_KEY_CONCURRENCY).contains(&limit)
        {
            return Err(crate::error::Error::invalid(
                "limit",
                format!(
                    "must be between 1 and {}, got {limit}",
                    crate::ops::limits::MAX_KEY_CONCURRENCY
                ),
            ));
        }
        // A limit per key is for keyed jobs: the queue's claims look at them from now on.
        if self.limit.is_some() {
            mark_keyed(ctx, queue.as_str())?;
        }
        ctx.db
            .execute(SET_KEY_CONCURRENCY, &params![queue.as_str(), self.limit])?;
        ctx.settings.entry(queue.as_str()).key_concurrency = self.limit;
        // A raised limit may let waiting workers in.
        ctx.ready.mark(queue.as_str());
        let detail = match self.limit {
            Some(n) => format!("concurrency per key {n}"),
            None => "no concurrency limit per key".to_owned(),
        };
        queue_changed(ctx, queue.as_str(), &detail);
        Ok(())
    }
}

/// The largest weight a concurrency key may have.
pub const MAX_KEY_WEIGHT: u32 = 1000;

/// Sets or removes a concurrency key's weight in a queue: a key of weight N takes up to N jobs per turn where the
/// others take one, so that among ready jobs of one priority it gets N times their share while it has jobs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WeighKey {
    /// The queue.
    pub queue: String,
    /// The key.
    pub key: String,
    /// Jobs per turn, 1 to [`MAX_KEY_WEIGHT`]; `None` for 1, the default.
    pub weight: Option<u32>,
}

const SET_KEY_WEIGHT: Sql = Sql::both(
    "INSERT INTO concurrency_key_weights (queue, key, weight) VALUES ($1, $2, $3) \
     ON CONFLICT (queue, key) DO UPDATE SET weight = excluded.weight",
);
const REMOVE_KEY_WEIGHT: Sql =
    Sql::both("DELETE FROM concurrency_key_weights WHERE queue = $1 AND key = $2");

impl Operation for WeighKey {
    type Output = ();

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<()> {
        let queue = QueueName::parse(self.queue.as_str())?;
        let key =
            crate::names::ConcurrencyKey::parse(self.key.as_str()).map_err(|e| e.renamed("key"))?;
        if let Some(weight) = self.weight
            && !(1..=MAX_KEY_WEIGHT).contains(&weight)
        {
            return Err(crate::error::Error::invalid(
                "weight",
                format!("must be between 1 and {MAX_KEY_WEIGHT}, got {weight}"),
            ));
        }
        if self.weight.is_some() {
            mark_keyed(ctx, queue.as_str())?;
        }
        match self.weight {
            Some(weight) => {
                ctx.db.execute(
                    SET_KEY_WEIGHT,
                    &params![queue.as_str(), key.as_str(), weight],
                )?;
                ctx.settings
                    .key_weights
                    .entry(queue.as_str().to_owned())
                    .or_default()
                    .insert(key.as_str().to_owned(), weight);
            }
            None => {
                ctx.db
                    .execute(REMOVE_KEY_WEIGHT, &params![queue.as_str(), key.as_str()])?;
                if let Some(weights) = ctx.settings.key_weights.get_mut(queue.as_str()) {
                    weights.remove(key.as_str());
                }
            }
        }
        // The other nodes load the weights again.
        ctx.settings.changed = true;
        Ok(())
    }
}

/// Marks `queue` as holding keyed jobs, once: from then on its claims look at keyed jobs too.
///
/// # Errors
/// [`crate::ErrorKind::InvalidState`] when the queue has priority aging: keys take turns among the jobs of one
/// level, and aging makes every job a level of its own.
pub(crate) fn mark_keyed(ctx: &mut WriteCtx<'_>, queue: &str) -> Result<()> {
    const SET_KEYED: Sql = Sql::both(
        "INSERT INTO queues (name, keyed) VALUES ($1, TRUE) \
         ON CONFLICT (name) DO UPDATE SET keyed = TRUE",
    );
    let settings = ctx.settings.get(queue);
    if settings.keyed {
        return Ok(());
    }
    if settings.aging_ms.is_some() {
        return Err(crate::error::Error::invalid_state(format!(
            "concurrency: queue {queue} has priority aging, and jobs with concurrency keys take turns by priority \
             level, which aging makes one per job; turn aging off (cairn queue aging {queue} --off) to use keys"
        )));
    }
    ctx.db.execute(SET_KEYED, &params![queue])?;
    ctx.settings.entry(queue).keyed = true;
    Ok(())
}

/// The queues' settings and the engine's options in force, as the writer keeps them in memory so that claims and
/// pushes read no table: loaded when the writer starts, changed by the operations that change them in the same
/// transaction, and loaded again after a transaction that rolled back.
#[derive(Debug, Clone)]
pub(crate) struct SettingsCache {
    queues: std::collections::HashMap<String, Settings>,
    /// The rate-limited queues' token buckets (in memory only: a restart starts them full).
    pub buckets: crate::ops::rate_limit::Buckets,
    /// The engine's options: the ones the queue was opened with, and those set at run time over them.
    pub config: RuntimeConfig,
    /// When each worker was last seen, as last written (see [`crate::ops::workers::seen`]).
    pub seen: std::collections::HashMap<String, crate::ops::workers::LastSeen>,
    /// Each keyed queue's last turn: the key it served last (empty for its jobs without a key), and how many jobs
    /// that turn has given (see `ops/claim/by_key.rs`). In memory only: a restart starts the turns over.
    pub turns: std::collections::HashMap<String, (String, u32)>,
    /// The weights of concurrency keys that have one, by queue then key (1 for the others).
    pub key_weights: std::collections::HashMap<String, std::collections::HashMap<String, u32>>,
    /// Whether the current transaction changed a setting or an option: on PostgreSQL, the other nodes are told
    /// to load theirs again when it commits.
    pub changed: bool,
}

const ALL_KEY_WEIGHTS: Sql = Sql::both("SELECT queue, key, weight FROM concurrency_key_weights");

const ALL_SETTINGS: Sql = Sql::both(
    "SELECT name, paused, concurrency, rate_jobs, rate_period_ms, aging_ms, key_concurrency, keyed FROM queues",
);

impl SettingsCache {
    pub fn load(db: &Db<'_>, defaults: &Defaults) -> Result<Self> {
        let queues = db.query(ALL_SETTINGS, &Params::NONE, |r| {
            Ok((
                r.get::<String>(0)?,
                Settings {
                    paused: r.get(1)?,
                    concurrency: r.get(2)?,
                    rate: crate::ops::rate_limit::RateLimit::from_columns(r.get(3)?, r.get(4)?),
                    aging_ms: r.get(5)?,
                    key_concurrency: r.get(6)?,
                    keyed: r.get(7)?,
                },
            ))
        })?;
        let mut key_weights: std::collections::HashMap<_, std::collections::HashMap<_, _>> =
            Default::default();
        for (queue, key, weight) in db.query(ALL_KEY_WEIGHTS, &Params::NONE, |r| {
            Ok((r.get::<String>(0)?, r.get::<String>(1)?, r.get::<u32>(2)?))
        })? {
            key_weights.entry(queue).or_default().insert(key, weight);
        }
        Ok(SettingsCache {
            key_weights,
            queues: queues.into_iter().collect(),
            buckets: Default::default(),
            config: RuntimeConfig::load(db, defaults)?,
            seen: Default::default(),
            turns: Default::default(),
            changed: false,
        })
    }

    /// Loads the settings again, keeping the token buckets.
    pub fn reload(&mut self, db: &Db<'_>) -> Result<()> {
        let fresh = SettingsCache::load(db, self.config.defaults())?;
        self.queues = fresh.queues;
        self.key_weights = fresh.key_weights;
        self.config = fresh.config;
        // What a rolled-back transaction wrote of workers did not happen: read it again when needed.
        self.seen.clear();
        Ok(())
    }

    /// The queues with a rate limit.
    pub fn rate_limited(&self) -> Vec<(String, crate::ops::rate_limit::RateLimit)> {
        self.queues
            .iter()
            .filter_map(|(queue, s)| s.rate.map(|rate| (queue.clone(), rate)))
            .collect()
    }

    /// The weight of concurrency key `key` in `queue`: jobs per turn.
    pub fn key_weight(&self, queue: &str, key: &str) -> u32 {
        self.key_weights
            .get(queue)
            .and_then(|weights| weights.get(key))
            .copied()
            .unwrap_or(1)
    }

    pub fn get(&self, queue: &str) -> Settings {
        self.queues.get(queue).copied().unwrap_or_default()
    }

    pub(crate) fn entry(&mut self, queue: &str) -> &mut Settings {
        self.changed = true;
        self.queues.entry(queue.to_owned()).or_default()
    }
}

/// A queue's settings as a claim needs them.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Settings {
    pub paused: bool,
    pub concurrency: Option<u32>,
    pub rate: Option<crate::ops::rate_limit::RateLimit>,
    /// Priority aging: one point per this many milliseconds of waiting (see [`crate::ops::aging`]).
    pub aging_ms: Option<i64>,
    /// The most jobs of one concurrency key that may run at once, unless a job says otherwise.
    pub key_concurrency: Option<u32>,
    /// Whether the queue has held keyed jobs: its claims then walk them (`ops/claim/by_key.rs`).
    pub keyed: bool,
}

const IS_PAUSED: Sql = Sql::both("SELECT paused FROM queues WHERE name = $1");

/// Whether a queue is paused, read from the table (for readers; the writer keeps a [`SettingsCache`]).
pub(crate) fn is_paused(db: &Db<'_>, queue: &str) -> Result<bool> {
    let paused: Option<bool> = db.query_row(IS_PAUSED, &params![queue], |r| r.get(0))?;
    Ok(paused.unwrap_or(false))
}

const RUNNING_IN_QUEUE: Sql = Sql {
    sqlite: "SELECT count(*) FROM jobs INDEXED BY jobs_leases WHERE state = 'running' AND queue = $1",
    postgres: "SELECT count(*) FROM jobs WHERE state = 'running' AND queue = $1",
};

/// How many more jobs of `queue` may start now, if it has a limit. Counts its running jobs by walking the running
/// jobs (as many as workers hold), only for a queue with a limit.
pub(crate) fn room(db: &Db<'_>, queue: &str, limit: Option<u32>) -> Result<Option<u32>> {
    let Some(limit) = limit else {
        return Ok(None);
    };
    let running: i64 = db.query_one(RUNNING_IN_QUEUE, &params![queue], |r| r.get(0))?;
    Ok(Some(
        u32::try_from((i64::from(limit) - running).max(0)).unwrap_or(0),
    ))
}

/// One queue's jobs, counted by state, and whether it is paused.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueStats {
    /// The queue.
    pub queue: String,
    /// Whether it hands out nothing for now.
    pub paused: bool,
    /// The most of its jobs that may run at once, if limited.
    pub concurrency: Option<u32>,
    /// How many of its jobs may start per period, if limited.
    pub rate_limit: Option<crate::ops::rate_limit::RateLimit>,
    /// With priority aging, a ready job gains one priority point per this much waiting.
    pub priority_aging: Option<std::time::Duration>,
    /// Jobs waiting for their `run_at`.
    pub scheduled: u64,
    /// Jobs ready to be taken.
    pub queued: u64,
    /// Jobs waiting on other jobs.
    pub waiting: u64,
    /// Of the scheduled and waiting jobs, those their handler suspended (a sleep, a wait for a signal or for its
    /// children), which hold no worker.
    pub suspended: u64,
    /// Jobs leased to a worker whose lease has not run out.
    pub running: u64,
    /// Jobs whose lease ran out and that the queue has not retried yet (their worker is lost or hung).
    pub stalled: u64,
    /// Failed jobs.
    pub failed: u64,
    /// Completed jobs (until retention deletes them).
    pub completed: u64,
    /// Cancelled jobs (until retention deletes them).
    pub cancelled: u64,
    /// The most jobs of one concurrency key that may run at once, unless a job says otherwise.
    pub key_concurrency: Option<u32>,
    /// Ready jobs whose key is at its limit: they wait for a job of their key to end.
    pub waiting_on_keys: u64,
    /// The concurrency keys with the most running jobs, then the most ready ones: at most [`TOP_KEYS`].
    pub top_keys: Vec<KeyStats>,
}

/// How many concurrency keys [`QueueStats::top_keys`] shows.
pub const TOP_KEYS: usize = 10;

/// One concurrency key of a queue: its running and ready jobs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyStats {
    /// The key.
    pub key: String,
    /// Its jobs leased to a worker.
    pub running: u64,
    /// Its jobs ready to be taken.
    pub queued: u64,
    /// The most of its jobs that may run at once, if limited: the smallest own limit among its ready jobs, else the
    /// queue's limit per key.
    pub limit: Option<u32>,
    /// Jobs it takes per turn (see [`WeighKey`]).
    pub weight: u32,
}

impl KeyStats {
    /// Whether the key is at its limit: its ready jobs wait for one of its jobs to end.
    pub fn is_full(&self) -> bool {
        self.limit
            .is_some_and(|limit| self.running >= u64::from(limit))
    }
}

pub(crate) const COUNT_BY_STATE: Sql = Sql::both(
    "SELECT queue, state, lease_expires_at <= $1, suspended_at IS NOT NULL, count(*) FROM jobs \
     GROUP BY queue, state, lease_expires_at <= $1, suspended_at IS NOT NULL",
);

const PAUSED_QUEUES: Sql = Sql::both(
    "SELECT name, paused, concurrency, rate_jobs, rate_period_ms, aging_ms, key_concurrency FROM queues",
);

/// Each concurrency key's running and ready jobs, with the smallest limit its ready jobs carry.
const KEY_COUNTS: Sql = Sql::both(
    "SELECT queue, concurrency_key, \
     sum(CASE WHEN state = 'running' THEN 1 ELSE 0 END), sum(CASE WHEN state = 'queued' THEN 1 ELSE 0 END), \
     min(CASE WHEN state = 'queued' THEN concurrency_limit END) \
     FROM jobs WHERE concurrency_key IS NOT NULL AND (state = 'running' OR state = 'queued') \
     GROUP BY queue, concurrency_key",
);

/// Every queue that has jobs or settings, by name, with its counts at `now_ms`. This reads every job: it is for
/// operators and dashboards, not for a hot path.
pub(crate) fn queue_stats(db: &Db<'_>, now_ms: i64) -> Result<Vec<QueueStats>> {
    let mut stats: BTreeMap<String, QueueStats> = BTreeMap::new();
    let counts = db.query(COUNT_BY_STATE, &params![now_ms], |row| {
        Ok((
            row.get::<String>(0)?,
            parse_stored_state(&row.get::<String>(1)?)?,
            row.get::<Option<bool>>(2)?,
            row.get::<bool>(3)?,
            row.get::<i64>(4)?.max(0) as u64,
        ))
    })?;
    for (queue, state, expired, suspended, count) in counts {
        let s = stats.entry(queue.clone()).or_insert_with(|| QueueStats {
            queue,
            ..QueueStats::default()
        });
        if suspended && matches!(state, JobState::Scheduled | JobState::Waiting) {
            s.suspended += count;
        }
        match state {
            JobState::Scheduled => s.scheduled += count,
            JobState::Queued => s.queued += count,
            JobState::Waiting => s.waiting += count,
            JobState::Running if expired == Some(true) => s.stalled += count,
            JobState::Running => s.running += count,
            JobState::Failed => s.failed += count,
            JobState::Completed => s.completed += count,
            JobState::Cancelled => s.cancelled += count,
        }
    }
    db.query(PAUSED_QUEUES, &Params::NONE, |row| {
        let queue: String = row.get(0)?;
        let entry = stats.entry(queue.clone()).or_insert_with(|| QueueStats {
            queue,
            ..QueueStats::default()
        });
        entry.paused = row.get(1)?;
        entry.concurrency = row.get(2)?;
        entry.rate_limit =
            crate::ops::rate_limit::RateLimit::from_columns(row.get(3)?, row.get(4)?);
        entry.priority_aging = row
            .get::<Option<i64>>(5)?
            .and_then(|ms| u64::try_from(ms).ok())
            .map(std::time::Duration::from_millis);
        entry.key_concurrency = row.get(6)?;
        Ok(())
    })?;
    let keys = db.query(KEY_COUNTS, &Params::NONE, |row| {
        Ok((
            row.get::<String>(0)?,
            KeyStats {
                key: row.get(1)?,
                running: row.get::<i64>(2)?.max(0) as u64,
                queued: row.get::<i64>(3)?.max(0) as u64,
                limit: row.get(4)?,
                weight: 1,
            },
        ))
    })?;
    let weights: std::collections::HashMap<(String, String), u32> = db
        .query(ALL_KEY_WEIGHTS, &Params::NONE, |r| {
            Ok(((r.get(0)?, r.get(1)?), r.get(2)?))
        })?
        .into_iter()
        .collect();
    for (queue, mut key) in keys {
        let Some(s) = stats.get_mut(&queue) else {
            continue;
        };
        key.weight = weights
            .get(&(queue.clone(), key.key.clone()))
            .copied()
            .unwrap_or(1);
        key.limit = key.limit.or(s.key_concurrency);
        if key.is_full() {
            s.waiting_on_keys += key.queued;
        }
        s.top_keys.push(key);
    }
    for s in stats.values_mut() {
        s.top_keys
            .sort_by(|a, b| (b.running, b.queued, &a.key).cmp(&(a.running, a.queued, &b.key)));
        s.top_keys.truncate(TOP_KEYS);
    }
    Ok(stats.into_values().collect())
}
