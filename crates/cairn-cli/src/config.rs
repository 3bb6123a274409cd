//! The server's settings, resolved from (highest first) command-line flags, `CAIRN_*` environment variables, a
//! TOML config file (`--config`), and production defaults. Every value is checked here, and an error names the
//! flag or key and the rule.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use cairn::{Durability, NameFamilies, QueueOptions, RecoveryPolicy, Retention, RetryPolicy};
use cairn_server::ServerConfig;
use cairn_server::credentials::Credentials;
use cairn_server::tls::TlsFiles;
use serde::Deserialize;

use crate::serve::ServeArgs;

/// The config file: the same settings as the flags, with `_` for `-` (`max_wait = "60s"`). Unknown keys are
/// refused, so a typo is an error rather than a silently ignored setting.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    db: Option<String>,
    http: Option<String>,
    bedrock: Option<String>,
    bedrock_tls: Option<String>,
    tls_cert: Option<PathBuf>,
    tls_key: Option<PathBuf>,
    tls_client_ca: Option<PathBuf>,
    token: Option<String>,
    token_file: Option<PathBuf>,
    allowed_hosts: Option<Vec<String>>,
    insecure: Option<bool>,
    durability: Option<String>,
    recovery: Option<String>,
    lease_timeout: Option<String>,
    max_attempts: Option<u32>,
    retention_age: Option<String>,
    retention_count: Option<u64>,
    max_data: Option<usize>,
    stats_name_cut: Option<String>,
    max_wait: Option<String>,
    max_body: Option<usize>,
    max_batch: Option<usize>,
    shutdown_grace: Option<String>,
    request_timeout: Option<String>,
    idle_timeout: Option<String>,
    max_connections: Option<usize>,
}

impl FileConfig {
    /// Reads and parses a config file.
    ///
    /// # Errors
    /// When the file cannot be read or is not valid (the message names the key).
    pub fn load(path: &Path) -> anyhow::Result<FileConfig> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the config file {}", path.display()))?;
        toml::from_str(&text).with_context(|| format!("in the config file {}", path.display()))
    }
}

/// Everything `cairn serve` needs, resolved and checked.
#[derive(Debug)]
pub struct ServeSettings {
    /// The SQLite database file.
    pub db: PathBuf,
    /// Where the HTTP API listens.
    pub http: SocketAddr,
    /// Where the Bedrock text protocol listens; `None` when it is off.
    pub bedrock: Option<SocketAddr>,
    /// Where the Bedrock text protocol listens over TLS; `None` when it does not.
    pub bedrock_tls: Option<SocketAddr>,
    /// The certificates both ports' TLS is served from (`None`: plain TCP).
    pub tls: Option<TlsFiles>,
    /// Whether a non-loopback address without a token was allowed.
    pub insecure: bool,
    /// The engine's settings.
    pub queue: QueueOptions,
    /// The HTTP server's settings.
    pub server: ServerConfig,
}

/// A duration from a flag (already parsed) or from the file (parsed here, naming the key).
fn duration(
    flag: Option<Duration>,
    file: Option<&str>,
    key: &str,
) -> anyhow::Result<Option<Duration>> {
    match (flag, file) {
        (Some(d), _) => Ok(Some(d)),
        (None, Some(text)) => crate::duration::parse(text)
            .map(Some)
            .map_err(|rule| anyhow::anyhow!("{key}: {rule}")),
        (None, None) => Ok(None),
    }
}

/// A connection's timeout, as [`duration`], at least a second: shorter would cut honest clients on a slow link,
/// and a typo such as `30ms` would do just that.
fn timeout(
    flag: Option<Duration>,
    file: Option<&str>,
    key: &str,
) -> anyhow::Result<Option<Duration>> {
    let d = duration(flag, file, key)?;
    if let Some(d) = d
        && d < Duration::from_secs(1)
    {
        bail!(
            "{key}: must be at least 1s, got {}",
            crate::duration::format(d)
        );
    }
    Ok(d)
}

/// The tokens of the token file at `path`.
fn token_file(path: &Path) -> anyhow::Result<Credentials> {
    let shown = path.display();
    let size = std::fs::metadata(path)
        .with_context(|| format!("token_file: reading {shown}"))?
        .len();
    if size > cairn_server::credentials::MAX_TOKEN_FILE_BYTES as u64 {
        bail!("token_file: {shown} is {size} bytes; a token file holds at most 1 MiB");
    }
    let text =
        std::fs::read_to_string(path).with_context(|| format!("token_file: reading {shown}"))?;
    let tokens =
        Credentials::parse_file(&text).map_err(|e| anyhow::anyhow!("token_file {shown}: {e}"))?;
    if tokens.is_empty() {
        bail!("token_file: {shown} holds no [[tokens]]: with no token, leave --token-file out");
    }
    Ok(tokens)
}

