//! The servers a PostgreSQL URL names, and what this queue learned of them: which one answered last as the
//! primary, and which failed lately.
//!
//! A URL may name several hosts (`postgres://cairn@db-a:5432,db-b:5432/jobs`), as a cluster with a standby does:
//! whichever is the primary at the time is the one to use. Every session (`session.rs`, and the synchronous ones of
//! `connect.rs`) tries them in [`Hosts::order`], each with an attempt of its own bounded by the connect timeout, so
//! that a host that went silent never uses up the time of the next; it takes the first that answers as a writable
//! primary. A host that failed (did not answer, refused, was read-only) is tried after the others for a while, so
//! that each new session does not wait out the same silent host.
//!
//! The primary can move (a failover) while sessions are open on the old one, which may stay up, read-only or silent.
//! The session that finds out (a write refused as read-only, a call out of time, a connection to another host) tells
//! [`Hosts`], which starts a new epoch (a failed attempt to open a session only makes its host suspect); every session of an earlier epoch is dropped at its next use (`is_current`)
//! and opened again on the new primary: the readers' pooled sessions, the listener's, the vacuum's.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio_postgres::config::{Host, TargetSessionAttrs};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::error::{Error, Result};
use crate::store::location::redacted;
use crate::store::postgres::settings::session_config;
use crate::store::postgres::tls;

/// How long a host that failed is tried after the others.
const SUSPECT_FOR: Duration = Duration::from_secs(30);

/// The hosts of one URL.
pub(crate) struct Hosts {
    /// The URL, its password hidden, for messages.
    shown: String,
    /// Each host's own settings: the URL's, with that host alone.
    hosts: Vec<OneHost>,
    /// What every session connects with: TLS as the URL asks (`tls.rs`).
    tls: MakeRustlsConnect,
    state: Mutex<State>,
}

struct OneHost {
    /// `host:port`, for messages.
    name: String,
    config: tokio_postgres::Config,
}

#[derive(Debug, Default)]
struct State {
    /// For each host, when it last failed.
    failed_at: Vec<Option<Instant>>,
    /// The host a session last found the primary on.
    primary: Option<usize>,
    /// Counts the times the primary was found elsewhere, or lost.
    epoch: u64,
}

impl Hosts {
    /// Reads `url`, with Cairn's bounds where it sets none (see `connect.rs`).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput), field `database`: a URL that is not one, or
    /// asks for a server Cairn cannot write to.
    pub fn parse(url: &str) -> Result<Hosts> {
        let (tls, rest) = tls::split(url)?;
        let mut config = session_config(&rest, "cairn")?;
        let (ssl_mode, tls) = tls::connector(&tls)?;
        config.ssl_mode(ssl_mode);
        // Cairn writes, and reads what it wrote, on every session: it needs the primary, whatever the URL says.
        let attrs = config.get_target_session_attrs();
        if !matches!(
            attrs,
            TargetSessionAttrs::Any | TargetSessionAttrs::ReadWrite
        ) || has_other_attrs(url)
        {
            return Err(Error::invalid(
                "database",
                format!(
                    "target_session_attrs: Cairn writes, so it always connects to the primary (read-write): \
                     leave target_session_attrs out of the URL or set it to read-write: {}",
                    redacted(url)
                ),
            ));
        }
        let count = config.get_hosts().len().max(config.get_hostaddrs().len());
        if count == 0 {
            return Err(Error::invalid(
                "database",
                format!("names no host: {}", redacted(url)),
            ));
        }
        let ports = config.get_ports();
        if ports.len() > 1 && ports.len() != count {
            return Err(Error::invalid(
                "database",
                format!(
                    "names {count} hosts and {} ports: give one port for all, or one per host: {}",
                    ports.len(),
                    redacted(url)
                ),
            ));
        }
        let hosts = (0..count).map(|i| one_host(&config, i)).collect();
        Ok(Hosts {
            shown: redacted(url),
            tls,
            state: Mutex::new(State {
                failed_at: vec![None; count],
                ..State::default()
            }),
            hosts,
        })
    }

    /// The URL, its password hidden.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// What a session connects with, its TLS as the URL asks.
    pub fn tls(&self) -> MakeRustlsConnect {
        self.tls.clone()
    }

    /// How many hosts the URL names.
    pub fn len(&self) -> usize {
        self.hosts.len()
    }

    /// Host `i`'s `host:port`.
    pub fn name(&self, i: usize) -> &str {
        &self.hosts[i].name
    }

