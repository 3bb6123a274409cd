//! The engine writes its SQL once, in SQLite's dialect, kept to what PostgreSQL also reads where a portable form
//! exists (`ON CONFLICT DO NOTHING`, `IS DISTINCT FROM`, `CAST(… AS BIGINT)`). This translates the rest, once per
//! statement text (the backend caches the result with the prepared statement):
//!
//! - parameters: `:name`, `?N` and `?` become `$N`, and the translation lists which parameter each `$N` is;
//! - `INDEXED BY index` is dropped: it pins SQLite's plan, and PostgreSQL plans by itself;
//! - the two-argument (scalar) `MAX(a, b)` and `MIN(a, b)` become `GREATEST` and `LEAST` (one argument is the
//!   aggregate, the same on both);
//! - `x GLOB p` becomes `cairn_glob(x, p)`, the schema's function with GLOB's meaning;
//! - `char(n)` becomes `chr(n)`.
//!
//! String literals and quoted identifiers are copied as they are.

/// Which value a `$N` of the translated statement binds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Param {
    /// `:name` in the original.
    Named(String),
    /// `?N`, or the N-th bare `?`, in the original (1-based).
    Numbered(usize),
}

/// A statement in PostgreSQL's dialect, and what its `$1`, `$2`, … bind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Translated {
    pub sql: String,
    pub params: Vec<Param>,
}

/// One lexical piece of a statement: what the rewriting rules look at.
#[derive(Debug, Clone, PartialEq)]
enum Token {
    /// A word: a keyword, a name, a number (`jobs`, `f.name`, `0`).
    Word(String),
    /// A parameter, already numbered for PostgreSQL.
    Param(usize),
    /// `'…'` or `"…"`, copied as is.
    Quoted(String),
    /// One punctuation character.
    Punct(char),
    /// Whitespace, kept as one space.
    Space,
}

/// Translates `sql` from SQLite's dialect to PostgreSQL's.
pub(crate) fn translate(sql: &str) -> Translated {
    let sql = &lock_rows(sql);
    let (tokens, params) = tokenize(sql);
    let tokens = drop_indexed_by(tokens);
    let tokens = rewrite_glob(tokens);
    let tokens = rewrite_scalar_min_max(tokens);
    let tokens = rename_functions(tokens);
    Translated {
        sql: render(&tokens),
        params,
    }
}

/// Row locks, which SQLite has no use for (one writer at a time): a statement ends with `/* FOR UPDATE */` or
/// `/* FOR UPDATE SKIP LOCKED */`, a comment to SQLite and a lock clause to PostgreSQL.
fn lock_rows(sql: &str) -> String {
    sql.replace("/* FOR UPDATE SKIP LOCKED */", "FOR UPDATE SKIP LOCKED")
        .replace("/* FOR UPDATE */", "FOR UPDATE")
}

fn tokenize(sql: &str) -> (Vec<Token>, Vec<Param>) {
    let chars: Vec<char> = sql.chars().collect();
    let mut tokens = Vec::new();
    let mut params: Vec<Param> = Vec::new();
    let mut bare = 0;
    let mut i = 0;
    // A parameter's `$N`: the first appearance of a name or number gets the next one, later ones reuse it.
    let number =
        |param: Param, params: &mut Vec<Param>| match params.iter().position(|p| *p == param) {
            Some(at) => at + 1,
            None => {
                params.push(param);
                params.len()
            }
        };
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            while i < chars.len() && chars[i].is_whitespace() {
                i += 1;
            }
            tokens.push(Token::Space);
        } else if c == '\'' || c == '"' {
            let start = i;
            i += 1;
            while i < chars.len() {
                if chars[i] == c {
                    // A doubled quote is an escaped one.
                    if chars.get(i + 1) == Some(&c) {
                        i += 2;
                        continue;
                    }
                    break;
                }
                i += 1;
            }
            i = (i + 1).min(chars.len());
            tokens.push(Token::Quoted(chars[start..i].iter().collect()));
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            // A PostgreSQL cast (`::BIGINT`), should one be written: not a parameter.
            tokens.push(Token::Punct(':'));
            tokens.push(Token::Punct(':'));
            i += 2;
        } else if c == ':'
            && chars
                .get(i + 1)
                .is_some_and(|n| n.is_ascii_alphabetic() || *n == '_')
        {
            let start = i + 1;
            i = start;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let name: String = chars[start..i].iter().collect();
            tokens.push(Token::Param(number(Param::Named(name), &mut params)));
        } else if c == '?' {
            let start = i + 1;
            i = start;
            while i < chars.len() && chars[i].is_ascii_digit() {
                i += 1;
            }
            let n = if i > start {
                chars[start..i]
                    .iter()
                    .collect::<String>()
                    .parse()
                    .expect("digits")
            } else {
                bare += 1;
                bare
            };
            tokens.push(Token::Param(number(Param::Numbered(n), &mut params)));
        } else if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len()
                && (chars[i].is_alphanumeric() || chars[i] == '_' || chars[i] == '.')
            {
                i += 1;
            }
            tokens.push(Token::Word(chars[start..i].iter().collect()));
        } else {
            tokens.push(Token::Punct(c));
            i += 1;
        }
    }
    (tokens, params)
}

