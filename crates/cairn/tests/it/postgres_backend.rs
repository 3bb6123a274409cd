//! The PostgreSQL backend's own parts: its migrations on a real server; `cairn_glob`, the schema's stand-in for
//! SQLite's GLOB, checked against SQLite's own GLOB; the engine's statements prepared on the real schema; and a
//! queue that connects again when its sessions are ended. (The engine's behaviour on PostgreSQL is tested by the
//! `postgres` copy of `engine.rs`.)
//!
//! The server is the private cluster `scripts/test` starts (`scripts/postgres`), named by
//! `CAIRN_TEST_POSTGRES_URL`; each test works in a database of its own, dropped at the end.

use cairn::Jobs;
use proptest::prelude::*;

use crate::harness::{TestDatabase, futures_join_all};

#[test]
fn migrations_bring_a_fresh_database_to_the_schema_once() {
    let db = TestDatabase::new();
    let mut client = db.connect();
    cairn::__private::migrate_postgres(&mut client, 1_000).unwrap();
    // Again, as a second node starting would: nothing more happens.
    cairn::__private::migrate_postgres(&mut db.connect(), 2_000).unwrap();
    let applied: Vec<(i64, String, i64)> = client
        .query(
            "SELECT version, name, applied_at FROM cairn_migrations ORDER BY version",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    assert_eq!(
        applied,
        [
            (1, "schema".to_owned(), 1_000),
            (2, "rate_buckets".to_owned(), 1_000),
            (3, "statistics_per_node".to_owned(), 1_000),
            (4, "own_types".to_owned(), 1_000),
            (5, "leader".to_owned(), 1_000),
            (6, "ready_by_name".to_owned(), 1_000),
            (7, "enqueue_function".to_owned(), 1_000),
            (8, "recurring_overlap".to_owned(), 1_000),
            (9, "debounce".to_owned(), 1_000),
            (10, "throttle".to_owned(), 1_000),
            (11, "concurrency_keys".to_owned(), 1_000),
            (12, "results".to_owned(), 1_000),
            (13, "trace_context".to_owned(), 1_000),
            (14, "batches".to_owned(), 1_000),
            (15, "recurring_pause".to_owned(), 1_000),
            (16, "batch_callbacks".to_owned(), 1_000),
            (17, "batch_total_counted_by_insert".to_owned(), 1_000),
            (18, "push_tells_due_times".to_owned(), 1_000),
            (19, "push_runs_as_its_owner".to_owned(), 1_000),
            (20, "tags_capped".to_owned(), 1_000),
            (21, "children_of_the_job".to_owned(), 1_000),
            (22, "retry_parts".to_owned(), 1_000),
            (23, "sql_pushes_count_by_family".to_owned(), 1_000),
            (24, "job_steps".to_owned(), 1_000),
            (25, "steps_counted_by_insert".to_owned(), 1_000),
            (26, "signals".to_owned(), 1_000),
            (27, "record_step_function".to_owned(), 1_000),
            (28, "suspended_at".to_owned(), 1_000)
        ]
    );
    // The tables and views the engine uses are there, and the ready index orders as on SQLite.
    for table in [
        "jobs",
        "job_attempts",
        "job_tags",
        "job_steps",
        "signals",
        "job_dependencies",
        "recurring",
        "queues",
        "batches",
        "workers",
        "config",
        "activity",
        "stats_minute",
        "stats_histogram",
        "worker_hour",
        "cairn_jobs",
        "cairn_attempts",
        "cairn_activity",
        "cairn_stats_minute",
        "cairn_stats_hour",
        "cairn_workers",
    ] {
        client
            .execute(&format!("SELECT * FROM {table} LIMIT 1"), &[])
            .unwrap_or_else(|e| panic!("{table}: {e}"));
    }
    for (priority, aging) in [(1i64, None::<i64>), (5, None), (0, Some(1000i64))] {
        client
            .execute(
                "INSERT INTO jobs (queue, name, state, data, priority, weight, run_at, max_attempts, \
                 backoff_initial_ms, backoff_multiplier, backoff_max_ms, backoff_jitter, lease_timeout_ms, \
                 created_at, slot_at, aging_ms) VALUES ('q', 'n', 'queued', '{}', $1, 1, 0, 1, 0, 1.0, 0, 0.0, \
                 60000, 0, 0, $2)",
                &[&priority, &aging],
            )
            .unwrap();
    }
    let keys: Vec<i64> = client
        .query(
            "SELECT claim_key FROM jobs ORDER BY claim_key, run_at, id",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(keys, [-5, -1, 0]);
}

#[test]
fn a_database_from_a_newer_cairn_is_refused() {
    let db = TestDatabase::new();
    let mut client = db.connect();
    cairn::__private::migrate_postgres(&mut client, 1_000).unwrap();
    client
        .execute(
            "INSERT INTO cairn_migrations VALUES (999, 'future', 0)",
            &[],
        )
        .unwrap();
    let e = cairn::__private::migrate_postgres(&mut client, 2_000).unwrap_err();
    assert_eq!(e.kind(), cairn::ErrorKind::Storage);
    assert!(e.to_string().contains("newer than this build"), "{e}");
}

/// A database in an encoding other than UTF-8 is refused at open, with the fix in the message: a GLOB's names are
/// found as a range in byte order, which only UTF-8 keeps in code points' order (found in review of issue 19).
#[test]
fn a_database_not_in_utf8_is_refused() {
    let admin = std::env::var("CAIRN_TEST_POSTGRES_URL").expect("the test cluster");
    let name = format!("cairn_latin1_{}", std::process::id());
    let mut client = postgres::Client::connect(&admin, postgres::NoTls).unwrap();
    client
        .batch_execute(&format!(
            "CREATE DATABASE {name} ENCODING 'LATIN1' TEMPLATE template0 LC_COLLATE 'C' LC_CTYPE 'C'"
        ))
        .unwrap();
    let url = format!("{}/{name}", admin.rsplit_once('/').unwrap().0);
    let mut latin1 = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let e = cairn::__private::migrate_postgres(&mut latin1, 1_000).unwrap_err();
    drop(latin1);
    client
        .batch_execute(&format!("DROP DATABASE {name} WITH (FORCE)"))
        .unwrap();
    assert_eq!(e.kind(), cairn::ErrorKind::Storage);
    assert!(
        e.to_string()
            .contains("encoding is LATIN1; Cairn needs UTF8"),
        "{e}"
    );
}

/// A database made by an earlier Cairn, with flags as integers and JSON as text, upgrades in place to PostgreSQL's
/// own types: every value kept, JSON's text as written (its keys' order too), and flags true where they were 1.
#[test]
fn an_existing_database_upgrades_to_json_and_booleans_in_place() {
    let db = TestDatabase::new();
    let mut client = db.connect();
    cairn::__private::migrate_postgres_to(&mut client, 1_000, 3).unwrap();
    client
        .batch_execute(
            "INSERT INTO jobs (queue, name, state, data, progress, priority, weight, run_at, max_attempts, \
             backoff_initial_ms, backoff_multiplier, backoff_max_ms, backoff_jitter, lease_timeout_ms, created_at, \
             slot_at, tracked, has_children) VALUES ('q', 'n', 'queued', '{\"b\": 1, \"a\": [2]}', \
             '{\"done\": 3}', 0, 1, 0, 1, 0, 1.0, 0, 0.0, 60000, 0, 0, 1, 0); \
             INSERT INTO queues (name, paused) VALUES ('q', 1), ('r', 0); \
             INSERT INTO recurring (key, cron, time_zone, missed, template, created_at) \
             VALUES ('k', '* * * * *', 'UTC', 'run-once', '{\"name\": \"n\"}', 0)",
        )
        .unwrap();
    cairn::__private::migrate_postgres(&mut client, 2_000).unwrap();
    let row = client
        .query_one(
            "SELECT data::text, data->'a'->>0, progress->>'done', tracked, has_children, \
             pg_typeof(data)::text, pg_typeof(tracked)::text FROM jobs",
            &[],
        )
        .unwrap();
    let got: (String, String, String, bool, bool, String, String) = (
        row.get(0),
        row.get(1),
        row.get(2),
        row.get(3),
        row.get(4),
        row.get(5),
        row.get(6),
    );
    assert_eq!(
        got,
        (
            r#"{"b": 1, "a": [2]}"#.to_owned(),
            "2".to_owned(),
            "3".to_owned(),
            true,
            false,
            "json".to_owned(),
            "boolean".to_owned()
        )
    );
    let paused: Vec<(String, bool)> = client
        .query("SELECT name, paused FROM queues ORDER BY name", &[])
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(paused, [("q".to_owned(), true), ("r".to_owned(), false)]);
    let template: String = client
        .query_one("SELECT template->>'name' FROM recurring", &[])
        .unwrap()
        .get(0);
    assert_eq!(template, "n");
    // The tracked jobs' index is used as its new predicate says.
    let tracked: i64 = client
        .query_one("SELECT count(*) FROM jobs WHERE tracked", &[])
        .unwrap()
        .get(0);
    assert_eq!(tracked, 1);
}

/// `cairn sql` on PostgreSQL reads into a job's data with PostgreSQL's own JSON operators.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_sql_filters_on_a_key_of_the_data() {
    let db = TestDatabase::new();
    let queue = cairn::Queue::open(&db.url).await.unwrap();
    for customer in ["acme", "globex", "acme"] {
        queue
            .enqueue(
                cairn::Push::new("invoice")
                    .data(serde_json::json!({"customer": customer, "total": 5})),
            )
            .await
            .unwrap();
    }
    let result = queue
        .sql(cairn::SqlQuery::new(
            "SELECT count(*), sum((data->>'total')::int) FROM cairn_jobs WHERE data->>'customer' = 'acme'",
        ))
        .await
        .unwrap();
    assert_eq!(result.rows, [[serde_json::json!(2), serde_json::json!(10)]]);
    queue
        .close(std::time::Duration::from_secs(5))
        .await
        .unwrap();
}

/// Nodes started at the same instant on an empty database, as three `cairn serve --db postgres://…` started
/// together would be: each must come up (the table of migrations was once created before the lock was taken, and
/// two of three nodes failed on PostgreSQL's catalog). Repeated, since a race shows only some of the time.
#[test]
fn nodes_started_together_on_an_empty_database_all_come_up() {
    const NODES: usize = 4;
    for round in 0..8 {
        let db = TestDatabase::new();
        let start = std::sync::Arc::new(std::sync::Barrier::new(NODES));
        let nodes: Vec<_> = (0..NODES)
            .map(|node| {
                let (url, start) = (db.url.clone(), start.clone());
                std::thread::spawn(move || {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .unwrap();
                    runtime.block_on(async move {
                        start.wait();
                        let queue = cairn::Queue::open(&url).await?;
                        queue
                            .enqueue(cairn::Push::new(format!("node-{node}")))
                            .await?;
                        queue.close(std::time::Duration::from_secs(5)).await
                    })
                })
            })
            .collect();
        for (node, handle) in nodes.into_iter().enumerate() {
            if let Err(e) = handle.join().unwrap() {
                panic!("round {round}: node {node} did not come up: {e}");
            }
        }
        let jobs: i64 = db
            .connect()
            .query_one("SELECT count(*) FROM jobs", &[])
            .unwrap()
            .get(0);
        assert_eq!(jobs, NODES as i64, "round {round}");
    }
}

/// A queue opened on a standby alone (a URL that names one host, in recovery) is refused at once, saying why and
/// what to do, rather than failing at its first `CREATE TABLE`; named with its primary, it opens on the primary
/// whichever comes first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_alone_is_refused_saying_why_and_with_its_primary_the_primary_is_found() {
    let (primary, standby) = tokio::task::spawn_blocking(|| {
        let primary = cairn::__private::PrivateCluster::start();
        let standby = primary.standby();
        (primary, standby)
    })
    .await
    .unwrap();
    let e = cairn::Queue::open(&standby.url).await.expect_err("refused");
    assert_eq!(e.kind(), cairn::ErrorKind::Unavailable, "{e}");
    let message = e.to_string();
    assert!(
        message.contains("read-only") && message.contains("name every host"),
        "{message}"
    );

    let both = format!(
        "postgres://cairn@{},{}/cairn",
        standby.address(),
        primary.address()
    );
    let queue = cairn::Queue::open(&both).await.unwrap();
    let id = queue.enqueue(cairn::Push::new("found")).await.unwrap().id;
    let primary_url = primary.url.clone();
    let on_primary: i64 = tokio::task::spawn_blocking(move || {
        let mut client = postgres::Client::connect(&primary_url, postgres::NoTls).unwrap();
        client.query_one("SELECT id FROM jobs", &[]).unwrap().get(0)
    })
    .await
    .unwrap();
    assert_eq!(on_primary, id.0);
    queue
        .close(std::time::Duration::from_secs(5))
        .await
        .unwrap();
    drop((primary, standby));
}

