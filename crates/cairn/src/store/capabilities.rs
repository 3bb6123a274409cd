//! [`Capabilities`]: what the engine does differently on a database for what it is, not for how its SQL is spelled
//! (that is `Sql`'s, in `db/sql.rs`, and the statements whose shape differs are `Dialect`'s, in `dialect.rs`). It
//! imports nothing: the seam (`seam.rs`), the dialects and the read pool give it.

/// What a database is, as the engine's choices depend on it. SQLite is a file one process owns, its statements calls
/// within that process; PostgreSQL is a server that several nodes write at once, each statement a round trip.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Capabilities {
    /// Other nodes write the same database at the same time. Then what one node reads may be changing under it:
    /// rows it counts before deciding are locked first (a limited queue, a keyed queue, a waiting job, a throttle or
    /// debounce key), a rate limit's bucket is read from its queue's row and written back, a job's waiters are
    /// registered in the database (another node may end the job), the activity log is read again now and then
    /// (others append to it), statistics go to rows of the node's own, and timed work has one leader at a time. A
    /// database only one writer uses needs none of that: what it knows in memory is what the database holds.
    pub shared_by_nodes: bool,
    /// Every statement is a round trip to a server, and it binds arrays. Then many rows go in one statement where
    /// they can (a batch's pushes and claims together, a claim's leases, one job claimed in one statement, the
    /// transaction's activity and statistics): the round trips, not the rows, are what costs. Where a statement is
    /// a call within the process (and has no arrays), rows go one statement each, and a statement per name or per
    /// step costs little.
    pub statements_are_round_trips: bool,
}

impl Capabilities {
    /// A SQLite file: one process writes it, in process.
    pub const SQLITE: Capabilities = Capabilities {
        shared_by_nodes: false,
        statements_are_round_trips: false,
    };

    /// A PostgreSQL database: shared by nodes, across the network.
    pub const POSTGRES: Capabilities = Capabilities {
        shared_by_nodes: true,
        statements_are_round_trips: true,
    };
}
