//! [`MultiRow`]: one statement over many rows of values, as each database does it best.

use super::{Db, Params, Row, Sql, Value};
use crate::error::{Error, ErrorKind, Result};

/// `values`, rows of `width` values one after another, as one list per column: the arrays of a PostgreSQL
/// statement that `unnest`s them back into rows.
pub(crate) fn columns(width: usize, values: Vec<Value<'_>>) -> Vec<Vec<Value<'_>>> {
    let rows = values.len() / width;
    let mut columns: Vec<Vec<Value<'_>>> = (0..width).map(|_| Vec::with_capacity(rows)).collect();
    for (i, value) in values.into_iter().enumerate() {
        columns[i % width].push(value);
    }
    columns
}

/// A statement over many rows of values at once.
///
/// On SQLite it is `head VALUES (?,…,?),(?,…),… tail`, in statements of 64, 32, 16, 8, 4, 2 and 1 rows, so that
/// any number of rows takes at most a few statements and SQLite prepares at most seven texts of it (only their
/// placeholders are generated). The placeholders are anonymous and bound in order: a statement of 64 rows has over
/// a thousand, and finding each `$N` by its name costs SQLite a walk of its list of names. On PostgreSQL, where each statement is a round trip and that is most of the cost,
/// one statement takes every row: its text, written out, binds one array per column (`$1` the first column's
/// values, and so on), turned back into rows by `unnest … WITH ORDINALITY` in the order they were given.
pub(crate) struct MultiRow {
    /// How many values a row has.
    width: usize,
    /// SQLite's head and tail, around the rows; `None` where the statement runs on PostgreSQL only.
    sqlite: Option<(&'static str, &'static str)>,
    /// PostgreSQL's statement of arrays; empty where the statement runs on SQLite only.
    postgres: &'static str,
    texts: std::sync::OnceLock<Vec<String>>,
}

impl MultiRow {
    const SIZES: [usize; 7] = [64, 32, 16, 8, 4, 2, 1];

    /// Rows of `width` values: on SQLite, between `head` and `tail` (an `ON CONFLICT` clause, say; it may be
    /// empty); on PostgreSQL, the statement of arrays `postgres`.
    pub const fn new(
        width: usize,
        head: &'static str,
        tail: &'static str,
        postgres: &'static str,
    ) -> Self {
        MultiRow {
            width,
            sqlite: Some((head, tail)),
            postgres,
            texts: std::sync::OnceLock::new(),
        }
    }

    /// Rows only SQLite writes this way.
    pub const fn sqlite_only(width: usize, head: &'static str, tail: &'static str) -> Self {
        MultiRow::new(width, head, tail, "")
    }

    /// A statement of arrays that only PostgreSQL runs.
    pub const fn postgres_only(width: usize, postgres: &'static str) -> Self {
        MultiRow {
            width,
            sqlite: None,
            postgres,
            texts: std::sync::OnceLock::new(),
        }
    }

    /// PostgreSQL's statement of arrays.
    pub fn postgres(&self) -> &'static str {
        self.postgres
    }

    /// SQLite's statement for `rows` rows, one of 64, 32, 16, 8, 4, 2 or 1; `None` for a statement only PostgreSQL
    /// runs.
    pub fn sqlite_text(&self, rows: usize) -> Option<&str> {
        let (head, tail) = self.sqlite?;
        let texts = self.texts.get_or_init(|| {
            Self::SIZES
                .iter()
                .map(|&n| {
                    let row = format!("({})", vec!["?"; self.width].join(","));
                    format!("{head} VALUES {} {tail}", vec![row; n].join(","))
                })
                .collect()
        });
        let index = Self::SIZES
            .iter()
            .position(|&n| n == rows)
            .expect("rows is one of SIZES");
        Some(&texts[index])
    }

    /// Writes `values`, a row's worth after another, in order.
    pub fn execute(&self, db: &Db<'_>, values: Vec<Value<'_>>) -> Result<()> {
        self.query(db, values, |_| Ok(())).map(drop)
    }

    /// Inserts `values`' rows into a table whose key is an `AUTOINCREMENT` rowid, and returns their ids in the
    /// order given. On SQLite the statement has no `RETURNING`: a statement's rows take consecutive ids (each is one
    /// more than the largest ever, and this connection holds the write lock), so the last row's id, which SQLite
    /// keeps per connection, gives them all, and SQLite builds no table of returned rows. On PostgreSQL the statement
    /// of arrays returns them (`RETURNING id`, in the order given).
    pub fn insert(&self, db: &Db<'_>, values: Vec<Value<'_>>) -> Result<Vec<i64>> {
        // Built with SQLite alone, `Db` has no other variant.
        #[cfg(feature = "sqlite")]
        #[allow(irrefutable_let_patterns)]
        if let Db::Sqlite(conn) = db {
            let mut ids = Vec::with_capacity(values.len() / self.width);
            self.for_each_chunk(values, |text, rows, chunk| {
                let inserted = db.execute(Sql::sqlite_only(text), &Params(chunk))?;
                if inserted != rows {
                    // Ids read off the last one would be wrong: a trigger or a conflict clause on the table.
                    return Err(Error::new(
                        ErrorKind::Storage,
                        format!("{inserted} rows inserted of {rows} given: {text}"),
                    ));
                }
                let last = conn.last_insert_rowid();
                ids.extend((last - rows as i64 + 1)..=last);
                Ok(())
            })?;
            return Ok(ids);
        }
        let mut ids = self.query(db, values, |r| r.get::<i64>(0))?;
        // The identity column numbers the rows in the order the statement of arrays gives them (`ORDER BY ord`);
        // RETURNING's own order is not promised, so the ids are sorted back into it.
        ids.sort_unstable();
        Ok(ids)
    }

    /// Runs the statement over `values` (a `RETURNING` one, say); `f` reads each row it returns.
    pub fn query<T>(
        &self,
        db: &Db<'_>,
        values: Vec<Value<'_>>,
        mut f: impl FnMut(&Row<'_>) -> Result<T>,
    ) -> Result<Vec<T>> {
        debug_assert_eq!(values.len() % self.width, 0);
        if values.is_empty() {
            return Ok(Vec::new());
        }
        if db.is_postgres() {
            let postgres = Sql::postgres_only(self.postgres).text_for(true)?;
            return db.query_arrays(postgres, Vec::new(), columns(self.width, values), f);
        }
        let mut out = Vec::new();
        self.for_each_chunk(values, |text, _, chunk| {
            out.extend(db.query(Sql::sqlite_only(text), &Params(chunk), &mut f)?);
            Ok(())
        })?;
        Ok(out)
    }

    /// Cuts `values` into SQLite's statements of 64, 32, … rows, and gives `run` each one's text, rows and values.
    fn for_each_chunk<'v>(
        &self,
        values: Vec<Value<'v>>,
        mut run: impl FnMut(&str, usize, Vec<Value<'v>>) -> Result<()>,
    ) -> Result<()> {
        let width = self.width;
        debug_assert_eq!(values.len() % width, 0);
        let mut rest = values.len() / width;
        let mut values = values.into_iter();
        while rest > 0 {
            let rows = Self::SIZES
                .into_iter()
                .find(|&n| n <= rest)
                .expect("1 is in SIZES");
            let chunk: Vec<Value<'v>> = values.by_ref().take(rows * width).collect();
            let text = self.sqlite_text(rows).ok_or_else(|| {
                Error::new(
                    ErrorKind::Storage,
                    format!("a statement runs on PostgreSQL only: {}", self.postgres),
                )
            })?;
            run(text, rows, chunk)?;
            rest -= rows;
        }
        Ok(())
    }
}
