//! `cairn serve` on a SQLite file whose file system fills up (a tmpfs of 1 MiB, mounted for the test): pushes are
//! refused with `507` and `Retry-After` (the client's `StorageFull`), and with a status Bedrock's clients send again
//! on the Bedrock port; reads go on; nothing acknowledged is lost, across a SIGKILL too; once space returns, writes
//! resume without a restart.

use cairn::Jobs;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use cairn::{ErrorKind, JobId, Push};
use serde_json::json;

use crate::harness::{TestServer, eventually};

/// A tmpfs mounted on a directory of its own, unmounted when dropped.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    /// Mounts a tmpfs of `size` (`1m`), or `None` when this process may not mount (not root).
    fn mount(size: &str) -> Option<Tmpfs> {
        let dir = tempfile::tempdir().unwrap();
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .status()
            .is_ok_and(|s| s.success());
        mounted.then_some(Tmpfs { dir })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Gives the file system `size` in all: space returns.
    fn resize(&self, size: &str) {
        let status = Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(self.dir.path())
            .status()
            .unwrap();
        assert!(status.success(), "remounting the tmpfs");
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

/// Sends a Bedrock `CreateJob` whose data holds `pad`, and returns the reply's status line.
fn bedrock_create_job(address: &str, pad: &str) -> String {
    let mut stream = TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let request =
        format!("CreateJob\r\nname: bedrock-full\r\ndata: {{\"pad\": \"{pad}\"}}\r\n\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut status = String::new();
    BufReader::new(stream).read_line(&mut status).unwrap();
    status.trim_end().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_refuses_writes_with_507_loses_nothing_and_writes_resume_when_space_returns() {
    let Some(tmpfs) = Tmpfs::mount("1m") else {
        // CI runs as root; a developer's machine may not.
        eprintln!("SKIPPED: mounting a tmpfs needs root");
        return;
    };
    let file: PathBuf = tmpfs.path().join("cairn.db");
    let mut server = TestServer::spawn_on_file(&file, &[]);
    let client = server.client();
    let pad = "x".repeat(8 * 1024);

    // Push until the disk is full: every push is acknowledged or refused as StorageFull, never anything else.
    let mut acknowledged: Vec<JobId> = Vec::new();
    let refused = loop {
        match client
            .enqueue(Push::new("fill").data(json!({ "pad": pad })))
            .await
        {
            Ok(pushed) => acknowledged.push(pushed.id),
            Err(e) => break e,
        }
        assert!(
            acknowledged.len() < 1_000,
            "a 1 MiB file system took 8 MiB of jobs"
        );
    };
    assert_eq!(refused.kind(), ErrorKind::StorageFull, "{refused}");
    assert!(!acknowledged.is_empty());
    // Again, to be sure it is the disk and not one bad moment; reads go on.
    let again = client
        .enqueue(Push::new("fill").data(json!({ "pad": pad })))
        .await
        .unwrap_err();
    assert_eq!(again.kind(), ErrorKind::StorageFull, "{again}");
    client.get(acknowledged[0]).await.unwrap();
    let status = tokio::task::block_in_place(|| bedrock_create_job(server.bedrock(), &pad));
    assert_eq!(
        status, "500 Internal Server Error",
        "Bedrock-PHP sends this again"
    );

    // Killed while full, started again on the same file: everything acknowledged is there.
    tokio::task::block_in_place(|| {
        server.kill();
        server.start();
    });
    let client = server.client();
    for id in &acknowledged {
        client.get(*id).await.unwrap();
    }

    // Space returns: writes resume, without a restart.
    tmpfs.resize("16m");
    eventually(
        Duration::from_secs(30),
        "pushes are accepted again",
        || async { client.enqueue(Push::new("after")).await.is_ok() },
    )
    .await;
    for id in &acknowledged {
        client.get(*id).await.unwrap();
    }
    drop(server);
}
