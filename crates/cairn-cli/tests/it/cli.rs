//! The client commands (`cairn push`, `get`, `show`, `list`, the calls under a lease, management) run as a user
//! runs them: the real binary against a real server. Expected output is inline, with times masked; `--json`
//! output is read back as the wire types.

use cairn::Jobs;
use std::process::{Command, Output};

use cairn_api::{
    DequeueBody, EmptyBody, EnqueuedBody, JobBody, JobPageBody, LeaseExpiryBody, StateBody,
};
use serde::de::DeserializeOwned;

use super::harness::{TestServer, cairn_binary, run_with_stdin, stderr, stdout};

/// What every human time looks like after [`mask_times`].
const TIME: &str = "YYYY-MM-DDTHH:MM:SSZ";

/// Replaces every human time (`2025-01-31T09:00:00Z`, always 20 characters) with [`TIME`], which has the same
/// width, so that tables keep their alignment.
pub(crate) fn mask_times(text: &str) -> String {
    let shape = |window: &[u8]| {
        window.len() == TIME.len()
            && window.iter().zip(TIME.bytes()).all(|(c, t)| match t {
                b'Y' | b'M' | b'D' | b'H' | b'S' => c.is_ascii_digit(),
                _ => *c == t,
            })
    };
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < bytes.len() {
        if i + TIME.len() <= bytes.len() && shape(&bytes[i..i + TIME.len()]) {
            out.push_str(TIME);
            i += TIME.len();
        } else {
            let c = text[i..].chars().next().expect("i is on a char boundary");
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// Runs `cairn` against `url` with exactly the environment given (no server token unless `env` has one).
fn cairn_with_env(url: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(cairn_binary());
    command
        .args(args)
        .env("CAIRN_SERVER", url)
        .env_remove("CAIRN_TOKEN")
        .env_remove("CAIRN_LEASE_TOKEN")
        .env("CAIRN_LOG", "warn");
    for (key, value) in env {
        command.env(key, value);
    }
    run_with_stdin(command, None)
}

/// Asserts the command succeeded and returns its stdout.
#[track_caller]
pub(crate) fn ok(out: &Output) -> String {
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout: {}\nstderr: {}",
        stdout(out),
        stderr(out)
    );
    stdout(out)
}

/// Asserts the command succeeded and reads its stdout as JSON of type `T`.
#[track_caller]
pub(crate) fn ok_json<T: DeserializeOwned>(out: &Output) -> T {
    let text = ok(out);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: not the wire type: {text}"))
}

/// Asserts the exit code, and that stderr is one `error: …` report containing `message`.
#[track_caller]
pub(crate) fn check_error(out: &Output, code: i32, message: &str) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(code), "stderr: {err}");
    assert!(err.starts_with("error: "), "stderr: {err}");
    assert!(
        err.contains(message),
        "expected {message:?} in stderr: {err}"
    );
    assert_eq!(stdout(out), "", "nothing on stdout after an error");
}

/// The raw bytes of a plain HTTP/1.1 GET of `path` from the server at `url` (`http://host:port`), headers and all.
fn http_get(url: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let address = url.strip_prefix("http://").expect("a plain HTTP address");
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
}

/// The lease token in `cairn get`'s human output.
pub(crate) fn lease_token(get_output: &str) -> String {
    get_output
        .lines()
        .find_map(|line| line.strip_prefix("lease: "))
        .unwrap_or_else(|| panic!("no lease line in {get_output:?}"))
        .to_owned()
}

#[test]
fn push_then_show_and_list_print_the_job() {
    let server = TestServer::spawn();
    let push = [
        "push",
        "email.send",
        "--data",
        r#"{"to": "ada@example.com"}"#,
        "--priority",
        "-2",
        "--tag",
        "welcome",
        "--max-attempts",
        "3",
        "--unique-key",
        "ada",
    ];
    assert_eq!(ok(&server.cairn(&push, None)), "1\n");
    assert_eq!(
        ok(&server.cairn(
            &[
                "push",
                "report.daily",
                "--queue",
                "reports",
                "--delay",
                "1h"
            ],
            None
        )),
        "2\n"
    );

    let shown = ok(&server.cairn(&["show", "1"], None));
    assert_eq!(
        mask_times(&shown),
        r#"id: 1
name: email.send
queue: default
state: queued
priority: -2
weight: 1
attempt: 0 of 3
run_at: YYYY-MM-DDTHH:MM:SSZ
created_at: YYYY-MM-DDTHH:MM:SSZ
lease_timeout: 1m
unique_key: ada
tags: welcome
data: {"to":"ada@example.com"}
history: none
"#
    );

    let listed = ok(&server.cairn(&["list"], None));
    assert_eq!(
        mask_times(&listed),
        "\
ID  STATE      QUEUE    NAME          PRIORITY  ATTEMPT  RUN AT
2   scheduled  reports  report.daily  0         0/5      YYYY-MM-DDTHH:MM:SSZ
1   queued     default  email.send    -2        0/3      YYYY-MM-DDTHH:MM:SSZ
"
    );
    let filtered = ok(&server.cairn(
        &["list", "--queue", "reports", "--state", "scheduled"],
        None,
    ));
    assert!(filtered.contains("report.daily") && !filtered.contains("email.send"));
    assert_eq!(
        ok(&server.cairn(&["list", "--tag", "nobody"], None)),
        "no jobs\n"
    );
}

