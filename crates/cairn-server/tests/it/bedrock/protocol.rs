//! The commands and their rules: status lines in Bedrock's order, the job objects, repeats, parents and children,
//! `retryAfter`, the framing.

use cairn::Jobs;
use std::time::Duration;

use cairn::{JobId, JobState};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{Bedrock, Reply, keys};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sample_session_creates_gets_updates_queries_and_finishes_a_job() {
    let bedrock = Bedrock::start().await;
    let mut c = bedrock.connect().await;
    let created = c
        .send(
            "CreateJob",
            &[("name", "foo"), ("data", r#"{"bar":"baz"}"#)],
        )
        .await;
    assert_eq!(created.status, "200 OK");
    let id = created.body["jobID"].as_i64().unwrap();

    let got = c.send("GetJob", &[("name", "foo")]).await;
    assert_eq!(got.status, "200 OK");
    let mut names = keys(&got.body);
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "created",
            "data",
            "jobID",
            "lastRun",
            "name",
            "nextRun",
            "priority",
            "repeat",
            "retryAfter"
        ]
    );
    assert_eq!(got.body["jobID"], id);
    assert_eq!(got.body["data"], json!({"bar": "baz"}));
    assert_eq!(got.body["priority"], 500);
    assert_eq!(got.body["lastRun"], "");

    let updated = c
        .send(
            "UpdateJob",
            &[("jobID", &id.to_string()), ("data", r#"{"bar":"qux"}"#)],
        )
        .await;
    assert_eq!(updated.status, "200 OK");
    let queried = c.send("QueryJob", &[("jobID", &id.to_string())]).await;
    assert_eq!(queried.body["state"], "RUNNING");
    assert_eq!(queried.body["data"], json!({"bar": "qux"}));
    assert_eq!(keys(&queried.body).len(), 10);

    assert_eq!(
        c.send("FinishJob", &[("jobID", &id.to_string())])
            .await
            .status,
        "200 OK"
    );
    // Bedrock deletes a finished job; Cairn keeps it completed, and the protocol shows it gone.
    assert_eq!(
        c.send("QueryJob", &[("jobID", &id.to_string())])
            .await
            .status,
        "404 No job with this jobID"
    );
    assert_eq!(
        bedrock.queue.get(JobId(id)).await.unwrap().state,
        JobState::Completed
    );
    bedrock.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeating_job_is_queued_again_one_minute_after_it_finishes() {
    let bedrock = Bedrock::start().await;
    let mut c = bedrock.connect().await;
    let created = c
        .send(
            "CreateJob",
            &[("name", "tick"), ("repeat", "finished, +1 minute")],
        )
        .await;
    let id = created.body["jobID"].as_i64().unwrap().to_string();
    let got = c.send("GetJob", &[("name", "tick")]).await;
    assert_eq!(got.body["repeat"], "FINISHED, +1 MINUTE");
    let before = jiff::Timestamp::now();
    assert_eq!(
        c.send("FinishJob", &[("jobID", &id)]).await.status,
        "200 OK"
    );
    let queried = c.send("QueryJob", &[("jobID", &id)]).await;
    assert_eq!(queried.body["state"], "QUEUED");
    let next: jiff::civil::DateTime = queried.body["nextRun"].as_str().unwrap().parse().unwrap();
    let next = next.to_zoned(jiff::tz::TimeZone::UTC).unwrap().timestamp();
    let minute = next.as_second() - before.as_second();
    assert!(
        (59..=61).contains(&minute),
        "about a minute later, got {minute} s"
    );
    assert_eq!(
        c.send("GetJob", &[("name", "tick")]).await.status,
        "404 No job found"
    );
    bedrock.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_job_checks_its_headers_in_bedrocks_order() {
    let bedrock = Bedrock::start().await;
    let mut c = bedrock.connect().await;
    let long = "x".repeat(256);
    for (headers, status) in [
        (vec![], "402 Missing name"),
        (vec![("name", "")], "402 Missing name"),
        (vec![("name", long.as_str())], "402 Malformed name"),
        (
            vec![("name", "a"), ("jobPriority", "111")],
            "402 Invalid priority value",
        ),
        (
            vec![("name", "a"), ("data", "blabla")],
            "402 Data is not a valid JSON Object",
        ),
        (
            vec![("name", "a"), ("data", "[1]")],
            "402 Data is not a valid JSON Object",
        ),
        (
            vec![("name", "a"), ("repeat", "blabla")],
            "402 Malformed repeat",
        ),
        (
            vec![("name", "a"), ("priority", "7")],
            "402 Invalid priority value",
        ),
        (
            vec![("name", "a"), ("retryAfter", "10")],
            "402 Malformed retryAfter",
        ),
        // Bedrock's check of a retryAfter knows no START OF HOUR, which a repeat may use.
        (
            vec![("name", "a"), ("retryAfter", "+1 HOUR, START OF HOUR")],
            "402 Malformed retryAfter",
        ),
        // The order: retryAfter (step 4) before the parent (step 5), the parent before the repeat (step 7).
        (
            vec![
                ("name", "a"),
                ("retryAfter", "10"),
                ("parentJobID", "424242"),
            ],
            "402 Malformed retryAfter",
        ),
        (
            vec![
                ("name", "a"),
                ("parentJobID", "424242"),
                ("repeat", "blabla"),
            ],
            "404 parentJobID does not exist",
        ),
    ] {
        assert_eq!(
            c.send("CreateJob", &headers).await.status,
            status,
            "{headers:?}"
        );
    }
    let batch = c
        .send(
            "CreateJobs",
            &[(
                "jobs",
                r#"[{"name":"a","data":{"n":1}},{"name":"b","jobPriority":1000}]"#,
            )],
        )
        .await;
    assert_eq!(batch.status, "200 OK");
    assert_eq!(batch.body["jobIDs"].as_array().unwrap().len(), 2);
    for (jobs, status) in [
        ("[]", "401 Invalid JSON"),
        ("[1]", "401 Invalid JSON"),
        ("[{}]", "401 Invalid JSON"),
        (r#"[{"data":{}}]"#, "402 Missing name"),
        (
            r#"[{"name":"a"},{"name":"b","jobPriority":3}]"#,
            "402 Invalid priority value",
        ),
    ] {
        assert_eq!(
            c.send("CreateJobs", &[("jobs", jobs)]).await.status,
            status,
            "{jobs}"
        );
    }
    bedrock.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_jobs_takes_higher_priority_first_and_matches_globs_or_exact_lists() {
    let bedrock = Bedrock::start().await;
    let mut c = bedrock.connect().await;
    for (name, priority) in [
        ("low", "0"),
        ("high", "1000"),
        ("medium", "500"),
        ("lower", "500"),
    ] {
        let created = c
            .send("CreateJob", &[("name", name), ("jobPriority", priority)])
            .await;
        assert_eq!(created.status, "200 OK");
    }
    assert_eq!(
        c.send("GetJobs", &[("name", "*")]).await.status,
        "402 Missing numResults"
    );
    assert_eq!(
        c.send("GetJob", &[("name", "*"), ("numResults", "2")])
            .await
            .status,
        "402 Cannot use numResults with GetJob; try GetJobs"
    );
    let names = |reply: &Reply| -> Vec<String> {
        reply.body["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j["name"].as_str().unwrap().to_owned())
            .collect()
    };
    // A list is exact names ("low" is not "lower"), taken higher priority first.
    let listed = c
        .send("GetJobs", &[("name", "low,medium"), ("numResults", "5")])
        .await;
    assert_eq!(names(&listed), ["medium", "low"]);
    // One name is a GLOB.
    let rest = c
        .send("GetJobs", &[("name", "*"), ("numResults", "5")])
        .await;
    assert_eq!(names(&rest), ["high", "lower"]);
    assert_eq!(
        c.send("GetJob", &[("name", "*")]).await.status,
        "404 No job found"
    );
    assert_eq!(
        c.send("Nonsense", &[]).await.status,
        "430 Unrecognized command"
    );
    bedrock.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_wait_blocks_until_another_connection_creates_a_job() {
    let bedrock = Bedrock::start().await;
    let mut waiter = bedrock.connect().await;
    let mut creator = bedrock.connect().await;
    let waiting = tokio::spawn(async move {
        let reply = waiter
            .send(
                "GetJob",
                &[
                    ("name", "report"),
                    ("Connection", "wait"),
                    ("timeout", "60000"),
                ],
            )
            .await;
        (waiter, reply)
    });
    // Created once the GetJob waits, which shows as its worker seen (this is the test's first GetJob): a job created
    // before it would be found at once, not wake it.
    crate::poll::eventually(Duration::from_secs(20), "the GetJob waits", || async {
        let workers = bedrock.queue.workers().await.unwrap();
        workers.iter().any(|w| w.id.as_str() == "bedrock")
    })
    .await;
    let created = creator.send("CreateJob", &[("name", "report")]).await;
    // Far less than the 60 s timeout: a server that did not wake the waiter would answer only at its end.
    let (mut waiter, reply) = tokio::time::timeout(Duration::from_secs(20), waiting)
        .await
        .expect("the waiting GetJob is answered when the job is created")
        .unwrap();
    assert_eq!(reply.status, "200 OK");
    assert_eq!(reply.body["jobID"], created.body["jobID"]);
    // Nothing more arrives: after the timeout, 404.
    let empty = waiter
        .send(
            "GetJob",
            &[
                ("name", "report"),
                ("Connection", "wait"),
                ("timeout", "200"),
            ],
        )
        .await;
    assert_eq!(empty.status, "404 No job found");
    bedrock.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_fail_delete_cancel_and_requeue_follow_bedrocks_rules() {
    let bedrock = Bedrock::start().await;
    let mut c = bedrock.connect().await;
    let id = c.send("CreateJob", &[("name", "work")]).await.body["jobID"]
        .as_i64()
        .unwrap()
        .to_string();
    let job = [("jobID", id.as_str())];
    assert_eq!(
        c.send("FinishJob", &job).await.status,
        "405 Can only retry/finish RUNNING and RUNQUEUED jobs"
    );
    assert_eq!(
        c.send("FailJob", &job).await.status,
        "405 Can only fail RUNNING or RUNQUEUED jobs"
    );
    assert_eq!(
        c.send("CancelJob", &job).await.status,
        "404 Invalid jobID - Cannot cancel a job without a parent"
    );
    for (headers, status) in [
        (vec![], "402 Missing jobID"),
        (vec![("jobID", "01")], "402 Malformed jobID"),
        (vec![("jobID", "424242")], "404 No job with this jobID"),
    ] {
        assert_eq!(c.send("QueryJob", &headers).await.status, status);
    }

    c.send("GetJob", &[("name", "work")]).await;
    assert_eq!(
        c.send("DeleteJob", &job).await.status,
        "405 Can't delete a RUNNING job"
    );
    assert_eq!(
        c.send("RetryJob", &[("jobID", id.as_str()), ("delay", "-5")])
            .await
            .status,
        "402 Must specify a non-negative delay when retrying"
    );
    assert_eq!(
        c.send(
            "RetryJob",
            &[("jobID", id.as_str()), ("delay", "100000000")]
        )
        .await
        .status,
        "402 Malformed delay"
    );
    let retried = c
        .send(
            "RetryJob",
            &[
                ("jobID", id.as_str()),
                ("delay", "3600"),
                ("data", r#"{"try":2}"#),
                ("jobPriority", "1000"),
            ],
        )
        .await;
    assert_eq!(retried.status, "200 OK");
    let queried = c.send("QueryJob", &job).await;
    assert_eq!(queried.body["state"], "QUEUED");
    assert_eq!(queried.body["data"], json!({"try": 2}));
    assert_eq!(queried.body["priority"], 1000);
    assert_eq!(
        c.send("GetJob", &[("name", "work")]).await.status,
        "404 No job found"
    );

    // RequeueJobs makes it due at once, whatever its state; unknown ids are ignored.
    assert_eq!(
        c.send("RequeueJobs", &[("jobIDs", &format!("{id},abc,424242"))])
            .await
            .status,
        "200 OK"
    );
    assert_eq!(c.send("GetJob", &[("name", "work")]).await.status, "200 OK");
    assert_eq!(c.send("FailJob", &job).await.status, "200 OK");
    assert_eq!(c.send("QueryJob", &job).await.body["state"], "FAILED");
    assert_eq!(c.send("DeleteJob", &job).await.status, "200 OK");
    assert_eq!(
        c.send("QueryJob", &job).await.status,
        "404 No job with this jobID"
    );
    bedrock.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_unique_job_is_found_again_and_different_data_is_merged_in() {
    let bedrock = Bedrock::start().await;
    let mut c = bedrock.connect().await;
    let unique = |data: &'static str| vec![("name", "sync"), ("unique", "true"), ("data", data)];
    let first = c.send("CreateJob", &unique(r#"{"a":1,"b":{"c":1}}"#)).await;
    let id = first.body["jobID"].clone();
    // The same data: the same job, nothing written.
    assert_eq!(
        c.send("CreateJob", &unique(r#"{"a":1,"b":{"c":1}}"#))
            .await
            .body["jobID"],
        id
    );
    // Other data: merged in by JSON Merge Patch.
    assert_eq!(
        c.send("CreateJob", &unique(r#"{"a":null,"b":{"d":2}}"#))
            .await
            .body["jobID"],
        id
    );
    let query = [("jobID", id.to_string())];
    let query: Vec<(&str, &str)> = query.iter().map(|(k, v)| (*k, v.as_str())).collect();
    assert_eq!(
        c.send("QueryJob", &query).await.body["data"],
        json!({"b": {"c": 1, "d": 2}})
    );
    // overwrite other than empty or true: the job is found, and left as it is.
    let mut keep = unique(r#"{"z":1}"#);
    keep.push(("overwrite", "false"));
    assert_eq!(c.send("CreateJob", &keep).await.body["jobID"], id);
    assert_eq!(
        c.send("QueryJob", &query).await.body["data"],
        json!({"b": {"c": 1, "d": 2}})
    );
    // Without unique, another job.
    let other = c.send("CreateJob", &[("name", "sync")]).await;
    assert_ne!(other.body["jobID"], id);
    // CreateJobs finds unique jobs too, merges their data, and creates the others, ids in input order.
    let batch = c
        .send(
            "CreateJobs",
            &[(
                "jobs",
                r#"[{"name":"fresh"},{"name":"sync","unique":true,"data":{"e":3}},{"name":"fresh2","unique":true}]"#,
            )],
        )
        .await;
    assert_eq!(batch.status, "200 OK", "{batch:?}");
    let ids = batch.body["jobIDs"].as_array().unwrap().clone();
    assert_eq!(ids.len(), 3);
    // Either "sync" job is a match, as in Bedrock (a lookup by name, not a constraint).
    assert!(ids[1] == id || ids[1] == other.body["jobID"], "{ids:?}");
    assert_ne!(ids[0], ids[2]);
    let found = ids[1].to_string();
    assert_eq!(
        c.send("QueryJob", &[("jobID", found.as_str())]).await.body["data"]["e"],
        3
    );
    // A unique child that exists under another parent is refused.
    let parent = c.send("CreateJob", &[("name", "parent")]).await.body["jobID"].to_string();
    c.send("GetJob", &[("name", "parent")]).await;
    let child = [
        ("name", "only-child"),
        ("unique", "true"),
        ("parentJobID", parent.as_str()),
    ];
    assert_eq!(c.send("CreateJob", &child).await.status, "200 OK");
    assert_eq!(
        c.send("CreateJob", &[("name", "only-child"), ("unique", "true")])
            .await
            .status,
        "404 Trying to create a child that already exists, but it is tied to a different parent"
    );
    bedrock.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_are_renamed_and_their_repeat_changed_as_bedrock_allows() {
    let bedrock = Bedrock::start().await;
    let mut c = bedrock.connect().await;
    let id = c.send("CreateJob", &[("name", "v1")]).await.body["jobID"].to_string();
    let job = [("jobID", id.as_str())];
    c.send("GetJob", &[("name", "v1")]).await;
    let retried = c
        .send("RetryJob", &[("jobID", id.as_str()), ("name", "v2")])
        .await;
    assert_eq!(retried.status, "200 OK");
    assert_eq!(c.send("QueryJob", &job).await.body["name"], "v2");
    assert_eq!(
        c.send("RequeueJobs", &[("jobIDs", id.as_str()), ("name", "v3")])
            .await
            .status,
        "200 OK"
    );
    assert_eq!(c.send("QueryJob", &job).await.body["name"], "v3");

    // A new repeat is stored upper-cased and moves a waiting job's nextRun from its due time.
    let before = c.send("QueryJob", &job).await.body["nextRun"].clone();
    let updated = c
        .send(
            "UpdateJob",
            &[
                ("jobID", id.as_str()),
                ("data", "{}"),
                ("repeat", "scheduled, +1 hour"),
            ],
        )
        .await;
    assert_eq!(updated.status, "200 OK");
    let after = c.send("QueryJob", &job).await.body;
    assert_eq!(after["repeat"], "SCHEDULED, +1 HOUR");
    let parse = |v: &Value| -> i64 {
        let civil: jiff::civil::DateTime = v.as_str().unwrap().parse().unwrap();
        civil
            .to_zoned(jiff::tz::TimeZone::UTC)
            .unwrap()
            .timestamp()
            .as_second()
    };
    assert_eq!(parse(&after["nextRun"]) - parse(&before), 3600);
    let cleared = c
        .send(
            "UpdateJob",
            &[
                ("jobID", id.as_str()),
                ("data", "{}"),
                ("shouldClearRepeat", "1"),
            ],
        )
        .await;
    assert_eq!(cleared.status, "200 OK");
    assert_eq!(c.send("QueryJob", &job).await.body["repeat"], "");
    assert_eq!(
        c.send("RetryJob", &[("jobID", id.as_str()), ("name", "x*")])
            .await
            .status,
        "405 Can only retry/finish RUNNING and RUNQUEUED jobs"
    );
    bedrock.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forget_answers_at_once_and_a_forgotten_get_job_takes_nothing() {
    let bedrock = Bedrock::start().await;
    let mut c = bedrock.connect().await;
    let created = c
        .send("CreateJob", &[("name", "later"), ("Connection", "forget")])
        .await;
    assert_eq!(created.status, "202 Successfully queued");
    let mut c = bedrock.connect().await;
    let taken = c
        .send("GetJob", &[("name", "later"), ("Connection", "forget")])
        .await;
    assert_eq!(taken.status, "202 Successfully queued");
    let mut c = bedrock.connect().await;
    // The forgotten CreateJob ran; the forgotten GetJob took nothing.
    let got = c.send("GetJob", &[("name", "later")]).await;
    assert_eq!(got.status, "200 OK");
    // FinishJob ends a repeating job when told to ignore its repeat: it is gone for Bedrock, and never runs again.
    let id = c
        .send(
            "CreateJob",
            &[("name", "tick"), ("repeat", "FINISHED, +1 SECOND")],
        )
        .await
        .body["jobID"]
        .to_string();
    c.send("GetJob", &[("name", "tick")]).await;
    let finished = c
        .send(
            "FinishJob",
            &[("jobID", id.as_str()), ("ignoreRepeat", "true")],
        )
        .await;
    assert_eq!(finished.status, "200 OK");
    assert_eq!(
        c.send("QueryJob", &[("jobID", id.as_str())]).await.status,
        "404 No job with this jobID"
    );
    // RequeueJobs ignores it as Bedrock ignores unknown ids.
    c.send("RequeueJobs", &[("jobIDs", id.as_str())]).await;
    assert_eq!(
        c.send("QueryJob", &[("jobID", id.as_str())]).await.status,
        "404 No job with this jobID"
    );
    bedrock.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_nested_as_deep_as_json_allows_is_handed_out() {
    let bedrock = Bedrock::start().await;
    let mut c = bedrock.connect().await;
    let deep = format!("{}1{}", r#"{"a":"#.repeat(126), "}".repeat(126));
    assert_eq!(
        c.send("CreateJob", &[("name", "deep"), ("data", deep.as_str())])
            .await
            .status,
        "200 OK"
    );
    let mut raw = bedrock.connect().await;
    raw.0
        .write_all(b"GetJobs\r\nname: deep\r\nnumResults: 5\r\n\r\n")
        .await
        .unwrap();
    // The body is too deep for this test's own JSON parser to read back: check its start only.
    let mut head = [0u8; 6];
    raw.0.read_exact(&mut head).await.unwrap();
    assert_eq!(&head, b"200 OK");
    bedrock.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn escaped_header_values_carry_json_with_backslashes_and_line_breaks() {
    let bedrock = Bedrock::start().await;
    let mut c = bedrock.connect().await;
    // As Bedrock-PHP sends it: every backslash of the JSON doubled, so `x\"y` travels as `x\\"y`.
    let created = c
        .send(
            "CreateJob",
            &[
                ("name", "escaped"),
                (
                    "data",
                    r#"{"quote":"x\\"y","lines":"a\\nb","path":"c:\\\\d"}"#,
                ),
            ],
        )
        .await;
    assert_eq!(created.status, "200 OK");
    let got = c.send("GetJob", &[("name", "escaped")]).await;
    assert_eq!(
        got.body["data"],
        json!({"quote": "x\"y", "lines": "a\nb", "path": "c:\\d"})
    );
    bedrock.stop().await;
}

/// The id in a CreateJob answer, as header text.
fn created(reply: &Reply) -> String {
    assert_eq!(reply.status, "200 OK", "{reply:?}");
    reply.body["jobID"].as_i64().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parent_pauses_for_its_children_and_runs_again_with_their_results() {
    let bedrock = Bedrock::start().await;
    let mut c = bedrock.connect().await;
    let parent = created(
        &c.send("CreateJob", &[("name", "parent"), ("data", r#"{"p":1}"#)])
            .await,
    );
    // A child of a job that is not running is refused; so is one of a job that does not exist.
    assert_eq!(
        c.send("CreateJob", &[("name", "child"), ("parentJobID", &parent)])
            .await
            .status,
        "405 Can only create child job when parent is RUNNING, RUNQUEUED or PAUSED"
    );
    assert_eq!(
        c.send("CreateJob", &[("name", "child"), ("parentJobID", "424242")])
            .await
            .status,
        "404 parentJobID does not exist"
    );
    assert_eq!(
        c.send("GetJob", &[("name", "parent")]).await.status,
        "200 OK"
    );
    // 1. The running parent creates children, which wait (PAUSED) until its run finishes.
    let first = created(
        &c.send(
            "CreateJob",
            &[
                ("name", "child"),
                ("parentJobID", &parent),
                ("data", r#"{"n":1}"#),
            ],
        )
        .await,
    );
    let jobs = format!(
        r#"[{{"name":"child","parentJobID":{parent},"data":{{"n":2}}}},{{"name":"child","parentJobID":{parent},"data":{{"n":3}}}}]"#
    );
    let batch = c.send("CreateJobs", &[("jobs", jobs.as_str())]).await;
    assert_eq!(batch.status, "200 OK", "{batch:?}");
    let second = batch.body["jobIDs"][0].as_i64().unwrap().to_string();
    let third = batch.body["jobIDs"][1].as_i64().unwrap().to_string();
    let state = |reply: Reply| reply.body["state"].as_str().unwrap().to_owned();
    assert_eq!(
        state(c.send("QueryJob", &[("jobID", &first)]).await),
        "PAUSED"
    );
    assert_eq!(
        c.send("GetJob", &[("name", "child")]).await.status,
        "404 No job found"
    );
    // No grandchildren.
    assert_eq!(
        c.send(
            "CreateJob",
            &[("name", "grandchild"), ("parentJobID", &first)]
        )
        .await
        .status,
        "405 Cannot create grandchildren"
    );
    // 2. The parent finishes: it pauses, and its children are queued.
    assert_eq!(
        c.send("FinishJob", &[("jobID", &parent)]).await.status,
        "200 OK"
    );
    assert_eq!(
        state(c.send("QueryJob", &[("jobID", &parent)]).await),
        "PAUSED"
    );
    assert_eq!(
        state(c.send("QueryJob", &[("jobID", &first)]).await),
        "QUEUED"
    );
    assert_eq!(
        c.send("DeleteJob", &[("jobID", &parent)]).await.status,
        "405 Can't delete a parent jobs with children running"
    );
    assert_eq!(
        c.send("CancelJob", &[("jobID", &parent)]).await.status,
        "404 Invalid jobID - Cannot cancel a job with children"
    );
    // 3. A child carries its parent's id and data.
    let child = c.send("GetJob", &[("name", "child")]).await;
    assert_eq!(child.status, "200 OK");
    assert_eq!(keys(&child.body).len(), 11, "{:?}", child.body);
    assert_eq!(child.body["parentJobID"].to_string(), parent);
    assert_eq!(child.body["parentData"], json!({"p": 1}));
    let taken = child.body["jobID"].to_string();
    // While its parent waits, a child may add a sibling, which is queued at once.
    let sibling = created(
        &c.send(
            "CreateJob",
            &[("name", "sibling"), ("parentJobID", &parent)],
        )
        .await,
    );
    assert_eq!(
        state(c.send("QueryJob", &[("jobID", &sibling)]).await),
        "QUEUED"
    );
    assert_eq!(
        c.send(
            "FinishJob",
            &[("jobID", &taken), ("data", r#"{"result":"ok"}"#)]
        )
        .await
        .status,
        "200 OK"
    );
    assert_eq!(
        state(c.send("QueryJob", &[("jobID", &taken)]).await),
        "FINISHED"
    );
    // A queued child can be cancelled; a finished one is left as it is.
    let queued = [&first, &second, &third]
        .into_iter()
        .find(|id| **id != taken)
        .unwrap()
        .clone();
    assert_eq!(
        c.send("CancelJob", &[("jobID", &queued)]).await.status,
        "200 OK"
    );
    assert_eq!(
        state(c.send("QueryJob", &[("jobID", &queued)]).await),
        "CANCELLED"
    );
    assert_eq!(
        c.send("CancelJob", &[("jobID", &taken)]).await.status,
        "200 OK"
    );
    assert_eq!(
        state(c.send("QueryJob", &[("jobID", &taken)]).await),
        "FINISHED"
    );
    // The rest finish; the parent is still PAUSED until the last.
    for name in ["child", "sibling"] {
        assert_eq!(
            state(c.send("QueryJob", &[("jobID", &parent)]).await),
            "PAUSED"
        );
        let got = c.send("GetJob", &[("name", name)]).await;
        assert_eq!(got.status, "200 OK", "{name}");
        let id = got.body["jobID"].to_string();
        assert_eq!(
            c.send("FinishJob", &[("jobID", &id)]).await.status,
            "200 OK"
        );
    }
    // 4. The parent runs again, and sees its finished and cancelled children.
    assert_eq!(
        state(c.send("QueryJob", &[("jobID", &parent)]).await),
        "QUEUED"
    );
    let again = c.send("GetJob", &[("name", "parent")]).await;
    assert_eq!(again.status, "200 OK");
    let finished = again.body["finishedChildJobs"].as_array().unwrap();
    assert_eq!(finished.len(), 3, "{:?}", again.body);
    assert!(
        finished
            .contains(&json!({"data": {"result": "ok"}, "jobID": taken.parse::<i64>().unwrap()}))
    );
    assert_eq!(
        again.body["cancelledChildJobs"],
        json!([{"data": {"n": queued.parse::<i64>().unwrap() - first.parse::<i64>().unwrap() + 1}, "jobID": queued.parse::<i64>().unwrap()}])
    );
    // 5. Its FinishJob deletes those children, then the parent itself.
    assert_eq!(
        c.send("FinishJob", &[("jobID", &parent)]).await.status,
        "200 OK"
    );
    for id in [&parent, &taken, &queued, &sibling] {
        assert_eq!(
            c.send("QueryJob", &[("jobID", id)]).await.status,
            "404 No job with this jobID",
            "job {id}"
        );
    }
    bedrock.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_child_must_be_cancelled_before_its_parent_can_finish() {
    let bedrock = Bedrock::start().await;
    let mut c = bedrock.connect().await;
    let parent = created(&c.send("CreateJob", &[("name", "parent")]).await);
    c.send("GetJob", &[("name", "parent")]).await;
    let child = created(
        &c.send("CreateJob", &[("name", "child"), ("parentJobID", &parent)])
            .await,
    );
    // A child ends only while its parent is PAUSED.
    assert_eq!(
        c.send("FinishJob", &[("jobID", &parent)]).await.status,
        "200 OK"
    );
    c.send("GetJob", &[("name", "child")]).await;
    assert_eq!(
        c.send("FailJob", &[("jobID", &child)]).await.status,
        "200 OK"
    );
    // The parent stays PAUSED while its child has failed, until the child is cancelled.
    assert_eq!(
        c.send("QueryJob", &[("jobID", &parent)]).await.body["state"],
        "PAUSED"
    );
    assert_eq!(
        c.send("GetJob", &[("name", "parent")]).await.status,
        "404 No job found"
    );
    assert_eq!(
        c.send("CancelJob", &[("jobID", &child)]).await.status,
        "200 OK"
    );
    let again = c.send("GetJob", &[("name", "parent")]).await;
    assert_eq!(again.status, "200 OK");
    assert_eq!(
        c.send("FinishJob", &[("jobID", &parent)]).await.status,
        "200 OK"
    );
    assert_eq!(
        c.send("QueryJob", &[("jobID", &parent)]).await.status,
        "404 No job with this jobID"
    );
    // A child whose parent is not PAUSED cannot end.
    let parent = created(&c.send("CreateJob", &[("name", "parent")]).await);
    c.send("GetJob", &[("name", "parent")]).await;
    let child = created(
        &c.send("CreateJob", &[("name", "child"), ("parentJobID", &parent)])
            .await,
    );
    assert_eq!(
        c.send("FinishJob", &[("jobID", &parent)]).await.status,
        "200 OK"
    );
    c.send("GetJob", &[("name", "child")]).await;
    c.send("RequeueJobs", &[("jobIDs", &parent)]).await;
    assert_eq!(
        c.send("FinishJob", &[("jobID", &child)]).await.status,
        "405 Can only retry/finish child job when parent is PAUSED"
    );
    bedrock.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_with_retry_after_is_handed_out_again_until_it_fails_on_the_tenth() {
    let bedrock = Bedrock::start().await;
    let mut c = bedrock.connect().await;
    let id = created(
        &c.send(
            "CreateJob",
            &[
                ("name", "flaky"),
                ("retryAfter", "+1 SECONDS"),
                ("data", r#"{"k":1}"#),
            ],
        )
        .await,
    );
    let query = [("jobID", id.as_str())];
    let first = c.send("GetJob", &[("name", "flaky")]).await;
    assert_eq!(first.body["retryAfter"], "+1 SECONDS");
    assert_eq!(first.body["data"], json!({"k": 1}));
    let running = c.send("QueryJob", &query).await.body;
    assert_eq!(running["state"], "RUNQUEUED");
    assert_eq!(running["data"], json!({"k": 1, "retryAfterCount": 1}));
    // Nobody finishes it: a second later it is due again, and a waiting GetJob gets it.
    let wait = [
        ("name", "flaky"),
        ("Connection", "wait"),
        ("timeout", "10000"),
    ];
    let second = c.send("GetJob", &wait).await;
    assert_eq!(second.status, "200 OK");
    assert_eq!(second.body["data"], json!({"k": 1, "retryAfterCount": 1}));
    // RetryJob starts the count afresh; FinishJob ends it.
    assert_eq!(c.send("RetryJob", &query).await.status, "200 OK");
    assert_eq!(
        c.send("QueryJob", &query).await.body["data"],
        json!({"k": 1})
    );
    for handed_out in 1..=10 {
        let got = c.send("GetJob", &wait).await;
        assert_eq!(got.status, "200 OK", "hand-out {handed_out}");
        assert_eq!(got.body["jobID"].to_string(), id);
    }
    // The tenth hand-out's time runs out too: the job fails instead of being handed out an eleventh time.
    let asking = &tokio::sync::Mutex::new(&mut c);
    let query = &query;
    crate::poll::eventually(Duration::from_secs(10), "the job failed", || async move {
        let state = asking.lock().await.send("QueryJob", query).await.body["state"].clone();
        if state == "FAILED" {
            return true;
        }
        assert_eq!(state, "RUNQUEUED");
        false
    })
    .await;
    assert_eq!(
        c.send("GetJob", &[("name", "flaky")]).await.status,
        "404 No job found"
    );
    // A RUNQUEUED job can be deleted, unlike a RUNNING one.
    let gone = created(
        &c.send(
            "CreateJob",
            &[("name", "doomed"), ("retryAfter", "+1 HOUR")],
        )
        .await,
    );
    c.send("GetJob", &[("name", "doomed")]).await;
    assert_eq!(
        c.send("QueryJob", &[("jobID", &gone)]).await.body["state"],
        "RUNQUEUED"
    );
    assert_eq!(
        c.send("DeleteJob", &[("jobID", &gone)]).await.status,
        "200 OK"
    );
    // A finished job with retryAfter ends like any other.
    let done = created(
        &c.send("CreateJob", &[("name", "quick"), ("retryAfter", "+1 HOUR")])
            .await,
    );
    c.send("GetJob", &[("name", "quick")]).await;
    assert_eq!(
        c.send("FinishJob", &[("jobID", &done)]).await.status,
        "200 OK"
    );
    assert_eq!(
        c.send("QueryJob", &[("jobID", &done)]).await.status,
        "404 No job with this jobID"
    );
    bedrock.stop().await;
}

/// A command, its headers, and the status it must answer.
type Case<'a> = (&'a str, Vec<(&'a str, &'a str)>, &'a str);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_command_refuses_bad_headers_with_bedrocks_status_lines_in_order() {
    let bedrock = Bedrock::start().await;
    let mut c = bedrock.connect().await;
    let id = created(&c.send("CreateJob", &[("name", "job")]).await);
    let long_pattern = "x".repeat(12_751);
    let cases: Vec<Case> = vec![
        // GetJob and GetJobs (§5.3), each check before the next.
        ("GetJob", vec![], "402 Missing name"),
        (
            "GetJob",
            vec![("name", &long_pattern)],
            "402 Malformed name",
        ),
        ("GetJobs", vec![("name", "job")], "402 Missing numResults"),
        (
            "GetJob",
            vec![("name", "job"), ("numResults", "")],
            "402 Cannot use numResults with GetJob; try GetJobs",
        ),
        (
            "GetJob",
            vec![("name", "job"), ("jobPriority", "111")],
            "402 Invalid priority value",
        ),
        ("GetJob", vec![("name", "nothing")], "404 No job found"),
        // UpdateJob (§5.5).
        ("UpdateJob", vec![("data", "{}")], "402 Missing jobID"),
        ("UpdateJob", vec![("jobID", "x1")], "402 Malformed jobID"),
        ("UpdateJob", vec![("jobID", &id)], "402 Missing data"),
        (
            "UpdateJob",
            vec![("jobID", &id), ("data", "{}"), ("repeat", "blabla")],
            "402 Malformed repeat",
        ),
        (
            "UpdateJob",
            vec![("jobID", &id), ("data", "{}"), ("jobPriority", "111")],
            "402 Invalid priority value",
        ),
        (
            "UpdateJob",
            vec![("jobID", "424242"), ("data", "{}")],
            "404 No job with this jobID",
        ),
        // Invalid JSON is a deliberate difference: Bedrock stores {} without a word.
        (
            "UpdateJob",
            vec![("jobID", &id), ("data", "{oops")],
            "402 Malformed data",
        ),
        // The lifecycle commands, DeleteJob and CancelJob on an unknown job (§5.6–5.11).
        (
            "FinishJob",
            vec![("jobID", "424242")],
            "404 No job with this jobID",
        ),
        (
            "RetryJob",
            vec![("jobID", "424242")],
            "404 No job with this jobID",
        ),
        (
            "FailJob",
            vec![("jobID", "424242")],
            "404 No job with this jobID",
        ),
        (
            "DeleteJob",
            vec![("jobID", "424242")],
            "404 No job with this jobID",
        ),
        (
            "CancelJob",
            vec![("jobID", "424242")],
            "404 No job with this jobID",
        ),
        ("CancelJob", vec![], "402 Missing jobID"),
        ("FinishJob", vec![("jobID", "+5")], "402 Malformed jobID"),
        ("Nonsense", vec![], "430 Unrecognized command"),
    ];
    for (verb, headers, status) in cases {
        assert_eq!(
            c.send(verb, &headers).await.status,
            status,
            "{verb} {headers:?}"
        );
    }
    // A repeat whose next run cannot be computed: STARTED on a job that never ran (reference §6.6).
    assert_eq!(
        c.send(
            "UpdateJob",
            &[
                ("jobID", &id),
                ("data", "{}"),
                ("repeat", "STARTED, +1 HOUR")
            ]
        )
        .await
        .status,
        "400 Unique Constraints Violation"
    );
    // RetryJob checks a new priority after the lifecycle checks, and changes nothing when it is refused.
    assert_eq!(c.send("GetJob", &[("name", "job")]).await.status, "200 OK");
    assert_eq!(
        c.send("RetryJob", &[("jobID", &id), ("jobPriority", "111")])
            .await
            .status,
        "402 Invalid priority value"
    );
    assert_eq!(
        c.send("QueryJob", &[("jobID", &id)]).await.body["state"],
        "RUNNING"
    );
    bedrock.stop().await;
}
