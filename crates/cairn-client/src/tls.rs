//! HTTPS to a Cairn server ([`ClientTls`]): the server's certificate is checked against the machine's roots, or
//! against a CA file for a private CA; a client certificate is shown to a server that requires one
//! (`cairn serve --tls-client-ca`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use cairn::{Error, ErrorKind, Result};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// How the client checks the server over HTTPS, and the certificate it shows. The default trusts the machine's
/// roots and shows none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientTls {
    /// PEM CA certificates to trust instead of the machine's roots: the CA of a server's own certificate.
    pub ca_file: Option<PathBuf>,
    /// The client's certificate chain (PEM), for a server that requires one; with [`ClientTls::key_file`].
    pub cert_file: Option<PathBuf>,
    /// The client certificate's private key (PEM, unencrypted).
    pub key_file: Option<PathBuf>,
}

impl ClientTls {
    /// Trust the CA certificates of `path` (PEM) instead of the machine's roots.
    #[must_use]
    pub fn ca_file(mut self, path: impl Into<PathBuf>) -> ClientTls {
        self.ca_file = Some(path.into());
        self
    }

    /// Show the certificate of `cert` with its key `key` (both PEM) to a server that asks for one.
    #[must_use]
    pub fn client_cert(mut self, cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> ClientTls {
        self.cert_file = Some(cert.into());
        self.key_file = Some(key.into());
        self
    }

    /// The rustls configuration these settings make.
    pub(crate) fn config(&self) -> Result<rustls::ClientConfig> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        match &self.ca_file {
            Some(path) => {
                let (added, _) = roots.add_parsable_certificates(certificates(path, "ca_file")?);
                if added == 0 {
                    return Err(invalid(
                        "ca_file",
                        format!(
                            "{} holds no CA certificate that can be used",
                            path.display()
                        ),
                    ));
                }
            }
            // No roots on the machine is not an error here: a plain http:// server needs none, and an https://
            // one then fails its handshake, naming the certificate it could not check.
            None => {
                roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
            }
        }
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| invalid("tls", e.to_string()))?
            .with_root_certificates(roots);
        match (&self.cert_file, &self.key_file) {
            (None, None) => Ok(builder.with_no_client_auth()),
            (Some(cert), Some(key)) => {
                let chain = certificates(cert, "cert_file")?;
                let key = PrivateKeyDer::from_pem_file(key).map_err(|e| {
                    invalid(
                        "key_file",
                        format!("no unencrypted PEM private key in {}: {e}", key.display()),
                    )
                })?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|e| invalid("key_file", format!("{e} (is it the certificate's key?)")))
            }
            (Some(_), None) => Err(invalid("key_file", "a client certificate needs its key")),
            (None, Some(_)) => Err(invalid("cert_file", "a client key needs its certificate")),
        }
    }
}

fn certificates(path: &Path, field: &str) -> Result<Vec<CertificateDer<'static>>> {
    let read = || -> std::result::Result<Vec<_>, rustls::pki_types::pem::Error> {
        CertificateDer::pem_file_iter(path)?.collect()
    };
    match read() {
        Ok(certs) if !certs.is_empty() => Ok(certs),
        Ok(_) => Err(invalid(
            field,
            format!("{} holds no PEM certificate", path.display()),
        )),
        Err(e) => Err(invalid(field, format!("{}: {e}", path.display()))),
    }
}

fn invalid(field: &str, message: impl std::fmt::Display) -> Error {
    Error::from_parts(
        ErrorKind::InvalidInput,
        Some(field.into()),
        format!("{field}: {message}"),
    )
}
