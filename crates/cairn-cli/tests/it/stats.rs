//! Seeing the queue over the wire: `/v1/stats`, `/v1/activity`, `/metrics`, and `cairn stats|activity`.

use cairn::Jobs;
use cairn::{Dequeue, Push};
use cairn_api::{ActivityPageBody, SqlBody, StatsBody, WorkerStatsBody};
use serde_json::json;

use super::cli::{check_error, ok, ok_json};
use super::harness::{TestServer, post, raw};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statistics_activity_and_metrics_show_what_happened() {
    let server = TestServer::spawn();
    let client = server.client();
    let id = client
        .enqueue(Push::new("email.send").queue("mail"))
        .await
        .unwrap()
        .id;
    client
        .enqueue(Push::new("email.send").queue("mail"))
        .await
        .unwrap();
    let claimed = client
        .dequeue(Dequeue {
            queues: vec!["mail".into()],
            ..Dequeue::new("w1")
        })
        .await
        .unwrap();
    client.finish(&claimed[0].lease, None).await.unwrap();

    let stats: StatsBody = ok_json(&server.cairn(&["stats", "--queue", "mail", "--json"], None));
    assert_eq!(stats.period, "hour");
    assert_eq!(stats.series.len(), 60);
    assert_eq!(stats.bucket_ms, 60_000);
    assert_eq!(
        (
            stats.totals.added,
            stats.totals.started,
            stats.totals.finished
        ),
        (2, 1, 1)
    );
    assert_eq!(
        (stats.wait.count, stats.run.count, stats.service.count),
        (1, 1, 1)
    );
    assert_eq!(stats.wait.histogram.iter().map(|b| b.count).sum::<u64>(), 1);
    let week: StatsBody = ok_json(&server.cairn(&["stats", "--period", "week", "--json"], None));
    assert_eq!((week.series.len(), week.totals.added), (168, 2));
    let human = ok(&server.cairn(&["stats", "--name", "email.send"], None));
    assert!(human.contains("added 2  started 1  finished 1"), "{human}");
    assert!(human.contains("\nwait "), "{human}");

    let story: ActivityPageBody =
        ok_json(&server.cairn(&["activity", "--job", &id.to_string(), "--json"], None));
    let events: Vec<&str> = story.events.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(events, ["finished", "started", "added"]);
    assert_eq!(story.events[0].worker.as_deref(), Some("w1"));
    let human = ok(&server.cairn(&["activity", "--worker", "w1"], None));
    assert!(human.starts_with("AT "), "{human}");
    assert!(human.contains("worker_started"), "{human}");

    let (status, body) = raw(
        reqwest::Method::GET,
        format!("{}/v1/stats/workers?period=day", server.url()),
        None,
        None,
    )
    .await;
    assert_eq!(status, 200);
    let workers: WorkerStatsBody = serde_json::from_value(body).unwrap();
    assert_eq!(workers.workers[0].worker, "w1");
    assert_eq!(workers.workers[0].attempts, 1);

    // Prometheus: counters and histograms per queue and name, and the queues' jobs by state.
    let response = crate::harness::http()
        .get(format!("{}/metrics", server.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain; version=0.0.4")
    );
    let text = response.text().await.unwrap();
    for line in [
        "# TYPE cairn_jobs_added_total counter",
        "cairn_jobs_added_total{queue=\"mail\",name=\"email.send\"} 2",
        "cairn_jobs_finished_total{queue=\"mail\",name=\"email.send\"} 1",
        "# TYPE cairn_job_wait_seconds histogram",
        "cairn_job_wait_seconds_bucket{queue=\"mail\",name=\"email.send\",le=\"+Inf\"} 1",
        "cairn_job_run_seconds_count{queue=\"mail\",name=\"email.send\"} 1",
        "cairn_queue_jobs{queue=\"mail\",state=\"queued\"} 1",
        "cairn_queue_jobs{queue=\"mail\",state=\"completed\"} 1",
        "# TYPE cairn_queue_suspended_jobs gauge",
        "cairn_queue_suspended_jobs{queue=\"mail\"} 0",
        "cairn_queue_paused{queue=\"mail\"} 0",
    ] {
        assert!(text.lines().any(|l| l == line), "no {line:?} in:\n{text}");
    }

    // A worker that says it stops.
    let (status, _) = post(&server, "/v1/workers/w1/stop", "{}").await;
    assert_eq!(status, 200);
    let page: ActivityPageBody = ok_json(&server.cairn(
        &["activity", "--worker", "w1", "--limit", "1", "--json"],
        None,
    ));
    assert_eq!(page.events[0].event, "worker_stopped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_filters_name_the_field() {
    let server = TestServer::spawn();
    let url = server.url().to_owned();
    let cases = [
        ("/v1/stats?period=month", json!("period")),
        ("/v1/stats?queue=a&queue=b", json!("query")),
        ("/v1/stats?interval=1", json!("query")),
        ("/v1/stats/workers?period=year", json!("period")),
        ("/v1/activity?job=abc", json!("job")),
        ("/v1/activity?job=0", json!("job")),
        ("/v1/activity?since=yesterday", json!("since")),
        ("/v1/activity?until=2026-13-01T00:00:00Z", json!("until")),
        ("/v1/activity?limit=0", json!("limit")),
        ("/v1/activity?limit=1001", json!("limit")),
        ("/v1/activity?before=-1", json!("before")),
        (
            "/v1/activity?since=2026-02-01T00:00:00Z&until=2026-01-01T00:00:00Z",
            json!("since"),
        ),
    ];
    for (path, field) in cases {
        let (status, body) = raw(reqwest::Method::GET, format!("{url}{path}"), None, None).await;
        assert_eq!(
            (status, &body["error"]["field"]),
            (400, &field),
            "{path}: {body}"
        );
    }
    let (status, body) = post(&server, "/v1/workers/bad%0Aid/stop", "{}").await;
    assert_eq!(
        (status, &body["error"]["field"]),
        (400, &json!("worker")),
        "{body}"
    );
    let usage = server.cairn(&["stats", "--period", "month"], None);
    assert_eq!(usage.status.code(), Some(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_sql_from_the_shell_and_over_http() {
    let server = TestServer::spawn();
    let client = server.client();
    for name in ["a", "b", "b"] {
        client.enqueue(Push::new(name)).await.unwrap();
    }
    assert_eq!(
        ok(&server.cairn(
            &[
                "sql",
                "SELECT name, count(*) AS n FROM cairn_jobs GROUP BY name ORDER BY name"
            ],
            None
        )),
        "name  n\na     1\nb     2\n"
    );
    let body: SqlBody = ok_json(&server.cairn(
        &[
            "sql",
            "SELECT id, state FROM jobs ORDER BY id",
            "--limit",
            "2",
            "--json",
        ],
        None,
    ));
    assert_eq!(body.columns, ["id", "state"]);
    assert_eq!(
        body.rows,
        [
            vec![json!(1), json!("queued")],
            vec![json!(2), json!("queued")]
        ]
    );
    assert!(body.truncated);
    check_error(
        &server.cairn(&["sql", "DELETE FROM jobs"], None),
        2,
        "query: must only read",
    );
    for (body, field) in [
        (r#"{"query":"UPDATE jobs SET state = 'x'"}"#, "query"),
        (r#"{"query":"SELECT 1","limit":0}"#, "limit"),
        (r#"{"query":"SELECT 1","timeout_ms":60000}"#, "timeout_ms"),
        (r#"{"query":"SELECT 1","rows":5}"#, "rows"),
        (r#"{"limit":5}"#, "query"),
    ] {
        let (status, got) = post(&server, "/v1/sql", body).await;
        assert_eq!(
            (status, &got["error"]["field"]),
            (400, &json!(field)),
            "{body}: {got}"
        );
    }
    assert_eq!(client.queue_stats().await.unwrap()[0].queued, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_reads_statistics_activity_and_sql_in_the_engines_types() {
    let server = TestServer::spawn();
    let client = server.client();
    let id = client.enqueue(Push::new("a")).await.unwrap().id;
    let claimed = client.dequeue(Dequeue::new("w")).await.unwrap();
    client.finish(&claimed[0].lease, None).await.unwrap();
    let stats = client
        .stats(cairn::StatsQuery {
            period: cairn::StatsPeriod::Day,
            ..cairn::StatsQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(stats.period, cairn::StatsPeriod::Day);
    assert_eq!((stats.totals.added, stats.totals.finished), (1, 1));
    assert_eq!(stats.series.len(), 24);
    assert_eq!(stats.run.count, 1);
    let page = client
        .activity(cairn::ActivityFilter {
            job: Some(id),
            ..cairn::ActivityFilter::default()
        })
        .await
        .unwrap();
    let kinds: Vec<_> = page.events.iter().map(|e| e.kind).collect();
    use cairn::ActivityKind::{Added, Finished, Started};
    assert_eq!(kinds, [Finished, Started, Added]);
    let usage = client.worker_stats(cairn::StatsPeriod::Hour).await.unwrap();
    assert_eq!(usage.workers[0].attempts, 1);
    let result = client
        .sql(cairn::SqlQuery::new(
            "SELECT 1 AS one, 'x' AS two, NULL AS three",
        ))
        .await
        .unwrap();
    assert_eq!(result.columns, ["one", "two", "three"]);
    assert_eq!(result.rows, [vec![json!(1), json!("x"), json!(null)]]);
}

/// Names made per entity (BedrockWorkerManager's `Worker?accountID=…`) count under their family, the name up to its
/// first `?`: 10,000 of them make one statistics row a minute and one series per metric, while each job keeps its
/// whole name. `--stats-name-cut` chooses other characters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_made_per_entity_count_under_their_family() {
    let server = TestServer::spawn();
    for chunk in 0..10 {
        let jobs: Vec<_> = (0..1000)
            .map(|n| json!({"name": format!("Worker?accountID={}", chunk * 1000 + n)}))
            .collect();
        let (status, body) = post(
            &server,
            "/v1/jobs/batch",
            &json!({"jobs": jobs}).to_string(),
        )
        .await;
        assert_eq!(status, 200, "{}", body["error"]);
    }
    let rows: SqlBody = ok_json(&server.cairn(
        &[
            "sql",
            "SELECT name, CAST(sum(added) AS BIGINT) FROM cairn_stats_minute GROUP BY name",
            "--json",
        ],
        None,
    ));
    assert_eq!(rows.rows, [[json!("Worker"), json!(10_000)]], "{rows:?}");
    let page: cairn_api::JobPageBody =
        ok_json(&server.cairn(&["list", "--limit", "1", "--json"], None));
    assert!(
        page.jobs[0].name.starts_with("Worker?accountID="),
        "{:?}",
        page.jobs[0].name
    );
    let metrics = crate::harness::http()
        .get(format!("{}/metrics", server.url()))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let series: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("cairn_jobs_added_total{"))
        .collect();
    assert_eq!(
        series,
        ["cairn_jobs_added_total{queue=\"default\",name=\"Worker\"} 10000"]
    );

    let server = TestServer::spawn_with(&["--stats-name-cut", "#/"]);
    for name in ["report#1", "report/2", "report?3"] {
        let (status, body) = post(&server, "/v1/jobs", &json!({"name": name}).to_string()).await;
        assert_eq!(status, 201, "{body}");
    }
    let rows: SqlBody = ok_json(&server.cairn(
        &[
            "sql",
            "SELECT name, CAST(sum(added) AS BIGINT) FROM cairn_stats_minute GROUP BY name ORDER BY name",
            "--json",
        ],
        None,
    ));
    assert_eq!(
        rows.rows,
        [[json!("report"), json!(2)], [json!("report?3"), json!(1)]]
    );
}