fn is_word(token: Option<&Token>, word: &str) -> bool {
    matches!(token, Some(Token::Word(w)) if w.eq_ignore_ascii_case(word))
}

/// The index of the next token after `i` that is not a space.
fn next_solid(tokens: &[Token], mut i: usize) -> Option<usize> {
    i += 1;
    while i < tokens.len() {
        if tokens[i] != Token::Space {
            return Some(i);
        }
        i += 1;
    }
    None
}

fn drop_indexed_by(tokens: Vec<Token>) -> Vec<Token> {
    let mut out = Vec::with_capacity(tokens.len());
    let mut i = 0;
    while i < tokens.len() {
        if is_word(tokens.get(i), "INDEXED")
            && let Some(by) = next_solid(&tokens, i)
            && is_word(tokens.get(by), "BY")
            && let Some(index) = next_solid(&tokens, by)
        {
            i = index + 1;
            continue;
        }
        out.push(tokens[i].clone());
        i += 1;
    }
    out
}

/// `x GLOB p` → `cairn_glob(x, p)`, where `x` is the word before and `p` the word, parameter or literal after.
fn rewrite_glob(tokens: Vec<Token>) -> Vec<Token> {
    let mut out: Vec<Token> = Vec::with_capacity(tokens.len());
    let mut i = 0;
    while i < tokens.len() {
        if is_word(tokens.get(i), "GLOB")
            && let Some(right) = next_solid(&tokens, i)
        {
            while out.last() == Some(&Token::Space) {
                out.pop();
            }
            let left = out.pop().expect("GLOB has a left operand");
            out.push(Token::Word("cairn_glob".to_owned()));
            out.push(Token::Punct('('));
            out.push(left);
            out.push(Token::Punct(','));
            out.push(Token::Space);
            out.push(tokens[right].clone());
            out.push(Token::Punct(')'));
            i = right + 1;
            continue;
        }
        out.push(tokens[i].clone());
        i += 1;
    }
    out
}

/// `MAX(a, b)` → `GREATEST(a, b)` and `MIN(a, b)` → `LEAST(a, b)`: a comma at the call's own depth means the scalar.
fn rewrite_scalar_min_max(mut tokens: Vec<Token>) -> Vec<Token> {
    for i in 0..tokens.len() {
        let scalar_name = match &tokens[i] {
            Token::Word(w) if w.eq_ignore_ascii_case("MAX") => "GREATEST",
            Token::Word(w) if w.eq_ignore_ascii_case("MIN") => "LEAST",
            _ => continue,
        };
        let Some(open) = next_solid(&tokens, i) else {
            continue;
        };
        if tokens[open] != Token::Punct('(') {
            continue;
        }
        let mut depth = 0;
        let mut scalar = false;
        for token in &tokens[open..] {
            match token {
                Token::Punct('(') => depth += 1,
                Token::Punct(')') => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                Token::Punct(',') if depth == 1 => scalar = true,
                _ => {}
            }
        }
        if scalar {
            tokens[i] = Token::Word(scalar_name.to_owned());
        }
    }
    tokens
}

/// SQLite's `char(n)` is PostgreSQL's `chr(n)` (in PostgreSQL, `char` is a type).
fn rename_functions(mut tokens: Vec<Token>) -> Vec<Token> {
    for i in 0..tokens.len() {
        if is_word(tokens.get(i), "char")
            && next_solid(&tokens, i).is_some_and(|open| tokens[open] == Token::Punct('('))
        {
            tokens[i] = Token::Word("chr".to_owned());
        }
    }
    tokens
}

