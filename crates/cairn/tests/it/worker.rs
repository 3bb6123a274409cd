//! The worker API: handlers by name, outcomes, concurrency with weights, heartbeats, graceful shutdown.

use cairn::Jobs;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use cairn::{AttemptOutcome, JobError, JobState, Push, RetryPolicy, Worker};
use serde_json::json;

use super::harness::{PATIENCE, TestQueue, eventually, poll_once};

async fn state_of(t: &TestQueue, id: cairn::JobId) -> JobState {
    t.queue.get(id).await.unwrap().state
}

#[tokio::test]
async fn handler_outcomes_map_to_finish_retry_and_fail() {
    let t = TestQueue::new().await;
    let ok = t
        .queue
        .enqueue(Push::new("ok").data(json!({"n": 2})))
        .await
        .unwrap()
        .id;
    let flaky = t
        .queue
        .enqueue(Push::new("flaky").retry(RetryPolicy::immediate(2)))
        .await
        .unwrap()
        .id;
    let bad = t.push("bad").await;
    let panics = t
        .queue
        .enqueue(Push::new("panics").retry(RetryPolicy::immediate(1)))
        .await
        .unwrap()
        .id;
    let io = t
        .queue
        .enqueue(Push::new("io").retry(RetryPolicy::immediate(1)))
        .await
        .unwrap()
        .id;
    let worker = Worker::builder(&t.queue, "w1")
        .handler("ok", |job| async move {
            let n = job.data()["n"].as_i64().unwrap();
            job.set_result(json!({"squared": n * n}));
            job.set_data(json!({"n": n, "seen": true}));
            Ok(())
        })
        .handler("flaky", |job| async move {
            if job.attempt() == 1 {
                Err(JobError::retry("first time fails"))
            } else {
                Ok(())
            }
        })
        .handler("bad", |_| async {
            Err(JobError::fail("invalid-input", "cannot parse"))
        })
        .handler("panics", |_| async { panic!("boom") })
        .handler("io", |_| async {
            std::fs::read("/nonexistent/file")?;
            Ok(())
        })
        .start()
        .unwrap();
    let t = &t;
    for id in [ok, flaky] {
        eventually(PATIENCE, "jobs complete", || async move {
            state_of(t, id).await == JobState::Completed
        })
        .await;
    }
    for id in [bad, panics, io] {
        eventually(PATIENCE, "jobs fail", || async move {
            state_of(t, id).await == JobState::Failed
        })
        .await;
    }
    let report = worker.stop(Duration::from_secs(5)).await.unwrap();
    assert_eq!((report.finished, report.retried, report.failed), (2, 3, 1));

    // The result is kept apart from the data, which the handler replaced too; the attempt keeps the result.
    let ok = t.queue.get(ok).await.unwrap();
    assert_eq!(ok.result, Some(json!({"squared": 4})));
    assert_eq!(ok.data, json!({"n": 2, "seen": true}));
    assert_eq!(
        ok.history.last().unwrap().result,
        Some(json!({"squared": 4}))
    );
    let flaky = t.queue.get(flaky).await.unwrap();
    assert_eq!(flaky.history[0].error.as_deref(), Some("first time fails"));
    let bad = t.queue.get(bad).await.unwrap();
    assert_eq!(
        (bad.failure_group.as_deref(), bad.error.as_deref()),
        (Some("invalid-input"), Some("cannot parse"))
    );
    let panics = t.queue.get(panics).await.unwrap();
    assert_eq!(panics.error.as_deref(), Some("the handler panicked: boom"));
    let io = t.queue.get(io).await.unwrap();
    assert!(
        io.error.as_deref().unwrap().contains("No such file"),
        "{:?}",
        io.error
    );
    t.close().await;
}

