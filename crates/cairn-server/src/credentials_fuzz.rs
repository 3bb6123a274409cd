//! The harness of the `credentials` fuzz target (`fuzz/` runs it under libFuzzer; see `docs/fuzzing.md`): what a
//! stranger controls of the server's credentials, the `Authorization` header of any request, and what an operator
//! writes, the token file. Not part of the API: `lib.rs` exposes it hidden, as `__fuzz`.
//!
//! The first byte chooses: even, the rest is an `Authorization` header's value; odd, a token file's text.

use axum::http::HeaderValue;

use crate::auth::bearer;
use crate::credentials::{Credentials, MAX_TOKEN_QUEUES};

/// The `credentials` target.
pub fn credentials(data: &[u8]) {
    let [which, rest @ ..] = data else {
        return;
    };
    if which % 2 == 0 {
        header(rest);
    } else if let Ok(text) = std::str::from_utf8(rest) {
        token_file(text);
    }
}

/// An `Authorization` header never panics the parser, and a token it finds is what follows `Bearer `, whole.
fn header(bytes: &[u8]) {
    let Ok(value) = HeaderValue::from_bytes(bytes) else {
        return;
    };
    if let Ok(token) = bearer(Some(&value)) {
        assert!(!token.is_empty());
        assert_eq!(bytes, [b"Bearer ", token.as_bytes()].concat().as_slice());
    }
}

/// A token file never panics the parser; what it accepts names each token once, limits a token to valid queues
/// only, and any text is found as a token
/// only if its digest is one of the file's.
fn token_file(text: &str) {
    let Ok(credentials) = Credentials::parse_file(text) else {
        return;
    };
    let mut names = std::collections::HashSet::new();
    for credential in credentials.iter() {
        assert!(!credential.name.is_empty());
        assert!(
            names.insert(credential.name.clone()),
            "{:?} twice",
            credential.name
        );
        if let Some(queues) = &credential.queues {
            assert!((1..=MAX_TOKEN_QUEUES).contains(&queues.len()));
            for queue in queues.iter() {
                assert!(cairn::QueueName::parse(queue.as_str()).is_ok(), "{queue:?}");
            }
        }
    }
    assert!(credentials.find(text).is_none() || !credentials.is_empty());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_credentials_corpus_replays_without_a_failure() {
        cairn::__fuzz::replay_corpus("credentials", credentials);
    }
}
