//! `cairn serve --token-file`: tokens with a name and a role, held by the server to each route's rule, through
//! the CLI's own commands. (The rule of every route for every role is tested beside the server, in
//! `crates/cairn-server/tests/it/http/access.rs`.)

use std::process::Output;

use super::harness::{TestServer, sha256};

/// The token file: a read token and a work token, by the SHA-256 of their secrets.
const TOKEN_FILE: &str = r#"
[[tokens]]
name = "dashboard"
role = "read"
# printf %s read-secret-0123456789 | sha256sum
secret_sha256 = "SHA_READ"

[[tokens]]
name = "mailer"
role = "work"
secret_sha256 = "SHA_WORK"
"#;

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn each_token_does_what_its_role_allows_and_is_told_what_it_may_not() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tokens.toml");
    let text = TOKEN_FILE
        .replace("SHA_READ", &sha256("read-secret-0123456789"))
        .replace("SHA_WORK", &sha256("work-secret-0123456789"));
    std::fs::write(&file, text).unwrap();
    let server = TestServer::spawn_with(&["--token-file", file.to_str().unwrap()]);

    // The worker's token pushes (a handler's follow-up jobs) and takes; the dashboard's reads.
    let work = ["--token", "work-secret-0123456789"];
    let read = ["--token", "read-secret-0123456789"];
    let pushed = server.cairn(&[&["push", "email.send"][..], &work].concat(), None);
    assert!(pushed.status.success(), "{}", stderr(&pushed));
    let listed = server.cairn(&[&["list"][..], &read].concat(), None);
    assert!(listed.status.success(), "{}", stderr(&listed));
    assert!(String::from_utf8_lossy(&listed.stdout).contains("email.send"));

    // What a role does not allow is refused for good (exit code 6), naming the token, its role and what is needed.
    let refused = server.cairn(&[&["push", "email.send"][..], &read].concat(), None);
    assert_eq!(refused.status.code(), Some(6), "{}", stderr(&refused));
    let message = stderr(&refused);
    assert!(
        message.contains("token \"dashboard\", whose role is read")
            && message.contains("enqueue, work, admin"),
        "{message}"
    );
    let refused = server.cairn(&[&["cancel", "1"][..], &work].concat(), None);
    assert_eq!(refused.status.code(), Some(6), "{}", stderr(&refused));

    // No token, or one the server does not know: refused, saying which.
    let anonymous = server.cairn(&["list"], None);
    assert_eq!(anonymous.status.code(), Some(6));
    assert!(
        stderr(&anonymous).contains("needs a bearer token"),
        "{}",
        stderr(&anonymous)
    );
    let unknown = server.cairn(&["list", "--token", "not-a-token-0123456789"], None);
    assert!(
        stderr(&unknown).contains("not one this server knows"),
        "{}",
        stderr(&unknown)
    );
}

#[test]
fn a_token_file_with_a_mistake_stops_the_server_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tokens.toml");
    std::fs::write(
        &file,
        "[[tokens]]\nname = \"ci\"\nrole = \"root\"\nsecret_sha256 = \"00\"\n",
    )
    .unwrap();
    let out = std::process::Command::new(super::harness::cairn_binary())
        .args(["serve", "--db", dir.path().join("c.db").to_str().unwrap()])
        .args([
            "--http",
            "127.0.0.1:0",
            "--bedrock",
            "off",
            "--token-file",
            file.to_str().unwrap(),
        ])
        .env_remove("CAIRN_TOKEN")
        .env_remove("CAIRN_CONFIG")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let message = stderr(&out);
    assert!(
        message.contains("tokens[0].role: must be read, enqueue, work or admin"),
        "{message}"
    );
}

#[test]
fn cairn_token_new_makes_a_token_and_the_entry_that_lets_it_in() {
    let dir = tempfile::tempdir().unwrap();
    let made = std::process::Command::new(super::harness::cairn_binary())
        .args(["token", "new", "nightly ci", "--role", "enqueue"])
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", stderr(&made));
    let entry = String::from_utf8(made.stdout.clone()).unwrap();
    assert!(
        entry.starts_with("[[tokens]]\nname = \"nightly ci\"\nrole = \"enqueue\"\n"),
        "{entry}"
    );
    let secret = stderr(&made).lines().last().unwrap().to_owned();
    assert_eq!(secret.len(), 64, "{}", stderr(&made));
    assert!(!entry.contains(&secret), "the file keeps only the digest");
    let file = dir.path().join("tokens.toml");
    std::fs::write(&file, &entry).unwrap();

    let server = TestServer::spawn_with(&["--token-file", file.to_str().unwrap()]);
    let pushed = server.cairn(&["push", "report.build", "--token", &secret], None);
    assert!(pushed.status.success(), "{}", stderr(&pushed));
    let refused = server.cairn(&["list", "--token", &secret], None);
    assert_eq!(refused.status.code(), Some(6), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("\"nightly ci\", whose role is enqueue"),
        "{}",
        stderr(&refused)
    );

    let bad = std::process::Command::new(super::harness::cairn_binary())
        .args(["token", "new", "ci", "--role", "root"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        stderr(&bad).contains("role: must be read, enqueue, work or admin"),
        "{}",
        stderr(&bad)
    );
}

#[test]
fn a_token_limited_to_some_queues_reaches_only_them() {
    let dir = tempfile::tempdir().unwrap();
    let made = std::process::Command::new(super::harness::cairn_binary())
        .args([
            "token", "new", "mailer", "--role", "work", "--queue", "mail",
        ])
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", stderr(&made));
    let entry = String::from_utf8(made.stdout.clone()).unwrap();
    assert!(entry.contains("queues = [\"mail\"]\n"), "{entry}");
    assert!(
        stderr(&made).contains("limited to queues mail"),
        "{}",
        stderr(&made)
    );
    let secret = stderr(&made).lines().last().unwrap().to_owned();
    let file = dir.path().join("tokens.toml");
    std::fs::write(&file, &entry).unwrap();
    let server = TestServer::spawn_with(&["--token-file", file.to_str().unwrap()]);
    let token = ["--token", secret.as_str()];

    let pushed = server.cairn(
        &[&["push", "email.send", "--queue", "mail"][..], &token].concat(),
        None,
    );
    assert!(pushed.status.success(), "{}", stderr(&pushed));
    let id = String::from_utf8_lossy(&pushed.stdout).trim().to_owned();
    let taken = server.cairn(
        &[&["dequeue", "*", "--queue", "mail"][..], &token].concat(),
        None,
    );
    assert!(taken.status.success(), "{}", stderr(&taken));
    let shown = server.cairn(&[&["show", id.as_str()][..], &token].concat(), None);
    assert!(shown.status.success(), "{}", stderr(&shown));

    // Another queue, or the default one: refused for good, saying why.
    for args in [
        &["push", "invoice.send", "--queue", "billing"][..],
        &["push", "invoice.send"][..],
        &["dequeue", "*", "--queue", "mail", "--queue", "billing"][..],
    ] {
        let refused = server.cairn(&[args, &token].concat(), None);
        assert_eq!(
            refused.status.code(),
            Some(6),
            "{args:?}: {}",
            stderr(&refused)
        );
        assert!(
            stderr(&refused).contains("token \"mailer\", which is limited to queues mail"),
            "{args:?}: {}",
            stderr(&refused)
        );
    }

    let bad = std::process::Command::new(super::harness::cairn_binary())
        .args([
            "token", "new", "ci", "--role", "work", "--queue", "mail", "--queue", "",
        ])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        stderr(&bad).contains("queue[1]: must not be empty"),
        "{}",
        stderr(&bad)
    );
}
