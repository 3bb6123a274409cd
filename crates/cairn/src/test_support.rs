//! What the tests of Cairn's crates share to run on PostgreSQL (reached through `cairn::__private`, not part of
//! the API): a database of their own on the private cluster `scripts/test` starts, and which copy of a test module
//! runs on which backend.

#[cfg(feature = "postgres")]
use std::sync::atomic::{AtomicU32, Ordering};

#[cfg(feature = "postgres")]
use postgres::{Client, NoTls};

/// A database of its own on the private PostgreSQL cluster named by `CAIRN_TEST_POSTGRES_URL`, dropped when the
/// test ends.
#[cfg(feature = "postgres")]
pub struct TestDatabase {
    admin: String,
    name: String,
    /// The database's URL.
    pub url: String,
}

#[cfg(feature = "postgres")]
impl TestDatabase {
    /// Creates the database (on a thread of its own: the synchronous client cannot run inside an async test).
    ///
    /// # Panics
    /// When `CAIRN_TEST_POSTGRES_URL` is not set or the cluster cannot be reached: the tests need it.
    pub fn new() -> TestDatabase {
        std::thread::spawn(TestDatabase::create)
            .join()
            .expect("creating a test database")
    }

    fn create() -> TestDatabase {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let admin = std::env::var("CAIRN_TEST_POSTGRES_URL").unwrap_or_else(|_| {
            panic!(
                "CAIRN_TEST_POSTGRES_URL is not set: run the tests with scripts/test, which starts a private \
                 PostgreSQL cluster (scripts/postgres) and sets it"
            )
        });
        let name = format!(
            "cairn_test_{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let mut client = Client::connect(&admin, NoTls).expect("connecting to the test cluster");
        client
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .expect("creating a test database");
        let url = match admin.rsplit_once('/') {
            Some((server, _)) => format!("{server}/{name}"),
            None => panic!("CAIRN_TEST_POSTGRES_URL has no database: {admin}"),
        };
        TestDatabase { admin, name, url }
    }

    /// A session on the database (not from async code).
    ///
    /// # Panics
    /// When it cannot connect.
    pub fn connect(&self) -> Client {
        Client::connect(&self.url, NoTls).expect("connecting to the test database")
    }
}

#[cfg(feature = "postgres")]
impl Default for TestDatabase {
    fn default() -> Self {
        TestDatabase::new()
    }
}

#[cfg(feature = "postgres")]
impl Drop for TestDatabase {
    fn drop(&mut self) {
        let (admin, name) = (self.admin.clone(), self.name.clone());
        let _ = std::thread::spawn(move || {
            if let Ok(mut client) = Client::connect(&admin, NoTls) {
                let _ =
                    client.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"));
            }
        })
        .join();
    }
}

/// A PostgreSQL cluster of a test's own (`scripts/postgres`), for the tests that stop and start the server under
/// Cairn: the shared cluster serves every other test at the same time. Removed when dropped.
#[cfg(feature = "postgres")]
pub struct PrivateCluster {
    /// The directory the cluster's own is in, removed with it.
    parent: std::path::PathBuf,
    dir: std::path::PathBuf,
    /// The cluster's `cairn` database.
    pub url: String,
}

#[cfg(feature = "postgres")]
impl PrivateCluster {
    /// Creates and starts a cluster (several seconds: `initdb`).
    ///
    /// # Panics
    /// When `scripts/postgres` fails.
    pub fn start() -> PrivateCluster {
        PrivateCluster::start_with(&[])
    }

    /// Creates and starts a cluster that takes only TLS connections, with the certificate and key
    /// `certs/server.crt` and `certs/server.key`, checking clients' certificates against `certs/ca.crt`; role
    /// `cairn_cert`, owner of database `cairn_cert`, must show one (`scripts/postgres start DIR CERTS`).
    ///
    /// # Panics
    /// When `scripts/postgres` fails.
    pub fn start_with_tls(certs: &std::path::Path) -> PrivateCluster {
        PrivateCluster::start_with(&[certs.to_str().expect("a UTF-8 path")])
    }

    fn start_with(extra: &[&str]) -> PrivateCluster {
        let parent = PrivateCluster::parent();
        let dir = parent.join("pg");
        let mut args = vec!["start", dir.to_str().unwrap()];
        args.extend(extra);
        let url = PrivateCluster::script(&args);
        PrivateCluster {
            parent,
            dir,
            url: url.trim().to_owned(),
        }
    }

