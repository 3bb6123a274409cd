//! Options changed at run time: listed with their defaults, applied at once, stored across restarts, unset.

use cairn::Jobs;
use std::time::Duration;

use cairn::{ConfigKey, ConfigValue, ErrorKind, JobFilter, Push, Queue, QueueOptions};
use serde_json::json;

use super::harness::TestQueue;

fn value_of(entries: &[cairn::ConfigEntry], key: ConfigKey) -> &cairn::ConfigEntry {
    entries.iter().find(|e| e.key == key).unwrap()
}

#[tokio::test]
async fn every_option_is_listed_with_the_value_the_queue_was_opened_with() {
    let t = TestQueue::with(|o| o.default_lease_timeout = Duration::from_secs(90)).await;
    let entries = t.queue.config().await.unwrap();
    let keys: Vec<_> = entries.iter().map(|e| e.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "default_lease_timeout",
            "default_retry.max_attempts",
            "default_retry.initial_delay",
            "default_retry.multiplier",
            "default_retry.max_delay",
            "default_retry.jitter",
            "retention.max_age",
            "retention.max_count",
            "retention.worker_max_age",
            "retention.activity_max_age",
            "retention.activity_max_count",
            "retention.stats_max_age",
            "retention.interval",
            "max_data_bytes",
        ]
    );
    assert!(
        entries
            .iter()
            .all(|e| e.value == e.default && e.set_at.is_none())
    );
    let lease = value_of(&entries, ConfigKey::DefaultLeaseTimeout);
    assert_eq!(lease.value, ConfigValue::Duration(Duration::from_secs(90)));
    let max_count = value_of(&entries, ConfigKey::RetentionMaxCount);
    assert_eq!(max_count.value, ConfigValue::Count(100_000));
    t.close().await;
}

#[tokio::test]
async fn a_value_set_at_run_time_applies_at_once_outlives_a_restart_and_can_be_unset() {
    let t = TestQueue::new().await;
    let entry = t
        .queue
        .set_config(
            ConfigKey::DefaultLeaseTimeout,
            ConfigValue::Duration(Duration::from_secs(5)),
        )
        .await
        .unwrap();
    assert_eq!(entry.value, ConfigValue::Duration(Duration::from_secs(5)));
    assert_eq!(
        entry.default,
        ConfigValue::Duration(Duration::from_secs(60))
    );
    assert_eq!(entry.set_at, Some(t.clock_now()));
    t.queue
        .set_config(ConfigKey::RetryMaxAttempts, ConfigValue::Count(2))
        .await
        .unwrap();
    let id = t.push("a").await;
    let job = t.queue.get(id).await.unwrap();
    assert_eq!(job.lease_timeout, Duration::from_secs(5));
    assert_eq!(job.retry.max_attempts, 2);
    // A job that brings its own keeps it.
    let own = t
        .queue
        .enqueue(Push::new("b").lease_timeout(Duration::from_secs(7)))
        .await
        .unwrap()
        .id;
    assert_eq!(
        t.queue.get(own).await.unwrap().lease_timeout,
        Duration::from_secs(7)
    );

    // Reopened with the same options: the stored values win over them.
    t.close().await;
    let options = QueueOptions {
        clock: std::sync::Arc::new(t.clock.clone()),
        ..QueueOptions::default()
    };
    let queue = Queue::open_with(t.path(), options).await.unwrap();
    let entries = queue.config().await.unwrap();
    assert_eq!(
        value_of(&entries, ConfigKey::DefaultLeaseTimeout).value,
        ConfigValue::Duration(Duration::from_secs(5))
    );
    let id = queue.enqueue(Push::new("c")).await.unwrap().id;
    assert_eq!(
        queue.get(id).await.unwrap().lease_timeout,
        Duration::from_secs(5)
    );
    // Unset: back to the value it was opened with, now and after the next restart.
    let entry = queue
        .unset_config(ConfigKey::DefaultLeaseTimeout)
        .await
        .unwrap();
    assert_eq!(entry.value, ConfigValue::Duration(Duration::from_secs(60)));
    assert_eq!(entry.set_at, None);
    let id = queue.enqueue(Push::new("d")).await.unwrap().id;
    assert_eq!(
        queue.get(id).await.unwrap().lease_timeout,
        Duration::from_secs(60)
    );
    queue.close(Duration::from_secs(10)).await.unwrap();
}

