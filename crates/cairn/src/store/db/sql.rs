//! [`Sql`]: a statement's literal text for each database, side by side where the dialects differ.

use crate::error::{Error, ErrorKind, Result};

/// A statement, as each database runs it. Where the dialects differ (a row lock, an index hint, `GLOB`, scalar
/// `MAX`), both texts stand side by side; [`Sql::both`] is one text both read alike. An empty text means the
/// statement does not run on that database ([`Sql::sqlite_only`], [`Sql::postgres_only`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Sql<'a> {
    pub sqlite: &'a str,
    pub postgres: &'a str,
}

impl<'a> Sql<'a> {
    /// One text, read alike by both databases.
    pub const fn both(text: &'a str) -> Sql<'a> {
        Sql {
            sqlite: text,
            postgres: text,
        }
    }

    /// A statement only SQLite runs.
    pub const fn sqlite_only(text: &'a str) -> Sql<'a> {
        Sql {
            sqlite: text,
            postgres: "",
        }
    }

    /// A statement only PostgreSQL runs.
    pub const fn postgres_only(text: &'a str) -> Sql<'a> {
        Sql {
            sqlite: "",
            postgres: text,
        }
    }

    /// The text for `db`'s database.
    pub(crate) fn text_for(&self, postgres: bool) -> Result<&'a str> {
        let (text, other, name) = if postgres {
            (self.postgres, self.sqlite, "PostgreSQL")
        } else {
            (self.sqlite, self.postgres, "SQLite")
        };
        if text.is_empty() {
            return Err(Error::new(
                ErrorKind::Storage,
                format!("a statement has no text for {name}: {other}"),
            ));
        }
        Ok(text)
    }
}

/// A statement built at run time (how many parameters it has depends on the request), in each database's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OwnedSql {
    pub sqlite: String,
    pub postgres: String,
}

impl OwnedSql {
    /// The statement, to run.
    pub fn as_sql(&self) -> Sql<'_> {
        Sql {
            sqlite: &self.sqlite,
            postgres: &self.postgres,
        }
    }
}