#[tokio::test]
async fn a_handler_takes_only_jobs_of_its_exact_name_even_with_glob_characters() {
    let t = TestQueue::new().await;
    // `?` in the handler's name would match any character if it were taken as a pattern.
    let other = t.push("env/ReportXid=7").await;
    let mine = t.push("env/Report?id=7").await;
    let worker = Worker::builder(&t.queue, "w")
        .handler("env/Report?id=7", |_| async { Ok(()) })
        .start()
        .unwrap();
    let t = &t;
    eventually(PATIENCE, "its job completes", || async move {
        state_of(t, mine).await == JobState::Completed
    })
    .await;
    let report = worker.stop(Duration::from_secs(5)).await.unwrap();
    assert_eq!(report.finished, 1);
    // Never taken: a job given back at the stop would be queued too, but with an attempt in its history.
    let other = t.queue.get(other).await.unwrap();
    assert_eq!(other.state, JobState::Queued);
    assert!(other.history.is_empty(), "{:?}", other.history);
    t.close().await;
}

#[tokio::test]
async fn concurrency_counts_job_weight() {
    let t = TestQueue::new().await;
    let running = Arc::new(AtomicU32::new(0));
    let peak = Arc::new(AtomicU32::new(0));
    let release = Arc::new(tokio::sync::Semaphore::new(0));
    for i in 0..6 {
        t.queue
            .enqueue(Push::new("job").weight(if i % 2 == 0 { 2 } else { 1 }))
            .await
            .unwrap();
    }
    let (r, p, gate) = (running.clone(), peak.clone(), release.clone());
    let worker = Worker::builder(&t.queue, "w")
        .max_concurrency(3)
        .handler("job", move |job| {
            let (r, p, gate) = (r.clone(), p.clone(), gate.clone());
            async move {
                let now = r.fetch_add(job.job().weight, Ordering::SeqCst) + job.job().weight;
                p.fetch_max(now, Ordering::SeqCst);
                gate.acquire().await.unwrap().forget();
                r.fetch_sub(job.job().weight, Ordering::SeqCst);
                Ok(())
            }
        })
        .start()
        .unwrap();
    // Let jobs through one at a time; the running weight must never exceed 3.
    for _ in 0..6 {
        eventually(PATIENCE, "a job is running", || async {
            running.load(Ordering::SeqCst) > 0
        })
        .await;
        release.add_permits(1);
    }
    eventually(PATIENCE, "all done", || async {
        t.queue
            .list(cairn::JobFilter {
                state: Some(JobState::Completed),
                ..Default::default()
            })
            .await
            .unwrap()
            .jobs
            .len()
            == 6
    })
    .await;
    worker.stop(Duration::from_secs(5)).await.unwrap();
    assert!(
        peak.load(Ordering::SeqCst) <= 3,
        "peak weight {}",
        peak.load(Ordering::SeqCst)
    );
    t.close().await;
}

#[tokio::test]
async fn automatic_heartbeats_keep_a_long_job_leased() {
    let t = TestQueue::new().await;
    let id = t
        .queue
        .enqueue(Push::new("long").lease_timeout(Duration::from_millis(300)))
        .await
        .unwrap()
        .id;
    let go = Arc::new(tokio::sync::Notify::new());
    let gate = go.clone();
    let worker = Worker::builder(&t.queue, "w")
        .handler("long", move |_| {
            let gate = gate.clone();
            async move {
                gate.notified().await;
                Ok(())
            }
        })
        .start()
        .unwrap();
    eventually(PATIENCE, "running", || async {
        state_of(&t, id).await == JobState::Running
    })
    .await;
    // Move the clock within the lease; the next heartbeat pushes the expiry to a full timeout from then.
    let first = t.queue.get(id).await.unwrap().lease_expires_at.unwrap();
    t.advance(Duration::from_millis(200));
    eventually(PATIENCE, "lease extended", || async {
        t.queue.get(id).await.unwrap().lease_expires_at.unwrap() > first
    })
    .await;
    // Past the first expiry, the job is still running under the same lease.
    t.advance(Duration::from_millis(200));
    assert!(t.queue.get(id).await.unwrap().lease_expires_at.unwrap() > t.queue.now());
    let job = t.queue.get(id).await.unwrap();
    assert_eq!((job.state, job.attempt), (JobState::Running, 1));
    go.notify_one();
    eventually(PATIENCE, "completed", || async {
        state_of(&t, id).await == JobState::Completed
    })
    .await;
    worker.stop(Duration::from_secs(5)).await.unwrap();
    t.close().await;
}

