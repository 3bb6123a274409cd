//! Connecting to PostgreSQL: the URL a queue is opened with, and the settings every Cairn session gets.

use postgres::{Client, NoTls};

use crate::error::{Error, Result};

/// Whether `location` (what [`Queue::open`](crate::Queue::open) is given) names a PostgreSQL database (`postgres://…` or `postgresql://…`) rather than a SQLite file.
pub fn is_postgres_url(location: &str) -> bool {
    location.starts_with("postgres://") || location.starts_with("postgresql://")
}

/// A queue's location fit for logs: a PostgreSQL URL with its password replaced, anything else as it is.
pub fn redacted(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (authority, tail) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:***@{host}{tail}"),
            None => url.to_owned(),
        },
        None => url.to_owned(),
    }
}

/// Opens a session, named `role` in `pg_stat_activity` (`cairn writer`, `cairn reader`, `cairn listener`).
/// Connections are plain TCP or a Unix socket: Cairn does not speak TLS to PostgreSQL yet, so
/// the database should be on the same host or a private network.
pub(crate) fn connect(url: &str, role: &str) -> Result<Client> {
    let mut config: postgres::Config = url.parse().map_err(|e| {
        Error::invalid(
            "database",
            format!("is not a valid PostgreSQL URL ({e}): {}", redacted(url)),
        )
    })?;
    if config.get_application_name().is_none() {
        config.application_name(role);
    }
    let mut client = config
        .connect(NoTls)
        .map_err(|e| Error::storage(format!("connecting to {}", redacted(url)), e))?;
    // UTC, so that nothing depends on the server's zone; Cairn keeps its own times as milliseconds anyway.
    client
        .batch_execute("SET TIME ZONE 'UTC'")
        .map_err(|e| Error::storage("setting up a PostgreSQL session", e))?;
    Ok(client)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_do_not_reach_logs() {
        assert_eq!(
            redacted("postgres://cairn:s3cret@db.internal:5432/jobs"),
            "postgres://cairn:***@db.internal:5432/jobs"
        );
        assert_eq!(
            redacted("postgres://cairn@127.0.0.1/jobs"),
            "postgres://cairn@127.0.0.1/jobs"
        );
        assert!(is_postgres_url("postgresql://x/y"));
        assert!(!is_postgres_url("jobs.db"));
    }
}
