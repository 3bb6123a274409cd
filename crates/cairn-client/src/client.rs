//! [`Client`]: a Cairn server over HTTP. It runs every request that has a route, so it has the calls of
//! [`cairn::Jobs`] with the same types and errors as the embedded [`cairn::Queue`], and a [`cairn::Backend`] so that
//! a [`cairn::Worker`] runs against it unchanged.

use std::time::Duration;

use cairn::{ActivityFilter, Error, ErrorKind, Result};
use reqwest::{Method, StatusCode};
use serde::Serialize;
use serde::de::DeserializeOwned;

use cairn::Runs;
use cairn_api::{ErrorBody, HealthBody, Method as RouteMethod, Route};

use crate::tls::ClientTls;

/// How long an ordinary call may take before the client gives up on it.
const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// A connection to a Cairn server. Cheap to clone; clones share one connection pool.
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

/// The HTTP client under a [`Client`], with TLS as `tls` says.
///
/// reqwest's TLS without a provider of its own (ring is the one Cairn builds; aws-lc-rs, reqwest's, builds a C
/// library) wants rustls's process-wide provider installed for any client built without a preconfigured TLS: ring
/// is installed unless the program installed one first.
fn http_client(tls: &ClientTls) -> Result<reqwest::Client> {
    install_ring_provider();
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .tcp_nodelay(true)
        // Cairn's servers are addressed directly; a proxy would break long polls.
        .no_proxy()
        .tls_backend_preconfigured(tls.config()?)
        .build()
        .map_err(|e| Error::with_source(ErrorKind::Unavailable, "building the HTTP client", e))
}

/// Installs ring as rustls's process-wide crypto provider, unless one is installed already; for programs that build
/// other reqwest clients beside Cairn's (see the crate's documentation).
pub fn install_ring_provider() {
    // An error is a provider installed already, which stays.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the token.
        f.debug_struct("Client").field("base", &self.base).finish()
    }
}

impl Client {
    /// A client for the server at `url`, such as `http://127.0.0.1:6670` or `https://cairn.internal:6670`. Over
    /// HTTPS it trusts the machine's roots; [`Client::with_tls`] names a CA of your own, or a client certificate.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] (field `server`) when `url` is not an `http://` or `https://` URL.
    pub fn new(url: &str) -> Result<Client> {
        let base = url.trim_end_matches('/');
        let rest = base
            .strip_prefix("http://")
            .or_else(|| base.strip_prefix("https://"))
            .ok_or_else(|| {
                Error::from_parts(
                    ErrorKind::InvalidInput,
                    Some("server".into()),
                    format!(
                        "server: must be an http:// or https:// URL such as http://127.0.0.1:6670, got {url:?}"
                    ),
                )
            })?;
        if rest.is_empty() || rest.contains(['?', '#']) {
            return Err(Error::from_parts(
                ErrorKind::InvalidInput,
                Some("server".into()),
                format!("server: must be a URL with a host and no query, got {url:?}"),
            ));
        }
        Ok(Client {
            http: http_client(&ClientTls::default())?,
            base: base.to_owned(),
            token: None,
        })
    }

    /// The same client, checking the server and showing itself over HTTPS as `tls` says.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] naming the file that cannot be read or used.
    pub fn with_tls(mut self, tls: &ClientTls) -> Result<Client> {
        self.http = http_client(tls)?;
        Ok(self)
    }

    /// Sends `token` as a bearer token with every request (the server's `--token`).
    pub fn with_token(mut self, token: impl Into<String>) -> Client {
        self.token = Some(token.into());
        self
    }

    /// The server's URL.
    pub fn url(&self) -> &str {
        &self.base
    }

