//! The OpenAPI document against what the server really sends: every response checked against its schema.

use serde_json::{Value, json};

use super::{TestServer, post, raw};

/// Checks `value` against the schema `name` in the document: every field it has is declared, and every required
/// field is there, recursing into references and arrays.
fn check_schema(doc: &Value, schema: &Value, value: &Value, at: &str) {
    if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
        let name = reference.trim_start_matches("#/components/schemas/");
        let target = &doc["components"]["schemas"][name];
        assert!(
            !target.is_null(),
            "{at}: {reference} is not in the document"
        );
        return check_schema(doc, target, value, at);
    }
    for key in ["oneOf", "anyOf"] {
        if let Some(options) = schema.get(key).and_then(Value::as_array) {
            // Nullable references: null matches the null branch, anything else the other one.
            let branch = options
                .iter()
                .find(|o| (o["type"] == "null") == value.is_null())
                .unwrap_or_else(|| panic!("{at}: no {key} branch for {value}"));
            return check_schema(doc, branch, value, at);
        }
    }
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        let object = value
            .as_object()
            .unwrap_or_else(|| panic!("{at}: expected an object, got {value}"));
        for (field, field_value) in object {
            let declared = properties
                .get(field)
                .unwrap_or_else(|| panic!("{at}.{field} is sent but not in the document"));
            check_schema(doc, declared, field_value, &format!("{at}.{field}"));
        }
        for required in schema["required"].as_array().into_iter().flatten() {
            let required = required.as_str().unwrap();
            assert!(
                object.contains_key(required),
                "{at}.{required} is required but not sent"
            );
        }
    }
    if let (Some(items), Some(array)) = (schema.get("items"), value.as_array()) {
        for (i, item) in array.iter().enumerate() {
            check_schema(doc, items, item, &format!("{at}[{i}]"));
        }
    }
}

