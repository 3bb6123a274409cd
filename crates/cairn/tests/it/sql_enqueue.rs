//! Enqueueing inside the application's own PostgreSQL transaction: the schema's `cairn_enqueue` and `cairn_push`
//! functions (migration 0007), called as any language would, and `Queue::enqueue_in_postgres` on them. A job
//! exists if and only if the application's transaction commits, wakes a worker on another node at the commit, and
//! is checked by the same rules as a push: the last test pushes the same generated jobs both ways and compares.

use cairn::Jobs;
use std::time::Duration;

use cairn::{
    ConfigKey, ConfigValue, Dequeue, ErrorKind, JobId, JobState, Push, Queue, RetryOverrides,
    RetryPolicy,
};
use proptest::prelude::*;
use proptest::strategy::ValueTree;

use crate::harness::TestDatabase;

async fn node(db: &TestDatabase) -> Queue {
    Queue::open(&db.url).await.unwrap()
}

/// Runs `f` on a session of the application's own, off the async runtime (the synchronous driver runs one of
/// its own).
async fn app<T: Send + 'static>(
    db: &TestDatabase,
    f: impl FnOnce(&mut postgres::Client) -> T + Send + 'static,
) -> T {
    let url = db.url.clone();
    tokio::task::spawn_blocking(move || {
        let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        f(&mut client)
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_enqueued_in_a_transaction_that_rolls_back_never_exists() {
    let db = TestDatabase::new();
    let queue = node(&db).await;
    let (by_sql, by_rust) = {
        let queue = queue.clone();
        app(&db, move |client| {
            let mut tx = client.transaction().unwrap();
            let by_sql: i64 = tx
                .query_one("SELECT cairn_enqueue('report.build', '{\"n\": 1}')", &[])
                .unwrap()
                .get(0);
            let by_rust = queue
                .enqueue_in_postgres(&mut tx, &Push::new("report.build"))
                .unwrap();
            // Inside the transaction, both are there.
            let seen: i64 = tx
                .query_one("SELECT count(*) FROM jobs", &[])
                .unwrap()
                .get(0);
            assert_eq!(seen, 2);
            tx.rollback().unwrap();
            (by_sql, by_rust.id)
        })
        .await
    };
    for id in [JobId(by_sql), by_rust] {
        assert_eq!(queue.get(id).await.unwrap_err().kind(), ErrorKind::NotFound);
    }
    let left: (i64, i64, i64) = app(&db, |client| {
        let row = client
            .query_one(
                "SELECT (SELECT count(*) FROM jobs), (SELECT count(*) FROM activity), \
                 (SELECT coalesce(sum(added), 0)::bigint FROM stats_minute)",
                &[],
            )
            .unwrap();
        (row.get(0), row.get(1), row.get(2))
    })
    .await;
    assert_eq!(left, (0, 0, 0), "jobs, activity rows, statistics");
    // Nothing to take either.
    let taken = queue.dequeue(Dequeue::new("w")).await.unwrap();
    assert!(taken.is_empty());
    queue.close(Duration::from_secs(10)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_committed_job_reaches_a_worker_long_polling_on_another_node() {
    let db = TestDatabase::new();
    // Node a is where the application's database users are; node b's worker waits.
    let a = node(&db).await;
    let b = node(&db).await;
    for (call, queue_name) in [
        (
            "SELECT cairn_enqueue('mail.send', '{\"to\": \"ada\"}', '{\"queue\": \"mail\"}')",
            "mail",
        ),
        ("rust", "reports"),
    ] {
        let waiting = {
            let b = b.clone();
            tokio::spawn(async move {
                b.dequeue(
                    Dequeue::new("b")
                        .queue(queue_name)
                        .wait(Duration::from_secs(60)),
                )
                .await
                .unwrap()
            })
        };
        b.settle().await.unwrap();
        assert!(!waiting.is_finished());
        let a_for_app = a.clone();
        let id: i64 = app(&db, move |client| {
            let mut tx = client.transaction().unwrap();
            let id = if call == "rust" {
                let push = Push::new("report.build").queue(queue_name);
                a_for_app.enqueue_in_postgres(&mut tx, &push).unwrap().id.0
            } else {
                tx.query_one(call, &[]).unwrap().get(0)
            };
            tx.commit().unwrap();
            id
        })
        .await;
        // Woken by the commit's notification: without it, the poll would run out its minute. The bound only keeps
        // a broken wake from hanging the suite.
        let claimed = tokio::time::timeout(Duration::from_secs(30), waiting)
            .await
            .expect("the waiting worker was not woken by the commit")
            .unwrap();
        assert_eq!(claimed.len(), 1);
        assert_eq!(claimed[0].job.id, JobId(id));
        b.finish(&claimed[0].lease, None).await.unwrap();
    }
    let job = a.get(JobId(1)).await.unwrap();
    assert_eq!(job.data, serde_json::json!({"to": "ada"}));
    assert_eq!(job.state, JobState::Completed);
    b.close(Duration::from_secs(10)).await.unwrap();
    a.close(Duration::from_secs(10)).await.unwrap();
}

/// The first keyed jobs of a queue, enqueued in SQL, reach a worker already waiting on another node (which had the
/// queue as one without keys), under the key's limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyed_jobs_enqueued_in_sql_reach_a_waiting_worker_under_their_limit() {
    let db = TestDatabase::new();
    let b = node(&db).await;
    let waiting = {
        let b = b.clone();
        tokio::spawn(async move {
            b.dequeue(
                Dequeue::new("b")
                    .queue("tenants")
                    .limit(10)
                    .wait(Duration::from_secs(60)),
            )
            .await
            .unwrap()
        })
    };
    b.settle().await.unwrap();
    let ids: Vec<i64> = app(&db, |client| {
        let mut tx = client.transaction().unwrap();
        let ids = (0..3)
            .map(|_| {
                tx.query_one(
                    "SELECT cairn_enqueue('sync', '{}', \
                     '{\"queue\": \"tenants\", \"concurrency\": {\"key\": \"customer:42\", \"limit\": 2}}')",
                    &[],
                )
                .unwrap()
                .get(0)
            })
            .collect();
        tx.commit().unwrap();
        ids
    })
    .await;
    let claimed = tokio::time::timeout(Duration::from_secs(30), waiting)
        .await
        .expect("the waiting worker was not woken by the commit")
        .unwrap();
    assert_eq!(claimed.len(), 2, "two of the key's three, its limit");
    for c in &claimed {
        assert!(ids.contains(&c.job.id.0));
        assert_eq!(
            c.job.concurrency_key.as_ref().unwrap().as_str(),
            "customer:42"
        );
        assert_eq!(c.job.concurrency_limit, Some(2));
    }
    let err = app(&db, |client| {
        client
            .query_one(
                "SELECT cairn_enqueue('x', '{}', '{\"concurrency\": {\"key\": \"k\", \"limit\": 0}}')",
                &[],
            )
            .unwrap_err()
            .as_db_error()
            .and_then(|e| e.column().map(str::to_owned))
    })
    .await;
    assert_eq!(err.as_deref(), Some("concurrency.limit"));
    b.close(Duration::from_secs(10)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_raises_an_error_naming_the_field() {
    let db = TestDatabase::new();
    let queue = node(&db).await;
    // From SQL: SQLSTATE 22023 with the field as the error's column.
    let refused: Vec<(String, String)> = app(&db, |client| {
        let calls = [
            "SELECT cairn_enqueue('', '{}')",
            "SELECT cairn_enqueue('x', '{}', '{\"queue\": \"no spaces\"}')",
            "SELECT cairn_enqueue('x', '{}', '{\"weight\": 0}')",
            "SELECT cairn_enqueue('x', '{}', '{\"priority\": \"high\"}')",
            "SELECT cairn_enqueue('x', '{}', '{\"run_at\": \"tomorrow\"}')",
            "SELECT cairn_enqueue('x', '{}', '{\"retry\": {\"max_attempts\": 3, \"max_delay_ms\": 10}}')",
            "SELECT cairn_enqueue('x', '{}', '{\"lease_timeout_ms\": 5}')",
            "SELECT cairn_enqueue('x', '{}', '{\"tags\": [\"ok\", 7]}')",
            "SELECT cairn_enqueue('x', '{}', '{\"depends_on\": [1]}')",
            "SELECT cairn_enqueue('x', '{}', '{\"throttle\": {\"key\": \"k\", \"period_ms\": 1000}}')",
            "SELECT cairn_enqueue('x', '{}', '{\"colour\": \"red\"}')",
            "SELECT cairn_enqueue(E'line\\nbreak', '{}')",
        ];
        calls
            .iter()
            .map(|call| {
                let e = client.query_one(*call, &[]).unwrap_err();
                let db = e.as_db_error().unwrap_or_else(|| panic!("{call}: {e}"));
                assert_eq!(db.code().code(), "22023", "{call}: {db}");
                (
                    db.column().unwrap_or_default().to_owned(),
                    db.message().to_owned(),
                )
            })
            .collect()
    })
    .await;
    let fields: Vec<&str> = refused.iter().map(|(f, _)| f.as_str()).collect();
    assert_eq!(
        fields,
        [
            "name",
            "queue",
            "weight",
            "priority",
            "run_at",
            "retry.initial_delay_ms",
            "lease_timeout_ms",
            "tags",
            "depends_on",
            "throttle",
            "colour",
            "name"
        ]
    );
    for (field, message) in &refused {
        assert!(message.starts_with(&format!("{field}: ")), "{message}");
    }
    assert!(refused[11].1.contains("control characters"), "{refused:?}");
    assert!(
        refused[9].1.contains("not taken by cairn_enqueue"),
        "{refused:?}"
    );

    // From Rust: the engine's invalid input, with the field; nothing was written.
    let errors = {
        let queue = queue.clone();
        app(&db, move |client| {
            let pushes = [
                Push::new("x").weight(2000),
                Push::new("x").tag("a".repeat(129)),
                Push::new("x").schedule("DAILY"),
                Push::new("x").retry(RetryPolicy {
                    jitter: 1.5,
                    ..RetryPolicy::default()
                }),
                // What the schema's function does not know is refused rather than dropped.
                Push::new("x").children(cairn::Children::OfTheJob),
            ];
            pushes
                .iter()
                .map(|push| {
                    let mut tx = client.transaction().unwrap();
                    let e = queue.enqueue_in_postgres(&mut tx, push).unwrap_err();
                    (e.kind(), e.field().map(str::to_owned))
                })
                .collect::<Vec<_>>()
        })
        .await
    };
    assert_eq!(
        errors,
        [
            (ErrorKind::InvalidInput, Some("weight".to_owned())),
            (ErrorKind::InvalidInput, Some("tags".to_owned())),
            (ErrorKind::InvalidInput, Some("schedule".to_owned())),
            (ErrorKind::InvalidInput, Some("retry.jitter".to_owned())),
            (ErrorKind::InvalidInput, Some("children".to_owned())),
        ]
    );
    let jobs: i64 = app(&db, |client| {
        client
            .query_one("SELECT count(*) FROM jobs", &[])
            .unwrap()
            .get(0)
    })
    .await;
    assert_eq!(jobs, 0);
    queue.close(Duration::from_secs(10)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_unique_key_held_by_a_live_job_answers_with_that_job() {
    let db = TestDatabase::new();
    let queue = node(&db).await;
    let first = queue
        .enqueue(Push::new("sync").unique_key("account:7"))
        .await
        .unwrap();
    let again = {
        let queue = queue.clone();
        app(&db, move |client| {
            let mut tx = client.transaction().unwrap();
            let push = Push::new("sync").unique_key("account:7");
            let again = queue.enqueue_in_postgres(&mut tx, &push).unwrap();
            let row = tx
                .query_one(
                    "SELECT id, state, existing FROM cairn_push('sync', '{}', '{\"unique_key\": \"account:7\"}')",
                    &[],
                )
                .unwrap();
            tx.commit().unwrap();
            (again, row.get::<_, i64>(0), row.get::<_, String>(1), row.get::<_, bool>(2))
        })
        .await
    };
    assert_eq!(again.0.id, first.id);
    assert!(again.0.existing);
    assert_eq!(
        (again.1, again.2.as_str(), again.3),
        (first.id.0, "queued", true)
    );

    // Two applications' transactions with one new key at once: one job; the second waits for the first's commit
    // and then answers with its job.
    let url = db.url.clone();
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    let (commit_tx, commit_rx) = std::sync::mpsc::channel::<()>();
    let holder = std::thread::spawn(move || {
        let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        let mut tx = client.transaction().unwrap();
        let id: i64 = tx
            .query_one(
                "SELECT cairn_enqueue('sync', '{}', '{\"unique_key\": \"account:8\"}')",
                &[],
            )
            .unwrap()
            .get(0);
        let pid: i32 = tx.query_one("SELECT pg_backend_pid()", &[]).unwrap().get(0);
        started_tx.send(pid).unwrap();
        commit_rx.recv().unwrap();
        tx.commit().unwrap();
        id
    });
    let url = db.url.clone();
    let holder_pid = tokio::task::spawn_blocking(move || started_rx.recv().unwrap())
        .await
        .unwrap();
    let second = std::thread::spawn(move || {
        let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        let row = client
            .query_one(
                "SELECT id, existing FROM cairn_push('sync', '{}', '{\"unique_key\": \"account:8\"}')",
                &[],
            )
            .unwrap();
        (row.get::<_, i64>(0), row.get::<_, bool>(1))
    });
    // The first commits once the second waits for it.
    let url = db.url.clone();
    crate::harness::eventually(
        crate::harness::PATIENCE,
        "the second transaction waits for the first",
        || {
            let url = url.clone();
            async move {
                tokio::task::spawn_blocking(move || {
                    let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
                    client
                        .query_one(
                            "SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid))",
                            &[&holder_pid],
                        )
                        .unwrap()
                        .get::<_, i64>(0)
                        == 1
                })
                .await
                .unwrap()
            }
        },
    )
    .await;
    commit_tx.send(()).unwrap();
    let held = holder.join().unwrap();
    assert_eq!(second.join().unwrap(), (held, true));
    queue.close(Duration::from_secs(10)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_on_sqlite_refuses_enqueue_in_postgres() {
    let db = TestDatabase::new();
    let dir = tempfile::tempdir().unwrap();
    let queue = Queue::open(dir.path().join("q.db")).await.unwrap();
    let e = app(&db, move |client| {
        let mut tx = client.transaction().unwrap();
        queue
            .enqueue_in_postgres(&mut tx, &Push::new("x"))
            .unwrap_err()
    })
    .await;
    assert_eq!(e.kind(), ErrorKind::InvalidState);
}

/// Mostly one of `valid`, sometimes one of `invalid`: most generated jobs break one rule at most, so that both
/// accepted and refused jobs are common.
fn mostly<T: Clone + std::fmt::Debug + 'static>(
    valid: Vec<T>,
    invalid: Vec<T>,
) -> BoxedStrategy<T> {
    prop_oneof![9 => prop::sample::select(valid), 1 => prop::sample::select(invalid)].boxed()
}

/// A job to push: a few values on each side of every rule.
fn job() -> impl Strategy<Value = Push> {
    let s = |v: &str| v.to_owned();
    let queue = mostly(
        vec![s("default"), s("mail"), s("q:1.a-b_c"), "q".repeat(128)],
        vec![String::new(), s("has space"), "q".repeat(129)],
    );
    let name = mostly(
        vec![s("email.send"), s("é?[x]*"), "n".repeat(255)],
        vec![
            String::new(),
            "n".repeat(256),
            s("bell\u{7}"),
            s("next\u{85}line"),
            s("del\u{7f}"),
        ],
    );
    let priority = prop::sample::select(vec![i32::MIN, -3, 0, 9, i32::MAX]);
    let weight = mostly(vec![1u32, 7, 1000], vec![0, 1001]);
    let timing = mostly(vec![0u8, 1, 2, 3], vec![4]);
    let ms = |valid: Vec<u64>, invalid: Vec<u64>| prop::option::of(mostly(valid, invalid));
    let lease = ms(vec![100, 30_000, 86_400_000], vec![99, 86_400_001]);
    let timeout = ms(vec![100, 5_000, 86_400_000], vec![99, 86_400_001]);
    // Each part of a policy given or left to the defaults: a push may set only some.
    let retry = prop::option::of((
        prop::option::of(mostly(vec![1u32, 3], vec![0])),
        prop::option::of(prop::sample::select(vec![0u64, 10, 1_000])),
        prop::option::of(mostly(vec![1.0f64, 2.5], vec![0.5])),
        prop::option::of(mostly(vec![1_000u64, 60_000], vec![5])),
        prop::option::of(mostly(vec![0.0f64, 0.3, 1.0], vec![-0.1, 1.1])),
    ));
    let unique = mostly(vec![0u8, 1], vec![2, 3, 4]);
    let tags = mostly(
        vec![
            vec![],
            vec![s("a")],
            vec![s("b"), s("a"), s("b")],
            vec!["t".repeat(128)],
        ],
        vec![vec![String::new()], vec!["t".repeat(129)]],
    );
    let data_len = mostly(vec![0usize, 20, 52], vec![53]);
    let concurrency = mostly(vec![0u8, 1, 2], vec![3, 4, 5]);
    let trace = mostly(vec![0u8, 1], vec![2, 3, 4, 5]);
    (
        (queue, name, priority, weight, timing),
        (
            lease,
            timeout,
            retry,
            unique,
            tags,
            data_len,
            concurrency,
            trace,
        ),
    )
        .prop_map(
            |(
                (queue, name, priority, weight, timing),
                (lease, timeout, retry, unique, tags, data_len, concurrency, trace),
            )| {
                let mut push = Push::new(name)
                    .queue(queue)
                    .priority(priority)
                    .weight(weight);
                match timing {
                    1 => push = push.run_at("2020-01-01T00:00:00Z".parse().unwrap()),
                    2 => push = push.run_at("2999-06-01T12:30:00.125+02:00".parse().unwrap()),
                    3 => push = push.delay(Duration::from_millis(90_000)),
                    4 => {
                        push = push
                            .run_at("2999-01-01T00:00:00Z".parse().unwrap())
                            .delay(Duration::from_secs(1));
                    }
                    _ => {}
                }
                push.lease_timeout = lease.map(Duration::from_millis);
                push.timeout = timeout.map(Duration::from_millis);
                if let Some((max_attempts, initial, multiplier, max, jitter)) = retry {
                    push = push.retry(RetryOverrides {
                        max_attempts,
                        initial_delay: initial.map(Duration::from_millis),
                        multiplier,
                        max_delay: max.map(Duration::from_millis),
                        jitter,
                    });
                }
                // Each valid key is made unique per job below, so that the two paths do not meet.
                push.unique_key = match unique {
                    1 => Some("key".to_owned()),
                    2 => Some(String::new()),
                    3 => Some("k".repeat(256)),
                    4 => Some("tab\tkey".to_owned()),
                    _ => None,
                };
                push.tags = tags;
                let key = |key: &str, limit: Option<u32>| {
                    Some(cairn::Concurrency {
                        key: key.to_owned(),
                        limit,
                    })
                };
                push.concurrency = match concurrency {
                    1 => key("customer:42", None),
                    2 => key("customer:7", Some(3)),
                    3 => key("", None),
                    4 => key("k", Some(0)),
                    5 => key("k", Some(1_000_001)),
                    _ => None,
                };
                let valid_trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
                push.trace_parent = match trace {
                    1 => Some(valid_trace.to_owned()),
                    2 => Some(valid_trace.to_uppercase()),
                    3 => Some(valid_trace.replacen("00-", "01-", 1)),
                    4 => Some(format!("00-{}-00f067aa0ba902b7-01", "0".repeat(32))),
                    5 => Some("00-4bf92f35-00f067aa0ba902b7-01".to_owned()),
                    _ => None,
                };
                // {"s":"…"} is 8 bytes of JSON around the string: 52 and 53 bytes straddle the 60-byte limit.
                push.data = serde_json::json!({ "s": "x".repeat(data_len) });
                push
            },
        )
}

/// What a stored job is, as far as a push decides it (its id, and times that follow the clock, left out).
const STORED: &str = "SELECT queue, name, state, data::text, priority, weight, run_at - created_at, run_at, \
     slot_at = run_at, max_attempts, backoff_initial_ms, backoff_multiplier, backoff_max_ms, backoff_jitter, \
     lease_timeout_ms, timeout_ms, aging_ms, concurrency_key, concurrency_limit, trace_parent, \
     coalesce((SELECT string_agg(tag, ',' ORDER BY tag) FROM job_tags \
     WHERE job_id = jobs.id), ''), (SELECT count(*) FROM activity WHERE job_id = jobs.id AND event = 'added') \
     FROM jobs WHERE id = $1";

fn stored(client: &mut postgres::Client, id: JobId, explicit_run_at: bool) -> Vec<String> {
    let row = client.query_one(STORED, &[&id.0]).unwrap();
    let mut out = Vec::new();
    for i in 0..row.len() {
        // The delay when the push gave one (or none); the time itself when it gave one.
        if (i == 6 && explicit_run_at) || (i == 7 && !explicit_run_at) {
            continue;
        }
        let text = match row.columns()[i].type_().name() {
            "text" => row.get::<_, Option<String>>(i),
            "int8" => row.get::<_, Option<i64>>(i).map(|v| v.to_string()),
            "float8" => row.get::<_, Option<f64>>(i).map(|v| v.to_string()),
            "bool" => row.get::<_, Option<bool>>(i).map(|v| v.to_string()),
            other => panic!("column {i} is {other}"),
        };
        out.push(text.unwrap_or_else(|| "NULL".to_owned()));
    }
    out
}

/// The same generated jobs, pushed through the engine and through `cairn_push`: both accept or both refuse each,
/// and what they store is the same. Defaults come from options set at run time on both paths.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sql_function_checks_and_stores_a_job_as_a_push_does() {
    let db = TestDatabase::new();
    let queue = node(&db).await;
    queue
        .set_config(ConfigKey::MaxDataBytes, ConfigValue::Count(60))
        .await
        .unwrap();
    queue
        .set_config(
            ConfigKey::DefaultLeaseTimeout,
            ConfigValue::Duration(Duration::from_secs(45)),
        )
        .await
        .unwrap();
    queue
        .set_config(ConfigKey::RetryMaxAttempts, ConfigValue::Count(9))
        .await
        .unwrap();
    queue
        .set_config(
            ConfigKey::RetryInitialDelay,
            ConfigValue::Duration(Duration::from_millis(2_500)),
        )
        .await
        .unwrap();
    queue
        .age_queue("mail", Some(Duration::from_secs(30)))
        .await
        .unwrap();

    // Generated, not shrunk: a failure prints the job.
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = job();
    let jobs: Vec<Push> = (0..400)
        .map(|_| strategy.new_tree(&mut runner).unwrap().current())
        .collect();
    let (mut accepted, mut refused) = (0, 0);
    for (n, mut push) in jobs.into_iter().enumerate() {
        let explicit_run_at = push.run_at.is_some();
        let mut by_sql = push.clone();
        if push.unique_key.as_deref() == Some("key") {
            push.unique_key = Some(format!("key-{n}-engine"));
            by_sql.unique_key = Some(format!("key-{n}-sql"));
        }
        let engine = queue.enqueue(push.clone()).await;
        let sql = {
            let queue = queue.clone();
            app(&db, move |client| {
                let mut tx = client.transaction().unwrap();
                let enqueued = queue.enqueue_in_postgres(&mut tx, &by_sql);
                if enqueued.is_ok() {
                    tx.commit().unwrap();
                }
                enqueued
            })
            .await
        };
        match (engine, sql) {
            (Ok(engine), Ok(sql)) => {
                assert_eq!(engine.state, sql.state, "{push:?}");
                assert!(!engine.existing && !sql.existing);
                let (e, s) = app(&db, move |client| {
                    (
                        stored(client, engine.id, explicit_run_at),
                        stored(client, sql.id, explicit_run_at),
                    )
                })
                .await;
                assert_eq!(e, s, "{push:?}");
                accepted += 1;
            }
            (Err(engine), Err(sql)) => {
                // Bad input, or a keyed job for `mail`, whose priority aging keys do not go with.
                assert!(
                    matches!(
                        engine.kind(),
                        ErrorKind::InvalidInput | ErrorKind::InvalidState
                    ),
                    "{push:?}: {engine}"
                );
                assert_eq!(sql.kind(), engine.kind(), "{push:?}: {engine} / {sql}");
                refused += 1;
            }
            (engine, sql) => {
                panic!("{push:?}: the engine answered {engine:?}, the SQL function {sql:?}")
            }
        }
    }
    // Most generated jobs break some rule; enough of each kind for the comparison to mean something.
    assert!(
        accepted >= 5 && refused >= 50,
        "{accepted} accepted, {refused} refused"
    );
    queue.close(Duration::from_secs(10)).await.unwrap();
}

/// A push with a batch is refused in the application's transaction, naming the field: a batch's counts and callbacks
/// are the engine's to keep, and the schema's function knows nothing of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_with_a_batch_is_refused_in_the_applications_transaction() {
    let db = TestDatabase::new();
    let queue = node(&db).await;
    let batch = queue
        .create_batch(cairn::CreateBatch::default().open())
        .await
        .unwrap()
        .batch;
    let refused = {
        let queue = queue.clone();
        app(&db, move |client| {
            let mut tx = client.transaction().unwrap();
            queue
                .enqueue_in_postgres(&mut tx, &Push::new("part").batch(batch))
                .unwrap_err()
        })
        .await
    };
    assert_eq!(
        (refused.kind(), refused.field()),
        (ErrorKind::InvalidInput, Some("batch"))
    );
    assert_eq!(queue.batch(batch).await.unwrap().total, 0);
}

/// A producer's role with no right on Cairn's tables, only EXECUTE on the two functions (docs/postgres.md): it
/// enqueues in its own transaction, the job is checked as any push, and it can neither read nor write the tables.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_role_that_may_only_call_cairn_enqueue_pushes_jobs_and_touches_nothing_else() {
    let db = TestDatabase::new();
    let queue = node(&db).await;
    // Roles belong to the cluster, which other tests share: a name of this test's own, dropped at the end.
    let role = format!("cairn_producer_{}", std::process::id());
    let setup = format!(
        "DROP ROLE IF EXISTS {role}; CREATE ROLE {role} LOGIN; \
         GRANT USAGE ON SCHEMA public TO {role}; \
         GRANT EXECUTE ON FUNCTION cairn_enqueue(text, json, jsonb), cairn_push(text, json, jsonb) TO {role}"
    );
    app(&db, move |client| client.batch_execute(&setup).unwrap()).await;

    let producer_url = db.url.replacen("://cairn@", &format!("://{role}@"), 1);
    assert_ne!(
        producer_url, db.url,
        "the test cluster's URL names its user"
    );
    let (id, refusals) = tokio::task::spawn_blocking(move || {
        let mut client = postgres::Client::connect(&producer_url, postgres::NoTls).unwrap();
        let mut tx = client.transaction().unwrap();
        let id: i64 = tx
            .query_one(
                "SELECT cairn_enqueue('report.build', '{\"n\": 1}', '{\"queue\": \"reports\"}')",
                &[],
            )
            .unwrap()
            .get(0);
        tx.commit().unwrap();
        let mut refusals = Vec::new();
        for statement in [
            "SELECT count(*) FROM jobs",
            "INSERT INTO jobs (name) VALUES ('x')",
            "DELETE FROM jobs",
            "SELECT cairn_enqueue('', '{}')",
        ] {
            let e = client.batch_execute(statement).expect_err(statement);
            refusals.push(
                e.as_db_error()
                    .map(|d| d.message().to_owned())
                    .unwrap_or_default(),
            );
        }
        (id, refusals)
    })
    .await
    .unwrap();
    let job = queue.get(JobId(id)).await.unwrap();
    assert_eq!(
        (job.name.as_str(), job.queue.as_str()),
        ("report.build", "reports")
    );
    for refusal in &refusals[..3] {
        assert!(refusal.contains("permission denied"), "{refusals:?}");
    }
    // The function still checks what it is given, whoever calls it.
    assert!(refusals[3].starts_with("name:"), "{refusals:?}");

    let drop = format!(
        "REVOKE ALL ON FUNCTION cairn_enqueue(text, json, jsonb), cairn_push(text, json, jsonb) FROM {role}; \
         REVOKE USAGE ON SCHEMA public FROM {role}; DROP ROLE {role}"
    );
    queue.close(Duration::from_secs(5)).await.unwrap();
    app(&db, move |client| client.batch_execute(&drop).unwrap()).await;
}

/// The application's own push is held to the engine's cap on tags (migration 0020's trigger), with the error a bad
/// option gets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_in_sql_is_held_to_the_cap_on_tags() {
    let db = TestDatabase::new();
    let queue = node(&db).await;
    let tags: Vec<String> = (0..=cairn::MAX_TAGS).map(|i| format!("\"t{i}\"")).collect();
    let options = format!("{{\"tags\": [{}]}}", tags.join(","));
    let error = app(&db, move |client| {
        let e = client
            .query_one(
                "SELECT cairn_enqueue('tagged', '{}', CAST($1 AS text)::jsonb)",
                &[&options],
            )
            .unwrap_err();
        let db_error = e.as_db_error().expect("the function's error");
        (
            db_error.code().code().to_owned(),
            db_error.message().to_owned(),
        )
    })
    .await;
    assert_eq!(error.0, "22023");
    assert!(
        error
            .1
            .starts_with("tags: a job holds at most 64 tags, got 65"),
        "{error:?}"
    );
    queue.close(Duration::from_secs(5)).await.unwrap();
}

/// A push in SQL counts in the statistics under its name's family, as a push through the engine does by default:
/// names made per entity add no row each (migration 0023). The job keeps its whole name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_in_sql_counts_under_its_names_family() {
    let db = TestDatabase::new();
    let queue = node(&db).await;
    let (families, names) = app(&db, |client| {
        for account in 1..=50 {
            client
                .query_one(
                    "SELECT cairn_enqueue($1, '{}')",
                    &[&format!("Worker?accountID={account}")],
                )
                .unwrap();
        }
        let families: Vec<(String, i64)> = client
            .query(
                "SELECT name, CAST(sum(added) AS bigint) FROM stats_minute GROUP BY name",
                &[],
            )
            .unwrap()
            .iter()
            .map(|row| (row.get(0), row.get(1)))
            .collect();
        let names: i64 = client
            .query_one("SELECT count(DISTINCT name) FROM jobs", &[])
            .unwrap()
            .get(0);
        (families, names)
    })
    .await;
    assert_eq!(families, [("Worker".to_owned(), 50)]);
    assert_eq!(names, 50);
    queue.close(Duration::from_secs(5)).await.unwrap();
}

/// PUBLIC no longer runs the two functions, which now run with their owner's rights (migration 0019): a role that
/// was given nothing cannot push.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_role_given_nothing_cannot_push() {
    let db = TestDatabase::new();
    let queue = node(&db).await;
    let role = format!("cairn_nobody_{}", std::process::id());
    let setup = format!(
        "DROP ROLE IF EXISTS {role}; CREATE ROLE {role} LOGIN; GRANT USAGE ON SCHEMA public TO {role}"
    );
    app(&db, move |client| client.batch_execute(&setup).unwrap()).await;
    let url = db.url.replacen("://cairn@", &format!("://{role}@"), 1);
    let refused = tokio::task::spawn_blocking(move || {
        let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        let e = client
            .batch_execute("SELECT cairn_enqueue('x', '{}')")
            .unwrap_err();
        e.as_db_error()
            .map(|d| d.message().to_owned())
            .unwrap_or_default()
    })
    .await
    .unwrap();
    assert!(
        refused.contains("permission denied for function cairn_enqueue"),
        "{refused}"
    );
    let drop = format!("REVOKE USAGE ON SCHEMA public FROM {role}; DROP ROLE {role}");
    queue.close(Duration::from_secs(5)).await.unwrap();
    app(&db, move |client| client.batch_execute(&drop).unwrap()).await;
}

/// `cairn_signal` in the application's transaction: a signal rolled back never arrives; one committed wakes a worker
/// waiting on another node and the job receives it; one sent while no job waits is kept (NULL); one for a key only a
/// cancelled job waited for is refused, naming the job. `Queue::signal_in_postgres` runs the same function.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_sent_in_the_application_transaction_arrives_only_if_it_commits() {
    use cairn::{SignalKey, SignalSent, SignalWait, StepName};
    let db = TestDatabase::new();
    let a = node(&db).await;
    let b = node(&db).await;
    let id = a.enqueue(Push::new("order")).await.unwrap().id;
    let claimed = a.dequeue(Dequeue::new("w")).await.unwrap().remove(0);
    let key = SignalKey::parse("order-1/packed").unwrap();
    let hour = Duration::from_secs(3600);
    let waited = a
        .wait_for_signal(
            &claimed.lease,
            StepName::parse("packed").unwrap(),
            key.clone(),
            hour,
        )
        .await
        .unwrap();
    assert!(matches!(waited, SignalWait::Suspended { .. }));

    let rolled_back: Option<i64> = app(&db, |client| {
        let mut tx = client.transaction().unwrap();
        let row = tx
            .query_one(
                "SELECT cairn_signal('order-1/packed', '{\"parcel\": 1}')",
                &[],
            )
            .unwrap();
        tx.rollback().unwrap();
        row.get(0)
    })
    .await;
    assert_eq!(rolled_back, Some(id.0), "it would have gone to the job");
    assert_eq!(a.get(id).await.unwrap().state, JobState::Scheduled);

    let waiting = {
        let b = b.clone();
        tokio::spawn(async move {
            b.dequeue(Dequeue::new("b").wait(Duration::from_secs(60)))
                .await
                .unwrap()
        })
    };
    b.settle().await.unwrap();
    let sent = {
        let a = a.clone();
        let key = key.clone();
        app(&db, move |client| {
            let mut tx = client.transaction().unwrap();
            let sent = a
                .signal_in_postgres(&mut tx, &key, &serde_json::json!({"parcel": 2}))
                .unwrap();
            tx.commit().unwrap();
            sent
        })
        .await
    };
    assert_eq!(sent, SignalSent::Delivered { job: id });
    let woken = tokio::time::timeout(Duration::from_secs(30), waiting)
        .await
        .expect("the waiting worker was not woken by the commit")
        .unwrap();
    assert_eq!(woken[0].job.id, id);
    let received = b
        .wait_for_signal(
            &woken[0].lease,
            StepName::parse("packed").unwrap(),
            key,
            hour,
        )
        .await
        .unwrap();
    assert_eq!(
        received,
        SignalWait::Received(serde_json::json!({"parcel": 2}))
    );

    let kept: Option<i64> = app(&db, |client| {
        client
            .query_one("SELECT cairn_signal('nobody-waits', 'true')", &[])
            .unwrap()
            .get(0)
    })
    .await;
    assert_eq!(kept, None);
    b.cancel(id).await.unwrap();
    let (refused, bad) = app(&db, |client| {
        // The job was cancelled after its wait was answered: its key is free, so this one is kept.
        let kept: Option<i64> = client
            .query_one("SELECT cairn_signal('order-1/packed', '1')", &[])
            .unwrap()
            .get(0);
        assert_eq!(kept, None);
        client
            .execute(
                "UPDATE jobs SET signal_key = 'order-2', signal_step = 's', state = 'cancelled'",
                &[],
            )
            .unwrap();
        let refused = client
            .query_one("SELECT cairn_signal('order-2', '1')", &[])
            .unwrap_err();
        let bad = client
            .query_one("SELECT cairn_signal('', '1')", &[])
            .unwrap_err();
        // A snapshot taken before the key's lock could miss a wait: refused, not kept.
        let mut strict = client
            .build_transaction()
            .isolation_level(postgres::IsolationLevel::RepeatableRead)
            .start()
            .unwrap();
        let isolation = strict
            .query_one("SELECT cairn_signal('order-3', '1')", &[])
            .unwrap_err();
        assert_eq!(
            isolation.as_db_error().unwrap().message(),
            "cairn_signal needs a READ COMMITTED transaction, got REPEATABLE READ: a snapshot taken before its lock \
             could miss a job starting to wait"
        );
        strict.rollback().unwrap();
        (
            refused.as_db_error().unwrap().message().to_owned(),
            bad.as_db_error().unwrap().message().to_owned(),
        )
    })
    .await;
    assert_eq!(
        refused,
        format!(
            "job {id} waited for signal \"order-2\" and was cancelled: the signal is refused, not kept"
        )
    );
    assert_eq!(bad, "key: must not be empty");
    a.close(Duration::from_secs(10)).await.unwrap();
    b.close(Duration::from_secs(10)).await.unwrap();
}

/// A step recorded in the application's transaction (`cairn_record_step`, `Queue::record_step_in_postgres`): a
/// handler's change to its own table and the step that says it was made commit together or not at all, so a job run
/// again after a failure finds the step (`JobContext::open_step`) and does not make the change twice. A lease no
/// longer held is refused as lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_recorded_in_the_application_transaction_commits_with_its_change() {
    use cairn::{OpenStep, StepName, Worker};
    let db = TestDatabase::new();
    let queue = node(&db).await;
    app(&db, |client| {
        client
            .batch_execute("CREATE TABLE payments (order_id bigint, amount bigint)")
            .unwrap();
    })
    .await;
    // By hand: a rolled-back transaction records nothing and pays nothing.
    let id = queue
        .enqueue(Push::new("order").retry(RetryPolicy::immediate(3)))
        .await
        .unwrap()
        .id;
    let claimed = queue.dequeue(Dequeue::new("w")).await.unwrap().remove(0);
    let lease = claimed.lease.clone();
    {
        let queue = queue.clone();
        app(&db, move |client| {
            let mut tx = client.transaction().unwrap();
            tx.execute("INSERT INTO payments VALUES (1, 1999)", &[])
                .unwrap();
            let name = StepName::parse("charge").unwrap();
            queue
                .record_step_in_postgres(&mut tx, &lease, &name, &serde_json::json!({"paid": 1}))
                .unwrap();
            tx.rollback().unwrap();
        })
        .await;
    }
    assert_eq!(payments(&db).await, 0);
    assert_eq!(queue.get(id).await.unwrap().step_count, 0);
    // Committed, then sent again with another (even an oversized) result: the first stands.
    let (first, again) = {
        let queue = queue.clone();
        let lease = claimed.lease.clone();
        app(&db, move |client| {
            let name = StepName::parse("note").unwrap();
            let mut tx = client.transaction().unwrap();
            let first = queue
                .record_step_in_postgres(&mut tx, &lease, &name, &serde_json::json!("kept"))
                .unwrap();
            tx.commit().unwrap();
            let mut tx = client.transaction().unwrap();
            let big = serde_json::json!("x".repeat(2 * 1024 * 1024));
            let again = queue
                .record_step_in_postgres(&mut tx, &lease, &name, &big)
                .unwrap();
            tx.commit().unwrap();
            (first, again)
        })
        .await
    };
    assert_eq!(first, again);
    assert_eq!(again.result, serde_json::json!("kept"));
    queue.release(&claimed.lease).await.unwrap();
    let stale = {
        let queue = queue.clone();
        let lease = claimed.lease.clone();
        app(&db, move |client| {
            let mut tx = client.transaction().unwrap();
            let name = StepName::parse("charge").unwrap();
            queue
                .record_step_in_postgres(&mut tx, &lease, &name, &serde_json::json!(1))
                .unwrap_err()
        })
        .await
    };
    assert_eq!(stale.kind(), ErrorKind::LeaseLost, "{stale}");

    // Through a worker: the first attempt pays and records in one transaction, then fails; the second finds the
    // step and pays nothing.
    let url = db.url.clone();
    let engine = queue.clone();
    let failed_once = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let worker = Worker::builder(&queue, "w1")
        .handler("order", move |job| {
            let (url, engine, failed_once) = (url.clone(), engine.clone(), failed_once.clone());
            async move {
                let paid = match job.open_step("charge")? {
                    OpenStep::Recorded(paid) => paid,
                    OpenStep::New(name) => {
                        let lease = job.lease().clone();
                        tokio::task::spawn_blocking(move || {
                            let mut client =
                                postgres::Client::connect(&url, postgres::NoTls).unwrap();
                            let mut tx = client.transaction().unwrap();
                            tx.execute("INSERT INTO payments VALUES (1, 1999)", &[])
                                .unwrap();
                            let step = engine
                                .record_step_in_postgres(
                                    &mut tx,
                                    &lease,
                                    &name,
                                    &serde_json::json!({"paid": 1999}),
                                )
                                .unwrap();
                            tx.commit().unwrap();
                            step.result
                        })
                        .await
                        .unwrap()
                    }
                };
                if !failed_once.swap(true, std::sync::atomic::Ordering::SeqCst) {
                    return Err(cairn::JobError::retry("the mail server is down"));
                }
                job.set_result(paid);
                Ok(())
            }
        })
        .start()
        .unwrap();
    crate::harness::eventually(crate::harness::PATIENCE, "the order completes", || async {
        queue.get(id).await.unwrap().state == JobState::Completed
    })
    .await;
    worker.stop(Duration::from_secs(5)).await.unwrap();
    assert_eq!(
        payments(&db).await,
        1,
        "paid once, in the attempt that recorded the step"
    );
    let job = queue.get(id).await.unwrap();
    assert_eq!(job.result, Some(serde_json::json!({"paid": 1999})));
    assert_eq!(
        (
            job.steps
                .iter()
                .find(|s| s.name == "charge")
                .unwrap()
                .attempt
                + 1,
            job.history.len()
        ),
        (job.attempt, 3),
        "recorded by the attempt before the last (the first was given back by hand)"
    );

    let refused = app(&db, move |client| {
        client
            .query_one("SELECT * FROM cairn_record_step(1, 1, '', '1')", &[])
            .unwrap_err()
            .as_db_error()
            .unwrap()
            .message()
            .to_owned()
    })
    .await;
    assert_eq!(refused, "name: must not be empty");
    queue.close(Duration::from_secs(10)).await.unwrap();
}

/// How many rows the test's `payments` table holds.
async fn payments(db: &TestDatabase) -> i64 {
    app(db, |client| {
        client
            .query_one("SELECT count(*) FROM payments", &[])
            .unwrap()
            .get::<_, i64>(0)
    })
    .await
}