    async fn call<B: Serialize, T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&B>,
        timeout: Duration,
    ) -> Result<T> {
        let url = format!("{}{path}", self.base);
        let mut request = self.http.request(method, &url).timeout(timeout);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            let bytes = serde_json::to_vec(body).map_err(|e| {
                Error::with_source(ErrorKind::InvalidInput, "encoding the request body", e)
            })?;
            request = request
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(bytes);
        }
        let response = request
            .send()
            .await
            .map_err(|e| unreachable_server(&url, e))?;
        let status = response.status();
        let bytes = response
            .bytes()
            .await
            .map_err(|e| unreachable_server(&url, e))?;
        if status.is_success() {
            return serde_json::from_slice(&bytes).map_err(|e| {
                Error::with_source(
                    ErrorKind::Unavailable,
                    format!("{url} answered {status} with a body that is not Cairn's"),
                    e,
                )
            });
        }
        Err(refusal(&url, status, &bytes))
    }

    /// Runs a request declared as a [`Route`]: one call, to the route's path with its body (a read's as its query
    /// string). Also [`Runs::run_request`], which gives the client the calls of [`cairn::Jobs`], so code written
    /// against them runs on a server or embedded alike.
    ///
    /// # Errors
    /// As the embedded queue, plus [`ErrorKind::Unavailable`] and [`ErrorKind::Unauthorized`].
    pub async fn run<R: Route>(&self, request: R) -> Result<R::Output> {
        R::output(self.answer(request).await?)
    }

    /// Runs a request declared as a [`Route`] and gives its answer as the server sent it, the wire form (what the
    /// CLI prints).
    ///
    /// # Errors
    /// As [`Client::run`].
    pub async fn answer<R: Route>(&self, request: R) -> Result<R::Answer> {
        let mut path = request.path()?;
        let (method, body) = match R::METHOD {
            RouteMethod::Get => {
                if R::BODY {
                    path.push_str(&cairn_api::query_string(&request.body())?);
                }
                (Method::GET, None)
            }
            RouteMethod::Post => (Method::POST, R::BODY.then(|| request.body())),
            RouteMethod::Put => (Method::PUT, R::BODY.then(|| request.body())),
            RouteMethod::Delete => (Method::DELETE, R::BODY.then(|| request.body())),
        };
        // A request the server may hold (a long poll) gets that much longer.
        let timeout = CALL_TIMEOUT.saturating_add(request.waits());
        self.call(method, &path, body.as_ref(), timeout).await
    }

    /// Checks that the server is up.
    ///
    /// # Errors
    /// [`ErrorKind::Unavailable`] when it cannot be reached.
    pub async fn health(&self) -> Result<HealthBody> {
        self.answer(cairn::Health).await
    }
}

/// A server's answer of `status` (not a success) to a request to `url`: its error body, or what the status says.
fn refusal(url: &str, status: StatusCode, bytes: &[u8]) -> Error {
    match serde_json::from_slice::<ErrorBody>(bytes) {
        Ok(body) => body.into_error(),
        Err(_) if status == StatusCode::UNAUTHORIZED => Error::from_parts(
            ErrorKind::Unauthorized,
            None,
            format!("{url} refused the request: {status}"),
        ),
        Err(_) => Error::from_parts(
            ErrorKind::Unavailable,
            None,
            format!("{url} answered {status}, not as a Cairn server"),
        ),
    }
}

fn unreachable_server(url: &str, e: reqwest::Error) -> Error {
    let what = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "could not connect"
    } else {
        "failed"
    };
    // reqwest's own message names only the URL; the cause (refused, a certificate not trusted) is further down.
    let mut causes = Vec::new();
    let mut source = std::error::Error::source(&e);
    while let Some(cause) = source {
        causes.push(cause.to_string());
        source = cause.source();
    }
    causes.dedup();
    let because = match causes.last() {
        Some(cause) => format!(" ({cause})"),
        None => String::new(),
    };
    // The message says all of it: the error itself is not kept as the source, whose text (reqwest's, then each
    // cause's again) a report of the whole chain would repeat.
    Error::from_parts(
        ErrorKind::Unavailable,
        None,
        format!("{url}: {what}{because}"),
    )
}

cairn::impl_backend_by_jobs!(Client);

impl<R: Route> Runs<R> for Client {
    fn run_request(&self, request: R) -> cairn::BoxFuture<'_, Result<R::Output>> {
        Box::pin(self.run(request))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_refuses_what_is_not_an_http_or_https_url() {
        for bad in [
            "",
            "127.0.0.1:6670",
            "ftp://x",
            "http://",
            "https://",
            "http://h/?q",
        ] {
            let e = Client::new(bad).unwrap_err();
            assert_eq!(e.field(), Some("server"), "{bad}");
        }
        assert_eq!(
            Client::new("http://127.0.0.1:6670/").unwrap().url(),
            "http://127.0.0.1:6670"
        );
        assert_eq!(
            Client::new("https://cairn.internal:6670").unwrap().url(),
            "https://cairn.internal:6670"
        );
    }