/// The TLS files, checked for what goes together (whether they load is checked when the server starts them).
fn tls_files(
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
    client_ca: Option<PathBuf>,
) -> anyhow::Result<Option<TlsFiles>> {
    match (cert, key, client_ca) {
        (None, None, None) => Ok(None),
        (Some(cert), Some(key), client_ca) => Ok(Some(TlsFiles {
            cert,
            key,
            client_ca,
        })),
        (None, None, Some(_)) => {
            bail!("tls_client_ca: client certificates need TLS: set tls_cert and tls_key too")
        }
        (Some(_), None, _) => bail!("tls_key: tls_cert needs its private key (a PEM file)"),
        (None, Some(_), _) => bail!("tls_cert: tls_key needs its certificate (a PEM file)"),
    }
}

/// Where the database is: a SQLite file's path or `sqlite://` URL, or a PostgreSQL URL (`postgres://…`), which
/// is passed on whole.
fn database_path(text: &str) -> anyhow::Result<PathBuf> {
    if let Some(path) = text.strip_prefix("sqlite://") {
        return Ok(PathBuf::from(path));
    }
    if cairn::is_postgres_url(text) {
        // Checked whole when the queue opens, which names the database in its error.
        return Ok(PathBuf::from(text));
    }
    if text.is_empty() {
        bail!("db: must be a file path, a sqlite:// URL or a postgres:// URL, got an empty string");
    }
    Ok(PathBuf::from(text))
}

