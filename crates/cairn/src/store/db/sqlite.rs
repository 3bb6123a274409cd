//! A statement on SQLite: binding its parameters, `$1` to `$N` in the order they first appear.

use super::Params;
use crate::error::{Error, ErrorKind, Result};

/// Binds every parameter of a SQLite statement in place: no list of references is built per statement, which on
/// the writer's hot path is measurable. Every parameter is bound on each use, so nothing is left from the last.
///
/// SQLite numbers a statement's parameters in the order they first appear. Every statement of the engine writes
/// them in order (`$1` first, then `$2`, …; or anonymous `?`s, in `MultiRow`'s generated statements), so SQLite's
/// numbers are theirs and value N binds to number N: looking each name up instead would cost SQLite a walk of its
/// list of names per parameter, about four times the binding itself. Debug builds (the tests) check the order of
/// every statement they run; `the_engines_statements_prepare_on_the_database_each_is_written_for` checks a sample.
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
    #[cfg(debug_assertions)]
    check_order(stmt, sql)?;
    for (index, value) in params.0.iter().enumerate() {
        stmt.raw_bind_parameter(index + 1, value)?;
    }
    Ok(())
}

/// That a statement's parameters are `$1` to `$N` in the order they first appear, or anonymous `?`s only.
#[cfg(debug_assertions)]
fn check_order(stmt: &rusqlite::Statement<'_>, sql: &str) -> Result<()> {
    let count = stmt.parameter_count();
    let anonymous = count > 0 && stmt.parameter_name(1).is_none();
    for index in 1..=count {
        let name = stmt.parameter_name(index);
        let in_order = match name {
            None => anonymous,
            Some(name) => !anonymous && name.strip_prefix('$') == Some(index.to_string().as_str()),
        };
        if !in_order {
            return Err(Error::new(
                ErrorKind::Storage,
                format!(
                    "parameter {index} of {sql} is {name:?}: a statement's parameters must first appear in order, \
                     $1 to ${count}"
                ),
            ));
        }
    }
    Ok(())
}
