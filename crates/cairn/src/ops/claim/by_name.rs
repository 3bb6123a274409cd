//! Claims for some names, which read only those names' ready jobs: a dequeue for `email.send` costs the same beside
//! a million ready jobs of other names in its queue as beside none.
//!
//! The index `jobs_ready_by_name` holds a queue's ready jobs by name, each name's in claim order. A claim turns each
//! of its name patterns into names:
//! - a pattern that matches one name ([`NamePattern::literal`]) is that name;
//! - a GLOB is matched against the queue's distinct ready names, found by skipping along the index from one name
//!   to the next (a step per distinct name, not per job), and only within the range of names its literal prefix
//!   allows: `email.*` steps through the names that start with `email.`, `*mail*` through them all.
//!
//! Then each name gives its first jobs in claim order, and the lists are merged. A claim with a GLOB first reads the
//! queue's first [`WALK`] ready jobs in claim order and takes their matches when they suffice, so that dense
//! matches over many names (a name per job) never step through the names. On SQLite, where a statement costs no
//! round trip, the writer runs those steps one by one ([`sqlite_candidates`]); on PostgreSQL one statement does
//! all of it ([`postgres_select`]), since the bulk claims of `claim/bulk.rs` build on it too.

use std::collections::BTreeSet;

use crate::error::Result;
use crate::names::NamePattern;
use crate::store::db::{Db, Params, Sql, ToValue, Value};

/// How one of a claim's name patterns finds its names among the ready jobs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NameSource {
    /// The one name the pattern matches.
    Exact(String),
    /// The distinct ready names from `from` (included) to `to` (excluded; the end when `None`), in byte order,
    /// that `pattern` matches.
    Scan {
        pattern: String,
        from: String,
        to: Option<String>,
    },
}

/// What a [`NameSource`] puts in a statement: its parameters' number and where they go. A scan whose pattern is
/// its literal prefix and a `*` (`email.*`) needs no GLOB: every name in its range matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NameShape {
    Exact,
    Scan { bounded: bool, glob: bool },
}

impl NameSource {
    pub(crate) fn of(pattern: &NamePattern) -> NameSource {
        if let Some(name) = pattern.literal() {
            return NameSource::Exact(name);
        }
        let from = pattern.literal_prefix();
        let to = prefix_end(&from);
        NameSource::Scan {
            pattern: pattern.as_str().to_owned(),
            from,
            to,
        }
    }

    pub(crate) fn shape(&self) -> NameShape {
        match self {
            NameSource::Exact(_) => NameShape::Exact,
            NameSource::Scan { pattern, from, to } => NameShape::Scan {
                bounded: to.is_some(),
                glob: !is_prefix_pattern(pattern, from),
            },
        }
    }

    /// Its parameters, in the order [`postgres_select`] numbers them: the name; or the pattern (when a GLOB is
    /// needed), the range's start and (when bounded) its end.
    pub(crate) fn args(&self) -> Vec<Value<'_>> {
        match self {
            NameSource::Exact(name) => vec![name.as_str().to_value()],
            NameSource::Scan { pattern, from, to } => {
                let mut args = Vec::with_capacity(3);
                if !is_prefix_pattern(pattern, from) {
                    args.push(pattern.as_str().to_value());
                }
                args.push(from.as_str().to_value());
                args.extend(to.as_deref().map(ToValue::to_value));
                args
            }
        }
    }
}

/// Whether `pattern` is its literal prefix `prefix` followed by one `*`: it matches exactly the names that start
/// with the prefix.
fn is_prefix_pattern(pattern: &str, prefix: &str) -> bool {
    pattern
        .strip_suffix('*')
        .and_then(|head| NamePattern::parse(head).ok().and_then(|p| p.literal()))
        .as_deref()
        == Some(prefix)
}

