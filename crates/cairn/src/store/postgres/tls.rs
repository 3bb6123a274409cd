//! TLS to PostgreSQL, asked for as libpq asks: the URL's `sslmode`, `sslrootcert`, `sslcert` and `sslkey`. The
//! driver knows `sslmode` up to `require` and none of the files, so Cairn takes these parameters out of the URL
//! ([`split`]), gives the driver the rest with `sslmode` at most `require`, and checks the server's certificate
//! itself, in the rustls configuration every session connects with (the writer's, the readers', the listener's, the
//! leader's, the vacuum's and the migrations').
//!
//! What each mode checks, as libpq does:
//! - `disable`: no TLS.
//! - `prefer` (the default): TLS when the server offers it, its certificate unchecked; plain TCP when it does not.
//! - `require`: TLS or no session; the certificate is unchecked unless `sslrootcert` names a CA, which then signs
//!   it (libpq's `verify-ca`).
//! - `verify-ca`: TLS, the certificate signed by `sslrootcert`'s CA.
//! - `verify-full`: that, and the certificate names the host the URL connects to.
//!
//! `sslrootcert` is a file of PEM certificates, or `system` for the machine's roots. Unlike libpq, Cairn reads no
//! file that the URL does not name (`~/.postgresql/root.crt`): a check that depends on a file in the home directory
//! is one that a container quietly drops.

use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio_postgres::config::SslMode as DriverSslMode;
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::error::{Error, Result};

/// How much TLS a session asks for, libpq's `sslmode` (see the module's comment). `allow` (plain TCP first) is not
/// among them: the driver cannot fall back that way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SslMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    const ACCEPTED: &'static str = "disable, prefer, require, verify-ca or verify-full";

    fn parse(value: &str) -> Result<SslMode> {
        Ok(match value {
            "disable" => SslMode::Disable,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            "allow" => {
                return Err(invalid(format!(
                    "sslmode=allow is not supported (it tries plain TCP first); use prefer, or one of {}",
                    SslMode::ACCEPTED
                )));
            }
            other => {
                return Err(invalid(format!(
                    "sslmode={other:?} is not a mode: it is one of {}",
                    SslMode::ACCEPTED
                )));
            }
        })
    }

    /// What the driver is told: whether to ask for TLS and whether it must have it. The checks beyond are ours.
    fn for_driver(self) -> DriverSslMode {
        match self {
            SslMode::Disable => DriverSslMode::Disable,
            SslMode::Prefer => DriverSslMode::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => DriverSslMode::Require,
        }
    }
}

/// A URL's TLS parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TlsParams {
    pub mode: SslMode,
    /// A PEM file of CA certificates, or `system`.
    pub root_cert: Option<String>,
    /// The client's certificate (PEM) and its key (PEM, unencrypted), for a server that asks for one.
    pub cert: Option<String>,
    pub key: Option<String>,
}

/// The parameters of a URL that the driver reads itself: passed on as they are.
const DRIVER_PARAMETERS: &[&str] = &[
    "user",
    "password",
    "dbname",
    "options",
    "application_name",
    "sslnegotiation",
    "host",
    "hostaddr",
    "port",
    "connect_timeout",
    "tcp_user_timeout",
    "keepalives",
    "keepalives_idle",
    "keepalives_interval",
    "keepalives_retries",
    "target_session_attrs",
    "channel_binding",
    "load_balance_hosts",
];

/// The TLS parameters Cairn reads (see the module's comment).
const TLS_PARAMETERS: &[&str] = &["sslmode", "sslrootcert", "sslcert", "sslkey"];

