//! Cases of Bedrock's own test suite (Expensify/Bedrock, `test/tests/jobs/`), replayed through the text protocol:
//! the behaviours where Cairn once differed without saying so. Each test names the case it follows.

use serde_json::json;

use super::{Bedrock, Conn};

/// A Bedrock time (`YYYY-MM-DD HH:MM:SS`, perhaps with milliseconds) as a timestamp.
fn at(text: &str) -> jiff::Timestamp {
    let civil: jiff::civil::DateTime = text.parse().unwrap_or_else(|e| panic!("{text:?}: {e}"));
    civil.to_zoned(jiff::tz::TimeZone::UTC).unwrap().timestamp()
}

/// The Bedrock state QueryJob shows for job `id`.
async fn state(c: &mut Conn, id: &str) -> String {
    query(c, id).await["state"].as_str().unwrap().to_owned()
}

/// Checks that every job of `ids` is gone, as Bedrock deletes a family that ended.
async fn all_gone<'a>(c: &mut Conn, ids: impl IntoIterator<Item = &'a String>) {
    for id in ids {
        let reply = c.send("QueryJob", &[("jobID", id)]).await;
        assert_eq!(reply.status, "404 No job with this jobID", "{id}");
    }
}

async fn query(c: &mut Conn, id: &str) -> serde_json::Value {
    let reply = c.send("QueryJob", &[("jobID", id)]).await;
    assert_eq!(reply.status, "200 OK", "{id}: {}", reply.text);
    reply.body
}

/// `CreateJob retryRecurringJobs` and `retryLifecycle`: a new job's `nextRun` keeps its milliseconds, and so does
/// the `originalNextRun` a hand-out records from it, at the next hand-out too; `lastRun` and `nextRun` of a
/// handed-out job are exactly its `retryAfter` apart, whatever the millisecond it was created in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_after_is_exact_and_the_original_next_run_keeps_its_milliseconds() {
    let bedrock = Bedrock::start().await;
    let mut c = bedrock.connect().await;
    let mut ids = Vec::new();
    // Jobs created over a few hundred milliseconds land on different milliseconds of their seconds.
    for i in 0..12 {
        let name = format!("testRetryable{i}");
        let created = c
            .send(
                "CreateJob",
                &[
                    ("name", &name),
                    ("repeat", "SCHEDULED, +10 SECONDS"),
                    (
                        "retryAfter",
                        if i % 2 == 0 {
                            "+2 SECONDS"
                        } else {
                            "+1 MINUTE"
                        },
                    ),
                ],
            )
            .await;
        assert_eq!(created.status, "200 OK", "{}", created.text);
        let id = created.body["jobID"].to_string();
        let next_run = query(&mut c, &id).await["nextRun"]
            .as_str()
            .unwrap()
            .to_owned();
        assert_eq!(
            next_run.len(),
            "2026-11-29 04:26:01.830".len(),
            "{next_run}"
        );
        ids.push((name, id, next_run));
        tokio::time::sleep(std::time::Duration::from_millis(30)).await; // Real time: the next millisecond.
    }
    for (i, (name, id, next_run)) in ids.iter().enumerate() {
        let got = c.send("GetJob", &[("name", name)]).await;
        assert_eq!(got.body["data"], json!({}), "{}", got.text);
        let queried = query(&mut c, id).await;
        assert_eq!(queried["state"], "RUNQUEUED");
        assert_eq!(
            queried["data"],
            json!({"retryAfterCount": 1, "originalNextRun": next_run})
        );
        let apart = at(queried["nextRun"].as_str().unwrap())
            .duration_since(at(queried["lastRun"].as_str().unwrap()))
            .as_secs();
        assert_eq!(apart, if i % 2 == 0 { 2 } else { 60 }, "{queried}");
    }
    // Handed out again once its retryAfter lapses, it is handed out with the time the run was first due, as
    // Bedrock's second GetJob shows it.
    let (name, id, next_run) = &ids[0];
    let wait = [
        ("name", name.as_str()),
        ("Connection", "wait"),
        ("timeout", "10000"),
    ];
    let again = c.send("GetJob", &wait).await;
    assert_eq!(again.body["jobID"].to_string(), *id, "{}", again.text);
    assert_eq!(
        again.body["data"],
        json!({"retryAfterCount": 1, "originalNextRun": next_run})
    );
    // Finished, it repeats from when it was due: ten seconds after that, within the second it ran in.
    let (_, id, _) = &ids[1];
    let finished = c.send("FinishJob", &[("jobID", id)]).await;
    assert_eq!(finished.status, "200 OK");
    let queried = query(&mut c, id).await;
    assert_eq!(queried["state"], "QUEUED");
    let apart = at(queried["nextRun"].as_str().unwrap())
        .duration_since(at(queried["lastRun"].as_str().unwrap()))
        .as_secs();
    assert!((9..=11).contains(&apart), "{queried}");
    bedrock.stop().await;
}

