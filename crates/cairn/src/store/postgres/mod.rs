//! The PostgreSQL backend, being built (see `docs/design/postgres.md`): so far its schema and the migrations that
//! bring a database to it.

pub(crate) mod migrations;
