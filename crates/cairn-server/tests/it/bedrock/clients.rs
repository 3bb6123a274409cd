//! What Bedrock's own clients (Bedrock-PHP's `Jobs` and its BedrockWorkerManager) rely on: job names that carry
//! parameters, data read back as it was written, mocked jobs, and the DB plugin's `Query:`.

use cairn::Jobs;
use serde_json::json;

use super::Bedrock;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_carry_parameters_and_glob_characters_and_match_as_bedrock_matches_them() {
    let bedrock = Bedrock::start().await;
    let mut c = bedrock.connect().await;
    let mut ids = Vec::new();
    for name in [
        "SampleWorker?mode=extra",
        "www-prod/UserActivityEvaluator?accountID=856",
        "odd[1]*name",
    ] {
        let created = c.send("CreateJob", &[("name", name)]).await;
        assert_eq!(created.status, "200 OK", "{name}");
        ids.push(created.body["jobID"].as_i64().unwrap());
    }
    // One name is a GLOB pattern: `Sample*` takes the job whose name goes on with `?mode=extra`.
    let got = c.send("GetJob", &[("name", "Sample*")]).await;
    assert_eq!(got.body["name"], "SampleWorker?mode=extra");
    // A list is exact names, GLOB characters included.
    let got = c
        .send(
            "GetJobs",
            &[("name", "odd[1]*name,nothing"), ("numResults", "5")],
        )
        .await;
    assert_eq!(got.body["jobs"][0]["name"], "odd[1]*name");
    assert_eq!(got.body["jobs"].as_array().unwrap().len(), 1);
    // A unique create looks for its exact name: `www-prod/*` is a name of its own, not a pattern.
    let unique = c
        .send("CreateJob", &[("name", "www-prod/*"), ("unique", "true")])
        .await;
    assert_eq!(unique.status, "200 OK");
    assert!(!ids.contains(&unique.body["jobID"].as_i64().unwrap()));
    let again = c
        .send(
            "CreateJob",
            &[
                ("name", "www-prod/UserActivityEvaluator?accountID=856"),
                ("unique", "true"),
            ],
        )
        .await;
    assert_eq!(again.body, json!({"jobID": ids[1]}));
    // RetryJob renames to such names too.
    let got = c
        .send(
            "GetJob",
            &[("name", "www-prod/UserActivityEvaluator?accountID=856")],
        )
        .await;
    let id = got.body["jobID"].to_string();
    let retried = c
        .send(
            "RetryJob",
            &[
                ("jobID", &id),
                ("name", "www-prod/UserActivityEvaluator?accountID=857"),
            ],
        )
        .await;
    assert_eq!(retried.status, "200 OK");
    let queried = c.send("QueryJob", &[("jobID", &id)]).await;
    assert_eq!(
        queried.body["name"],
        "www-prod/UserActivityEvaluator?accountID=857"
    );
    bedrock.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_comes_back_with_its_keys_in_the_order_they_were_written() {
    let bedrock = Bedrock::start().await;
    let mut c = bedrock.connect().await;
    let created = c
        .send(
            "CreateJob",
            &[
                ("name", "order"),
                ("data", r#"{"r":1,"done":true,"a":{"z":0,"b":1}}"#),
            ],
        )
        .await;
    let id = created.body["jobID"].to_string();
    let got = c.send("GetJob", &[("name", "order")]).await;
    assert!(
        got.text
            .contains(r#""data":{"r":1,"done":true,"a":{"z":0,"b":1}}"#),
        "{}",
        got.text
    );
    let updated = c
        .send("UpdateJob", &[("jobID", &id), ("data", r#"{"y":2,"x":1}"#)])
        .await;
    assert_eq!(updated.status, "200 OK");
    let queried = c.send("QueryJob", &[("jobID", &id)]).await;
    assert!(
        queried.text.contains(r#""data":{"y":2,"x":1}"#),
        "{}",
        queried.text
    );
    // A repeating job's next run gets the data its FinishJob wrote, as written.
    let repeating = c
        .send(
            "CreateJob",
            &[("name", "again"), ("repeat", "FINISHED, +1 SECOND")],
        )
        .await;
    let again = repeating.body["jobID"].to_string();
    c.send("GetJob", &[("name", "again")]).await;
    let finished = c
        .send(
            "FinishJob",
            &[("jobID", &again), ("data", r#"{"done":1,"count":2}"#)],
        )
        .await;
    assert_eq!(finished.status, "200 OK");
    let queried = c.send("QueryJob", &[("jobID", &again)]).await;
    assert!(
        queried.text.contains(r#""data":{"done":1,"count":2}"#),
        "{}",
        queried.text
    );
    bedrock.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_job_with_next_run_stores_exactly_that_time() {
    let bedrock = Bedrock::start().await;
    let mut c = bedrock.connect().await;
    for next_run in ["2030-01-02 03:04:05", "2031-06-30 23:59:59"] {
        let created = c.send("CreateJob", &[("name", "later")]).await;
        let id = created.body["jobID"].to_string();
        assert_eq!(
            c.send("GetJob", &[("name", "later")]).await.status,
            "200 OK"
        );
        let retried = c
            .send(
                "RetryJob",
                &[("jobID", &id), ("nextRun", next_run), ("delay", "0")],
            )
            .await;
        assert_eq!(retried.status, "200 OK");
        let queried = c.send("QueryJob", &[("jobID", &id)]).await;
        assert_eq!(queried.body["nextRun"], next_run);
        assert_eq!(queried.body["state"], "QUEUED");
    }
    bedrock.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_php_sends_is_understood_empty_data_requeue_and_ping() {
    let bedrock = Bedrock::start().await;
    let mut c = bedrock.connect().await;
    // PHP encodes a job without data as `"data":[]`.
    let created = c
        .send(
            "CreateJobs",
            &[(
                "jobs",
                r#"[{"name":"a","data":[]},{"name":"b","data":{"x":1}}]"#,
            )],
        )
        .await;
    assert_eq!(created.status, "200 OK");
    let first = created.body["jobIDs"][0].to_string();
    let queried = c.send("QueryJob", &[("jobID", &first)]).await;
    assert_eq!(queried.body["data"], json!({}));
    // A new job is due from its creation, which Bedrock writes with milliseconds in `nextRun` only.
    let (created, next_run) = (
        queried.body["created"].as_str().unwrap(),
        queried.body["nextRun"].as_str().unwrap(),
    );
    assert_eq!((created.len(), next_run.len()), (19, 23), "{next_run}");
    assert!(next_run.starts_with(created) && next_run.as_bytes()[19] == b'.');
    // Only an empty array stands for no data.
    let refused = c
        .send("CreateJobs", &[("jobs", r#"[{"name":"a","data":[1]}]"#)])
        .await;
    assert_eq!(refused.status, "402 Data is not a valid JSON Object");
    // A requeued job is due from its creation time, as Bedrock sets it.
    let got = c.send("GetJob", &[("name", "a")]).await;
    assert_eq!(got.body["jobID"].to_string(), first);
    let requeued = c.send("RequeueJobs", &[("jobIDs", &first)]).await;
    assert_eq!(requeued.status, "200 OK");
    let queried = c.send("QueryJob", &[("jobID", &first)]).await;
    assert_eq!(queried.body["state"], "QUEUED");
    assert_eq!(queried.body["nextRun"], queried.body["created"]);
    assert_eq!(c.send("Ping", &[]).await.status, "200 OK");
    bedrock.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mocked_jobs_are_kept_apart_and_end_in_any_state() {
    let bedrock = Bedrock::start().await;
    let mut c = bedrock.connect().await;
    let id = |reply: &super::Reply| reply.body["jobID"].to_string();
    let real = c.send("CreateJob", &[("name", "work")]).await;
    // A mocked job: its data says so, and it never repeats.
    let mocked = c
        .send(
            "CreateJob",
            &[
                ("name", "work"),
                ("data", r#"{"b":1,"a":2}"#),
                ("repeat", "HOURLY"),
                ("mockRequest", "false"),
            ],
        )
        .await;
    assert_eq!(mocked.status, "200 OK");
    let queried = c.send("QueryJob", &[("jobID", &id(&mocked))]).await;
    assert!(
        queried
            .text
            .contains(r#""data":{"b":1,"a":2,"mockRequest":true}"#),
        "{}",
        queried.text
    );
    assert_eq!(queried.body["repeat"], "");
    // Neither Bedrock's GetJob nor a Cairn worker that did not ask sees it.
    let plain = c
        .send("GetJobs", &[("name", "*"), ("numResults", "5")])
        .await;
    assert_eq!(plain.body["jobs"].as_array().unwrap().len(), 1);
    assert_eq!(plain.body["jobs"][0]["jobID"].to_string(), id(&real));
    assert!(
        bedrock
            .queue
            .dequeue(cairn::Dequeue::new("http-worker"))
            .await
            .unwrap()
            .is_empty()
    );
    let with_mocked = c
        .send(
            "GetJobs",
            &[
                ("name", "*"),
                ("numResults", "5"),
                ("getMockedJobs", "true"),
            ],
        )
        .await;
    assert_eq!(
        with_mocked.body["jobs"][0]["jobID"].to_string(),
        id(&mocked)
    );
    // A finish whose data is not mocked as the job is cannot be trusted.
    let mismatch = c
        .send(
            "FinishJob",
            &[("jobID", &id(&mocked)), ("data", r#"{"b":1}"#)],
        )
        .await;
    assert_eq!(mismatch.status, "500 Mock Mismatch");
    let unmocked_mismatch = c
        .send(
            "FinishJob",
            &[("jobID", &id(&real)), ("data", r#"{"mockRequest":true}"#)],
        )
        .await;
    assert_eq!(unmocked_mismatch.status, "500 Mock Mismatch");
    let finished = c
        .send(
            "FinishJob",
            &[
                ("jobID", &id(&mocked)),
                ("data", r#"{"b":1,"mockRequest":true}"#),
            ],
        )
        .await;
    assert_eq!(finished.status, "200 OK");
    assert_eq!(
        c.send("QueryJob", &[("jobID", &id(&mocked))]).await.status,
        "404 No job with this jobID"
    );

    // In any state: a queued mocked job is retried and finished without being taken.
    let waiting = c
        .send("CreateJob", &[("name", "idle"), ("mockRequest", "")])
        .await;
    let retried = c
        .send(
            "RetryJob",
            &[("jobID", &id(&waiting)), ("nextRun", "2031-01-01 00:00:00")],
        )
        .await;
    assert_eq!(retried.status, "200 OK");
    let queried = c.send("QueryJob", &[("jobID", &id(&waiting))]).await;
    assert_eq!(queried.body["nextRun"], "2031-01-01 00:00:00");
    assert_eq!(
        c.send("FinishJob", &[("jobID", &id(&waiting))])
            .await
            .status,
        "200 OK"
    );
    assert_eq!(
        c.send("QueryJob", &[("jobID", &id(&waiting))]).await.status,
        "404 No job with this jobID"
    );
    // FailJob has no such exemption.
    let other = c
        .send("CreateJob", &[("name", "idle"), ("mockRequest", "")])
        .await;
    assert_eq!(
        c.send("FailJob", &[("jobID", &id(&other))]).await.status,
        "405 Can only fail RUNNING or RUNQUEUED jobs"
    );
    bedrock.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mocked_and_real_jobs_never_mix_in_unique_updates_or_families() {
    let bedrock = Bedrock::start().await;
    let mut c = bedrock.connect().await;
    let id = |reply: &super::Reply| reply.body["jobID"].to_string();
    // A unique lookup finds only a job mocked as the new one is.
    let real = c
        .send("CreateJob", &[("name", "one"), ("unique", "true")])
        .await;
    let mocked = c
        .send(
            "CreateJob",
            &[("name", "one"), ("unique", "true"), ("mockRequest", "true")],
        )
        .await;
    assert_ne!(id(&real), id(&mocked));
    let again = c
        .send(
            "CreateJob",
            &[("name", "one"), ("unique", "true"), ("mockRequest", "true")],
        )
        .await;
    assert_eq!(id(&again), id(&mocked));
    // UpdateJob keeps the job mocked or not, whatever the new data says.
    c.send(
        "UpdateJob",
        &[("jobID", &id(&mocked)), ("data", r#"{"z":1}"#)],
    )
    .await;
    let queried = c.send("QueryJob", &[("jobID", &id(&mocked))]).await;
    assert!(
        queried
            .text
            .contains(r#""data":{"z":1,"mockRequest":true}"#),
        "{}",
        queried.text
    );
    c.send(
        "UpdateJob",
        &[
            ("jobID", &id(&real)),
            ("data", r#"{"mockRequest":true,"y":2}"#),
        ],
    )
    .await;
    let queried = c.send("QueryJob", &[("jobID", &id(&real))]).await;
    assert_eq!(queried.body["data"], json!({"y": 2}));
    // A child follows its mocked parent without being told.
    let first = c.send("GetJob", &[("name", "one")]).await;
    assert_eq!(first.body["jobID"].to_string(), id(&real));
    let parent = c
        .send("GetJob", &[("name", "one"), ("mockRequest", "true")])
        .await;
    assert_eq!(parent.body["jobID"].to_string(), id(&mocked));
    let child = c
        .send(
            "CreateJob",
            &[("name", "child"), ("parentJobID", &id(&mocked))],
        )
        .await;
    assert_eq!(child.status, "200 OK");
    let queried = c.send("QueryJob", &[("jobID", &id(&child))]).await;
    assert_eq!(queried.body["data"], json!({"mockRequest": true}));
    // So does a CreateJobs, all of it, as in Bedrock (its `createWithParentMocked`): the job without a parent
    // beside the child is mocked too. Two parents mocked differently are refused.
    let batch = format!(
        r#"[{{"name":"child2","parentJobID":{}}},{{"name":"alone"}}]"#,
        id(&mocked)
    );
    let followed = c.send("CreateJobs", &[("jobs", &batch)]).await;
    assert_eq!(followed.status, "200 OK");
    for created in followed.body["jobIDs"].as_array().unwrap() {
        let queried = c.send("QueryJob", &[("jobID", &created.to_string())]).await;
        assert_eq!(queried.body["data"], json!({"mockRequest": true}));
    }
    let mixed = format!(
        r#"[{{"name":"child3","parentJobID":{}}},{{"name":"child4","parentJobID":{}}}]"#,
        id(&mocked),
        id(&real)
    );
    assert_eq!(
        c.send("CreateJobs", &[("jobs", &mixed), ("mockRequest", "true")])
            .await
            .status,
        "405 Parent and child jobs must have matching mockRequest setting"
    );
    let batch_ok = c
        .send("CreateJobs", &[("jobs", &batch), ("mockRequest", "true")])
        .await;
    assert_eq!(batch_ok.status, "200 OK");
    // A mocked parent that waits for its children needs a run to end: it is not retried while it waits.
    let paused = c
        .send(
            "FinishJob",
            &[("jobID", &id(&mocked)), ("data", r#"{"mockRequest":true}"#)],
        )
        .await;
    assert_eq!(paused.status, "200 OK");
    assert_eq!(
        c.send("QueryJob", &[("jobID", &id(&mocked))]).await.body["state"],
        "PAUSED"
    );
    assert_eq!(
        c.send("RetryJob", &[("jobID", &id(&mocked))]).await.status,
        "405 Can only retry/finish RUNNING and RUNQUEUED jobs"
    );
    // FailJob stores its data as it comes, mocked or not.
    let failing = c
        .send("CreateJob", &[("name", "failing"), ("mockRequest", "")])
        .await;
    c.send("GetJob", &[("name", "failing"), ("getMockedJobs", "")])
        .await;
    let failed = c
        .send(
            "FailJob",
            &[("jobID", &id(&failing)), ("data", r#"{"why":"x"}"#)],
        )
        .await;
    assert_eq!(failed.status, "200 OK");
    bedrock.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn query_reads_bedrocks_jobs_table_as_the_sample_session_shows_it() {
    let bedrock = Bedrock::start().await;
    let mut c = bedrock.connect().await;
    let created = c
        .send(
            "CreateJob",
            &[
                ("name", "CheckLiveness"),
                ("data", r#"{"url":""}"#),
                ("repeat", "finished, +1 minute"),
            ],
        )
        .await;
    let id = created.body["jobID"].to_string();
    c.send("GetJob", &[("name", "CheckLiveness")]).await;
    c.send(
        "FinishJob",
        &[("jobID", &id), ("data", r#"{"url":"","failCount":1}"#)],
    )
    .await;
    let table = c.send("Query: SELECT * FROM jobs;", &[]).await;
    assert_eq!(table.status, "200 OK");
    let lines: Vec<&str> = table.text.lines().collect();
    assert_eq!(
        lines[0],
        "created | jobID | state | name | nextRun | lastRun | repeat | data | priority | parentJobID | retryAfter"
    );
    assert_eq!(lines.len(), 2, "{}", table.text);
    let row: Vec<&str> = lines[1].split(" | ").collect();
    assert_eq!(row[1], id);
    assert_eq!(row[2..4], ["QUEUED", "CheckLiveness"]);
    assert_eq!(
        row[6..],
        [
            "FINISHED, +1 MINUTE",
            r#"{"url":"","failCount":1}"#,
            "500",
            "0",
            ""
        ]
    );
    // The next run is a minute after the last one started, in Bedrock's time format.
    let time = |text: &str| jiff::civil::DateTime::strptime("%Y-%m-%d %H:%M:%S", text).unwrap();
    assert!(time(row[4]) > time(row[5]), "{row:?}");

    // The verb and a header work too, a WHERE on Bedrock's names and states, and JSON.
    let json = c
        .send(
            "Query",
            &[
                (
                    "query",
                    "SELECT name, jobID FROM jobs WHERE state = 'QUEUED' AND nextRun > created;",
                ),
                ("Format", "json"),
            ],
        )
        .await;
    assert_eq!(
        json.body,
        json!({"headers": ["name", "jobID"], "rows": [["CheckLiveness", created.body["jobID"]]]})
    );
    // Only reads, with Bedrock's status lines for what it refuses.
    for (query, line) in [
        ("Query: SELECT * FROM jobs", "502 Query Missing Semicolon"),
        ("Query: DELETE FROM jobs WHERE 1;", "402 Bad query"),
        ("Query: SELECT * FROM nowhere;", "402 Bad query"),
        ("Query:", "402 Missing query"),
    ] {
        assert_eq!(c.send(query, &[]).await.status, line, "{query}");
    }
    assert_eq!(
        bedrock
            .queue
            .get(cairn::JobId(id.parse().unwrap()))
            .await
            .unwrap()
            .name
            .as_str(),
        "CheckLiveness"
    );
    bedrock.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_after_bookkeeping_shows_as_bedrock_keeps_it_and_manual_jobs_are_not_counted() {
    let bedrock = Bedrock::start().await;
    let mut c = bedrock.connect().await;
    // A SCHEDULED repeat with a retryAfter: the data says when the job was due before it was handed out, and the
    // next run follows from that time (a day is long enough that Bedrock runs missed days one by one).
    let scheduled = c
        .send(
            "CreateJob",
            &[
                ("name", "report"),
                ("repeat", "SCHEDULED, +1 DAY"),
                ("firstRun", "2026-01-01 10:00:00"),
                ("retryAfter", "+1 HOUR"),
            ],
        )
        .await;
    let id = scheduled.body["jobID"].to_string();
    let got = c.send("GetJob", &[("name", "report")]).await;
    assert_eq!(got.body["data"], json!({}));
    let queried = c.send("QueryJob", &[("jobID", &id)]).await;
    assert_eq!(
        queried.body["data"],
        json!({"retryAfterCount": 1, "originalNextRun": "2026-01-01 10:00:00"})
    );
    assert_eq!(
        c.send("FinishJob", &[("jobID", &id)]).await.status,
        "200 OK"
    );
    let queried = c.send("QueryJob", &[("jobID", &id)]).await;
    assert_eq!(queried.body["nextRun"], "2026-01-02 10:00:00");
    assert_eq!(queried.body["data"], json!({}));

    // A `manual…` job is handed out again for as long as its retryAfter runs out, and never counted.
    let manual = c
        .send(
            "CreateJob",
            &[("name", "manual/Fix"), ("retryAfter", "+1 SECOND")],
        )
        .await;
    let id = manual.body["jobID"].to_string();
    let wait = [
        ("name", "manual/Fix"),
        ("Connection", "wait"),
        ("timeout", "10000"),
    ];
    for handed_out in 1..=11 {
        let got = c.send("GetJob", &wait).await;
        assert_eq!(got.status, "200 OK", "hand-out {handed_out}");
        assert_eq!(got.body["data"], json!({}));
    }
    let queried = c.send("QueryJob", &[("jobID", &id)]).await;
    assert_eq!(queried.body["state"], "RUNQUEUED");
    assert_eq!(queried.body["data"], json!({}));
    bedrock.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_get_job_piped_into_nc_gets_its_job() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let bedrock = Bedrock::start().await;
    let mut c = bedrock.connect().await;
    let created = c.send("CreateJob", &[("name", "piped")]).await;
    // `printf 'GetJob\nname: piped\n\n' | nc -q1 localhost 8888`: the request, then the end of what nc sends.
    let mut piped = bedrock.connect().await;
    piped.0.write_all(b"GetJob\nname: piped\n\n").await.unwrap();
    piped.0.shutdown().await.unwrap();
    let got = piped.read_reply().await;
    assert_eq!(got.status, "200 OK");
    assert_eq!(got.body["jobID"], created.body["jobID"]);
    // It keeps the job: not given back after the answer went out. The server decides once it has looked whether
    // the answer reached a reader (it gives the jobs back before it lets go of the connection), then closes it.
    let mut rest = Vec::new();
    tokio::time::timeout(
        std::time::Duration::from_secs(20),
        piped.0.read_to_end(&mut rest),
    )
    .await
    .expect("the server closes the connection")
    .unwrap();
    assert!(rest.is_empty(), "nothing after the answer: {rest:?}");
    let queried = c
        .send("QueryJob", &[("jobID", &created.body["jobID"].to_string())])
        .await;
    assert_eq!(queried.body["state"], "RUNNING");
    bedrock.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn query_shows_each_job_bedrock_sees_in_bedrocks_states_and_times() {
    let bedrock = Bedrock::start().await;
    let mut c = bedrock.connect().await;
    let id = |reply: &super::Reply| reply.body["jobID"].to_string();
    c.send(
        "CreateJob",
        &[
            ("name", "later"),
            ("firstRun", "2030-01-02 03:04:05"),
            ("jobPriority", "1000"),
            ("repeat", "HOURLY"),
        ],
    )
    .await;
    c.send(
        "CreateJob",
        &[("name", "watched"), ("retryAfter", "+1 HOUR")],
    )
    .await;
    c.send("GetJob", &[("name", "watched")]).await;
    let parent = c.send("CreateJob", &[("name", "parent")]).await;
    c.send("GetJob", &[("name", "parent")]).await;
    c.send(
        "CreateJob",
        &[("name", "child"), ("parentJobID", &id(&parent))],
    )
    .await;
    let before = c
        .send(
            "Query",
            &[
                (
                    "query",
                    "SELECT name, state FROM jobs WHERE name = 'child';",
                ),
                ("Format", "json"),
            ],
        )
        .await;
    assert_eq!(before.body["rows"], json!([["child", "PAUSED"]]));
    c.send("FinishJob", &[("jobID", &id(&parent))]).await;
    let child = c.send("GetJob", &[("name", "child")]).await;
    c.send("FinishJob", &[("jobID", &id(&child))]).await;
    let done = c.send("CreateJob", &[("name", "done")]).await;
    c.send("GetJob", &[("name", "done")]).await;
    c.send("FinishJob", &[("jobID", &id(&done))]).await;
    let failing = c.send("CreateJob", &[("name", "failing")]).await;
    c.send("GetJob", &[("name", "failing")]).await;
    c.send("FailJob", &[("jobID", &id(&failing))]).await;
    // Not Bedrock's: a job of another queue.
    bedrock
        .queue
        .enqueue(cairn::Push::new("elsewhere").queue("emails"))
        .await
        .unwrap();

    let rows = c
        .send(
            "Query",
            &[
                (
                    "query",
                    "SELECT name, state, priority, parentJobID, repeat, retryAfter FROM jobs ORDER BY jobID;",
                ),
                ("Format", "json"),
            ],
        )
        .await;
    assert_eq!(
        rows.body["rows"],
        json!([
            ["later", "QUEUED", 1000, 0, "HOURLY", ""],
            ["watched", "RUNQUEUED", 500, 0, "", "+1 HOUR"],
            ["parent", "QUEUED", 500, 0, "", ""],
            ["child", "FINISHED", 500, parent.body["jobID"], "", ""],
            ["failing", "FAILED", 500, 0, "", ""]
        ]),
        "{}",
        rows.text
    );
    // A job's data is text to Bedrock's queries, on either database (PostgreSQL keeps it as json, which has no
    // `LIKE` of its own).
    c.send(
        "CreateJob",
        &[("name", "mailer"), ("data", r#"{"to":"ada@example.com"}"#)],
    )
    .await;
    let found = c
        .send(
            "Query",
            &[
                (
                    "query",
                    "SELECT name, data FROM jobs WHERE data LIKE '%ada@%' AND data != '{}';",
                ),
                ("Format", "json"),
            ],
        )
        .await;
    assert_eq!(
        found.body["rows"],
        json!([["mailer", r#"{"to":"ada@example.com"}"#]]),
        "{}",
        found.text
    );
    let times = c
        .send(
            "Query",
            &[
                (
                    "query",
                    "SELECT nextRun, lastRun FROM jobs WHERE name IN ('later', 'watched') ORDER BY jobID;",
                ),
                ("Format", "json"),
            ],
        )
        .await;
    assert_eq!(times.body["rows"][0], json!(["2030-01-02 03:04:05", null]));
    // A RUNQUEUED job is due again when its hour is up.
    let time = |v: &serde_json::Value| {
        jiff::civil::DateTime::strptime("%Y-%m-%d %H:%M:%S", v.as_str().unwrap()).unwrap()
    };
    let (next, last) = (&times.body["rows"][1][0], &times.body["rows"][1][1]);
    // (Both are cut to the second: the hour from the start, to the millisecond, may end in the second before.)
    let hour_later = time(last) + jiff::Span::new().hours(1);
    assert!(
        [hour_later, hour_later - jiff::Span::new().seconds(1)].contains(&time(next)),
        "{}",
        times.text
    );
    bedrock.stop().await;
}
