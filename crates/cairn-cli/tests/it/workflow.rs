//! Following jobs and moving them through steps, through the real binary and over HTTP: tracking (`cairn track`,
//! `untrack`, `list --tracked`), the workers the server has seen (`cairn workers`), and finishing a step so that
//! the job goes on in another queue (`cairn finish --next-queue`, `Client::finish_with` with `next`). Bad input
//! names its field as the request spelt it.

use cairn::Jobs;
use std::time::Duration;

use cairn::{Continue, Dequeue, ErrorKind, Finish, JobFilter, JobId, JobState, Push};
use cairn_api::{EmptyBody, JobPageBody, WorkerListBody};
use jiff::Timestamp;
use serde_json::{Value, json};

use super::cli::{check_error, lease_token, mask_times, ok, ok_json};
use super::harness::{TestServer, post, raw, stdout};

fn take(worker: &str, queue: &str) -> Dequeue {
    Dequeue {
        queues: vec![queue.to_owned()],
        limit: 1,
        ..Dequeue::new(worker)
    }
}

/// The ids of a page read from `cairn list --json`.
fn ids(page: &JobPageBody) -> Vec<i64> {
    page.jobs.iter().map(|j| j.id).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tracked_jobs_are_listed_whatever_their_state_until_untracked() {
    let server = TestServer::spawn();
    let client = server.client();
    for name in ["a", "b", "c"] {
        client.enqueue(Push::new(name)).await.unwrap();
    }
    assert_eq!(ok(&server.cairn(&["track", "1"], None)), "job 1: tracked\n");
    let done: EmptyBody = ok_json(&server.cairn(&["track", "3", "--json"], None));
    assert_eq!(done, EmptyBody {});
    // Tracking a tracked job is not an error.
    ok(&server.cairn(&["track", "3"], None));
    assert_eq!(
        mask_times(&ok(&server.cairn(&["list", "--tracked"], None))),
        "\
ID  STATE   QUEUE    NAME  PRIORITY  ATTEMPT  RUN AT
3   queued  default  c     0         0/5      YYYY-MM-DDTHH:MM:SSZ
1   queued  default  a     0         0/5      YYYY-MM-DDTHH:MM:SSZ
"
    );
    let shown = ok(&server.cairn(&["show", "1"], None));
    assert!(shown.contains("tracked: yes\n"), "{shown}");
    assert!(!ok(&server.cairn(&["show", "2"], None)).contains("tracked"));

    assert_eq!(
        ok(&server.cairn(&["untrack", "3"], None)),
        "job 3: untracked\n"
    );
    let page: JobPageBody = ok_json(&server.cairn(&["list", "--tracked", "--json"], None));
    assert_eq!(ids(&page), [1]);
    assert!(page.jobs[0].tracked);

    // A tracked job stays listed once it finishes; the client tracks and lists with the engine's types.
    let claimed = client.dequeue(take("w", "default")).await.unwrap();
    assert_eq!(claimed[0].job.id, JobId(1));
    client.finish(&claimed[0].lease, None).await.unwrap();
    client.track(JobId(2), true).await.unwrap();
    let tracked = client
        .list(JobFilter {
            tracked: true,
            ..JobFilter::default()
        })
        .await
        .unwrap();
    let seen: Vec<(JobId, JobState)> = tracked.jobs.iter().map(|j| (j.id, j.state)).collect();
    assert_eq!(
        seen,
        [
            (JobId(2), JobState::Queued),
            (JobId(1), JobState::Completed)
        ]
    );
    client.track(JobId(2), false).await.unwrap();
    assert!(!client.get(JobId(2)).await.unwrap().tracked);
    // `tracked=false` is no filter at all.
    let (status, all) = raw(
        reqwest::Method::GET,
        format!("{}/v1/jobs?tracked=false", server.url()),
        None,
        None,
    )
    .await;
    assert_eq!((status, all["jobs"].as_array().unwrap().len()), (200, 3));

    check_error(
        &server.cairn(&["track", "999"], None),
        3,
        "error: tracking job 999: job 999 not found",
    );
    check_error(
        &server.cairn(&["untrack", "999"], None),
        3,
        "error: untracking job 999: job 999 not found",
    );
    let err = client.track(JobId(999), true).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_shows_the_worker_holding_what_cairn_get_took() {
    let server = TestServer::spawn();
    let client = server.client();
    assert_eq!(ok(&server.cairn(&["workers"], None)), "no workers\n");
    for name in ["a", "b", "c"] {
        client.enqueue(Push::new(name)).await.unwrap();
    }
    let got = ok(&server.cairn(&["dequeue", "*", "--worker", "alpha", "--limit", "2"], None));
    assert!(got.contains("id: 1\n") && got.contains("id: 2\n"), "{got}");
    // A worker that asked and found nothing is seen too.
    let nothing = server.cairn(&["dequeue", "nothing.*", "--worker", "beta"], None);
    assert_eq!(nothing.status.code(), Some(7), "no job matches");
    assert_eq!(
        mask_times(&ok(&server.cairn(&["workers"], None))),
        "\
WORKER  STATUS  LAST SEEN             JOBS  STALLED
alpha   live    YYYY-MM-DDTHH:MM:SSZ  1,2   -
beta    live    YYYY-MM-DDTHH:MM:SSZ  -     -
"
    );
    let body: WorkerListBody = ok_json(&server.cairn(&["workers", "--json"], None));
    let alpha = &body.workers[0];
    assert_eq!(
        (alpha.id.as_str(), alpha.jobs.clone(), alpha.stalled.clone()),
        ("alpha", vec![1, 2], vec![])
    );
    assert!(alpha.first_seen <= alpha.last_seen);

    // Finishing a job lets go of it; the client reads the same list with the engine's types.
    let token = lease_token(&ok(
        &server.cairn(&["dequeue", "c", "--worker", "gamma"], None)
    ));
    ok(&server.cairn(&["finish", "3", "--lease", &token], None));
    let workers = client.workers().await.unwrap();
    let held: Vec<(&str, Vec<JobId>)> = workers
        .iter()
        .map(|w| (w.id.as_str(), w.jobs.clone()))
        .collect();
    assert_eq!(
        held,
        [
            ("alpha", vec![JobId(1), JobId(2)]),
            ("beta", vec![]),
            ("gamma", vec![])
        ]
    );
    assert_eq!(workers[0], body.workers[0].to_worker().unwrap());

    // One-off takes without --worker add one worker between them, which says it stops; it keeps its lease.
    for name in ["d", "e"] {
        client.enqueue(Push::new(name)).await.unwrap();
        ok(&server.cairn(&["dequeue", name], None));
    }
    let body: WorkerListBody = ok_json(&server.cairn(&["workers", "--json"], None));
    let one_off: Vec<_> = body
        .workers
        .iter()
        .filter(|w| w.id.starts_with("cairn-cli"))
        .map(|w| (w.id.as_str(), w.status.as_str(), w.jobs.clone()))
        .collect();
    assert_eq!(one_off, [("cairn-cli", "stopped", vec![4, 5])]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finish_next_queue_moves_the_job_on_to_another_queue() {
    let server = TestServer::spawn();
    let client = server.client();
    let id = client
        .enqueue(Push::new("order").queue("ingest"))
        .await
        .unwrap()
        .id;
    let id_text = id.to_string();

    // Step one ends: the job goes on in `process`, ready now, with fresh attempts and the data it finished with.
    let token = lease_token(&ok(
        &server.cairn(&["dequeue", "order", "--queue", "ingest"], None)
    ));
    let finish = [
        "finish",
        &id_text,
        "--lease",
        &token,
        "--data",
        r#"{"ingested": true}"#,
        "--next-queue",
        "process",
    ];
    assert_eq!(
        ok(&server.cairn(&finish, None)),
        format!("job {id}: stage completed, goes on in queue process\n")
    );
    let shown = mask_times(&ok(&server.cairn(&["show", &id_text], None)));
    for line in [
        "queue: process\n",
        "state: queued\n",
        "attempt: 0 of 5\n",
        "data: {\"ingested\":true}\n",
    ] {
        assert!(shown.contains(line), "{line:?} in {shown}");
    }
    assert!(shown.contains("  1  cairn-cli  "), "{shown}");
    assert!(shown.contains("completed"), "{shown}");

    // Step two ends with a delay: the job is scheduled in `ship` an hour from the finish.
    let token = lease_token(&ok(
        &server.cairn(&["dequeue", "order", "--queue", "process"], None)
    ));
    let before = Timestamp::now();
    let finish = [
        "finish",
        &id_text,
        "--lease",
        &token,
        "--next-queue",
        "ship",
        "--next-delay",
        "1h",
        "--json",
    ];
    let done: EmptyBody = ok_json(&server.cairn(&finish, None));
    let after = Timestamp::now();
    assert_eq!(done, EmptyBody {});
    let job = client.get(id).await.unwrap();
    assert_eq!(
        (job.state, job.queue.as_str(), job.attempt),
        (JobState::Scheduled, "ship", 0)
    );
    let hour = jiff::SignedDuration::from_hours(1);
    assert!(
        job.run_at >= before + hour - jiff::SignedDuration::from_millis(1)
            && job.run_at <= after + hour,
        "due an hour after the finish: {} not within {before}..{after} + 1h",
        job.run_at
    );
    assert_eq!(job.history.len(), 2);

    // With dependencies: the job waits in its next queue until they complete.
    let gate = client
        .enqueue(Push::new("gate").queue("gates"))
        .await
        .unwrap()
        .id;
    let other = client
        .enqueue(Push::new("step").queue("a"))
        .await
        .unwrap()
        .id;
    let token = lease_token(&ok(
        &server.cairn(&["dequeue", "step", "--queue", "a"], None)
    ));
    let (other_text, gate_text) = (other.to_string(), gate.to_string());
    let finish = [
        "finish",
        &other_text,
        "--lease",
        &token,
        "--next-queue",
        "b",
        "--next-delay",
        "5m",
        "--next-depends-on",
        &gate_text,
        "--next-depends-on",
        &id_text,
    ];
    assert_eq!(
        ok(&server.cairn(&finish, None)),
        format!(
            "job {other}: stage completed, goes on in queue b after 5m once jobs {gate}, {id} complete\n"
        )
    );
    let job = client.get(other).await.unwrap();
    assert_eq!(
        (job.state, job.queue.as_str(), job.depends_on.clone()),
        (JobState::Waiting, "b", vec![id, gate])
    );
    let shown = ok(&server.cairn(&["show", &other_text], None));
    assert!(
        shown.contains(&format!("waits_for: jobs {id}, {gate}")),
        "{shown}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_finishes_a_step_with_next_as_the_embedded_queue_does() {
    let server = TestServer::spawn();
    let client = server.client();
    let id = client
        .enqueue(Push::new("order").queue("ingest"))
        .await
        .unwrap()
        .id;
    let gate = client
        .enqueue(Push::new("gate").queue("gates"))
        .await
        .unwrap()
        .id;
    let step = client.dequeue(take("w", "ingest")).await.unwrap().remove(0);
    client
        .finish_with(Finish {
            data: Some(json!({"ingested": true})),
            next: Some(Continue {
                queue: "process".into(),
                delay: Some(Duration::from_secs(10)),
                depends_on: vec![gate],
            }),
            ..Finish::new(&step.lease)
        })
        .await
        .unwrap();
    let job = client.get(id).await.unwrap();
    assert_eq!(
        (job.state, job.queue.as_str(), job.attempt),
        (JobState::Waiting, "process", 0)
    );
    assert_eq!(job.depends_on, [gate]);
    assert_eq!(job.data, json!({"ingested": true}));
    assert_eq!(
        job.history[0].outcome,
        Some(cairn::AttemptOutcome::Completed)
    );

    // Its dependency completes: it is due ten seconds after the step finished, not before.
    let gated = client.dequeue(take("w", "gates")).await.unwrap().remove(0);
    client.finish(&gated.lease, None).await.unwrap();
    let job = client.get(id).await.unwrap();
    assert_eq!(job.state, JobState::Scheduled);
    assert!(
        client
            .dequeue(take("w", "process"))
            .await
            .unwrap()
            .is_empty()
    );

    // A next step the engine refuses changes nothing, and says which field, as the wire spells it.
    let other = client.enqueue(Push::new("other")).await.unwrap().id;
    let held = client
        .dequeue(take("w", "default"))
        .await
        .unwrap()
        .remove(0);
    let refused = |next: Continue| {
        let client = client.clone();
        let lease = held.lease.clone();
        async move {
            client
                .finish_with(Finish {
                    next: Some(next),
                    ..Finish::new(&lease)
                })
                .await
                .unwrap_err()
        }
    };
    let next = |queue: &str, delay: Option<Duration>, depends_on: Vec<JobId>| Continue {
        queue: queue.to_owned(),
        delay,
        depends_on,
    };
    let cases = [
        (next("bad queue", None, vec![]), "next.queue"),
        (
            next("q", Some(Duration::from_secs(400 * 24 * 3600)), vec![]),
            "next.delay_ms",
        ),
        (next("q", None, vec![JobId(999)]), "next.depends_on"),
        (next("q", None, vec![other]), "next.depends_on"),
    ];
    for (next, field) in cases {
        let err = refused(next).await;
        assert_eq!(
            (err.kind(), err.field()),
            (ErrorKind::InvalidInput, Some(field)),
            "{err}"
        );
        assert!(err.to_string().starts_with(&format!("{field}: ")), "{err}");
    }
    assert_eq!(client.get(other).await.unwrap().state, JobState::Running);
    client.finish(&held.lease, None).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_to_tracking_workers_and_next_steps_names_the_field() {
    let server = TestServer::spawn();
    let url = server.url().to_owned();
    let client = server.client();
    let id = client.enqueue(Push::new("x")).await.unwrap().id;
    let claimed = client.dequeue(take("w", "default")).await.unwrap();
    let token = claimed[0].lease.token.to_string();
    let finish = format!("/v1/jobs/{id}/finish");
    let with_next = |next: &str| format!(r#"{{"token":"{token}","next":{next}}}"#);
    let year_and_more = (367_u64 * 24 * 3600 * 1000).to_string();
    // (method, path, body, status, field)
    let cases: [(&str, String, String, u16, Value); 14] = [
        (
            "GET",
            "/v1/jobs?name=email%5B".into(),
            String::new(),
            400,
            json!("name"),
        ),
        (
            "GET",
            "/v1/jobs?tracked=yes".into(),
            String::new(),
            400,
            json!("tracked"),
        ),
        (
            "GET",
            "/v1/jobs?tracked=1".into(),
            String::new(),
            400,
            json!("tracked"),
        ),
        (
            "POST",
            "/v1/jobs/abc/track".into(),
            "{}".into(),
            400,
            json!("id"),
        ),
        (
            "POST",
            "/v1/jobs/424242/untrack".into(),
            String::new(),
            404,
            Value::Null,
        ),
        (
            "POST",
            finish.clone(),
            with_next(r#"{"queue":"bad queue"}"#),
            400,
            json!("next.queue"),
        ),
        (
            "POST",
            finish.clone(),
            with_next(&format!(r#"{{"queue":"q","delay_ms":{year_and_more}}}"#)),
            400,
            json!("next.delay_ms"),
        ),
        (
            "POST",
            finish.clone(),
            with_next(r#"{"queue":"q","delay_ms":-1}"#),
            400,
            json!("next.delay_ms"),
        ),
        (
            "POST",
            finish.clone(),
            with_next(r#"{"queue":"q","depends_on":[424242]}"#),
            400,
            json!("next.depends_on"),
        ),
        (
            "POST",
            finish.clone(),
            with_next(&format!(r#"{{"queue":"q","depends_on":[{id}]}}"#)),
            400,
            json!("next.depends_on"),
        ),
        (
            "POST",
            finish.clone(),
            with_next(r#"{"queue":"q","when":"later"}"#),
            400,
            json!("next.when"),
        ),
        (
            "POST",
            finish.clone(),
            with_next(r#"{"delay_ms":5}"#),
            400,
            json!("next.queue"),
        ),
        (
            "PUT",
            "/v1/recurring/%FF".into(),
            r#"{"cron":"0 * * * *","job":{"name":"x"}}"#.into(),
            400,
            json!("key"),
        ),
        (
            "DELETE",
            "/v1/recurring/%FF".into(),
            String::new(),
            400,
            json!("key"),
        ),
    ];
    for (method, path, body, status, field) in cases {
        let (got_status, got) = match method {
            "POST" => post(&server, &path, &body).await,
            "PUT" => {
                raw(
                    reqwest::Method::PUT,
                    format!("{url}{path}"),
                    None,
                    Some(&body),
                )
                .await
            }
            "DELETE" => raw(reqwest::Method::DELETE, format!("{url}{path}"), None, None).await,
            _ => raw(reqwest::Method::GET, format!("{url}{path}"), None, None).await,
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
    // Every refused finish left the job running under its lease.
    assert_eq!(client.get(id).await.unwrap().state, JobState::Running);

    // (arguments, exit code, what stderr says)
    let id_text = id.to_string();
    let cli: [(&[&str], i32, &str); 6] = [
        (
            &[
                "finish",
                &id_text,
                "--lease",
                &token,
                "--next-queue",
                "bad queue",
            ],
            2,
            "error: finishing job 1: next.queue: may only contain",
        ),
        (
            &[
                "finish",
                &id_text,
                "--lease",
                &token,
                "--next-queue",
                "q",
                "--next-delay",
                "9000h",
            ],
            2,
            "next.delay_ms: must be at most a year",
        ),
        (
            &[
                "finish",
                &id_text,
                "--lease",
                &token,
                "--next-queue",
                "q",
                "--next-depends-on",
                "424242",
            ],
            2,
            "next.depends_on: job 424242 does not exist",
        ),
        (
            &["finish", &id_text, "--lease", &token, "--next-delay", "5m"],
            2,
            "--next-queue <QUEUE>",
        ),
        (
            &[
                "finish",
                &id_text,
                "--lease",
                &token,
                "--next-depends-on",
                "2",
            ],
            2,
            "--next-queue <QUEUE>",
        ),
        (
            &["track", "abc"],
            2,
            "must be a job id (a positive integer)",
        ),
    ];
    for (args, code, message) in cli {
        check_error(&server.cairn(args, None), code, message);
    }
    assert_eq!(client.get(id).await.unwrap().state, JobState::Running);
    let done = server.cairn(&["finish", &id_text, "--lease", &token], None);
    assert_eq!(stdout(&done), format!("job {id}: completed\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn show_lists_the_steps_a_handler_recorded() {
    let server = TestServer::spawn();
    let client = server.client();
    let id = client.enqueue(Push::new("order")).await.unwrap().id;
    let claimed = client.dequeue(Dequeue::new("w1")).await.unwrap().remove(0);
    for (name, result) in [("charge", json!({"receipt": 7})), ("ship", json!("DHL"))] {
        client
            .record_step(
                &claimed.lease,
                cairn::StepName::parse(name).unwrap(),
                result,
            )
            .await
            .unwrap();
    }
    let shown = mask_times(&ok(&server.cairn(&["show", &id.to_string()], None)));
    assert!(
        shown.contains(
            "steps:\n  STEP    ATTEMPT  RECORDED              RESULT\n  \
             charge  1        YYYY-MM-DDTHH:MM:SSZ  {\"receipt\":7}\n  \
             ship    1        YYYY-MM-DDTHH:MM:SSZ  \"DHL\"\n"
        ),
        "{shown}"
    );
}

/// `cairn signal` through the real binary: kept when no job waits, received by the job that waits (which `cairn
/// show` says it awaits until then), refused for a key only a cancelled job waited for, and a bad key or `--data`
/// is refused naming it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signal_wakes_the_job_that_waits_for_its_key() {
    let server = TestServer::spawn();
    let client = server.client();
    assert_eq!(
        ok(&server.cairn(&["signal", "early", "--data", "1"], None)),
        "signal early: kept, for the first job that waits for it\n"
    );
    let id = client.enqueue(Push::new("order")).await.unwrap().id;
    let claimed = client.dequeue(Dequeue::new("w1")).await.unwrap().remove(0);
    let waited = client
        .wait_for_signal(
            &claimed.lease,
            cairn::StepName::parse("packed").unwrap(),
            cairn::SignalKey::parse("order-1/packed").unwrap(),
            Duration::from_secs(3600),
        )
        .await
        .unwrap();
    assert!(matches!(waited, cairn::SignalWait::Suspended { .. }));
    let shown = mask_times(&ok(&server.cairn(&["show", &id.to_string()], None)));
    assert!(
        shown.contains("awaits_signal: order-1/packed (until YYYY-MM-DDTHH:MM:SSZ)\n"),
        "{shown}"
    );
    let sent: Value = ok_json(&server.cairn(
        &[
            "signal",
            "order-1/packed",
            "--data",
            r#"{"parcel":"P-1"}"#,
            "--json",
        ],
        None,
    ));
    assert_eq!(sent, json!({"delivered": true, "job": id.0}));
    let job = client.get(id).await.unwrap();
    assert_eq!((job.state, job.awaits_signal), (JobState::Queued, None));
    assert_eq!(job.steps[0].result, json!({"signal": {"parcel": "P-1"}}));

    let other = client.enqueue(Push::new("order")).await.unwrap().id;
    let taken = client
        .dequeue(Dequeue {
            limit: 2,
            ..Dequeue::new("w1")
        })
        .await
        .unwrap();
    let lease = &taken.iter().find(|c| c.job.id == other).unwrap().lease;
    client
        .wait_for_signal(
            lease,
            cairn::StepName::parse("approved").unwrap(),
            cairn::SignalKey::parse("order-2").unwrap(),
            Duration::from_secs(3600),
        )
        .await
        .unwrap();
    client.cancel(other).await.unwrap();
    check_error(
        &server.cairn(&["signal", "order-2"], None),
        4,
        &format!("job {other} waited for signal \"order-2\" and was cancelled"),
    );
    check_error(
        &server.cairn(&["signal", ""], None),
        2,
        "key: must not be empty",
    );
    check_error(
        &server.cairn(&["signal", "k", "--data", "{nope"], None),
        2,
        "--data",
    );
}
