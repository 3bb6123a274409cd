//! Identifier newtypes. Outside input is parsed once, here, at the edge; inside the engine no identifier is a bare
//! `String`.

use std::fmt;

use crate::error::{Error, Result};

/// Checks the rules every identifier shares: non-empty, at most `max` bytes, no control characters.
fn check_text(field: &'static str, value: &str, max: usize) -> Result<()> {
    if value.is_empty() {
        return Err(Error::invalid(field, "must not be empty"));
    }
    if value.len() > max {
        return Err(Error::invalid(
            field,
            format!("must be at most {max} bytes, got {}", value.len()),
        ));
    }
    if let Some(c) = value.chars().find(|c| c.is_control()) {
        return Err(Error::invalid(
            field,
            format!("must not contain control characters, got {c:?}"),
        ));
    }
    Ok(())
}

macro_rules! text_id {
    ($(#[$doc:meta])* $name:ident, $field:literal, $max:expr, $extra:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(String);

        impl $name {
            /// Parses outside input.
            ///
            /// # Errors
            /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) naming the field and the broken rule.
            pub fn parse(value: impl Into<String>) -> Result<Self> {
                let value = value.into();
                check_text($field, &value, $max)?;
                let extra: fn(&str) -> Result<()> = $extra;
                extra(&value)?;
                Ok($name(value))
            }

            /// The identifier as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// Wraps text already validated by the engine (read back from the database).
            #[allow(dead_code)]
            pub(crate) fn from_trusted(value: String) -> Self {
                $name(value)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl TryFrom<&str> for $name {
            type Error = Error;
            fn try_from(value: &str) -> Result<Self> {
                $name::parse(value)
            }
        }

        impl TryFrom<String> for $name {
            type Error = Error;
            fn try_from(value: String) -> Result<Self> {
                $name::parse(value)
            }
        }
    };
}

text_id!(
    /// A queue's name: letters, digits and `_ - . :`, at most 128 bytes. The default queue is `default`.
    QueueName, "queue", 128, |v| {
        match v.chars().find(|c| !(c.is_ascii_alphanumeric() || "_-.:".contains(*c))) {
            Some(c) => Err(Error::invalid("queue", format!("may only contain letters, digits and _ - . :, got {c:?}"))),
            None => Ok(()),
        }
    }
);

text_id!(
    /// A job's name, its type: what workers match with a GLOB such as `email.*`. At most 255 bytes. A name may hold
    /// GLOB's own characters (`SampleWorker?mode=extra`, as Bedrock's worker manager writes them); where Cairn
    /// matches one name exactly, it matches [`NamePattern::exact`].
    JobName, "name", 255, |_| Ok(())
);

text_id!(
    /// A worker's id, as it identifies itself when it takes jobs. At most 255 bytes.
    WorkerId, "worker", 255, |_| Ok(())
);

text_id!(
    /// A step's name within its job ([`RecordStep`](crate::RecordStep)). At most 255 bytes.
    StepName, "step", 255, |_| Ok(())
);

text_id!(
    /// The key a signal is sent to and a job waits for ([`SendSignal`](crate::SendSignal),
    /// [`WaitForSignal`](crate::WaitForSignal)), such as `order-42/approved`. At most 255 bytes.
    SignalKey, "key", 255, |_| Ok(())
);

text_id!(
    /// A tag on a job. At most 128 bytes.
    Tag, "tags", 128, |_| Ok(())
);

text_id!(
    /// A key that at most one live (not yet finished) job holds at a time. At most 255 bytes.
    UniqueKey, "unique_key", 255, |_| Ok(())
);

text_id!(
    /// The key that debounced pushes share: a push with it lands in the pending job that holds it. At most 255
    /// bytes.
    DebounceKey, "debounce.key", 255, |_| Ok(())
);

text_id!(
    /// The key a throttle holds for its period: one job per key per period. At most 255 bytes.
    ThrottleKey, "throttle.key", 255, |_| Ok(())
);

text_id!(
    /// The key of a job's concurrency group (`customer:42`): a queue may limit how many jobs of one key run at
    /// once, and keyed jobs take turns by key. At most 255 bytes.
    ConcurrencyKey, "concurrency.key", 255, |_| Ok(())
);

text_id!(
    /// The key of a recurring template, chosen by the caller. At most 255 bytes.
    RecurringKey, "key", 255, |_| Ok(())
);

text_id!(
    /// A W3C trace context (`traceparent`) of version 00, as the request that pushed a job carried it:
    /// `00-{trace id, 32 lowercase hex digits}-{parent id, 16}-{flags, 2}`, neither id all zeros. The job keeps it,
    /// and its worker runs the job as part of that trace.
    TraceParent, "trace_parent", 55, check_trace_parent
);

fn check_trace_parent(value: &str) -> Result<()> {
    let hex = |part: &str, len: usize| {
        part.len() == len
            && part
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    let parts: Vec<&str> = value.split('-').collect();
    let well_formed = matches!(
        parts.as_slice(),
        ["00", trace, parent, flags] if hex(trace, 32) && hex(parent, 16) && hex(flags, 2)
    );
    if !well_formed {
        return Err(Error::invalid(
            "trace_parent",
            format!(
                "must be a W3C traceparent of version 00 (00-<32 hex digits>-<16 hex digits>-<2 hex digits>, \
                 lowercase), got {value:?}"
            ),
        ));
    }
    if parts[1].bytes().all(|b| b == b'0') || parts[2].bytes().all(|b| b == b'0') {
        return Err(Error::invalid(
            "trace_parent",
            format!("must not have an all-zero trace or parent id, got {value:?}"),
        ));
    }
    Ok(())
}

impl TraceParent {
    /// The trace's id: 32 hex digits.
    pub fn trace_id(&self) -> &str {
        &self.0[3..35]
    }

    /// The id of the span that pushed the job (the parent of the worker's): 16 hex digits.
    pub fn parent_id(&self) -> &str {
        &self.0[36..52]
    }

    /// Whether the trace is sampled (bit 0 of the flags).
    pub fn sampled(&self) -> bool {
        u8::from_str_radix(&self.0[53..55], 16).is_ok_and(|flags| flags & 1 == 1)
    }
}

text_id!(
    /// A pattern over job names with SQLite's GLOB syntax: `*` any run of characters, `?` one character, `[abc]`,
    /// `[a-z]` and `[^abc]` one character from (or not from) a set. Matching is case-sensitive.
    /// At most 1,024 bytes, so that any job name fits once escaped by [`NamePattern::exact`].
    NamePattern, "name_pattern", 1024, validate_glob
);

impl Default for QueueName {
    fn default() -> Self {
        QueueName("default".to_owned())
    }
}

impl NamePattern {
    /// The pattern that matches every name.
    pub fn any() -> Self {
        NamePattern("*".to_owned())
    }

    /// Whether the pattern matches every name: `*`, or any run of `*` alone.
    pub fn is_any(&self) -> bool {
        self.0.bytes().all(|b| b == b'*')
    }

    /// Whether the pattern matches one name only (see [`NamePattern::literal`]).
    pub fn is_literal(&self) -> bool {
        self.literal().is_some()
    }

    /// The one name the pattern matches, when it matches only one: it has no `*` or `?`, and each `[` opens a set
    /// of one character (`[?]`, as [`NamePattern::exact`] escapes one), so that it can be compared with `=`.
    pub fn literal(&self) -> Option<String> {
        let mut name = String::with_capacity(self.0.len());
        let mut chars = self.0.chars();
        while let Some(c) = chars.next() {
            match c {
                '*' | '?' => return None,
                '[' => {
                    let member = chars.next().filter(|m| *m != '^')?;
                    if chars.next() != Some(']') {
                        return None;
                    }
                    name.push(member);
                }
                c => name.push(c),
            }
        }
        Some(name)
    }

    /// What every name the pattern matches starts with: the pattern up to its first `*`, `?` or set of more than
    /// one character, a set of one (`[?]`) standing for its character. The whole name of a literal pattern.
    pub fn literal_prefix(&self) -> String {
        let mut prefix = String::with_capacity(self.0.len());
        let mut chars = self.0.chars();
        while let Some(c) = chars.next() {
            match c {
                '*' | '?' => break,
                '[' => {
                    let mut set = chars.clone();
                    match (set.next(), set.next()) {
                        (Some(member), Some(']')) if member != '^' => {
                            prefix.push(member);
                            chars = set;
                        }
                        _ => break,
                    }
                }
                c => prefix.push(c),
            }
        }
        prefix
    }

    /// Whether `name` matches, as SQLite's GLOB decides (case-sensitive; `*` any run of characters, `?` one, `[…]`
    /// one of a set, with ranges, `^` negating, and a `]` first a member), for matching in memory what the
    /// database's claims match in SQL.
    pub fn matches(&self, name: &str) -> bool {
        let pattern: Vec<char> = self.0.chars().collect();
        let name: Vec<char> = name.chars().collect();
        glob(&pattern, &name)
    }

    /// The pattern that matches `name` and nothing else: GLOB's `*`, `?` and `[` each stand in a set of their own
    /// (`a?b` becomes `a[?]b`). A `]` outside a set is already itself.
    pub fn exact(name: &JobName) -> Self {
        let mut pattern = String::with_capacity(name.as_str().len());
        for c in name.as_str().chars() {
            match c {
                '*' | '?' | '[' => {
                    pattern.push('[');
                    pattern.push(c);
                    pattern.push(']');
                }
                c => pattern.push(c),
            }
        }
        NamePattern(pattern)
    }
}

/// GLOB's match of `name` against `pattern`: a `*` tries each place it could end (the last `*` seen is the only
/// one to go back to, as in SQLite's own matcher, which keeps this linear in practice).
fn glob(pattern: &[char], name: &[char]) -> bool {
    let (mut p, mut n) = (0, 0);
    // Where the last `*` was, and the name's position it was tried at.
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        let step = match pattern.get(p) {
            Some('*') => {
                star = Some((p, n));
                p += 1;
                continue;
            }
            Some('?') => Some(p + 1),
            Some('[') => set(pattern, p, name[n]),
            Some(c) if *c == name[n] => Some(p + 1),
            _ => None,
        };
        match (step, star) {
            (Some(next), _) => {
                p = next;
                n += 1;
            }
            (None, Some((at, tried))) => {
                // The `*` takes one more character.
                p = at + 1;
                n = tried + 1;
                star = Some((at, tried + 1));
            }
            (None, None) => return false,
        }
    }
    pattern[p..].iter().all(|c| *c == '*')
}

/// The set opening at `pattern[open]` (`[`): where the pattern goes on if it holds `c`, or `None`. An unclosed set
/// matches nothing (patterns are checked to close them).
fn set(pattern: &[char], open: usize, c: char) -> Option<usize> {
    let mut i = open + 1;
    let negated = pattern.get(i) == Some(&'^');
    if negated {
        i += 1;
    }
    let mut found = false;
    let mut first = true;
    loop {
        let member = *pattern.get(i)?;
        if member == ']' && !first {
            break;
        }
        // As SQLite reads a set: a `]` first is a member, and cannot start a range.
        let can_start_range = !(first && member == ']');
        first = false;
        if can_start_range
            && pattern.get(i + 1) == Some(&'-')
            && pattern.get(i + 2).is_some_and(|end| *end != ']')
        {
            let end = pattern[i + 2];
            found |= member <= c && c <= end;
            i += 3;
        } else {
            found |= member == c;
            i += 1;
        }
    }
    (found != negated).then_some(i + 1)
}

/// Rejects GLOBs that SQLite would accept but that can never match what the user meant: an unclosed `[`.
fn validate_glob(pattern: &str) -> Result<()> {
    let mut chars = pattern.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        if c != '[' {
            continue;
        }
        // A set may start with `^`, and a `]` right after the opening (or after `^`) is a literal member.
        if chars.peek().map(|(_, c)| *c) == Some('^') {
            chars.next();
        }
        if chars.peek().map(|(_, c)| *c) == Some(']') {
            chars.next();
        }
        let mut closed = false;
        for (_, c) in chars.by_ref() {
            if c == ']' {
                closed = true;
                break;
            }
        }
        if !closed {
            return Err(Error::invalid(
                "name_pattern",
                format!("the '[' at byte {at} opens a character set that is never closed with ']'"),
            ));
        }
    }
    Ok(())
}

/// A job's id, assigned by Cairn. Ids are never reused, even after a job is deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JobId(pub i64);

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The matcher in memory agrees with SQLite's GLOB, on patterns and names over a small alphabet (so that they
    /// meet often) with GLOB's own characters.
    #[cfg(feature = "sqlite")]
    #[test]
    fn matching_in_memory_agrees_with_sqlites_glob() {
        use proptest::prelude::*;
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        let pattern = proptest::collection::vec(
            prop::sample::select(vec![
                "a", "b", "-", "*", "?", "[a]", "[^b]", "[a-b]", "[]a]", "[b-]", "é", "[]-a]",
                "[^]-b]", "[a-]",
            ]),
            0..6,
        )
        .prop_map(|parts| parts.concat());
        let name = proptest::collection::vec(
            prop::sample::select(vec!['a', 'b', '-', ']', 'é', 'c', '_']),
            0..6,
        )
        .prop_map(|chars| chars.into_iter().collect::<String>());
        proptest!(ProptestConfig::with_cases(3000), |(pattern in pattern, name in name)| {
            let Ok(parsed) = NamePattern::parse(pattern.as_str()) else { return Ok(()) };
            let sqlite: bool = conn
                .query_row("SELECT ?1 GLOB ?2", rusqlite::params![name, pattern], |r| r.get(0))
                .unwrap();
            prop_assert_eq!(parsed.matches(&name), sqlite, "{} GLOB {}", name, pattern);
        });
    }

    fn check(result: Result<impl fmt::Debug>, expected: &str) {
        match result {
            Ok(v) => assert_eq!(format!("{v:?}"), expected),
            Err(e) => assert_eq!(e.to_string(), expected),
        }
    }

    #[test]
    fn identifiers_are_validated_with_field_and_rule() {
        check(QueueName::parse(""), "queue: must not be empty");
        check(
            QueueName::parse("a b"),
            "queue: may only contain letters, digits and _ - . :, got ' '",
        );
        check(QueueName::parse("mail.high"), "QueueName(\"mail.high\")");
        check(
            JobName::parse("www-prod/Evaluator?accountID=856&x=[1]*"),
            "JobName(\"www-prod/Evaluator?accountID=856&x=[1]*\")",
        );
        check(
            JobName::parse("x".repeat(256)),
            "name: must be at most 255 bytes, got 256",
        );
        check(
            WorkerId::parse("w\n1"),
            "worker: must not contain control characters, got '\\n'",
        );
        check(
            NamePattern::parse("email.[abc"),
            "name_pattern: the '[' at byte 6 opens a character set that is never closed with ']'",
        );
        check(NamePattern::parse("[]x]*"), "NamePattern(\"[]x]*\")");
        check(NamePattern::parse("[^]]"), "NamePattern(\"[^]]\")");
        check(NamePattern::parse("email.*"), "NamePattern(\"email.*\")");
    }

    #[test]
    fn an_exact_pattern_escapes_every_glob_character() {
        let exact = |name: &str| NamePattern::exact(&JobName::parse(name).unwrap());
        assert_eq!(exact("email.send").as_str(), "email.send");
        assert_eq!(exact("Worker?a=[1]*").as_str(), "Worker[?]a=[[]1][*]");
        for name in ["email.send", "a*", "Worker?a=[1]*", "]x[", "[^]"] {
            assert_eq!(exact(name).literal().as_deref(), Some(name), "{name}");
        }
        let pattern = |p: &str| NamePattern::parse(p).unwrap();
        assert_eq!(pattern("[]]x").literal().as_deref(), Some("]x"));
        for wild in ["a*", "a?", "[ab]", "[^a]", "[a-z]"] {
            assert_eq!(pattern(wild).literal(), None, "{wild}");
        }
        // The longest name escapes to a valid pattern.
        let longest = exact(&"*".repeat(255));
        assert_eq!(NamePattern::parse(longest.as_str()).unwrap(), longest);
    }
}
