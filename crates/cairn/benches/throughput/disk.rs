//! The disk's own limit, and what a run wrote: shared by Cairn's bench and effectum's (`bench/effectum-compare`).

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::config::BenchResult;
use crate::report::{Results, Row};

/// Appends 4 KiB to a fresh file in `dir` and calls `fdatasync`, `syncs` times: the rate a durable one-at-a-time
/// operation could reach if it wrote one page and synced once. Returns the wall time and each sync's latency.
pub fn fdatasync_loop(dir: &Path, syncs: u64) -> BenchResult<(Duration, Vec<Duration>)> {
    let path = dir.join("fdatasync-loop");
    let mut file = std::fs::File::create(&path)?;
    let page = [0x5au8; 4096];
    let mut samples = Vec::with_capacity(syncs as usize);
    let start = Instant::now();
    for _ in 0..syncs {
        let t = Instant::now();
        file.write_all(&page)?;
        file.sync_data()?;
        samples.push(t.elapsed());
    }
    let elapsed = start.elapsed();
    std::fs::remove_file(&path)?;
    Ok((elapsed, samples))
}

/// Runs [`fdatasync_loop`] in a fresh directory `syncs` times and records it as the row `disk/fdatasync-4k`.
pub fn record_disk_row(dir: &Path, syncs: u64, results: &mut Results) -> BenchResult<()> {
    let (elapsed, samples) = fdatasync_loop(dir, syncs)?;
    let syncs = samples.len() as u64;
    results.push(
        Row::new("disk/fdatasync-4k", syncs, elapsed)
            .with_latency("4 KiB write + fdatasync", samples),
    );
    Ok(())
}

/// Bytes this process has passed to `write` and its kind so far (`wchar` in `/proc/self/io`): the WAL frames and
/// the checkpoints' copies, for a run that writes nothing else. `None` where there is no such file.
pub fn bytes_written() -> Option<u64> {
    let io = std::fs::read_to_string("/proc/self/io").ok()?;
    io.lines()
        .find_map(|line| line.strip_prefix("wchar:"))
        .and_then(|n| n.trim().parse().ok())
}
