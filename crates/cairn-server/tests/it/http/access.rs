//! Every route's declared rule, held for every role: the matrix of every route (the declared ones, listed by
//! `cairn_api::visit_routes`, and the event stream, `/metrics` and `/v1/token`) × every token (one per role, an
//! unknown one, and none), and again × a token of every role limited to one queue, against what is in that queue
//! and what is not. A route added without a rule does not compile; one whose rule the server does not hold fails
//! here.

use cairn_api::{Access, Method, PathParam, READ, READ_ONE, Reach, Role, Route, RouteVisitor};
use cairn_server::ServerConfig;
use cairn_server::credentials::{Credential, Credentials};
use serde_json::Value;

use super::{TestServer, wire::http};

const ADMIN_SECRET: &str = "the-admin-token-of-this-test";

fn secret(role: Role) -> String {
    match role {
        Role::Admin => ADMIN_SECRET.to_owned(),
        other => format!("the-{other}-token-of-this-test"),
    }
}

/// A route as the matrix calls it: method, path with its parameters filled, whether it takes a body, its rule;
/// and for the matrix of limited tokens, its path's template and parameters, its reach, and its operation id and
/// whether its body names queues or jobs (for which a body that names some is sent).
struct Call {
    method: reqwest::Method,
    path: String,
    body: bool,
    access: Access,
    template: &'static str,
    params: &'static [PathParam],
    reach: Reach,
    operation: &'static str,
    names_in_body: bool,
}

struct Calls(Vec<Call>);

impl RouteVisitor for Calls {
    fn visit<R: Route>(&mut self) {
        let values: Vec<String> = R::PARAMS
            .iter()
            .map(|param| match param.name {
                "key" if R::PATH.starts_with("/v1/config") => "default_lease_timeout".to_owned(),
                "id" => "1".to_owned(),
                other => format!("some-{other}"),
            })
            .collect();
        let method = match R::METHOD {
            Method::Get => reqwest::Method::GET,
            Method::Post => reqwest::Method::POST,
            Method::Put => reqwest::Method::PUT,
            Method::Delete => reqwest::Method::DELETE,
        };
        self.0.push(Call {
            method,
            path: cairn_api::fill_path(R::PATH, &values).unwrap(),
            body: R::BODY && R::METHOD != Method::Get,
            access: R::ACCESS,
            template: R::PATH,
            params: R::PARAMS,
            reach: R::REACH,
            operation: R::OPERATION_ID,
            names_in_body: R::NAMES_IN_BODY,
        });
    }
}

/// Every route: the declared ones and those mounted by hand.
fn every_call() -> Vec<Call> {
    let mut calls = Calls(Vec::new());
    cairn_api::visit_routes(&mut calls);
    // The routes mounted by hand: the event stream and /metrics are reads; any token may ask who it is.
    for (path, access) in [
        ("/v1/events", READ),
        ("/metrics", READ),
        ("/v1/token", READ_ONE),
    ] {
        calls.0.push(Call {
            method: reqwest::Method::GET,
            path: path.to_owned(),
            body: false,
            access,
            template: path,
            params: &[],
            // Any token may ask who it is; the event stream and the metrics tell of every queue.
            reach: if path == "/v1/token" {
                Reach::Queues
            } else {
                Reach::Server
            },
            operation: path,
            names_in_body: false,
        });
    }
    assert!(calls.0.len() > 50, "every route is in the matrix");
    calls.0
}