#[tokio::test]
async fn shutdown_waits_for_running_jobs_until_the_deadline_then_gives_them_back() {
    let t = TestQueue::new().await;
    let quick = t.push("quick").await;
    let stuck = t.push("stuck").await;
    // The quick job ends when let go, after the worker was told to stop.
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let permits = gate.clone();
    let worker = Worker::builder(&t.queue, "w")
        .max_concurrency(2)
        .handler("quick", move |_| {
            let permits = permits.clone();
            async move {
                permits
                    .acquire()
                    .await
                    .expect("the gate stays open")
                    .forget();
                Ok(())
            }
        })
        .handler("stuck", |_| std::future::pending())
        .start()
        .unwrap();
    let t = &t;
    for id in [quick, stuck] {
        eventually(PATIENCE, "both running", || async move {
            state_of(t, id).await == JobState::Running
        })
        .await;
    }
    // The stop is sent at its first poll; a turn of the runtime lets the worker take it in, and only then does the
    // quick job end, well within the deadline.
    let stopping = worker.stop(Duration::from_millis(500));
    tokio::pin!(stopping);
    assert!(
        poll_once(&mut stopping).await,
        "the worker waits for its jobs"
    );
    tokio::task::yield_now().await;
    gate.add_permits(1);
    let report = stopping.await.unwrap();
    assert_eq!((report.finished, report.released), (1, 1));
    assert_eq!(state_of(t, quick).await, JobState::Completed);
    let stuck = t.queue.get(stuck).await.unwrap();
    assert_eq!(stuck.state, JobState::Queued);
    assert_eq!(stuck.attempt, 0, "a released attempt does not count");
    assert_eq!(stuck.history[0].outcome, Some(AttemptOutcome::Released));
    t.close().await;
}

