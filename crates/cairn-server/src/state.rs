//! [`ServerConfig`], the server's settings, and [`AppState`], what every handler gets.

use std::sync::Arc;
use std::time::Duration;

use cairn::Queue;
use tokio_util::sync::CancellationToken;

/// The HTTP server's settings, with production defaults.
#[derive(Clone)]
pub struct ServerConfig {
    /// When set, every request must carry `Authorization: Bearer <token>`.
    pub token: Option<String>,
    /// The longest a dequeue may wait for a job (a long poll); longer requests wait this long.
    pub max_wait: Duration,
    /// The largest request body accepted, in bytes.
    pub max_body_bytes: usize,
    /// The most jobs one batch enqueue may hold.
    pub max_batch_jobs: usize,
    /// How long shutdown waits for in-flight requests before dropping them.
    pub shutdown_grace: Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            token: None,
            max_wait: Duration::from_secs(60),
            max_body_bytes: 16 * 1024 * 1024,
            max_batch_jobs: 10_000,
            shutdown_grace: Duration::from_secs(10),
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
