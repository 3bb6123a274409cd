//! The HTTP API through the wire: the server started in process on a loopback port over a fresh database (a SQLite
//! file, or a PostgreSQL database of its own), the Rust client, and raw requests for what the client would never
//! send (bad bodies, missing tokens, unknown routes). The harness is here; the tests by area in `api` (the calls and
//! their errors) and `openapi` (the document against what the server really sends). What needs the `cairn serve`
//! process itself (its flags, signals, restarts, the Bedrock port beside it) is tested in the CLI crate.

mod access;
mod api;
mod openapi;
mod wire;

use std::path::{Path, PathBuf};
use std::time::Duration;

use cairn::Queue;
use cairn_client::Client;
use cairn_server::{Server, ServerConfig};
use serde_json::Value;
use tokio::net::TcpListener;
pub use wire::{raw, take};

pub use crate::poll::{eventually, until_waiting};

/// Whether this copy of the module runs on PostgreSQL (see `main.rs`).
const POSTGRES: bool = cairn::__private::is_postgres_module(module_path!());

/// A running server on its own database, shut down (and its queue closed) when dropped.
pub struct TestServer {
    _dir: tempfile::TempDir,
    queue: Option<Queue>,
    server: Option<Server>,
    url: String,
    token: Option<String>,
    /// The database this server made for itself, dropped after the queue is closed.
    _database: Option<cairn::__private::TestDatabase>,
}

impl TestServer {
    /// A server on a fresh database, configured as `cairn serve` is by default.
    pub async fn spawn() -> TestServer {
        TestServer::spawn_with(ServerConfig::default()).await
    }

    /// A server on a fresh database with `config` (the token, limits, ... that `cairn serve` takes as flags).
    pub async fn spawn_with(config: ServerConfig) -> TestServer {
        let dir = tempfile::tempdir().unwrap();
        let database = POSTGRES.then(cairn::__private::TestDatabase::new);
        let location = match &database {
            Some(database) => PathBuf::from(&database.url),
            None => dir.path().join("cairn.db"),
        };
        TestServer::spawn_at(dir, location, database, config).await
    }

    /// A server on the SQLite file at `path`, whatever the module's backend (for tests that edit the file).
    pub async fn spawn_on_file(path: &Path) -> TestServer {
        let dir = tempfile::tempdir().unwrap();
        TestServer::spawn_at(dir, path.to_owned(), None, ServerConfig::default()).await
    }

    async fn spawn_at(
        dir: tempfile::TempDir,
        location: PathBuf,
        database: Option<cairn::__private::TestDatabase>,
        config: ServerConfig,
    ) -> TestServer {
        let queue = Queue::open(location).await.unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let token = config.token.clone();
        let server = Server::start(queue.clone(), listener, config).unwrap();
        TestServer {
            _dir: dir,
            url: format!("http://{}", server.local_addr()),
            queue: Some(queue),
            server: Some(server),
            token,
            _database: database,
        }
    }

    /// The server's base URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A client for the server (with its token, if it has one).
    pub fn client(&self) -> Client {
        let client = Client::new(&self.url).expect("a valid URL");
        match &self.token {
            Some(token) => client.with_token(token),
            None => client,
        }
    }

    /// Shuts the server down (answering long polls, waiting for requests in flight) and closes the queue.
    async fn shut_down(&mut self) {
        if let Some(server) = self.server.take() {
            tokio::time::timeout(Duration::from_secs(30), server.shutdown())
                .await
                .expect("the server stops in time")
                .unwrap();
        }
        if let Some(queue) = self.queue.take() {
            queue.close(Duration::from_secs(5)).await.unwrap();
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if self.server.is_none() && self.queue.is_none() {
            return;
        }
        // The tests run on a multi-threaded runtime: shut down on it, before the database goes.
        let handle = tokio::runtime::Handle::current();
        tokio::task::block_in_place(|| handle.block_on(self.shut_down()));
    }
}

/// A raw POST of `body` to `path`: (status, JSON body).
pub async fn post(server: &TestServer, path: &str, body: &str) -> (u16, Value) {
    raw(
        reqwest::Method::POST,
        format!("{}{path}", server.url()),
        None,
        Some(body),
    )
    .await
}
