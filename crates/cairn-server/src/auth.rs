//! Bearer-token authentication, and the rule that keeps a server without a token off the network.

use std::net::SocketAddr;

use axum::extract::{Request, State};
use axum::http::header::AUTHORIZATION;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;
use crate::state::AppState;

/// Refuses requests without the configured bearer token (when one is configured).
pub async fn require_token(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    if let Some(expected) = &state.config.token {
        let given = request
            .headers()
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("");
        if !constant_time_eq(given.as_bytes(), expected.as_bytes()) {
            return ApiError::unauthorized().into_response();
        }
    }
    next.run(request).await
}

/// Compares without an early exit, so the time taken does not tell how much of a guess was right.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Checks that a server may listen on `addr`: without a token, only on a loopback address, unless `insecure`.
///
/// # Errors
/// A message naming the setting to change.
pub fn check_exposure(addr: SocketAddr, has_token: bool, insecure: bool) -> Result<(), String> {
    if has_token || insecure || addr.ip().is_loopback() {
        return Ok(());
    }
    Err(format!(
        "refusing to listen on {addr} without a token: anyone who can reach it could run and delete jobs. \
         Set --token (or CAIRN_TOKEN), listen on a loopback address, or pass --insecure"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_whole() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
        assert!(!constant_time_eq(b"", b"secret"));
    }

    #[test]
    fn no_token_means_loopback_only_unless_insecure() {
        let public: SocketAddr = "0.0.0.0:6670".parse().unwrap();
        let loopback: SocketAddr = "127.0.0.1:6670".parse().unwrap();
        let loopback6: SocketAddr = "[::1]:6670".parse().unwrap();
        assert!(
            check_exposure(public, false, false)
                .unwrap_err()
                .contains("--token")
        );
        assert!(check_exposure(public, true, false).is_ok());
        assert!(check_exposure(public, false, true).is_ok());
        assert!(check_exposure(loopback, false, false).is_ok());
        assert!(check_exposure(loopback6, false, false).is_ok());
    }
}
