//! `cairn serve`: open the queue, serve the HTTP API and the Bedrock text protocol, and on SIGTERM or Ctrl-C shut
//! down in order: stop accepting, answer waiting long polls, finish requests in flight, then close the queue
//! (which flushes it).

use cairn::Jobs;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use cairn::Queue;
use cairn_server::bedrock::{BedrockCommands, BedrockConfig};
use cairn_server::budget::{RESERVED_DESCRIPTORS, open_file_limit};
use cairn_server::tls::Tls;
use cairn_server::{ConnectionBudget, Server};
use clap::Args;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::config::ServeSettings;
use crate::exit::Code;

/// `cairn serve` flags. Each also reads a `CAIRN_*` environment variable and a key of the config file.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// A TOML config file with any of these settings (`max_wait = "60s"`); flags and environment win over it.
    #[arg(long, env = "CAIRN_CONFIG")]
    pub config: Option<PathBuf>,
    /// The database: a SQLite file path (created if missing) or a sqlite:// URL [default: cairn.db].
    #[arg(long, env = "CAIRN_DB")]
    pub db: Option<String>,
    /// Where the HTTP API listens [default: 127.0.0.1:6670].
    #[arg(long, env = "CAIRN_HTTP", value_name = "ADDR")]
    pub http: Option<SocketAddr>,
    /// Where the Bedrock::Jobs text protocol listens, or `off` [default: 127.0.0.1:8888]. It has no
    /// authentication: a non-loopback address needs --insecure.
    #[arg(long, env = "CAIRN_BEDROCK", value_name = "ADDR|off")]
    pub bedrock: Option<String>,
    /// Where the Bedrock text protocol listens over TLS (with --tls-cert's certificate), or `off`
    /// [default: off]. Off loopback, clients must show a certificate (--tls-client-ca) unless --insecure.
    #[arg(long, env = "CAIRN_BEDROCK_TLS", value_name = "ADDR|off")]
    pub bedrock_tls: Option<String>,
    /// Serve HTTPS (and TLS on --bedrock-tls) with this certificate chain, a PEM file; read again when it changes
    /// on disk or on SIGHUP.
    #[arg(long, env = "CAIRN_TLS_CERT", value_name = "FILE")]
    pub tls_cert: Option<PathBuf>,
    /// The certificate's private key, a PEM file (unencrypted).
    #[arg(long, env = "CAIRN_TLS_KEY", value_name = "FILE")]
    pub tls_key: Option<PathBuf>,
    /// Require clients to show a certificate signed by this CA (PEM): mutual TLS, on both TLS ports.
    #[arg(long, env = "CAIRN_TLS_CLIENT_CA", value_name = "FILE")]
    pub tls_client_ca: Option<PathBuf>,
    /// Tokens with a name and a role each (read, enqueue, work, admin), in a TOML file of `[[tokens]]` tables that
    /// holds their SHA-256, not the tokens ([server.md](docs/server.md)); with it, every HTTP request but the
    /// liveness check needs one of them or --token.
    #[arg(long, env = "CAIRN_TOKEN_FILE", value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Require this bearer token on every HTTP request (at least 16 characters).
    #[arg(long, env = "CAIRN_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// A host name a server without a token answers to besides localhost and IP addresses, such as its service
    /// name (`cairn` in docker-compose); repeat for several. Other names are refused, against DNS rebinding.
    #[arg(
        long = "allowed-host",
        env = "CAIRN_ALLOWED_HOSTS",
        value_delimiter = ',',
        value_name = "NAME"
    )]
    pub allowed_hosts: Vec<String>,
    /// Allow listening on a non-loopback address without a token.
    #[arg(long)]
    pub insecure: bool,
    /// `full` fsyncs before acknowledging a change; `normal` survives a crash of Cairn but not of the machine
    /// [default: full].
    #[arg(long, env = "CAIRN_DURABILITY")]
    pub durability: Option<String>,
    /// Jobs found running at start: `keep-leases` leaves them to their workers, which outlive a restart of the
    /// server (a job whose worker is gone too runs again when its lease expires); `retry` or `backoff` runs them
    /// again at once or after their backoff [default: keep-leases].
    #[arg(long, env = "CAIRN_RECOVERY", value_name = "POLICY")]
    pub recovery: Option<String>,
    /// A job's lease without a heartbeat, unless the job sets its own [default: 60s].
    #[arg(long, allow_hyphen_values = true, value_parser = crate::duration::parse, value_name = "DURATION")]
    pub lease_timeout: Option<Duration>,
    /// Attempts a job gets, unless it sets its own [default: 5].
    #[arg(long)]
    pub max_attempts: Option<u32>,
    /// Delete finished jobs older than this [default: 7 days].
    #[arg(long, allow_hyphen_values = true, value_parser = crate::duration::parse, value_name = "DURATION")]
    pub retention_age: Option<Duration>,
    /// Keep at most this many finished jobs [default: 100000].
    #[arg(long)]
    pub retention_count: Option<u64>,
    /// The largest job data, in bytes [default: 1 MiB].
    #[arg(long, value_name = "BYTES")]
    pub max_data: Option<usize>,
    /// Statistics and metrics count each job name up to the first of these characters, so that names made per
    /// entity (`Worker?accountID=42`) share a row and a series; "" keeps names whole [default: ?].
    #[arg(long, value_name = "CHARACTERS")]
    pub stats_name_cut: Option<String>,
    /// The longest one request may wait: a dequeue for a job, or `GET /v1/jobs/{id}?wait_ms=` for a job to end
    /// [default: 60s].
    #[arg(long, allow_hyphen_values = true, value_parser = crate::duration::parse, value_name = "DURATION")]
    pub max_wait: Option<Duration>,
    /// The largest request body, in bytes [default: 16 MiB].
    #[arg(long, value_name = "BYTES")]
    pub max_body: Option<usize>,
    /// The most jobs in one batch enqueue [default: 10000].
    #[arg(long)]
    pub max_batch: Option<usize>,
    /// How long shutdown waits for requests in flight [default: 10s].
    #[arg(long, allow_hyphen_values = true, value_parser = crate::duration::parse, value_name = "DURATION")]
    pub shutdown_grace: Option<Duration>,
    /// A request must arrive whole (headers and body) within this long of its first byte, on both ports; a long
    /// poll waiting for its answer is not bound by it [default: 30s].
    #[arg(long, env = "CAIRN_REQUEST_TIMEOUT", allow_hyphen_values = true, value_parser = crate::duration::parse, value_name = "DURATION")]
    pub request_timeout: Option<Duration>,
    /// A connection with no request under way is closed after this long, on both ports [default: 120s].
    #[arg(long, env = "CAIRN_IDLE_TIMEOUT", allow_hyphen_values = true, value_parser = crate::duration::parse, value_name = "DURATION")]
    pub idle_timeout: Option<Duration>,
    /// The most connections at once, HTTP and Bedrock together: beyond it the longest idle one is closed, or, if
    /// every one has a request under way, the new one is refused with 503 [default: the open-file limit less 128].
    #[arg(long, env = "CAIRN_MAX_CONNECTIONS", value_name = "N")]
    pub max_connections: Option<usize>,
}