/// A GLOB pattern from pieces SQLite and `cairn_glob` must read alike.
fn pattern() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        "[ab.\\-_^$(|+]".prop_map(|c| c.to_string()),
        Just("*".to_owned()),
        Just("?".to_owned()),
        Just("[ab]".to_owned()),
        Just("[^a]".to_owned()),
        Just("[a-c]".to_owned()),
        Just("[.]".to_owned()),
    ];
    proptest::collection::vec(piece, 0..6).prop_map(|pieces| pieces.concat())
}

#[test]
fn cairn_glob_matches_as_sqlite_glob_does() {
    let db = TestDatabase::new();
    let mut client = db.connect();
    cairn::__private::migrate_postgres(&mut client, 0).unwrap();
    let sqlite = rusqlite::Connection::open_in_memory().unwrap();
    let client = std::cell::RefCell::new(client);
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(400));
    runner
        .run(&(pattern(), "[abc.\\-_^$(|+]{0,6}"), |(pattern, value)| {
            let expected: bool = sqlite
                .query_row(
                    "SELECT ?1 GLOB ?2",
                    rusqlite::params![value, pattern],
                    |r| r.get(0),
                )
                .unwrap();
            let got: bool = client
                .borrow_mut()
                .query_one("SELECT cairn_glob($1, $2)", &[&value, &pattern])
                .unwrap()
                .get(0);
            prop_assert_eq!(got, expected, "{:?} GLOB {:?}", value, pattern);
            Ok(())
        })
        .unwrap();
}

