//! Claims on a queue that holds keyed jobs (jobs with a concurrency key, [`crate::Concurrency`]): keys take turns,
//! and a key at its limit is passed over without blocking the jobs behind it.
//!
//! A ready job is in one of two indexes (migration 0019): `jobs_ready` holds the jobs without a key in claim order;
//! `jobs_ready_by_key` the keyed ones by level (`claim_key`, minus the priority: keys and priority aging refuse
//! each other), then key, then age. A claim serves the best level first, whichever index holds it. At a level, the
//! keys take turns in key order, starting after the key the queue served last (kept per queue in memory,
//! `SettingsCache::turns`, and moved on by [`record_turns`] from the jobs a claim handed out); the jobs without a
//! key take one turn among them, before the first key. A key of weight N ([`crate::WeighKey`]) keeps its turn for
//! up to N jobs. Each turn is one probe of the index ("the first job of the next key after this one"), so a key with
//! a million ready jobs costs a turn what a key with one does, and another key's job waits at most one turn per key
//! ahead of it.
//!
//! A key at its limit (its running jobs, counted on `jobs_running_by_key`, plus those this claim already took)
//! costs one more probe and is passed over; there are never more such keys than running jobs. A level whose every
//! key is at its limit is left for the next one.
//!
//! Name patterns and a priority are conditions on the probes here: a claim for some names on a keyed queue reads
//! the jobs of other names on its way, where one on a queue without keys reads only its names' jobs
//! (`claim/by_name.rs`); a claim of one priority reads only that level.
//!
//! On PostgreSQL, where each statement is a round trip, a claim's first statement brings the best keyed level, the
//! first jobs without a key, and the first batch of keys at that level with their first jobs and running counts;
//! further keys come a batch at a time. The jobs are locked as they are read, skipping those other nodes hold. A
//! claim that meets a key with a limit takes the queue's row lock (as a limited queue's claims do) before it
//! counts, so that nodes count a key's running jobs one after another; keys without a limit need no count and no
//! lock.

use std::collections::{HashMap, VecDeque};

use crate::error::Result;
use crate::names::QueueName;
use crate::ops::WriteCtx;
use crate::ops::claim::Claim;
use crate::store::db::{Params, Sql, ToValue, Value, params};

/// How many jobs of `key` in `queue` run now.
pub(crate) const RUNNING_WITH_KEY: Sql = Sql {
    sqlite: "SELECT count(*) FROM jobs INDEXED BY jobs_running_by_key \
             WHERE state = 'running' AND concurrency_key IS NOT NULL AND queue = $1 AND concurrency_key = $2",
    postgres: "SELECT count(*) FROM jobs \
               WHERE state = 'running' AND concurrency_key IS NOT NULL AND queue = $1 AND concurrency_key = $2",
};

/// The statements of one claim's walk, with its name patterns and priority as conditions.
struct Probes {
    /// The best level at or above `$2` among keyed jobs.
    level: String,
    /// SQLite's step: the first keyed job of the first key after `$3` at level `$2`: key, then the job ([`found`])
    /// (PostgreSQL steps a batch at a time, [`Self::heads`]).
    next_key: String,
    /// Key `$3`'s first job at level `$2` after (`run_at`, `id`) = (`$4`, `$5`) ([`found`]).
    key_job: String,
    /// SQLite's first jobs without a key, in claim order (the limit is the last parameter): id, weight, level,
    /// run_at (PostgreSQL reads them in [`Self::first`]).
    unkeyed: String,
    /// On PostgreSQL, a claim's first round trip: [`Self::level`] from `$2`, [`Self::unkeyed`], and the first batch
    /// of [`Self::heads`] at that level after key `$3` (filters from `$4`, then the limit of jobs without a key, then
    /// the batch's size). Rows of three kinds, in this order: 0, the level; 1, a job without a key (level, id,
    /// weight, run_at); 2, a key's step (its number, its job: id, weight, own limit, run_at, or nulls; the key;
    /// its running jobs, when the claim holds the queue's lock already, else null).
    first: Option<String>,
    /// On PostgreSQL, the first job of each of the next keys after `$3` at level `$2`, as many keys as the last
    /// parameter says, in key order: key, the job ([`found`]; nulls when every job of the key there is locked by
    /// another node), the key's running jobs.
    heads: Option<String>,
    /// The filters' parameters, which follow each statement's own (before a trailing offset or limit).
    filter_args: Vec<Value<'static>>,
}