/// Sets its flag when dropped: shows that a handler's future was stopped.
struct DropFlag(Arc<std::sync::atomic::AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[tokio::test]
async fn a_cancelled_job_stops_its_handler_at_the_next_heartbeat() {
    let t = TestQueue::new().await;
    let id = t
        .queue
        .enqueue(Push::new("long").lease_timeout(Duration::from_millis(300)))
        .await
        .unwrap()
        .id;
    let stopped = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = stopped.clone();
    let worker = Worker::builder(&t.queue, "w")
        .handler("long", move |_| {
            let guard = DropFlag(flag.clone());
            async move {
                let _guard = guard;
                std::future::pending::<()>().await;
                Ok(())
            }
        })
        .start()
        .unwrap();
    eventually(PATIENCE, "running", || async {
        state_of(&t, id).await == JobState::Running
    })
    .await;
    t.queue.cancel(id).await.unwrap();
    eventually(PATIENCE, "handler stopped", || async {
        stopped.load(Ordering::SeqCst)
    })
    .await;
    let report = worker.stop(Duration::from_secs(5)).await.unwrap();
    assert_eq!((report.lost, report.released), (1, 0));
    assert_eq!(state_of(&t, id).await, JobState::Cancelled);
    t.close().await;
}

#[tokio::test]
async fn builder_rejects_bad_settings() {
    let t = TestQueue::new().await;
    let err = Worker::builder(&t.queue, "w").start().err().unwrap();
    assert_eq!(
        err.to_string(),
        "handlers: a worker needs at least one handler"
    );
    let err = Worker::builder(&t.queue, "w")
        .handler("", |_| async { Ok(()) })
        .start()
        .err()
        .unwrap();
    assert_eq!(err.field(), Some("name"));
    let err = Worker::builder(&t.queue, "w")
        .handler("a", |_| async { Ok(()) })
        .max_concurrency(2)
        .min_concurrency(3)
        .start()
        .err()
        .unwrap();
    assert_eq!(
        err.to_string(),
        "min_concurrency: must not exceed max_concurrency (2), got 3"
    );
    // Weighted queues go with round-robin order, and weights are 1 to 1000.
    for (weight, order) in [
        (3, cairn::QueueOrder::Ordered),
        (0, cairn::QueueOrder::RoundRobin),
    ] {
        let err = Worker::builder(&t.queue, "w")
            .handler("a", |_| async { Ok(()) })
            .weighted_queue("busy", weight)
            .queue("quiet")
            .order(order)
            .start()
            .err()
            .unwrap();
        assert_eq!(err.field(), Some("weights"), "{err}");
    }
    t.close().await;
}

/// Jobs that end together are reported together, each with its own result; one whose lease was taken away
/// meanwhile is refused on its own and counted lost, and the others finish.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_ending_together_finish_each_with_its_own_result() {
    let t = TestQueue::new().await;
    let pushes = (0..40)
        .map(|i| Push::new("double").data(json!({ "i": i })))
        .collect();
    let ids = t.push_batch(pushes).await;
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let started = Arc::new(AtomicU32::new(0));
    let worker = {
        let (gate, started) = (gate.clone(), started.clone());
        Worker::builder(&t.queue, "w1")
            .max_concurrency(40)
            .handler("double", move |job| {
                let (gate, started) = (gate.clone(), started.clone());
                async move {
                    started.fetch_add(1, Ordering::SeqCst);
                    gate.acquire().await.unwrap().forget();
                    let i = job.data()["i"].as_i64().unwrap();
                    job.set_result(json!({ "double": i * 2 }));
                    Ok(())
                }
            })
            .start()
            .unwrap()
    };
    let started_ref = &started;
    eventually(PATIENCE, "every job runs", || async move {
        started_ref.load(Ordering::SeqCst) == 40
    })
    .await;
    t.queue.cancel(ids[7]).await.unwrap();
    // Every handler ends at once.
    gate.add_permits(40);
    let t = &t;
    for (i, id) in ids.iter().enumerate().filter(|(i, _)| *i != 7) {
        eventually(PATIENCE, "the job completes", || async move {
            state_of(t, *id).await == JobState::Completed
        })
        .await;
        let job = t.queue.get(*id).await.unwrap();
        assert_eq!(job.result, Some(json!({ "double": i * 2 })));
        assert_eq!(job.data, json!({ "i": i }));
    }
    let report = worker.stop(Duration::from_secs(5)).await.unwrap();
    assert_eq!((report.finished, report.lost), (39, 1));
    assert_eq!(state_of(t, ids[7]).await, JobState::Cancelled);
    t.close().await;
}

/// A queue whose finishes wait until the test lets them through, to see what a worker does meanwhile, and which
/// notes how many jobs each request for jobs asked for.
#[derive(Clone)]
struct HeldFinishes {
    queue: cairn::Queue,
    /// Finishes wait for a read lock; the test holds the write lock to hold them.
    gate: Arc<tokio::sync::RwLock<()>>,
    /// The `limit` of each dequeue, in order.
    asked: Arc<std::sync::Mutex<Vec<u32>>>,
    /// How many jobs each dequeue answered got, in the order of the answers.
    answered: Arc<std::sync::Mutex<Vec<usize>>>,
    /// When set, the queue says it holds finishes for company, as the embedded queue on SQLite does, and notes how
    /// many finishes each call carries, with the sender that says the call was taken up, which the test answers.
    calls: Option<Arc<std::sync::Mutex<Vec<NotedCall>>>>,
}

/// How many finishes a call carried, and the sender that says it was taken up, until the test answers it.
type NotedCall = (usize, Option<tokio::sync::oneshot::Sender<()>>);

impl HeldFinishes {
    fn new(queue: &cairn::Queue) -> HeldFinishes {
        HeldFinishes {
            queue: queue.clone(),
            gate: Arc::default(),
            asked: Arc::default(),
            answered: Arc::default(),
            calls: None,
        }
    }