#[tokio::test]
async fn bad_values_are_refused_naming_the_key_and_change_nothing() {
    let t = TestQueue::new().await;
    let cases = [
        (
            ConfigKey::DefaultLeaseTimeout,
            ConfigValue::Off,
            "must be a duration",
        ),
        (
            ConfigKey::DefaultLeaseTimeout,
            ConfigValue::Duration(Duration::from_millis(10)),
            "must be between",
        ),
        (
            ConfigKey::RetryMaxAttempts,
            ConfigValue::Count(0),
            "must be between 1",
        ),
        (ConfigKey::RetryJitter, ConfigValue::Number(1.5), "jitter"),
        (
            ConfigKey::RetryMultiplier,
            ConfigValue::Number(f64::NAN),
            "finite",
        ),
        (
            // Above the default retry's 1 h maximum.
            ConfigKey::RetryInitialDelay,
            ConfigValue::Duration(Duration::from_secs(7200)),
            "would make the default retry policy invalid",
        ),
        (
            ConfigKey::RetentionInterval,
            ConfigValue::Duration(Duration::from_millis(1)),
            "must be between",
        ),
        (
            ConfigKey::MaxDataBytes,
            ConfigValue::Count(0),
            "must be between 1",
        ),
        (
            ConfigKey::RetentionMaxCount,
            ConfigValue::Number(3.0),
            "whole number",
        ),
    ];
    for (key, value, rule) in cases {
        let e = t.queue.set_config(key, value).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput, "{key}");
        assert_eq!(e.field(), Some(key.as_str()), "{e}");
        assert!(e.to_string().contains(rule), "{key}: {e}");
    }
    assert!(
        t.queue
            .config()
            .await
            .unwrap()
            .iter()
            .all(|e| e.set_at.is_none())
    );
    // Raising the maximum first makes the same initial delay fine.
    t.queue
        .set_config(
            ConfigKey::RetryMaxDelay,
            ConfigValue::Duration(Duration::from_secs(86_400)),
        )
        .await
        .unwrap();
    t.queue
        .set_config(
            ConfigKey::RetryInitialDelay,
            ConfigValue::Duration(Duration::from_secs(7200)),
        )
        .await
        .unwrap();
    // Read back (and so after a restart, or a rolled-back batch), the pair holds, whatever the order of the keys.
    let entries = t.queue.config().await.unwrap();
    assert_eq!(
        value_of(&entries, ConfigKey::RetryInitialDelay).value,
        ConfigValue::Duration(Duration::from_secs(7200))
    );
    // Unsetting the maximum now would break the policy: refused, naming the key.
    let e = t
        .queue
        .unset_config(ConfigKey::RetryMaxDelay)
        .await
        .unwrap_err();
    assert_eq!(e.field(), Some("default_retry.max_delay"));

    let e = ConfigKey::parse("retention.maxage").unwrap_err();
    assert_eq!(e.field(), Some("key"));
    assert!(e.to_string().contains("retention.max_age"), "{e}");
    let key = ConfigKey::RetentionMaxAge;
    assert_eq!(key.value_from_json(&json!(null)).unwrap(), ConfigValue::Off);
    assert_eq!(
        key.value_from_json(&json!(60_000)).unwrap(),
        ConfigValue::Duration(Duration::from_secs(60))
    );
    for bad in [json!(-1), json!(1.5), json!("1h"), json!([1])] {
        let e = key.value_from_json(&bad).unwrap_err();
        assert_eq!(e.field(), Some("retention.max_age"), "{bad}");
    }
    let e = ConfigKey::DefaultLeaseTimeout
        .value_from_json(&json!(null))
        .unwrap_err();
    assert!(e.to_string().contains("cannot be off"), "{e}");
    t.close().await;
}

#[tokio::test]
async fn retention_set_at_run_time_prunes_at_the_next_pass() {
    let t = TestQueue::with(|o| {
        o.retention = cairn::Retention {
            max_age: None,
            max_count: None,
            worker_max_age: None,
            interval: Duration::from_secs(3600),
            ..Default::default()
        }
    })
    .await;
    for name in ["a", "b", "c"] {
        t.push(name).await;
        let claimed = t.take("w").await.unwrap();
        t.queue.finish(&claimed.lease, None).await.unwrap();
    }
    t.queue
        .set_config(ConfigKey::RetentionMaxCount, ConfigValue::Count(1))
        .await
        .unwrap();
    // A shorter interval applies from now, not from the pass an hour away.
    t.queue
        .set_config(
            ConfigKey::RetentionInterval,
            ConfigValue::Duration(Duration::from_secs(60)),
        )
        .await
        .unwrap();
    t.advance(Duration::from_secs(60));
    t.queue.settle().await.unwrap();
    let left = t.queue.list(JobFilter::default()).await.unwrap().jobs;
    assert_eq!(left.len(), 1, "only the newest finished job is kept");
    t.close().await;
}

#[tokio::test]
async fn workers_are_forgotten_when_worker_age_is_the_only_retention() {
    let t = TestQueue::with(|o| {
        o.retention = cairn::Retention {
            max_age: None,
            max_count: None,
            worker_max_age: None,
            interval: Duration::from_secs(60),
            ..Default::default()
        }
    })
    .await;
    assert!(t.take("idle").await.is_none());
    t.queue
        .set_config(
            ConfigKey::WorkerMaxAge,
            ConfigValue::Duration(Duration::from_secs(600)),
        )
        .await
        .unwrap();
    t.advance(Duration::from_secs(601));
    t.queue.settle().await.unwrap();
    t.advance(Duration::from_secs(60));
    t.queue.settle().await.unwrap();
    assert!(t.queue.workers().await.unwrap().is_empty());
    t.close().await;
}

#[tokio::test]
async fn the_data_limit_and_a_transactional_enqueue_follow_the_values_set() {
    let t = TestQueue::new().await;
    t.queue
        .set_config(ConfigKey::MaxDataBytes, ConfigValue::Count(16))
        .await
        .unwrap();
    let e = t
        .queue
        .enqueue(Push::new("big").data(json!({"text": "more than sixteen bytes"})))
        .await
        .unwrap_err();
    assert_eq!(e.field(), Some("data"));
    t.queue
        .set_config(
            ConfigKey::DefaultLeaseTimeout,
            ConfigValue::Duration(Duration::from_secs(9)),
        )
        .await
        .unwrap();
    // In the application's transaction where there is one (a queue on a SQLite file), through the writer on
    // PostgreSQL.
    let id = if t.is_postgres() {
        t.queue.enqueue(Push::new("small")).await.unwrap().id
    } else {
        let mut conn = t.queue.connect().unwrap();
        let tx = conn.transaction().unwrap();
        let id = t.queue.enqueue_in(&tx, &Push::new("small")).unwrap().id;
        tx.commit().unwrap();
        id
    };
    assert_eq!(
        t.queue.get(id).await.unwrap().lease_timeout,
        Duration::from_secs(9)
    );
    t.close().await;
}
