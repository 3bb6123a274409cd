//! The Bedrock::Jobs commands over TCP, checked against the status lines and bodies of the reference: the
//! harness here, the tests by area in `protocol` (the commands and their rules) and `clients` (what Bedrock's own
//! clients rely on: their job names, their data as written, mocked jobs, `Query:`) and `suite` (cases of
//! Bedrock's own test suite).

mod clients;
mod protocol;
mod suite;

use std::sync::Arc;
use std::time::Duration;

use cairn::Queue;
use cairn_server::bedrock::{BedrockCommands, BedrockConfig, serve};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// Whether this copy of the module runs on PostgreSQL (see `main.rs`).
const POSTGRES: bool = cairn::__private::is_postgres_module(module_path!());

/// A queue on a fresh database (a SQLite file, or a PostgreSQL database of its own) with the Bedrock protocol in
/// front of it.
pub struct Bedrock {
    _dir: tempfile::TempDir,
    _database: Option<cairn::__private::TestDatabase>,
    pub queue: Queue,
    addr: std::net::SocketAddr,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Bedrock {
    pub async fn start() -> Bedrock {
        let dir = tempfile::tempdir().unwrap();
        let database = POSTGRES.then(cairn::__private::TestDatabase::new);
        let location = match &database {
            Some(database) => std::path::PathBuf::from(&database.url),
            None => dir.path().join("cairn.db"),
        };
        let queue = Queue::open(location).await.unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let shutdown = CancellationToken::new();
        let commands = Arc::new(BedrockCommands::new(queue.clone()));
        let task = tokio::spawn({
            let shutdown = shutdown.clone();
            async move {
                let budget = cairn_server::ConnectionBudget::new(10_000);
                serve(
                    listener,
                    commands,
                    BedrockConfig::default(),
                    budget,
                    shutdown,
                    None,
                )
                .await
                .unwrap();
            }
        });
        Bedrock {
            _dir: dir,
            _database: database,
            queue,
            addr,
            shutdown,
            task,
        }
    }

    pub async fn connect(&self) -> Conn {
        Conn(TcpStream::connect(self.addr).await.unwrap())
    }

    pub async fn stop(self) {
        self.shutdown.cancel();
        self.task.await.unwrap();
        self.queue.close(Duration::from_secs(5)).await.unwrap();
    }
}

/// One client connection.
pub struct Conn(pub TcpStream);

/// A response: its status line and its body, as JSON (`Value::Null` when empty or not JSON) and as sent.
#[derive(Debug)]
pub struct Reply {
    pub status: String,
    pub body: Value,
    pub text: String,
}

impl Conn {
    /// Sends `verb` with `headers` (each `name: value`) and reads the response.
    pub async fn send(&mut self, verb: &str, headers: &[(&str, &str)]) -> Reply {
        let mut request = format!("{verb}\r\n");
        for (name, value) in headers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        request.push_str("Content-Length: 0\r\n\r\n");
        self.0.write_all(request.as_bytes()).await.unwrap();
        self.read_reply().await
    }

    pub async fn read_reply(&mut self) -> Reply {
        let mut buffer = Vec::new();
        let mut byte = [0u8; 1];
        while !buffer.ends_with(b"\r\n\r\n") {
            let n = tokio::time::timeout(Duration::from_secs(30), self.0.read(&mut byte))
                .await
                .expect("a reply")
                .unwrap();
            assert_eq!(
                n,
                1,
                "the connection closed mid-reply: {:?}",
                String::from_utf8_lossy(&buffer)
            );
            buffer.push(byte[0]);
        }
        let head = String::from_utf8(buffer).unwrap();
        let status = head.lines().next().unwrap().to_owned();
        let last = head.trim_end().lines().last().unwrap();
        let length: usize = last
            .strip_prefix("Content-Length: ")
            .unwrap_or_else(|| panic!("Content-Length must be the last header: {head:?}"))
            .parse()
            .unwrap();
        let mut body = vec![0u8; length];
        self.0.read_exact(&mut body).await.unwrap();
        let text = String::from_utf8(body).unwrap();
        let body = serde_json::from_str(&text).unwrap_or(Value::Null);
        Reply { status, body, text }
    }
}

pub fn keys(value: &Value) -> Vec<&str> {
    value
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect()
}