    fn holding_for_company(queue: &cairn::Queue) -> HeldFinishes {
        HeldFinishes {
            calls: Some(Arc::default()),
            ..HeldFinishes::new(queue)
        }
    }

    /// Says every call noted so far was taken up.
    fn take_up_calls(&self) {
        let calls = self.calls.as_ref().expect("a queue that notes its calls");
        for (_, taken) in calls.lock().unwrap().iter_mut() {
            drop(taken.take());
        }
    }

    /// How many finishes each call carried, in order.
    fn call_sizes(&self) -> Vec<usize> {
        let calls = self.calls.as_ref().expect("a queue that notes its calls");
        calls.lock().unwrap().iter().map(|(n, _)| *n).collect()
    }

    /// The `limit` of each dequeue so far, in order.
    fn asked(&self) -> Vec<u32> {
        self.asked.lock().unwrap().clone()
    }

    /// Whether every dequeue asked was answered, and with how many jobs in all.
    fn all_answered(&self) -> Option<usize> {
        let answered = self.answered.lock().unwrap();
        (answered.len() == self.asked.lock().unwrap().len()).then(|| answered.iter().sum())
    }
}

impl cairn::Backend for HeldFinishes {
    fn dequeue(
        &self,
        request: cairn::Dequeue,
    ) -> cairn::BoxFuture<'_, cairn::Result<Vec<cairn::ClaimedJob>>> {
        self.asked.lock().unwrap().push(request.limit);
        Box::pin(async move {
            let claimed = Jobs::dequeue(&self.queue, request).await;
            if let Ok(jobs) = &claimed {
                self.answered.lock().unwrap().push(jobs.len());
            }
            claimed
        })
    }
    fn heartbeat<'a>(
        &'a self,
        lease: &'a cairn::Lease,
        progress: Option<serde_json::Value>,
    ) -> cairn::BoxFuture<'a, cairn::Result<jiff::Timestamp>> {
        Box::pin(Jobs::heartbeat(&self.queue, lease, progress))
    }
    fn checkpoint<'a>(
        &'a self,
        lease: &'a cairn::Lease,
        data: serde_json::Value,
    ) -> cairn::BoxFuture<'a, cairn::Result<jiff::Timestamp>> {
        Box::pin(Jobs::checkpoint(&self.queue, lease, data))
    }
    fn record_step<'a>(
        &'a self,
        lease: &'a cairn::Lease,
        name: cairn::StepName,
        result: serde_json::Value,
    ) -> cairn::BoxFuture<'a, cairn::Result<cairn::Step>> {
        Box::pin(Jobs::record_step(&self.queue, lease, name, result))
    }
    fn sleep<'a>(
        &'a self,
        lease: &'a cairn::Lease,
        name: cairn::StepName,
        wake: cairn::Wake,
    ) -> cairn::BoxFuture<'a, cairn::Result<cairn::Slept>> {
        Box::pin(Jobs::sleep(&self.queue, lease, name, wake))
    }
    fn spawn<'a>(
        &'a self,
        lease: &'a cairn::Lease,
        name: cairn::StepName,
        children: Vec<cairn::Push>,
    ) -> cairn::BoxFuture<'a, cairn::Result<Vec<cairn::JobId>>> {
        Box::pin(Jobs::spawn(&self.queue, lease, name, children))
    }
    fn join<'a>(
        &'a self,
        lease: &'a cairn::Lease,
        name: cairn::StepName,
    ) -> cairn::BoxFuture<'a, cairn::Result<cairn::Joined>> {
        Box::pin(Jobs::join(&self.queue, lease, name))
    }
    fn wait_for_signal<'a>(
        &'a self,
        lease: &'a cairn::Lease,
        name: cairn::StepName,
        key: cairn::SignalKey,
        timeout: std::time::Duration,
    ) -> cairn::BoxFuture<'a, cairn::Result<cairn::SignalWait>> {
        Box::pin(Jobs::wait_for_signal(
            &self.queue,
            lease,
            name,
            key,
            timeout,
        ))
    }
    fn update<'a>(
        &'a self,
        lease: &'a cairn::Lease,
        progress: serde_json::Value,
    ) -> cairn::BoxFuture<'a, cairn::Result<()>> {
        Box::pin(Jobs::update(&self.queue, lease, progress))
    }
    fn finish<'a>(
        &'a self,
        lease: &'a cairn::Lease,
        data: Option<serde_json::Value>,
    ) -> cairn::BoxFuture<'a, cairn::Result<()>> {
        Box::pin(async move {
            let _open = self.gate.read().await;
            Jobs::finish(&self.queue, lease, data).await
        })
    }
    fn finish_many(
        &self,
        finishes: Vec<cairn::Finish>,
    ) -> cairn::BoxFuture<'_, cairn::Result<Vec<cairn::Result<()>>>> {
        Box::pin(async move {
            let _open = self.gate.read().await;
            Jobs::finish_many(&self.queue, finishes).await
        })
    }
    fn finish_many_unhurried(
        &self,
        finishes: Vec<cairn::Finish>,
        taken: tokio::sync::oneshot::Sender<()>,
    ) -> cairn::BoxFuture<'_, cairn::Result<Vec<cairn::Result<()>>>> {
        if let Some(calls) = &self.calls {
            calls.lock().unwrap().push((finishes.len(), Some(taken)));
        }
        self.finish_many(finishes)
    }
    fn holds_finishes_for_company(&self) -> bool {
        self.calls.is_some()
    }
    fn retry<'a>(
        &'a self,
        lease: &'a cairn::Lease,
        error: &'a str,
        delay: Option<Duration>,
    ) -> cairn::BoxFuture<'a, cairn::Result<JobState>> {
        Box::pin(Jobs::retry(&self.queue, lease, error, delay))
    }
    fn fail<'a>(
        &'a self,
        lease: &'a cairn::Lease,
        group: &'a str,
        message: &'a str,
    ) -> cairn::BoxFuture<'a, cairn::Result<()>> {
        Box::pin(Jobs::fail(&self.queue, lease, group, message))
    }
    fn release<'a>(&'a self, lease: &'a cairn::Lease) -> cairn::BoxFuture<'a, cairn::Result<()>> {
        Box::pin(Jobs::release(&self.queue, lease))
    }
    fn worker_stopped<'a>(&'a self, worker: &'a str) -> cairn::BoxFuture<'a, cairn::Result<()>> {
        Box::pin(Jobs::worker_stopped(&self.queue, worker))
    }
}

