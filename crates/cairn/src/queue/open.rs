//! Opening a queue on each backend, before its writer starts: on SQLite, the lock that makes this process the
//! file's only queue, the writer's connection, migrations, recovery of the jobs a dead process left running and the
//! syncer; on PostgreSQL, the writer's session, migrations, the node's name and the listener. Built without a
//! backend, opening says so.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
#[cfg(feature = "postgres")]
use std::sync::Arc;
use std::time::Duration;

use super::{Opened, Queue};
use crate::clock::to_millis;
use crate::error::{Error, ErrorKind, Result};
use crate::ops::config::Defaults;
use crate::ops::queues::SettingsCache;
use crate::options::{Durability, QueueOptions};
use crate::store::db::Db;
use crate::store::readers::Readers;
use crate::store::writer_db::WriterDb;
#[cfg(feature = "postgres")]
use crate::{
    ops::TokenSource,
    store::db::{Access, PgTransaction},
    store::postgres::{self, writer::PgWriter},
};
#[cfg(feature = "sqlite")]
use crate::{
    ops::maintenance,
    store::sqlite::{
        checkpointer::Checkpointer, connection, migrations, readers::SqliteReaders, syncer::Syncer,
    },
};

#[cfg(feature = "sqlite")]
pub(super) async fn sqlite(
    path: PathBuf,
    options: QueueOptions,
    defaults: Defaults,
) -> Result<Queue> {
    let opening = path.clone();
    let opening_defaults = defaults.clone();
    let recovery = options.recovery;
    let clock = options.clock.clone();
    let durability = options.durability;
    let (lock, conn, checkpointer, syncer, settings) =
        tokio::task::spawn_blocking(move || -> Result<_> {
            let lock = lock_database(&opening)?;
            let mut conn = connection::open_writer(&opening)?;
            let now_ms = to_millis(clock.now());
            migrations::migrate(&mut conn, now_ms)?;
            let settings = SettingsCache::load(&Db::Sqlite(&conn), &opening_defaults)?;
            let recovered = maintenance::recover_at_open(&mut conn, now_ms, &settings, recovery)?;
            if recovered > 0 {
                tracing::warn!(
                    recovered,
                    "recovered jobs left running by a process that exited"
                );
            }
            let syncer = match durability {
                Durability::Full => Some(Syncer::start(open_wal(&opening)?)?),
                Durability::Normal => None,
            };
            let checkpointer = Checkpointer::start(&opening, &mut conn)?;
            Ok((lock, conn, checkpointer, syncer, settings))
        })
        .await
        .map_err(|e| Error::new(ErrorKind::Storage, format!("opening the queue failed: {e}")))??;
    let readers = Readers::Sqlite(SqliteReaders::new(
        path.clone(),
        options.read_connections,
        options.max_read_connections,
    ));
    let opened = Opened {
        db: WriterDb::Sqlite { conn, checkpointer },
        syncer,
        settings,
        lock: Some(lock),
        readers,
        location: path,
        postgres_url: None,
        #[cfg(feature = "postgres")]
        postgres_hosts: None,
    };
    Queue::start(opened, options, defaults).await
}

#[cfg(feature = "postgres")]
pub(super) async fn postgres(
    url: String,
    options: QueueOptions,
    defaults: Defaults,
) -> Result<Queue> {
    let hosts = Arc::new(postgres::hosts::Hosts::parse(&url)?);
    let opening = hosts.clone();
    let opening_defaults = defaults.clone();
    let clock = options.clock.clone();
    let (session, settings) = tokio::task::spawn_blocking(move || -> Result<_> {
        // The writer's session first: it finds the primary among the URL's hosts, each tried within a bound of its
        // own. The migrations then run there, on a session of their own, without the writer's bound on each call: a
        // migration takes as long as it takes.
        let mut session = postgres::connect::connect_writer(&opening)?;
        let mut migrating = postgres::connect::connect(&opening, "cairn migrations")?;
        postgres::migrations::migrate(&mut migrating, to_millis(clock.now()))?;
        drop(migrating);
        let prepared = std::cell::RefCell::new(Default::default());
        let tx = PgTransaction::begin(&mut session, &prepared, Access::Write)?;
        let db = Db::Postgres(tx);
        let settings = SettingsCache::load(&db, &opening_defaults)?;
        db.commit()?;
        Ok((session, settings))
    })
    .await
    .map_err(|e| Error::new(ErrorKind::Storage, format!("opening the queue failed: {e}")))??;
    // Jobs left running by a node that died are not orphans to take at once: other nodes' workers may hold
    // them. Lease expiry, which the leading node runs, brings back those whose worker is gone.
    let node = format!(
        "{}-{}-{:x}",
        hostname(),
        std::process::id(),
        TokenSource::new().next_token() as u64 & 0xffff_ffff
    );
    let readers = Readers::Postgres(postgres::readers::PgReaders::new(
        hosts.clone(),
        options.read_connections,
        options.max_read_connections,
    ));
    let opened = Opened {
        db: WriterDb::Postgres(Box::new(PgWriter {
            session: Some(session),
            prepared: Default::default(),
            node: node.clone(),
            hosts: hosts.clone(),
            connect_again_after: None,
        })),
        syncer: None,
        settings,
        lock: None,
        readers,
        location: PathBuf::from(crate::store::location::redacted(&url)),
        postgres_url: Some(url.clone()),
        postgres_hosts: Some(hosts.clone()),
    };
    let vacuum_after = options.vacuum_after;
    let queue = Queue::start(opened, options, defaults).await?;
    let listener = postgres::listener::start(
        hosts.clone(),
        node,
        queue.inner.commands.clone(),
        queue.inner.stop_background.clone(),
    )
    .map_err(|e| Error::storage("starting the listener thread", e))?;
    let mut background: Vec<Box<dyn FnOnce() + Send>> = vec![Box::new(move || {
        let _ = listener.join();
    })];
    if let Some(after) = vacuum_after {
        let vacuumer = postgres::vacuum::start(hosts, after, queue.inner.stop_background.clone())
            .map_err(|e| Error::storage("starting the vacuum thread", e))?;
        background.push(Box::new(move || vacuumer.stop()));
    }
    *queue
        .inner
        .background
        .lock()
        .expect("the background threads' lock is never poisoned") = background;
    Ok(queue)
}

