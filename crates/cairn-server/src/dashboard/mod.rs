//! The web dashboard: a page at `/` and its static files under `/assets/…`, all embedded in the binary so that it
//! works without any internet access.
//!
//! These routes hold no data and need no token: the page reads and changes everything through the `/v1` API
//! (which checks the token), so they sit outside the token layer. The dashboard's code is plain JavaScript modules
//! with no build step (`assets/js/`); this module only serves the files, with their content type and an `ETag`.

use axum::Router;
use axum::extract::Path;
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, ETAG, HeaderMap, HeaderValue,
    IF_NONE_MATCH, REFERRER_POLICY, X_CONTENT_TYPE_OPTIONS,
};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::error::ApiError;

/// One embedded file.
struct Asset {
    /// Its path under `/assets/`.
    path: &'static str,
    /// Its `Content-Type`.
    content_type: &'static str,
    /// Its bytes.
    body: &'static [u8],
    /// A hash of its bytes, computed at compile time, sent as its `ETag`.
    hash: u64,
}

/// An [`Asset`] read from `assets/` at compile time.
macro_rules! asset {
    ($path:literal, $content_type:expr) => {
        Asset {
            path: $path,
            content_type: $content_type,
            body: include_bytes!(concat!("assets/", $path)),
            hash: fnv1a(include_bytes!(concat!("assets/", $path))),
        }
    };
}

const HTML: &str = "text/html; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";
const SVG: &str = "image/svg+xml";

/// The page itself, served at `/`.
const INDEX: Asset = asset!("index.html", HTML);

/// Everything served under `/assets/`.
const ASSETS: &[Asset] = &[
    asset!("style.css", CSS),
    asset!("icon.svg", SVG),
    asset!("js/errors.js", JS),
    asset!("js/app.js", JS),
    asset!("js/api.js", JS),
    asset!("js/dom.js", JS),
    asset!("js/format.js", JS),
    asset!("js/live.js", JS),
    asset!("js/charts.js", JS),
    asset!("js/token.js", JS),
    asset!("js/views/queues.js", JS),
    asset!("js/views/jobs.js", JS),
    asset!("js/views/job.js", JS),
    asset!("js/views/failures.js", JS),
    asset!("js/views/workers.js", JS),
    asset!("js/views/stats.js", JS),
    asset!("js/views/recurring.js", JS),
    asset!("js/views/batches.js", JS),
    asset!("js/views/batch.js", JS),
];

/// What the page may load and run: only its own files and its own API. The token sits in the page's storage, so no
/// script from anywhere else, inline or not, may run beside it, and no other site may frame it.
const POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                      connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// The dashboard's routes. They take no state, so they fit any router.
pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/", get(index))
        .route("/assets/{*path}", get(asset))
}

/// The page.
async fn index(headers: HeaderMap) -> Response {
    let mut response = serve(&INDEX, &headers);
    let extra = response.headers_mut();
    extra.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(POLICY));
    extra.insert(REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    response
}

/// A file under `/assets/`; a path that names none is the API's usual `not_found`.
async fn asset(Path(path): Path<String>, headers: HeaderMap) -> Response {
    match ASSETS.iter().find(|a| a.path == path) {
        Some(asset) => serve(asset, &headers),
        None => {
            ApiError::no_route(Method::GET.as_str(), &format!("/assets/{path}")).into_response()
        }
    }
}

/// Answers with `asset`, or with 304 when the browser already holds this exact version.
fn serve(asset: &'static Asset, headers: &HeaderMap) -> Response {
    let etag = format!("\"{:016x}\"", asset.hash);
    // `no-cache` means "ask every time": the files change with every build while the version number may not, and
    // asking costs a 304 without a body.
    let common = [
        (CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        (
            ETAG,
            HeaderValue::from_str(&etag).expect("hex digits in quotes"),
        ),
        (X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")),
    ];
    let fresh = headers
        .get(IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|tags| tags.split(',').any(|t| t.trim() == etag || t.trim() == "*"));
    if fresh {
        return (StatusCode::NOT_MODIFIED, common).into_response();
    }
    (
        common,
        [(CONTENT_TYPE, HeaderValue::from_static(asset.content_type))],
        asset.body,
    )
        .into_response()
}

/// The 64-bit FNV-1a hash: tiny and `const`, enough to tell one build's file from another's (not a defence against
/// anyone).
const fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash = 0xcbf2_9ce4_8422_2325_u64;
    let mut i = 0;
    while i < bytes.len() {
        hash ^= bytes[i] as u64;
        hash = hash.wrapping_mul(0x0100_0000_01b3);
        i += 1;
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The files a text refers to as `/assets/X` or, from a module, as `./X` or `../X` (relative to `from`).
    fn references(text: &str, from: &str) -> Vec<String> {
        let mut found = Vec::new();
        for quote in ['"', '\''] {
            for piece in text.split(quote).skip(1).step_by(2) {
                if let Some(path) = piece.strip_prefix("/assets/") {
                    found.push(path.to_owned());
                } else if piece.ends_with(".js")
                    && (piece.starts_with("./") || piece.starts_with("../"))
                {
                    let mut dir: Vec<&str> = from.split('/').collect();
                    dir.pop();
                    for part in piece.split('/') {
                        match part {
                            "." => {}
                            ".." => {
                                dir.pop();
                            }
                            name => dir.push(name),
                        }
                    }
                    found.push(dir.join("/"));
                }
            }
        }
        found
    }

    #[test]
    fn every_file_the_page_and_its_modules_load_is_embedded() {
        let mut checked = 0;
        for asset in std::iter::once(&INDEX).chain(ASSETS) {
            let text = std::str::from_utf8(asset.body).expect("text assets are UTF-8");
            for path in references(text, asset.path) {
                assert!(
                    ASSETS.iter().any(|a| a.path == path),
                    "{} refers to {path}, which is not in ASSETS",
                    asset.path
                );
                checked += 1;
            }
        }
        assert!(
            checked > 10,
            "only {checked} references found: is the scan broken?"
        );
    }

    #[test]
    fn every_embedded_file_is_used() {
        let all: Vec<String> = std::iter::once(&INDEX)
            .chain(ASSETS)
            .flat_map(|a| references(std::str::from_utf8(a.body).unwrap(), a.path))
            .collect();
        for asset in ASSETS {
            assert!(
                all.iter().any(|p| p == asset.path),
                "{} is never loaded",
                asset.path
            );
        }
    }

    #[test]
    fn nothing_is_loaded_from_elsewhere() {
        for asset in std::iter::once(&INDEX).chain(ASSETS) {
            let text = std::str::from_utf8(asset.body).unwrap();
            for scheme in ["http://", "https://", "//cdn", "fonts.googleapis"] {
                // The SVG namespace is an identifier, not a download.
                let stray = text.replace("http://www.w3.org/2000/svg", "");
                assert!(!stray.contains(scheme), "{} mentions {scheme}", asset.path);
            }
        }
    }

    #[test]
    fn hashes_tell_contents_apart() {
        assert_ne!(fnv1a(b"a"), fnv1a(b"b"));
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
    }
}
