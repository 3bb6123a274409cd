//! Waiting for a condition with a bound: the one loop that looks again and again at something a test waits for.
//! The tests of `cairn-cli` and `cairn-server` include this file too (`#[path]`), so that every crate's tests wait
//! the same way.

use std::future::Future;
use std::time::{Duration, Instant};

/// The pause between two looks at a condition.
const INTERVAL: Duration = Duration::from_millis(20);

/// Polls `check` until it gives a value, for at most `limit`: the value, and when it came; `None` if it never did.
pub async fn poll<T, F, Fut>(limit: Duration, mut check: F) -> Option<(T, Instant)>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + limit;
    loop {
        if let Some(value) = check().await {
            return Some((value, Instant::now()));
        }
        if Instant::now() >= deadline {
            return None;
        }
        // Real time, and the only pause of the tests that wait for something: what they wait for happens in
        // another thread, process or server that has no way to tell them, so they look again. The interval only
        // decides how soon a condition that holds is seen; the bound is the caller's.
        tokio::time::sleep(INTERVAL).await;
    }
}

/// Polls `condition` until it holds, failing the test after `limit`.
pub async fn eventually<F, Fut>(limit: Duration, what: &str, mut condition: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let held = poll(limit, || {
        let holds = condition();
        async move { holds.await.then_some(()) }
    })
    .await;
    assert!(
        held.is_some(),
        "timed out after {limit:?} waiting for: {what}"
    );
}

/// Waits until `jobs` (an embedded queue or a server's client) has seen each of `workers`: the dequeue of a worker
/// not seen before has reached its queue, which parks it if it found nothing, so that a request made after this
/// finds it waiting.
pub async fn until_waiting(jobs: &impl cairn::Jobs, workers: &[&str]) {
    eventually(
        Duration::from_secs(20),
        "the workers wait for jobs",
        || async {
            let seen = jobs.workers().await.unwrap();
            workers
                .iter()
                .all(|w| seen.iter().any(|s| s.id.as_str() == *w))
        },
    )
    .await;
}