/// Sends `call` with `token`: (status, error body if any). Only the head is waited for: the event stream's body
/// never ends.
async fn send(server: &TestServer, call: &Call, token: Option<&str>) -> (u16, Value) {
    let mut request = http().request(
        call.method.clone(),
        format!("{}{}", server.url(), call.path),
    );
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if call.body {
        request = request
            .header("content-type", "application/json")
            .body("{}");
    }
    let response = request.send().await.expect("the server answers");
    let status = response.status().as_u16();
    if !matches!(status, 401 | 403) {
        return (status, Value::Null);
    }
    let body = serde_json::from_slice(&response.bytes().await.unwrap()).unwrap_or(Value::Null);
    (status, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_holds_its_declared_rule_for_every_role() {
    let mut tokens = Credentials::none();
    for role in [Role::Read, Role::Enqueue, Role::Work] {
        let credential = Credential::new(format!("{role}-token"), role);
        tokens.add_secret(&secret(role), credential).unwrap();
    }
    let server = TestServer::spawn_with(ServerConfig {
        token: Some(ADMIN_SECRET.to_owned()),
        tokens,
        ..ServerConfig::default()
    })
    .await;
    let calls = every_call();

    for call in &calls {
        let route = format!("{} {}", call.method, call.path);
        for role in Role::ALL {
            let (status, body) = send(&server, call, Some(&secret(role))).await;
            if call.access.allows(role) {
                assert!(
                    !matches!(status, 401 | 403),
                    "{route} refused {role}: {body}"
                );
            } else {
                assert_eq!(status, 403, "{route} let {role} in");
                assert_eq!(body["error"]["kind"], "forbidden", "{route}: {body}");
                let message = body["error"]["message"].as_str().unwrap();
                assert!(
                    message.contains(&format!("\"{role}-token\", whose role is {role}"))
                        && message.contains(&call.access.describe()),
                    "{route}: {message}"
                );
            }
        }
        for token in [None, Some("a-token-this-server-does-not-know")] {
            let (status, body) = send(&server, call, token).await;
            if call.access.public {
                assert!(
                    !matches!(status, 401 | 403),
                    "{route} refused {token:?}: {body}"
                );
            } else {
                assert_eq!(status, 401, "{route} let {token:?} in");
                assert_eq!(body["error"]["kind"], "unauthorized", "{route}: {body}");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_tokens_lets_every_request_do_everything() {
    let server = TestServer::spawn().await;
    let mut calls = Calls(Vec::new());
    cairn_api::visit_routes(&mut calls);
    for call in &calls.0 {
        let (status, body) = send(&server, call, None).await;
        assert!(
            !matches!(status, 401 | 403),
            "{} {}: {body}",
            call.method,
            call.path
        );
    }
    let (status, body) = super::raw(
        reqwest::Method::GET,
        format!("{}/v1/token", server.url()),
        None,
        None,
    )
    .await;
    assert_eq!(
        (status, body),
        (200, serde_json::json!({ "role": "admin" }))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_learns_its_own_name_role_and_queues() {
    let mut tokens = Credentials::none();
    let credential = Credential::new("ci", Role::Enqueue);
    tokens
        .add_secret(&secret(Role::Enqueue), credential)
        .unwrap();
    let mailer = Credential::new("mailer", Role::Work).limited_to(["mail.bulk", "mail"]);
    tokens.add_secret(&secret(Role::Work), mailer).unwrap();
    let server = TestServer::spawn_with(ServerConfig {
        token: Some(ADMIN_SECRET.to_owned()),
        tokens,
        ..ServerConfig::default()
    })
    .await;
    let url = format!("{}/v1/token", server.url());
    let (status, body) = super::raw(
        reqwest::Method::GET,
        url.clone(),
        Some(&secret(Role::Enqueue)),
        None,
    )
    .await;
    assert_eq!(
        (status, body),
        (200, serde_json::json!({ "name": "ci", "role": "enqueue" }))
    );
    let (status, body) = super::raw(
        reqwest::Method::GET,
        url.clone(),
        Some(&secret(Role::Work)),
        None,
    )
    .await;
    let mailer =
        serde_json::json!({ "name": "mailer", "role": "work", "queues": ["mail", "mail.bulk"] });
    assert_eq!((status, body), (200, mailer));
    let (status, body) = super::raw(reqwest::Method::GET, url, Some(ADMIN_SECRET), None).await;
    assert_eq!(
        (status, body),
        (200, serde_json::json!({ "name": "token", "role": "admin" }))
    );
}

/// An admin's change with a token: each is an `audit` event on the activity log and the event stream, naming the
/// token, the request and the job or queue; changes the server refused, and what other roles do, are not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_change_an_admin_token_makes_is_on_the_audit_trail() {
    use cairn::{ActivityFilter, ActivityKind, EventFilter, EventsFrom, Jobs, Push};

    let mut tokens = Credentials::none();
    let ops = Credential::new("ops", Role::Admin);
    tokens
        .add_secret("the-ops-token-of-this-test", ops)
        .unwrap();
    let worker = Credential::new("mailer", Role::Work);
    tokens.add_secret(&secret(Role::Work), worker).unwrap();
    let server = TestServer::spawn_with(ServerConfig {
        tokens,
        ..ServerConfig::default()
    })
    .await;
    let ops = cairn_client::Client::new(server.url())
        .unwrap()
        .with_token("the-ops-token-of-this-test");
    let mailer = cairn_client::Client::new(server.url())
        .unwrap()
        .with_token(secret(Role::Work));
    let mut stream = ops
        .events(
            EventsFrom::Now,
            EventFilter {
                kinds: vec![ActivityKind::Audit],
                ..EventFilter::default()
            },
        )
        .await
        .unwrap();

    let id = mailer
        .enqueue(Push::new("email.send").queue("mail"))
        .await
        .unwrap()
        .id;
    ops.cancel(id).await.unwrap();
    let missing = cairn::JobId(id.0 + 1000);
    assert!(
        ops.set_priority(missing, 1).await.is_err(),
        "a change of a job that is not there is refused, and is no change"
    );
    ops.pause_queue("mail", true).await.unwrap();
    ops.sql(cairn::SqlQuery::new("SELECT count(*) FROM cairn_jobs"))
        .await
        .unwrap();

    let mut streamed = Vec::new();
    for _ in 0..3 {
        let event = tokio::time::timeout(std::time::Duration::from_secs(20), stream.next())
            .await
            .expect("an audit event within 20 s")
            .unwrap();
        streamed.push((event.job, event.queue, event.detail));
    }
    let cancel = format!("token \"ops\": POST /v1/jobs/{id}/cancel");
    let expected = vec![
        (Some(id), None, Some(cancel)),
        (
            None,
            Some("mail".to_owned()),
            Some("token \"ops\": POST /v1/queues/mail/pause".to_owned()),
        ),
        (
            None,
            None,
            Some(
                "token \"ops\": POST /v1/sql {\"query\":\"SELECT count(*) FROM cairn_jobs\",\"limit\":1000,\"timeout_ms\":5000}"
                    .to_owned(),
            ),
        ),
    ];
    assert_eq!(streamed, expected);
    // The same on the activity log, newest first; the push and the take of the worker's token are not audited.
    let page = ops.activity(ActivityFilter::default()).await.unwrap();
    let audited: Vec<_> = page
        .events
        .iter()
        .filter(|e| e.kind == ActivityKind::Audit)
        .map(|e| (e.job, e.queue.clone(), e.detail.clone()))
        .rev()
        .collect();
    assert_eq!(audited, expected);
}

/// What a limited token's request names: a queue, a job in it and a batch of its jobs.
struct Side {
    queue: &'static str,
    job: cairn::JobId,
    batch: cairn::BatchId,
}

impl Side {
    /// A job and a batch in `queue`, made with `admin`.
    async fn made(queue: &'static str, admin: &cairn_client::Client) -> Side {
        use cairn::{CreateBatch, Jobs, Push};
        let job = admin
            .enqueue(Push::new("seed").queue(queue))
            .await
            .unwrap()
            .id;
        let batch = admin
            .create_batch(CreateBatch::new(vec![Push::new("seed").queue(queue)]))
            .await
            .unwrap()
            .batch;
        Side { queue, job, batch }
    }

    /// `call`'s path naming this side's queue, job or batch.
    fn path(&self, call: &Call) -> String {
        let values: Vec<String> = call
            .params
            .iter()
            .map(|param| match *param {
                cairn_api::JOB_ID => self.job.to_string(),
                cairn_api::QUEUE_NAME => self.queue.to_owned(),
                cairn_api::BATCH_ID => self.batch.to_string(),
                other => format!("some-{}", other.name),
            })
            .collect();
        cairn_api::fill_path(call.template, &values).unwrap()
    }

    /// A body (or for a read, a query) for `call` that names this side's queue or job, if its body names any.
    fn body(&self, call: &Call) -> (String, Option<String>) {
        let (queue, job) = (self.queue, self.job.0);
        let pushes = format!(r#"{{"jobs":[{{"name":"x.y","queue":"{queue}"}}]}}"#);
        let body = match call.operation {
            _ if !call.names_in_body => return (String::new(), call.body.then(|| "{}".to_owned())),
            "list_jobs" => return (format!("?queue={queue}"), None),
            "enqueue" => format!(r#"{{"name":"x.y","queue":"{queue}"}}"#),
            "enqueue_batch" | "create_batch" | "add_to_batch" => pushes,
            "move_job" => format!(r#"{{"queue":"{queue}"}}"#),
            "change_dependencies" => format!(r#"{{"add":[{job}]}}"#),
            "dequeue" => format!(r#"{{"worker":"w","queues":["{queue}"]}}"#),
            "finish_many" => format!(r#"{{"jobs":[{{"id":{job},"token":"1"}}]}}"#),
            "spawn" => {
                format!(r#"{{"token":"1","name":"s","jobs":[{{"name":"x.y","queue":"{queue}"}}]}}"#)
            }
            other => panic!(
                "{other} names queues or jobs in its body: give the matrix a body that names some"
            ),
        };
        (String::new(), Some(body))
    }
}

/// Sends `call` with a limited token: its path from `path`, its body (or query) from `body`.
async fn send_limited(
    server: &TestServer,
    call: &Call,
    path: &Side,
    body: &Side,
    role: Role,
) -> (u16, Value) {
    let (query, body) = body.body(call);
    let mut request = http()
        .request(
            call.method.clone(),
            format!("{}{}{query}", server.url(), path.path(call)),
        )
        .bearer_auth(limited_secret(role));
    if let Some(body) = body {
        request = request
            .header("content-type", "application/json")
            .body(body);
    }
    let response = request.send().await.expect("the server answers");
    let status = response.status().as_u16();
    if status != 403 {
        return (status, Value::Null);
    }
    (
        status,
        serde_json::from_slice(&response.bytes().await.unwrap()).unwrap_or(Value::Null),
    )
}

fn limited_secret(role: Role) -> String {
    format!("the-{role}-token-of-queue-mine")
}

/// A token limited to the queue `mine`, of every role: every route it may call by its role answers it for what is
/// in `mine`, and refuses it, saying so, what reaches every queue or names another queue, or a job or batch there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_limited_to_a_queue_reaches_it_and_nothing_else() {
    let mut tokens = Credentials::none();
    for role in Role::ALL {
        let credential = Credential::new(format!("{role}-mine"), role).limited_to(["mine"]);
        tokens
            .add_secret(&limited_secret(role), credential)
            .unwrap();
    }
    let server = TestServer::spawn_with(ServerConfig {
        token: Some(ADMIN_SECRET.to_owned()),
        tokens,
        ..ServerConfig::default()
    })
    .await;
    let admin = cairn_client::Client::new(server.url())
        .unwrap()
        .with_token(ADMIN_SECRET);
    let mine = Side::made("mine", &admin).await;
    let other = Side::made("other", &admin).await;
    let calls = every_call();
    let named_in_path = |call: &Call| {
        call.params.iter().any(|p| {
            [
                cairn_api::JOB_ID,
                cairn_api::QUEUE_NAME,
                cairn_api::BATCH_ID,
            ]
            .contains(p)
        })
    };

    // Refusals first: a refused request changes nothing, so the requests within reach after cannot change them.
    // A route whose body names something is sent with a path within reach, to be refused for its body alone.
    let mut refused = 0;
    for call in &calls {
        let names_something =
            call.reach == Reach::Server || call.names_in_body || named_in_path(call);
        for role in Role::ALL
            .into_iter()
            .filter(|role| call.access.allows(*role))
        {
            if call.access.public || !names_something {
                continue;
            }
            let path = if call.names_in_body { &mine } else { &other };
            let (status, body) = send_limited(&server, call, path, &other, role).await;
            let route = format!("{} {}", call.method, path.path(call));
            assert_eq!(
                status, 403,
                "{route} let {role}-mine reach beyond its queue"
            );
            let message = body["error"]["message"].as_str().unwrap_or_default();
            assert!(
                message.contains(&format!(
                    "token \"{role}-mine\", which is limited to queues mine: "
                )),
                "{route}: {message}"
            );
            refused += 1;
        }
    }
    assert!(refused > 90, "the matrix refused only {refused} requests");

    // Within reach: every route that reaches only what it names answers every role that may call it.
    for call in calls.iter().filter(|call| call.reach == Reach::Queues) {
        for role in Role::ALL
            .into_iter()
            .filter(|role| call.access.allows(*role))
        {
            let (status, body) = send_limited(&server, call, &mine, &mine, role).await;
            assert!(
                !matches!(status, 401 | 403),
                "{} {} refused {role}-mine: {body}",
                call.method,
                mine.path(call)
            );
        }
    }
}
