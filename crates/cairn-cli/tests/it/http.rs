//! The `cairn serve` process around the HTTP API: what it refuses to start with, its shutdown on SIGTERM and its
//! restart, and its two ports under one connection budget. The HTTP API itself is tested next to the server, in
//! `crates/cairn-server/tests/it/http/`.

use cairn::Jobs;
use std::time::Duration;

use cairn::{Dequeue, JobId, JobState, Push};
use serde_json::json;

use super::harness::{TestServer, take, until_waiting};

#[test]
fn without_a_token_the_server_refuses_a_public_address() {
    let dir = tempfile::tempdir().unwrap();
    let output = std::process::Command::new(crate::harness::cairn_binary())
        .args(["serve", "--http", "0.0.0.0:0", "--db"])
        .arg(dir.path().join("cairn.db"))
        .env_remove("CAIRN_TOKEN")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = crate::harness::stderr(&output);
    assert!(
        stderr.contains("refusing to listen on 0.0.0.0:0 without a token"),
        "{stderr}"
    );
    assert!(stderr.contains("--insecure"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_answers_long_polls_and_restart_loses_nothing() {
    let mut server = TestServer::spawn();
    let client = server.client();
    let ids: Vec<JobId> = client
        .enqueue_batch((0..20).map(|n| Push::new("keep").data(json!(n))).collect())
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();
    let waiting = {
        let client = client.clone();
        tokio::spawn(async move {
            client
                .dequeue(Dequeue {
                    queues: vec!["empty".into()],
                    wait: Duration::from_secs(50),
                    ..take("w")
                })
                .await
        })
    };
    until_waiting(&client, &["w"]).await;
    let code = tokio::task::spawn_blocking(move || {
        let code = server.terminate();
        (server, code)
    });
    let answered = tokio::time::timeout(Duration::from_secs(20), waiting)
        .await
        .expect("the long poll was answered at shutdown")
        .unwrap()
        .unwrap();
    assert!(answered.is_empty());
    let (mut server, code) = code.await.unwrap();
    assert_eq!(code, Some(0), "a clean exit on SIGTERM");

    server.start();
    let client = server.client();
    for id in ids {
        assert_eq!(client.get(id).await.unwrap().state, JobState::Queued);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cairn_serve_guards_both_ports_with_one_budget_and_its_timeouts() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;
    let server = TestServer::spawn_with(&["--max-connections", "6", "--request-timeout", "1s"]);
    let http = server.url().trim_start_matches("http://").to_owned();
    // Half a request, then silence: closed within the request timeout.
    let mut half = TcpStream::connect(&http).await.unwrap();
    half.write_all(b"POST /v1/jobs HTTP/1.1\r\nHost: localhost\r\n")
        .await
        .unwrap();
    let mut rest = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), half.read_to_end(&mut rest))
        .await
        .expect("the half request is cut")
        .unwrap();
    // Ten idle connections over both ports against a budget of six: a real client is still answered, on both.
    let mut held = Vec::new();
    for i in 0..10 {
        let addr = if i % 2 == 0 { &http } else { server.bedrock() };
        held.push(TcpStream::connect(addr).await.unwrap());
    }
    let health = tokio::time::timeout(Duration::from_secs(20), server.client().health())
        .await
        .expect("answered in time");
    assert!(health.is_ok(), "{health:?}");
    let mut bedrock = TcpStream::connect(server.bedrock()).await.unwrap();
    bedrock
        .write_all(b"Ping\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), bedrock.read_to_end(&mut answer))
        .await
        .expect("answered in time")
        .unwrap();
    assert!(
        answer.starts_with(b"200"),
        "{:?}",
        String::from_utf8_lossy(&answer)
    );
    // The oldest idle connections made room.
    let mut first = held.remove(0);
    let mut byte = [0u8; 1];
    let read = tokio::time::timeout(Duration::from_secs(20), first.read(&mut byte))
        .await
        .expect("closed to make room");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
}
