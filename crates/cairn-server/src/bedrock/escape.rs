//! Bedrock's backslash escaping of header values: how multi-line text and JSON with backslashes travel in one
//! header line. Requests are unescaped, responses escaped (reference §1.2, §1.3).

/// Unescapes a request header value the way Bedrock does: `\\`, `\n`, `\r`, `\t`, `\b`, `\f` and `\uXXXX` are
/// decoded; a backslash before any other character is dropped and the character kept (`\"` is `"`). A trailing
/// lone backslash is dropped. A `\u` escape that is not four hex digits, or names a lone surrogate, keeps its
/// characters as they are after the dropped backslash (`\u12` reads `u12`).
pub fn unescape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let mut chars = value.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            None => {}
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('t') => out.push('\t'),
            Some('b') => out.push('\u{8}'),
            Some('f') => out.push('\u{c}'),
            Some('u') => {
                let hex: String = chars.clone().take(4).collect();
                match (hex.len() == 4)
                    .then(|| u32::from_str_radix(&hex, 16).ok())
                    .flatten()
                    .and_then(char::from_u32)
                {
                    Some(decoded) => {
                        out.push(decoded);
                        for _ in 0..4 {
                            chars.next();
                        }
                    }
                    None => out.push('u'),
                }
            }
            Some(other) => out.push(other),
        }
    }
    out
}

/// Escapes a response header value: CR, LF, TAB and backslash become `\r`, `\n`, `\t` and `\\`, so that a value
/// never breaks the header block.
pub fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\r' => out.push_str("\\r"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn unescapes_as_bedrock_does() {
        let check =
            |input: &str, expected: &str| assert_eq!(unescape(input), expected, "{input:?}");
        check(r"plain", "plain");
        check(r"a\\b", r"a\b");
        check(r"line\nnext\r\tend", "line\nnext\r\tend");
        check(r"\b\f", "\u{8}\u{c}");
        check(r#"{"a":"x\\"y"}"#, r#"{"a":"x\"y"}"#);
        check(r#"\"quoted\""#, "\"quoted\"");
        check(r"\u00e9t\u00E9", "été");
        check(r"\u12", "u12");
        check(r"\ud800", "ud800");
        check(r"trailing\", "trailing");
        check(r"\q", "q");
    }

    #[test]
    fn escapes_what_would_break_a_header_line() {
        assert_eq!(escape("a\\b\r\n\tc"), r"a\\b\r\n\tc");
    }

    proptest! {
        #[test]
        fn unescape_undoes_escape(text in "\\PC*|[\\\\\r\n\t a-z]*") {
            prop_assert_eq!(unescape(&escape(&text)), text);
        }

        #[test]
        fn escaped_values_never_hold_a_line_break(text in any::<String>()) {
            let escaped = escape(&text);
            prop_assert!(!escaped.contains('\r') && !escaped.contains('\n'));
        }

        #[test]
        fn unescape_never_panics(text in any::<String>()) {
            let _ = unescape(&text);
        }
    }
}