/// The least string above every string that starts with `prefix`, in byte order (UTF-8's order is code points'):
/// the prefix with its last character that can be raised raised by one and what follows it dropped. `None` when no
/// string is above them all: an empty prefix, or one of only the highest character.
pub(crate) fn prefix_end(prefix: &str) -> Option<String> {
    let mut chars: Vec<char> = prefix.chars().collect();
    while let Some(last) = chars.pop() {
        // The code point after `last`, over the surrogates, which are not characters.
        let next = match u32::from(last) + 1 {
            0xD800 => Some('\u{E000}'),
            n => char::from_u32(n),
        };
        if let Some(next) = next {
            chars.push(next);
            return Some(chars.into_iter().collect());
        }
    }
    None
}

/// The priority condition of a claim for one priority (`$p`): on a queue without aging `claim_key` is minus the
/// priority, so the condition is a range of the index; with aging it is not.
fn priority_condition(p: usize, aging: bool) -> String {
    if aging {
        format!(" AND priority = ${p}")
    } else {
        format!(" AND claim_key = -CAST(${p} AS BIGINT) AND priority = ${p}")
    }
}

/// SQLite's statement for one name's first ready jobs in claim order: `$1` the queue, `$2` the name, then the
/// priority if `with_priority`, then the limit. Returns id, weight, claim_key, run_at.
pub(crate) fn sqlite_select_one_name(with_priority: bool, aging: bool) -> String {
    let priority = if with_priority {
        priority_condition(3, aging)
    } else {
        String::new()
    };
    let limit = 3 + usize::from(with_priority);
    format!(
        "SELECT id, weight, claim_key, run_at FROM jobs INDEXED BY jobs_ready_by_name \
         WHERE state = 'queued' AND concurrency_key IS NULL AND queue = $1 AND name = $2{priority} \
         ORDER BY claim_key, run_at, id LIMIT 0 + ${limit}"
    )
}

/// SQLite's steps along the ready names: the first name at or after (`FIRST_*`), or after (`NEXT_*`), `$3`, below
/// `$4` (`*_BOUNDED`), with whether GLOB `$1` matches it. `$2` is the queue. (SQLite numbers `$n` parameters in
/// the order they first appear, so they appear in order.)
const FIRST_NAME: Sql<'static> = Sql::sqlite_only(
    "SELECT name, name GLOB $1 FROM jobs INDEXED BY jobs_ready_by_name \
     WHERE state = 'queued' AND queue = $2 AND name >= $3 ORDER BY name LIMIT 1",
);
const NEXT_NAME: Sql<'static> = Sql::sqlite_only(
    "SELECT name, name GLOB $1 FROM jobs INDEXED BY jobs_ready_by_name \
     WHERE state = 'queued' AND queue = $2 AND name > $3 ORDER BY name LIMIT 1",
);
const FIRST_NAME_BOUNDED: Sql<'static> = Sql::sqlite_only(
    "SELECT name, name GLOB $1 FROM jobs INDEXED BY jobs_ready_by_name \
     WHERE state = 'queued' AND queue = $2 AND name >= $3 AND name < $4 ORDER BY name LIMIT 1",
);
const NEXT_NAME_BOUNDED: Sql<'static> = Sql::sqlite_only(
    "SELECT name, name GLOB $1 FROM jobs INDEXED BY jobs_ready_by_name \
     WHERE state = 'queued' AND queue = $2 AND name > $3 AND name < $4 ORDER BY name LIMIT 1",
);

