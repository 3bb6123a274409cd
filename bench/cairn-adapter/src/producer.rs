//! The producer: enqueues jobs at the load the settings ask for, in batches of at most `PRODUCER_BATCH_MAX`,
//! until told to stop. A failed enqueue (the database restarting, a link gone silent) is tried again with the
//! same jobs, so that the offered load is delivered late rather than lost, and their claim latency counts from
//! the first attempt.

use cairn::Jobs;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use cairn::{Push, Queue};
use serde_json::json;
use tokio::io::AsyncBufReadExt;
use tokio::sync::Notify;

use crate::meter::{Meter, epoch_micros};
use crate::settings::Load;

/// The queue the adapter uses.
pub const QUEUE: &str = "cairn_bench";

/// The jobs' name.
pub const JOB: &str = "long_horizon";

/// How long a producer waits after a failed enqueue before it tries again.
const RETRY_PAUSE: Duration = Duration::from_millis(100);

/// How often a waiting producer looks whether it was told to stop.
const STOP_CHECK: Duration = Duration::from_millis(100);

pub struct Producer {
    pub queue: Queue,
    pub meter: Arc<Meter>,
    pub stop: Arc<AtomicBool>,
    pub batch_max: u64,
    /// Filler that brings a job's data to about `JOB_PAYLOAD_BYTES`.
    pub padding: String,
    pub next_seq: u64,
}

impl Producer {
    /// Keeps `load` until stopped.
    pub async fn run(mut self, load: Load) {
        match load {
            Load::Rate { rate, tick } => self.at_rate(rate, tick).await,
            Load::Harness => self.as_the_harness_says().await,
            Load::Depth(target) => self.at_depth(target).await,
        }
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// Credits `rate` jobs per second of real time elapsed (not per tick: a tick that runs late must not shrink
    /// the offered load) and sends what is owed every `tick`.
    async fn at_rate(&mut self, rate: u64, tick: Duration) {
        let mut credit = 0.0_f64;
        let mut last = Instant::now();
        let mut next = last;
        while !self.stopped() {
            next = (next + tick).max(Instant::now());
            tokio::time::sleep_until(next.into()).await;
            let now = Instant::now();
            credit += rate as f64 * now.duration_since(last).as_secs_f64();
            last = now;
            let owed = credit.floor();
            credit -= owed;
            self.send_all(owed as u64).await;
        }
    }

    /// Sends what `ENQUEUE <n>` lines on standard input ask for. Tokens are added up as they arrive, whatever the
    /// producer is doing, so that a slow enqueue never holds up the harness's writes.
    async fn as_the_harness_says(&mut self) {
        let owed = Arc::new(AtomicU64::new(0));
        let arrived = Arc::new(Notify::new());
        let reader = tokio::spawn(read_tokens(owed.clone(), arrived.clone()));
        while !self.stopped() {
            let n = owed.swap(0, Ordering::SeqCst);
            if n == 0 {
                let _ = tokio::time::timeout(STOP_CHECK, arrived.notified()).await;
                continue;
            }
            self.send_all(n).await;
        }
        reader.abort();
    }

    /// Keeps `target` of this producer's jobs enqueued and not yet started.
    async fn at_depth(&mut self, target: u64) {
        while !self.stopped() {
            let room = target.saturating_sub(self.meter.own_depth());
            if room == 0 {
                tokio::time::sleep(Duration::from_millis(1)).await;
                continue;
            }
            self.send(room.min(self.batch_max)).await;
        }
    }

    async fn send_all(&mut self, mut count: u64) {
        while count > 0 && !self.stopped() {
            let n = count.min(self.batch_max);
            self.send(n).await;
            count -= n;
        }
    }

    /// Enqueues `count` jobs in one call, trying again until it commits or the producer is stopped.
    async fn send(&mut self, count: u64) {
        let produced_at_us = epoch_micros();
        let jobs: Vec<Push> = (0..count)
            .map(|k| {
                Push::new(JOB).queue(QUEUE).data(json!({
                    "seq": self.next_seq + k,
                    "produced_at_us": produced_at_us,
                    "padding": self.padding,
                }))
            })
            .collect();
        let mut failures = 0u64;
        loop {
            match self.queue.enqueue_batch(jobs.clone()).await {
                Ok(_) => {
                    self.meter.enqueued.fetch_add(count, Ordering::SeqCst);
                    self.next_seq += count;
                    if failures > 0 {
                        eprintln!(
                            "cairn-adapter: enqueues work again after {failures} failed tries"
                        );
                    }
                    return;
                }
                Err(e) => {
                    self.meter.failed_enqueues.fetch_add(1, Ordering::SeqCst);
                    if failures == 0 {
                        eprintln!("cairn-adapter: an enqueue failed, trying again: {e}");
                    }
                    failures += 1;
                    if self.stopped() {
                        return;
                    }
                    tokio::time::sleep(RETRY_PAUSE).await;
                }
            }
        }
    }
}

/// Reads `ENQUEUE <n>` lines from standard input into `owed` until it closes. Other lines are reported and
/// skipped: a harness newer than this adapter may send more.
async fn read_tokens(owed: Arc<AtomicU64>, arrived: Arc<Notify>) {
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    loop {
        match lines.next_line().await {
            Ok(Some(line)) => match parse_token(&line) {
                Some(n) => {
                    owed.fetch_add(n, Ordering::SeqCst);
                    arrived.notify_one();
                }
                None if line.trim().is_empty() => {}
                None => eprintln!("cairn-adapter: skipping a line on standard input: {line:?}"),
            },
            Ok(None) => return,
            Err(e) => {
                eprintln!("cairn-adapter: standard input failed, no more ENQUEUE tokens: {e}");
                return;
            }
        }
    }
}

/// The count of an `ENQUEUE <n>` token.
fn parse_token(line: &str) -> Option<u64> {
    line.trim().strip_prefix("ENQUEUE ")?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_enqueue_and_a_count() {
        assert_eq!(parse_token("ENQUEUE 128"), Some(128));
        assert_eq!(parse_token("  ENQUEUE 7 \r"), Some(7));
        assert_eq!(parse_token("ENQUEUE"), None);
        assert_eq!(parse_token("ENQUEUE -3"), None);
        assert_eq!(parse_token("PAUSE 1"), None);
    }
}