/// Runs the server until SIGTERM or Ctrl-C.
///
/// # Errors
/// Bad settings, a database that cannot be opened, an address that cannot be bound.
pub async fn run(args: ServeArgs) -> anyhow::Result<Code> {
    // First, so that the connection budget's default follows the raised limit.
    raise_open_file_limit();
    let mut settings = ServeSettings::resolve(&args)?;
    let stop_watching = CancellationToken::new();
    let tls = match &settings.tls {
        Some(files) => {
            let tls = Tls::load(files.clone()).map_err(anyhow::Error::msg)?;
            tls.watch(stop_watching.clone());
            // Installed before the server says it listens: a SIGHUP from then on reloads, never kills.
            let hangups = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
                .context("installing a SIGHUP handler")?;
            tokio::spawn(reload_on_sighup(
                hangups,
                tls.clone(),
                stop_watching.clone(),
            ));
            settings.server.tls = Some(tls.clone());
            Some(tls)
        }
        None => None,
    };
    log_connection_budget(settings.server.max_connections);
    if settings.insecure && !settings.server.has_tokens() && !settings.http.ip().is_loopback() {
        tracing::warn!(http = %settings.http, "listening without a token on a non-loopback address (--insecure)");
    }
    let location = cairn::redacted_location(&settings.db.to_string_lossy());
    let queue = Queue::open_with(&settings.db, settings.queue.clone())
        .await
        .with_context(|| format!("opening the database {location}"))?;
    // Options set at run time win over the flags, environment and file: say so, or a changed flag seems ignored.
    for entry in queue.config().await.context("reading the options")? {
        if entry.set_at.is_some() && entry.value != entry.default {
            tracing::info!(key = %entry.key, value = %entry.value, instead_of = %entry.default,
                "using the value set with `cairn config set` (`cairn config unset` goes back to the flag)");
        }
    }
    let listener = TcpListener::bind(settings.http)
        .await
        .with_context(|| format!("listening on {}", settings.http))?;
    let server = Server::start(queue.clone(), listener, settings.server.clone())
        .context("starting the HTTP server")?;
    let addr = server.local_addr();
    let bedrock = match settings.bedrock {
        Some(bedrock_addr) => {
            let config = BedrockConfig {
                request_timeout: settings.server.request_timeout,
                idle_timeout: settings.server.idle_timeout,
                ..BedrockConfig::default()
            };
            // One budget for both ports: a flood on one cannot take the other's descriptors.
            Some(start_bedrock(&queue, bedrock_addr, config, server.connections(), None).await?)
        }
        None => None,
    };
    let bedrock_tls = match settings.bedrock_tls {
        Some(bedrock_addr) => {
            let config = BedrockConfig {
                request_timeout: settings.server.request_timeout,
                idle_timeout: settings.server.idle_timeout,
                ..BedrockConfig::default()
            };
            Some(
                start_bedrock(
                    &queue,
                    bedrock_addr,
                    config,
                    server.connections(),
                    tls.clone(),
                )
                .await?,
            )
        }
        None => None,
    };
    tracing::info!(http = %addr, bedrock = ?bedrock.as_ref().map(|b| b.addr), db = %location,
        durability = ?settings.queue.durability, "cairn is serving");
    // A stable line on stdout, for people and for scripts that start Cairn on port 0.
    let bedrock_text = bedrock
        .as_ref()
        .map_or_else(|| "off".to_owned(), |b| b.addr.to_string());
    // The plain Bedrock port's address (or `off`) stays the line's last word, as scripts read it.
    let bedrock_tls_text = bedrock_tls
        .as_ref()
        .map(|b| format!("; bedrock protocol over TLS {}", b.addr))
        .unwrap_or_default();
    let scheme = if tls.is_some() { "https" } else { "http" };
    println!(
        "cairn: listening on {scheme}://{addr} (database {location}){bedrock_tls_text}; bedrock protocol {bedrock_text}"
    );

    let signal = shutdown_signal().await;
    tracing::info!(
        signal,
        "shutting down: no new connections; answering long polls"
    );
    stop_watching.cancel();
    let bedrock_stopped = async {
        let grace = settings.server.shutdown_grace;
        let stop = |listener: Option<BedrockListener>| async move {
            if let Some(listener) = listener {
                listener.stop(grace).await;
            }
        };
        tokio::join!(stop(bedrock), stop(bedrock_tls));
    };
    let (http_stopped, ()) = tokio::join!(server.shutdown(), bedrock_stopped);
    if let Err(e) = http_stopped {
        tracing::error!(error = %e, "the HTTP server failed while shutting down");
    }
    queue
        .close(Duration::from_secs(10))
        .await
        .context("closing the queue")?;
    tracing::info!("stopped");
    Ok(Code::Success)
}