/// The schema of the response to `method path` with `status`, from the document.
fn response_schema<'a>(doc: &'a Value, method: &str, path: &str, status: u16) -> &'a Value {
    let operation = &doc["paths"][path][method];
    assert!(
        !operation.is_null(),
        "{method} {path} is not in the document"
    );
    let schema =
        &operation["responses"][status.to_string()]["content"]["application/json"]["schema"];
    assert!(
        !schema.is_null(),
        "{method} {path} does not document status {status}"
    );
    schema
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openapi_document_describes_what_the_server_really_sends() {
    let server = TestServer::spawn().await;
    let url = server.url().to_owned();
    let (status, doc) = raw(
        reqwest::Method::GET,
        format!("{url}/v1/openapi.json"),
        None,
        None,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        doc,
        serde_json::to_value(cairn_server::openapi_document()).unwrap()
    );
    let paths: Vec<&String> = doc["paths"].as_object().unwrap().keys().collect();
    assert_eq!(
        paths,
        [
            "/metrics",
            "/v1/activity",
            "/v1/batches",
            "/v1/batches/{id}",
            "/v1/batches/{id}/close",
            "/v1/batches/{id}/jobs",
            "/v1/config",
            "/v1/config/{key}",
            "/v1/dequeue",
            "/v1/events",
            "/v1/failures",
            "/v1/failures/{group}/unfail",
            "/v1/finish",
            "/v1/health",
            "/v1/jobs",
            "/v1/jobs/batch",
            "/v1/jobs/bulk",
            "/v1/jobs/{id}",
            "/v1/jobs/{id}/cancel",
            "/v1/jobs/{id}/checkpoint",
            "/v1/jobs/{id}/data",
            "/v1/jobs/{id}/dependencies",
            "/v1/jobs/{id}/fail",
            "/v1/jobs/{id}/finish",
            "/v1/jobs/{id}/heartbeat",
            "/v1/jobs/{id}/join",
            "/v1/jobs/{id}/move",
            "/v1/jobs/{id}/priority",
            "/v1/jobs/{id}/release",
            "/v1/jobs/{id}/requeue",
            "/v1/jobs/{id}/reschedule",
            "/v1/jobs/{id}/retry",
            "/v1/jobs/{id}/sleep",
            "/v1/jobs/{id}/spawn",
            "/v1/jobs/{id}/steps",
            "/v1/jobs/{id}/tags",
            "/v1/jobs/{id}/track",
            "/v1/jobs/{id}/untrack",
            "/v1/jobs/{id}/update",
            "/v1/jobs/{id}/wait_for_signal",
            "/v1/queues",
            "/v1/queues/{queue}/aging",
            "/v1/queues/{queue}/concurrency",
            "/v1/queues/{queue}/key-concurrency",
            "/v1/queues/{queue}/key-weight",
            "/v1/queues/{queue}/pause",
            "/v1/queues/{queue}/peek",
            "/v1/queues/{queue}/rate",
            "/v1/queues/{queue}/resume",
            "/v1/recurring",
            "/v1/recurring/{key}",
            "/v1/recurring/{key}/pause",
            "/v1/recurring/{key}/resume",
            "/v1/recurring/{key}/run",
            "/v1/signals",
            "/v1/sql",
            "/v1/stats",
            "/v1/stats/workers",
            "/v1/token",
            "/v1/workers",
            "/v1/workers/{worker}/stop",
        ]
    );

    // Real answers, checked against the schemas the document gives for them.
    let (status, body) = post(
        &server,
        "/v1/batches",
        r#"{"jobs":[{"name":"part"}],"on_complete":{"name":"done","data":{"to":"ops"}},"description":"d"}"#,
    )
    .await;
    check_schema(
        &doc,
        response_schema(&doc, "post", "/v1/batches", status),
        &body,
        "create_batch",
    );
    let batch = body["id"].as_i64().unwrap();
    let (status, body) = raw(
        reqwest::Method::GET,
        format!("{url}/v1/batches/{batch}"),
        None,
        None,
    )
    .await;
    check_schema(
        &doc,
        response_schema(&doc, "get", "/v1/batches/{id}", status),
        &body,
        "get_batch",
    );
    let (status, body) = raw(
        reqwest::Method::GET,
        format!("{url}/v1/batches?state=running"),
        None,
        None,
    )
    .await;
    check_schema(
        &doc,
        response_schema(&doc, "get", "/v1/batches", status),
        &body,
        "list_batches",
    );
    let full = r#"{"name":"x","queue":"q","data":{"a":1},"priority":2,"weight":1,"delay_ms":0,
        "retry":{"max_attempts":3,"initial_delay_ms":10,"multiplier":2.0,"max_delay_ms":100,"jitter":0.0},
        "lease_timeout_ms":30000,"unique_key":"u","tags":["t"]}"#;
    let (status, body) = post(&server, "/v1/jobs", full).await;
    check_schema(
        &doc,
        response_schema(&doc, "post", "/v1/jobs", status),
        &body,
        "enqueue",
    );
    let id = body["id"].as_i64().unwrap();
    let (status, body) = post(&server, "/v1/dequeue", r#"{"worker":"w","queues":["q"]}"#).await;
    check_schema(
        &doc,
        response_schema(&doc, "post", "/v1/dequeue", status),
        &body,
        "dequeue",
    );
    let token = body["jobs"][0]["lease"]["token"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, body) = post(
        &server,
        &format!("/v1/jobs/{id}/heartbeat"),
        &format!(r#"{{"token":"{token}"}}"#),
    )
    .await;
    check_schema(
        &doc,
        response_schema(&doc, "post", "/v1/jobs/{id}/heartbeat", status),
        &body,
        "heartbeat",
    );
    let (status, body) = post(
        &server,
        &format!("/v1/jobs/{id}/retry"),
        &format!(r#"{{"token":"{token}","error":"e","usage":{{"run_ms":5,"cpu_ms":1,"peak_memory":1024}}}}"#),
    )
    .await;
    check_schema(
        &doc,
        response_schema(&doc, "post", "/v1/jobs/{id}/retry", status),
        &body,
        "retry",
    );
    let (status, body) = raw(
        reqwest::Method::GET,
        format!("{url}/v1/jobs/{id}"),
        None,
        None,
    )
    .await;
    check_schema(
        &doc,
        response_schema(&doc, "get", "/v1/jobs/{id}", status),
        &body,
        "get",
    );
    assert_eq!(body["history"][0]["usage"]["peak_memory"], 1024);
    let (status, body) = raw(
        reqwest::Method::GET,
        format!("{url}/v1/jobs?limit=5"),
        None,
        None,
    )
    .await;
    check_schema(
        &doc,
        response_schema(&doc, "get", "/v1/jobs", status),
        &body,
        "list",
    );
    let (_, body) = post(
        &server,
        "/v1/jobs",
        &format!(r#"{{"name":"after","depends_on":[{id}]}}"#),
    )
    .await;
    let after = body["id"].as_i64().unwrap();
    assert_eq!(body["state"], "waiting");
    let (status, body) = raw(
        reqwest::Method::GET,
        format!("{url}/v1/jobs/{after}"),
        None,
        None,
    )
    .await;
    check_schema(
        &doc,
        response_schema(&doc, "get", "/v1/jobs/{id}", status),
        &body,
        "get waiting",
    );
    assert_eq!(body["depends_on"], serde_json::json!([id]));
    let (status, body) = post(
        &server,
        &format!("/v1/jobs/{after}/dependencies"),
        &format!(r#"{{"remove":[{id}]}}"#),
    )
    .await;
    check_schema(
        &doc,
        response_schema(&doc, "post", "/v1/jobs/{id}/dependencies", status),
        &body,
        "dependencies",
    );
    assert_eq!(body["state"], "queued");
    let (status, body) = post(
        &server,
        &format!("/v1/jobs/{after}/dependencies"),
        &format!(r#"{{"add":[{after}]}}"#),
    )
    .await;
    check_schema(
        &doc,
        response_schema(&doc, "post", "/v1/jobs/{id}/dependencies", status),
        &body,
        "dependencies error",
    );
    assert_eq!(body["error"]["field"], "depends_on");
    let (status, body) = post(&server, "/v1/jobs", r#"{"name":""}"#).await;
    check_schema(
        &doc,
        response_schema(&doc, "post", "/v1/jobs", status),
        &body,
        "error",
    );
    let (status, body) = raw(reqwest::Method::GET, format!("{url}/v1/health"), None, None).await;
    check_schema(
        &doc,
        response_schema(&doc, "get", "/v1/health", status),
        &body,
        "health",
    );
    let (status, body) = raw(
        reqwest::Method::PUT,
        format!("{url}/v1/recurring/r"),
        None,
        Some(r#"{"cron":"0 * * * *","job":{"name":"x"}}"#),
    )
    .await;
    check_schema(
        &doc,
        response_schema(&doc, "put", "/v1/recurring/{key}", status),
        &body,
        "set recurring",
    );
    let (status, body) = raw(
        reqwest::Method::GET,
        format!("{url}/v1/recurring"),
        None,
        None,
    )
    .await;
    check_schema(
        &doc,
        response_schema(&doc, "get", "/v1/recurring", status),
        &body,
        "list recurring",
    );
    let (status, body) = post(&server, &format!("/v1/jobs/{id}/requeue"), "{}").await;
    check_schema(
        &doc,
        response_schema(&doc, "post", "/v1/jobs/{id}/requeue", status),
        &body,
        "requeue",
    );

    // Queue control: tags, pause and resume, counts, peek, failure groups and unfail.
    let (status, body) = post(
        &server,
        &format!("/v1/jobs/{id}/tags"),
        r#"{"add":["vip"],"remove":["t"]}"#,
    )
    .await;
    check_schema(
        &doc,
        response_schema(&doc, "post", "/v1/jobs/{id}/tags", status),
        &body,
        "tags",
    );
    assert_eq!(status, 200);
    let (status, body) = post(&server, &format!("/v1/jobs/{id}/tags"), r#"{"add":[""]}"#).await;
    check_schema(
        &doc,
        response_schema(&doc, "post", "/v1/jobs/{id}/tags", status),
        &body,
        "tags error",
    );
    assert_eq!(body["error"]["field"], "tags");
    for (action, body, expected) in [
        ("concurrency", r#"{"concurrency":3}"#, 200),
        ("concurrency", r#"{"concurrency":0}"#, 400),
        ("concurrency", r#"{"concurrency":null}"#, 200),
        ("rate", r#"{"rate":{"jobs":5,"per_ms":1000}}"#, 200),
        ("rate", r#"{"rate":{"jobs":5,"per_ms":0}}"#, 400),
        ("rate", r#"{"rate":null}"#, 200),
    ] {
        let path = format!("/v1/queues/{{queue}}/{action}");
        let (status, answer) = post(&server, &format!("/v1/queues/q/{action}"), body).await;
        check_schema(
            &doc,
            response_schema(&doc, "post", &path, status),
            &answer,
            action,
        );
        assert_eq!(status, expected, "{action} {body}: {answer}");
        if status == 400 {
            let field = if action == "rate" {
                "rate.per_ms"
            } else {
                "concurrency"
            };
            assert_eq!(answer["error"]["field"], field);
        }
    }
    for action in ["pause", "resume"] {
        let path = format!("/v1/queues/{{queue}}/{action}");
        let (status, body) = post(&server, &format!("/v1/queues/q/{action}"), "").await;
        check_schema(
            &doc,
            response_schema(&doc, "post", &path, status),
            &body,
            action,
        );
        assert_eq!(status, 200);
    }
    let (status, body) = raw(
        reqwest::Method::GET,
        format!("{url}/v1/queues/q/peek?limit=2"),
        None,
        None,
    )
    .await;
    check_schema(
        &doc,
        response_schema(&doc, "get", "/v1/queues/{queue}/peek", status),
        &body,
        "peek",
    );
    assert_eq!(body["jobs"][0]["id"], id);
    let (status, body) = raw(
        reqwest::Method::GET,
        format!("{url}/v1/queues/q/peek?limit=0"),
        None,
        None,
    )
    .await;
    check_schema(
        &doc,
        response_schema(&doc, "get", "/v1/queues/{queue}/peek", status),
        &body,
        "peek error",
    );
    assert_eq!(body["error"]["field"], "limit");
    let (_, body) = post(&server, "/v1/dequeue", r#"{"worker":"w","queues":["q"]}"#).await;
    let token = body["jobs"][0]["lease"]["token"].as_str().unwrap();
    let (status, _) = post(
        &server,
        &format!("/v1/jobs/{id}/fail"),
        &format!(r#"{{"token":"{token}","group":"bad-input","message":"no"}}"#),
    )
    .await;
    assert_eq!(status, 200);
    let (status, body) = post(&server, "/v1/queues/q/aging", r#"{"every_ms":60000}"#).await;
    check_schema(
        &doc,
        response_schema(&doc, "post", "/v1/queues/{queue}/aging", status),
        &body,
        "aging",
    );
    let (status, body) = raw(
        reqwest::Method::PUT,
        format!("{url}/v1/config/retention.max_age"),
        None,
        Some(r#"{"value":null}"#),
    )
    .await;
    check_schema(
        &doc,
        response_schema(&doc, "put", "/v1/config/{key}", status),
        &body,
        "config set",
    );
    for path in ["/v1/stats", "/v1/stats/workers", "/v1/activity"] {
        let (status, body) = raw(reqwest::Method::GET, format!("{url}{path}"), None, None).await;
        check_schema(
            &doc,
            response_schema(&doc, "get", path, status),
            &body,
            path,
        );
    }
    let (status, body) = raw(reqwest::Method::GET, format!("{url}/v1/config"), None, None).await;
    check_schema(
        &doc,
        response_schema(&doc, "get", "/v1/config", status),
        &body,
        "config",
    );
    assert_eq!(body["config"][6]["value"], Value::Null);
    let (status, body) = raw(reqwest::Method::GET, format!("{url}/v1/queues"), None, None).await;
    check_schema(
        &doc,
        response_schema(&doc, "get", "/v1/queues", status),
        &body,
        "queues",
    );
    assert_eq!(body["queues"][1]["queue"], "q");
    assert_eq!(body["queues"][1]["failed"], 1);
    assert_eq!(body["queues"][1]["priority_aging_ms"], 60000);
    let (status, body) = raw(
        reqwest::Method::GET,
        format!("{url}/v1/failures"),
        None,
        None,
    )
    .await;
    check_schema(
        &doc,
        response_schema(&doc, "get", "/v1/failures", status),
        &body,
        "failures",
    );
    assert_eq!(body["groups"][0]["group"], "bad-input");
    let (status, body) = raw(
        reqwest::Method::GET,
        format!("{url}/v1/jobs?failure_group=bad-input"),
        None,
        None,
    )
    .await;
    check_schema(
        &doc,
        response_schema(&doc, "get", "/v1/jobs", status),
        &body,
        "list failure group",
    );
    assert_eq!(body["jobs"][0]["id"], id);
    let (status, body) = post(&server, "/v1/failures/bad-input/unfail", "{}").await;
    check_schema(
        &doc,
        response_schema(&doc, "post", "/v1/failures/{group}/unfail", status),
        &body,
        "unfail",
    );
    assert_eq!(body, json!({"moved": 1}));
    let (status, body) = post(&server, "/v1/failures/bad-input/unfail", r#"{"limit":0}"#).await;
    check_schema(
        &doc,
        response_schema(&doc, "post", "/v1/failures/{group}/unfail", status),
        &body,
        "unfail error",
    );
    assert_eq!(body["error"]["field"], "limit");

    // Tracking, the workers, and a finish that moves the job on to its next queue.
    for action in ["track", "untrack", "track"] {
        let path = format!("/v1/jobs/{{id}}/{action}");
        let (status, body) = post(&server, &format!("/v1/jobs/{id}/{action}"), "").await;
        check_schema(
            &doc,
            response_schema(&doc, "post", &path, status),
            &body,
            action,
        );
        assert_eq!(status, 200);
    }
    let (status, body) = post(&server, "/v1/jobs/424242/track", "").await;
    check_schema(
        &doc,
        response_schema(&doc, "post", "/v1/jobs/{id}/track", status),
        &body,
        "track error",
    );
    assert_eq!(status, 404);
    let (status, body) = raw(
        reqwest::Method::GET,
        format!("{url}/v1/jobs?tracked=true"),
        None,
        None,
    )
    .await;
    check_schema(
        &doc,
        response_schema(&doc, "get", "/v1/jobs", status),
        &body,
        "list tracked",
    );
    assert_eq!(body["jobs"][0]["id"], id);
    assert_eq!(body["jobs"][0]["tracked"], true);
    let (status, body) = raw(
        reqwest::Method::GET,
        format!("{url}/v1/jobs?tracked=maybe"),
        None,
        None,
    )
    .await;
    check_schema(
        &doc,
        response_schema(&doc, "get", "/v1/jobs", status),
        &body,
        "list tracked error",
    );
    assert_eq!(body["error"]["field"], "tracked");
    let (_, body) = post(&server, "/v1/dequeue", r#"{"worker":"w2","queues":["q"]}"#).await;
    let token = body["jobs"][0]["lease"]["token"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, body) = raw(
        reqwest::Method::GET,
        format!("{url}/v1/workers"),
        None,
        None,
    )
    .await;
    check_schema(
        &doc,
        response_schema(&doc, "get", "/v1/workers", status),
        &body,
        "workers",
    );
    assert_eq!(body["workers"][1]["id"], "w2");
    assert_eq!(body["workers"][1]["jobs"], json!([id]));
    let (status, body) = post(
        &server,
        &format!("/v1/jobs/{id}/finish"),
        &format!(r#"{{"token":"{token}","next":{{"queue":"q2","delay_ms":"soon"}}}}"#),
    )
    .await;
    check_schema(
        &doc,
        response_schema(&doc, "post", "/v1/jobs/{id}/finish", status),
        &body,
        "finish next error",
    );
    assert_eq!(body["error"]["field"], "next.delay_ms");
    let (status, body) = post(
        &server,
        &format!("/v1/jobs/{id}/finish"),
        &format!(
            r#"{{"token":"{token}","next":{{"queue":"q2","delay_ms":60000,"depends_on":[]}}}}"#
        ),
    )
    .await;
    check_schema(
        &doc,
        response_schema(&doc, "post", "/v1/jobs/{id}/finish", status),
        &body,
        "finish next",
    );
    assert_eq!(status, 200);
    let (_, body) = raw(
        reqwest::Method::GET,
        format!("{url}/v1/jobs/{id}"),
        None,
        None,
    )
    .await;
    assert_eq!(
        (&body["queue"], &body["state"]),
        (&json!("q2"), &json!("scheduled"))
    );
    let request = &doc["components"]["schemas"]["FinishRequest"]["properties"]["next"];
    assert!(!request.is_null(), "FinishRequest documents next");
    let next = &doc["components"]["schemas"]["ContinueBody"];
    assert_eq!(next["required"], json!(["queue"]), "{next}");
}