/// The `retryAfter` rows of Bedrock's validation (`SIsValidSQLiteDateModifier`): a list of modifiers as a repeat
/// takes them, `START OF HOUR` aside.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_after_takes_every_modifier_list_bedrock_takes() {
    let bedrock = Bedrock::start().await;
    let mut c = bedrock.connect().await;
    for (retry_after, status) in [
        ("+10 HOUR", "200 OK"),
        ("+1 HOUR, START OF DAY", "200 OK"),
        ("+1 DAY, START OF DAY, +4 HOURS", "200 OK"),
        ("+1 MONTH, START OF MONTH, WEEKDAY 1", "200 OK"),
        ("+12345678 SECONDS", "200 OK"),
        ("-1 DAY", "200 OK"),
        ("10", "402 Malformed retryAfter"),
        ("+1 HOUR, START OF HOUR", "402 Malformed retryAfter"),
        // An empty part is skipped, as Bedrock's list parser skips it.
        ("+1 HOUR,", "200 OK"),
        ("+1234 HOURS", "402 Malformed retryAfter"),
        ("START OF WEEK", "402 Malformed retryAfter"),
    ] {
        let reply = c
            .send(
                "CreateJob",
                &[("name", "validated"), ("retryAfter", retry_after)],
            )
            .await;
        assert_eq!(reply.status, status, "{retry_after}");
    }
    // A list counts from the second the job was created: until the next midnight here.
    let created = c
        .send(
            "CreateJob",
            &[("name", "nightly"), ("retryAfter", "+1 DAY, START OF DAY")],
        )
        .await;
    let id = created.body["jobID"].to_string();
    c.send("GetJob", &[("name", "nightly")]).await;
    let queried = query(&mut c, &id).await;
    assert_eq!(queried["retryAfter"], "+1 DAY, START OF DAY");
    let next_run = at(queried["nextRun"].as_str().unwrap());
    let last_run = at(queried["lastRun"].as_str().unwrap());
    let midnight = last_run
        .to_zoned(jiff::tz::TimeZone::UTC)
        .date()
        .tomorrow()
        .unwrap()
        .to_zoned(jiff::tz::TimeZone::UTC)
        .unwrap()
        .timestamp();
    // The job was created at most a second or two before it was handed out.
    let late = next_run.duration_since(midnight).as_secs();
    assert!((0..=2).contains(&late), "{queried}");
    bedrock.stop().await;
}