/// A job's slot is free once its handler returns: the worker takes its next jobs while the last ones' finishes are
/// on their way, and stops taking more once 32 finishes (or its slots' worth, if more) wait for their answers.
#[tokio::test]
async fn a_worker_takes_more_jobs_while_finishes_are_on_their_way() {
    let t = TestQueue::new().await;
    let ids = t
        .push_batch((0..40).map(|_| Push::new("work")).collect())
        .await;
    let backend = HeldFinishes::new(&t.queue);
    let held = backend.gate.clone().write_owned().await;
    let ran = Arc::new(AtomicU32::new(0));
    let counter = ran.clone();
    let worker = Worker::builder(&backend, "w")
        .max_concurrency(2)
        .handler("work", move |_| {
            let counter = counter.clone();
            async move {
                counter.fetch_add(1, Ordering::SeqCst);
                Ok(())
            }
        })
        .start()
        .unwrap();
    // Two slots, and many more jobs run while no finish has been answered, until the worker stops taking jobs:
    // every dequeue it asked for answered, every job they brought run, and so at two looks in a row (the worker
    // decides whether to ask again as each job ends, at once; between two looks, it has had its turn).
    let last = std::sync::Mutex::new(None);
    eventually(
        PATIENCE,
        "a 33rd job ran, and the worker stopped taking jobs",
        || async {
            let ran = ran.load(Ordering::SeqCst) as usize;
            let now = (ran >= 33 && backend.all_answered() == Some(ran)).then(|| backend.asked());
            let before = std::mem::replace(&mut *last.lock().unwrap(), now.clone());
            now.is_some() && before == now
        },
    )
    .await;
    // Once 32 finishes wait, it takes no more: 33 or 34 jobs ran (the worker asks again as each slot frees, and the
    // 33rd job's finish may join the wait before the 34th is asked for).
    let taken = ran.load(Ordering::SeqCst);
    assert!((33..=34).contains(&taken), "{taken} jobs ran");
    let mut states = Vec::new();
    for &id in &ids {
        states.push(state_of(&t, id).await);
    }
    let queued = states.iter().filter(|s| **s == JobState::Queued).count();
    assert_eq!(queued, 40 - taken as usize, "{states:?}");
    assert!(!states.contains(&JobState::Completed), "{states:?}");

    drop(held);
    for id in ids {
        let t = &t;
        eventually(PATIENCE, "every job completed", || async move {
            state_of(t, id).await == JobState::Completed
        })
        .await;
    }
    let report = worker.stop(Duration::from_secs(5)).await.unwrap();
    assert_eq!((report.finished, report.lost), (40, 0));
    t.close().await;
}