impl Probes {
    /// The statements for `claim` on a queue with priority aging (`aging`) or without; `locked` when a claim on
    /// PostgreSQL holds the queue's row lock before its first statement (see [`candidates`]).
    fn new(claim: &Claim, postgres: bool, aging: bool, locked: bool) -> Probes {
        let sql = ProbeSql {
            filters: Filters {
                claim,
                postgres,
                aging,
            },
            by_key: if postgres {
                ""
            } else {
                " INDEXED BY jobs_ready_by_key"
            },
            ready: if postgres {
                ""
            } else {
                " INDEXED BY jobs_ready"
            },
            // On PostgreSQL every job the walk may take is locked as it is read, skipping those other nodes hold.
            lock: if postgres {
                " FOR UPDATE SKIP LOCKED"
            } else {
                ""
            },
        };
        Probes {
            level: sql.level(),
            next_key: sql.next_key(),
            key_job: sql.key_job(),
            unkeyed: sql.unkeyed(2),
            first: postgres.then(|| sql.first(locked)),
            heads: postgres.then(|| sql.heads()),
            filter_args: filter_args(claim),
        }
    }
}

/// The condition every keyed statement starts with.
const KEYED: &str = "state = 'queued' AND concurrency_key IS NOT NULL AND queue = $1";

/// A claim's conditions on names and priority, as each statement's text numbers their parameters.
struct Filters<'a> {
    claim: &'a Claim,
    postgres: bool,
    aging: bool,
}

impl Filters<'_> {
    /// The conditions, their parameters numbered from `first` in the order [`filter_args`] gives them; and the
    /// number after the last.
    fn from(&self, first: usize) -> (String, usize) {
        let mut n = first;
        let mut text = String::new();
        if !self.claim.names.is_empty() {
            let terms: Vec<String> = self
                .claim
                .names
                .iter()
                .map(|name| {
                    // A pattern that matches one name (a worker's handlers are such) is compared as it is:
                    // PostgreSQL's `cairn_glob` is a function call per row, and these filters run on every key's
                    // jobs the walk reads.
                    let term = if name.pattern.literal().is_some() {
                        format!("name = ${n}")
                    } else if self.postgres {
                        format!("cairn_glob(name, ${n})")
                    } else {
                        format!("name GLOB ${n}")
                    };
                    n += 1;
                    term
                })
                .collect();
            text.push_str(&format!(" AND ({})", terms.join(" OR ")));
        }
        if self.claim.priority().is_some() {
            // Without aging the level is minus the priority: one level of the indexes, not a filter on all.
            if !self.aging {
                text.push_str(&format!(" AND claim_key = -CAST(${n} AS BIGINT)"));
            }
            text.push_str(&format!(" AND priority = ${n}"));
            n += 1;
        }
        (text, n)
    }
}

/// The filters' parameters, in the order [`Filters::from`] numbers them.
fn filter_args(claim: &Claim) -> Vec<Value<'static>> {
    let mut args: Vec<Value<'static>> = claim
        .names
        .iter()
        .map(|n| {
            n.pattern
                .literal()
                .unwrap_or_else(|| n.pattern.as_str().to_owned())
                .to_value()
        })
        .collect();
    args.extend(claim.priority().map(|p| p.to_value()));
    args
}

/// The texts of [`Probes`], for one database.
struct ProbeSql<'a> {
    filters: Filters<'a>,
    /// The index hints SQLite needs, and the lock PostgreSQL takes on what it reads.
    by_key: &'static str,
    ready: &'static str,
    lock: &'static str,
}

