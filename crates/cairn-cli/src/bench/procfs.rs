//! What the idle scenario reads about a process from Linux's `/proc`: resident memory, open descriptors, and the
//! open-file limit. Reading only; parsing is kept apart from the files so that it can be tested.

use std::io;

use anyhow::Context;

/// The resident memory of process `pid` (`VmRSS`), in bytes.
///
/// # Errors
/// When `/proc/PID/status` cannot be read or has no `VmRSS` line (the process has ended, say).
pub fn rss_bytes(pid: u32) -> anyhow::Result<u64> {
    let path = format!("/proc/{pid}/status");
    let status = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    parse_vm_rss(&status).with_context(|| format!("{path} has no VmRSS line"))
}

/// How many descriptors process `pid` has open: each connection a server accepted is one.
///
/// # Errors
/// When `/proc/PID/fd` cannot be listed (another user's process, say).
pub fn open_fds(pid: u32) -> io::Result<u64> {
    Ok(std::fs::read_dir(format!("/proc/{pid}/fd"))?.count() as u64)
}

/// The soft limit on open files of process `pid`, or `None` when unknown or unlimited.
pub fn open_file_limit(pid: u32) -> Option<u64> {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).ok()?;
    parse_open_file_limit(&limits)
}

/// This process's soft limit on open files.
pub fn own_open_file_limit() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes the struct passed to it.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0 {
        limit.rlim_cur
    } else {
        0
    }
}

/// CPU time process `pid` has used, user and system, in seconds.
///
/// # Errors
/// When `/proc/PID/stat` cannot be read or parsed.
pub fn cpu_seconds(pid: u32) -> anyhow::Result<f64> {
    let path = format!("/proc/{pid}/stat");
    let stat = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    // SAFETY: sysconf only reads a constant of the system.
    let ticks_per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let ticks = parse_cpu_ticks(&stat).with_context(|| format!("{path} has no CPU times"))?;
    Ok(ticks as f64 / ticks_per_second.max(1) as f64)
}

/// `utime` plus `stime` (fields 14 and 15) of a `/proc/PID/stat` line. The command name, field 2, is in
/// parentheses and may hold spaces or parentheses itself, so the fields are counted from after its last `)`.
fn parse_cpu_ticks(stat: &str) -> Option<u64> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    // After the name come field 3 (state) onwards: utime is the 12th of those, stime the 13th.
    let mut fields = after_name.split_whitespace().skip(11);
    let user: u64 = fields.next()?.parse().ok()?;
    let system: u64 = fields.next()?.parse().ok()?;
    Some(user + system)
}

/// `VmRSS:    12345 kB` in bytes.
fn parse_vm_rss(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let mut words = line["VmRSS:".len()..].split_whitespace();
    let kib: u64 = words.next()?.parse().ok()?;
    match words.next() {
        Some("kB") => Some(kib * 1024),
        _ => None,
    }
}

/// The soft column of `Max open files  1024  524288  files`.
fn parse_open_file_limit(limits: &str) -> Option<u64> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_resident_memory_in_bytes() {
        let status =
            "Name:\tcairn\nVmPeak:\t  900000 kB\nVmRSS:\t   12345 kB\nRssAnon:\t    8000 kB\n";
        assert_eq!(parse_vm_rss(status), Some(12345 * 1024));
        assert_eq!(parse_vm_rss("Name:\tkthreadd\n"), None);
    }

    #[test]
    fn reads_the_soft_open_file_limit() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
                      Max processes             94000                94000                processes \n\
                      Max open files            1024                 524288               files     \n";
        assert_eq!(parse_open_file_limit(limits), Some(1024));
        let unlimited =
            "Max open files            unlimited            unlimited            files     \n";
        assert_eq!(parse_open_file_limit(unlimited), None);
    }

    #[test]
    fn reads_cpu_ticks_past_a_name_with_spaces_and_parentheses() {
        let stat = "42 (a (b) c) S 1 42 42 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 4 0 99 0 0";
        assert_eq!(parse_cpu_ticks(stat), Some(325));
        assert_eq!(parse_cpu_ticks("42 (cairn) S 1"), None);
    }

    #[test]
    fn reads_this_process() {
        let me = std::process::id();
        assert!(rss_bytes(me).unwrap() > 0);
        assert!(open_fds(me).unwrap() >= 3);
        assert!(open_file_limit(me).is_some());
        assert!(own_open_file_limit() > 0);
        assert!(cpu_seconds(me).unwrap() >= 0.0);
    }
}
