//! [`ServerConfig`], the server's settings, and [`AppState`], what every handler gets.

use std::sync::Arc;
use std::time::Duration;

use cairn::Queue;
use tokio_util::sync::CancellationToken;

/// The HTTP server's settings, with production defaults.
#[derive(Clone)]
pub struct ServerConfig {
    /// The admin token: with it, a request may do everything (`--token`).
    pub token: Option<String>,
    /// The tokens of `--token-file`, each with a name and a role. With this or `token`, every request but the
    /// liveness check must carry one of them (`Authorization: Bearer <token>`), and may do what its role allows.
    pub tokens: crate::credentials::Credentials,
    /// The longest a dequeue may wait for a job (a long poll); longer requests wait this long.
    pub max_wait: Duration,
    /// The largest request body accepted, in bytes.
    pub max_body_bytes: usize,
    /// The most jobs one batch enqueue may hold.
    pub max_batch_jobs: usize,
    /// How long shutdown waits for in-flight requests before dropping them.
    pub shutdown_grace: Duration,
    /// A request must arrive whole, headers and body, within this long of its first byte (a new connection's
    /// first request, of the connection); a request under way, a long poll included, is not bound by it. The
    /// Bedrock listener of `cairn serve` takes it too.
    pub request_timeout: Duration,
    /// A connection with no request under way is closed after this long (the Bedrock listener's too).
    pub idle_timeout: Duration,
    /// The most connections open at once, HTTP and Bedrock together. When they are all open, the connection idle
    /// the longest is closed to make room for a new one; when every one has a request under way, the new one is
    /// refused (`503`). By default, what the open-file limit leaves room for.
    pub max_connections: usize,
    /// Host names a server without a token answers besides `localhost` and IP addresses: its service names
    /// (`cairn` in docker-compose, `cairn.jobs.svc` in Kubernetes). Other names are refused, against DNS
    /// rebinding (see `auth.rs`).
    pub allowed_hosts: Vec<String>,
    /// When set, the port speaks HTTPS only, with these certificates (`tls.rs`).
    pub tls: Option<Arc<crate::tls::Tls>>,
}

impl ServerConfig {
    /// Whether requests must carry a token.
    pub fn has_tokens(&self) -> bool {
        self.token.is_some() || !self.tokens.is_empty()
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            token: None,
            tokens: crate::credentials::Credentials::none(),
            max_wait: Duration::from_secs(60),
            max_body_bytes: 16 * 1024 * 1024,
            max_batch_jobs: 10_000,
            shutdown_grace: Duration::from_secs(10),
            // As the Bedrock port: far more than any honest client needs to send a request.
            request_timeout: Duration::from_secs(30),
            // Longer than the connection pools of common clients keep an idle connection (reqwest and Go 90 s,
            // curl 118 s), so that they close first and never send on a connection the server is closing.
            idle_timeout: Duration::from_secs(120),
            max_connections: crate::budget::connections_for_open_file_limit(),
            allowed_hosts: Vec::new(),
            tls: None,
        }
    }
}

impl std::fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The token is a secret: say whether there is one, never what it is.
        f.debug_struct("ServerConfig")
            .field("token", &self.token.as_ref().map(|_| "<set>"))
            .field("max_wait", &self.max_wait)
            .field("max_body_bytes", &self.max_body_bytes)
            .field("max_batch_jobs", &self.max_batch_jobs)
            .field("shutdown_grace", &self.shutdown_grace)
            .field("request_timeout", &self.request_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .field("max_connections", &self.max_connections)
            .finish()
    }
}

/// What handlers share: the queue, the settings, and the shutdown signal that ends long polls.
#[derive(Clone)]
pub struct AppState {
    /// The engine.
    pub queue: Queue,
    /// The settings.
    pub config: Arc<ServerConfig>,
    /// Cancelled when the server starts shutting down.
    pub shutdown: CancellationToken,
}