impl ServeSettings {
    /// Resolves the settings from the flags (which already include the environment) and the config file.
    ///
    /// # Errors
    /// A message naming the bad flag or key.
    pub fn resolve(args: &ServeArgs) -> anyhow::Result<ServeSettings> {
        let file = match &args.config {
            Some(path) => FileConfig::load(path)?,
            None => FileConfig::default(),
        };
        let db = database_path(
            args.db
                .as_deref()
                .or(file.db.as_deref())
                .unwrap_or("cairn.db"),
        )?;
        let http = match (&args.http, &file.http) {
            (Some(addr), _) => *addr,
            (None, Some(text)) => text.parse().map_err(|_| {
                anyhow::anyhow!("http: must be an address such as 127.0.0.1:6670, got {text:?}")
            })?,
            (None, None) => SocketAddr::from(([127, 0, 0, 1], 6670)),
        };
        let bedrock = match args.bedrock.as_deref().or(file.bedrock.as_deref()) {
            None => Some(SocketAddr::from(([127, 0, 0, 1], 8888))),
            Some("off") => None,
            Some(text) => Some(text.parse().map_err(|_| {
                anyhow::anyhow!(
                    "bedrock: must be an address such as 127.0.0.1:8888, or off, got {text:?}"
                )
            })?),
        };
        let bedrock_tls: Option<SocketAddr> = match args
            .bedrock_tls
            .as_deref()
            .or(file.bedrock_tls.as_deref())
        {
            None | Some("off") => None,
            Some(text) => Some(text.parse().map_err(|_| {
                anyhow::anyhow!(
                    "bedrock_tls: must be an address such as 127.0.0.1:8889, or off, got {text:?}"
                )
            })?),
        };
        let tls = tls_files(
            args.tls_cert.clone().or(file.tls_cert),
            args.tls_key.clone().or(file.tls_key),
            args.tls_client_ca.clone().or(file.tls_client_ca),
        )?;
        if let (Some(addr), None) = (bedrock_tls, &tls) {
            bail!(
                "bedrock_tls: listening on {addr} over TLS needs a certificate: set tls_cert and tls_key"
            );
        }
        let token = args.token.clone().or(file.token);
        if let Some(token) = &token {
            if token.len() < 16 {
                bail!("token: must be at least 16 characters (use a random secret)");
            }
            // An HTTP header carries visible ASCII; a token with spaces or other characters could never match.
            if !token.bytes().all(|b| b.is_ascii_graphic()) {
                bail!("token: must be visible ASCII characters without spaces");
            }
        }
        let insecure = args.insecure || file.insecure.unwrap_or(false);

        let mut queue = QueueOptions::default();
        let durability = args.durability.clone().or(file.durability);
        if let Some(durability) = durability {
            queue.durability = match durability.as_str() {
                "full" => Durability::Full,
                "normal" => Durability::Normal,
                other => bail!("durability: must be full or normal, got {other:?}"),
            };
        }
        // A server's workers are remote and outlive it: by default their leases carry on across a restart.
        queue.recovery = match args.recovery.as_deref().or(file.recovery.as_deref()) {
            None | Some("keep-leases") => RecoveryPolicy::KeepLeases,
            Some("retry") => RecoveryPolicy::RetryNow,
            Some("backoff") => RecoveryPolicy::Backoff,
            Some(other) => bail!("recovery: must be keep-leases, retry or backoff, got {other:?}"),
        };
        if let Some(d) = duration(
            args.lease_timeout,
            file.lease_timeout.as_deref(),
            "lease_timeout",
        )? {
            queue.default_lease_timeout = d;
        }
        if let Some(n) = args.max_attempts.or(file.max_attempts) {
            queue.default_retry = RetryPolicy {
                max_attempts: n,
                ..queue.default_retry
            };
            queue.default_retry.validate().map_err(|e| {
                anyhow::anyhow!(
                    "max_attempts: {}",
                    e.message().trim_start_matches("max_attempts: ")
                )
            })?;
        }
        let retention_age = duration(
            args.retention_age,
            file.retention_age.as_deref(),
            "retention_age",
        )?;
        let retention_count = args.retention_count.or(file.retention_count);
        if retention_age.is_some() || retention_count.is_some() {
            queue.retention = Retention {
                max_age: retention_age.or(queue.retention.max_age),
                max_count: retention_count.or(queue.retention.max_count),
                ..queue.retention
            };
        }
        if let Some(bytes) = args.max_data.or(file.max_data) {
            if bytes == 0 {
                bail!("max_data: must be at least 1 byte");
            }
            queue.max_data_bytes = bytes;
        }
        if let Some(cut) = args
            .stats_name_cut
            .as_deref()
            .or(file.stats_name_cut.as_deref())
        {
            queue.name_families =
                NameFamilies::cut_at(cut).map_err(|e| anyhow::anyhow!("{}", e.message()))?;
        }

        let allowed_hosts = if args.allowed_hosts.is_empty() {
            file.allowed_hosts.unwrap_or_default()
        } else {
            args.allowed_hosts.clone()
        };
        for name in &allowed_hosts {
            let valid = !name.is_empty()
                && name.len() <= 253
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.');
            if !valid {
                bail!(
                    "allowed_hosts: must be host names (letters, digits, '-' and '.', no port), got {name:?}"
                );
            }
        }
        let tokens = match args.token_file.clone().or(file.token_file) {
            Some(path) => token_file(&path)?,
            None => Credentials::none(),
        };
        let mut server = ServerConfig {
            token,
            tokens,
            allowed_hosts,
            ..ServerConfig::default()
        };
        if let Some(d) = duration(args.max_wait, file.max_wait.as_deref(), "max_wait")? {
            if d > cairn::MAX_WAIT {
                bail!(
                    "max_wait: must be at most 24h, got {}",
                    crate::duration::format(d)
                );
            }
            server.max_wait = d;
        }
        if let Some(bytes) = args.max_body.or(file.max_body) {
            if bytes < 1024 {
                bail!("max_body: must be at least 1024 bytes, got {bytes}");
            }
            server.max_body_bytes = bytes;
        }
        if let Some(n) = args.max_batch.or(file.max_batch) {
            if n == 0 {
                bail!("max_batch: must be at least 1");
            }
            server.max_batch_jobs = n;
        }
        if let Some(d) = duration(
            args.shutdown_grace,
            file.shutdown_grace.as_deref(),
            "shutdown_grace",
        )? {
            server.shutdown_grace = d;
        }
        if let Some(d) = timeout(
            args.request_timeout,
            file.request_timeout.as_deref(),
            "request_timeout",
        )? {
            server.request_timeout = d;
        }
        if let Some(d) = timeout(
            args.idle_timeout,
            file.idle_timeout.as_deref(),
            "idle_timeout",
        )? {
            server.idle_timeout = d;
        }
        if let Some(n) = args.max_connections.or(file.max_connections) {
            if n == 0 {
                bail!("max_connections: must be at least 1");
            }
            server.max_connections = n;
        }
        cairn_server::check_exposure(http, server.has_tokens(), insecure)
            .map_err(anyhow::Error::msg)?;
        // The Bedrock protocol has no authentication of its own: off loopback it needs --insecure, token or not,
        // unless it is the TLS port and clients must show a certificate.
        if let Some(addr) = bedrock
            && !addr.ip().is_loopback()
            && !insecure
        {
            bail!(
                "refusing to serve the Bedrock protocol on {addr}: it has no authentication, so anyone who can reach \
                 it could run and delete jobs. Listen on a loopback address, pass --bedrock off, or pass --insecure"
            );
        }
        let client_certificates = tls.as_ref().is_some_and(|t| t.client_ca.is_some());
        if let Some(addr) = bedrock_tls
            && !addr.ip().is_loopback()
            && !insecure
            && !client_certificates
        {
            bail!(
                "refusing to serve the Bedrock protocol over TLS on {addr} to any client: it has no authentication \
                 of its own. Require client certificates (--tls-client-ca), listen on a loopback address, or pass \
                 --insecure"
            );
        }
        Ok(ServeSettings {
            db,
            http,
            bedrock,
            bedrock_tls,
            tls,
            insecure,
            queue,
            server,
        })
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    fn resolve(args: &[&str]) -> anyhow::Result<ServeSettings> {
        let cli = crate::Cli::try_parse_from(["cairn", "serve"].iter().chain(args)).unwrap();
        let crate::cli::Command::Serve(args) = cli.command else {
            unreachable!()
        };
        ServeSettings::resolve(&args)
    }

    fn config_file(text: &str) -> tempfile::NamedTempFile {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), text).unwrap();
        file
    }

    #[test]
    fn defaults_are_a_local_sqlite_file_on_loopback() {
        let s = resolve(&[]).unwrap();
        assert_eq!(s.db, PathBuf::from("cairn.db"));
        assert_eq!(s.http, "127.0.0.1:6670".parse().unwrap());
        assert_eq!(s.bedrock, Some("127.0.0.1:8888".parse().unwrap()));
        assert_eq!(s.queue.recovery, RecoveryPolicy::KeepLeases);
        assert!(s.server.token.is_none());
    }

    #[test]
    fn flags_override_the_file_and_the_file_overrides_defaults() {
        let file =
            config_file("db = \"from-file.db\"\nmax_wait = \"5s\"\ndurability = \"normal\"\n");
        let path = file.path().to_str().unwrap();
        let s = resolve(&["--config", path, "--db", "flag.db"]).unwrap();
        assert_eq!(s.db, PathBuf::from("flag.db"));
        assert_eq!(s.server.max_wait, Duration::from_secs(5));
        assert_eq!(s.queue.durability, Durability::Normal);
    }

    #[test]
    fn bad_settings_name_their_key() {
        let file = config_file("max_wiat = \"5s\"\n");
        let e = resolve(&["--config", file.path().to_str().unwrap()]).unwrap_err();
        assert!(format!("{e:#}").contains("max_wiat"), "{e:#}");
        let file = config_file("max_wait = \"soon\"\n");
        let e = resolve(&["--config", file.path().to_str().unwrap()]).unwrap_err();
        assert!(
            format!("{e:#}").starts_with("max_wait: must be a duration"),
            "{e:#}"
        );
        let e = resolve(&["--durability", "maybe"]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "durability: must be full or normal, got \"maybe\""
        );
        let s = resolve(&["--db", "postgres://cairn@127.0.0.1/jobs"]).unwrap();
        assert_eq!(s.db, PathBuf::from("postgres://cairn@127.0.0.1/jobs"));
        let e = resolve(&["--token", "short"]).unwrap_err();
        assert!(
            e.to_string().starts_with("token: must be at least 16"),
            "{e}"
        );
    }

    #[test]
    fn the_bedrock_protocol_can_be_moved_or_turned_off_but_not_exposed_without_insecure() {
        assert_eq!(resolve(&["--bedrock", "off"]).unwrap().bedrock, None);
        assert_eq!(
            resolve(&["--bedrock", "127.0.0.1:9999"]).unwrap().bedrock,
            Some("127.0.0.1:9999".parse().unwrap())
        );
        let e = resolve(&["--bedrock", "somewhere"]).unwrap_err();
        assert!(
            e.to_string().starts_with("bedrock: must be an address"),
            "{e}"
        );
        let e = resolve(&["--bedrock", "0.0.0.0:8888", "--token", "0123456789abcdef"]).unwrap_err();
        assert!(e.to_string().contains("no authentication"), "{e}");
        assert!(resolve(&["--bedrock", "0.0.0.0:8888", "--insecure"]).is_ok());
    }

    #[test]
    fn allowed_hosts_come_from_flags_the_environment_or_the_file_and_must_be_names() {
        let s = resolve(&[
            "--allowed-host",
            "cairn",
            "--allowed-host",
            "cairn.jobs.svc",
        ])
        .unwrap();
        assert_eq!(s.server.allowed_hosts, ["cairn", "cairn.jobs.svc"]);
        let file = config_file("allowed_hosts = [\"queue\"]\n");
        let s = resolve(&["--config", file.path().to_str().unwrap()]).unwrap();
        assert_eq!(s.server.allowed_hosts, ["queue"]);
        for bad in ["cairn:6670", "", "a b", "*"] {
            let e = resolve(&["--allowed-host", bad]).unwrap_err().to_string();
            assert!(e.starts_with("allowed_hosts:"), "{bad:?}: {e}");
        }
    }

    #[test]
    fn tls_files_go_together_and_the_bedrock_tls_port_needs_them() {
        assert!(resolve(&[]).unwrap().tls.is_none());
        let s = resolve(&[
            "--tls-cert",
            "c.pem",
            "--tls-key",
            "k.pem",
            "--bedrock-tls",
            "127.0.0.1:8889",
        ])
        .unwrap();
        let tls = s.tls.unwrap();
        assert_eq!(
            (tls.cert.to_str(), tls.key.to_str()),
            (Some("c.pem"), Some("k.pem"))
        );
        assert_eq!(s.bedrock_tls, Some("127.0.0.1:8889".parse().unwrap()));
        let file =
            config_file("tls_cert = \"c.pem\"\ntls_key = \"k.pem\"\ntls_client_ca = \"ca.pem\"\n");
        let s = resolve(&["--config", file.path().to_str().unwrap()]).unwrap();
        assert_eq!(s.tls.unwrap().client_ca.unwrap().to_str(), Some("ca.pem"));
        for (args, starts) in [
            (&["--tls-cert", "c.pem"][..], "tls_key:"),
            (&["--tls-key", "k.pem"][..], "tls_cert:"),
            (&["--tls-client-ca", "ca.pem"][..], "tls_client_ca:"),
            (&["--bedrock-tls", "127.0.0.1:8889"][..], "bedrock_tls:"),
            (
                &["--bedrock-tls", "nowhere"][..],
                "bedrock_tls: must be an address",
            ),
        ] {
            let e = resolve(args).unwrap_err().to_string();
            assert!(e.starts_with(starts), "{args:?}: {e}");
        }
        // Off loopback, the Bedrock protocol's TLS port needs client certificates (its only authentication).
        let tls = [
            "--tls-cert",
            "c.pem",
            "--tls-key",
            "k.pem",
            "--bedrock-tls",
            "0.0.0.0:8889",
        ];
        let e = resolve(&tls).unwrap_err().to_string();
        assert!(e.contains("--tls-client-ca"), "{e}");
        assert!(resolve(&[&tls[..], &["--tls-client-ca", "ca.pem"]].concat()).is_ok());
    }

    #[test]
    fn connection_guards_come_from_flags_or_the_file_and_are_checked() {
        let s = resolve(&[]).unwrap();
        assert_eq!(s.server.request_timeout, Duration::from_secs(30));
        assert_eq!(s.server.idle_timeout, Duration::from_secs(120));
        assert_eq!(
            s.server.max_connections,
            cairn_server::budget::connections_for_open_file_limit()
        );
        let file = config_file(
            "request_timeout = \"10s\"\nidle_timeout = \"5m\"\nmax_connections = 500\n",
        );
        let path = file.path().to_str().unwrap();
        let s = resolve(&["--config", path, "--max-connections", "64"]).unwrap();
        assert_eq!(s.server.request_timeout, Duration::from_secs(10));
        assert_eq!(s.server.idle_timeout, Duration::from_secs(300));
        assert_eq!(s.server.max_connections, 64);
        let e = resolve(&["--request-timeout", "30ms"]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "request_timeout: must be at least 1s, got 30ms"
        );
        let e = resolve(&["--max-connections", "0"]).unwrap_err();
        assert_eq!(e.to_string(), "max_connections: must be at least 1");
    }

    #[test]
    fn a_public_address_needs_a_token_or_insecure() {
        let e = resolve(&["--http", "0.0.0.0:6670"]).unwrap_err();
        assert!(e.to_string().contains("--insecure"), "{e}");
        assert!(resolve(&["--http", "0.0.0.0:6670", "--insecure"]).is_ok());
        assert!(resolve(&["--http", "0.0.0.0:6670", "--token", "0123456789abcdef"]).is_ok());
    }
}
