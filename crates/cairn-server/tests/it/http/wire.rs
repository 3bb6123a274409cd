//! Requests as the Rust client would never send them, for the HTTP tests of this crate and of the CLI's (which
//! include this file): a raw request and its JSON answer, and a one-job dequeue.

/// A plain reqwest client, for requests the Rust client would not send. reqwest's TLS wants rustls's process-wide
/// provider (see `cairn_client`'s docs), which a test may need before any `Client` installed it.
pub fn http() -> reqwest::Client {
    cairn_client::install_ring_provider();
    reqwest::Client::new()
}

/// A raw request: (status, JSON body).
pub async fn raw(
    method: reqwest::Method,
    url: String,
    token: Option<&str>,
    body: Option<&str>,
) -> (u16, serde_json::Value) {
    let mut request = http().request(method, url);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(body) = body {
        request = request.body(body.to_owned());
    }
    let response = request.send().await.expect("the server answers");
    let status = response.status().as_u16();
    let bytes = response.bytes().await.expect("a body");
    let value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| panic!("a JSON body, got {:?}", String::from_utf8_lossy(&bytes)));
    (status, value)
}

/// One job for `worker`, not waiting.
pub fn take(worker: &str) -> cairn::Dequeue {
    cairn::Dequeue {
        limit: 1,
        ..cairn::Dequeue::new(worker)
    }
}