impl ProbeSql<'_> {
    fn level(&self) -> String {
        let (f, _) = self.filters.from(3);
        format!(
            "SELECT claim_key FROM jobs{} WHERE {KEYED} AND claim_key >= $2{f} ORDER BY claim_key LIMIT 1",
            self.by_key
        )
    }

    fn next_key(&self) -> String {
        let (f, _) = self.filters.from(4);
        format!(
            "SELECT concurrency_key, {FOUND} FROM jobs{} WHERE {KEYED} \
             AND claim_key = $2 AND concurrency_key > $3{f} ORDER BY concurrency_key, run_at, id LIMIT 1",
            self.by_key
        )
    }

    /// After the last job the claim took of the key, not at an offset: another node's locks, skipped, would move an
    /// offset.
    fn key_job(&self) -> String {
        let (f, _) = self.filters.from(6);
        format!(
            "SELECT {FOUND} FROM jobs{} WHERE {KEYED} AND claim_key = $2 AND concurrency_key = $3 \
             AND (run_at, id) > ($4, $5){f} ORDER BY run_at, id LIMIT 1{}",
            self.by_key, self.lock
        )
    }

    /// The first jobs without a key, the filters' parameters from `first` on, then the limit.
    fn unkeyed(&self, first: usize) -> String {
        let (f, limit) = self.filters.from(first);
        format!(
            "SELECT id, weight, claim_key, run_at FROM jobs{} WHERE state = 'queued' \
             AND concurrency_key IS NULL \
             AND queue = $1{f} ORDER BY claim_key, run_at, id LIMIT 0 + ${limit}{}",
            self.ready, self.lock
        )
    }

    /// The steps from key to key at a level (`$2`, or the level a statement found), after `$3`, as many as
    /// parameter `$m` says, with each key's first job there and (with `count`) its running jobs: the `WITH` part
    /// and what follows the select list's first columns.
    fn steps(&self, f: &str, level: &str, m: usize, count: bool) -> (String, String) {
        let step = |start: &str| {
            format!(
                "SELECT concurrency_key FROM jobs WHERE {KEYED} AND claim_key = {level} \
                 AND concurrency_key > {start}{f} ORDER BY concurrency_key LIMIT 1"
            )
        };
        let running = if count {
            "(SELECT count(*) FROM jobs AS r WHERE r.state = 'running' \
             AND r.concurrency_key IS NOT NULL AND r.queue = $1 AND r.concurrency_key = s.k)"
        } else {
            "NULL::bigint"
        };
        (
            format!(
                "steps (k, n) AS (SELECT ({first}), 1 \
                 UNION ALL SELECT ({following}), s.n + 1 FROM steps AS s WHERE s.k IS NOT NULL AND s.n < ${m})",
                first = step("$3"),
                following = step("s.k"),
            ),
            format!(
                "{running} FROM steps AS s LEFT JOIN LATERAL (SELECT {FOUND} FROM jobs \
                 WHERE {KEYED} AND claim_key = {level} AND concurrency_key = s.k{f} ORDER BY run_at, id \
                 LIMIT 1{lock}) AS h ON TRUE WHERE s.k IS NOT NULL",
                lock = self.lock,
            ),
        )
    }

    /// PostgreSQL's [`Probes::heads`].
    fn heads(&self) -> String {
        let (f, m) = self.filters.from(4);
        let (with, rest) = self.steps(&f, "$2", m, true);
        format!(
            "WITH RECURSIVE {with} SELECT s.k, h.id, h.weight, h.concurrency_limit, h.run_at, {rest} ORDER BY s.n"
        )
    }

    /// PostgreSQL's [`Probes::first`]; running counts only when the claim holds the queue's lock (`locked`): read
    /// before it, they would be read again under it.
    fn first(&self, locked: bool) -> String {
        let (f, limit) = self.filters.from(4);
        let level = format!(
            "SELECT claim_key FROM jobs WHERE {KEYED} AND claim_key >= $2{f} ORDER BY claim_key LIMIT 1"
        );
        let unkeyed = format!(
            "SELECT id, weight, claim_key, run_at FROM jobs WHERE state = 'queued' AND concurrency_key IS NULL \
             AND queue = $1{f} ORDER BY claim_key, run_at, id LIMIT 0 + ${limit}{}",
            self.lock
        );
        let (with, rest) = self.steps(&f, "(SELECT level FROM lvl)", limit + 1, locked);
        format!(
            "WITH RECURSIVE lvl (level) AS (SELECT ({level})), u AS MATERIALIZED ({unkeyed}), {with} \
             SELECT 0 AS kind, level AS ord, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, \
             NULL::text, NULL::bigint FROM lvl \
             UNION ALL SELECT 1, claim_key, id, weight, NULL, run_at, NULL, NULL FROM u \
             UNION ALL SELECT 2, s.n, h.id, h.weight, h.concurrency_limit, h.run_at, s.k, {rest} \
             ORDER BY 1, 2, 6, 3"
        )
    }
}

