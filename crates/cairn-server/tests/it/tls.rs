//! TLS on the server's ports, through the wire with a real TLS client (rustls): HTTPS, mutual TLS, the Bedrock
//! protocol over TLS, a certificate replaced on disk and served to the next connection, and a handshake that
//! stalls. The certificates come from a CA the test makes.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use cairn::Queue;
use cairn_server::bedrock::{BedrockCommands, BedrockConfig};
use cairn_server::tls::{Tls, TlsFiles};
use cairn_server::{Server, ServerConfig};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use crate::certs::Ca;
use crate::poll::eventually;
use crate::tls_client::{connector, exchange};

/// Long enough for anything that should happen; only a failing test waits this long.
const PATIENCE: Duration = Duration::from_secs(20);

/// The server's files, in a directory of their own.
struct Files {
    dir: tempfile::TempDir,
    ca: Ca,
}

impl Files {
    fn new(client_ca: bool) -> (Files, TlsFiles) {
        let files = Files {
            dir: tempfile::tempdir().unwrap(),
            ca: Ca::new("Cairn test CA"),
        };
        files.issue("localhost");
        let client_ca = client_ca.then(|| files.path("ca.crt"));
        let tls = TlsFiles {
            cert: files.path("server.crt"),
            key: files.path("server.key"),
            client_ca,
        };
        (files, tls)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A new server certificate for `name`, written over the old one (the key too); returns the certificate.
    fn issue(&self, name: &str) -> CertificateDer<'static> {
        let (cert, key) = self.ca.sign(name, &[name]);
        std::fs::write(self.path("ca.crt"), &self.ca.pem).unwrap();
        std::fs::write(self.path("server.crt"), &cert).unwrap();
        std::fs::write(self.path("server.key"), &key).unwrap();
        CertificateDer::from_pem_slice(cert.as_bytes()).unwrap()
    }

    /// A client certificate this CA signed: (certificate, key) files.
    fn client(&self, ca: &Ca) -> (PathBuf, PathBuf) {
        let (cert, key) = ca.sign("worker", &[]);
        let (cert_path, key_path) = (self.path("client.crt"), self.path("client.key"));
        std::fs::write(&cert_path, cert).unwrap();
        std::fs::write(&key_path, key).unwrap();
        (cert_path, key_path)
    }
}

const HEALTH: &str = "GET /v1/health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";

async fn https_server(tls: Arc<Tls>) -> (tempfile::TempDir, Queue, Server) {
    let dir = tempfile::tempdir().unwrap();
    let queue = Queue::open(dir.path().join("cairn.db")).await.unwrap();
    let config = ServerConfig {
        tls: Some(tls),
        request_timeout: Duration::from_secs(1),
        ..ServerConfig::default()
    };
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = Server::start(queue.clone(), listener, config).unwrap();
    (dir, queue, server)
}

#[tokio::test]
async fn https_serves_the_api_and_a_certificate_replaced_on_disk_reaches_the_next_connection() {
    let (files, tls_files) = Files::new(false);
    let tls = Tls::load(tls_files).unwrap();
    let stop = CancellationToken::new();
    tls.watch(stop.clone());
    let (_dir, queue, server) = https_server(tls.clone()).await;
    let addr = server.local_addr();
    let client = connector(&files.ca.pem, None);

    let (answer, first) = exchange(&client, addr, HEALTH).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    // Plain HTTP on the HTTPS port gets no answer a client could take for one.
    let mut plain = TcpStream::connect(addr).await.unwrap();
    plain.write_all(HEALTH.as_bytes()).await.unwrap();
    let mut bytes = Vec::new();
    let _ = tokio::time::timeout(PATIENCE, plain.read_to_end(&mut bytes)).await;
    assert!(
        !String::from_utf8_lossy(&bytes).contains("200"),
        "plain HTTP answered"
    );

    // Renewed in place: the next connection gets the new certificate, without a restart.
    let renewed = files.issue("localhost");
    assert_ne!(renewed, first);
    eventually(PATIENCE, "the renewed certificate is served", || async {
        let (_, served) = exchange(&client, addr, HEALTH).await.unwrap();
        served == renewed
    })
    .await;
    // A certificate whose key does not match (a renewal half written) leaves the last good one in use.
    std::fs::write(files.path("server.key"), Ca::new("x").sign("y", &["y"]).1).unwrap();
    let e = tls.reload().expect_err("a key of another certificate");
    assert!(e.contains("--tls-key"), "{e}");
    let (answer, served) = exchange(&client, addr, HEALTH).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(served, renewed, "the last good certificate stays");

    // A client that connects and never finishes its handshake is cut off at the request timeout (1 s here).
    let mut stalled = TcpStream::connect(addr).await.unwrap();
    let mut byte = [0u8; 1];
    let read = tokio::time::timeout(PATIENCE, stalled.read(&mut byte)).await;
    assert!(
        matches!(read, Ok(Ok(0)) | Ok(Err(_))),
        "the stalled handshake is closed"
    );

    stop.cancel();
    server.shutdown().await.unwrap();
    queue.close(Duration::from_secs(5)).await.unwrap();
}

