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
//! Then each name gives its first jobs in claim order, and the lists are merged. On SQLite, where a statement costs
//! no round trip, the writer runs those steps one by one ([`sqlite_candidates`]); on PostgreSQL one statement does
//! all of it ([`postgres_select`]), since the bulk claims of `bulk_claim.rs` build on it too.

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
         WHERE state = 'queued' AND queue = $1 AND name = $2{priority} \
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
/// A claim of one exact name (a worker with one handler) is one probe of the index. Otherwise each GLOB's names
/// come from a recursive scan along `jobs_ready_by_name` (one index probe per distinct name in its range), the
/// names of all patterns are united (a name two patterns match is read once), each name's first jobs are read by a
/// lateral probe in claim order, and of those candidates the first in claim order are locked: a claim locks no
/// more jobs than it takes.
pub(crate) fn postgres_select(shapes: &[NameShape], with_priority: bool, aging: bool) -> String {
    let mut next = 2;
    let mut param = || {
        let n = next;
        next += 1;
        n
    };
    let mut scans = Vec::new();
    let mut wanted = Vec::new();
    for shape in shapes {
        match shape {
            NameShape::Exact => wanted.push(format!("SELECT ${}::text", param())),
            NameShape::Scan { bounded, glob } => {
                let pattern = glob.then(&mut param);
                let from = param();
                let below = if *bounded {
                    format!(" AND j.name COLLATE \"C\" < ${}", param())
                } else {
                    String::new()
                };
                let scan = format!("scan_{}", scans.len() + 1);
                let step = |start: &str| {
                    format!(
                        "SELECT j.name FROM jobs AS j WHERE j.state = 'queued' AND j.queue = $1 \
                         AND j.name COLLATE \"C\" {start}{below} ORDER BY j.name COLLATE \"C\" LIMIT 1"
                    )
                };
                scans.push(format!(
                    "{scan} (name) AS (SELECT ({first}) UNION ALL SELECT ({following}) FROM {scan} AS s \
                     WHERE s.name IS NOT NULL)",
                    first = step(&format!(">= ${from}")),
                    following = step("> s.name"),
                ));
                let matching = pattern
                    .map(|p| format!(" AND cairn_glob(s.name, ${p})"))
                    .unwrap_or_default();
                wanted.push(format!(
                    "SELECT s.name FROM {scan} AS s WHERE s.name IS NOT NULL{matching}"
                ));
            }
        }
    }
    let priority = if with_priority {
        priority_condition(param(), aging)
    } else {
        String::new()
    };
    let limit = param();
    let probe = |columns: &str, name: &str, take: &str, lock: &str| {
        format!(
            "SELECT {columns} FROM jobs WHERE state = 'queued' AND queue = $1 \
             AND name COLLATE \"C\" = {name}{priority} \
             ORDER BY name COLLATE \"C\", claim_key, run_at, id LIMIT {take}{lock}"
        )
    };
    let take = format!("0 + ${limit}");
    if shapes == [NameShape::Exact] {
        // One name, the claim of a worker with one handler: its probe alone, which locks what it takes.
        return probe("id, weight", "$2", &take, " FOR UPDATE SKIP LOCKED");
    }
    // Several names: each name's first jobs are candidates, read without locks, twice as many as the claim asks
    // for so that jobs other nodes hold leave enough; then the candidates in claim order are locked, skipping
    // those other nodes hold, up to the limit. Locking in the probes would lock every name's jobs, up to the limit
    // each, for the whole of the writer's transaction, and other nodes would skip them all.
    let mut with = scans;
    with.push(format!("wanted (name) AS ({})", wanted.join(" UNION ")));
    format!(
        "SELECT id, weight FROM jobs WHERE id = ANY (ARRAY(WITH RECURSIVE {with} \
         SELECT c.id FROM wanted AS w CROSS JOIN LATERAL ({probe}) AS c)) AND state = 'queued' \
         ORDER BY claim_key, run_at, id LIMIT {take} FOR UPDATE SKIP LOCKED",
        with = with.join(", "),
        probe = probe("id", "w.name", &format!("2 * CAST(${limit} AS BIGINT)"), ""),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
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
            "LIMIT 0 + $9",
        ] {
            assert!(sql.contains(expected), "{expected} in {sql}");
        }
        assert!(!sql.contains("$10"));
        // One exact name is one probe: $2 the name, $3 the limit.
        let one = postgres_select(&[NameShape::Exact], false, false);
        assert!(!one.contains("WITH"), "{one}");
        assert!(
            one.contains("= $2") && one.contains("LIMIT 0 + $3") && !one.contains("$4"),
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
            assert_eq!(
                busy, quiet,
                "{patterns:?}: the same work beside 20,000 jobs of two other names"
            );
            assert_eq!(
                spread, quiet,
                "{patterns:?}: the same work beside 20,000 jobs of 100 other names"
            );
        }
        // A GLOB without a literal prefix steps through the distinct ready names: a few more beside two other
        // names, and in proportion to 100 of them, far below one step per job.
        let (quiet, first) = claim_cost(&alone, &["*.send"]);
        let (busy, _) = claim_cost(&crowded, &["*.send"]);
        let (spread, first_spread) = claim_cost(&many_names, &["*.send"]);
        assert_eq!(first.as_deref(), Some("email.send"));
        assert_eq!(first_spread, first);
        let per_name = (busy - quiet) / 2;
        assert!(per_name < 100, "{per_name} instructions per other name");
        assert!(
            spread <= quiet + 100 * per_name + 100,
            "{spread} against {quiet} + 100 x {per_name}"
        );
        assert!(
            spread < 20_000 / 2,
            "{spread} instructions beside 20,000 jobs"
        );
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
