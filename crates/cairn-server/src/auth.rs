//! Bearer-token authentication, and the rule that keeps a server without a token off the network.

use std::net::SocketAddr;

use axum::extract::{Request, State};
use axum::http::header::{AUTHORIZATION, HOST, ORIGIN};
use axum::http::{HeaderValue, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;
use crate::state::AppState;

/// The liveness check, which answers without the token: a probe should not need the secret. Its answer then
/// says that the server is up, and not which version it runs.
const HEALTH: &str = "/v1/health";

/// Refuses requests without the configured bearer token (when one is configured), saying whether it was missing,
/// malformed or not this server's; but for [`HEALTH`].
pub async fn require_token(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    let Some(expected) = &state.config.token else {
        return next.run(request).await;
    };
    let refusal = match request.headers().get(AUTHORIZATION) {
        None => Some("this server needs a bearer token: send `Authorization: Bearer <token>`"),
        Some(value) => match value.to_str().ok().and_then(|v| v.strip_prefix("Bearer ")) {
            None => Some("the Authorization header must be `Bearer <token>`"),
            Some(given) if constant_time_eq(given.as_bytes(), expected.as_bytes()) => None,
            Some(_) => Some("the bearer token is not one this server knows"),
        },
    };
    match refusal {
        None => next.run(request).await,
        Some(_) if request.uri().path() == HEALTH && request.method() == Method::GET => {
            anonymous_health(next.run(request).await)
        }
        Some(why) => ApiError::unauthorized(why).into_response(),
    }
}

/// The health answer for a caller without the token: its status, and only `status` of its body.
fn anonymous_health(answer: Response) -> Response {
    if !answer.status().is_success() {
        return answer;
    }
    let body = serde_json::json!({ "status": "ok" });
    (answer.status(), axum::Json(body)).into_response()
}

/// Refuses what a web page in someone's browser could send to a server it should not reach: a request another
/// origin made (cross-site request forgery: `Origin` naming another host, or `Sec-Fetch-Site: cross-site`), and,
/// on a server without a token, a request for a host name other than `localhost` or an IP address (a page that
/// rebinds its own name to 127.0.0.1 would otherwise read the API as its own origin). Clients that are not
/// browsers (curl, the CLI, workers) send neither header and are not affected.
pub async fn refuse_browser_attacks(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    let headers = request.headers();
    let text = |name: &str| {
        headers
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
    };
    let host = text(HOST.as_str());
    if text("sec-fetch-site") == Some("cross-site") {
        return ApiError::forbidden("a request from another site's page").into_response();
    }
    if let Some(origin) = text(ORIGIN.as_str())
        && origin != "null"
        && origin.split_once("://").map(|(_, rest)| rest) != host
    {
        return ApiError::forbidden(&format!(
            "a request from the page of another origin ({origin})"
        ))
        .into_response();
    }
    if state.config.token.is_none()
        && let Some(host) = host
        && !is_address_or_localhost(host)
        && !state
            .config
            .allowed_hosts
            .iter()
            .any(|allowed| allowed.eq_ignore_ascii_case(host_name(host)))
    {
        return ApiError::forbidden(&format!(
            "a request for host {host:?} to a server without a token: if that is this server's name (a service \
             name), let it in with --allowed-host {name} (or allowed_hosts in the config file); else use \
             localhost or an IP address, or set a token",
            name = host_name(host)
        ))
        .into_response();
    }
    next.run(request).await
}

/// `localhost` or an IP address, with or without a port.
fn is_address_or_localhost(host: &str) -> bool {
    let name = host_name(host);
    name.eq_ignore_ascii_case("localhost") || name.parse::<std::net::IpAddr>().is_ok()
}

/// A `Host` header's name, without its port (and an IPv6 literal without its brackets).
fn host_name(host: &str) -> &str {
    let name = match host.rsplit_once(':') {
        // An IPv6 literal is bracketed: [::1]:6670.
        Some((name, port)) if !name.ends_with(':') && port.bytes().all(|b| b.is_ascii_digit()) => {
            name
        }
        _ => host,
    };
    name.trim_start_matches('[').trim_end_matches(']')
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
    fn only_localhost_and_addresses_pass_as_hosts_without_a_token() {
        for host in [
            "localhost",
            "LOCALHOST:6670",
            "127.0.0.1",
            "127.0.0.1:6670",
            "[::1]:6670",
            "[::1]",
            "10.0.0.5",
        ] {
            assert!(is_address_or_localhost(host), "{host}");
        }
        for host in [
            "evil.example",
            "evil.example:6670",
            "localhost.evil.example",
            "127.0.0.1.nip.io:80",
        ] {
            assert!(!is_address_or_localhost(host), "{host}");
        }
    }

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