/// A keyed job the walk found.
struct Found {
    id: i64,
    weight: u32,
    /// The job's own limit for its key.
    limit: Option<u32>,
    run_at: i64,
}

/// The columns of a [`Found`].
const FOUND: &str = "id, weight, concurrency_limit, run_at";

/// The [`Found`] in a row's columns from `first` ([`FOUND`]).
fn found(r: &crate::store::db::Row<'_>, first: usize) -> Result<Found> {
    Ok(Found {
        id: r.get(first)?,
        weight: r.get(first + 1)?,
        limit: r.get(first + 2)?,
        run_at: r.get(first + 3)?,
    })
}

/// A batch of the next keys at a level, with their first jobs (PostgreSQL's walk).
struct Ahead {
    level: i64,
    /// The key the batch continues after.
    after: String,
    keys: VecDeque<(String, Found)>,
    /// Whether the batch reached the last key at the level.
    complete: bool,
    /// The last key the batch stepped to, with a job or not: the next batch starts after it.
    last_step: Option<String>,
}

/// One claim's walk over a keyed queue's ready jobs.
struct Walk<'c, 'x> {
    ctx: &'c mut WriteCtx<'x>,
    probes: &'c Probes,
    queue: &'c QueueName,
    /// The queue's limit per key.
    key_limit: Option<u32>,
    /// Jobs this claim took of each key.
    taken: HashMap<String, u32>,
    /// The last job (`run_at`, `id`) this claim took of each key at each level: the key's next job there comes
    /// after it (the jobs taken stay in the index until they are leased).
    taken_at: HashMap<i64, HashMap<String, (i64, i64)>>,
    /// Each key's running jobs, counted once per claim.
    running: HashMap<String, u32>,
    /// How many more jobs the claim wants.
    want: u32,
    /// PostgreSQL's batch of the next keys.
    ahead: Option<Ahead>,
    /// Whether this claim holds the queue's row lock (PostgreSQL).
    locked: bool,
}