/// Takes the TLS parameters out of `url` (a `postgres://` URL, or libpq's `key=value` words): returns them, and
/// the rest for the driver to read. A parameter that neither Cairn nor the driver knows is refused by name, rather
/// than left to the driver's "invalid connection string".
pub(crate) fn split(url: &str) -> Result<(TlsParams, String)> {
    let mut params = TlsParams {
        mode: SslMode::Prefer,
        root_cert: None,
        cert: None,
        key: None,
    };
    let mut take = |key: &str, value: String| -> Result<bool> {
        match key {
            "sslmode" => params.mode = SslMode::parse(&value)?,
            "sslrootcert" => params.root_cert = Some(value),
            "sslcert" => params.cert = Some(value),
            "sslkey" => params.key = Some(value),
            _ if DRIVER_PARAMETERS.contains(&key) => return Ok(false),
            _ => return Err(unknown_parameter(key)),
        }
        Ok(true)
    };
    let rest = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let Some((base, query)) = url.split_once('?') else {
            return Ok((params, url.to_owned()));
        };
        let mut kept = Vec::new();
        for pair in query.split('&').filter(|pair| !pair.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            if !take(&percent_decode(key)?, percent_decode(value)?)? {
                kept.push(pair);
            }
        }
        match kept.is_empty() {
            true => base.to_owned(),
            false => format!("{base}?{}", kept.join("&")),
        }
    } else {
        let mut kept = Vec::new();
        for (key, value) in key_values(url)? {
            if !take(&key, value.clone())? {
                kept.push(format!(
                    "{key}='{}'",
                    value.replace('\\', "\\\\").replace('\'', "\\'")
                ));
            }
        }
        kept.join(" ")
    };
    if params.cert.is_some() != params.key.is_some() {
        return Err(invalid(
            "sslcert and sslkey go together: the client's certificate and its key, both PEM files",
        ));
    }
    if params.mode == SslMode::Disable && (params.root_cert.is_some() || params.cert.is_some()) {
        return Err(invalid(
            "sslmode=disable with a certificate named (sslrootcert, sslcert): say which is meant",
        ));
    }
    Ok((params, rest))
}

/// The driver's mode for `params`, and the connector every session connects with.
pub(crate) fn connector(params: &TlsParams) -> Result<(DriverSslMode, MakeRustlsConnect)> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| invalid(format!("TLS: {e}")))?;
    let roots = match &params.root_cert {
        Some(source) if params.mode != SslMode::Disable => Some(roots(source)?),
        _ => None,
    };
    let verifier: Arc<dyn ServerCertVerifier> = match (params.mode, roots) {
        (SslMode::VerifyCa | SslMode::VerifyFull, None) => {
            return Err(invalid(format!(
                "sslmode={} checks the server's certificate against a CA: name it with sslrootcert=FILE (PEM), \
                 or sslrootcert=system for the machine's roots",
                if params.mode == SslMode::VerifyCa {
                    "verify-ca"
                } else {
                    "verify-full"
                }
            )));
        }
        (SslMode::VerifyFull, Some(roots)) => web_pki(roots, &provider)?,
        // libpq's `require` with a root certificate checks as `verify-ca` does.
        (SslMode::VerifyCa | SslMode::Require, Some(roots)) => Arc::new(SignedByCa {
            inner: web_pki(roots, &provider)?,
        }),
        (_, _) => Arc::new(Unchecked { provider }),
    };
    let builder = builder
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    let mut config = match (&params.cert, &params.key) {
        (Some(cert), Some(key)) => {
            let chain = certificates(cert, "sslcert")?;
            let key = PrivateKeyDer::from_pem_file(key).map_err(|e| {
                invalid(format!(
                    "sslkey: cannot read a PEM private key from {key}: {e}"
                ))
            })?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| invalid(format!("sslcert and sslkey: {e}")))?
        }
        _ => builder.with_no_client_auth(),
    };
    // What PostgreSQL 17's direct negotiation (`sslnegotiation=direct`) requires; older servers ignore it.
    config.alpn_protocols = vec![b"postgresql".to_vec()];
    Ok((params.mode.for_driver(), MakeRustlsConnect::new(config)))
}