/// The statements of the name scan, for the tests that prepare every statement on the real schema.
pub(crate) const SQLITE_NAME_STEPS: [Sql<'static>; 4] =
    [FIRST_NAME, NEXT_NAME, FIRST_NAME_BOUNDED, NEXT_NAME_BOUNDED];

/// On SQLite, the first `limit` ready jobs of `queue` in claim order among those of the names `sources` find:
/// (id, weight). `one_name` is [`sqlite_select_one_name`]'s statement; `priority` its priority, if any.
pub(crate) fn sqlite_candidates<'s>(
    db: &Db<'_>,
    one_name: Sql<'_>,
    queue: &str,
    sources: impl Iterator<Item = &'s NameSource>,
    priority: Option<i32>,
    limit: u32,
) -> Result<Vec<(i64, u32)>> {
    let sources: Vec<&NameSource> = sources.collect();
    if sources.iter().any(|s| matches!(s, NameSource::Scan { .. }))
        && let Some(found) = sqlite_walk(db, queue, &sources, priority, limit)?
    {
        return Ok(found);
    }
    let mut names = BTreeSet::new();
    for source in sources {
        match source {
            NameSource::Exact(name) => {
                names.insert(name.clone());
            }
            NameSource::Scan { pattern, from, to } => {
                scan_names(db, queue, pattern, from, to.as_deref(), &mut names)?;
            }
        }
    }
    // (claim_key, run_at, id, weight): claim order is the first three.
    let mut rows: Vec<(i64, i64, i64, u32)> = Vec::new();
    for name in &names {
        let mut args = vec![queue.to_value(), name.as_str().to_value()];
        args.extend(priority.map(ToValue::to_value));
        args.push(limit.to_value());
        rows.extend(db.query(one_name, &Params(args), |row| {
            Ok((row.get(2)?, row.get(3)?, row.get(0)?, row.get(1)?))
        })?);
    }
    rows.sort_unstable_by_key(|&(key, run_at, id, _)| (key, run_at, id));
    rows.truncate(limit as usize);
    Ok(rows
        .into_iter()
        .map(|(_, _, id, weight)| (id, weight))
        .collect())
}

/// How many ready jobs a claim with a GLOB first reads in claim order (`jobs_ready`), before it looks the names up.
/// Where the jobs it wants are dense, the first ones are among these, whatever the number of distinct names (names
/// that carry a parameter each, as Bedrock's do, make as many names as jobs); where they are sparse, the names are
/// looked up. Either way a claim reads at most this many jobs more than the cheaper of the two ways.
pub(crate) const WALK: u32 = 64;

/// `terms` joined with OR as a balanced tree: SQLite parses `a OR b OR c …` as a chain as deep as it is long, and
/// refuses an expression deeper than 1,000, which a claim of [`MAX_DEQUEUE_NAMES`](crate::MAX_DEQUEUE_NAMES)
/// names would reach.
fn balanced_or(terms: &[String]) -> String {
    match terms {
        [] => "FALSE".to_owned(),
        [one] => one.clone(),
        _ => {
            let (left, right) = terms.split_at(terms.len() / 2);
            format!("({} OR {})", balanced_or(left), balanced_or(right))
        }
    }
}

/// On SQLite, the first `limit` jobs `sources` match among the first [`WALK`] ready jobs of `queue` in claim order,
/// or `None` when those hold fewer than `limit` and there are more ready jobs after them.
fn sqlite_walk(
    db: &Db<'_>,
    queue: &str,
    sources: &[&NameSource],
    priority: Option<i32>,
    limit: u32,
) -> Result<Option<Vec<(i64, u32)>>> {
    // Parameters in the order they first appear, as SQLite binds them: the match's, the queue, the priority, the
    // number of jobs read.
    let mut args: Vec<Value<'_>> = Vec::new();
    let mut matches = Vec::new();
    for source in sources {
        match source {
            NameSource::Exact(name) => {
                args.push(name.as_str().to_value());
                matches.push(format!("name = ${}", args.len()));
            }
            NameSource::Scan { pattern, .. } => {
                args.push(pattern.as_str().to_value());
                matches.push(format!("name GLOB ${}", args.len()));
            }
        }
    }
    args.push(queue.to_value());
    let queue_n = args.len();
    let priority_sql = match priority {
        Some(p) => {
            args.push(p.to_value());
            format!(" AND priority = ${}", args.len())
        }
        None => String::new(),
    };
    args.push(WALK.to_value());
    let sql = format!(
        "SELECT id, weight, {} FROM jobs INDEXED BY jobs_ready WHERE state = 'queued' \
         AND concurrency_key IS NULL AND queue = ${queue_n}\
         {priority_sql} ORDER BY claim_key, run_at, id LIMIT 0 + ${}",
        balanced_or(&matches),
        args.len()
    );
    let read = db.query(Sql::sqlite_only(&sql), &Params(args), |row| {
        Ok((row.get::<i64>(0)?, row.get::<u32>(1)?, row.get::<bool>(2)?))
    })?;
    let found: Vec<(i64, u32)> = read
        .iter()
        .filter(|(_, _, hit)| *hit)
        .take(limit as usize)
        .map(|&(id, weight, _)| (id, weight))
        .collect();
    Ok((found.len() == limit as usize || read.len() < WALK as usize).then_some(found))
}

