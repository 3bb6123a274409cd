//! The Bedrock text protocol as `cairn serve` serves it: the sample session of the Bedrock::Jobs documentation,
//! typed the way `nc` sends it, and jobs crossing between the protocol and the HTTP API.

use cairn::Jobs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use cairn::{JobId, JobState, Push};
use serde_json::{Value, json};

use super::harness::TestServer;

/// A connection as `nc` makes one: bare `\n` line ends, no `Content-Length` on requests.
struct Nc {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Nc {
    fn connect(server: &TestServer) -> Nc {
        let stream = TcpStream::connect(server.bedrock()).expect("the Bedrock protocol listens");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        Nc {
            reader: BufReader::new(stream.try_clone().unwrap()),
            writer: stream,
        }
    }

    /// Sends the lines of a request (the verb first) and reads the reply: its status line and body (JSON, or the
    /// text as a string when it is not JSON).
    fn send(&mut self, lines: &[&str]) -> (String, Value) {
        let request = format!("{}\n\n", lines.join("\n"));
        self.writer.write_all(request.as_bytes()).unwrap();
        let mut status = String::new();
        self.reader.read_line(&mut status).unwrap();
        let mut length = 0;
        loop {
            let mut line = String::new();
            self.reader.read_line(&mut line).unwrap();
            assert!(
                line.ends_with("\r\n"),
                "replies end their lines in CRLF: {line:?}"
            );
            if line == "\r\n" {
                break;
            }
            if let Some(value) = line.strip_prefix("Content-Length: ") {
                length = value.trim().parse().unwrap();
            }
        }
        let mut body = vec![0; length];
        self.reader.read_exact(&mut body).unwrap();
        let body = if body.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&body)
                .unwrap_or_else(|_| Value::String(String::from_utf8(body).unwrap()))
        };
        (status.trim_end().to_owned(), body)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_sample_session_works_as_typed_into_nc() {
    let server = TestServer::spawn();
    let mut nc = Nc::connect(&server);
    let (status, created) = nc.send(&[
        "CreateJob",
        "name: CheckLiveness",
        r#"data: {"url":""}"#,
        "repeat: finished, +1 minute",
    ]);
    assert_eq!(status, "200 OK");
    let id = created["jobID"].as_i64().unwrap();

    let (status, job) = nc.send(&["GetJob", "name: CheckLiveness"]);
    assert_eq!(status, "200 OK");
    assert_eq!(
        (job["jobID"].as_i64(), &job["data"]),
        (Some(id), &json!({"url": ""}))
    );

    let job_id = format!("jobID: {id}");
    let (status, _) = nc.send(&[
        "UpdateJob",
        &job_id,
        r#"data: {"url":"","status":"CHECKING"}"#,
    ]);
    assert_eq!(status, "200 OK");
    let (_, queried) = nc.send(&["QueryJob", &job_id]);
    assert_eq!(queried["state"], "RUNNING");
    // The data as written, keys in the order sent.
    assert_eq!(
        queried["data"].to_string(),
        r#"{"url":"","status":"CHECKING"}"#
    );
    assert_eq!(queried["repeat"], "FINISHED, +1 MINUTE");

    let (status, _) = nc.send(&["FinishJob", &job_id, r#"data: {"url":"","failCount":1}"#]);
    assert_eq!(status, "200 OK");
    assert_eq!(nc.send(&["GetJob", "name: *"]).0, "404 No job found");
    let (_, queried) = nc.send(&["QueryJob", &job_id]);
    assert_eq!(queried["state"], "QUEUED");
    assert_eq!(queried["data"], json!({"url": "", "failCount": 1}));

    // "But as we can see, the job is there, queued for the future."
    let (status, table) = nc.send(&["Query: SELECT * FROM jobs;"]);
    assert_eq!(status, "200 OK");
    let lines: Vec<&str> = table.as_str().unwrap().lines().collect();
    assert_eq!(
        lines[0],
        "created | jobID | state | name | nextRun | lastRun | repeat | data | priority | parentJobID | retryAfter"
    );
    assert!(
        lines[1].starts_with(&format!(
            "{} | {id} | QUEUED | CheckLiveness | ",
            &queried["created"].as_str().unwrap()
        )),
        "{lines:?}"
    );
    assert!(
        lines[1].ends_with(r#" | FINISHED, +1 MINUTE | {"url":"","failCount":1} | 500 | 0 | "#),
        "{lines:?}"
    );

    // The same job, seen through the HTTP API: waiting for its next run, with the data it finished with.
    let job = server.client().get(JobId(id)).await.unwrap();
    assert_eq!(job.state, JobState::Scheduled);
    assert_eq!(job.data, json!({"url": "", "failCount": 1}));
    assert_eq!(job.history[0].worker.as_str(), "bedrock");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_pushed_over_http_is_worked_through_the_bedrock_protocol() {
    let server = TestServer::spawn();
    let client = server.client();
    let id = client
        .enqueue(
            Push::new("email.send")
                .data(json!({"to": "ada@example.com"}))
                .priority(250),
        )
        .await
        .unwrap()
        .id;
    let mut nc = Nc::connect(&server);
    let (status, body) = nc.send(&["GetJobs", "name: email.*", "numResults: 3"]);
    assert_eq!(status, "200 OK");
    let job = &body["jobs"][0];
    assert_eq!(job["jobID"], id.0);
    // Cairn's priority 250 is Bedrock's 750: Bedrock's default (500) is Cairn's 0.
    assert_eq!(job["priority"], 750);
    assert_eq!(nc.send(&["FinishJob", &format!("jobID: {id}")]).0, "200 OK");
    assert_eq!(client.get(id).await.unwrap().state, JobState::Completed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bedrock_worker_finishes_its_job_after_the_server_restarts() {
    let mut server = TestServer::spawn();
    let mut nc = Nc::connect(&server);
    let (_, created) = nc.send(&["CreateJob", "name: long.task"]);
    let id = created["jobID"].as_i64().unwrap();
    assert_eq!(nc.send(&["GetJob", "name: long.task"]).0, "200 OK");
    drop(nc);
    let mut server = tokio::task::spawn_blocking(move || {
        server.kill();
        server.start();
        server
    })
    .await
    .unwrap();
    // The server kept the job's lease across the restart, so the worker that has it can still finish it.
    let mut nc = Nc::connect(&server);
    let job_id = format!("jobID: {id}");
    assert_eq!(nc.send(&["QueryJob", &job_id]).1["state"], "RUNNING");
    assert_eq!(nc.send(&["FinishJob", &job_id]).0, "200 OK");
    assert_eq!(
        nc.send(&["QueryJob", &job_id]).0,
        "404 No job with this jobID"
    );
    tokio::task::spawn_blocking(move || assert_eq!(server.terminate(), Some(0)))
        .await
        .unwrap();
}