    #[test]
    fn query_values_are_percent_encoded() {
        assert_eq!(cairn_api::percent_encode("email.*"), "email.%2A");
        assert_eq!(cairn_api::percent_encode("a b&c"), "a%20b%26c");
    }
}

/// A subscription to a server's event stream (`GET /v1/events`); see [`Client::events`]. It reconnects by itself
/// when the connection drops, resuming after the last event it gave (`Last-Event-ID`), so that a consumer misses
/// nothing still retained.
#[derive(Debug)]
pub struct ClientEvents {
    client: Client,
    /// The path and query, without `after`.
    path: String,
    /// Where a new connection resumes: the last event given, or where the stream started.
    from: cairn::EventsFrom,
    /// The server's notice that the stream resumed past events the log no longer holds, until taken.
    missed: Option<cairn::EventsMissed>,
    response: Option<reqwest::Response>,
    /// Bytes received and not yet parsed into an event (an event may arrive split anywhere, within a character too).
    pending: Vec<u8>,
}

/// How long a connection may stay silent before it counts as broken: three of the server's keep-alive comments
/// (one every 15 s), so that a link that went silent is found and made again.
const SILENT_STREAM: Duration = Duration::from_secs(45);

/// The most bytes of one event the client holds before giving up on the stream (a server's event is a small JSON
/// object).
const MAX_EVENT_BYTES: usize = 1 << 20;

impl Client {
    /// Follows the server's event stream: each event the filter lets through, in the log's order, from the next
    /// one committed or after an id; see [`cairn::Queue::events`].
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] naming a bad filter field (from the server), [`ErrorKind::Unavailable`] when it
    /// cannot be reached.
    pub async fn events(
        &self,
        from: cairn::EventsFrom,
        filter: cairn::EventFilter,
    ) -> Result<ClientEvents> {
        let mut query = Vec::new();
        if let Some(queue) = &filter.queue {
            query.push(format!("queue={}", cairn_api::percent_encode(queue)));
        }
        if let Some(name) = &filter.name {
            query.push(format!("name={}", cairn_api::percent_encode(name)));
        }
        if let Some(job) = filter.job {
            query.push(format!("job={job}"));
        }
        if !filter.kinds.is_empty() {
            let kinds: Vec<&str> = filter.kinds.iter().map(|k| k.as_str()).collect();
            query.push(format!(
                "kinds={}",
                cairn_api::percent_encode(&kinds.join(","))
            ));
        }
        let path = if query.is_empty() {
            "/v1/events".to_owned()
        } else {
            format!("/v1/events?{}", query.join("&"))
        };
        // "Now" is where the log stands: so that a connection made again before any event resumes from there, not
        // from a later now.
        let from = match from {
            cairn::EventsFrom::Now => {
                let newest = self
                    .run(ActivityFilter {
                        limit: 1,
                        ..ActivityFilter::default()
                    })
                    .await?;
                cairn::EventsFrom::After(newest.events.first().map_or(0, |e| e.id))
            }
            from => from,
        };
        let mut events = ClientEvents {
            client: self.clone(),
            path,
            from,
            response: None,
            pending: Vec::new(),
            missed: None,
        };
        events.connect().await?;
        Ok(events)
    }
}

impl ClientEvents {
    /// The id of the last event given: where a new subscription would resume.
    pub fn position(&self) -> Option<i64> {
        match self.from {
            cairn::EventsFrom::After(id) => Some(id),
            cairn::EventsFrom::Now => None,
        }
    }

    async fn connect(&mut self) -> Result<()> {
        let url = format!("{}{}", self.client.base, self.path);
        // No timeout for the whole response: it does not end. Keep-alive comments come every 15 s.
        let mut request = self.client.http.get(&url);
        if let Some(token) = &self.client.token {
            request = request.bearer_auth(token);
        }
        if let cairn::EventsFrom::After(id) = self.from {
            request = request.header("Last-Event-ID", id.to_string());
        }
        let response = request
            .send()
            .await
            .map_err(|e| unreachable_server(&url, e))?;
        let status = response.status();
        if !status.is_success() {
            let bytes = response.bytes().await.unwrap_or_default();
            return Err(refusal(&url, status, &bytes));
        }
        self.pending.clear();
        self.response = Some(response);
        Ok(())
    }