/// The Bedrock protocol's listener, running.
struct BedrockListener {
    addr: SocketAddr,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl BedrockListener {
    /// Stops accepting, answers waiting GetJobs, and waits up to `grace` for the commands in flight.
    async fn stop(self, grace: Duration) {
        self.shutdown.cancel();
        if tokio::time::timeout(grace, self.task).await.is_err() {
            tracing::warn!(
                ?grace,
                "Bedrock connections still busy at the end of the shutdown grace"
            );
        }
    }
}

async fn start_bedrock(
    queue: &Queue,
    addr: SocketAddr,
    config: BedrockConfig,
    budget: Arc<ConnectionBudget>,
    tls: Option<Arc<Tls>>,
) -> anyhow::Result<BedrockListener> {
    let listener = TcpListener::bind(addr).await.with_context(|| {
        format!(
            "listening on {addr} for the Bedrock protocol (pass --bedrock off, or another address)"
        )
    })?;
    let addr = listener
        .local_addr()
        .context("reading the Bedrock listener's address")?;
    let shutdown = CancellationToken::new();
    let commands = Arc::new(BedrockCommands::new(queue.clone()));
    let task = tokio::spawn(cairn_server::bedrock::serve(
        listener,
        commands,
        config,
        budget,
        shutdown.clone(),
        tls,
    ));
    Ok(BedrockListener {
        addr,
        shutdown,
        task,
    })
}

/// Reads the TLS files again at each of `hangups` (SIGHUP), until `stop`.
async fn reload_on_sighup(
    mut hangup: tokio::signal::unix::Signal,
    tls: Arc<Tls>,
    stop: CancellationToken,
) {
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = hangup.recv() => {}
        }
        let tls = tls.clone();
        let _ = tokio::task::spawn_blocking(move || tls.reload_and_log("SIGHUP")).await;
    }
}

/// Waits for SIGTERM or SIGINT (Ctrl-C) and says which.
pub async fn shutdown_signal() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("installing a SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("installing a SIGINT handler");
    tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
    }
}

/// Logs the connection budget beside the open-file limit, and warns when the limit leaves no room for it.
fn log_connection_budget(max_connections: usize) {
    let limit = open_file_limit();
    tracing::info!(
        max_connections,
        open_file_limit = limit,
        "connection budget (HTTP and Bedrock together)"
    );
    if let Some(limit) = limit
        && max_connections as u64 + RESERVED_DESCRIPTORS > limit
    {
        tracing::warn!(
            max_connections,
            open_file_limit = limit,
            reserved = RESERVED_DESCRIPTORS,
            "max_connections leaves too few of the open-file limit's descriptors for the database: \
             under a flood of connections the server may run out (raise `ulimit -n` or lower max_connections)"
        );
    }
}

/// Raises the soft limit on open files to the hard limit: a server holding thousands of idle long polls needs a
/// descriptor for each, and the usual soft limit of 1024 is far too low.
pub fn raise_open_file_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write the struct passed to them.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max
        {
            let wanted = libc::rlimit {
                rlim_cur: limit.rlim_max,
                rlim_max: limit.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &wanted) != 0 {
                tracing::debug!("could not raise the open-file limit");
            }
        }
    }
}
