//! Rows read back, into the same Rust types from either database.

#[cfg(feature = "postgres")]
use postgres::types::Type;

use crate::error::{Error, ErrorKind, Result};

/// A row read back.
pub(crate) enum Row<'r> {
    #[cfg(feature = "sqlite")]
    Sqlite(&'r rusqlite::Row<'r>),
    #[cfg(feature = "postgres")]
    Postgres(&'r postgres::Row),
    /// Built without a backend, there is no row to read.
    #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
    Unavailable(super::NoBackend<'r>),
}

impl Row<'_> {
    /// Column `index` (from 0) as a `T`.
    pub fn get<T: FromDb>(&self, index: usize) -> Result<T> {
        match self {
            #[cfg(feature = "sqlite")]
            Row::Sqlite(row) => T::from_sqlite(row, index).map_err(Error::from),
            #[cfg(feature = "postgres")]
            Row::Postgres(row) => T::from_postgres(row, index),
            #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
            Row::Unavailable(never) => match never.0 {},
        }
    }
}

/// What a column can be read as, on both databases.
pub(crate) trait FromDb: Sized {
    #[cfg(feature = "sqlite")]
    fn from_sqlite(row: &rusqlite::Row<'_>, index: usize) -> rusqlite::Result<Self>;
    #[cfg(feature = "postgres")]
    fn from_postgres(row: &postgres::Row, index: usize) -> Result<Self>;
}

#[cfg(feature = "postgres")]
fn column_error(row: &postgres::Row, index: usize, want: &str) -> Error {
    let ty = row
        .columns()
        .get(index)
        .map_or_else(|| "no such column".to_owned(), |c| c.type_().to_string());
    Error::new(
        ErrorKind::Storage,
        format!("column {index} is {ty}, not readable as {want}"),
    )
}

/// An integer column of any width (and a flag, whether stored as an integer or a boolean).
#[cfg(feature = "postgres")]
fn pg_integer(row: &postgres::Row, index: usize) -> Result<Option<i64>> {
    let ty = row.columns().get(index).map(|c| c.type_().clone());
    let pg = |e: postgres::Error| Error::storage(format!("reading column {index}"), e);
    Ok(match ty {
        Some(Type::INT8) => row.try_get::<_, Option<i64>>(index).map_err(pg)?,
        Some(Type::INT4) => row
            .try_get::<_, Option<i32>>(index)
            .map_err(pg)?
            .map(i64::from),
        Some(Type::INT2) => row
            .try_get::<_, Option<i16>>(index)
            .map_err(pg)?
            .map(i64::from),
        Some(Type::BOOL) => row
            .try_get::<_, Option<bool>>(index)
            .map_err(pg)?
            .map(i64::from),
        _ => return Err(column_error(row, index, "an integer")),
    })
}

#[cfg(feature = "postgres")]
fn not_null<T>(value: Option<T>, index: usize) -> Result<T> {
    value.ok_or_else(|| {
        Error::new(
            ErrorKind::Storage,
            format!("column {index} is NULL where a value was expected"),
        )
    })
}

macro_rules! integer_columns {
    ($($t:ty),*) => {$(
        impl FromDb for $t {
            #[cfg(feature = "sqlite")]
            fn from_sqlite(row: &rusqlite::Row<'_>, index: usize) -> rusqlite::Result<Self> {
                row.get(index)
            }
            #[cfg(feature = "postgres")]
            fn from_postgres(row: &postgres::Row, index: usize) -> Result<Self> {
                let value = not_null(pg_integer(row, index)?, index)?;
                <$t>::try_from(value).map_err(|_| column_error(row, index, stringify!($t)))
            }
        }
        impl FromDb for Option<$t> {
            #[cfg(feature = "sqlite")]
            fn from_sqlite(row: &rusqlite::Row<'_>, index: usize) -> rusqlite::Result<Self> {
                row.get(index)
            }
            #[cfg(feature = "postgres")]
            fn from_postgres(row: &postgres::Row, index: usize) -> Result<Self> {
                pg_integer(row, index)?
                    .map(|v| <$t>::try_from(v).map_err(|_| column_error(row, index, stringify!($t))))
                    .transpose()
            }
        }
    )*};
}
integer_columns!(i64, i32, u32);

impl FromDb for crate::names::JobId {
    #[cfg(feature = "sqlite")]
    fn from_sqlite(row: &rusqlite::Row<'_>, index: usize) -> rusqlite::Result<Self> {
        row.get(index).map(crate::names::JobId)
    }
    #[cfg(feature = "postgres")]
    fn from_postgres(row: &postgres::Row, index: usize) -> Result<Self> {
        i64::from_postgres(row, index).map(crate::names::JobId)
    }
}

impl FromDb for Option<crate::names::JobId> {
    #[cfg(feature = "sqlite")]
    fn from_sqlite(row: &rusqlite::Row<'_>, index: usize) -> rusqlite::Result<Self> {
        Ok(row.get::<_, Option<i64>>(index)?.map(crate::names::JobId))
    }
    #[cfg(feature = "postgres")]
    fn from_postgres(row: &postgres::Row, index: usize) -> Result<Self> {
        Ok(Option::<i64>::from_postgres(row, index)?.map(crate::names::JobId))
    }
}

impl FromDb for bool {
    #[cfg(feature = "sqlite")]
    fn from_sqlite(row: &rusqlite::Row<'_>, index: usize) -> rusqlite::Result<Self> {
        row.get(index)
    }
    #[cfg(feature = "postgres")]
    fn from_postgres(row: &postgres::Row, index: usize) -> Result<Self> {
        Ok(not_null(pg_integer(row, index)?, index)? != 0)
    }
}

impl FromDb for Option<bool> {
    #[cfg(feature = "sqlite")]
    fn from_sqlite(row: &rusqlite::Row<'_>, index: usize) -> rusqlite::Result<Self> {
        row.get(index)
    }
    #[cfg(feature = "postgres")]
    fn from_postgres(row: &postgres::Row, index: usize) -> Result<Self> {
        Ok(pg_integer(row, index)?.map(|v| v != 0))
    }
}

impl FromDb for Option<f64> {
    #[cfg(feature = "sqlite")]
    fn from_sqlite(row: &rusqlite::Row<'_>, index: usize) -> rusqlite::Result<Self> {
        row.get(index)
    }
    #[cfg(feature = "postgres")]
    fn from_postgres(row: &postgres::Row, index: usize) -> Result<Self> {
        let pg = |e: postgres::Error| Error::storage(format!("reading column {index}"), e);
        match row.columns().get(index).map(|c| c.type_().clone()) {
            Some(Type::FLOAT8) => row.try_get(index).map_err(pg),
            Some(Type::FLOAT4) => Ok(row
                .try_get::<_, Option<f32>>(index)
                .map_err(pg)?
                .map(f64::from)),
            _ => Ok(pg_integer(row, index)?.map(|v| v as f64)),
        }
    }
}

impl FromDb for f64 {
    #[cfg(feature = "sqlite")]
    fn from_sqlite(row: &rusqlite::Row<'_>, index: usize) -> rusqlite::Result<Self> {
        row.get(index)
    }
    #[cfg(feature = "postgres")]
    fn from_postgres(row: &postgres::Row, index: usize) -> Result<Self> {
        not_null(Option::<f64>::from_postgres(row, index)?, index)
    }
}

impl FromDb for Option<String> {
    #[cfg(feature = "sqlite")]
    fn from_sqlite(row: &rusqlite::Row<'_>, index: usize) -> rusqlite::Result<Self> {
        row.get(index)
    }
    #[cfg(feature = "postgres")]
    fn from_postgres(row: &postgres::Row, index: usize) -> Result<Self> {
        row.try_get::<_, Option<PgText>>(index)
            .map(|text| text.map(|t| t.0))
            .map_err(|e| Error::storage(format!("reading column {index}"), e))
    }
}

/// A text column read from PostgreSQL, or a `json` one as its text: the engine keeps JSON as text, as written.
#[cfg(feature = "postgres")]
struct PgText(String);

#[cfg(feature = "postgres")]
impl<'a> postgres::types::FromSql<'a> for PgText {
    fn from_sql(
        ty: &Type,
        raw: &'a [u8],
    ) -> std::result::Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        if *ty == Type::JSON {
            // `json`'s binary form is its text.
            return Ok(PgText(std::str::from_utf8(raw)?.to_owned()));
        }
        String::from_sql(ty, raw).map(PgText)
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::JSON || <String as postgres::types::FromSql>::accepts(ty)
    }
}

impl FromDb for String {
    #[cfg(feature = "sqlite")]
    fn from_sqlite(row: &rusqlite::Row<'_>, index: usize) -> rusqlite::Result<Self> {
        row.get(index)
    }
    #[cfg(feature = "postgres")]
    fn from_postgres(row: &postgres::Row, index: usize) -> Result<Self> {
        not_null(Option::<String>::from_postgres(row, index)?, index)
    }
}