    /// The next event, waiting as long as it takes. A dropped connection is made again (after a second, then
    /// longer, up to ten), resuming after the last event given.
    ///
    /// # Errors
    /// What the server refuses on a new connection (a bad filter, a refused token); an event it sends that this
    /// client cannot read.
    pub async fn next(&mut self) -> Result<cairn::ActivityEvent> {
        let mut backoff = Duration::from_secs(1);
        loop {
            if let Some(event) = self.parse_one()? {
                return Ok(event);
            }
            let chunk = match self.response.as_mut() {
                Some(response) => tokio::time::timeout(SILENT_STREAM, response.chunk())
                    .await
                    .unwrap_or(Ok(None)),
                None => Ok(None),
            };
            match chunk {
                Ok(Some(bytes)) => {
                    self.pending.extend_from_slice(&bytes);
                    if self.pending.len() > MAX_EVENT_BYTES {
                        // Not a stream of Cairn's events: the next call connects again.
                        self.pending.clear();
                        self.response = None;
                        return Err(Error::from_parts(
                            ErrorKind::Unavailable,
                            None,
                            "the event stream sent more than a megabyte without ending an event",
                        ));
                    }
                }
                // The stream ended (the server stopped), broke, or went silent: again, from the last event given.
                Ok(None) | Err(_) => {
                    self.response = None;
                    loop {
                        match self.connect().await {
                            Ok(()) => break,
                            Err(e) if e.kind() == ErrorKind::Unavailable => {
                                tracing::debug!(error = %e, "the event stream is down; connecting again");
                                tokio::time::sleep(backoff).await;
                                backoff = (backoff * 2).min(Duration::from_secs(10));
                            }
                            Err(e) => return Err(e),
                        }
                    }
                }
            }
        }
    }

    /// The server's notice, once, that the stream resumed past events the log no longer holds (pruned by its
    /// retention while this client was away): it went on from the oldest one kept.
    pub fn missed(&mut self) -> Option<cairn::EventsMissed> {
        self.missed.take()
    }

    /// Takes the first whole event out of what was received: its `data` line, as JSON (comments and other fields
    /// are skipped; the event's id is in its data). A `missed` notice is kept for [`ClientEvents::missed`].
    fn parse_one(&mut self) -> Result<Option<cairn::ActivityEvent>> {
        loop {
            let Some(end) = self.pending.windows(2).position(|w| w == b"\n\n") else {
                return Ok(None);
            };
            let bytes: Vec<u8> = self.pending.drain(..end + 2).collect();
            let block = String::from_utf8_lossy(&bytes);
            let data: Vec<&str> = block
                .lines()
                .filter_map(|line| line.strip_prefix("data:"))
                .map(|d| d.strip_prefix(' ').unwrap_or(d))
                .collect();
            if data.is_empty() {
                continue;
            }
            let name = block
                .lines()
                .find_map(|line| line.strip_prefix("event:").map(str::trim));
            let named = |wanted: &str| name == Some(wanted);
            if named("missed") {
                let notice: serde_json::Value =
                    serde_json::from_str(&data.join("\n")).unwrap_or_default();
                if let (Some(after), Some(oldest)) =
                    (notice["after"].as_i64(), notice["oldest"].as_i64())
                {
                    self.missed = Some(cairn::EventsMissed { after, oldest });
                }
                continue;
            }
            let body: cairn_api::ActivityEventBody = match serde_json::from_str(&data.join("\n")) {
                Ok(body) => body,
                // A named event this client does not know, whose data is no activity event (a newer server's
                // notice): passed over, its id (if any) kept as the place to resume from.
                Err(_) if name.is_some_and(|n| cairn::ActivityKind::parse(n).is_none()) => {
                    if let Some(id) = block
                        .lines()
                        .find_map(|line| line.strip_prefix("id:"))
                        .and_then(|id| id.trim().parse::<i64>().ok())
                    {
                        self.from = cairn::EventsFrom::After(id);
                    }
                    continue;
                }
                Err(e) => {
                    return Err(Error::with_source(
                        ErrorKind::Unavailable,
                        "the event stream sent an event that is not Cairn's",
                        e,
                    ));
                }
            };
            let event = body.to_event()?;
            self.from = cairn::EventsFrom::After(event.id);
            return Ok(Some(event));
        }
    }
}