#[tokio::test]
async fn with_a_client_ca_only_clients_with_its_certificates_are_served() {
    let (files, tls_files) = Files::new(true);
    let (_dir, queue, server) = https_server(Tls::load(tls_files).unwrap()).await;
    let addr = server.local_addr();

    let anonymous = connector(&files.ca.pem, None);
    // TLS 1.3 tells the client of the refusal after its side of the handshake: on the first read.
    let refused = exchange(&anonymous, addr, HEALTH).await;
    assert!(
        refused.is_err(),
        "a client without a certificate is refused: {refused:?}"
    );

    let stranger = Ca::new("Someone else's CA");
    let (cert, key) = files.client(&stranger);
    let refused = exchange(&connector(&files.ca.pem, Some((&cert, &key))), addr, HEALTH).await;
    assert!(
        refused.is_err(),
        "a certificate of another CA is refused: {refused:?}"
    );

    let (cert, key) = files.client(&files.ca);
    let (answer, _) = exchange(&connector(&files.ca.pem, Some((&cert, &key))), addr, HEALTH)
        .await
        .unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");

    server.shutdown().await.unwrap();
    queue.close(Duration::from_secs(5)).await.unwrap();
}

#[tokio::test]
async fn the_bedrock_protocol_speaks_tls_on_a_port_of_its_own() {
    let (files, tls_files) = Files::new(false);
    let tls = Tls::load(tls_files).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let queue = Queue::open(dir.path().join("cairn.db")).await.unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = CancellationToken::new();
    let task = tokio::spawn(cairn_server::bedrock::serve(
        listener,
        Arc::new(BedrockCommands::new(queue.clone())),
        BedrockConfig::default(),
        cairn_server::ConnectionBudget::new(16),
        stop.clone(),
        Some(tls),
    ));
    let client = connector(&files.ca.pem, None);
    let (answer, _) = exchange(
        &client,
        addr,
        "CreateJob\r\nname: tls.check\r\nConnection: close\r\n\r\n",
    )
    .await
    .unwrap();
    assert!(answer.starts_with("200"), "{answer}");
    assert!(answer.contains("jobID"), "{answer}");
    stop.cancel();
    tokio::time::timeout(PATIENCE, task)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    queue.close(Duration::from_secs(5)).await.unwrap();
}

#[test]
fn files_that_do_not_load_are_refused_naming_the_flag() {
    let (files, mut tls_files) = Files::new(false);
    std::fs::write(files.path("server.key"), "not a key").unwrap();
    let e = Tls::load(tls_files.clone()).err().expect("refused");
    assert!(e.starts_with("--tls-key"), "{e}");
    tls_files.cert = files.path("missing.crt");
    let e = Tls::load(tls_files.clone()).err().expect("refused");
    assert!(
        e.starts_with("--tls-cert") && e.contains("missing.crt"),
        "{e}"
    );
}

#[tokio::test]
async fn the_rust_client_speaks_https_with_a_ca_file_and_a_client_certificate() {
    use cairn::{Jobs, Push};
    use cairn_client::{Client, ClientTls};

    let (files, tls_files) = Files::new(true);
    let (_dir, queue, server) = https_server(Tls::load(tls_files).unwrap()).await;
    let url = format!("https://localhost:{}", server.local_addr().port());
    let (cert, key) = files.client(&files.ca);

    let trusted = ClientTls::default().ca_file(files.path("ca.crt"));
    let client = Client::new(&url)
        .unwrap()
        .with_tls(&trusted.clone().client_cert(&cert, &key))
        .unwrap();
    let id = client.enqueue(Push::new("over.https")).await.unwrap().id;
    assert_eq!(client.get(id).await.unwrap().name.as_str(), "over.https");

    // Without its certificate, or trusting only the machine's roots, the client is refused and says so.
    let anonymous = Client::new(&url).unwrap().with_tls(&trusted).unwrap();
    let e = anonymous
        .get(id)
        .await
        .expect_err("refused without a certificate");
    assert_eq!(e.kind(), cairn::ErrorKind::Unavailable, "{e}");
    let system = Client::new(&url).unwrap();
    let e = system
        .get(id)
        .await
        .expect_err("the test CA is not a system root");
    assert!(e.to_string().contains("certificate"), "{e}");

    let e = Client::new(&url)
        .unwrap()
        .with_tls(&ClientTls::default().ca_file(files.path("missing.crt")))
        .expect_err("a CA file that is not there");
    assert!(e.to_string().starts_with("ca_file:"), "{e}");

    server.shutdown().await.unwrap();
    queue.close(Duration::from_secs(5)).await.unwrap();
}