fn render(tokens: &[Token]) -> String {
    let mut sql = String::new();
    for token in tokens {
        match token {
            Token::Word(w) => sql.push_str(w),
            Token::Param(n) => {
                sql.push('$');
                sql.push_str(&n.to_string());
            }
            Token::Quoted(q) => sql.push_str(q),
            Token::Punct(c) => sql.push(*c),
            // Rewrites may leave two spaces side by side (around a dropped `INDEXED BY`): keep one.
            Token::Space if sql.ends_with(' ') => {}
            Token::Space => sql.push(' '),
        }
    }
    sql.trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(names: &[&str]) -> Vec<Param> {
        names
            .iter()
            .map(|n| Param::Named((*n).to_owned()))
            .collect()
    }

    #[test]
    fn named_parameters_are_numbered_by_first_appearance_and_reused() {
        let t = translate(
            "UPDATE jobs SET state = :state, run_at = :run_at WHERE id = :id AND run_at <= :run_at",
        );
        assert_eq!(
            t.sql,
            "UPDATE jobs SET state = $1, run_at = $2 WHERE id = $3 AND run_at <= $2"
        );
        assert_eq!(t.params, named(&["state", "run_at", "id"]));
    }

    #[test]
    fn numbered_and_bare_parameters_keep_their_numbers() {
        let t = translate("SELECT id FROM jobs WHERE queue = ?1 AND priority = ?3 LIMIT 0 + ?2");
        assert_eq!(
            t.sql,
            "SELECT id FROM jobs WHERE queue = $1 AND priority = $2 LIMIT 0 + $3"
        );
        assert_eq!(
            t.params,
            [Param::Numbered(1), Param::Numbered(3), Param::Numbered(2)]
        );
        let t = translate("INSERT INTO t VALUES (?,?),(?,?)");
        assert_eq!(t.sql, "INSERT INTO t VALUES ($1,$2),($3,$4)");
        assert_eq!(t.params.len(), 4);
    }

    #[test]
    fn indexed_by_is_dropped_and_glob_becomes_a_call() {
        let t = translate(
            "SELECT id, weight FROM jobs INDEXED BY jobs_ready WHERE state = 'queued' AND queue = ?1 AND (name GLOB ?3 OR name GLOB ?4) ORDER BY claim_key",
        );
        assert_eq!(
            t.sql,
            "SELECT id, weight FROM jobs WHERE state = 'queued' AND queue = $1 AND (cairn_glob(name, $2) OR cairn_glob(name, $3)) ORDER BY claim_key"
        );
        let t = translate(
            "SELECT f.id FROM jobs AS f INDEXED BY jobs_failure_groups WHERE f.name GLOB 'a*'",
        );
        assert_eq!(
            t.sql,
            "SELECT f.id FROM jobs AS f WHERE cairn_glob(f.name, 'a*')"
        );
    }

    #[test]
    fn scalar_min_and_max_become_least_and_greatest_but_aggregates_stay() {
        let t = translate(
            "SELECT MAX(run_at), MIN(COALESCE(a, b), c), MAX(x, MIN(y)) FROM t WHERE z = MAX(run_at, :now)",
        );
        assert_eq!(
            t.sql,
            "SELECT MAX(run_at), LEAST(COALESCE(a, b), c), GREATEST(x, MIN(y)) FROM t WHERE z = GREATEST(run_at, $1)"
        );
    }

    #[test]
    fn literals_and_quoted_names_are_left_alone() {
        let t = translate(
            "SELECT ':not_a_param', 'it''s ?', \"MAX\" FROM t WHERE a = :a AND b = 'x GLOB y' AND c = 'INDEXED BY z'",
        );
        assert_eq!(
            t.sql,
            "SELECT ':not_a_param', 'it''s ?', \"MAX\" FROM t WHERE a = $1 AND b = 'x GLOB y' AND c = 'INDEXED BY z'"
        );
        assert_eq!(t.params, named(&["a"]));
    }

    #[test]
    fn lock_comments_become_lock_clauses() {
        assert_eq!(
            translate("SELECT id FROM jobs WHERE id = :id /* FOR UPDATE */").sql,
            "SELECT id FROM jobs WHERE id = $1 FOR UPDATE"
        );
        assert_eq!(
            translate("SELECT id FROM jobs LIMIT 0 + ?1 /* FOR UPDATE SKIP LOCKED */").sql,
            "SELECT id FROM jobs LIMIT 0 + $1 FOR UPDATE SKIP LOCKED"
        );
    }

    #[test]
    fn char_becomes_chr() {
        let t = translate("SELECT string_agg(tag, char(31) ORDER BY tag), CAST(x AS char) FROM t");
        assert_eq!(
            t.sql,
            "SELECT string_agg(tag, chr(31) ORDER BY tag), CAST(x AS char) FROM t"
        );
    }

    #[test]
    fn whitespace_runs_become_one_space() {
        let t = translate("SELECT a,\n       b\n  FROM t   WHERE x = ?1");
        assert_eq!(t.sql, "SELECT a, b FROM t WHERE x = $1");
    }
}
