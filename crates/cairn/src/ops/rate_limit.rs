//! Per-queue rate limits: at most N jobs of a queue start per period, across all workers. A token bucket per
//! queue: it holds up to N tokens, refills at N per period, and each job started takes one.
//!
//! On SQLite the bucket is kept in the writer's memory (the writer is the only one that starts jobs); a restart
//! starts the buckets full, so a restart can let one extra period's worth through, never more. On PostgreSQL,
//! where every node starts jobs, the bucket lives in the queue's row: a claim locks the row, loads the bucket from
//! it, and writes back each token it takes (see `ops/claim/mod.rs`), so the limit holds across nodes.

use std::collections::HashMap;
use std::time::Duration;

use crate::clock::duration_millis;
use crate::error::{Error, Result};
use crate::names::QueueName;
use crate::ops::{Operation, WriteCtx};
use crate::store::db::{Sql, params};

/// At most `jobs` starts per `per`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    /// How many jobs may start per period.
    pub jobs: u32,
    /// The period.
    pub per: Duration,
}

impl RateLimit {
    /// From the `rate_jobs` and `rate_period_ms` columns.
    pub(crate) fn from_columns(jobs: Option<u32>, period_ms: Option<i64>) -> Option<RateLimit> {
        Some(RateLimit {
            jobs: jobs?,
            per: Duration::from_millis(u64::try_from(period_ms?).ok()?),
        })
    }

    fn per_ms(self) -> f64 {
        self.per.as_millis() as f64
    }
}

/// Sets or removes a queue's rate limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateLimitQueue {
    /// The queue.
    pub queue: String,
    /// The limit; `None` removes it.
    pub rate: Option<RateLimit>,
}

/// A new or changed limit starts with a full bucket (NULL).
const SET_RATE: Sql = Sql::both(
    "INSERT INTO queues (name, rate_jobs, rate_period_ms) VALUES ($1, $2, $3) \
     ON CONFLICT (name) DO UPDATE SET rate_jobs = excluded.rate_jobs, rate_period_ms = excluded.rate_period_ms, \
     rate_tokens = NULL, rate_at = NULL",
);

/// A limited queue's row, locked, with its stored bucket: how claims on PostgreSQL take turns on the queue.
pub(crate) const LOCK_LIMITED_QUEUE: Sql =
    Sql::postgres_only("SELECT rate_tokens, rate_at FROM queues WHERE name = $1 FOR UPDATE");

/// The bucket after a claim took from it.
pub(crate) const STORE_BUCKET: Sql =
    Sql::both("UPDATE queues SET rate_tokens = $1, rate_at = $2 WHERE name = $3");

impl Operation for RateLimitQueue {
    type Output = ();

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<()> {
        let queue = QueueName::parse(self.queue.as_str())?;
        if let Some(rate) = self.rate {
            if rate.jobs == 0 {
                return Err(Error::invalid(
                    "rate.jobs",
                    "must be at least 1 (pause the queue to start nothing)",
                ));
            }
            if !(Duration::from_millis(1)..=Duration::from_secs(366 * 24 * 3600))
                .contains(&rate.per)
            {
                return Err(Error::invalid(
                    "rate.per",
                    "must be between 1 ms and a year",
                ));
            }
        }
        ctx.db.execute(
            SET_RATE,
            &params![
                queue.as_str(),
                self.rate.map(|r| r.jobs),
                self.rate.map(|r| duration_millis(r.per))
            ],
        )?;
        ctx.settings.entry(queue.as_str()).rate = self.rate;
        ctx.settings.buckets.forget(queue.as_str());
        ctx.ready.mark(queue.as_str());
        let detail = match self.rate {
            Some(rate) => format!("rate {} per {:?}", rate.jobs, rate.per),
            None => "no rate limit".to_owned(),
        };
        crate::ops::queue_changed(ctx, queue.as_str(), &detail);
        Ok(())
    }
}

/// The token buckets of the rate-limited queues, and the earliest time one of them that ran dry has a token again.
#[derive(Debug, Default, Clone)]
pub(crate) struct Buckets {
    buckets: HashMap<String, Bucket>,
    /// When a bucket that refused a claim has a token again (ms): the writer wakes then to serve waiting workers.
    pub next_token_at: Option<i64>,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at_ms: i64,
}

impl Buckets {
    /// How many jobs of `queue` may start now under `rate`, refilling its bucket first. When none may, notes when
    /// the next token comes.
    pub fn available(&mut self, queue: &str, rate: RateLimit, now_ms: i64) -> u32 {
        let capacity = f64::from(rate.jobs);
        let bucket = self.buckets.entry(queue.to_owned()).or_insert(Bucket {
            tokens: capacity,
            at_ms: now_ms,
        });
        let elapsed = (now_ms - bucket.at_ms).max(0) as f64;
        bucket.tokens = (bucket.tokens + elapsed * capacity / rate.per_ms()).min(capacity);
        bucket.at_ms = now_ms;
        let whole = bucket.tokens.floor();
        if whole < 1.0 {
            let wait = ((1.0 - bucket.tokens) * rate.per_ms() / capacity).ceil() as i64;
            let at = now_ms + wait.max(1);
            self.next_token_at = Some(self.next_token_at.map_or(at, |t| t.min(at)));
            return 0;
        }
        whole as u32
    }

    /// A job of `queue` started.
    pub fn take(&mut self, queue: &str) {
        if let Some(bucket) = self.buckets.get_mut(queue) {
            bucket.tokens -= 1.0;
        }
    }

    /// Replaces what is kept of `queue`'s bucket with what is stored: `tokens` as of `at_ms`, or a full bucket.
    pub fn load(&mut self, queue: &str, stored: Option<(f64, i64)>) {
        match stored {
            Some((tokens, at_ms)) => {
                self.buckets
                    .insert(queue.to_owned(), Bucket { tokens, at_ms });
            }
            None => {
                self.buckets.remove(queue);
            }
        }
    }

    /// What is kept of `queue`'s bucket: its tokens as of a time (ms).
    pub fn state(&self, queue: &str) -> Option<(f64, i64)> {
        self.buckets.get(queue).map(|b| (b.tokens, b.at_ms))
    }

    /// A queue's limit changed: its bucket starts full again.
    pub fn forget(&mut self, queue: &str) {
        self.buckets.remove(queue);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_holds_its_capacity_and_refills_at_its_rate() {
        let rate = RateLimit {
            jobs: 2,
            per: Duration::from_secs(10),
        };
        let mut buckets = Buckets::default();
        assert_eq!(buckets.available("q", rate, 0), 2);
        buckets.take("q");
        buckets.take("q");
        assert_eq!(buckets.available("q", rate, 0), 0);
        // One token takes 5 s to come back.
        assert_eq!(buckets.next_token_at, Some(5000));
        assert_eq!(buckets.available("q", rate, 4999), 0);
        assert_eq!(buckets.available("q", rate, 5000), 1);
        // Never more than the capacity, however long it waits.
        assert_eq!(buckets.available("q", rate, 1_000_000), 2);
    }
}