    /// Host `i`'s settings, for a session named `role` in `pg_stat_activity` (unless the URL names it).
    pub fn config(&self, i: usize, role: &str) -> tokio_postgres::Config {
        let mut config = self.hosts[i].config.clone();
        if config.get_application_name() == Some("cairn") {
            config.application_name(role);
        }
        config
    }

    /// The order to try the hosts in: the last primary first, then those that have not failed lately in the URL's
    /// order, then the others, the one that failed longest ago first.
    pub fn order(&self) -> Vec<usize> {
        let state = self.state();
        let now = Instant::now();
        let mut order: Vec<usize> = (0..self.hosts.len()).collect();
        order.sort_by_key(|&i| {
            let suspect_since =
                state.failed_at[i].filter(|at| now.duration_since(*at) < SUSPECT_FOR);
            (
                state.primary != Some(i),
                suspect_since.is_some(),
                suspect_since,
            )
        });
        order
    }

    /// The current epoch: a session opened in another is dropped at its next use.
    pub fn epoch(&self) -> u64 {
        self.state().epoch
    }

    /// A session found host `i` the writable primary: returns the epoch the session belongs to (a new one if the
    /// primary was elsewhere, or lost).
    pub fn found_primary(&self, i: usize) -> u64 {
        let mut state = self.state();
        state.failed_at[i] = None;
        if state.primary != Some(i) {
            if let Some(old) = state.primary {
                tracing::warn!(
                    from = self.hosts[old].name,
                    to = self.hosts[i].name,
                    "the PostgreSQL primary moved; sessions on the old one are opened again"
                );
            }
            state.primary = Some(i);
            state.epoch += 1;
        }
        state.epoch
    }

    /// Opening a session on host `i` failed (it did not answer in time, refused, or is not writable): it is tried
    /// after the others for a while. Sessions open on it go on: a failed open (too many connections, one slow
    /// accept) says nothing of them.
    pub fn suspect(&self, i: usize) {
        self.state().failed_at[i] = Some(Instant::now());
    }