/// Each of the engine's statements is literal text for the database that runs it: PostgreSQL's prepares on the real
/// PostgreSQL schema and SQLite's on SQLite's, with parameters `$1` to `$N` in the order they first appear and none
/// missing (or, in SQLite's generated many-row statements, anonymous `?`s only).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_engines_statements_prepare_on_the_database_each_is_written_for() {
    let statements = cairn::__private::sample_statements();
    assert!(statements.len() > 25);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jobs.db");
    cairn::Queue::open(&path).await.unwrap();
    let sqlite = cairn::rusqlite::Connection::open(&path).unwrap();
    let db = TestDatabase::new();
    let statements_for_postgres = statements.clone();
    let url = db.url.clone();
    std::thread::spawn(move || {
        let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        cairn::__private::migrate_postgres(&mut client, 0).unwrap();
        for (_, text) in statements_for_postgres
            .iter()
            .filter(|(_, pg)| !pg.is_empty())
        {
            let prepared = client
                .prepare(text)
                .unwrap_or_else(|e| panic!("{e:?}\n  in: {text}"));
            let count = prepared.params().len();
            for n in 1..=count {
                assert!(text.contains(&format!("${n}")), "${n} unused in {text}");
            }
        }
    })
    .join()
    .unwrap();
    for (text, _) in statements.iter().filter(|(sqlite, _)| !sqlite.is_empty()) {
        let prepared = sqlite
            .prepare(text)
            .unwrap_or_else(|e| panic!("{e:?}\n  in: {text}"));
        let count = prepared.parameter_count();
        // Either every parameter is `$N` (written statements) or none has a name (the generated many-row ones,
        // bound in order).
        let anonymous = count > 0 && prepared.parameter_name(1).is_none();
        for index in 1..=count {
            let name = prepared.parameter_name(index);
            if anonymous {
                assert_eq!(name, None, "{text} mixes `?` and named parameters");
                continue;
            }
            // In the order they first appear, so that SQLite's numbers are theirs (`store/db/sqlite.rs`).
            let number: Option<usize> = name.and_then(|n| n.strip_prefix('$')?.parse().ok());
            assert_eq!(
                number,
                Some(index),
                "parameter {index} of {text} is {name:?}: not $1 to ${count} in order"
            );
        }
    }
}

/// Ends every session of the test's database but the caller's, as a server restart or an administrator would.
fn end_sessions(db: &TestDatabase) -> i64 {
    let url = db.url.clone();
    std::thread::spawn(move || {
        let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        client
            .query_one(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
                 WHERE datname = current_database() AND pid <> pg_backend_pid()",
                &[],
            )
            .unwrap()
            .get(0)
    })
    .join()
    .unwrap()
}

