//! Where a queue lives, as it is given to [`Queue::open`](crate::Queue::open): a SQLite file's path or a
//! PostgreSQL URL. Plain text functions, built with or without either backend.

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