impl Walk<'_, '_> {
    fn args<'a>(&'a self, own: Vec<Value<'a>>, last: Option<Value<'a>>) -> Vec<Value<'a>> {
        let mut args = own;
        args.extend(self.probes.filter_args.iter().cloned());
        args.extend(last);
        args
    }

    /// The best keyed level at or above `floor`.
    fn level(&self, floor: i64) -> Result<Option<i64>> {
        let args = self.args(vec![self.queue.as_str().to_value(), floor.to_value()], None);
        self.ctx
            .db
            .query_row(Sql::both(&self.probes.level), &Params(args), |r| r.get(0))
    }

    /// Whether one more job of `key`, whose next job's own limit is `own`, may start.
    fn has_room(&mut self, key: &str, own: Option<u32>) -> Result<bool> {
        let Some(limit) = own.or(self.key_limit) else {
            return Ok(true);
        };
        // Nodes count a key's running jobs one after another: the queue's row lock, held to the commit, makes the
        // next node count after this claim's jobs are running. Counts read before it may be stale. (A single
        // writer's dialect takes no lock: its counts are never stale.)
        if !self.locked
            && self
                .ctx
                .db
                .dialect()
                .lock_queue(&self.ctx.db, self.queue.as_str())?
        {
            self.locked = true;
            self.running.clear();
        }
        let running = match self.running.get(key) {
            Some(&n) => n,
            None => {
                let n: i64 = self.ctx.db.query_one(
                    RUNNING_WITH_KEY,
                    &params![self.queue.as_str(), key],
                    |r| r.get(0),
                )?;
                let n = u32::try_from(n).unwrap_or(u32::MAX);
                self.running.insert(key.to_owned(), n);
                n
            }
        };
        let taken = self.taken.get(key).copied().unwrap_or(0);
        Ok(running.saturating_add(taken) < limit)
    }

    /// The next job of the first key after `after` (and at most `upto`) at `level` that has one this claim has not
    /// taken and room for it.
    fn next_key(
        &mut self,
        level: i64,
        after: &str,
        upto: Option<&str>,
    ) -> Result<Option<(String, Found)>> {
        let mut after = after.to_owned();
        loop {
            let Some((key, head)) = self.head_after(level, &after)? else {
                return Ok(None);
            };
            if upto.is_some_and(|upto| key.as_str() > upto) {
                return Ok(None);
            }
            let job = match self.taken_at(level, &key) {
                None => Some(head),
                Some(after) => self.key_job(level, &key, after)?,
            };
            if let Some(job) = job
                && self.has_room(&key, job.limit)?
            {
                return Ok(Some((key, job)));
            }
            after = key;
        }
    }

    /// The first key after `after` at `level`, and its first job. On PostgreSQL, where each statement is a round
    /// trip, the next keys' first jobs (and running counts) come a batch at a time ([`Probes::heads`]), as many as
    /// the claim still wants; the batch is used while the walk goes on from where it ends.
    fn head_after(&mut self, level: i64, after: &str) -> Result<Option<(String, Found)>> {
        let Some(heads) = &self.probes.heads else {
            let args = self.args(
                vec![
                    self.queue.as_str().to_value(),
                    level.to_value(),
                    after.to_value(),
                ],
                None,
            );
            return self
                .ctx
                .db
                .query_row(Sql::both(&self.probes.next_key), &Params(args), |r| {
                    Ok((r.get::<String>(0)?, found(r, 1)?))
                });
        };
        let current = self
            .ahead
            .as_ref()
            .is_some_and(|a| a.level == level && a.after == after);
        if !current {
            let args = self.args(
                vec![
                    self.queue.as_str().to_value(),
                    level.to_value(),
                    after.to_value(),
                ],
                Some(self.want.max(1).to_value()),
            );
            let rows = self.ctx.db.query(Sql::both(heads), &Params(args), |r| {
                // A key whose jobs at the level other nodes hold all is a step with no job.
                let head = match r.get::<Option<i64>>(1)? {
                    Some(_) => Some(found(r, 1)?),
                    None => None,
                };
                Ok((r.get::<String>(0)?, head, r.get::<i64>(5)?))
            })?;
            let complete = rows.len() < self.want.max(1) as usize;
            let mut keys = VecDeque::with_capacity(rows.len());
            let mut last_step = None;
            for (key, head, running) in rows {
                last_step = Some(key.clone());
                let Some(head) = head else { continue };
                // Counts read under the queue's lock hold; those read before it are read again.
                if self.locked {
                    self.running
                        .entry(key.clone())
                        .or_insert_with(|| u32::try_from(running).unwrap_or(u32::MAX));
                }
                keys.push_back((key, head));
            }
            self.ahead = Some(Ahead {
                level,
                after: after.to_owned(),
                keys,
                complete,
                last_step,
            });
        }
        let ahead = self.ahead.as_mut().expect("just filled");
        match ahead.keys.pop_front() {
            Some((key, head)) => {
                ahead.after.clone_from(&key);
                Ok(Some((key, head)))
            }
            None if ahead.complete => Ok(None),
            None => {
                // The batch ran out before the keys did: the next one starts where it ended.
                let resume = ahead
                    .last_step
                    .clone()
                    .unwrap_or_else(|| ahead.after.clone());
                self.ahead = None;
                self.head_after(level, &resume)
            }
        }
    }

    /// The last job of `key` at `level` this claim took: (`run_at`, `id`).
    fn taken_at(&self, level: i64, key: &str) -> Option<(i64, i64)> {
        self.taken_at
            .get(&level)
            .and_then(|taken| taken.get(key))
            .copied()
    }

    /// Notes `job` of `key` at `level` as taken.
    fn take(&mut self, level: i64, key: &str, job: &Found) {
        *self.taken.entry(key.to_owned()).or_default() += 1;
        self.taken_at
            .entry(level)
            .or_default()
            .insert(key.to_owned(), (job.run_at, job.id));
    }

    /// Key `key`'s first job at `level` after (`run_at`, `id`) = `after`.
    fn key_job(&self, level: i64, key: &str, after: (i64, i64)) -> Result<Option<Found>> {
        let args = self.args(
            vec![
                self.queue.as_str().to_value(),
                level.to_value(),
                key.to_value(),
                after.0.to_value(),
                after.1.to_value(),
            ],
            None,
        );
        self.ctx
            .db
            .query_row(Sql::both(&self.probes.key_job), &Params(args), |r| {
                found(r, 0)
            })
    }
}