/// Adds to `names` the distinct ready names of `queue` in [`from`, `to`) that `pattern` matches, a step per name.
fn scan_names(
    db: &Db<'_>,
    queue: &str,
    pattern: &str,
    from: &str,
    to: Option<&str>,
    names: &mut BTreeSet<String>,
) -> Result<()> {
    let mut at = from.to_owned();
    let mut first = true;
    loop {
        let step = match (first, to.is_some()) {
            (true, false) => FIRST_NAME,
            (false, false) => NEXT_NAME,
            (true, true) => FIRST_NAME_BOUNDED,
            (false, true) => NEXT_NAME_BOUNDED,
        };
        let mut args = vec![pattern.to_value(), queue.to_value(), at.as_str().to_value()];
        args.extend(to.map(ToValue::to_value));
        let next = db.query_row(step, &Params(args), |row| {
            Ok((row.get::<String>(0)?, row.get::<bool>(1)?))
        })?;
        let Some((name, matches)) = next else {
            return Ok(());
        };
        if matches {
            names.insert(name.clone());
        }
        at = name;
        first = false;
    }
}

/// PostgreSQL's statement for a claim of `shapes` (one per name pattern, in order): the first ready jobs of one
/// queue in claim order among those of the names the patterns find, row-locked, skipping those other nodes are
/// taking. Parameters: `$1` the queue, then each pattern's ([`NameSource::args`]), then the priority if
/// `with_priority`, then the limit. Returns id, weight, in claim order.
///
/// A claim of one exact name (a worker with one handler) is one probe of the index. With a GLOB, the first
/// [`WALK`] ready jobs' matches are taken when they suffice (the other branch is then never run). Otherwise each
/// GLOB's names come from a recursive scan along `jobs_ready_by_name` (one index probe per distinct name in its range), the
/// names of all patterns are united (a name two patterns match is read once), each name's first jobs are read by a
/// lateral probe in claim order, and of those candidates the first in claim order are locked: a claim locks no
/// more jobs than it takes.
pub(crate) fn postgres_select(shapes: &[NameShape], with_priority: bool, aging: bool) -> String {
    let mut numbers = Numbers(2);
    let names = NameParts::of(shapes, &mut numbers);
    let priority = if with_priority {
        priority_condition(numbers.next(), aging)
    } else {
        String::new()
    };
    let limit = numbers.next();
    let probe = |columns: &str, name: &str, take: &str, lock: &str| {
        format!(
            "SELECT {columns} FROM jobs WHERE state = 'queued' AND concurrency_key IS NULL AND queue = $1 \
             AND name COLLATE \"C\" = {name}{priority} \
             ORDER BY name COLLATE \"C\", claim_key, run_at, id LIMIT {take}{lock}"
        )
    };
    let take = format!("CAST(${limit} AS BIGINT)");
    if shapes == [NameShape::Exact] {
        // One name, the claim of a worker with one handler: its probe alone, which locks what it takes.
        return probe("id, weight", "$2", &take, " FOR UPDATE SKIP LOCKED");
    }
    // Several names: each name's first jobs are candidates, read without locks, twice as many as the claim asks
    // for so that jobs other nodes hold leave enough; then the candidates in claim order are locked, skipping
    // those other nodes hold, up to the limit. Locking in the probes would lock every name's jobs, up to the limit
    // each, for the whole of the writer's transaction, and other nodes would skip them all.
    let probes = format!(
        "SELECT c.id FROM wanted AS w CROSS JOIN LATERAL ({}) AS c",
        probe("id", "w.name", &format!("2 * CAST(${limit} AS BIGINT)"), "")
    );
    let has_scan = shapes.iter().any(|s| matches!(s, NameShape::Scan { .. }));
    let mut with = Vec::new();
    let candidates = if has_scan {
        with.extend(walk_first(&priority, &names.matches, limit));
        format!(
            "SELECT id FROM hits WHERE (SELECT enough FROM walked) \
             UNION ALL {probes} WHERE NOT (SELECT enough FROM walked)"
        )
    } else {
        probes
    };
    with.extend(names.scans);
    with.push(format!(
        "wanted (name) AS ({})",
        names.wanted.join(" UNION ")
    ));
    format!(
        "SELECT id, weight FROM jobs WHERE id = ANY (ARRAY(WITH RECURSIVE {with} {candidates})) \
         AND state = 'queued' ORDER BY claim_key, run_at, id LIMIT {take} FOR UPDATE SKIP LOCKED",
        with = with.join(", "),
    )
}