/// A location this build cannot open: it was built without the backend's feature.
#[cfg(not(all(feature = "sqlite", feature = "postgres")))]
fn without(backend: &str, feature: &str) -> Error {
    Error::new(
        ErrorKind::InvalidInput,
        format!(
            "this build of Cairn has no {backend} backend: build the cairn crate with its \"{feature}\" feature"
        ),
    )
}

#[cfg(not(feature = "sqlite"))]
pub(super) async fn sqlite(_: PathBuf, _: QueueOptions, _: Defaults) -> Result<Queue> {
    Err(without("SQLite", "sqlite"))
}

#[cfg(not(feature = "postgres"))]
pub(super) async fn postgres(_: String, _: QueueOptions, _: Defaults) -> Result<Queue> {
    Err(without("PostgreSQL", "postgres"))
}

/// This machine's name, for a node's name in notifications and logs.
#[cfg(feature = "postgres")]
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "node".to_owned())
}

#[cfg(feature = "sqlite")]
/// Opens the database's write-ahead log, for the syncer to fsync. It exists once the writer has opened the
/// database in WAL mode, and stays (the same file) while the writer's connection is open.
fn open_wal(path: &Path) -> Result<File> {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    let wal = PathBuf::from(wal);
    File::open(&wal)
        .map_err(|e| Error::storage(format!("opening the write-ahead log {}", wal.display()), e))
}

#[cfg(feature = "sqlite")]
/// Takes the lock that makes this process the database's only queue.
fn lock_database(path: &Path) -> Result<File> {
    // Through a symlink or another spelling of the path, the same database gets the same lock file.
    let canonical = canonical_path(path)?;
    let mut lock_path = canonical.as_os_str().to_owned();
    lock_path.push("-lock");
    let lock_path = PathBuf::from(lock_path);
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| Error::storage(format!("opening the lock file {}", lock_path.display()), e))?;
    // A process that just closed the queue can still hold the lock for a moment: a child it is forking shares the
    // lock's file description until it execs. So a held lock is tried again for a short while before giving up.
    let deadline = std::time::Instant::now() + LOCK_WAIT;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(file),
            Err(std::fs::TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(Error::new(
                    ErrorKind::Locked,
                    format!(
                        "{} is open as a queue by another process (it holds {})",
                        path.display(),
                        lock_path.display()
                    ),
                ));
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(Error::storage(
                    format!("locking {}", lock_path.display()),
                    e,
                ));
            }
        }
    }
}

#[cfg(feature = "sqlite")]
/// The database file's canonical path; for a file not created yet, its canonical directory and its name.
fn canonical_path(path: &Path) -> Result<PathBuf> {
    if let Ok(canonical) = std::fs::canonicalize(path) {
        return Ok(canonical);
    }
    let name = path
        .file_name()
        .ok_or_else(|| Error::invalid("path", format!("{} names no file", path.display())))?;
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let dir = std::fs::canonicalize(dir)
        .map_err(|e| Error::storage(format!("resolving {}", dir.display()), e))?;
    Ok(dir.join(name))
}

#[cfg(feature = "sqlite")]
/// How long opening waits for a queue lock that another process holds.
const LOCK_WAIT: Duration = Duration::from_secs(2);
