//! Bearer-token authentication, and the rule that keeps a server without a token off the network.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};

use axum::extract::{Request, State};
use axum::http::header::{AUTHORIZATION, HOST, ORIGIN};
use axum::http::{HeaderValue, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use cairn_api::{Access, Reach, Role, Route, RouteVisitor};

use crate::error::ApiError;
use crate::state::AppState;

/// Who made a request: the token's name and role, put in the request's extensions by `require_token` for the
/// handlers to check (`allow`). A server without tokens puts none there: every request may do everything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The token's name (`token` for `--token`).
    pub name: String,
    /// What it may do.
    pub role: Role,
    /// The only queues it may reach, if it is limited to some (see `reach.rs`).
    pub queues: Option<Arc<BTreeSet<String>>>,
}

/// A handler's caller, if the request had one (see [`Caller`]).
pub struct CallerOf(pub Option<Caller>);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for CallerOf {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _state: &S,
    ) -> Result<Self, Self::Rejection> {
        Ok(CallerOf(parts.extensions.get::<Caller>().cloned()))
    }
}

/// The name `--token` goes by in messages and the audit trail.
pub const ADMIN_TOKEN_NAME: &str = "token";

/// The paths of the routes declared public (the liveness check), answered without a token: an anonymous request to
/// one goes on, with no [`Caller`].
fn public_paths() -> &'static [&'static str] {
    static PATHS: OnceLock<Vec<&'static str>> = OnceLock::new();
    PATHS.get_or_init(|| {
        struct Public(Vec<&'static str>);
        impl RouteVisitor for Public {
            fn visit<R: Route>(&mut self) {
                if R::ACCESS.public && R::METHOD == cairn_api::Method::Get && R::PARAMS.is_empty() {
                    self.0.push(R::PATH);
                }
            }
        }
        let mut public = Public(Vec::new());
        cairn_api::visit_routes(&mut public);
        public.0
    })
}

/// The caller a request's `Authorization` names among the server's tokens: `--token` (compared whole, in
/// constant time) or one of `--token-file`'s (by its digest).
fn caller(state: &AppState, request: &Request) -> Result<Caller, &'static str> {
    let given = bearer(request.headers().get(AUTHORIZATION))?;
    if let Some(expected) = &state.config.token
        && constant_time_eq(given.as_bytes(), expected.as_bytes())
    {
        return Ok(Caller {
            name: ADMIN_TOKEN_NAME.to_owned(),
            role: Role::Admin,
            queues: None,
        });
    }
    match state.config.tokens.find(given) {
        Some(credential) => Ok(Caller {
            name: credential.name.clone(),
            role: credential.role,
            queues: credential.queues.clone(),
        }),
        None => Err("the bearer token is not one this server knows"),
    }
}

/// The token of an `Authorization` header (`Bearer <token>`), or why there is none: the header is missing, or
/// is not a bearer token of visible ASCII.
pub(crate) fn bearer(value: Option<&HeaderValue>) -> Result<&str, &'static str> {
    let Some(value) = value else {
        return Err("this server needs a bearer token: send `Authorization: Bearer <token>`");
    };
    value
        .to_str()
        .ok()
        .and_then(|v| v.strip_prefix("Bearer "))
        .filter(|token| !token.is_empty())
        .ok_or("the Authorization header must be `Bearer <token>`")
}

/// Refuses requests without one of the server's tokens (when it has any), saying whether it was missing,
/// malformed or not one it knows; the routes declared public answer anyway. The caller goes in the request's
/// extensions, for each handler to hold to its route's rule.
pub async fn require_token(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Response {
    match caller(&state, &request) {
        Ok(caller) => {
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        Err(_)
            if request.method() == Method::GET
                && public_paths().contains(&request.uri().path()) =>
        {
            anonymous_health(next.run(request).await)
        }
        Err(why) => ApiError::unauthorized(why).into_response(),
    }
}

/// Whether `caller` may call a route of `access` and `reach` (`method` and `path`, for the refusal), on a server
/// with tokens or none (`has_tokens`): a 403 naming the token, its role and the roles the route takes when not, or
/// the queues it is limited to when the route reaches the whole server. Nothing is allocated unless it refuses:
/// every request passes here.
///
/// # Errors
/// [`ApiError`] 403 (`forbidden`), or 401 for an anonymous request to a route that is not public.
pub fn allow(
    has_tokens: bool,
    caller: Option<&Caller>,
    access: Access,
    reach: Reach,
    method: &Method,
    path: &str,
) -> Result<(), ApiError> {
    match caller {
        _ if !has_tokens || access.public => Ok(()),
        Some(caller) if !access.allows(caller.role) => Err(ApiError::forbidden(&format!(
            "{method} {path} to token {:?}, whose role is {}: it needs a token of role {}",
            caller.name,
            caller.role,
            access.describe()
        ))),
        Some(caller) => match (&caller.queues, reach) {
            (Some(queues), Reach::Server) => Err(crate::reach::limited(
                caller,
                queues,
                method,
                path,
                "the route reaches every queue",
            )),
            _ => Ok(()),
        },
        None => Err(ApiError::unauthorized(
            "this server needs a bearer token: send `Authorization: Bearer <token>`",
        )),
    }
}

/// A public route's answer to a caller without a token: its status, and only `status` of its body (the liveness
/// check's, which then says nothing of the server's version).
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
    if !state.config.has_tokens()
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