fn roots(source: &str) -> Result<RootCertStore> {
    let mut store = RootCertStore::empty();
    if source == "system" {
        let found = rustls_native_certs::load_native_certs();
        let (added, _) = store.add_parsable_certificates(found.certs);
        if added == 0 {
            return Err(invalid(format!(
                "sslrootcert=system: this machine has no root certificates Cairn can read ({} errors)",
                found.errors.len()
            )));
        }
    } else {
        let (added, _) = store.add_parsable_certificates(certificates(source, "sslrootcert")?);
        if added == 0 {
            return Err(invalid(format!(
                "sslrootcert: {source} holds no CA certificate Cairn can use"
            )));
        }
    }
    Ok(store)
}

/// The PEM certificates of file `path`, the URL's parameter `name`.
fn certificates(path: &str, name: &str) -> Result<Vec<CertificateDer<'static>>> {
    let read = || -> std::result::Result<Vec<_>, rustls::pki_types::pem::Error> {
        CertificateDer::pem_file_iter(path)?.collect()
    };
    match read() {
        Ok(certs) if !certs.is_empty() => Ok(certs),
        Ok(_) => Err(invalid(format!("{name}: {path} holds no PEM certificate"))),
        Err(e) => Err(invalid(format!(
            "{name}: cannot read PEM certificates from {path}: {e}"
        ))),
    }
}

fn web_pki(
    roots: RootCertStore,
    provider: &Arc<CryptoProvider>,
) -> Result<Arc<WebPkiServerVerifier>> {
    WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| invalid(format!("sslrootcert: {e}")))
}

/// `verify-ca`: the certificate is signed by the CA, whatever host it names. (A name that does not match is the
/// last thing the inner verifier checks, after the chain.)
#[derive(Debug)]
struct SignedByCa {
    inner: Arc<WebPkiServerVerifier>,
}

impl ServerCertVerifier for SignedByCa {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        match self.inner.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// `prefer` and `require` without a CA: the link is encrypted, but anyone on the path could be the server (as with
/// libpq). The handshake's signatures are still checked: the peer holds the key of the certificate it showed.
#[derive(Debug)]
struct Unchecked {
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// libpq's `key = value` words: a value is a word, or quoted with `'` (a `\` escapes the next character in either).
fn key_values(text: &str) -> Result<Vec<(String, String)>> {
    let mut pairs = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.peek().is_none() {
            return Ok(pairs);
        }
        let mut key = String::new();
        while let Some(c) = chars.next_if(|c| *c != '=' && !c.is_whitespace()) {
            key.push(c);
        }
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.next() != Some('=') {
            return Err(invalid(format!(
                "is neither a postgres:// URL nor key=value words: {key:?} has no value"
            )));
        }
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let mut value = String::new();
        if chars.next_if_eq(&'\'').is_some() {
            loop {
                match chars.next() {
                    Some('\'') => break,
                    Some('\\') => value.extend(chars.next()),
                    Some(c) => value.push(c),
                    None => {
                        return Err(invalid(format!("the value of {key} has no closing quote")));
                    }
                }
            }
        } else {
            while let Some(c) = chars.next_if(|c| !c.is_whitespace()) {
                match c {
                    '\\' => value.extend(chars.next()),
                    c => value.push(c),
                }
            }
        }
        pairs.push((key, value));
    }
}

/// A URL's `%XX` escapes decoded (the driver decodes the parameters it reads the same way).
fn percent_decode(text: &str) -> Result<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text
                .get(i + 1..i + 3)
                .and_then(|hex| u8::from_str_radix(hex, 16).ok())
                .ok_or_else(|| invalid(format!("has a % that is not a %XX escape: {text:?}")))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| invalid(format!("has escapes that are not UTF-8: {text:?}")))
}

fn unknown_parameter(key: &str) -> Error {
    invalid(format!(
        "the URL's parameter {key:?} is not one Cairn supports; it reads {} and the driver's {}",
        TLS_PARAMETERS.join(", "),
        DRIVER_PARAMETERS.join(", ")
    ))
}

