//! What Bedrock's own clients (Bedrock-PHP's `Jobs` and its BedrockWorkerManager) rely on: job names that carry
//! parameters, data read back as it was written, mocked jobs, and the DB plugin's `Query:`.

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
    // RetryJob and RequeueJobs rename to such names too.
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
