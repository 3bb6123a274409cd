//! TLS on the server's ports: a certificate and key (PEM files), and optionally a CA whose client certificates
//! the server requires (mutual TLS). The files are read again when they change on disk (looked at every
//! [`WATCH_EVERY`]) or when asked ([`Tls::reload`], on `SIGHUP` in `cairn serve`): a renewed certificate is served
//! to the next connection without a restart. Files that do not load (a key that does not match the certificate,
//! halfway through a renewal) leave the last good ones in use, with a warning.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime};

use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tokio_util::sync::CancellationToken;

/// How often the files are looked at for a change.
pub const WATCH_EVERY: Duration = Duration::from_secs(2);

/// The files TLS is served from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The server's certificate chain, PEM, its own certificate first.
    pub cert: PathBuf,
    /// Its private key, PEM (PKCS #8, PKCS #1 or SEC1), unencrypted.
    pub key: PathBuf,
    /// When set, clients must show a certificate this CA (PEM, one or more certificates) signed.
    pub client_ca: Option<PathBuf>,
}

/// TLS as currently loaded, shared by the listeners.
pub struct Tls {
    files: TlsFiles,
    config: RwLock<Arc<ServerConfig>>,
    /// The files' state when last loaded, and when a load last failed (so that a failure is told once).
    stamps: Mutex<(Stamp, Option<Stamp>)>,
}

/// What says a file changed: its modification time and length, for each file.
type Stamp = Vec<Option<(SystemTime, u64)>>;

impl Tls {
    /// Loads `files`.
    ///
    /// # Errors
    /// A message naming the file and what is wrong with it.
    pub fn load(files: TlsFiles) -> Result<Arc<Tls>, String> {
        let stamp = stamp(&files);
        let config = server_config(&files)?;
        Ok(Arc::new(Tls {
            files,
            config: RwLock::new(Arc::new(config)),
            stamps: Mutex::new((stamp, None)),
        }))
    }

    /// What a new connection's handshake uses: the files as last loaded.
    pub fn acceptor(&self) -> TlsAcceptor {
        TlsAcceptor::from(
            self.config
                .read()
                .expect("never held across a panic")
                .clone(),
        )
    }

    /// Reads the files again; on failure, the last good ones stay in use.
    ///
    /// # Errors
    /// A message naming the file and what is wrong with it.
    pub fn reload(&self) -> Result<(), String> {
        let stamp = stamp(&self.files);
        let loaded = server_config(&self.files);
        let mut stamps = self.stamps.lock().expect("never held across a panic");
        match loaded {
            Ok(config) => {
                *self.config.write().expect("never held across a panic") = Arc::new(config);
                *stamps = (stamp, None);
                Ok(())
            }
            Err(e) => {
                stamps.1 = Some(stamp);
                Err(e)
            }
        }
    }

    /// Reloads if the files changed since they were loaded (or since a load failed), logging what happened.
    pub fn reload_if_changed(&self) {
        let now = stamp(&self.files);
        {
            let stamps = self.stamps.lock().expect("never held across a panic");
            if stamps.0 == now || stamps.1.as_ref() == Some(&now) {
                return;
            }
        }
        self.reload_and_log("the files changed");
    }

    /// Reloads, logging the outcome; `why` says what asked.
    pub fn reload_and_log(&self, why: &str) {
        match self.reload() {
            Ok(()) => {
                tracing::info!(cert = %self.files.cert.display(), why, "TLS certificate loaded")
            }
            Err(e) => {
                tracing::warn!(error = %e, why, "TLS certificate not reloaded; the last good one stays in use")
            }
        }
    }

    /// Looks at the files every [`WATCH_EVERY`] until `stop`, reloading them when they change.
    pub fn watch(self: &Arc<Self>, stop: CancellationToken) -> tokio::task::JoinHandle<()> {
        let tls = self.clone();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(WATCH_EVERY);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    () = stop.cancelled() => return,
                    _ = every.tick() => {}
                }
                let tls = tls.clone();
                // Reading files blocks: off the runtime's threads.
                let _ = tokio::task::spawn_blocking(move || tls.reload_if_changed()).await;
            }
        })
    }
}

fn stamp(files: &TlsFiles) -> Stamp {
    [
        Some(&files.cert),
        Some(&files.key),
        files.client_ca.as_ref(),
    ]
    .into_iter()
    .flatten()
    .map(|path| {
        std::fs::metadata(path)
            .ok()
            .and_then(|m| Some((m.modified().ok()?, m.len())))
    })
    .collect()
}

fn server_config(files: &TlsFiles) -> Result<ServerConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?;
    let builder = match &files.client_ca {
        Some(path) => {
            let mut roots = rustls::RootCertStore::empty();
            let (added, _) =
                roots.add_parsable_certificates(certificates(path, "--tls-client-ca")?);
            if added == 0 {
                return Err(format!(
                    "--tls-client-ca {}: no CA certificate in it can be used",
                    path.display()
                ));
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| format!("--tls-client-ca {}: {e}", path.display()))?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let chain = certificates(&files.cert, "--tls-cert")?;
    let key = PrivateKeyDer::from_pem_file(&files.key).map_err(|e| {
        format!(
            "--tls-key {}: no unencrypted PEM private key could be read from it ({e})",
            files.key.display()
        )
    })?;
    builder.with_single_cert(chain, key).map_err(|e| {
        format!(
            "--tls-cert {} and --tls-key {}: {e} (is the key the certificate's?)",
            files.cert.display(),
            files.key.display()
        )
    })
}

/// The PEM certificates of the file `path`, given with `flag`.
fn certificates(path: &Path, flag: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let read = || -> Result<Vec<_>, rustls::pki_types::pem::Error> {
        CertificateDer::pem_file_iter(path)?.collect()
    };
    match read() {
        Ok(certs) if !certs.is_empty() => Ok(certs),
        Ok(_) => Err(format!(
            "{flag} {}: holds no PEM certificate",
            path.display()
        )),
        Err(e) => Err(format!("{flag} {}: {e}", path.display())),
    }
}

/// A connection's TLS handshake, which must end within `limit` (a client that stalls in it holds a connection
/// slot, as one that stalls in a request does) or before `shutdown`. `None` when it failed, logged as the
/// client's fault.
pub(crate) async fn handshake(
    acceptor: TlsAcceptor,
    stream: TcpStream,
    limit: Duration,
    shutdown: &CancellationToken,
    peer: std::net::SocketAddr,
) -> Option<TlsStream<TcpStream>> {
    tokio::select! {
        () = shutdown.cancelled() => None,
        done = tokio::time::timeout(limit, acceptor.accept(stream)) => match done {
            Ok(Ok(stream)) => Some(stream),
            Ok(Err(e)) => {
                tracing::debug!(%peer, error = %e, "TLS handshake failed");
                None
            }
            Err(_) => {
                tracing::debug!(%peer, ?limit, "TLS handshake not done within the request timeout");
                None
            }
        },
    }
}

/// A connection's stream, plain or TLS, and the TCP socket under it (whose errors tell whether the peer is gone).
pub(crate) trait Socket: AsyncRead + AsyncWrite + Unpin + Send + 'static {
    fn tcp(&self) -> &TcpStream;
}

impl Socket for TcpStream {
    fn tcp(&self) -> &TcpStream {
        self
    }
}

impl Socket for TlsStream<TcpStream> {
    fn tcp(&self) -> &TcpStream {
        self.get_ref().0
    }
}