#[test]
fn debounced_pushes_from_the_shell_land_in_one_job() {
    let server = TestServer::spawn();
    let push = |n: &str| {
        server.cairn(
            &[
                "push",
                "reindex",
                "--data",
                n,
                "--debounce",
                "customer:42",
                "--debounce-delay",
                "1m",
                "--debounce-max-wait",
                "10m",
                "--json",
            ],
            None,
        )
    };
    let first: EnqueuedBody = ok_json(&push(r#"{"n":1}"#));
    let second: EnqueuedBody = ok_json(&push(r#"{"n":2}"#));
    assert_eq!((first.existing, first.state.as_str()), (false, "scheduled"));
    assert_eq!((second.id, second.existing), (first.id, true));
    let shown: serde_json::Value =
        ok_json(&server.cairn(&["show", &first.id.to_string(), "--json"], None));
    assert_eq!(shown["data"], serde_json::json!({"n": 2}), "{shown}");
    // A delay longer than the wait is refused, naming the field; the flags go together.
    check_error(
        &server.cairn(
            &[
                "push",
                "x",
                "--debounce",
                "k",
                "--debounce-delay",
                "1h",
                "--debounce-max-wait",
                "1m",
            ],
            None,
        ),
        2,
        "debounce.delay",
    );
    let alone = server.cairn(&["push", "x", "--debounce", "k"], None);
    assert_eq!(alone.status.code(), Some(2), "{}", stderr(&alone));
}

#[test]
fn a_throttled_push_from_the_shell_answers_with_the_job_of_its_period() {
    let server = TestServer::spawn();
    let push = || {
        server.cairn(
            &[
                "push",
                "welcome",
                "--throttle",
                "welcome:ada",
                "--throttle-period",
                "24h",
                "--json",
            ],
            None,
        )
    };
    let first: EnqueuedBody = ok_json(&push());
    let again: EnqueuedBody = ok_json(&push());
    assert!(!first.existing);
    assert_eq!((again.id, again.existing), (first.id, true));
}

#[test]
fn a_push_from_the_shell_says_whose_its_children_are() {
    let server = TestServer::spawn();
    let pushed: EnqueuedBody =
        ok_json(&server.cairn(&["push", "family", "--children", "job", "--json"], None));
    let shown: serde_json::Value = serde_json::from_str(&ok(
        &server.cairn(&["show", &pushed.id.to_string(), "--json"], None)
    ))
    .unwrap();
    assert_eq!(shown["children"], "job", "{shown}");
    let refused = server.cairn(&["push", "family", "--children", "mine"], None);
    assert_eq!(refused.status.code(), Some(2));
    let message = String::from_utf8_lossy(&refused.stderr);
    assert!(message.contains("[possible values: run, job]"), "{message}");
}

#[test]
fn concurrency_keys_from_the_shell_limit_a_key_and_show_where_it_stands() {
    let server = TestServer::spawn();
    assert_eq!(
        ok(&server.cairn(&["queue", "key-limit", "mail", "1"], None)),
        "queue mail: at most 1 running at once per concurrency key\n"
    );
    let push = || {
        let out = server.cairn(
            &[
                "push",
                "send",
                "--queue",
                "mail",
                "--concurrency-key",
                "customer:42",
            ],
            None,
        );
        ok(&out).trim().to_owned()
    };
    let first = push();
    push();
    ok(&server.cairn(&["dequeue", "*", "--queue", "mail", "--limit", "5"], None));
    assert_eq!(
        ok(&server.cairn(&["queue", "key-weight", "mail", "customer:42", "2"], None)),
        "queue mail: key customer:42 takes 2 job(s) per turn\n"
    );
    assert_eq!(
        ok(&server.cairn(&["queue", "keys", "mail"], None)),
        "\
KEY          RUNNING  QUEUED  LIMIT  FULL  WEIGHT
customer:42  1        1       1      yes   2
1 ready jobs wait on a key at its limit
"
    );
    assert!(
        ok(&server.cairn(&["queues"], None)).contains("per-key=1"),
        "the queue's settings show the limit"
    );
    let shown = ok(&server.cairn(&["show", &first], None));
    assert!(shown.contains("customer:42"), "{shown}");
    let refused = server.cairn(&["queue", "key-limit", "mail", "0"], None);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    assert_eq!(
        ok(&server.cairn(&["queue", "key-limit", "mail", "--off"], None)),
        "queue mail: no limit per concurrency key\n"
    );
}

#[test]
fn names_and_data_go_in_and_come_out_as_written() {
    let server = TestServer::spawn();
    // Bedrock's worker manager puts parameters in the name; the data's keys are not in alphabetical order.
    let name = "www-prod/UserActivityEvaluator?accountID=856&ids=[1,2]*";
    let data = r#"{"r":1,"done":true,"nested":{"z":0,"b":1}}"#;
    assert_eq!(
        ok(&server.cairn(&["push", name, "--data", data], None)),
        "1\n"
    );
    let shown = ok(&server.cairn(&["show", "1", "--json"], None));
    let compact: serde_json::Value = serde_json::from_str(&shown).unwrap();
    assert_eq!(compact["name"], name);
    assert_eq!(serde_json::to_string(&compact["data"]).unwrap(), data);
    // The HTTP API's own bytes, not only what a client parses from them.
    let body = http_get(server.url(), "/v1/jobs/1");
    assert!(body.contains(&format!(r#""data":{data}"#)), "{body}");
    // Taken by its exact name: the name's `?`, `[` and `*` are escaped in the pattern.
    let got = ok(&server.cairn(
        &[
            "dequeue",
            "www-prod/UserActivityEvaluator[?]accountID=856&ids=[[]1,2][*]",
        ],
        None,
    ));
    assert!(got.contains(name), "{got}");
}

#[test]
fn list_names_the_cursor_of_the_next_page() {
    let server = TestServer::spawn();
    for name in ["a", "b", "c"] {
        ok(&server.cairn(&["push", name], None));
    }
    let first = ok(&server.cairn(&["list", "--limit", "2"], None));
    assert_eq!(
        mask_times(&first),
        "\
ID  STATE   QUEUE    NAME  PRIORITY  ATTEMPT  RUN AT
3   queued  default  c     0         0/5      YYYY-MM-DDTHH:MM:SSZ
2   queued  default  b     0         0/5      YYYY-MM-DDTHH:MM:SSZ
next: --before 2
"
    );
    let second = ok(&server.cairn(&["list", "--limit", "2", "--before", "2"], None));
    assert_eq!(
        mask_times(&second),
        "\
ID  STATE   QUEUE    NAME  PRIORITY  ATTEMPT  RUN AT
1   queued  default  a     0         0/5      YYYY-MM-DDTHH:MM:SSZ
"
    );
}

#[test]
fn push_reads_data_from_stdin_and_from_a_file() {
    let server = TestServer::spawn();
    ok(&server.cairn(&["push", "from.stdin", "--data", "-"], Some(r#"[1, 2]"#)));
    let file = server.dir().join("data.json");
    std::fs::write(&file, r#"{"from": "file"}"#).unwrap();
    let at_file = format!("@{}", file.display());
    ok(&server.cairn(&["push", "from.file", "--data", &at_file], None));

    let page: JobPageBody = ok_json(&server.cairn(&["list", "--json"], None));
    let data: Vec<_> = page.jobs.iter().map(|j| j.data.to_string()).collect();
    assert_eq!(data, [r#"{"from":"file"}"#, "[1,2]"]);
}

#[test]
fn get_then_finish_with_the_printed_token() {
    let server = TestServer::spawn();
    ok(&server.cairn(&["push", "email.send", "--data", r#"{"to": "ada"}"#], None));
    ok(&server.cairn(&["push", "report.daily"], None));

    let got = ok(&server.cairn(&["dequeue", "email.*", "--worker", "w1"], None));
    let token = lease_token(&got);
    let masked = mask_times(&got).replace(&format!("lease: {token}\n"), "lease: <token>\n");
    assert_eq!(
        masked,
        r#"id: 1
name: email.send
queue: default
attempt: 1 of 5
lease: <token>
lease_expires_at: YYYY-MM-DDTHH:MM:SSZ
data: {"to":"ada"}
"#
    );

    let progress = [
        "update",
        "1",
        "--lease",
        &token,
        "--progress",
        r#"{"sent": 0}"#,
    ];
    assert_eq!(
        ok(&server.cairn(&progress, None)),
        "job 1: progress recorded\n"
    );
    // The token also comes from the environment, as a script that ran `cairn get` would pass it on.
    let finished = cairn_with_env(
        server.url(),
        &["finish", "1", "--data", r#"{"sent": 1}"#],
        &[("CAIRN_LEASE_TOKEN", &token)],
    );
    assert_eq!(ok(&finished), "job 1: completed\n");

    let shown = mask_times(&ok(&server.cairn(&["show", "1"], None)));
    assert!(shown.contains("state: completed\n"), "{shown}");
    assert!(shown.contains("data: {\"sent\":1}\n"), "{shown}");
    assert!(
        shown.ends_with(
            "\
history:
  #  WORKER  STARTED               FINISHED              OUTCOME    RUN  CPU  MEMORY  ERROR
  1  w1      YYYY-MM-DDTHH:MM:SSZ  YYYY-MM-DDTHH:MM:SSZ  completed  -    -    -       -
"
        ),
        "{shown}"
    );
}

#[test]
fn retry_fail_and_management_commands_say_what_happened() {
    let server = TestServer::spawn();
    ok(&server.cairn(&["push", "flaky"], None));
    ok(&server.cairn(&["push", "later", "--delay", "1h"], None));

    let token = lease_token(&ok(
        &server.cairn(&["dequeue", "flaky", "--worker", "w1"], None)
    ));
    let retry = [
        "retry",
        "1",
        "--lease",
        &token,
        "--error",
        "timed out",
        "--delay",
        "0s",
    ];
    assert_eq!(ok(&server.cairn(&retry, None)), "job 1: queued\n");

    let token = lease_token(&ok(
        &server.cairn(&["dequeue", "flaky", "--worker", "w2"], None)
    ));
    let heartbeat = ok(&server.cairn(&["heartbeat", "1", "--lease", &token], None));
    assert_eq!(
        mask_times(&heartbeat),
        "job 1: lease extended to YYYY-MM-DDTHH:MM:SSZ\n"
    );
    let checkpoint = [
        "checkpoint",
        "1",
        "--lease",
        &token,
        "--data",
        r#"{"page": 2}"#,
    ];
    assert!(ok(&server.cairn(&checkpoint, None)).starts_with("job 1: checkpoint saved"));
    let fail = [
        "fail",
        "1",
        "--lease",
        &token,
        "--group",
        "bad-input",
        "--message",
        "no such page",
    ];
    assert_eq!(ok(&server.cairn(&fail, None)), "job 1: failed\n");

    let shown = mask_times(&ok(&server.cairn(&["show", "1"], None)));
    assert!(shown.contains("failure_group: bad-input\n"), "{shown}");
    assert!(
        shown.ends_with(
            "\
history:
  #  WORKER  STARTED               FINISHED              OUTCOME  RUN  CPU  MEMORY  ERROR
  1  w1      YYYY-MM-DDTHH:MM:SSZ  YYYY-MM-DDTHH:MM:SSZ  retried  -    -    -       timed out
  2  w2      YYYY-MM-DDTHH:MM:SSZ  YYYY-MM-DDTHH:MM:SSZ  failed   -    -    -       no such page
"
        ),
        "{shown}"
    );

    let manage: [(&[&str], &str); 5] = [
        (&["priority", "2", "-5"], "job 2: priority -5\n"),
        (&["move", "2", "urgent"], "job 2: moved to queue urgent\n"),
        (
            &["reschedule", "2", "--run-at", "2030-01-01T00:00:00Z"],
            "job 2: scheduled, runs at 2030-01-01T00:00:00Z\n",
        ),
        (&["cancel", "2"], "job 2: cancelled\n"),
        (&["delete", "2"], "job 2: deleted\n"),
    ];
    for (args, expected) in manage {
        assert_eq!(ok(&server.cairn(args, None)), expected, "{args:?}");
    }
}

#[test]
fn json_output_reads_as_the_wire_types() {
    let server = TestServer::spawn();
    let enqueued: EnqueuedBody = ok_json(&server.cairn(&["push", "x", "--json"], None));
    assert_eq!(
        enqueued,
        EnqueuedBody {
            id: 1,
            state: "queued".into(),
            existing: false
        }
    );
    let again: EnqueuedBody =
        ok_json(&server.cairn(&["push", "x", "--unique-key", "k", "--json"], None));
    let same: EnqueuedBody =
        ok_json(&server.cairn(&["push", "x", "--unique-key", "k", "--json"], None));
    assert!(same.existing && same.id == again.id);

    let taken: DequeueBody =
        ok_json(&server.cairn(&["dequeue", "x", "--limit", "2", "--json"], None));
    assert_eq!(taken.jobs.len(), 2);
    let claimed = &taken.jobs[0];
    assert_eq!((claimed.job.id, claimed.lease.job), (1, 1));
    assert_eq!(claimed.job.state, "running");
    let token = claimed.lease.token.as_str();

    let update = ["update", "1", "--lease", token, "--progress", "7", "--json"];
    let _: EmptyBody = ok_json(&server.cairn(&update, None));
    let heartbeat = ["heartbeat", "1", "--lease", token, "--json"];
    let extended: LeaseExpiryBody = ok_json(&server.cairn(&heartbeat, None));
    assert!(extended.lease_expires_at >= claimed.lease.expires_at);
    let retry = [
        "retry", "1", "--lease", token, "--error", "e", "--delay", "1h", "--json",
    ];
    let state: StateBody = ok_json(&server.cairn(&retry, None));
    assert_eq!(state.state, "scheduled");

    let job: JobBody = ok_json(&server.cairn(&["show", "1", "--json"], None));
    assert_eq!((job.id, job.state.as_str()), (1, "scheduled"));
    assert_eq!(job.history.len(), 1);
    assert_eq!(job.history[0].error.as_deref(), Some("e"));
    let page: JobPageBody = ok_json(&server.cairn(&["list", "--limit", "1", "--json"], None));
    assert_eq!(page.jobs.len(), 1);
    assert_eq!(page.next, Some(page.jobs[0].id));

    let empty = server.cairn(&["dequeue", "nothing", "--json"], None);
    assert_eq!(empty.status.code(), Some(7));
    let none: DequeueBody = serde_json::from_str(&stdout(&empty)).unwrap();
    assert!(none.jobs.is_empty());
}

#[test]
fn errors_exit_with_their_code_and_name_what_was_wrong() {
    let server = TestServer::spawn();
    ok(&server.cairn(&["push", "x"], None));
    let token = lease_token(&ok(&server.cairn(&["dequeue", "x"], None)));
    let wrong = if token == "1" { "2" } else { "1" };

    // (arguments, exit code, what stderr says)
    let cases: [(&[&str], i32, &str); 14] = [
        (&["show", "999"], 3, "job 999 not found"),
        (&["move", "999", "q"], 3, "moving job 999 to queue \"q\""),
        (&["cancel", "999"], 3, "not found"),
        (&["finish", "1", "--lease", wrong], 4, "finishing job 1"),
        (&["cancel", "1"], 0, ""),
        (&["priority", "1", "3"], 4, "changing the priority of job 1"),
        (&["push", "x", "--data", "{bad"], 2, "--data: must be JSON"),
        (
            &["push", "x", "--data", "@/nonexistent/x.json"],
            2,
            "--data: reading",
        ),
        (
            &["push", "bad\tname"],
            2,
            "name: must not contain control characters",
        ),
        (
            &["show", "abc"],
            2,
            "'<ID>': must be a job id (a positive integer)",
        ),
        (&["dequeue", "nothing", "--wait", "0s"], 7, ""),
        // Flags say what they accept, in words, whatever the value looks like.
        (
            &["push", "x", "--priority", "high"],
            2,
            "invalid value 'high' for '--priority <PRIORITY>': must be a whole number from -2147483648 to \
             2147483647, got \"high\"",
        ),
        (
            &["push", "x", "--delay", "-5s"],
            2,
            "invalid value '-5s' for '--delay <DURATION>': must not be negative, got \"-5s\"",
        ),
        (
            &["push", "x", "--weight", "-1"],
            2,
            "invalid value '-1' for '--weight <WEIGHT>': must be a whole number from 0 to 4294967295, got \"-1\"",
        ),
    ];
    for (args, code, message) in cases {
        let out = server.cairn(args, None);
        match (code, message) {
            (0, _) => {
                ok(&out);
            }
            (7, _) => {
                assert_eq!(out.status.code(), Some(7), "{args:?}");
                assert_eq!(stdout(&out), "");
                assert!(stderr(&out).contains("no job matching \"nothing\" was ready"));
            }
            _ => check_error(&out, code, message),
        }
    }
    let missing_lease = server.cairn(&["finish", "1"], None);
    check_error(&missing_lease, 2, "--lease <TOKEN>");
    // The former name of `cairn dequeue` still takes jobs, and says what it is called now.
    let old = server.cairn(&["get", "nothing", "--wait", "0s"], None);
    assert_eq!(old.status.code(), Some(7));
    assert!(
        stderr(&old).contains("`cairn get` is now `cairn dequeue`"),
        "{}",
        stderr(&old)
    );
}

#[test]
fn an_unreachable_server_exits_5() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}");
    let out = cairn_with_env(&url, &["show", "1"], &[]);
    // Once, in words: the cause is not repeated by each layer it passed through.
    assert_eq!(
        stderr(&out).trim_end(),
        format!(
            "error: showing job 1: {url}/v1/jobs/1: could not connect (Connection refused (os error 111))"
        )
    );
    check_error(&out, 5, "could not connect");
    let bad_url = cairn_with_env("127.0.0.1:1", &["list"], &[]);
    check_error(&bad_url, 2, "--server");
}

#[test]
fn a_missing_or_wrong_token_exits_6() {
    let server = TestServer::spawn_with(&["--token", "0123456789abcdef"]);
    let without = cairn_with_env(server.url(), &["list"], &[]);
    check_error(&without, 6, "listing jobs");
    let wrong = cairn_with_env(
        server.url(),
        &["list"],
        &[("CAIRN_TOKEN", "fedcba9876543210")],
    );
    assert_eq!(wrong.status.code(), Some(6), "{}", stderr(&wrong));
    // The harness passes the server's token, so the same command works.
    assert_eq!(ok(&server.cairn(&["list"], None)), "no jobs\n");
}

#[test]
fn mask_times_keeps_the_width_of_what_it_masks() {
    assert_eq!(
        mask_times("at 2025-01-31T09:00:00Z  x\n"),
        "at YYYY-MM-DDTHH:MM:SSZ  x\n"
    );
    assert_eq!(mask_times("2025-01-31 09:00"), "2025-01-31 09:00");
}

#[test]
fn get_gives_the_jobs_back_when_nobody_can_read_their_tokens() {
    let server = TestServer::spawn();
    let id = ok(&server.cairn(&["push", "report.daily"], None));
    // Stdout is a pipe whose reading end is already closed: the tokens cannot reach anyone.
    let mut fds = [0; 2];
    // SAFETY: pipe fills the two descriptors it is given.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: the reading end is ours and closed once.
    unsafe { libc::close(fds[0]) };
    // SAFETY: the writing end is ours; the Stdio takes it over and closes it.
    let closed = unsafe { <std::process::Stdio as std::os::fd::FromRawFd>::from_raw_fd(fds[1]) };
    let out = Command::new(cairn_binary())
        .args(["dequeue", "report.*"])
        .env("CAIRN_SERVER", server.url())
        .env_remove("CAIRN_TOKEN")
        .env("CAIRN_LOG", "warn")
        .stdout(closed)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("writing the taken jobs to stdout"),
        "{}",
        stderr(&out)
    );
    let show = ok(&server.cairn(&["show", id.trim()], None));
    assert!(show.contains("state: queued"), "{show}");
    assert!(show.contains("released"), "{show}");
}

#[test]
fn requeue_and_set_data_fix_a_failed_job_from_the_shell() {
    let server = TestServer::spawn();
    let id = ok(&server.cairn(
        &[
            "push",
            "import",
            "--data",
            r#"{"file": "bad.csv"}"#,
            "--max-attempts",
            "1",
        ],
        None,
    ));
    let id = id.trim();
    let got = ok(&server.cairn(&["dequeue", "import", "--lease-timeout", "1h"], None));
    let token = lease_token(&got);
    ok(&server.cairn(
        &[
            "fail",
            id,
            "--lease",
            &token,
            "--group",
            "bad-input",
            "--message",
            "no file",
        ],
        None,
    ));

    assert_eq!(
        ok(&server.cairn(&["set-data", id, "--data", r#"{"file": "good.csv"}"#], None)),
        format!("job {id}: data replaced\n")
    );
    assert_eq!(
        ok(&server.cairn(&["requeue", id], None)),
        format!("job {id}: queued\n")
    );
    let show = ok(&server.cairn(&["show", id], None));
    assert!(show.contains("state: queued"), "{show}");
    assert!(show.contains("good.csv"), "{show}");
    check_error(
        &server.cairn(&["requeue", "999"], None),
        3,
        "error: requeueing job 999: job 999 not found",
    );
    check_error(
        &server.cairn(&["dequeue", "import", "--lease-timeout", "soon"], None),
        2,
        "error: invalid value 'soon' for '--lease-timeout <DURATION>'",
    );
}

#[test]
fn recurring_templates_are_set_listed_and_removed_from_the_shell() {
    let server = TestServer::spawn();
    let set = ok(&server.cairn(
        &[
            "recurring",
            "set",
            "cleanup",
            "--cron",
            "*/5 * * * *",
            "--name",
            "db.cleanup",
            "--missed",
            "skip",
            "--overlap",
            "skip",
            // `cairn push`'s flags for what a job is (their values reaching the runs is the engine's test).
            "--weight",
            "2",
            "--tag",
            "nightly",
            "--timeout",
            "5m",
            "--lease-timeout",
            "1m",
            "--unique-key",
            "cleanup",
        ],
        None,
    ));
    assert!(set.starts_with("recurring cleanup: next run 20"), "{set}");
    let list = mask_times(&ok(&server.cairn(&["recurring", "list"], None)));
    assert_eq!(
        list,
        "KEY      JOB         QUEUE    CRON         TIME ZONE  OVERLAP  NEXT RUN              LAST RUN\n\
         cleanup  db.cleanup  default  */5 * * * *  UTC        skip     YYYY-MM-DDTHH:MM:SSZ  -\n"
    );
    let shown = mask_times(&ok(&server.cairn(&["recurring", "show", "cleanup"], None)));
    assert_eq!(shown, list);
    // The whole template reads back, the job it makes among it.
    let shown = ok(&server.cairn(&["recurring", "show", "cleanup", "--json"], None));
    let shown: serde_json::Value = serde_json::from_str(&shown).unwrap();
    assert_eq!(
        (
            &shown["missed"],
            &shown["job"]["name"],
            &shown["job"]["weight"]
        ),
        (
            &serde_json::json!("skip"),
            &serde_json::json!("db.cleanup"),
            &serde_json::json!(2)
        ),
        "{shown}"
    );
    assert_eq!(
        shown["job"]["tags"],
        serde_json::json!(["nightly"]),
        "{shown}"
    );
    assert_eq!(
        shown["job"]["timeout_ms"],
        serde_json::json!(300_000),
        "{shown}"
    );
    check_error(
        &server.cairn(&["recurring", "show", "nope"], None),
        3,
        "recurring template \"nope\"",
    );
    assert_eq!(
        ok(&server.cairn(&["recurring", "pause", "cleanup"], None)),
        "recurring cleanup: paused\n"
    );
    let list = mask_times(&ok(&server.cairn(&["recurring", "list"], None)));
    assert_eq!(
        list,
        "KEY      JOB         QUEUE    CRON         TIME ZONE  OVERLAP  NEXT RUN  LAST RUN\n\
         cleanup  db.cleanup  default  */5 * * * *  UTC        skip     paused    -\n"
    );
    let id = ok(&server.cairn(&["recurring", "run", "cleanup"], None));
    let job = ok(&server.cairn(&["show", id.trim(), "--json"], None));
    let job: serde_json::Value = serde_json::from_str(&job).unwrap();
    assert_eq!(job["state"], "queued");
    check_error(
        &server.cairn(&["recurring", "run", "cleanup"], None),
        4,
        "overlap policy is skip",
    );
    let resumed = ok(&server.cairn(&["recurring", "resume", "cleanup"], None));
    assert!(
        resumed.starts_with("recurring cleanup: next run 20"),
        "{resumed}"
    );
    assert_eq!(
        ok(&server.cairn(&["recurring", "remove", "cleanup"], None)),
        "recurring cleanup: removed\n"
    );
    assert_eq!(
        ok(&server.cairn(&["recurring", "list"], None)),
        "no recurring templates\n"
    );
    check_error(
        &server.cairn(&["recurring", "remove", "cleanup"], None),
        3,
        "not found",
    );
}

/// `cairn batch`: a batch created from JSON lines on stdin, with a callback whose data gets the counts; shown,
/// listed, added to, its jobs listed and cancelled with the shared filter flags, then completed by its close.
#[test]
fn batches_are_created_shown_added_to_and_closed_from_the_shell() {
    let server = TestServer::spawn();
    let id = ok(&server.cairn(
        &[
            "batch",
            "create",
            "--jobs",
            "-",
            "--open",
            "--description",
            "nightly reports",
            "--on-complete",
            "reports.done",
            "--on-complete-queue",
            "callbacks",
            "--on-complete-data",
            r#"{"to":"ops"}"#,
        ],
        Some("{\"name\":\"report\",\"queue\":\"reports\"}\n\n{\"name\":\"report\",\"queue\":\"reports\"}\n"),
    ));
    assert_eq!(id, "1\n");
    let pushed = ok(&server.cairn(
        &["push", "report", "--queue", "reports", "--batch", "1"],
        None,
    ));
    assert_eq!(pushed, "3\n");
    assert_eq!(
        ok(&server.cairn(
            &["batch", "add", "1", "--jobs", r#"[{"name":"report"}]"#],
            None
        )),
        "batch 1: 1 jobs added\n"
    );
    let shown = mask_times(&ok(&server.cairn(&["batch", "show", "1"], None)));
    assert_eq!(
        shown,
        "id: 1\n\
         description: nightly reports\n\
         state: open\n\
         jobs: 4 (4 pending, 0 completed, 0 failed, 0 cancelled)\n\
         created_at: YYYY-MM-DDTHH:MM:SSZ\n\
         on_complete: reports.done in callbacks: not yet\n"
    );
    let listed = mask_times(&ok(
        &server.cairn(&["batch", "list", "--state", "open"], None)
    ));
    assert_eq!(
        listed,
        "ID  STATE  TOTAL  PENDING  COMPLETED  FAILED  CANCELLED  CREATED               DESCRIPTION\n\
         1   open   4      4        0          0       0          YYYY-MM-DDTHH:MM:SSZ  nightly reports\n"
    );
    let jobs = ok(&server.cairn(&["list", "--batch", "1", "--json"], None));
    let jobs: serde_json::Value = serde_json::from_str(&jobs).unwrap();
    assert_eq!(jobs["jobs"].as_array().unwrap().len(), 4);
    ok(&server.cairn(&["bulk", "cancel", "--batch", "1"], None));
    let closed = ok(&server.cairn(&["batch", "close", "1", "--json"], None));
    let closed: serde_json::Value = serde_json::from_str(&closed).unwrap();
    assert_eq!(closed["cancelled"], 4);
    let shown = ok(&server.cairn(&["batch", "show", "1", "--json"], None));
    let shown: serde_json::Value = serde_json::from_str(&shown).unwrap();
    assert_eq!(shown["state"], "completed");
    let callback = shown["on_complete"]["job"]
        .as_i64()
        .expect("the callback was made");
    let job = ok(&server.cairn(&["show", &callback.to_string(), "--json"], None));
    let job: serde_json::Value = serde_json::from_str(&job).unwrap();
    assert_eq!(job["data"]["to"], "ops");
    assert_eq!(job["data"]["batch"]["cancelled"], 4);

    check_error(
        &server.cairn(
            &["batch", "add", "1", "--jobs", r#"[{"name":"late"}]"#],
            None,
        ),
        4,
        "completed",
    );
    check_error(&server.cairn(&["batch", "show", "9"], None), 3, "not found");
    check_error(
        &server.cairn(
            &[
                "batch",
                "create",
                "--jobs",
                "[{\"name\":\"x\",\"unique_key\":\"k\"}]",
            ],
            None,
        ),
        2,
        "jobs[0].unique_key",
    );
    check_error(
        &server.cairn(
            &["batch", "create", "--jobs", "{\"name\":\"x\"}\nnot json"],
            None,
        ),
        2,
        "--jobs: line 2",
    );
}

/// `cairn bench --batch-groups` pushes each call's jobs as a batch with a callback, and checks that each batch made
/// its callback once (the run fails otherwise).
#[test]
fn bench_workers_in_batch_groups_makes_one_callback_per_batch() {
    let server = TestServer::spawn();
    let out = server.cairn(
        &[
            "bench",
            "--scenario",
            "workers",
            "--jobs",
            "300",
            "--clients",
            "2",
            "--in-flight",
            "8",
            "--batch-size",
            "40",
            "--batch-groups",
            "--json",
        ],
        None,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let scenario = &report["scenarios"][0];
    assert_eq!(scenario["count"], 300, "{scenario}");
    assert!(
        scenario["shape"]
            .as_str()
            .unwrap_or_default()
            .contains("(8 batches)"),
        "{scenario}"
    );
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let batches = runtime
        .block_on(server.client().batches(cairn::BatchFilter::default()))
        .unwrap();
    assert_eq!(batches.len(), 8);
    assert!(
        batches
            .iter()
            .all(|b| b.state == cairn::BatchState::Completed && b.completed == b.total)
    );
}

/// `cairn bench --scenario workers` moves every job through producers that enqueue in batches and workers that
/// take several per dequeue and finish them in one call, then reports them all.
#[test]
fn bench_workers_moves_every_job_and_reports_it() {
    let server = TestServer::spawn();
    let out = server.cairn(
        &[
            "bench",
            "--scenario",
            "workers",
            "--jobs",
            "300",
            "--clients",
            "2",
            "--in-flight",
            "8",
            "--batch-size",
            "40",
            "--json",
        ],
        None,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let scenario = &report["scenarios"][0];
    assert_eq!(scenario["name"], "workers");
    assert_eq!(scenario["count"], 300, "{scenario}");
    // Every job is done: nothing is left in the bench's queue.
    let client = server.client();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let counts = runtime
        .block_on(client.queue_stats())
        .unwrap()
        .into_iter()
        .find(|q| q.queue == "bench-workers")
        .expect("the bench's queue");
    assert_eq!(counts.completed, 300, "{counts:?}");
}

/// Runs `cairn bench --scenario sustained` for three one-second samples with `target` flags (a server or an
/// embedded database), and checks what it reports, records and draws. Returns the samples recorded.
fn check_sustained_run(target: &[&str]) -> Vec<serde_json::Value> {
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("run.jsonl");
    let plot = dir.path().join("run.svg");
    let mut args = vec!["bench"];
    args.extend_from_slice(target);
    args.extend_from_slice(&[
        "--scenario",
        "sustained",
        "--duration",
        "3s",
        "--interval",
        "1s",
        "--depth",
        "50",
        "--clients",
        "1",
        "--in-flight",
        "4",
        "--work",
        "0ms",
        "--record",
        record.to_str().unwrap(),
        "--plot",
        plot.to_str().unwrap(),
        "--json",
    ]);
    let out = Command::new(cairn_binary()).args(&args).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let scenario = &report["scenarios"][0];
    assert_eq!(scenario["name"], "sustained");
    assert!(scenario["count"].as_u64().unwrap() > 0, "{scenario}");
    assert!(
        scenario["goal"]["text"]
            .as_str()
            .unwrap()
            .starts_with("steady")
    );

    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&record)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["type"], "run", "{}", lines[0]);
    assert_eq!(lines[0]["depth"], 50);
    let samples: Vec<serde_json::Value> = lines
        .iter()
        .filter(|l| l["type"] == "sample")
        .map(|l| l["sample"].clone())
        .collect();
    assert_eq!(samples.len(), 3, "{lines:?}");
    for (i, sample) in samples.iter().enumerate() {
        let at = sample["at_s"].as_f64().unwrap();
        assert!((at - (i + 1) as f64).abs() < 0.5, "{sample}");
        // The producer keeps 50 ready, topping up 5 at a time at least.
        assert!(sample["depth"].as_u64().unwrap() <= 50, "{sample}");
    }
    let sum = |key: &str| -> u64 { samples.iter().map(|s| s[key].as_u64().unwrap()).sum() };
    // Every job started was enqueued first, and ran (a handler that does nothing).
    assert!(sum("claims") > 0, "{samples:?}");
    assert!(sum("enqueued") >= sum("claims"), "{samples:?}");
    assert!(sum("claims") >= sum("completed"), "{samples:?}");
    assert!(lines.iter().any(|l| l["type"] == "window"), "{lines:?}");
    let summary = lines.last().unwrap();
    assert_eq!(summary["type"], "summary");
    assert!(
        summary["steadiness"]["median_completions_per_s"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    let svg = std::fs::read_to_string(&plot).unwrap();
    assert!(
        svg.starts_with("<svg") && svg.contains("jobs per second"),
        "{svg}"
    );
    samples
}

/// `cairn bench --scenario sustained` samples a run as it goes, writes each sample as a JSON line, draws the run
/// and says how steady it was; on PostgreSQL each sample also reads the dead and live rows of the jobs table.
#[test]
fn bench_sustained_records_samples_and_draws_them() {
    let server = TestServer::spawn();
    let samples = check_sustained_run(&["--server", server.url()]);
    let storage = &samples.last().unwrap()["storage"];
    if server.is_postgres() {
        assert!(storage["jobs_live"].is_u64(), "{storage}");
        assert!(storage["jobs_dead"].is_u64(), "{storage}");
    } else {
        assert!(
            storage.is_null(),
            "a server's SQLite file is not the bench's to read"
        );
    }
}

/// The sustained scenario runs on an embedded queue too: on a SQLite file it reads the file's size; on a
/// PostgreSQL database of its own, the rows, and it refuses a database that already holds jobs.
#[test]
fn bench_sustained_runs_embedded_and_refuses_a_used_database() {
    if crate::harness::is_postgres_module(module_path!()) {
        let database = crate::harness::TestDatabase::new();
        let samples = check_sustained_run(&["--db", &database.url]);
        assert!(
            samples[0]["storage"]["jobs_live"].is_u64(),
            "{}",
            samples[0]
        );
        let out = Command::new(cairn_binary())
            .args(["bench", "--db", &database.url, "--scenario", "sustained"])
            .output()
            .unwrap();
        assert!(!out.status.success());
        assert!(
            stderr(&out).contains("--db:")
                && stderr(&out).contains("the bench needs a database of its own"),
            "{}",
            stderr(&out)
        );
    } else {
        let samples = check_sustained_run(&["--embedded"]);
        assert!(
            samples[0]["storage"]["bytes"].as_u64().unwrap() > 0,
            "{}",
            samples[0]
        );
    }
}

/// `cairn wait` answers when the job ends, over a real long-held request, and its exit code says how it ended:
/// 0 completed (with the result `cairn finish --result` gave, apart from the data), 8 failed or cancelled, 9 still
/// live when the wait ran out.
#[test]
fn wait_prints_the_job_once_it_ends_and_says_how_in_its_exit_code() {
    let server = TestServer::spawn();
    ok(&server.cairn(&["push", "render", "--data", r#"{"page": 1}"#], None));
    ok(&server.cairn(&["push", "breaks"], None));

    let timed_out = server.cairn(&["wait", "1", "--timeout", "100ms"], None);
    assert_eq!(timed_out.status.code(), Some(9), "{}", stderr(&timed_out));
    assert!(
        stdout(&timed_out).contains("state: queued"),
        "{}",
        stdout(&timed_out)
    );

    // A wait already under way when the job completes.
    let mut waiting = Command::new(cairn_binary());
    waiting
        .args(["wait", "1", "--timeout", "60s", "--json"])
        .env("CAIRN_SERVER", server.url())
        .env_remove("CAIRN_TOKEN")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let waiting = waiting.spawn().unwrap();
    let got = ok(&server.cairn(&["dequeue", "render", "--worker", "w1"], None));
    let token = lease_token(&got);
    let result = r#"{"pages": 12}"#;
    let finish = ["finish", "1", "--lease", &token, "--result", result];
    assert_eq!(ok(&server.cairn(&finish, None)), "job 1: completed\n");
    let out = waiting.wait_with_output().unwrap();
    let job: JobBody = ok_json(&out);
    assert_eq!(
        (job.state.as_str(), job.result, job.data),
        (
            "completed",
            Some(serde_json::json!({"pages": 12})),
            serde_json::json!({"page": 1})
        )
    );
    let shown = ok(&server.cairn(&["show", "1"], None));
    assert!(shown.contains(r#"result: {"pages":12}"#), "{shown}");

    let got = ok(&server.cairn(&["dequeue", "breaks", "--worker", "w1"], None));
    let token = lease_token(&got);
    let fail = [
        "fail",
        "2",
        "--lease",
        &token,
        "--group",
        "bad",
        "--message",
        "no page",
    ];
    ok(&server.cairn(&fail, None));
    let failed = server.cairn(&["wait", "2"], None);
    assert_eq!(failed.status.code(), Some(8), "{}", stderr(&failed));
    assert!(
        stdout(&failed).contains("error: no page"),
        "{}",
        stdout(&failed)
    );

    let missing = server.cairn(&["wait", "999", "--timeout", "1s"], None);
    assert_eq!(missing.status.code(), Some(3), "{}", stderr(&missing));
}

/// `cairn bulk` runs one action over a filter's jobs or the ids given, and says how many it did and skipped.
#[test]
fn bulk_acts_on_a_filter_or_ids_and_counts_what_it_did() {
    let server = TestServer::spawn();
    for _ in 0..5 {
        ok(&server.cairn(&["push", "send", "--queue", "mail"], None));
    }
    ok(&server.cairn(&["push", "render", "--queue", "pdf"], None));
    assert_eq!(
        ok(&server.cairn(&["bulk", "cancel", "--queue", "mail"], None)),
        "cancel: 5 of 5 jobs (0 skipped: gone, or in a state cancel does not apply to)\n"
    );
    let moved: cairn_api::BulkBody = ok_json(&server.cairn(
        &["bulk", "move", "--to", "later", "--ids", "1,2,6", "--json"],
        None,
    ));
    assert_eq!((moved.matched, moved.done, moved.skipped), (3, 3, 0));
    // The cancelled jobs moved (1 and 2) run again in their new queue; the other three are still cancelled.
    let retried = ok(&server.cairn(&["bulk", "retry", "--state", "cancelled"], None));
    assert!(retried.starts_with("retry: 3 of 3 jobs"), "{retried}");
    let page: JobPageBody = ok_json(&server.cairn(&["list", "--queue", "later", "--json"], None));
    assert_eq!(page.jobs.len(), 3);
    assert!(page.jobs.iter().all(|j| j.state == "queued"), "{page:?}");

    let everything = server.cairn(&["bulk", "delete"], None);
    assert_eq!(everything.status.code(), Some(2), "{}", stderr(&everything));
    assert!(
        stderr(&everything).contains("--all"),
        "{}",
        stderr(&everything)
    );
    let no_queue = server.cairn(&["bulk", "move", "--queue", "mail"], None);
    assert_eq!(no_queue.status.code(), Some(2), "{}", stderr(&no_queue));
    assert_eq!(
        ok(&server.cairn(&["bulk", "delete", "--all"], None)),
        "delete: 6 of 6 jobs (0 skipped: gone, or in a state delete does not apply to)\n"
    );
}

/// `cairn events` follows the stream without being told (`--follow` is accepted): each event as it is committed, a
/// line each, and `--after` resumes.
#[test]
fn events_follows_the_stream_and_prints_each_event_as_it_comes() {
    use std::io::BufRead;
    let server = TestServer::spawn();
    ok(&server.cairn(&["push", "first"], None));
    let mut follow = Command::new(cairn_binary())
        .args(["events", "--after", "0", "--kind", "added"])
        .env("CAIRN_SERVER", server.url())
        .env_remove("CAIRN_TOKEN")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(follow.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    assert!(
        first.contains("added") && first.contains("first"),
        "{first}"
    );
    ok(&server.cairn(&["push", "second"], None));
    let second = lines.next().unwrap().unwrap();
    assert!(
        second.contains("added") && second.contains("second"),
        "{second}"
    );
    follow.kill().unwrap();
    follow.wait().unwrap();
}