/// What the next turn at a level gives.
enum Turn {
    Unkeyed,
    Key(String, Found),
}

/// The ready jobs of keyed `queue` that `claim` takes, at most `limit`, in the order it hands them out: (id,
/// weight). On PostgreSQL they are locked.
pub(crate) fn candidates(
    claim: &Claim,
    ctx: &mut WriteCtx<'_>,
    queue: &QueueName,
    limit: u32,
) -> Result<Vec<(i64, u32)>> {
    let aging = ctx.settings.get(queue.as_str()).aging_ms.is_some();
    let key_limit = ctx.settings.get(queue.as_str()).key_concurrency;
    // With a limit for every key, the claim counts under the queue's row lock in any case: on PostgreSQL it takes
    // it before any job's, in the order the queue's other writers do (`LimitKeys`, `PauseQueue`), and reads the
    // first keys' running counts with their jobs. A claim that meets only jobs' own limits takes it when it does.
    let locked = key_limit.is_some() && ctx.db.dialect().lock_queue(&ctx.db, queue.as_str())?;
    // The walk's statements are built for the claim, in the database's own dialect: `Sql`'s pairs are literal
    // texts, and building both would double every keyed claim's work for a text it never runs.
    let probes = Probes::new(claim, ctx.db.is_postgres(), aging, locked);
    // A claim of one priority on a queue without aging starts at that priority's level (see `select_ready_jobs`).
    let floor = match (claim.priority(), ctx.settings.get(queue.as_str()).aging_ms) {
        (Some(priority), None) => -i64::from(priority),
        _ => i64::MIN,
    };
    // Where the turn stands: the key the queue served last, and how many jobs its turn gave.
    let last = ctx.settings.turns.get(queue.as_str()).cloned();
    let after = last.as_ref().map_or(String::new(), |(key, _)| key.clone());
    let start = match &probes.first {
        Some(first) => {
            Start::in_one_trip(ctx, &probes, first, [queue.as_str(), &after], floor, limit)?
        }
        None => Start::by_probes(ctx, &probes, queue, floor, limit)?,
    };
    let mut walk = Walk {
        ctx,
        probes: &probes,
        queue,
        key_limit,
        taken: HashMap::new(),
        taken_at: HashMap::new(),
        running: start.running,
        want: limit,
        ahead: start.ahead,
        locked,
    };
    // The turn goes on from what the claim hands out, which a weight budget or other queues may cut short:
    // `record_turns`, once the jobs are leased.
    take_turns(&mut walk, start.unkeyed, start.level, last, limit)
}

/// Where a claim's walk starts: the first jobs without a key (id, weight, level), the best keyed level, and on
/// PostgreSQL the first batch of keys at it with their running counts.
struct Start {
    unkeyed: VecDeque<(i64, u32, i64)>,
    level: Option<i64>,
    ahead: Option<Ahead>,
    running: HashMap<String, u32>,
}

