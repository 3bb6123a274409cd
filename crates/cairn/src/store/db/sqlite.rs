//! A statement on SQLite: binding its parameters by their names, `$1` to `$N` (or in order, for the generated
//! many-row statements).

use super::Params;
use crate::error::{Error, ErrorKind, Result};

/// Binds every parameter of a SQLite statement in place: no list of references is built per statement, which on
/// the writer's hot path is measurable. Every parameter is bound on each use, so nothing is left from the last.
///
/// SQLite numbers a statement's parameters in the order they first appear, and knows `$N` by its name: each is
/// bound to value N, wherever it first appears. A statement of anonymous `?`s (only `MultiRow`'s, generated) is
/// bound in order.
pub(super) fn bind_sqlite(
    stmt: &mut rusqlite::Statement<'_>,
    params: &Params<'_>,
    sql: &str,
) -> Result<()> {
    let count = stmt.parameter_count();
    if params.0.len() != count {
        return Err(Error::new(
            ErrorKind::Storage,
            format!(
                "{} values for the {count} parameters of {sql}",
                params.0.len()
            ),
        ));
    }
    if count > 0 && stmt.parameter_name(1).is_none() {
        // Anonymous `?`s, in order: the many-row statements `MultiRow` writes for SQLite, which can hold a thousand
        // parameters. Looking each up by name would cost SQLite a walk of its list of names per parameter.
        for (index, value) in params.0.iter().enumerate() {
            stmt.raw_bind_parameter(index + 1, value)?;
        }
        return Ok(());
    }
    for index in 1..=count {
        let number = stmt
            .parameter_name(index)
            .and_then(|name| name.strip_prefix('$'))
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|n| (1..=count).contains(n))
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::Storage,
                    format!("the parameters of {sql} are not $1 to ${count}"),
                )
            })?;
        stmt.raw_bind_parameter(index, &params.0[number - 1])?;
    }
    Ok(())
}
