//! Operating queues through the real binary and over HTTP: pause and resume, counts by state, peek, failure groups
//! and unfail, tags, and bad input that names its field. The Rust client's methods are checked alongside the
//! commands that use them.

use cairn::Jobs;
use std::time::Duration;

use cairn::{
    ChangeTags, Dequeue, ErrorKind, JobFilter, JobId, Push, QueueStats, RetryPolicy, Unfail,
};
use cairn_api::{
    EmptyBody, FailureGroupListBody, JobPageBody, PeekBody, QueueListBody, QueueStatsBody,
    UnfailBody,
};
use serde_json::{Value, json};

use super::cli::{check_error, mask_times, ok, ok_json};
use super::harness::{TestServer, post, raw, stdout, take};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_queue_hands_out_nothing_until_it_is_resumed() {
    let server = TestServer::spawn();
    let client = server.client();
    let id = client.enqueue(Push::new("report")).await.unwrap().id;
    assert_eq!(
        ok(&server.cairn(&["queue", "pause", "default"], None)),
        "queue default: paused\n"
    );
    let got = server.cairn(&["dequeue", "report", "--wait", "0s"], None);
    assert_eq!(got.status.code(), Some(7), "nothing is handed out");
    assert_eq!(
        ok(&server.cairn(&["queue", "peek", "default"], None)),
        "no jobs ready (a paused queue shows none)\n"
    );
    // A long poll on the paused queue ends empty, even with a job enqueued while it waits.
    let polling = {
        let client = client.clone();
        tokio::spawn(async move {
            client
                .dequeue(Dequeue {
                    wait: Duration::from_secs(1),
                    ..take("w")
                })
                .await
        })
    };
    let second = client.enqueue(Push::new("report")).await.unwrap().id;
    assert!(polling.await.unwrap().unwrap().is_empty());
    // Everything but handing out works: the job is cancelled as usual.
    client.cancel(second).await.unwrap();
    let stats = client.queue_stats().await.unwrap();
    assert_eq!(
        stats,
        [QueueStats {
            queue: "default".into(),
            paused: true,
            queued: 1,
            cancelled: 1,
            ..QueueStats::default()
        }]
    );

    // A worker waiting on the queue gets the job once the queue is resumed.
    let waiting = {
        let client = client.clone();
        tokio::spawn(async move {
            client
                .dequeue(Dequeue {
                    wait: Duration::from_secs(50),
                    ..take("w")
                })
                .await
        })
    };
    let resumed: EmptyBody = tokio::task::block_in_place(|| {
        ok_json(&server.cairn(&["queue", "resume", "default", "--json"], None))
    });
    assert_eq!(resumed, EmptyBody {});
    let claimed = tokio::time::timeout(Duration::from_secs(20), waiting)
        .await
        .expect("the waiting worker got the job before its wait ended")
        .unwrap()
        .unwrap();
    assert_eq!(claimed[0].job.id, id);
    assert!(!client.queue_stats().await.unwrap()[0].paused);

    // The client pauses and resumes too.
    client.pause_queue("default", true).await.unwrap();
    let third = client.enqueue(Push::new("report")).await.unwrap().id;
    assert!(client.dequeue(take("w")).await.unwrap().is_empty());
    client.pause_queue("default", false).await.unwrap();
    assert_eq!(client.dequeue(take("w")).await.unwrap()[0].job.id, third);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queues_count_their_jobs_by_state() {
    let server = TestServer::spawn();
    let client = server.client();
    let push = |name: &str| {
        Push::new(name)
            .queue("work")
            .retry(RetryPolicy::immediate(1))
    };
    for name in ["running", "failed", "completed"] {
        client.enqueue(push(name)).await.unwrap();
    }
    let claimed = client
        .dequeue(Dequeue {
            queues: vec!["work".into()],
            limit: 3,
            ..Dequeue::new("w")
        })
        .await
        .unwrap();
    assert_eq!(claimed.len(), 3);
    client.fail(&claimed[1].lease, "g", "no").await.unwrap();
    client.finish(&claimed[2].lease, None).await.unwrap();
    let cancelled = client.enqueue(push("cancelled")).await.unwrap().id;
    client.cancel(cancelled).await.unwrap();
    let later = client
        .enqueue(push("scheduled").delay(Duration::from_secs(3600)))
        .await
        .unwrap()
        .id;
    client
        .enqueue(push("waiting").depends_on(later))
        .await
        .unwrap();
    client.enqueue(push("queued")).await.unwrap();
    // A queue paused before it has any job is listed too.
    ok(&server.cairn(&["queue", "pause", "later"], None));
    ok(&server.cairn(&["queue", "limit", "later", "5"], None));
    ok(&server.cairn(
        &["queue", "rate", "later", "--jobs", "10", "--per", "1s"],
        None,
    ));
    assert_eq!(
        ok(&server.cairn(&["queue", "aging", "later", "1m"], None)),
        "queue later: a waiting job gains a priority point every 1m\n"
    );

    assert_eq!(
        ok(&server.cairn(&["queues"], None)),
        "\
QUEUE  PAUSED  SCHEDULED  QUEUED  WAITING  SUSPENDED  RUNNING  STALLED  FAILED  COMPLETED  CANCELLED  SETTINGS
later  yes     0          0       0        0          0        0        0       0          0          concurrency=5 rate=10/1s aging=1m
work   no      1          1       1        0          1        0        1       1          1          -
"
    );
    let listed: QueueListBody = ok_json(&server.cairn(&["queues", "--json"], None));
    assert_eq!(
        listed.queues[1],
        QueueStatsBody {
            queue: "work".into(),
            paused: false,
            concurrency: None,
            rate_limit: None,
            priority_aging_ms: None,
            scheduled: 1,
            queued: 1,
            suspended: 0,
            waiting: 1,
            running: 1,
            stalled: 0,
            failed: 1,
            completed: 1,
            cancelled: 1,
            ..QueueStatsBody::default()
        }
    );
    assert_eq!(listed.queues[0].priority_aging_ms, Some(60_000));
    let stats = client.queue_stats().await.unwrap();
    assert_eq!(stats[1], QueueStats::from(listed.queues[1].clone()));
    assert_eq!(stats[0].priority_aging, Some(Duration::from_secs(60)));
    assert_eq!(
        ok(&server.cairn(&["queue", "aging", "later", "--off"], None)),
        "queue later: strict priority\n"
    );
    client
        .age_queue("later", Some(Duration::from_secs(1)))
        .await
        .unwrap();
    assert_eq!(
        client.queue_stats().await.unwrap()[0].priority_aging,
        Some(Duration::from_secs(1))
    );
    check_error(
        &server.cairn(&["queue", "aging", "later", "48h"], None),
        2,
        "every_ms: must be between",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peek_shows_the_next_jobs_in_claim_order_without_taking_them() {
    let server = TestServer::spawn();
    let client = server.client();
    for (name, priority) in [("low", 0), ("high", 5), ("mid", 1)] {
        client
            .enqueue(Push::new(name).queue("mail").priority(priority))
            .await
            .unwrap();
    }
    assert_eq!(
        mask_times(&ok(
            &server.cairn(&["queue", "peek", "mail", "--limit", "2"], None)
        )),
        "\
ID  NAME  PRIORITY  ATTEMPT  RUN AT
2   high  5         0/5      YYYY-MM-DDTHH:MM:SSZ
3   mid   1         0/5      YYYY-MM-DDTHH:MM:SSZ
"
    );
    let peeked: PeekBody = ok_json(&server.cairn(&["queue", "peek", "mail", "--json"], None));
    let names: Vec<&str> = peeked.jobs.iter().map(|j| j.name.as_str()).collect();
    assert_eq!(names, ["high", "mid", "low"]);
    let jobs = client.peek("mail", 1).await.unwrap();
    assert_eq!(jobs[0].name.as_str(), "high");
    // Nothing was taken.
    assert_eq!(client.queue_stats().await.unwrap()[0].queued, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_are_listed_by_group_and_unfailed_from_the_shell() {
    let server = TestServer::spawn();
    let client = server.client();
    let mut ids = Vec::new();
    for group in ["bad-csv", "bad-csv", "timeout", "bad-csv", "timeout", ""] {
        let id = client
            .enqueue(
                Push::new("import")
                    .queue("imports")
                    .retry(RetryPolicy::immediate(1)),
            )
            .await
            .unwrap()
            .id;
        ids.push(id);
        let claimed = client
            .dequeue(Dequeue {
                queues: vec!["imports".into()],
                ..take("w")
            })
            .await
            .unwrap();
        let lease = &claimed[0].lease;
        if group.is_empty() {
            // The last attempt's retry fails the job in the group `retries-exhausted`.
            client.retry(lease, "flaky", None).await.unwrap();
        } else {
            client.fail(lease, group, "no").await.unwrap();
        }
    }

    let groups: FailureGroupListBody = ok_json(&server.cairn(&["failures", "--json"], None));
    let counts: Vec<(&str, u64)> = groups
        .groups
        .iter()
        .map(|g| (g.group.as_str(), g.count))
        .collect();
    assert_eq!(
        counts,
        [("bad-csv", 3), ("retries-exhausted", 1), ("timeout", 2)]
    );
    assert!(groups.groups[0].first_failed_at <= groups.groups[0].last_failed_at);
    assert_eq!(
        mask_times(&ok(&server.cairn(&["failures"], None))),
        "\
GROUP              COUNT  FIRST FAILED          LAST FAILED
bad-csv            3      YYYY-MM-DDTHH:MM:SSZ  YYYY-MM-DDTHH:MM:SSZ
retries-exhausted  1      YYYY-MM-DDTHH:MM:SSZ  YYYY-MM-DDTHH:MM:SSZ
timeout            2      YYYY-MM-DDTHH:MM:SSZ  YYYY-MM-DDTHH:MM:SSZ
"
    );

    // A group's jobs, newest first, paged like `cairn list`.
    let page: JobPageBody =
        ok_json(&server.cairn(&["failures", "bad-csv", "--limit", "2", "--json"], None));
    let listed: Vec<i64> = page.jobs.iter().map(|j| j.id).collect();
    assert_eq!(listed, [ids[3].0, ids[1].0]);
    assert_eq!(page.next, Some(ids[1].0));
    let first = mask_times(&ok(
        &server.cairn(&["failures", "bad-csv", "--limit", "2"], None)
    ));
    assert!(
        first.ends_with(&format!("next: --before {}\n", ids[1])),
        "{first}"
    );
    let before = ids[1].to_string();
    let rest: JobPageBody = ok_json(&server.cairn(
        &["failures", "bad-csv", "--before", &before, "--json"],
        None,
    ));
    assert_eq!(rest.jobs[0].id, ids[0].0);
    let timeouts: JobPageBody =
        ok_json(&server.cairn(&["list", "--failure-group", "timeout", "--json"], None));
    assert_eq!(timeouts.jobs.len(), 2);
    let page = client
        .list(JobFilter {
            failure_group: Some("timeout".into()),
            ..JobFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(
        page.jobs.iter().map(|j| j.id).collect::<Vec<_>>(),
        [ids[4], ids[2]]
    );

    // The oldest two of bad-csv go to another queue, then the last one back to its own.
    let moved: UnfailBody = ok_json(&server.cairn(
        &[
            "unfail", "bad-csv", "--limit", "2", "--queue", "retry", "--json",
        ],
        None,
    ));
    assert_eq!(moved, UnfailBody { moved: 2 });
    for id in &ids[..2] {
        let job = client.get(*id).await.unwrap();
        assert_eq!(
            (job.state.as_str(), job.queue.as_str(), job.attempt),
            ("queued", "retry", 0)
        );
    }
    assert_eq!(
        ok(&server.cairn(&["unfail", "bad-csv"], None)),
        "failures bad-csv: moved 1 job back to their queues\n"
    );
    assert_eq!(client.get(ids[3]).await.unwrap().queue.as_str(), "imports");
    assert_eq!(
        ok(&server.cairn(&["unfail", "bad-csv"], None)),
        "failures bad-csv: moved 0 jobs back to their queues\n"
    );

    // The client moves and counts with the engine's types.
    let moved = client
        .unfail(Unfail {
            group: "timeout".into(),
            queue: None,
            limit: 1,
        })
        .await
        .unwrap();
    assert_eq!(moved, 1);
    let groups = client.failure_groups().await.unwrap();
    let counts: Vec<(&str, u64)> = groups.iter().map(|g| (g.group.as_str(), g.count)).collect();
    assert_eq!(counts, [("retries-exhausted", 1), ("timeout", 1)]);
    assert_eq!(
        client.get(ids[2]).await.unwrap().state,
        cairn::JobState::Queued,
        "the oldest of the group went first"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tags_are_added_and_removed_from_the_shell() {
    let server = TestServer::spawn();
    let client = server.client();
    let a = client.enqueue(Push::new("a")).await.unwrap().id;
    let b = client.enqueue(Push::new("b")).await.unwrap().id;
    let (a_text, b_text) = (a.to_string(), b.to_string());
    assert_eq!(
        ok(&server.cairn(&["tag", &a_text, "--add", "vip", "--add", "eu"], None)),
        format!("job {a}: tags added vip, eu\n")
    );
    let done: EmptyBody = ok_json(&server.cairn(&["tag", &b_text, "--add", "vip", "--json"], None));
    assert_eq!(done, EmptyBody {});
    assert_eq!(
        ok(&server.cairn(
            &["tag", &a_text, "--remove", "eu", "--remove", "absent"],
            None
        )),
        format!("job {a}: tags removed eu, absent\n")
    );
    let vip: JobPageBody = ok_json(&server.cairn(&["list", "--tag", "vip", "--json"], None));
    let ids: Vec<i64> = vip.jobs.iter().map(|j| j.id).collect();
    assert_eq!(ids, [b.0, a.0]);
    assert!(ok(&server.cairn(&["show", &a_text], None)).contains("tags: vip\n"));

    // Whatever the job's state: a finished job is tagged through the client too.
    let claimed = client.dequeue(take("w")).await.unwrap();
    client.finish(&claimed[0].lease, None).await.unwrap();
    client
        .change_tags(ChangeTags {
            job: a,
            add: vec!["done".into()],
            remove: vec!["vip".into()],
        })
        .await
        .unwrap();
    let tags: Vec<String> = client
        .get(a)
        .await
        .unwrap()
        .tags
        .iter()
        .map(|t| t.to_string())
        .collect();
    assert_eq!(tags, ["done"]);

    check_error(
        &server.cairn(&["tag", "999", "--add", "x"], None),
        3,
        "error: changing the tags of job 999: job 999 not found",
    );
    check_error(
        &server.cairn(&["tag", &a_text, "--add", ""], None),
        2,
        "tags: must not be empty",
    );
    let usage = server.cairn(&["tag", &a_text], None);
    assert_eq!(usage.status.code(), Some(2));
    assert_eq!(stdout(&usage), "");
    let err = client
        .change_tags(ChangeTags {
            job: JobId(999),
            add: vec!["x".into()],
            remove: vec![],
        })
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_to_queue_control_names_the_field() {
    let server = TestServer::spawn();
    let url = server.url().to_owned();
    let id = server.client().enqueue(Push::new("x")).await.unwrap().id;
    // (method, path, body, status, field)
    let cases: [(&str, String, &str, u16, Value); 19] = [
        (
            "POST",
            "/v1/queues/default/aging".into(),
            r#"{"every_ms":0}"#,
            400,
            json!("every_ms"),
        ),
        (
            "POST",
            "/v1/queues/default/aging".into(),
            r#"{"every":60000}"#,
            400,
            json!("every"),
        ),
        (
            "GET",
            "/v1/queues/default/peek?limit=0".into(),
            "",
            400,
            json!("limit"),
        ),
        (
            "GET",
            "/v1/queues/default/peek?limit=many".into(),
            "",
            400,
            json!("limit"),
        ),
        (
            "GET",
            "/v1/queues/default/peek?count=3".into(),
            "",
            400,
            json!("query"),
        ),
        (
            "GET",
            "/v1/queues/mail%20box/peek".into(),
            "",
            400,
            json!("queue"),
        ),
        (
            "POST",
            "/v1/queues/mail%20box/pause".into(),
            "",
            400,
            json!("queue"),
        ),
        (
            "POST",
            "/v1/queues/%FF/resume".into(),
            "",
            400,
            json!("queue"),
        ),
        (
            "POST",
            "/v1/failures/g/unfail".into(),
            r#"{"limit":0}"#,
            400,
            json!("limit"),
        ),
        (
            "POST",
            "/v1/failures/g/unfail".into(),
            r#"{"limit":-1}"#,
            400,
            json!("limit"),
        ),
        (
            "POST",
            "/v1/failures/g/unfail".into(),
            r#"{"queue":"no way"}"#,
            400,
            json!("queue"),
        ),
        (
            "POST",
            "/v1/failures/g/unfail".into(),
            r#"{"group":"g"}"#,
            400,
            json!("group"),
        ),
        (
            "POST",
            "/v1/failures/%FF/unfail".into(),
            "{}",
            400,
            json!("group"),
        ),
        ("POST", "/v1/jobs/abc/tags".into(), "{}", 400, json!("id")),
        (
            "POST",
            format!("/v1/jobs/{id}/tags"),
            r#"{"add":[""]}"#,
            400,
            json!("tags"),
        ),
        (
            "POST",
            format!("/v1/jobs/{id}/tags"),
            r#"{"add":"vip"}"#,
            400,
            json!("add"),
        ),
        (
            "POST",
            format!("/v1/jobs/{id}/tags"),
            r#"{"tags":["a"]}"#,
            400,
            json!("tags"),
        ),
        (
            "POST",
            "/v1/jobs/424242/tags".into(),
            r#"{"add":["a"]}"#,
            404,
            Value::Null,
        ),
        (
            "GET",
            "/v1/jobs?failure_group=a&failure_group=b".into(),
            "",
            400,
            json!("query"),
        ),
    ];
    for (method, path, body, status, field) in cases {
        let (got_status, got) = if method == "POST" {
            post(&server, &path, body).await
        } else {
            raw(reqwest::Method::GET, format!("{url}{path}"), None, None).await
        };
        assert_eq!(
            (got_status, &got["error"]["field"]),
            (status, &field),
            "{method} {path}: {got}"
        );
        if let Some(field) = field.as_str() {
            let message = got["error"]["message"].as_str().unwrap();
            assert!(message.starts_with(&format!("{field}: ")), "{message}");
        }
    }

    // (arguments, what stderr says); every one exits 2.
    let cli: [(&[&str], &str); 5] = [
        (
            &["queue", "peek", "default", "--limit", "0"],
            "limit: must be between 1 and 1000, got 0",
        ),
        (
            &["queue", "pause", "mail box"],
            "queue: may only contain letters, digits and _ - . :",
        ),
        (
            &["unfail", "g", "--limit", "0"],
            "limit: must be between 1 and 1000000, got 0",
        ),
        (
            &["unfail", "g", "--queue", "no way"],
            "queue: may only contain",
        ),
        (&["failures", "--limit", "3"], "<GROUP>"),
    ];
    for (args, message) in cli {
        check_error(&server.cairn(args, None), 2, message);
    }

    // The client refuses what a path cannot carry, as the embedded queue would.
    let client = server.client();
    let err = client.pause_queue("", true).await.unwrap_err();
    assert_eq!(
        (err.kind(), err.field()),
        (ErrorKind::InvalidInput, Some("queue"))
    );
    let err = client.peek("default", 0).await.unwrap_err();
    assert_eq!(err.field(), Some("limit"));
    let err = client
        .unfail(Unfail {
            group: String::new(),
            queue: None,
            limit: 1,
        })
        .await
        .unwrap_err();
    assert_eq!(err.field(), Some("group"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrency_and_rate_limits_are_set_and_shown_from_the_shell() {
    let server = TestServer::spawn();
    let client = server.client();
    for _ in 0..3 {
        client
            .enqueue(Push::new("send").queue("mail"))
            .await
            .unwrap();
    }
    assert_eq!(
        ok(&server.cairn(&["queue", "limit", "mail", "1"], None)),
        "queue mail: at most 1 running at once\n"
    );
    let first = client
        .dequeue(Dequeue {
            queues: vec!["mail".into()],
            limit: 5,
            ..Dequeue::new("a")
        })
        .await
        .unwrap();
    assert_eq!(first.len(), 1);
    let none = client
        .dequeue(Dequeue {
            queues: vec!["mail".into()],
            ..take("b")
        })
        .await
        .unwrap();
    assert!(none.is_empty(), "the limit holds across workers");
    assert_eq!(
        ok(&server.cairn(&["queue", "limit", "mail", "--off"], None)),
        "queue mail: no concurrency limit\n"
    );
    assert_eq!(
        ok(&server.cairn(
            &["queue", "rate", "mail", "--jobs", "1", "--per", "1h"],
            None
        )),
        "queue mail: at most 1 started per 1h\n"
    );
    let stats: QueueListBody = ok_json(&server.cairn(&["queues", "--json"], None));
    let mail = stats.queues.iter().find(|q| q.queue == "mail").unwrap();
    assert_eq!(mail.concurrency, None);
    assert_eq!(
        mail.rate_limit.map(|r| (r.jobs, r.per_ms)),
        Some((1, 3_600_000))
    );
    let took = client
        .dequeue(Dequeue {
            queues: vec!["mail".into()],
            limit: 5,
            ..Dequeue::new("c")
        })
        .await
        .unwrap();
    assert_eq!(took.len(), 1, "one start per hour");
    let usage = server.cairn(&["queue", "rate", "mail", "--jobs", "1"], None);
    assert_eq!(usage.status.code(), Some(2), "--jobs needs --per");
    assert_eq!(
        ok(&server.cairn(&["queue", "rate", "mail", "--off"], None)),
        "queue mail: no rate limit\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weighted_round_robin_works_over_http_and_bad_weights_name_the_field() {
    let server = TestServer::spawn();
    let client = server.client();
    let jobs: Vec<Push> = ["busy", "quiet"]
        .into_iter()
        .flat_map(|queue| (0..20).map(move |_| Push::new("x").queue(queue)))
        .collect();
    client.enqueue_batch(jobs).await.unwrap();
    let request = Dequeue {
        queues: vec!["busy".into(), "quiet".into()],
        order: cairn::QueueOrder::RoundRobin,
        weights: vec![3, 1],
        limit: 8,
        ..Dequeue::new("w")
    };
    let got = client.dequeue(request.clone()).await.unwrap();
    let busy = got
        .iter()
        .filter(|c| c.job.queue.as_str() == "busy")
        .count();
    assert_eq!((busy, got.len() - busy), (6, 2));
    let err = client
        .dequeue(Dequeue {
            weights: vec![3],
            ..request
        })
        .await
        .unwrap_err();
    assert_eq!(err.field(), Some("weights"), "{err}");
}
