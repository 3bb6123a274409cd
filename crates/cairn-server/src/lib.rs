//! Cairn's server: the engine behind an HTTP/JSON API (`/v1/…`), with bearer-token auth, request limits, an
//! OpenAPI document generated from the handlers, and a graceful shutdown that answers long polls first.
//!
//! The modules: `bedrock` (the Bedrock::Jobs text protocol, being built), `routes` (one file per area of the API), `body` (the JSON body extractor that names bad fields),
//! `connection` (the HTTP listener: request and idle timeouts), `budget` (the cap on connections both listeners share),
//! `error` (every error to `{"error": {…}}` and its status code), `auth` (tokens, and the loopback-only rule),
//! `openapi` (the document's fixed parts), `state` (settings and what handlers share), `dashboard` (the web page at
//! `/` and its embedded files). Validation and every
//! decision about jobs belong to the engine; this crate only translates.

#![warn(missing_docs)]

mod auth;
pub mod bedrock;
mod body;
pub mod budget;
mod connection;
pub mod credentials;
mod credentials_fuzz;
mod dashboard;
mod error;
mod openapi;
mod reach;
mod routes;
mod state;
pub mod tls;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request};
use axum::http::Method;
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::get;
use cairn::Queue;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// The `credentials` fuzz target's harness (`fuzz/`, `docs/fuzzing.md`); not part of the API.
#[doc(hidden)]
pub mod __fuzz {
    pub use crate::credentials_fuzz::credentials;
}

pub use auth::{Caller, check_exposure};
pub use budget::ConnectionBudget;
pub use error::ApiError;
pub use state::{AppState, ServerConfig};

use crate::openapi::ApiDoc;

/// The API's routes and their OpenAPI document, built from the same lists: every declared route, and the two that
/// cannot be one (the event stream, the metrics).
fn api() -> (Router<AppState>, utoipa::openapi::OpenApi) {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .merge(routes::declared::routes())
        .routes(routes!(routes::events::events))
        .routes(routes!(routes::metrics::metrics))
        .routes(routes!(routes::token::token))
        .split_for_parts()
}

/// The OpenAPI document the server serves at `/v1/openapi.json`.
pub fn openapi_document() -> utoipa::openapi::OpenApi {
    api().1
}

/// The whole HTTP application over `state`.
pub fn router(state: AppState) -> Router {
    let (api, doc) = api();
    let doc = Arc::new(doc);
    let app = api
        .route(
            "/v1/openapi.json",
            get(move || {
                let doc = doc.clone();
                async move { axum::Json(doc.as_ref().clone()) }
            }),
        )
        .fallback(|method: Method, request: Request| async move {
            ApiError::no_route(method.as_str(), request.uri().path())
        })
        .method_not_allowed_fallback(|method: Method, request: Request| async move {
            ApiError::method_not_allowed(method.as_str(), request.uri().path())
        })
        .layer(DefaultBodyLimit::max(state.config.max_body_bytes));
    // Without a token there is nothing to check: no layer, no cost per request.
    let app = if state.config.has_tokens() {
        app.layer(middleware::from_fn_with_state(
            state.clone(),
            auth::require_token,
        ))
    } else {
        app
    };
    // The dashboard's files hold no data, so they are merged outside the token layer; its API calls are not.
    let app = app.merge(dashboard::router());
    app.layer(middleware::from_fn_with_state(
        state.clone(),
        auth::refuse_browser_attacks,
    ))
    .layer(middleware::from_fn(log_request))
    .with_state(state)
}

/// Logs each request with its status and duration; failures at a level that gets noticed.
async fn log_request(request: Request, next: Next) -> Response {
    let started = Instant::now();
    // Both are cheap clones (the URI shares its bytes), so logging costs nothing when it is off.
    let method = request.method().clone();
    let uri = request.uri().clone();
    let response = next.run(request).await;
    let status = response.status();
    let elapsed_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
    let path = uri.path();
    if status.is_server_error() {
        tracing::warn!(%method, path, status = status.as_u16(), elapsed_us, "request failed");
    } else {
        tracing::debug!(%method, path, status = status.as_u16(), elapsed_us, "request");
    }
    response
}

/// A running HTTP server. Stop it with [`Server::shutdown`].
pub struct Server {
    addr: SocketAddr,
    shutdown: CancellationToken,
    budget: Arc<ConnectionBudget>,
    task: JoinHandle<std::io::Result<()>>,
}

impl Server {
    /// Starts serving `queue` on `listener`, with a connection budget of `config.max_connections` (which the
    /// Bedrock listener may share: see [`Server::connections`]).
    ///
    /// # Errors
    /// When the listener's address cannot be read.
    pub fn start(
        queue: Queue,
        listener: TcpListener,
        config: ServerConfig,
    ) -> std::io::Result<Server> {
        let addr = listener.local_addr()?;
        let shutdown = CancellationToken::new();
        let grace = config.shutdown_grace;
        let budget = ConnectionBudget::new(config.max_connections);
        let guards = connection::Guards {
            request_timeout: config.request_timeout,
            idle_timeout: config.idle_timeout,
        };
        let tls = config.tls.clone();
        let state = AppState {
            queue,
            config: Arc::new(config),
            shutdown: shutdown.clone(),
        };
        let app = router(state);
        let serving =
            connection::serve(listener, app, budget.clone(), guards, shutdown.clone(), tls);
        let signal = shutdown.clone();
        let task = tokio::spawn(async move {
            // Shutdown waits for requests in flight; long polls end at once, anything else gets `grace`.
            tokio::select! {
                () = serving => {}
                () = async { signal.cancelled().await; tokio::time::sleep(grace).await } => {
                    // Dropping the listener's future drops the connections still open; the queue closes next.
                    tracing::warn!(?grace, "requests still running at the end of the shutdown grace; dropping them");
                }
            }
            Ok(())
        });
        Ok(Server {
            addr,
            shutdown,
            budget,
            task,
        })
    }

    /// The connection budget, for another listener to share (the Bedrock protocol's in `cairn serve`).
    pub fn connections(&self) -> Arc<ConnectionBudget> {
        self.budget.clone()
    }

    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting connections, answers waiting long polls with no job, and waits for requests in flight (up
    /// to the configured grace). The queue stays open: close it afterwards.
    ///
    /// # Errors
    /// An I/O error from the accept loop.
    pub async fn shutdown(self) -> std::io::Result<()> {
        self.shutdown.cancel();
        match self.task.await {
            Ok(result) => result,
            Err(e) => Err(std::io::Error::other(format!(
                "the server task ended abnormally: {e}"
            ))),
        }
    }
}