impl Start {
    /// PostgreSQL: all of it in the one statement of [`Probes::first`]; `[queue, after]` are the queue and the key its
    /// turn continues after.
    fn in_one_trip(
        ctx: &WriteCtx<'_>,
        probes: &Probes,
        first: &str,
        [queue, after]: [&str; 2],
        floor: i64,
        limit: u32,
    ) -> Result<Start> {
        let mut args = vec![queue.to_value(), floor.to_value(), after.to_value()];
        args.extend(probes.filter_args.iter().cloned());
        args.push(limit.to_value());
        args.push(limit.to_value());
        let rows = ctx.db.query(Sql::both(first), &Params(args), |r| {
            let kind: i32 = r.get(0)?;
            let head = match (kind, r.get::<Option<i64>>(2)?) {
                (1 | 2, Some(_)) => Some(found(r, 2)?),
                _ => None,
            };
            Ok((
                kind,
                r.get::<Option<i64>>(1)?,
                head,
                r.get::<Option<String>>(6)?,
                r.get::<Option<i64>>(7)?,
            ))
        })?;
        let mut start = Start {
            unkeyed: VecDeque::new(),
            level: None,
            ahead: None,
            running: HashMap::new(),
        };
        let mut keys = VecDeque::new();
        let (mut steps, mut last_step) = (0, None);
        for (kind, ord, head, key, count) in rows {
            match (kind, head, key) {
                (0, _, _) => start.level = ord,
                (1, Some(job), _) => {
                    start
                        .unkeyed
                        .push_back((job.id, job.weight, ord.unwrap_or(0)))
                }
                (2, head, Some(key)) => {
                    steps += 1;
                    last_step = Some(key.clone());
                    if let Some(count) = count {
                        start
                            .running
                            .insert(key.clone(), u32::try_from(count).unwrap_or(u32::MAX));
                    }
                    if let Some(job) = head {
                        keys.push_back((key, job));
                    }
                }
                _ => {}
            }
        }
        start.ahead = start.level.map(|level| Ahead {
            level,
            after: after.to_owned(),
            keys,
            complete: steps < limit.max(1) as usize,
            last_step,
        });
        Ok(start)
    }

    /// SQLite: the first jobs without a key, and the best keyed level, a statement each.
    fn by_probes(
        ctx: &WriteCtx<'_>,
        probes: &Probes,
        queue: &QueueName,
        floor: i64,
        limit: u32,
    ) -> Result<Start> {
        let mut args = vec![queue.as_str().to_value()];
        args.extend(probes.filter_args.iter().cloned());
        args.push(limit.to_value());
        let unkeyed = ctx
            .db
            .query(Sql::both(&probes.unkeyed), &Params(args), |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })?
            .into();
        let args = [queue.as_str().to_value(), floor.to_value()]
            .into_iter()
            .chain(probes.filter_args.iter().cloned())
            .collect();
        let level = ctx
            .db
            .query_row(Sql::both(&probes.level), &Params(args), |r| r.get(0))?;
        Ok(Start {
            unkeyed,
            level,
            ahead: None,
            running: HashMap::new(),
        })
    }
}

/// Hands out up to `limit` jobs from where `walk` starts: level by level, the jobs without a key and each key
/// taking turns after the one the queue served last (`last`, with how many jobs its turn gave).
fn take_turns(
    walk: &mut Walk<'_, '_>,
    mut unkeyed: VecDeque<(i64, u32, i64)>,
    mut level: Option<i64>,
    mut last: Option<(String, u32)>,
    limit: u32,
) -> Result<Vec<(i64, u32)>> {
    let mut picked: Vec<(i64, u32)> = Vec::new();
    while picked.len() < limit as usize {
        walk.want = limit - picked.len() as u32;
        let unkeyed_level = unkeyed.front().map(|&(_, _, level)| level);
        let Some(at) = level else {
            // No keyed job left with room: the rest in claim order.
            match unkeyed.pop_front() {
                Some((id, weight, _)) => picked.push((id, weight)),
                None => break,
            }
            continue;
        };
        if unkeyed_level.is_some_and(|u| u < at) {
            let (id, weight, _) = unkeyed.pop_front().expect("a front");
            picked.push((id, weight));
            continue;
        }
        let previous = last.as_ref().map(|(key, used)| (key.as_str(), *used));
        match next_turn(walk, at, previous, unkeyed_level == Some(at))? {
            Some(Turn::Unkeyed) => {
                let (id, weight, _) = unkeyed.pop_front().expect("a front");
                picked.push((id, weight));
                last = Some((String::new(), 1));
            }
            Some(Turn::Key(key, job)) => {
                picked.push((job.id, job.weight));
                walk.take(at, &key, &job);
                let used = match &last {
                    Some((previous, used)) if *previous == key => used + 1,
                    _ => 1,
                };
                last = Some((key, used));
            }
            None => level = walk.level(at.saturating_add(1))?,
        }
    }
    Ok(picked)
}