fn invalid(message: impl Into<String>) -> Error {
    Error::invalid("database", message.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split_ok(url: &str) -> (TlsParams, String) {
        split(url).unwrap_or_else(|e| panic!("{url}: {e}"))
    }

    #[test]
    fn the_tls_parameters_leave_the_url_and_the_rest_stays_as_written() {
        let (params, rest) = split_ok(
            "postgres://u:p%3F@h:5/db?sslmode=verify-full&connect_timeout=3&sslrootcert=%2Ftmp%2Fca.pem",
        );
        assert_eq!(params.mode, SslMode::VerifyFull);
        assert_eq!(params.root_cert.as_deref(), Some("/tmp/ca.pem"));
        assert_eq!(rest, "postgres://u:p%3F@h:5/db?connect_timeout=3");
        let (params, rest) = split_ok("postgresql://h/db?sslcert=c.pem&sslkey=k.pem");
        assert_eq!(params.mode, SslMode::Prefer, "libpq's default");
        assert_eq!(
            (params.cert.as_deref(), params.key.as_deref()),
            (Some("c.pem"), Some("k.pem"))
        );
        assert_eq!(rest, "postgresql://h/db");
        assert_eq!(split_ok("postgres://h/db").1, "postgres://h/db");
    }

    #[test]
    fn key_value_words_are_read_with_their_quotes_and_escapes() {
        let (params, rest) = split_ok(
            "host=h  dbname = 'my db' sslmode=require password='it\\'s' sslrootcert=/a\\ b",
        );
        assert_eq!(params.mode, SslMode::Require);
        assert_eq!(params.root_cert.as_deref(), Some("/a b"));
        assert_eq!(rest, "host='h' dbname='my db' password='it\\'s'");
        let config: tokio_postgres::Config = rest.parse().unwrap();
        assert_eq!(config.get_dbname(), Some("my db"));
        assert_eq!(config.get_password(), Some(&b"it's"[..]));
        assert!(split("host=h dbname='open").is_err());
        assert!(split("host").is_err());
    }

    #[test]
    fn what_cairn_does_not_support_is_refused_by_name() {
        for (url, named) in [
            ("postgres://h/db?sslcrl=x.pem", "\"sslcrl\""),
            ("postgres://h/db?sslpassword=x", "\"sslpassword\""),
            ("host=h gssencmode=require", "\"gssencmode\""),
            ("postgres://h/db?sslmode=allow", "sslmode=allow"),
            ("postgres://h/db?sslmode=verify", "verify-full"),
            ("postgres://h/db?sslcert=c.pem", "sslcert and sslkey"),
            (
                "postgres://h/db?sslmode=disable&sslrootcert=x",
                "sslmode=disable",
            ),
            ("postgres://h/db?a=%zz", "%XX"),
        ] {
            let e = split(url).expect_err(url);
            assert_eq!(e.kind(), crate::ErrorKind::InvalidInput);
            let message = e.to_string();
            assert!(
                message.contains(named) && message.contains("database"),
                "{url}: {message}"
            );
        }
    }

    #[test]
    fn a_check_without_its_certificates_is_refused_before_connecting() {
        let (params, _) = split_ok("postgres://h/db?sslmode=verify-full");
        let message = connector(&params).err().expect("refused").to_string();
        assert!(message.contains("sslrootcert=FILE"), "{message}");
        let (params, _) =
            split_ok("postgres://h/db?sslmode=verify-ca&sslrootcert=/nonexistent/ca.pem");
        let message = connector(&params).err().expect("refused").to_string();
        assert!(
            message.contains("sslrootcert") && message.contains("/nonexistent/ca.pem"),
            "{message}"
        );
        let (params, _) = split_ok("postgres://h/db?sslmode=require");
        assert!(connector(&params).is_ok(), "require needs no CA");
    }
}