/// Against a queue that holds finishes for company at the fsync, a worker sends the finishes of jobs that end while
/// a call is in flight in calls of their own (the hold would wait for them in vain otherwise), but only once the
/// queue has taken up the last call: those that end while it is busy go together, not in a queue of small calls.
#[tokio::test]
async fn finishes_that_end_while_the_queue_is_busy_go_in_one_call() {
    let t = TestQueue::new().await;
    t.push_batch((0..10).map(|_| Push::new("held")).collect())
        .await;
    let backend = HeldFinishes::holding_for_company(&t.queue);
    // No call is answered until the end: the calls in flight are the hold's company.
    let unanswered = backend.gate.clone().write_owned().await;
    let ended = Arc::new(AtomicU32::new(0));
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let (counter, permits) = (ended.clone(), gate.clone());
    let worker = Worker::builder(&backend, "w")
        .max_concurrency(10)
        .handler("held", move |_| {
            let (counter, permits) = (counter.clone(), permits.clone());
            async move {
                permits
                    .acquire()
                    .await
                    .expect("the gate stays open")
                    .forget();
                counter.fetch_add(1, Ordering::SeqCst);
                Ok(())
            }
        })
        .start()
        .unwrap();
    // One job ends: its finish goes alone, and the queue keeps it waiting to be taken up.
    gate.add_permits(1);
    eventually(PATIENCE, "the first call", || async {
        backend.call_sizes() == [1]
    })
    .await;
    // The nine others end one by one while it waits: no call goes for them yet.
    for n in 2..=10 {
        gate.add_permits(1);
        let ended = &ended;
        eventually(PATIENCE, "the job ends", || async move {
            ended.load(Ordering::SeqCst) == n
        })
        .await;
        tokio::task::yield_now().await;
        // A call for a job that ended earlier would show by now: the completer had its turns while the test
        // waited for this one (and a call for the last one shows as a third call below).
        assert_eq!(backend.call_sizes(), [1], "{n} jobs ended");
    }
    // Taken up: the nine go in the next call, together, though the first is still unanswered.
    backend.take_up_calls();
    eventually(PATIENCE, "the second call", || async {
        backend.call_sizes() == [1, 9]
    })
    .await;
    backend.take_up_calls();
    drop(unanswered);
    let report = worker.stop(Duration::from_secs(5)).await.unwrap();
    assert_eq!((report.finished, report.lost), (10, 0));
    t.close().await;
}

