//! Cairn's server: the engine behind an HTTP/JSON API (`/v1/…`), with bearer-token auth, request limits, an
//! OpenAPI document generated from the handlers, and a graceful shutdown that answers long polls first.
//!
//! The modules: `bedrock` (the Bedrock::Jobs text protocol, being built), `routes` (one file per area of the API), `body` (the JSON body extractor that names bad fields),
//! `error` (every error to `{"error": {…}}` and its status code), `auth` (tokens, and the loopback-only rule),
//! `openapi` (the document's fixed parts), `state` (settings and what handlers share), `dashboard` (the web page at
//! `/` and its embedded files). Validation and every
//! decision about jobs belong to the engine; this crate only translates.

#![warn(missing_docs)]

mod auth;
pub mod bedrock;
mod body;
mod dashboard;
mod error;
mod openapi;
mod routes;
mod state;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request};
use axum::http::Method;
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::get;
use axum::serve::ListenerExt;
use cairn::Queue;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub use auth::check_exposure;
pub use error::ApiError;
pub use state::{AppState, ServerConfig};

use crate::openapi::ApiDoc;
use crate::routes::{config, health, jobs, leases, queues, recurring, stats, workers};

/// The API's routes and their OpenAPI document, built from the same lists.
fn api() -> (Router<AppState>, utoipa::openapi::OpenApi) {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(jobs::enqueue, jobs::list_jobs))
        .routes(routes!(jobs::enqueue_batch))
        .routes(routes!(jobs::get_job, jobs::delete))
        .routes(routes!(jobs::cancel))
        .routes(routes!(jobs::track))
        .routes(routes!(jobs::untrack))
        .routes(routes!(leases::dequeue))
        .routes(routes!(leases::heartbeat))
        .routes(routes!(leases::checkpoint))
        .routes(routes!(leases::update))
        .routes(routes!(leases::finish))
        .routes(routes!(leases::finish_many))
        .routes(routes!(leases::retry))
        .routes(routes!(leases::fail))
        .routes(routes!(leases::release))
        .routes(routes!(workers::list_workers))
        .routes(routes!(
            recurring::set_recurring,
            recurring::remove_recurring
        ))
        .routes(routes!(recurring::list_recurring))
        .routes(routes!(queues::list_queues))
        .routes(routes!(queues::pause))
        .routes(routes!(queues::resume))
        .routes(routes!(queues::set_concurrency))
        .routes(routes!(queues::set_rate))
        .routes(routes!(queues::set_aging))
        .routes(routes!(queues::peek))
        .routes(routes!(queues::list_failures))
        .routes(routes!(queues::unfail))
        .routes(routes!(config::list_config))
        .routes(routes!(
            config::get_config,
            config::set_config,
            config::unset_config
        ))
        .routes(routes!(stats::stats))
        .routes(routes!(stats::worker_stats))
        .routes(routes!(stats::activity))
        .routes(routes!(stats::sql))
        .routes(routes!(stats::metrics))
        .routes(routes!(workers::stop_worker))
        .routes(routes!(health::health))
        .merge(routes::declared::routes())
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
    let app = if state.config.token.is_some() {
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
    task: JoinHandle<std::io::Result<()>>,
}

impl Server {
    /// Starts serving `queue` on `listener`.
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
        let state = AppState {
            queue,
            config: Arc::new(config),
            shutdown: shutdown.clone(),
        };
        let app = router(state);
        let signal = shutdown.clone();
        // Small answers must not wait for the peer's delayed ACK (Nagle's algorithm): without TCP_NODELAY, a
        // response written in two pieces can stall for 40 ms.
        let listener = listener.tap_io(|tcp| {
            if let Err(e) = tcp.set_nodelay(true) {
                tracing::debug!(error = %e, "could not set TCP_NODELAY on a connection");
            }
        });
        let task = tokio::spawn(async move {
            let server =
                axum::serve(listener, app).with_graceful_shutdown(signal.clone().cancelled_owned());
            // Graceful shutdown waits for requests in flight; long polls end at once, anything else gets `grace`.
            tokio::select! {
                served = server.into_future() => served,
                () = async { signal.cancelled().await; tokio::time::sleep(grace).await } => {
                    // Connections run in their own tasks and may still finish; the queue closes next, after which
                    // they can only answer 503.
                    tracing::warn!(?grace, "requests still running at the end of the shutdown grace; not waiting for them");
                    Ok(())
                }
            }
        });
        Ok(Server {
            addr,
            shutdown,
            task,
        })
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