    /// A session of `epoch` on host `i` found it no longer the primary (a write refused as read-only, the server
    /// shutting down, a call out of time), or a new session found it read-only: every session on it is dropped at
    /// its next use, and it is tried after the others for a while. A session of an earlier epoch says nothing of
    /// the primary found since.
    pub fn lost(&self, i: usize, epoch: u64) {
        let mut state = self.state();
        state.failed_at[i] = Some(Instant::now());
        if state.primary == Some(i) && state.epoch == epoch {
            state.primary = None;
            state.epoch += 1;
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Whether the URL sets `target_session_attrs` to something other than `read-write` (the driver reads `any` and a
/// missing one alike).
fn has_other_attrs(url: &str) -> bool {
    let query = url.split_once('?').map_or("", |(_, query)| query);
    query.split('&').any(|pair| {
        pair.split_once('=')
            .is_some_and(|(key, value)| key == "target_session_attrs" && value != "read-write")
    })
}

/// `config` with its `i`th host alone (and that host's address and port), every other setting the same.
fn one_host(config: &tokio_postgres::Config, i: usize) -> OneHost {
    let mut one = tokio_postgres::Config::new();
    if let Some(user) = config.get_user() {
        one.user(user);
    }
    if let Some(password) = config.get_password() {
        one.password(password);
    }
    if let Some(dbname) = config.get_dbname() {
        one.dbname(dbname);
    }
    if let Some(options) = config.get_options() {
        one.options(options);
    }
    if let Some(name) = config.get_application_name() {
        one.application_name(name);
    }
    one.ssl_mode(config.get_ssl_mode())
        .ssl_negotiation(config.get_ssl_negotiation())
        .channel_binding(config.get_channel_binding())
        .keepalives(config.get_keepalives())
        .keepalives_idle(config.get_keepalives_idle());
    if let Some(timeout) = config.get_connect_timeout() {
        one.connect_timeout(*timeout);
    }
    if let Some(timeout) = config.get_tcp_user_timeout() {
        one.tcp_user_timeout(*timeout);
    }
    if let Some(interval) = config.get_keepalives_interval() {
        one.keepalives_interval(interval);
    }
    if let Some(retries) = config.get_keepalives_retries() {
        one.keepalives_retries(retries);
    }
    let port = config
        .get_ports()
        .get(i)
        .or_else(|| config.get_ports().first())
        .copied()
        .unwrap_or(5432);
    one.port(port);
    let host = config.get_hosts().get(i);
    let hostaddr = config.get_hostaddrs().get(i);
    match host {
        Some(Host::Tcp(host)) => {
            one.host(host);
        }
        #[cfg(unix)]
        Some(Host::Unix(path)) => {
            one.host_path(path);
        }
        None => {}
    }
    if let Some(addr) = hostaddr {
        one.hostaddr(*addr);
    }
    let name = match (host, hostaddr) {
        (Some(Host::Tcp(host)), _) if host.contains(':') => format!("[{host}]:{port}"),
        (Some(Host::Tcp(host)), _) => format!("{host}:{port}"),
        #[cfg(unix)]
        (Some(Host::Unix(path)), _) => format!("{} (port {port})", path.display()),
        (None, Some(std::net::IpAddr::V6(addr))) => format!("[{addr}]:{port}"),
        (None, Some(addr)) => format!("{addr}:{port}"),
        (None, None) => format!("localhost:{port}"),
    };
    OneHost { name, config: one }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_host_keeps_every_other_setting_of_the_url() {
        let url = "postgres://cairn:secret@db-a:5433,db-b:5434/jobs?connect_timeout=2&application_name=app\
                   &keepalives_idle=7&target_session_attrs=read-write&sslmode=disable&options=-c%20x%3Dy";
        let hosts = Hosts::parse(url).unwrap();
        assert_eq!(hosts.len(), 2);
        assert_eq!(hosts.name(0), "db-a:5433");
        assert_eq!(hosts.name(1), "db-b:5434");
        let whole = session_config(url, "cairn").unwrap();
        for i in 0..2 {
            let one = hosts.config(i, "cairn writer");
            // Every setting the same, the hosts and ports aside, and the session attributes Cairn checks itself (the
            // driver's Debug shows them all).
            let shown = |config: &tokio_postgres::Config| {
                let mut config = format!("{config:?}");
                for (field, end) in [
                    ("host: [", "], "),
                    ("port: [", "], "),
                    ("target_session_attrs: ", ", "),
                ] {
                    let start = config.find(field).unwrap();
                    let end = start + config[start..].find(end).unwrap() + end.len();
                    config.replace_range(start..end, "");
                }
                config
            };
            assert_eq!(shown(&one), shown(&whole), "host {i}");
            assert_eq!(one.get_ports(), [5433 + i as u16]);
            assert_eq!(
                one.get_application_name(),
                Some("app"),
                "the URL's name stays"
            );
        }
        let defaults = Hosts::parse("postgres://c@a,b:5/j").unwrap();
        assert_eq!(
            (defaults.name(0), defaults.name(1)),
            ("a:5432", "b:5"),
            "a host without a port gets the default"
        );
    }

    #[test]
    fn a_url_that_asks_for_a_standby_or_any_server_is_refused_naming_the_parameter() {
        for attrs in ["any", "read-only"] {
            let url = format!("postgres://c@a,b/j?target_session_attrs={attrs}");
            let e = Hosts::parse(&url).err().expect("refused");
            assert_eq!(e.field(), Some("database"));
            assert!(e.to_string().contains("target_session_attrs"), "{e}");
        }
        let e = Hosts::parse("postgres://c@a,b,c/j?port=1,2")
            .err()
            .expect("refused");
        assert!(e.to_string().contains("ports"), "{e}");
    }

    #[test]
    fn a_failed_host_is_tried_last_for_a_while_and_a_new_primary_starts_an_epoch() {
        let hosts = Hosts::parse("postgres://c@a,b,c/j").unwrap();
        assert_eq!(hosts.order(), [0, 1, 2]);
        let first = hosts.found_primary(0);
        assert_eq!(
            hosts.found_primary(0),
            first,
            "the same primary: the same epoch"
        );
        hosts.suspect(0);
        assert_eq!(
            hosts.epoch(),
            first,
            "a failed open leaves the sessions open alone"
        );
        hosts.lost(0, first);
        let lost = hosts.epoch();
        assert_ne!(lost, first, "the primary lost: its sessions are dropped");
        assert_eq!(hosts.order(), [1, 2, 0]);
        hosts.suspect(1);
        assert_eq!(
            hosts.order(),
            [2, 0, 1],
            "the one that failed longest ago first"
        );
        let second = hosts.found_primary(2);
        assert_eq!(hosts.order(), [2, 0, 1], "the primary first");
        assert_eq!(hosts.epoch(), second);
        assert_ne!(second, lost);
        hosts.lost(2, first);
        assert_eq!(
            hosts.epoch(),
            second,
            "a session of an earlier epoch ends nothing"
        );
    }
}