/// `CreateJobs createWithParentMocked`: children created in one CreateJobs without `mockRequest`, one of them of
/// a mocked parent, are all mocked, as the parent is; the family then runs, and is gone once the parent is finished.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_jobs_follows_a_mocked_parent_for_all_its_jobs() {
    let bedrock = Bedrock::start().await;
    let mut c = bedrock.connect().await;
    let mocked = [("mockRequest", "true")];
    let parent = c
        .send(
            "CreateJob",
            &[("name", "createWithParentMocked"), mocked[0]],
        )
        .await;
    let parent = parent.body["jobID"].to_string();
    let got = c
        .send("GetJob", &[("name", "createWithParentMocked"), mocked[0]])
        .await;
    assert_eq!(got.body["jobID"].to_string(), parent);
    // As in the case itself, the second job names no parent.
    let jobs = format!(
        r#"[{{"name":"createWithParentMocked_child1","data":{{"blabla":"blabla"}},"parentJobID":{parent}}},
            {{"name":"createWithParentMocked_child2","data":{{"nope":"nope"}}}}]"#
    );
    let created = c.send("CreateJobs", &[("jobs", &jobs)]).await;
    assert_eq!(created.status, "200 OK", "{}", created.text);
    let finished = c.send("FinishJob", &[("jobID", &parent)]).await;
    assert_eq!(finished.status, "200 OK");
    let mut children = Vec::new();
    for name in [
        "createWithParentMocked_child1",
        "createWithParentMocked_child2",
    ] {
        let got = c.send("GetJob", &[("name", name), mocked[0]]).await;
        assert_eq!(got.status, "200 OK", "{name}: {}", got.text);
        assert_eq!(got.body["data"]["mockRequest"], true, "{name}");
        children.push(got.body["jobID"].to_string());
    }
    for child in &children {
        let finished = c.send("FinishJob", &[("jobID", child)]).await;
        assert_eq!(finished.status, "200 OK");
    }
    // A mocked job is finished in any state, as the case finishes its parent without taking it again.
    let finished = c.send("FinishJob", &[("jobID", &parent)]).await;
    assert_eq!(finished.status, "200 OK", "{}", finished.text);
    all_gone(&mut c, children.iter().chain([&parent])).await;
    bedrock.stop().await;
}

/// `GetJob testRetryableParentJobs`: a parent whose `retryAfter` lapses is handed out again with the child its
/// first run created still `PAUSED`; the child runs once a run of the parent finishes, and the family then ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parent_handed_out_again_keeps_the_children_of_its_earlier_run() {
    let bedrock = Bedrock::start().await;
    let mut c = bedrock.connect().await;
    let parent = c
        .send(
            "CreateJob",
            &[("name", "ParentJob"), ("retryAfter", "+1 SECOND")],
        )
        .await
        .body["jobID"]
        .to_string();
    let got = c.send("GetJob", &[("name", "ParentJob")]).await;
    assert_eq!(got.body["jobID"].to_string(), parent);
    assert_eq!(state(&mut c, &parent).await, "RUNQUEUED");
    let child = c
        .send(
            "CreateJob",
            &[("name", "ChildJob"), ("parentJobID", &parent)],
        )
        .await
        .body["jobID"]
        .to_string();
    assert_eq!(state(&mut c, &child).await, "PAUSED");

    // Once its retryAfter lapses, the parent is handed out again; the child still waits.
    let wait = [
        ("name", "ParentJob"),
        ("Connection", "wait"),
        ("timeout", "10000"),
    ];
    let again = c.send("GetJob", &wait).await;
    assert_eq!(again.body["jobID"].to_string(), parent, "{}", again.text);
    assert_eq!(state(&mut c, &parent).await, "RUNQUEUED");
    assert_eq!(state(&mut c, &child).await, "PAUSED");
    let none = c.send("GetJob", &[("name", "ChildJob")]).await;
    assert_eq!(none.status, "404 No job found");

    // This run finishes: the parent waits for the child, which runs.
    let finished = c.send("FinishJob", &[("jobID", &parent)]).await;
    assert_eq!(finished.status, "200 OK", "{}", finished.text);
    assert_eq!(state(&mut c, &parent).await, "PAUSED");
    assert_eq!(state(&mut c, &child).await, "QUEUED");
    let got = c.send("GetJob", &[("name", "ChildJob")]).await;
    assert_eq!(got.body["jobID"].to_string(), child);
    assert_eq!(state(&mut c, &child).await, "RUNNING");
    assert_eq!(state(&mut c, &parent).await, "PAUSED");
    let finished = c.send("FinishJob", &[("jobID", &child)]).await;
    assert_eq!(finished.status, "200 OK");
    assert_eq!(state(&mut c, &child).await, "FINISHED");
    assert_eq!(state(&mut c, &parent).await, "QUEUED");

    let got = c.send("GetJob", &[("name", "ParentJob")]).await;
    assert_eq!(got.body["jobID"].to_string(), parent);
    let finished = c.send("FinishJob", &[("jobID", &parent)]).await;
    assert_eq!(finished.status, "200 OK");
    all_gone(&mut c, [&child, &parent]).await;
    bedrock.stop().await;
}

