//! A TLS client for the tests of the server's TLS ports (rustls, trusting the test's CA, showing a client
//! certificate when given one); the CLI's tests include this file.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A TLS client that trusts `ca_pem`, showing the certificate `client` if given.
pub fn connector(ca_pem: &str, client: Option<(&Path, &Path)>) -> tokio_rustls::TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots);
    let config = match client {
        Some((cert, key)) => builder
            .with_client_auth_cert(
                CertificateDer::pem_file_iter(cert)
                    .unwrap()
                    .map(Result::unwrap)
                    .collect(),
                PrivateKeyDer::from_pem_file(key).unwrap(),
            )
            .unwrap(),
        None => builder.with_no_client_auth(),
    };
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

/// Sends `request` over TLS to `addr` and reads until the server closes: (the answer, the server's certificate).
pub async fn exchange(
    connector: &tokio_rustls::TlsConnector,
    addr: std::net::SocketAddr,
    request: &str,
) -> std::io::Result<(String, CertificateDer<'static>)> {
    let tcp = TcpStream::connect(addr).await?;
    let name = ServerName::try_from("localhost").unwrap();
    let mut tls = connector.connect(name, tcp).await?;
    let certificate = tls.get_ref().1.peer_certificates().unwrap()[0].clone();
    tls.write_all(request.as_bytes()).await?;
    let mut answer = String::new();
    tokio::time::timeout(Duration::from_secs(20), tls.read_to_string(&mut answer))
        .await
        .expect("answered in time")?;
    Ok((answer, certificate))
}