/// Runs `f` until it succeeds, at most three times: the call that meets a broken session fails with a status that
/// says to try again, the next one connects again.
async fn after_reconnect<T, F, Fut>(mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = cairn::Result<T>>,
{
    let mut last = None;
    for _ in 0..3 {
        match f().await {
            Ok(value) => return value,
            Err(e) => {
                assert_eq!(e.kind(), cairn::ErrorKind::Unavailable, "{e}");
                last = Some(e);
            }
        }
    }
    panic!("still failing after connecting again: {last:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_connects_again_when_its_sessions_are_ended() {
    let db = TestDatabase::new();
    let queue = cairn::Queue::open(&db.url).await.unwrap();
    let first = queue.enqueue(cairn::Push::new("before")).await.unwrap().id;
    queue.get(first).await.unwrap();
    assert!(
        end_sessions(&db) >= 2,
        "the writer's and the listener's sessions ended"
    );

    let second = after_reconnect(|| queue.enqueue(cairn::Push::new("after")))
        .await
        .id;
    // A read on a pooled session that PostgreSQL ended runs again on a new one: it does not fail.
    let job = queue.get(second).await.unwrap();
    assert_eq!(job.state, cairn::JobState::Queued);
    // The new session leads the timed work again, and claims and finishes as before.
    let claimed = queue
        .dequeue(cairn::Dequeue::new("w").limit(2))
        .await
        .unwrap();
    assert_eq!(claimed.len(), 2);
    for c in &claimed {
        queue.finish(&c.lease, None).await.unwrap();
    }
    queue.settle().await.unwrap();
    queue
        .close(std::time::Duration::from_secs(10))
        .await
        .unwrap();
}

/// Two queues on one database in one process: two nodes, on one manual clock.
async fn two_nodes(db: &TestDatabase, clock: &cairn::ManualClock) -> cairn::Queue {
    let options = cairn::QueueOptions {
        clock: std::sync::Arc::new(clock.clone()),
        ..cairn::QueueOptions::default()
    };
    cairn::Queue::open_with(&db.url, options).await.unwrap()
}

async fn take(queue: &cairn::Queue, from: &str, worker: &str) -> Vec<cairn::ClaimedJob> {
    queue
        .dequeue(cairn::Dequeue::new(worker).queue(from).limit(10))
        .await
        .unwrap()
}

/// A node claims a job another node made ready at a later now (a batch begun before the other node's commit, or a
/// clock a moment behind): the attempt starts when the job became ready, not before. Otherwise the job's history
/// could show an attempt begun before the last one ended, its lease having run out on the node ahead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attempt_starts_no_earlier_than_its_job_became_ready_on_another_node() {
    let db = TestDatabase::new();
    let start = crate::harness::start_time();
    let ahead_clock = cairn::ManualClock::new(start);
    ahead_clock.advance(std::time::Duration::from_secs(6));
    let behind_clock = cairn::ManualClock::new(start);
    let ahead = two_nodes(&db, &ahead_clock).await;
    let behind = two_nodes(&db, &behind_clock).await;
    let id = ahead
        .enqueue(cairn::Push::new("work").queue("q"))
        .await
        .unwrap()
        .id;
    let claimed = take(&behind, "q", "w").await;
    assert_eq!(claimed.len(), 1);
    let became_ready = start + jiff::SignedDuration::from_secs(6);
    let job = behind.get(id).await.unwrap();
    assert_eq!(job.run_at, became_ready);
    assert_eq!(job.history.len(), 1, "{:?}", job.history);
    assert_eq!(
        job.history[0].started_at, became_ready,
        "the attempt starts when the job became ready, not at the claiming node's earlier now"
    );
    assert_eq!(job.started_at, Some(became_ready));
    assert_eq!(
        claimed[0].lease.expires_at,
        became_ready + jiff::SignedDuration::try_from(job.lease_timeout).unwrap(),
        "the lease runs from the attempt's start"
    );
    behind
        .close(std::time::Duration::from_secs(10))
        .await
        .unwrap();
    ahead
        .close(std::time::Duration::from_secs(10))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_and_concurrency_limits_hold_across_nodes() {
    let db = TestDatabase::new();
    let clock = cairn::ManualClock::new(crate::harness::start_time());
    let a = two_nodes(&db, &clock).await;
    let rate = cairn::RateLimit {
        jobs: 2,
        per: std::time::Duration::from_secs(10),
    };
    a.rate_limit_queue("mail", Some(rate)).await.unwrap();
    a.limit_queue("pdf", Some(2)).await.unwrap();
    // Opened after the limits were set, so that it has them from the start.
    let b = two_nodes(&db, &clock).await;
    for _ in 0..6 {
        a.enqueue(cairn::Push::new("send").queue("mail"))
            .await
            .unwrap();
        a.enqueue(cairn::Push::new("render").queue("pdf"))
            .await
            .unwrap();
    }

    // One bucket for both nodes: two starts per ten seconds in all, not two per node.
    assert_eq!(take(&a, "mail", "a").await.len(), 2);
    assert_eq!(take(&b, "mail", "b").await.len(), 0);
    clock.advance(std::time::Duration::from_secs(5)); // one token back
    let started = take(&b, "mail", "b").await.len() + take(&a, "mail", "a").await.len();
    assert_eq!(started, 1);

    // At most two running in all.
    let running = take(&a, "pdf", "a").await;
    assert_eq!(running.len(), 2);
    assert_eq!(take(&b, "pdf", "b").await.len(), 0);
    a.finish(&running[0].lease, None).await.unwrap();
    assert_eq!(take(&b, "pdf", "b").await.len(), 1);
    assert_eq!(take(&a, "pdf", "a").await.len(), 0);

    b.close(std::time::Duration::from_secs(10)).await.unwrap();
    a.close(std::time::Duration::from_secs(10)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_resumed_on_one_node_wakes_a_worker_waiting_on_another() {
    let db = TestDatabase::new();
    let clock = cairn::ManualClock::new(crate::harness::start_time());
    let a = two_nodes(&db, &clock).await;
    a.pause_queue("x", true).await.unwrap();
    a.enqueue(cairn::Push::new("held").queue("x"))
        .await
        .unwrap();
    let b = two_nodes(&db, &clock).await;
    let waiting = {
        let b = b.clone();
        tokio::spawn(async move {
            b.dequeue(
                cairn::Dequeue::new("b")
                    .queue("x")
                    .wait(std::time::Duration::from_secs(30)),
            )
            .await
            .unwrap()
        })
    };
    // Node b hands out nothing while the queue is paused (it loaded the setting at open).
    b.settle().await.unwrap();
    assert!(!waiting.is_finished());
    a.pause_queue("x", false).await.unwrap();
    // Node b hears of it (settings, then the queue made ready) and serves its waiting worker.
    let claimed = waiting.await.unwrap();
    assert_eq!(claimed.len(), 1);
    b.close(std::time::Duration::from_secs(10)).await.unwrap();
    a.close(std::time::Duration::from_secs(10)).await.unwrap();
}

/// A wait on one node answers when another node ends the job: with its result, as soon as that commit lands
/// (bounded here by a tenth of the wait's own time, which it would otherwise run out).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_on_one_node_returns_when_another_node_finishes_the_job() {
    let db = TestDatabase::new();
    let clock = cairn::ManualClock::new(crate::harness::start_time());
    let a = two_nodes(&db, &clock).await;
    let b = two_nodes(&db, &clock).await;
    let mut waits = Vec::new();
    let mut ids = Vec::new();
    for i in 0..3 {
        let id = a
            .enqueue(cairn::Push::new("render").data(serde_json::json!({ "i": i })))
            .await
            .unwrap()
            .id;
        ids.push(id);
        let b = b.clone();
        waits.push(tokio::spawn(async move {
            b.wait(id, std::time::Duration::from_secs(60)).await
        }));
    }
    b.settle().await.unwrap();
    assert!(waits.iter().all(|w| !w.is_finished()));
    // Node a ends them: one completed with a result, one failed, one cancelled.
    let claimed = take(&a, "default", "a").await;
    let by_id = |id| claimed.iter().find(|c| c.job.id == id).unwrap();
    a.finish_with(cairn::Finish {
        result: Some(serde_json::json!({"pages": 3})),
        ..cairn::Finish::new(&by_id(ids[0]).lease)
    })
    .await
    .unwrap();
    a.fail(&by_id(ids[1]).lease, "broken", "no template")
        .await
        .unwrap();
    a.release(&by_id(ids[2]).lease).await.unwrap();
    a.cancel(ids[2]).await.unwrap();
    let mut ended = Vec::new();
    for wait in waits {
        let job = tokio::time::timeout(std::time::Duration::from_secs(6), wait)
            .await
            .expect("node b heard that node a ended the job")
            .unwrap()
            .unwrap();
        ended.push((job.state, job.result));
    }
    assert_eq!(
        ended,
        [
            (
                cairn::JobState::Completed,
                Some(serde_json::json!({"pages": 3}))
            ),
            (cairn::JobState::Failed, None),
            (cairn::JobState::Cancelled, None),
        ]
    );
    // Each wait took its registration back.
    b.settle().await.unwrap();
    let url = db.url.clone();
    let left = tokio::task::spawn_blocking(move || {
        let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        client
            .query_one("SELECT count(*) FROM cairn_job_waits", &[])
            .unwrap()
            .get::<_, i64>(0)
    })
    .await
    .unwrap();
    assert_eq!(left, 0);
    b.close(std::time::Duration::from_secs(10)).await.unwrap();
    a.close(std::time::Duration::from_secs(10)).await.unwrap();
}

/// A wait whose caller stops waiting (a client gone) takes its registration back, and only its own: another wait
/// for the same job, registered at the same moment, stays registered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_given_up_takes_back_its_own_registration_only() {
    let db = TestDatabase::new();
    let clock = cairn::ManualClock::new(crate::harness::start_time());
    let a = two_nodes(&db, &clock).await;
    let id = a.enqueue(cairn::Push::new("long")).await.unwrap().id;
    let wait = |queue: cairn::Queue| {
        tokio::spawn(async move { queue.wait(id, std::time::Duration::from_secs(60)).await })
    };
    let (given_up, kept) = (wait(a.clone()), wait(a.clone()));
    let url = db.url.clone();
    let registered = move || {
        let url = url.clone();
        async move {
            tokio::task::spawn_blocking(move || {
                let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
                client
                    .query_one("SELECT count(*) FROM cairn_job_waits", &[])
                    .unwrap()
                    .get::<_, i64>(0)
            })
            .await
            .unwrap()
        }
    };
    crate::harness::eventually(
        crate::harness::PATIENCE,
        "both waits registered",
        || async { registered().await == 2 },
    )
    .await;
    given_up.abort();
    let _ = given_up.await;
    // A wait takes its registration back from a task it spawns as it ends, which the writer then runs: in time.
    crate::harness::eventually(
        crate::harness::PATIENCE,
        "the given-up wait's registration gone",
        || async { registered().await == 1 },
    )
    .await;
    a.settle().await.unwrap();
    assert_eq!(registered().await, 1, "the other wait's stays");
    a.cancel(id).await.unwrap();
    let job = kept.await.unwrap().unwrap();
    assert_eq!(job.state, cairn::JobState::Cancelled);
    crate::harness::eventually(
        crate::harness::PATIENCE,
        "the ended wait's registration gone",
        || async { registered().await == 0 },
    )
    .await;
    a.close(std::time::Duration::from_secs(10)).await.unwrap();
}

/// Two nodes writing at once: a subscription on one gets every event of both, in the log's order, none missing
/// (ids commit out of order across nodes; the stream holds back past one it has not seen yet).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_event_stream_on_one_node_gets_every_event_of_both_in_order() {
    let db = TestDatabase::new();
    let clock = cairn::ManualClock::new(crate::harness::start_time());
    let a = two_nodes(&db, &clock).await;
    let b = two_nodes(&db, &clock).await;
    let mut events = b
        .events(cairn::EventsFrom::Now, cairn::EventFilter::default())
        .await
        .unwrap();
    let push = |queue: cairn::Queue, node: &'static str| {
        tokio::spawn(async move {
            let mut ids = Vec::new();
            for i in 0..20 {
                let batch = (0..10)
                    .map(|j| cairn::Push::new(format!("{node}-{i}-{j}")))
                    .collect();
                ids.extend(
                    queue
                        .enqueue_batch(batch)
                        .await
                        .unwrap()
                        .into_iter()
                        .map(|e| e.id),
                );
            }
            ids
        })
    };
    let (from_a, from_b) = (push(a.clone(), "a"), push(b.clone(), "b"));
    let mut pushed = from_a.await.unwrap();
    pushed.extend(from_b.await.unwrap());
    pushed.sort();
    let mut got = Vec::new();
    let mut last = 0;
    while got.len() < pushed.len() {
        let e = tokio::time::timeout(std::time::Duration::from_secs(20), events.next())
            .await
            .expect("every event arrives")
            .unwrap();
        assert!(e.id > last, "in the log's order: {} after {last}", e.id);
        last = e.id;
        if e.kind == cairn::ActivityKind::Added {
            got.push(e.job.unwrap());
        }
    }
    got.sort();
    assert_eq!(got, pushed);
    b.close(std::time::Duration::from_secs(10)).await.unwrap();
    a.close(std::time::Duration::from_secs(10)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_two_dependencies_ending_on_two_nodes_release_their_dependent() {
    let db = TestDatabase::new();
    let clock = cairn::ManualClock::new(crate::harness::start_time());
    let a = two_nodes(&db, &clock).await;
    let b = two_nodes(&db, &clock).await;
    const PAIRS: usize = 40;
    let mut dependents = Vec::new();
    for i in 0..PAIRS {
        let left = a
            .enqueue(cairn::Push::new("left").queue(format!("l{i}")))
            .await
            .unwrap()
            .id;
        let right = a
            .enqueue(cairn::Push::new("right").queue(format!("r{i}")))
            .await
            .unwrap()
            .id;
        let dependent = a
            .enqueue(
                cairn::Push::new("after")
                    .queue("after")
                    .depends_on(left)
                    .depends_on(right),
            )
            .await
            .unwrap();
        assert_eq!(dependent.state, cairn::JobState::Waiting);
        dependents.push(dependent.id);
    }
    // Each pair's two jobs end at the same moment, one on each node.
    for i in 0..PAIRS {
        let left = take(&a, &format!("l{i}"), "a").await.remove(0);
        let right = take(&b, &format!("r{i}"), "b").await.remove(0);
        let (done_a, done_b) =
            tokio::join!(a.finish(&left.lease, None), b.finish(&right.lease, None));
        done_a.unwrap();
        done_b.unwrap();
    }
    for id in dependents {
        assert_eq!(
            a.get(id).await.unwrap().state,
            cairn::JobState::Queued,
            "job {id} was released by the second of its dependencies to end"
        );
    }
    b.close(std::time::Duration::from_secs(10)).await.unwrap();
    a.close(std::time::Duration::from_secs(10)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_two_jobs_of_a_batch_ending_on_two_nodes_make_its_callback_once() {
    let db = TestDatabase::new();
    let clock = cairn::ManualClock::new(crate::harness::start_time());
    let a = two_nodes(&db, &clock).await;
    let b = two_nodes(&db, &clock).await;
    const BATCHES: usize = 40;
    let mut batches = Vec::new();
    for i in 0..BATCHES {
        let created = a
            .create_batch(
                cairn::CreateBatch::new(vec![
                    cairn::Push::new("left").queue(format!("l{i}")),
                    cairn::Push::new("right").queue(format!("r{i}")),
                ])
                .on_complete(cairn::Push::new("then").queue("callbacks")),
            )
            .await
            .unwrap();
        batches.push(created.batch);
    }
    // Each batch's two jobs end at the same moment, one on each node.
    for i in 0..BATCHES {
        let left = take(&a, &format!("l{i}"), "a").await.remove(0);
        let right = take(&b, &format!("r{i}"), "b").await.remove(0);
        let (done_a, done_b) =
            tokio::join!(a.finish(&left.lease, None), b.finish(&right.lease, None));
        done_a.unwrap();
        done_b.unwrap();
    }
    let callbacks = a
        .list(cairn::JobFilter {
            queue: Some("callbacks".to_owned()),
            limit: 1000,
            ..cairn::JobFilter::default()
        })
        .await
        .unwrap()
        .jobs;
    let mut made: Vec<i64> = callbacks
        .iter()
        .map(|job| job.data["batch"]["id"].as_i64().unwrap())
        .collect();
    made.sort_unstable();
    let expected: Vec<i64> = batches.iter().map(|b| b.0).collect();
    assert_eq!(made, expected, "one callback per batch");
    for batch in batches {
        let batch = b.batch(batch).await.unwrap();
        assert_eq!(
            (batch.state, batch.completed),
            (cairn::BatchState::Completed, 2)
        );
    }
    b.close(std::time::Duration::from_secs(10)).await.unwrap();
    a.close(std::time::Duration::from_secs(10)).await.unwrap();
}

/// Pushes the job `push` makes for each of 40 keys on two nodes at once: each key makes one job, which one node
/// created and the other found.
async fn one_job_per_key_pushed_on_two_nodes(push: impl Fn(&str) -> cairn::Push) {
    let db = TestDatabase::new();
    let clock = cairn::ManualClock::new(crate::harness::start_time());
    let a = two_nodes(&db, &clock).await;
    let b = two_nodes(&db, &clock).await;
    for i in 0..40 {
        let key = format!("key-{i}");
        let (on_a, on_b) = tokio::join!(a.enqueue(push(&key)), b.enqueue(push(&key)));
        let (on_a, on_b) = (on_a.unwrap(), on_b.unwrap());
        assert_eq!(on_a.id, on_b.id, "{key}: one job");
        assert!(
            on_a.existing != on_b.existing,
            "{key}: one created it, the other found it"
        );
    }
    b.close(std::time::Duration::from_secs(10)).await.unwrap();
    a.close(std::time::Duration::from_secs(10)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_unique_key_pushed_on_two_nodes_at_once_makes_one_job() {
    one_job_per_key_pushed_on_two_nodes(|key| cairn::Push::new("charge").unique_key(key)).await;
}

/// A throttle key has no unique index behind it: the nodes take turns on it (an advisory lock per key), so that
/// both cannot find it free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_throttle_key_pushed_on_two_nodes_at_once_makes_one_job() {
    let day = std::time::Duration::from_secs(24 * 3600);
    one_job_per_key_pushed_on_two_nodes(|key| cairn::Push::new("welcome").throttle(key, day)).await;
}

/// Likewise the first pushes of a debounce burst: one makes the job, the other lands in it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_debounce_key_pushed_on_two_nodes_at_once_makes_one_job() {
    let minute = std::time::Duration::from_secs(60);
    one_job_per_key_pushed_on_two_nodes(|key| {
        cairn::Push::new("reindex").debounce(key, minute, 10 * minute)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pushes_and_finishes_in_flight_together_are_answered_each_as_alone() {
    let db = TestDatabase::new();
    let clock = cairn::ManualClock::new(crate::harness::start_time());
    let queue = two_nodes(&db, &clock).await;
    // Many pushes at once: the writer takes them in a few batches, several to a statement.
    let pushes = (0..200).map(|i| {
        let queue = queue.clone();
        async move {
            let push = match i % 10 {
                // Not plain: a unique key, tags, a schedule; and one refused.
                0 => cairn::Push::new("keyed").unique_key(format!("k{i}")),
                1 => cairn::Push::new("tagged").tag("t"),
                2 => cairn::Push::new("recurring").schedule("SCHEDULED, +1 HOUR"),
                3 => cairn::Push::new("bad name\n"),
                _ => cairn::Push::new("plain").data(serde_json::json!({ "i": i })),
            };
            (i, queue.enqueue(push).await)
        }
    });
    let mut ids = std::collections::BTreeSet::new();
    for (i, result) in futures_join_all(pushes).await {
        if i % 10 == 3 {
            let e = result.unwrap_err();
            assert_eq!(e.field(), Some("name"), "{e}");
            continue;
        }
        let enqueued = result.unwrap();
        assert!(ids.insert(enqueued.id), "push {i} got a job of its own");
        let job = queue.get(enqueued.id).await.unwrap();
        if i % 10 >= 4 {
            assert_eq!(job.data, serde_json::json!({ "i": i }));
        }
    }
    assert_eq!(ids.len(), 180);
    let claimed = queue
        .dequeue(cairn::Dequeue::new("w").limit(1000))
        .await
        .unwrap();
    assert_eq!(claimed.len(), 180);
    // Many finishes at once, with a stale token and a second finish of one job among them.
    let mut stale = claimed[0].lease.clone();
    stale.token = stale.token.wrapping_add(1);
    let twice = claimed[1].lease.clone();
    let finishes = claimed
        .iter()
        .map(|c| (c.lease.clone(), Some(serde_json::json!("done"))))
        .chain([(stale, None), (twice, None)])
        .map(|(lease, data)| {
            let queue = queue.clone();
            async move { (lease.clone(), queue.finish(&lease, data).await) }
        });
    let results = futures_join_all(finishes).await;
    let refused = results.iter().filter(|(_, r)| r.is_err()).count();
    // The stale token, and one of the two finishes of the same job.
    assert_eq!(refused, 2, "{results:?}");
    for c in &claimed {
        let job = queue.get(c.job.id).await.unwrap();
        match job.name.as_str() {
            "recurring" => assert_eq!(job.state, cairn::JobState::Scheduled),
            _ => assert_eq!(job.state, cairn::JobState::Completed),
        }
        assert_eq!(job.history.len(), 1, "job {} has its attempt", job.id);
        assert_eq!(
            job.history[0].outcome,
            Some(cairn::AttemptOutcome::Completed)
        );
    }
    queue
        .close(std::time::Duration::from_secs(10))
        .await
        .unwrap();
}

/// A node that does not lead the timed work asks for the lead about once a second and otherwise leaves the
/// database alone: its writer's session sits idle between bids, rather than running transaction after transaction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_nodes_leave_the_database_alone() {
    let db = TestDatabase::new();
    let leader = cairn::Queue::open(&db.url).await.unwrap();
    leader.settle().await.unwrap();
    let follower = cairn::Queue::open(&db.url).await.unwrap();
    follower.settle().await.unwrap();
    // Real time: the nodes bid for the lead and do their housekeeping by the real clock (the lead is timed by
    // PostgreSQL's now()), and what is measured is the quiet after the first housekeeping time, which a follower
    // cannot do: nothing happens at that time that the test could wait for instead.
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;

    let url = db.url.clone();
    let changes = tokio::task::spawn_blocking(move || {
        let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        let mut seen: std::collections::HashMap<i32, std::collections::HashSet<String>> =
            Default::default();
        for _ in 0..40 {
            for row in client
                .query(
                    "SELECT pid, CAST(state_change AS TEXT) FROM pg_stat_activity \
                     WHERE datname = current_database() AND application_name = 'cairn writer'",
                    &[],
                )
                .unwrap()
            {
                let change: Option<String> = row.get(1);
                seen.entry(row.get(0))
                    .or_default()
                    .insert(change.unwrap_or_default());
            }
            // Real time: the samples spread over a second of idleness, the rate of state changes is the measure.
            std::thread::sleep(std::time::Duration::from_millis(25));
        }
        seen
    })
    .await
    .unwrap();
    assert_eq!(changes.len(), 2, "two writers: {changes:?}");
    for (pid, states) in &changes {
        // A bid a second is a handful of statements; a writer that never sleeps changes state with every sample.
        assert!(
            states.len() <= 12,
            "writer {pid} changed state {} times in a second of idleness",
            states.len()
        );
    }
    for queue in [follower, leader] {
        queue
            .close(std::time::Duration::from_secs(10))
            .await
            .unwrap();
    }
}

/// Each node adds its statistics to rows of its own (so that nodes never wait for each other's rows), and the
/// readers sum them: the totals, and the one row per minute, queue and name of `cairn_stats_minute`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statistics_of_two_nodes_add_up() {
    let db = TestDatabase::new();
    let clock = cairn::ManualClock::new(crate::harness::start_time());
    let a = two_nodes(&db, &clock).await;
    let b = two_nodes(&db, &clock).await;
    for (node, jobs) in [(&a, 3), (&b, 2)] {
        for _ in 0..jobs {
            node.enqueue(cairn::Push::new("send").queue("mail"))
                .await
                .unwrap();
        }
        for claimed in take(node, "mail", "w").await {
            node.finish(&claimed.lease, None).await.unwrap();
        }
        node.settle().await.unwrap();
    }

    let totals = b.stats(cairn::StatsQuery::default()).await.unwrap().totals;
    assert_eq!((totals.added, totals.started, totals.finished), (5, 5, 5));
    let rows = a
        .sql(cairn::SqlQuery::new(
            "SELECT added, finished, wait_count FROM cairn_stats_minute",
        ))
        .await
        .unwrap()
        .rows;
    assert_eq!(rows, [[5, 5, 5].map(serde_json::Value::from)]);
    let per_node = a
        .sql(cairn::SqlQuery::new(
            "SELECT count(DISTINCT node), count(*) FROM stats_minute",
        ))
        .await
        .unwrap()
        .rows;
    assert_eq!(per_node, [[2, 2].map(serde_json::Value::from)]);

    b.close(std::time::Duration::from_secs(10)).await.unwrap();
    a.close(std::time::Duration::from_secs(10)).await.unwrap();
}

/// How often PostgreSQL has scanned each of `indexes`, once the sessions that scanned them have reported: they have
/// ended (a closed queue's sessions report as they end), and `written`, how many rows of `jobs` the test has
/// inserted and updated by then, is counted.
async fn index_scans_once_reported(url: &str, written: i64, indexes: &[&str]) -> Vec<i64> {
    let url = url.to_owned();
    let indexes: std::sync::Arc<Vec<String>> =
        std::sync::Arc::new(indexes.iter().map(|i| i.to_string()).collect());
    let client = tokio::task::spawn_blocking(move || {
        postgres::Client::connect(&url, postgres::NoTls).unwrap()
    })
    .await
    .unwrap();
    let client = std::sync::Arc::new(std::sync::Mutex::new(client));
    let reported = crate::harness::poll(std::time::Duration::from_secs(15), || {
        let (client, indexes) = (client.clone(), indexes.clone());
        async move {
            tokio::task::spawn_blocking(move || {
                let mut client = client.lock().unwrap();
                let row = client
                    .query_one(
                        "SELECT (SELECT n_tup_ins + n_tup_upd FROM pg_stat_user_tables WHERE relname = 'jobs'), \
                         (SELECT count(*) FROM pg_stat_activity \
                          WHERE datname = current_database() AND pid <> pg_backend_pid())",
                        &[],
                    )
                    .unwrap();
                let (reported, sessions): (i64, i64) = (row.get(0), row.get(1));
                (reported >= written && sessions == 0).then(|| {
                    indexes
                        .iter()
                        .map(|index| {
                            client
                                .query_one(
                                    "SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = $1",
                                    &[index],
                                )
                                .unwrap()
                                .get(0)
                        })
                        .collect()
                })
            })
            .await
            .unwrap()
        }
    })
    .await;
    // The blocking client ends off the runtime, as it began.
    tokio::task::spawn_blocking(move || drop(client))
        .await
        .unwrap();
    let (scans, _) = reported
        .unwrap_or_else(|| panic!("PostgreSQL never reported the {written} rows written to jobs"));
    scans
}

/// Finishing jobs finds each by its id, however few jobs PostgreSQL believes are running (always few, next to the
/// jobs kept after they end): a plain `state = 'running'` let it walk the index of running jobs once per job
/// finished instead, which grows with every job running anywhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finishing_jobs_reads_them_by_id_not_through_the_running_jobs() {
    const DONE: i64 = 20_000;
    const RUNNING: i64 = 10;
    let db = TestDatabase::new();
    let queue = cairn::Queue::open(&db.url).await.unwrap();
    let pushes = (0..RUNNING)
        .map(|_| cairn::Push::new("send").queue("mail"))
        .collect();
    queue.enqueue_batch(pushes).await.unwrap();
    let claimed = queue
        .dequeue(cairn::Dequeue::new("w").queue("mail").limit(RUNNING as u32))
        .await
        .unwrap();
    assert_eq!(claimed.len() as i64, RUNNING);
    queue
        .close(std::time::Duration::from_secs(10))
        .await
        .unwrap();
    // Yesterday's jobs, done and kept, and statistics that see them.
    let url = db.url.clone();
    tokio::task::spawn_blocking(move || {
        postgres::Client::connect(&url, postgres::NoTls)
            .unwrap()
            .batch_execute(&format!(
                "ALTER TABLE jobs SET (autovacuum_enabled = false); \
                 INSERT INTO jobs (queue, name, state, data, priority, weight, run_at, max_attempts, \
                 backoff_initial_ms, backoff_multiplier, backoff_max_ms, backoff_jitter, lease_timeout_ms, \
                 created_at, slot_at, finished_at) \
                 SELECT 'mail', 'send', 'completed', '{{}}', 0, 1, 0, 1, 1000, 2, 60000, 0, 30000, 0, 0, 0 \
                 FROM generate_series(1, {DONE}); \
                 ANALYZE jobs"
            ))
            .unwrap()
    })
    .await
    .unwrap();
    // Housekeeping's next due time reads `jobs_leases`, the other index of running jobs; nothing in this test
    // reads `jobs_by_worker` but a finish that takes the wrong way in.
    let indexes = ["jobs_pkey", "jobs_by_worker"];
    let before = index_scans_once_reported(&db.url, DONE + RUNNING * 2, &indexes).await;

    let queue = cairn::Queue::open(&db.url).await.unwrap();
    let finishes = claimed[..8]
        .iter()
        .map(|c| cairn::Finish::new(&c.lease))
        .collect();
    for answer in queue.finish_many(finishes).await.unwrap() {
        answer.unwrap();
    }
    queue
        .close(std::time::Duration::from_secs(10))
        .await
        .unwrap();
    let after = index_scans_once_reported(&db.url, DONE + RUNNING * 2 + 8, &indexes).await;
    assert!(
        after[0] > before[0],
        "the primary key was used: {before:?} {after:?}"
    );
    assert_eq!(
        after[1], before[1],
        "the index of running jobs by worker was not scanned"
    );
}

/// The queue vacuums its jobs table itself once `vacuum_after` of its rows were updated or deleted since the last
/// vacuum, rather than wait for autovacuum (`pg_stat_user_tables.vacuum_count` counts the vacuums a session ran, not
/// autovacuum's), and not before: a queue beside it with the same work and a higher bar vacuums nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_queue_vacuums_its_jobs_table_itself_once_past_its_bar() {
    let (busy, idle) = (TestDatabase::new(), TestDatabase::new());
    let open = |url: String, after: u64| async move {
        let options = cairn::QueueOptions {
            vacuum_after: Some(after),
            ..cairn::QueueOptions::default()
        };
        cairn::Queue::open_with(&url, options).await.unwrap()
    };
    let low = open(busy.url.clone(), 50).await;
    let high = open(idle.url.clone(), 1_000_000).await;
    // A statistic of the jobs table, as PostgreSQL last reported it.
    let statistic = |queue: &cairn::Queue, column: &str| {
        let (queue, sql) = (
            queue.clone(),
            format!("SELECT {column} FROM pg_stat_user_tables WHERE relid = 'jobs'::regclass"),
        );
        async move {
            let result = queue.sql(cairn::SqlQuery::new(&sql)).await.unwrap();
            result.rows[0][0].as_i64().unwrap()
        }
    };
    let vacuums = |queue: &cairn::Queue| statistic(queue, "vacuum_count");
    // The same churn on both until the first vacuums: each job updates its row twice, claimed, then finished. A
    // round at a time, each once PostgreSQL has reported rows changed since the last (the queue's vacuum goes by
    // those reports, and looks at them every few seconds: the churn goes on meanwhile).
    let (low, high) = (&low, &high);
    let reported_at_churn = std::sync::atomic::AtomicI64::new(-1);
    let reported_at_churn = &reported_at_churn;
    crate::harness::eventually(
        std::time::Duration::from_secs(30),
        "a vacuum of the jobs table",
        || async move {
            let reported = statistic(low, "n_tup_upd + n_tup_del").await;
            if reported > reported_at_churn.load(std::sync::atomic::Ordering::SeqCst) {
                reported_at_churn.store(reported, std::sync::atomic::Ordering::SeqCst);
                crate::harness::finish_batch(low, "churn", 50).await;
                crate::harness::finish_batch(high, "churn", 50).await;
            }
            vacuums(low).await > 0
        },
    )
    .await;
    assert_eq!(
        vacuums(high).await,
        0,
        "the queue with the higher bar vacuumed"
    );
    for queue in [low, high] {
        queue
            .close(std::time::Duration::from_secs(10))
            .await
            .unwrap();
    }
}

/// A claim of several names locks only the jobs it takes (review of issue 19's claims): another node claiming at
/// the same moment, while the first node's transaction is still open, takes the next jobs instead of finding every
/// job of those names locked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_of_several_names_locks_only_what_it_takes() {
    let db = TestDatabase::new();
    let queue = cairn::Queue::open(&db.url).await.unwrap();
    let names: Vec<String> = (0..20).map(|i| format!("email.n{i:02}")).collect();
    let pushes = names.iter().map(|n| cairn::Push::new(n.as_str())).collect();
    queue.enqueue_batch(pushes).await.unwrap();
    queue
        .close(std::time::Duration::from_secs(5))
        .await
        .unwrap();
    let url = db.url.clone();
    std::thread::spawn(move || {
        for patterns in [&["email.*"][..], &["email.n0?", "email.n1*"], &["email.n03", "email.n07"]] {
            let (sql, middle) = cairn::__private::postgres_claim_select(patterns);
            let claim = |client: &mut postgres::Transaction<'_>, limit: i64| -> Vec<i64> {
                let mut params: Vec<&(dyn postgres::types::ToSql + Sync)> = vec![&"default"];
                params.extend(middle.iter().map(|m| m as &(dyn postgres::types::ToSql + Sync)));
                params.push(&limit);
                client
                    .query(sql.as_str(), &params)
                    .unwrap_or_else(|e| panic!("{e:?} in {sql}"))
                    .iter()
                    .map(|r| r.get(0))
                    .collect()
            };
            let mut first = postgres::Client::connect(&url, postgres::NoTls).unwrap();
            let mut second = postgres::Client::connect(&url, postgres::NoTls).unwrap();
            let mut a = first.transaction().unwrap();
            let mut b = second.transaction().unwrap();
            let taken_by_a = claim(&mut a, 1);
            let taken_by_b = claim(&mut b, 1);
            assert_eq!(taken_by_a.len(), 1, "{patterns:?}");
            assert_eq!(taken_by_b.len(), 1, "{patterns:?}: the second node finds a job the first did not lock");
            assert_ne!(taken_by_a, taken_by_b, "{patterns:?}");
            // Together, they leave every other job unlocked.
            let mut third = postgres::Client::connect(&url, postgres::NoTls).unwrap();
            let unlocked: i64 = third
                .query_one(
                    "SELECT count(*) FROM (SELECT id FROM jobs WHERE state = 'queued' FOR UPDATE SKIP LOCKED) AS free",
                    &[],
                )
                .unwrap()
                .get(0);
            assert_eq!(unlocked, 18, "{patterns:?}: only the two jobs taken are locked");
            drop(b);
            drop(a);
        }
    })
    .join()
    .unwrap();
}

/// Eight workers on three nodes take and finish jobs of a few keys with a limit of 2, all at once: never more than
/// two jobs of a key run. A worker counts a job as running from its claim's reply to just before it finishes it,
/// an interval inside the one the database holds it running, so a count of three means three ran at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_limit_holds_for_eight_workers_on_three_nodes() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicI64, Ordering};
    const KEYS: usize = 3;
    const PER_KEY: usize = 60;
    let db = TestDatabase::new();
    let clock = cairn::ManualClock::new(crate::harness::start_time());
    let first = two_nodes(&db, &clock).await;
    first.limit_keys("k", Some(2)).await.unwrap();
    let pushes = (0..KEYS * PER_KEY)
        .map(|i| {
            cairn::Push::new("job")
                .queue("k")
                .concurrency_key(format!("key-{}", i % KEYS))
        })
        .collect();
    first.enqueue_batch(pushes).await.unwrap();
    let nodes = [
        first,
        two_nodes(&db, &clock).await,
        two_nodes(&db, &clock).await,
    ];
    let running: Arc<Vec<AtomicI64>> = Arc::new((0..KEYS).map(|_| AtomicI64::new(0)).collect());
    let most: Arc<Vec<AtomicI64>> = Arc::new((0..KEYS).map(|_| AtomicI64::new(0)).collect());
    let mut workers = Vec::new();
    for w in 0..8 {
        let node = nodes[w % 3].clone();
        let (running, most) = (running.clone(), most.clone());
        workers.push(tokio::spawn(async move {
            let mut done = 0;
            loop {
                let claimed = node
                    .dequeue(
                        cairn::Dequeue::new(format!("w{w}"))
                            .queue("k")
                            .limit(2)
                            .wait(std::time::Duration::from_millis(300)),
                    )
                    .await
                    .unwrap();
                if claimed.is_empty() {
                    return done;
                }
                let slots: Vec<usize> = claimed
                    .iter()
                    .map(|c| {
                        let key = c.job.concurrency_key.as_ref().unwrap().to_string();
                        key.trim_start_matches("key-").parse::<usize>().unwrap()
                    })
                    .collect();
                for &k in &slots {
                    let now = running[k].fetch_add(1, Ordering::SeqCst) + 1;
                    most[k].fetch_max(now, Ordering::SeqCst);
                }
                // Real time: the jobs run a while, the span in which the other workers' claims must not take a
                // third job of the key; with none, a job would count as running for no time at all.
                tokio::time::sleep(std::time::Duration::from_millis(2)).await;
                for (c, &k) in claimed.iter().zip(&slots) {
                    running[k].fetch_sub(1, Ordering::SeqCst);
                    node.finish(&c.lease, None).await.unwrap();
                    done += 1;
                }
            }
        }));
    }
    let mut done = 0;
    for worker in workers {
        done += worker.await.unwrap();
    }
    assert_eq!(done, KEYS * PER_KEY, "every job ran once");
    for k in 0..KEYS {
        let most = most[k].load(Ordering::SeqCst);
        assert!((1..=2).contains(&most), "key {k}: {most} ran at once");
    }
    for node in nodes {
        node.close(std::time::Duration::from_secs(10))
            .await
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_slot_freed_on_one_node_wakes_a_worker_waiting_on_another() {
    let db = TestDatabase::new();
    let clock = cairn::ManualClock::new(crate::harness::start_time());
    let a = two_nodes(&db, &clock).await;
    a.limit_keys("x", Some(1)).await.unwrap();
    for _ in 0..2 {
        a.enqueue(cairn::Push::new("job").queue("x").concurrency_key("k"))
            .await
            .unwrap();
    }
    let b = two_nodes(&db, &clock).await;
    let running = take(&a, "x", "a").await;
    assert_eq!(running.len(), 1);
    let waiting = {
        let b = b.clone();
        tokio::spawn(async move {
            b.dequeue(
                cairn::Dequeue::new("b")
                    .queue("x")
                    .wait(std::time::Duration::from_secs(30)),
            )
            .await
            .unwrap()
        })
    };
    b.settle().await.unwrap();
    assert!(!waiting.is_finished(), "the key is at its limit");
    a.finish(&running[0].lease, None).await.unwrap();
    let claimed = tokio::time::timeout(std::time::Duration::from_secs(10), waiting)
        .await
        .expect("woken by the slot freed on the other node")
        .unwrap();
    assert_eq!(claimed.len(), 1);
    b.close(std::time::Duration::from_secs(10)).await.unwrap();
    a.close(std::time::Duration::from_secs(10)).await.unwrap();
}
