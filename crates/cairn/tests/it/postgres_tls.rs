//! TLS to PostgreSQL, against a cluster of the test's own that takes TLS connections only (`hostssl`), with a
//! certificate for `localhost` signed by a CA the test makes. Every session Cairn opens goes there: the migrations',
//! the writer's, the readers' and the listener's; a queue that pushes, lists and takes a job has used them all.

use std::path::Path;

use cairn::{Dequeue, ErrorKind, JobFilter, Jobs, Push, Queue};

use super::certs::Ca;

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

/// Opens a queue on `url`, pushes a job, lists it (a reader's session) and takes it (the writer's).
async fn round_trip(url: &str) -> cairn::Result<()> {
    let queue = Queue::open(url).await?;
    let id = queue.enqueue(Push::new("tls.check")).await?.id;
    let listed = queue.list(JobFilter::default()).await?;
    assert!(
        listed.jobs.iter().any(|job| job.id == id),
        "{url}: the job is listed"
    );
    let taken = queue.dequeue(Dequeue::new("tls-worker")).await?;
    assert_eq!(taken.len(), 1, "{url}: the job is taken");
    queue.close(std::time::Duration::from_secs(5)).await?;
    Ok(())
}

async fn refused(url: &str) -> cairn::Error {
    match round_trip(url).await {
        Ok(()) => panic!("{url}: connected, and should not have"),
        Err(e) => e,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cairn_connects_over_tls_as_sslmode_asks_and_checks_the_server_as_it_says() {
    let certs = tempfile::tempdir().unwrap();
    let ca = Ca::new("Cairn test CA");
    let (server_cert, server_key) = ca.sign("localhost", &["localhost"]);
    let (client_cert, client_key) = ca.sign("cairn_cert", &[]);
    let ca_file = write(certs.path(), "ca.crt", &ca.pem);
    write(certs.path(), "server.crt", &server_cert);
    write(certs.path(), "server.key", &server_key);
    let client_cert = write(certs.path(), "client.crt", &client_cert);
    let client_key = write(certs.path(), "client.key", &client_key);
    let other_ca = write(
        certs.path(),
        "other-ca.crt",
        &Ca::new("Someone else's CA").pem,
    );

    let certs_path = certs.path().to_owned();
    let cluster = tokio::task::spawn_blocking(move || {
        cairn::__private::PrivateCluster::start_with_tls(&certs_path)
    })
    .await
    .unwrap();
    let port = cluster.address().port();
    let url = |user: &str, host: &str, params: &str| {
        format!("postgres://{user}@{host}:{port}/{user}?connect_timeout=5&{params}")
    };

    // The certificate names localhost, signed by the CA given.
    let full = format!("sslmode=verify-full&sslrootcert={ca_file}");
    round_trip(&url("cairn", "localhost", &full)).await.unwrap();
    // verify-ca checks the signature, not the name: 127.0.0.1 is not in the certificate.
    let ca_only = format!("sslmode=verify-ca&sslrootcert={ca_file}");
    round_trip(&url("cairn", "127.0.0.1", &ca_only))
        .await
        .unwrap();
    // libpq's default, prefer, and require: encrypted, the certificate unchecked.
    round_trip(&url("cairn", "127.0.0.1", "")).await.unwrap();
    round_trip(&url("cairn", "127.0.0.1", "sslmode=require"))
        .await
        .unwrap();

    // The name does not match: refused, saying why.
    let e = refused(&url("cairn", "127.0.0.1", &full)).await;
    let message = e.to_string();
    assert!(
        message.contains("certificate") && message.contains("127.0.0.1"),
        "{message}"
    );
    // Another CA signed what it trusts.
    let other = format!("sslmode=verify-full&sslrootcert={other_ca}");
    let message = refused(&url("cairn", "localhost", &other))
        .await
        .to_string();
    assert!(message.contains("certificate"), "{message}");
    // Without TLS, the server's rules refuse the session.
    let message = refused(&url("cairn", "127.0.0.1", "sslmode=disable"))
        .await
        .to_string();
    assert!(
        message.contains("pg_hba.conf") || message.contains("no encryption"),
        "{message}"
    );

    // A role the server asks a certificate of: refused without one, served with it.
    let message = refused(&url("cairn_cert", "localhost", &full))
        .await
        .to_string();
    assert!(message.contains("certificate"), "{message}");
    let with_cert = format!("{full}&sslcert={client_cert}&sslkey={client_key}");
    round_trip(&url("cairn_cert", "localhost", &with_cert))
        .await
        .unwrap();

    // What Cairn cannot honour is refused before connecting, naming the parameter.
    let e = Queue::open(url("cairn", "localhost", "sslmode=verify-full").as_str())
        .await
        .expect_err("refused");
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
    assert!(e.to_string().contains("sslrootcert"), "{e}");
    let e = Queue::open(url("cairn", "localhost", "sslcrl=/x.pem").as_str())
        .await
        .expect_err("refused");
    assert!(e.to_string().contains("\"sslcrl\""), "{e}");
    drop(cluster);
}