/// Jobs that end together free their slots before the worker asks for more: one request takes jobs for all of
/// them, rather than one request per job.
#[tokio::test]
async fn jobs_that_end_together_are_replaced_in_one_request() {
    let t = TestQueue::new().await;
    t.push_batch((0..12).map(|_| Push::new("held")).collect())
        .await;
    let backend = HeldFinishes::new(&t.queue);
    let started = Arc::new(AtomicU32::new(0));
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let (counter, permits) = (started.clone(), gate.clone());
    let worker = Worker::builder(&backend, "w")
        .max_concurrency(4)
        .handler("held", move |_| {
            let (counter, permits) = (counter.clone(), permits.clone());
            async move {
                counter.fetch_add(1, Ordering::SeqCst);
                permits
                    .acquire()
                    .await
                    .expect("the gate stays open")
                    .forget();
                Ok(())
            }
        })
        .start()
        .unwrap();
    eventually(PATIENCE, "four jobs start", || async {
        started.load(Ordering::SeqCst) == 4
    })
    .await;
    // The four running jobs end at once.
    gate.add_permits(4);
    eventually(PATIENCE, "four more start", || async {
        started.load(Ordering::SeqCst) == 8
    })
    .await;
    let asked = backend.asked.lock().unwrap().clone();
    assert_eq!(
        &asked[..2],
        [4, 4],
        "the four slots refilled by one request: {asked:?}"
    );
    gate.add_permits(100);
    worker.stop(Duration::from_secs(5)).await.unwrap();
    t.close().await;
}

/// Jobs of the `default` queue that completed.
async fn completed(t: &TestQueue) -> u64 {
    let stats = t.queue.queue_stats().await.unwrap();
    stats
        .iter()
        .find(|s| s.queue == "default")
        .map_or(0, |s| s.completed)
}

/// `min_concurrency` is the refill threshold: a worker of 4 slots with a threshold of 2 takes 4 jobs, takes none
/// while 3 or 2 of them still run, and tops up to 4 in one request once fewer than 2 run.
#[tokio::test]
async fn a_worker_takes_more_jobs_only_once_fewer_than_min_concurrency_run() {
    let t = TestQueue::new().await;
    for _ in 0..10 {
        t.push("held").await;
    }
    let started = Arc::new(AtomicU32::new(0));
    // Each handler waits for a permit: a permit added lets one job end.
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let (counter, permits) = (started.clone(), gate.clone());
    // Notes each request for jobs; finishes go through at once.
    let backend = HeldFinishes::new(&t.queue);
    let worker = Worker::builder(&backend, "w")
        .max_concurrency(4)
        .min_concurrency(2)
        .handler("held", move |_| {
            let (counter, permits) = (counter.clone(), permits.clone());
            async move {
                counter.fetch_add(1, Ordering::SeqCst);
                permits
                    .acquire()
                    .await
                    .expect("the gate stays open")
                    .forget();
                Ok(())
            }
        })
        .start()
        .unwrap();
    eventually(PATIENCE, "four jobs start", || async {
        started.load(Ordering::SeqCst) == 4
    })
    .await;
    for ended in [1, 2] {
        gate.add_permits(1);
        eventually(PATIENCE, "the job ends", || async {
            completed(&t).await == ended
        })
        .await;
        // The worker decides whether to take more as each job ends, before the job's finish reaches the queue: a
        // request would show by now.
        assert_eq!(
            backend.asked(),
            [4],
            "{} still running, not below the threshold of 2",
            4 - ended
        );
        assert_eq!(
            started.load(Ordering::SeqCst),
            4,
            "{} still running, not below the threshold of 2",
            4 - ended
        );
    }
    gate.add_permits(1);
    eventually(
        PATIENCE,
        "three more start, back to four running",
        || async { started.load(Ordering::SeqCst) == 7 },
    )
    .await;
    // The worker decided when the three jobs came, before they started: one request, for three.
    assert_eq!(backend.asked(), [4, 3], "never past four running");
    assert_eq!(started.load(Ordering::SeqCst), 7, "never past four running");
    gate.add_permits(100);
    worker.stop(Duration::from_secs(10)).await.unwrap();
    t.close().await;
}