    /// Stops the server, `fast` (sessions ended, a clean shutdown) or `immediate` (as a crash), keeping its data.
    pub fn down(&self, mode: &str) {
        PrivateCluster::script(&["down", self.dir.to_str().unwrap(), mode]);
    }

    /// Starts the server again, on the same port.
    pub fn up(&self) {
        PrivateCluster::script(&["up", self.dir.to_str().unwrap()]);
    }

    /// Creates a hot standby of this cluster that streams from it and is its synchronous standby: from now on the
    /// cluster's commits wait for it (`scripts/postgres standby`).
    ///
    /// # Panics
    /// When `scripts/postgres` fails.
    pub fn standby(&self) -> PrivateCluster {
        let parent = PrivateCluster::parent();
        let dir = parent.join("pg");
        let url =
            PrivateCluster::script(&["standby", dir.to_str().unwrap(), self.dir.to_str().unwrap()]);
        PrivateCluster {
            parent,
            dir,
            url: url.trim().to_owned(),
        }
    }

    /// Promotes this standby to a primary, and returns once it takes writes.
    pub fn promote(&self) {
        PrivateCluster::script(&["promote", self.dir.to_str().unwrap()]);
    }

    /// The server's address, `127.0.0.1:PORT`.
    pub fn address(&self) -> std::net::SocketAddr {
        let rest = self.url.split_once('@').expect("a user in the URL").1;
        let host_port = rest.split_once('/').expect("a database in the URL").0;
        host_port.parse().expect("a host:port address")
    }

    /// A directory of its own under the system's temporary directory, that the server's user can reach.
    fn parent() -> std::path::PathBuf {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let parent = std::env::temp_dir().join(format!(
            "cairn-private-pg-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&parent);
        std::fs::create_dir_all(&parent).expect("creating the cluster's parent directory");
        // `scripts/postgres` runs the server as `postgres` when run as root: it must reach its directory.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(&parent, std::fs::Permissions::from_mode(0o755));
        }
        parent
    }

    fn script(args: &[&str]) -> String {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/postgres");
        let output = std::process::Command::new(script)
            .args(args)
            .output()
            .expect("running scripts/postgres");
        assert!(
            output.status.success(),
            "scripts/postgres {args:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).expect("a URL")
    }
}

#[cfg(feature = "postgres")]
impl Drop for PrivateCluster {
    fn drop(&mut self) {
        let _ = std::process::Command::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../scripts/postgres"
        ))
        .args(["stop", self.dir.to_str().unwrap()])
        .output();
        let _ = std::fs::remove_dir_all(&self.parent);
    }
}

/// Whether the module at `path` (its `module_path!()`) runs on PostgreSQL: test modules meant for every backend are
/// built twice, under a module named `sqlite` and one named `postgres`, at any depth (`it::postgres::harness`) or
/// as the path's last name (`it::postgres`, the module itself).
pub const fn is_postgres_module(path: &str) -> bool {
    let path = path.as_bytes();
    let (inner, last) = (b"::postgres::".as_slice(), b"::postgres".as_slice());
    let mut start = 0;
    while start + inner.len() <= path.len() {
        if starts_with_at(path, start, inner) {
            return true;
        }
        start += 1;
    }
    path.len() >= last.len() && starts_with_at(path, path.len() - last.len(), last)
}

/// Whether `path` holds `needle` from `start` on (a `const fn`, so byte by byte).
const fn starts_with_at(path: &[u8], start: usize, needle: &[u8]) -> bool {
    let mut i = 0;
    while i < needle.len() {
        if start + i >= path.len() || path[start + i] != needle[i] {
            return false;
        }
        i += 1;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::is_postgres_module;

    #[test]
    fn a_module_named_postgres_runs_on_postgresql_at_any_depth() {
        assert!(is_postgres_module("it::postgres::harness"));
        assert!(is_postgres_module("it::postgres"));
        assert!(!is_postgres_module("it::sqlite"));
        assert!(!is_postgres_module("it::sqlite::postgres_backend"));
        assert!(!is_postgres_module("it::postgresql"));
    }
}
