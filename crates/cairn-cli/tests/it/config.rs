//! `cairn config` and `/v1/config`: options changed while the server runs, stored across restarts.

use cairn::Jobs;
use std::time::Duration;

use cairn::{ConfigKey, ConfigValue, Push};
use cairn_api::{ConfigEntryBody, ConfigListBody};
use serde_json::{Value, json};

use super::cli::{check_error, mask_times, ok, ok_json};
use super::harness::{TestServer, raw};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn options_set_from_the_shell_apply_at_once_and_outlive_a_restart() {
    let mut server = TestServer::spawn_with(&["--lease-timeout", "90s"]);
    assert_eq!(
        ok(&server.cairn(&["config", "list"], None)),
        "\
KEY                           VALUE    DEFAULT  SET AT
default_lease_timeout         1m 30s   1m 30s   -
default_retry.max_attempts    5        5        -
default_retry.initial_delay   5s       5s       -
default_retry.multiplier      2.0      2.0      -
default_retry.max_delay       1h       1h       -
default_retry.jitter          0.2      0.2      -
retention.max_age             168h     168h     -
retention.max_count           100000   100000   -
retention.worker_max_age      24h      24h      -
retention.activity_max_age    168h     168h     -
retention.activity_max_count  5000000  5000000  -
retention.stats_max_age       192h     192h     -
retention.interval            1m       1m       -
max_data_bytes                1048576  1048576  -
"
    );
    assert_eq!(
        mask_times(&ok(
            &server.cairn(&["config", "set", "default_lease_timeout", "5s"], None)
        )),
        "default_lease_timeout: 5s (set YYYY-MM-DDTHH:MM:SSZ; default 1m 30s)\n"
    );
    assert_eq!(
        ok(&server.cairn(&["config", "set", "retention.max_count", "off"], None))
            .split(" (")
            .next(),
        Some("retention.max_count: off")
    );
    let client = server.client();
    let id = client.enqueue(Push::new("a")).await.unwrap().id;
    assert_eq!(
        client.get(id).await.unwrap().lease_timeout,
        Duration::from_secs(5)
    );

    // Restarted with the same flag: the value set wins, and says so.
    assert_eq!(server.terminate(), Some(0));
    server.start();
    let entry: ConfigEntryBody =
        ok_json(&server.cairn(&["config", "get", "default_lease_timeout", "--json"], None));
    assert_eq!((entry.value, entry.default), (json!(5000), json!(90_000)));
    assert!(entry.set_at.is_some());
    assert_eq!(entry.unit, "ms");
    assert_eq!(
        ok(&server.cairn(&["config", "unset", "default_lease_timeout"], None)),
        "default_lease_timeout: 1m 30s (default)\n"
    );
    let listed: ConfigListBody = ok_json(&server.cairn(&["config", "list", "--json"], None));
    let max_count = listed
        .config
        .iter()
        .find(|e| e.key == "retention.max_count")
        .unwrap();
    assert_eq!(max_count.value, Value::Null);
    assert_eq!(max_count.unit, "count");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_reads_and_changes_options_like_the_embedded_queue() {
    let server = TestServer::spawn();
    let client = server.client();
    let entry = client
        .set_config(ConfigKey::RetryJitter, ConfigValue::Number(0.5))
        .await
        .unwrap();
    assert_eq!(entry.value, ConfigValue::Number(0.5));
    let entries = client.config().await.unwrap();
    assert_eq!(entries.len(), ConfigKey::ALL.len());
    assert_eq!(entries[5], entry);
    assert_eq!(entries.len(), 14);
    let entry = client.unset_config(ConfigKey::RetryJitter).await.unwrap();
    assert_eq!(
        (entry.value, entry.set_at),
        (ConfigValue::Number(0.2), None)
    );
    let e = client
        .set_config(
            ConfigKey::RetentionInterval,
            ConfigValue::Duration(Duration::ZERO),
        )
        .await
        .unwrap_err();
    assert_eq!(e.field(), Some("retention.interval"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_keys_and_values_name_the_field_from_the_shell_and_over_http() {
    let server = TestServer::spawn();
    check_error(
        &server.cairn(&["config", "set", "retention.max_count", "many"], None),
        2,
        "retention.max_count: must be a whole number or off",
    );
    check_error(
        &server.cairn(&["config", "set", "default_lease_timeout", "off"], None),
        2,
        "default_lease_timeout: cannot be off",
    );
    check_error(
        &server.cairn(
            &["config", "set", "default_retry.initial_delay", "2h"],
            None,
        ),
        2,
        "would make the default retry policy invalid",
    );
    let usage = server.cairn(&["config", "get", "retention"], None);
    assert_eq!(usage.status.code(), Some(2));

    let url = server.url().to_owned();
    // (method, path, body, field)
    let cases: [(reqwest::Method, &str, Option<&str>, &str); 7] = [
        (reqwest::Method::GET, "/v1/config/nope", None, "key"),
        (
            reqwest::Method::PUT,
            "/v1/config/nope",
            Some(r#"{"value":1}"#),
            "key",
        ),
        (reqwest::Method::DELETE, "/v1/config/nope", None, "key"),
        (
            reqwest::Method::PUT,
            "/v1/config/retention.max_age",
            Some("{}"),
            "value",
        ),
        (
            reqwest::Method::PUT,
            "/v1/config/retention.max_age",
            Some(r#"{"value":"1h"}"#),
            "retention.max_age",
        ),
        (
            reqwest::Method::PUT,
            "/v1/config/max_data_bytes",
            Some(r#"{"value":-5}"#),
            "max_data_bytes",
        ),
        (
            reqwest::Method::PUT,
            "/v1/config/default_retry.max_attempts",
            Some(r#"{"value":null}"#),
            "default_retry.max_attempts",
        ),
    ];
    for (method, path, body, field) in cases {
        let (status, got) = raw(method.clone(), format!("{url}{path}"), None, body).await;
        assert_eq!(status, 400, "{method} {path}: {got}");
        assert_eq!(got["error"]["field"], field, "{method} {path}: {got}");
    }
    // Nothing was set by any of them.
    let listed: ConfigListBody = ok_json(&server.cairn(&["config", "list", "--json"], None));
    assert!(listed.config.iter().all(|e| e.set_at.is_none()));
}
