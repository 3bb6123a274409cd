//! The queue's depth as the database has it: ready jobs not yet claimed, counted every 200 ms on the ready-jobs
//! index (a read, off the writer), for the `queue_depth` metric. With several instances on one database it is
//! the whole queue's depth, not one process's.

use cairn::Jobs;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use cairn::{Queue, SqlQuery};

use crate::meter::Meter;
use crate::producer::QUEUE;

const EVERY: Duration = Duration::from_millis(200);

/// Counts until stopped. A failed count keeps the last one and is reported once, until counts work again.
pub async fn poll(queue: Queue, meter: Arc<Meter>, stop: Arc<AtomicBool>) {
    let query = SqlQuery {
        timeout: Duration::from_secs(2),
        ..SqlQuery::new(format!(
            "SELECT count(*) FROM jobs WHERE queue = '{QUEUE}' AND state = 'queued' AND concurrency_key IS NULL"
        ))
    };
    let mut failing = false;
    while !stop.load(Ordering::SeqCst) {
        let counted = match queue.sql(query.clone()).await {
            Ok(result) => count_of(&result.rows)
                .ok_or_else(|| format!("the count came back as {:?}", result.rows)),
            Err(e) => Err(e.to_string()),
        };
        match counted {
            Ok(depth) => {
                if failing {
                    eprintln!("cairn-adapter: counting the queue's depth works again");
                    failing = false;
                }
                meter.set_db_depth(depth);
            }
            Err(e) => {
                if !failing {
                    eprintln!("cairn-adapter: counting the queue's depth failed: {e}");
                    failing = true;
                }
            }
        }
        tokio::time::sleep(EVERY).await;
    }
}

fn count_of(rows: &[Vec<serde_json::Value>]) -> Option<u64> {
    rows.first()?.first()?.as_u64()
}