/// Moves each keyed queue's turn on past the jobs a claim handed out (`claimed`, in the order it handed them out):
/// the key it served last, and how many jobs in a row that key's turn has given, counting the turn's jobs from
/// earlier claims when this claim gave only that key's.
pub(crate) fn record_turns(ctx: &mut WriteCtx<'_>, claimed: &[crate::ops::claim::ClaimedJob]) {
    let mut by_queue: Vec<(&str, Vec<&str>)> = Vec::new();
    for c in claimed {
        let queue = c.job.queue.as_str();
        if !ctx.settings.get(queue).keyed {
            continue;
        }
        let key = c.job.concurrency_key.as_ref().map_or("", |k| k.as_str());
        match by_queue.iter_mut().find(|(q, _)| *q == queue) {
            Some((_, keys)) => keys.push(key),
            None => by_queue.push((queue, vec![key])),
        }
    }
    for (queue, keys) in by_queue {
        let last = *keys.last().expect("a queue is listed with a job");
        let tail = keys.iter().rev().take_while(|k| **k == last).count() as u32;
        let used = match ctx.settings.turns.get(queue) {
            Some((previous, used)) if tail as usize == keys.len() && previous == last => {
                used + tail
            }
            _ => tail,
        };
        ctx.settings
            .turns
            .insert(queue.to_owned(), (last.to_owned(), used));
    }
}

/// The next turn at `level`, after `last` (the key served last, empty for the jobs without a key, and how many
/// jobs its turn gave; `None` when the queue has served none), or `None` when no key at the level has room and there
/// are no jobs without a key there. The order of turns: the jobs without a key (when `unkeyed` has some at this
/// level), then each key in order; a key of weight N keeps its turn for up to N jobs.
fn next_turn(
    walk: &mut Walk<'_, '_>,
    level: i64,
    last: Option<(&str, u32)>,
    unkeyed: bool,
) -> Result<Option<Turn>> {
    if unkeyed && last.is_none() {
        return Ok(Some(Turn::Unkeyed));
    }
    if let Some((key, used)) = last
        && !key.is_empty()
        && used < walk.ctx.settings.key_weight(walk.queue.as_str(), key)
        && let Some(job) = walk.key_job(
            level,
            key,
            walk.taken_at(level, key).unwrap_or((i64::MIN, i64::MIN)),
        )?
        && walk.has_room(key, job.limit)?
    {
        return Ok(Some(Turn::Key(key.to_owned(), job)));
    }
    let after = last.map_or("", |(key, _)| key);
    if let Some((key, job)) = walk.next_key(level, after, None)? {
        return Ok(Some(Turn::Key(key, job)));
    }
    // Past the last key: the turn comes round to the jobs without a key, then to the keys up to where it started.
    if unkeyed {
        return Ok(Some(Turn::Unkeyed));
    }
    if !after.is_empty()
        && let Some((key, job)) = walk.next_key(level, "", Some(after))?
    {
        return Ok(Some(Turn::Key(key, job)));
    }
    Ok(None)
}

/// The walk's statements, for a claim of any job and for one with names and a priority, and the others here, as
/// (SQLite's text, PostgreSQL's text): for the tests that prepare every statement on the real schema.
pub(crate) fn sample_statements() -> Vec<(String, String)> {
    let claims = [
        crate::Dequeue::new("w"),
        crate::Dequeue::new("w")
            .name("mail.*")
            .name("pdf")
            .priority(1),
    ];
    let mut all = Vec::new();
    for dequeue in claims {
        let claim = dequeue.validate().expect("a valid dequeue");
        let (sqlite, postgres) = (
            Probes::new(&claim, false, false, false),
            Probes::new(&claim, true, false, false),
        );
        all.push((sqlite.level, postgres.level));
        all.push((sqlite.next_key, postgres.next_key));
        all.push((sqlite.key_job, postgres.key_job));
        all.push((sqlite.unkeyed, postgres.unkeyed));
        all.push((String::new(), postgres.heads.unwrap_or_default()));
        all.push((String::new(), postgres.first.unwrap_or_default()));
        let locked = Probes::new(&claim, true, false, true);
        all.push((String::new(), locked.first.unwrap_or_default()));
    }
    #[cfg(feature = "postgres")]
    all.push((
        String::new(),
        crate::store::postgres::dialect::LOCK_QUEUE
            .postgres
            .to_owned(),
    ));
    all.push((
        RUNNING_WITH_KEY.sqlite.to_owned(),
        RUNNING_WITH_KEY.postgres.to_owned(),
    ));
    all
}