/// A parent whose child failed, as Bedrock's FinishJob, FailJob and CancelJob leave it: a failure does not wake
/// it, the sibling that finishes last does; it is handed out with the finished child, and its FinishJob is refused
/// while the failed child is there. Cancelling that child sends the parent back, and its next hand-out lists the
/// child as cancelled; then it ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_child_holds_its_parent_only_until_a_sibling_finishes() {
    let bedrock = Bedrock::start().await;
    let mut c = bedrock.connect().await;
    let parent = c
        .send(
            "CreateJob",
            &[("name", "parent"), ("data", r#"{"foo":"bar"}"#)],
        )
        .await
        .body["jobID"]
        .to_string();
    c.send("GetJob", &[("name", "parent")]).await;
    let mut children = Vec::new();
    for name in ["child_failed", "child_finished"] {
        let created = c
            .send("CreateJob", &[("name", name), ("parentJobID", &parent)])
            .await;
        children.push(created.body["jobID"].to_string());
    }
    let (failing, finishing) = (&children[0], &children[1]);
    assert_eq!(
        c.send("FinishJob", &[("jobID", &parent)]).await.status,
        "200 OK"
    );
    assert_eq!(state(&mut c, &parent).await, "PAUSED");

    // The failure leaves the parent PAUSED; the sibling that finishes last queues it.
    c.send("GetJob", &[("name", "child_failed")]).await;
    let failed = c.send("FailJob", &[("jobID", failing)]).await;
    assert_eq!(failed.status, "200 OK");
    assert_eq!(state(&mut c, failing).await, "FAILED");
    assert_eq!(state(&mut c, &parent).await, "PAUSED");
    c.send("GetJob", &[("name", "child_finished")]).await;
    let finished = c.send("FinishJob", &[("jobID", finishing)]).await;
    assert_eq!(finished.status, "200 OK");
    assert_eq!(state(&mut c, &parent).await, "QUEUED");

    let got = c.send("GetJob", &[("name", "parent")]).await;
    assert_eq!(got.body["jobID"].to_string(), parent, "{}", got.text);
    assert_eq!(
        got.body["finishedChildJobs"],
        json!([{"data": {}, "jobID": finishing.parse::<i64>().unwrap()}])
    );
    assert_eq!(got.body["cancelledChildJobs"], json!([]), "{}", got.text);
    let refused = c.send("FinishJob", &[("jobID", &parent)]).await;
    assert_eq!(
        refused.status,
        "405 Failed to delete a job with outstanding children"
    );
    assert_eq!(state(&mut c, finishing).await, "FINISHED");

    // Cancelling the failed child queues the parent again, as Bedrock's CancelJob does: the worker that had it is
    // refused, and its next hand-out lists both children.
    let cancelled = c.send("CancelJob", &[("jobID", failing)]).await;
    assert_eq!(cancelled.status, "200 OK");
    assert_eq!(state(&mut c, &parent).await, "QUEUED");
    assert_eq!(
        c.send("FinishJob", &[("jobID", &parent)]).await.status,
        "405 Can only retry/finish RUNNING and RUNQUEUED jobs"
    );
    let got = c.send("GetJob", &[("name", "parent")]).await;
    assert_eq!(got.body["jobID"].to_string(), parent, "{}", got.text);
    assert_eq!(
        got.body["cancelledChildJobs"],
        json!([{"data": {}, "jobID": failing.parse::<i64>().unwrap()}])
    );
    let finished = c.send("FinishJob", &[("jobID", &parent)]).await;
    assert_eq!(finished.status, "200 OK", "{}", finished.text);
    all_gone(&mut c, children.iter().chain([&parent])).await;
    bedrock.stop().await;
}