/// The next parameter's number, in the order parameters are given.
struct Numbers(usize);

impl Numbers {
    fn next(&mut self) -> usize {
        self.0 += 1;
        self.0 - 1
    }
}

/// The parts of [`postgres_select`] that come from the claim's name patterns.
struct NameParts {
    /// For each pattern that scans a range of names, its recursive scan along `jobs_ready_by_name`.
    scans: Vec<String>,
    /// For each pattern, the names it wants: one, or those its scan found and its GLOB matches.
    wanted: Vec<String>,
    /// For each pattern, what a job's name must be to match: for the walk in claim order that comes first when
    /// there is a GLOB.
    matches: Vec<String>,
}

impl NameParts {
    /// The parts for `shapes`, their parameters numbered by `numbers` in order.
    fn of(shapes: &[NameShape], numbers: &mut Numbers) -> NameParts {
        let mut parts = NameParts {
            scans: Vec::new(),
            wanted: Vec::new(),
            matches: Vec::new(),
        };
        for shape in shapes {
            match shape {
                NameShape::Exact => {
                    let n = numbers.next();
                    parts.wanted.push(format!("SELECT ${n}::text"));
                    parts.matches.push(format!("name COLLATE \"C\" = ${n}"));
                }
                NameShape::Scan { bounded, glob } => {
                    let pattern = glob.then(|| numbers.next());
                    let from = numbers.next();
                    let to = bounded.then(|| numbers.next());
                    parts.scan(pattern, from, to);
                }
            }
        }
        parts
    }

    /// A pattern that scans the names from parameter `from` (below `to`, if bounded), matching GLOB `pattern`
    /// if it has one.
    fn scan(&mut self, pattern: Option<usize>, from: usize, to: Option<usize>) {
        let below = to
            .map(|to| format!(" AND j.name COLLATE \"C\" < ${to}"))
            .unwrap_or_default();
        self.matches.push(match pattern {
            Some(p) => format!("cairn_glob(name, ${p})"),
            None => format!(
                "(name COLLATE \"C\" >= ${from}{})",
                to.map(|to| format!(" AND name COLLATE \"C\" < ${to}"))
                    .unwrap_or_default()
            ),
        });
        let scan = format!("scan_{}", self.scans.len() + 1);
        let step = |start: &str| {
            format!(
                "SELECT j.name FROM jobs AS j WHERE j.state = 'queued' AND j.queue = $1 \
                 AND j.name COLLATE \"C\" {start}{below} ORDER BY j.name COLLATE \"C\" LIMIT 1"
            )
        };
        self.scans.push(format!(
            "{scan} (name) AS (SELECT ({first}) UNION ALL SELECT ({following}) FROM {scan} AS s \
             WHERE s.name IS NOT NULL)",
            first = step(&format!(">= ${from}")),
            following = step("> s.name"),
        ));
        let matching = pattern
            .map(|p| format!(" AND cairn_glob(s.name, ${p})"))
            .unwrap_or_default();
        self.wanted.push(format!(
            "SELECT s.name FROM {scan} AS s WHERE s.name IS NOT NULL{matching}"
        ));
    }
}

