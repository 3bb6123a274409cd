//! `cairn serve` with TLS: its flags, the line it prints, HTTPS and the Bedrock protocol's TLS port to a real TLS
//! client and to the CLI's client commands (`--ca-file`), and a certificate replaced on disk served after SIGHUP,
//! without a restart. (What the listeners do with
//! TLS is tested beside them, in the server crate's `tls.rs`.)

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use std::time::Duration;

use super::certs::Ca;
use super::harness::{TestServer, eventually, signal};
use super::tls_client::{connector, exchange};

/// Long enough for anything that should happen; only a failing test waits this long.
const PATIENCE: Duration = Duration::from_secs(20);

const HEALTH: &str = "GET /v1/health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_takes_its_certificate_from_flags_and_reloads_it_on_sighup() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new("Cairn test CA");
    let issue = || {
        let (cert, key) = ca.sign("localhost", &["localhost", "127.0.0.1"]);
        std::fs::write(dir.path().join("server.crt"), &cert).unwrap();
        std::fs::write(dir.path().join("server.key"), key).unwrap();
        CertificateDer::from_pem_slice(cert.as_bytes()).unwrap()
    };
    let first = issue();
    let cert = dir.path().join("server.crt");
    let key = dir.path().join("server.key");
    let server = TestServer::spawn_with(&[
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
        "--bedrock-tls",
        "127.0.0.1:0",
    ]);
    let banner = server.banner().to_owned();
    assert!(server.url().starts_with("https://"), "{banner}");
    let http = server.url().trim_start_matches("https://").parse().unwrap();
    let bedrock_tls = banner
        .split("over TLS ")
        .nth(1)
        .and_then(|rest| rest.split(';').next())
        .unwrap_or_else(|| panic!("no Bedrock TLS address in {banner:?}"))
        .parse()
        .unwrap();

    let client = connector(&ca.pem, None);
    let (answer, served) = exchange(&client, http, HEALTH).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(served, first);
    let (answer, _) = exchange(&client, bedrock_tls, "Ping\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    assert!(answer.starts_with("200"), "{answer}");

    let renewed = issue();
    signal(server.pid(), libc::SIGHUP);
    eventually(PATIENCE, "the renewed certificate is served", || async {
        let (_, served) = exchange(&client, http, HEALTH).await.unwrap();
        served == renewed
    })
    .await;
    // The CLI's client commands, trusting the CA (the server's URL is https://127.0.0.1:…).
    let ca_file = dir.path().join("ca.crt");
    std::fs::write(&ca_file, &ca.pem).unwrap();
    let out = server.cairn(
        &["push", "over.https", "--ca-file", ca_file.to_str().unwrap()],
        None,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = server.cairn(&["queues"], None);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("certificate"),
        "{stderr}"
    );
    // Still the same process: SIGHUP reloads, it does not stop the server.
    let (answer, _) = exchange(&client, bedrock_tls, "Ping\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    assert!(answer.starts_with("200"), "{answer}");
}
