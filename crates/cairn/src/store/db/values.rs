//! The values bound to a statement's parameters (`$1`, `$2`, …), and how each database receives them.

use std::borrow::Cow;

#[cfg(feature = "postgres")]
use postgres::types::{IsNull, ToSql, Type, to_sql_checked};

/// A value bound to a parameter. Flags are the integers 0 and 1, which SQLite stores as they are and PostgreSQL
/// receives as `boolean`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value<'a> {
    Null,
    Integer(i64),
    Real(f64),
    Text(Cow<'a, str>),
}

/// What can be bound to a parameter: taken by value, so that a borrowed text keeps its own lifetime and a
/// computed one is owned.
pub(crate) trait ToValue<'a> {
    fn to_value(self) -> Value<'a>;
}

macro_rules! integer_values {
    ($($t:ty),*) => {$(
        impl<'a> ToValue<'a> for $t {
            fn to_value(self) -> Value<'a> {
                Value::Integer(i64::try_from(self).unwrap_or(i64::MAX))
            }
        }
    )*};
}
integer_values!(i64, i32, u32, u64, usize);

/// Values borrowed where the statement's values are built from references.
macro_rules! borrowed_values {
    ($($t:ty),*) => {$(
        impl<'a> ToValue<'a> for &$t {
            fn to_value(self) -> Value<'a> {
                (*self).to_value()
            }
        }
    )*};
}
borrowed_values!(i64, i32, u32, u64, usize, bool, f64, crate::names::JobId);

impl<'a> ToValue<'a> for &&'a str {
    fn to_value(self) -> Value<'a> {
        Value::Text(Cow::Borrowed(self))
    }
}

impl<'a> ToValue<'a> for crate::names::JobId {
    fn to_value(self) -> Value<'a> {
        Value::Integer(self.0)
    }
}

impl<'a> ToValue<'a> for bool {
    fn to_value(self) -> Value<'a> {
        Value::Integer(i64::from(self))
    }
}

impl<'a> ToValue<'a> for f64 {
    fn to_value(self) -> Value<'a> {
        Value::Real(self)
    }
}

impl<'a> ToValue<'a> for &'a str {
    fn to_value(self) -> Value<'a> {
        Value::Text(Cow::Borrowed(self))
    }
}

impl<'a> ToValue<'a> for &'a String {
    fn to_value(self) -> Value<'a> {
        Value::Text(Cow::Borrowed(self.as_str()))
    }
}

impl<'a> ToValue<'a> for String {
    fn to_value(self) -> Value<'a> {
        Value::Text(Cow::Owned(self))
    }
}

impl<'a, T: ToValue<'a>> ToValue<'a> for Option<T> {
    fn to_value(self) -> Value<'a> {
        self.map_or(Value::Null, ToValue::to_value)
    }
}

/// A statement's parameter values, `$1` first: `params![id, now]`.
macro_rules! params {
    ($($value:expr),* $(,)?) => {
        $crate::store::db::Params(vec![$($crate::store::db::ToValue::to_value($value)),*])
    };
}
pub(crate) use params;

/// The values of a statement's parameters, `$1` first.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Params<'a>(pub Vec<Value<'a>>);

impl Params<'_> {
    /// No parameters.
    pub const NONE: Params<'static> = Params(Vec::new());
}

#[cfg(feature = "sqlite")]
impl rusqlite::ToSql for Value<'_> {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, ValueRef};
        Ok(ToSqlOutput::Borrowed(match self {
            Value::Null => ValueRef::Null,
            Value::Integer(i) => ValueRef::Integer(*i),
            Value::Real(r) => ValueRef::Real(*r),
            Value::Text(t) => ValueRef::Text(t.as_bytes()),
        }))
    }
}

/// A value written as the type PostgreSQL declared for its parameter: an integer into `int8`, `int4`, `int2`,
/// `float8` or `bool`; a real into `float8` or `float4`; text into any text type, or `json` (whose binary form is
/// its text; `jsonb`'s is not, and no statement binds one).
#[cfg(feature = "postgres")]
impl ToSql for Value<'_> {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut bytes::BytesMut,
    ) -> std::result::Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match (self, ty) {
            (Value::Null, _) => Ok(IsNull::Yes),
            (Value::Integer(i), &Type::INT8) => i.to_sql(ty, out),
            (Value::Integer(i), &Type::INT4) => i32::try_from(*i)?.to_sql(ty, out),
            (Value::Integer(i), &Type::INT2) => i16::try_from(*i)?.to_sql(ty, out),
            (Value::Integer(i), &Type::FLOAT8) => (*i as f64).to_sql(ty, out),
            (Value::Integer(i), &Type::BOOL) => (*i != 0).to_sql(ty, out),
            (Value::Real(r), &Type::FLOAT8) => r.to_sql(ty, out),
            (Value::Real(r), &Type::FLOAT4) => (*r as f32).to_sql(ty, out),
            (Value::Text(t), _) => t.as_ref().to_sql(ty, out),
            (value, ty) => Err(format!("cannot write {value:?} as PostgreSQL type {ty}").into()),
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}