/// With a GLOB, the first [`WALK`] ready jobs in claim order come first: their first matches (twice the limit, as
/// the probes) are the candidates if they are enough, or if there are no more ready jobs; else the names are looked
/// up. A branch whose condition is false is not run. The `WITH` parts `walk`, `hits` and `walked`.
fn walk_first(priority: &str, matches: &[String], limit: usize) -> [String; 3] {
    [
        format!(
            "walk AS MATERIALIZED (SELECT id, name FROM jobs WHERE state = 'queued' \
             AND concurrency_key IS NULL AND queue = $1{priority} \
             ORDER BY claim_key, run_at, id LIMIT {WALK})"
        ),
        format!(
            "hits AS MATERIALIZED (SELECT id FROM walk WHERE {} LIMIT 2 * CAST(${limit} AS BIGINT))",
            matches.join(" OR ")
        ),
        format!(
            "walked (enough) AS (SELECT (SELECT count(*) FROM hits) >= ${limit} \
             OR (SELECT count(*) FROM walk) < {WALK})"
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Jobs;
    use proptest::prelude::*;

    #[test]
    fn a_prefix_ends_at_its_last_character_raised() {
        assert_eq!(prefix_end("email."), Some("email/".to_owned()));
        assert_eq!(prefix_end(""), None);
        assert_eq!(prefix_end("a\u{10FFFF}"), Some("b".to_owned()));
        assert_eq!(prefix_end("\u{10FFFF}\u{10FFFF}"), None);
        assert_eq!(prefix_end("x\u{D7FF}"), Some("x\u{E000}".to_owned()));
    }

    #[test]
    fn each_pattern_finds_its_names_by_the_cheapest_way() {
        let source = |p: &str| NameSource::of(&NamePattern::parse(p).unwrap());
        assert_eq!(source("email.send"), NameSource::Exact("email.send".into()));
        assert_eq!(source("a[*]b"), NameSource::Exact("a*b".into()));
        assert_eq!(
            source("email.*"),
            NameSource::Scan {
                pattern: "email.*".into(),
                from: "email.".into(),
                to: Some("email/".into())
            }
        );
        assert_eq!(
            source("*mail*"),
            NameSource::Scan {
                pattern: "*mail*".into(),
                from: String::new(),
                to: None
            }
        );
        assert_eq!(
            source("[?]x?").shape(),
            NameShape::Scan {
                bounded: true,
                glob: true
            }
        );
        // A prefix and a star needs no GLOB, even with an escaped character in the prefix.
        for prefix_star in ["email.*", "a[*]b*"] {
            assert_eq!(
                source(prefix_star).shape(),
                NameShape::Scan {
                    bounded: true,
                    glob: false
                },
                "{prefix_star}"
            );
        }
        assert_eq!(source("email.*").args().len(), 2, "no pattern among them");
    }

    #[test]
    fn the_postgres_statement_numbers_its_parameters_as_the_sources_give_them() {
        let sql = postgres_select(
            &[
                NameShape::Exact,
                NameShape::Scan {
                    bounded: true,
                    glob: true,
                },
                NameShape::Scan {
                    bounded: false,
                    glob: true,
                },
            ],
            true,
            false,
        );
        // $2 the exact name; $3..$5 the bounded scan; $6, $7 the open one; $8 the priority; $9 the limit.
        for expected in [
            "SELECT $2::text",
            "cairn_glob(s.name, $3)",
            ">= $4",
            "< $5",
            "cairn_glob(s.name, $6)",
            ">= $7",
            "-CAST($8 AS BIGINT)",
            "LIMIT CAST($9 AS BIGINT)",
        ] {
            assert!(sql.contains(expected), "{expected} in {sql}");
        }
        assert!(!sql.contains("$10"));
        // One exact name is one probe: $2 the name, $3 the limit.
        let one = postgres_select(&[NameShape::Exact], false, false);
        assert!(!one.contains("WITH"), "{one}");
        assert!(
            one.contains("= $2") && one.contains("LIMIT CAST($3 AS BIGINT)") && !one.contains("$4"),
            "{one}"
        );
    }

    /// A queue file whose queue `q` holds, ready, `count` jobs of each name, enqueued in the order given.
    async fn queue_file(path: &std::path::Path, jobs: &[(&str, usize)]) {
        let queue = crate::Queue::open(path).await.unwrap();
        for &(name, count) in jobs {
            let pushes: Vec<crate::Push> = (0..count)
                .map(|_| crate::Push::new(name).queue("q"))
                .collect();
            for chunk in pushes.chunks(5000) {
                queue.enqueue_batch(chunk.to_vec()).await.unwrap();
            }
        }
        queue
            .close(std::time::Duration::from_secs(5))
            .await
            .unwrap();
    }

    /// The virtual-machine instructions SQLite runs for a claim of `patterns` taking one job from queue `q`, and
    /// the job's name.
    fn claim_cost(path: &std::path::Path, patterns: &[&str]) -> (u64, Option<String>) {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicU64, Ordering};
        let mut conn = rusqlite::Connection::open(path).unwrap();
        let sources: Vec<NameSource> = patterns
            .iter()
            .map(|p| NameSource::of(&NamePattern::parse(*p).unwrap()))
            .collect();
        let one_name = sqlite_select_one_name(false, false);
        let instructions = Arc::new(AtomicU64::new(0));
        let counter = instructions.clone();
        conn.progress_handler(
            1,
            Some(move || {
                counter.fetch_add(1, Ordering::Relaxed);
                false
            }),
        )
        .unwrap();
        let picked = sqlite_candidates(
            &Db::Sqlite(&conn),
            Sql::sqlite_only(&one_name),
            "q",
            sources.iter(),
            None,
            1,
        )
        .unwrap();
        conn.progress_handler(0, None::<fn() -> bool>).unwrap();
        let name = picked.first().map(|&(id, _)| {
            conn.query_row("SELECT name FROM jobs WHERE id = ?1", [id], |r| r.get(0))
                .unwrap()
        });
        (instructions.load(Ordering::Relaxed), name)
    }

    /// Issue 19: a claim for a name, a set of names or a prefix reads the same beside 20,000 ready jobs of other
    /// names in its queue as beside none; a general GLOB reads a step per distinct ready name, not per job.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_claim_for_some_names_never_reads_the_ready_jobs_of_other_names() {
        let dir = tempfile::tempdir().unwrap();
        let alone = dir.path().join("alone.db");
        let crowded = dir.path().join("crowded.db");
        let many_names = dir.path().join("many-names.db");
        let wanted = [("email.send", 2), ("email.bounce", 1), ("sms.send", 1)];
        queue_file(&alone, &wanted).await;
        // The other jobs come first, so that in claim order they are ahead of every wanted one.
        let mut crowd = vec![("report.build", 10_000), ("a.first", 10_000)];
        crowd.extend(wanted);
        queue_file(&crowded, &crowd).await;
        let names: Vec<String> = (0..100).map(|i| format!("other.{i:03}")).collect();
        let mut spread: Vec<(&str, usize)> = names.iter().map(|n| (n.as_str(), 200)).collect();
        spread.extend(wanted);
        queue_file(&many_names, &spread).await;

        for patterns in [
            &["email.send"][..],
            &["sms.send", "email.bounce"],
            &["email.*"],
            &["email.[bs]*", "sms.*"],
        ] {
            let (quiet, first) = claim_cost(&alone, patterns);
            let (busy, first_busy) = claim_cost(&crowded, patterns);
            let (spread, first_spread) = claim_cost(&many_names, patterns);
            assert!(first.is_some(), "{patterns:?} finds its job");
            assert_eq!(first_busy, first, "{patterns:?}");
            assert_eq!(first_spread, first, "{patterns:?}");
            if patterns
                .iter()
                .all(|p| NamePattern::parse(*p).unwrap().is_literal())
            {
                assert_eq!(
                    busy, quiet,
                    "{patterns:?}: the same work beside 20,000 jobs of two other names"
                );
                assert_eq!(
                    spread, quiet,
                    "{patterns:?}: the same work beside 20,000 jobs of 100 other names"
                );
            } else {
                // A GLOB first reads the first WALK jobs in claim order (here all of other names), then looks its
                // names up within its prefix's range: a fixed amount more, whatever the crowd's names.
                assert_eq!(
                    spread, busy,
                    "{patterns:?}: the same work beside 2 other names as beside 100"
                );
                assert!(
                    busy < quiet + 2_000,
                    "{patterns:?}: {busy} against {quiet} alone"
                );
            }
        }
        // A GLOB without a literal prefix steps through the distinct ready names once the walk finds too few:
        // in proportion to the names, far below one step per job.
        let (quiet, first) = claim_cost(&alone, &["*.send"]);
        let (busy, _) = claim_cost(&crowded, &["*.send"]);
        let (spread, first_spread) = claim_cost(&many_names, &["*.send"]);
        assert_eq!(first.as_deref(), Some("email.send"));
        assert_eq!(first_spread, first);
        assert!(quiet < busy && busy < spread, "{quiet} {busy} {spread}");
        assert!(
            spread - busy < 98 * 100,
            "{spread} against {busy}: under 100 per other name"
        );
        assert!(
            spread < 20_000 / 2,
            "{spread} instructions beside 20,000 jobs"
        );
    }

    /// Names that each carry a parameter (Bedrock's `www-prod/Evaluator?accountID=856`) make as many names as
    /// jobs: a claim for their prefix finds the first job among the first it reads, never stepping through every
    /// name.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_glob_over_a_name_per_job_takes_the_first_job_without_visiting_every_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("unique.db");
        let names: Vec<String> = (0..3000).map(|i| format!("www/Evaluator?id={i}")).collect();
        let jobs: Vec<(&str, usize)> = names.iter().map(|n| (n.as_str(), 1)).collect();
        queue_file(&path, &jobs).await;
        for pattern in ["www/*", "www/Evaluator[?]id=*", "*Evaluator*"] {
            let (cost, first) = claim_cost(&path, &[pattern]);
            assert_eq!(first.as_deref(), Some("www/Evaluator?id=0"), "{pattern}");
            assert!(
                cost < 1_000,
                "{pattern}: {cost} instructions for the first of 3,000 names"
            );
        }
    }

    fn glob_matches(conn: &rusqlite::Connection, name: &str, pattern: &str) -> bool {
        conn.query_row("SELECT ?1 GLOB ?2", [name, pattern], |r| r.get(0))
            .unwrap()
    }

    proptest! {
        /// Every name a pattern matches (by SQLite's own GLOB) lies in the range its source scans.
        #[test]
        fn every_match_lies_in_the_scanned_range(
            pattern in "[ab.*?\\[\\]^]{1,6}",
            name in "[ab.*?\\[\\]^\u{10FFFF}]{1,6}",
        ) {
            let Ok(parsed) = NamePattern::parse(&pattern) else { return Ok(()) };
            let conn = rusqlite::Connection::open_in_memory().unwrap();
            if !glob_matches(&conn, &name, &pattern) {
                return Ok(());
            }
            match NameSource::of(&parsed) {
                NameSource::Exact(exact) => prop_assert_eq!(exact, name),
                NameSource::Scan { from, to, .. } => {
                    prop_assert!(name.as_str() >= from.as_str(), "{name:?} before {from:?}");
                    if let Some(to) = to {
                        prop_assert!(name.as_str() < to.as_str(), "{name:?} at or after {to:?}");
                    }
                }
            }
        }
    }
}
