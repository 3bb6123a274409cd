//! The tokens a server answers, each with a name and a [`Role`]: `--token` (the admin token) and the tokens of
//! `--token-file`, a TOML file that holds each token's SHA-256 rather than the token, so that the file is no secret:
//!
//! ```toml
//! [[tokens]]
//! name = "dashboard"
//! role = "read"
//! secret_sha256 = "…"   # printf %s "$SECRET" | sha256sum
//!
//! [[tokens]]
//! name = "mailer"
//! role = "work"
//! queues = ["mail", "mail.bulk"]   # only these queues, and their jobs
//! secret_sha256 = "…"
//! ```
//!
//! A token is looked up by the digest of what a request presents.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use cairn_api::Role;
use serde::Deserialize;

/// Who a token is: its name (what the log and the audit trail say) and its role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credential {
    /// The token's name in the token file (`token` for `--token`).
    pub name: String,
    /// What it may do.
    pub role: Role,
    /// The only queues it may reach (and their jobs and batches), if it is limited to some; see `reach.rs`.
    pub queues: Option<Arc<BTreeSet<String>>>,
}

impl Credential {
    /// A token of `role`, named `name`, that may reach every queue.
    pub fn new(name: impl Into<String>, role: Role) -> Credential {
        Credential {
            name: name.into(),
            role,
            queues: None,
        }
    }

    /// The same token, limited to `queues`.
    #[must_use]
    pub fn limited_to<'a>(self, queues: impl IntoIterator<Item = &'a str>) -> Credential {
        Credential {
            queues: Some(Arc::new(queues.into_iter().map(str::to_owned).collect())),
            ..self
        }
    }
}

/// The most queues one token may be limited to.
pub const MAX_TOKEN_QUEUES: usize = 1000;

/// The tokens a server answers. Empty: the server takes no token, and every request may do everything (a server
/// on loopback, or `--insecure`).
#[derive(Debug, Clone, Default)]
pub struct Credentials {
    by_digest: HashMap<[u8; 32], Credential>,
}

/// The longest a token file may be: far more than any list of tokens, and a bound for what is read.
pub const MAX_TOKEN_FILE_BYTES: usize = 1024 * 1024;

/// The file's shape: `[[tokens]]` tables.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenFile {
    #[serde(default)]
    tokens: Vec<TokenEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenEntry {
    name: String,
    role: String,
    secret_sha256: String,
    queues: Option<Vec<String>>,
}

impl Credentials {
    /// No token: every request may do everything.
    pub fn none() -> Credentials {
        Credentials::default()
    }

    /// Whether the server takes no token.
    pub fn is_empty(&self) -> bool {
        self.by_digest.is_empty()
    }

    /// Adds the token `secret` as `credential` (`--token`, with its name and role).
    ///
    /// # Errors
    /// A message when a token of the same secret is known already, under another name.
    pub fn add_secret(&mut self, secret: &str, credential: Credential) -> Result<(), String> {
        self.add(digest(secret), credential)
    }

    fn add(&mut self, digest: [u8; 32], credential: Credential) -> Result<(), String> {
        if let Some(known) = self.by_digest.get(&digest) {
            return Err(format!(
                "tokens {:?} and {:?} have the same secret: give each its own",
                known.name, credential.name
            ));
        }
        self.by_digest.insert(digest, credential);
        Ok(())
    }

    /// The credentials of a token file's text.
    ///
    /// # Errors
    /// A message naming the entry and field at fault (`tokens[1].role: …`), or the TOML's own error with its line.
    pub fn parse_file(text: &str) -> Result<Credentials, String> {
        if text.len() > MAX_TOKEN_FILE_BYTES {
            return Err(format!(
                "is {} bytes; a token file holds at most {MAX_TOKEN_FILE_BYTES}",
                text.len()
            ));
        }
        let file: TokenFile = toml::from_str(text).map_err(|e| e.to_string())?;
        let mut credentials = Credentials::default();
        let mut names = std::collections::HashSet::new();
        for (i, entry) in file.tokens.into_iter().enumerate() {
            let at = |field: &str| format!("tokens[{i}].{field}");
            let name = entry.name.trim();
            if name.is_empty() || name.len() > 128 || name.chars().any(char::is_control) {
                return Err(format!(
                    "{}: must be 1 to 128 characters without control characters",
                    at("name")
                ));
            }
            if !names.insert(name.to_owned()) {
                return Err(format!(
                    "{}: {name:?} names another token too; names must differ",
                    at("name")
                ));
            }
            let role = Role::parse(&entry.role).ok_or_else(|| {
                format!(
                    "{}: must be read, enqueue, work or admin, got {:?}",
                    at("role"),
                    entry.role
                )
            })?;
            let queues = entry
                .queues
                .map(|queues| token_queues(queues).map_err(|e| format!("{}{e}", at("queues"))))
                .transpose()?;
            let digest = parse_digest(&entry.secret_sha256).ok_or_else(|| {
                format!(
                    "{}: must be the token's SHA-256 as 64 hexadecimal digits (printf %s \"$SECRET\" | sha256sum)",
                    at("secret_sha256")
                )
            })?;
            credentials
                .add(
                    digest,
                    Credential {
                        name: name.to_owned(),
                        role,
                        queues,
                    },
                )
                .map_err(|e| format!("{}: {e}", at("secret_sha256")))?;
        }
        Ok(credentials)
    }

    /// The credential of the token `secret`, if the server knows it.
    pub fn find(&self, secret: &str) -> Option<&Credential> {
        self.by_digest.get(&digest(secret))
    }

    /// Every known credential, for messages and tests.
    pub fn iter(&self) -> impl Iterator<Item = &Credential> {
        self.by_digest.values()
    }
}

/// A token's `queues`, each a valid queue name: at least one (a token of no queue could do nothing; leave
/// `queues` out for every queue), at most [`MAX_TOKEN_QUEUES`].
fn token_queues(queues: Vec<String>) -> Result<Arc<BTreeSet<String>>, String> {
    if queues.is_empty() || queues.len() > MAX_TOKEN_QUEUES {
        return Err(format!(
            ": must list 1 to {MAX_TOKEN_QUEUES} queues, got {} (leave queues out for a token of every queue)",
            queues.len()
        ));
    }
    for (i, queue) in queues.iter().enumerate() {
        cairn::QueueName::parse(queue.as_str()).map_err(|e| {
            // The rule, without the engine's own name for the field (`queue: `).
            let message = e.message();
            let rule = e
                .field()
                .and_then(|field| message.strip_prefix(field)?.strip_prefix(": "))
                .unwrap_or(message);
            format!("[{i}]: {rule}")
        })?;
    }
    Ok(Arc::new(queues.into_iter().collect()))
}

/// A new token: 32 random bytes from the operating system, as 64 hexadecimal digits (visible ASCII, as a header
/// carries it).
///
/// # Errors
/// A message when the system's random source fails.
pub fn new_secret() -> Result<String, String> {
    use ring::rand::SecureRandom;
    let mut bytes = [0u8; 32];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| "the system's random source failed".to_owned())?;
    Ok(to_hex(&bytes))
}

/// A token file's entry for the token `secret`, named `name`, of role `role`, limited to `queues` unless none are
/// given: a `[[tokens]]` table holding its SHA-256, checked as the server reads the file.
///
/// # Errors
/// The file's own message for a name or queue it would refuse (`tokens[0].name: …`, `tokens[0].queues[1]: …`).
pub fn entry(name: &str, role: Role, queues: &[String], secret: &str) -> Result<String, String> {
    let digest = to_hex(&digest(secret));
    let name = toml_string(name);
    let mut entry = format!("[[tokens]]\nname = {name}\nrole = \"{role}\"\n");
    if !queues.is_empty() {
        let queues: Vec<String> = queues.iter().map(|queue| toml_string(queue)).collect();
        entry.push_str(&format!("queues = [{}]\n", queues.join(", ")));
    }
    entry.push_str(&format!("secret_sha256 = \"{digest}\"\n"));
    Credentials::parse_file(&entry)?;
    Ok(entry)
}

/// `text` as a TOML basic string: quotes and backslashes escaped, control characters as \uXXXX (which the file
/// refuses in a name, and the queue rules in a queue).
fn toml_string(text: &str) -> String {
    let mut quoted = String::from("\"");
    for c in text.chars() {
        match c {
            '"' | '\\' => {
                quoted.push('\\');
                quoted.push(c);
            }
            c if c.is_control() => quoted.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    quoted
}

/// `bytes` as lowercase hexadecimal digits, as `sha256sum` writes a digest.
fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The SHA-256 of `secret`.
fn digest(secret: &str) -> [u8; 32] {
    let digest = ring::digest::digest(&ring::digest::SHA256, secret.as_bytes());
    digest.as_ref().try_into().expect("SHA-256 is 32 bytes")
}

/// 64 hexadecimal digits (either case) as 32 bytes.
fn parse_digest(hex: &str) -> Option<[u8; 32]> {
    let hex = hex.trim();
    if hex.len() != 64 || !hex.is_ascii() {
        return None;
    }
    let mut bytes = [0u8; 32];
    for (i, byte) in bytes.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `printf %s secret-of-the-dashboard | sha256sum`.
    const DASHBOARD: &str = "a47a2a39d7b9a4cba4fd9b6f2e0bae60e30e7bc8a6a0d0e1eb8ed5d7d5a7a5d1";

    fn hex(secret: &str) -> String {
        to_hex(&digest(secret))
    }

    #[test]
    fn a_token_file_names_each_token_its_role_and_digest() {
        let text = format!(
            "[[tokens]]\nname = \"dashboard\"\nrole = \"read\"\nsecret_sha256 = \"{}\"\n\n\
             [[tokens]]\nname = \"ci\"\nrole = \"enqueue\"\nsecret_sha256 = \"{}\"\n",
            hex("secret-of-the-dashboard"),
            hex("secret-of-ci").to_uppercase(),
        );
        let credentials = Credentials::parse_file(&text).unwrap();
        let found = credentials.find("secret-of-the-dashboard").unwrap();
        assert_eq!((found.name.as_str(), found.role), ("dashboard", Role::Read));
        assert_eq!(
            credentials.find("secret-of-ci").unwrap().role,
            Role::Enqueue
        );
        assert!(credentials.find("secret-of-th").is_none());
        assert!(Credentials::parse_file("").unwrap().is_empty());
    }

    #[test]
    fn a_bad_entry_is_named_with_its_field() {
        let entry = |name: &str, role: &str, digest: &str| {
            format!(
                "[[tokens]]\nname = \"{name}\"\nrole = \"{role}\"\nsecret_sha256 = \"{digest}\"\n"
            )
        };
        let good = hex("one");
        for (text, starts) in [
            (
                entry("a", "root", &good),
                "tokens[0].role: must be read, enqueue, work or admin",
            ),
            (entry("", "read", &good), "tokens[0].name"),
            (
                entry("a", "read", "abc"),
                "tokens[0].secret_sha256: must be the token's SHA-256",
            ),
            (
                entry("a", "read", &DASHBOARD.replace('a', "g")),
                "tokens[0].secret_sha256",
            ),
            (
                entry("a", "read", &good) + &entry("a", "work", &hex("two")),
                "tokens[1].name: \"a\" names another token",
            ),
            (
                entry("a", "read", &good) + &entry("b", "work", &good),
                "tokens[1].secret_sha256: tokens \"a\" and \"b\" have the same secret",
            ),
            (
                entry("a", "read", &good) + "queues = []\n",
                "tokens[0].queues: must list 1 to 1000 queues, got 0",
            ),
            (
                entry("a", "read", &good) + "queues = [\"mail\", \"\"]\n",
                "tokens[0].queues[1]: must not be empty",
            ),
        ] {
            let e = Credentials::parse_file(&text).unwrap_err();
            assert!(e.starts_with(starts), "{text}: {e}");
        }
        let e = Credentials::parse_file("[[tokens]]\nname = \"a\"\nrol = \"read\"\n").unwrap_err();
        assert!(e.contains("rol"), "{e}");
    }

    #[test]
    fn a_token_may_be_limited_to_some_queues() {
        let secret = new_secret().unwrap();
        let queues = ["mail".to_owned(), "mail.bulk".to_owned()];
        let text = entry("mailer", Role::Work, &queues, &secret).unwrap();
        assert!(
            text.contains("queues = [\"mail\", \"mail.bulk\"]\n"),
            "{text}"
        );
        let credentials = Credentials::parse_file(&text).unwrap();
        let found = credentials.find(&secret).unwrap();
        assert_eq!(
            found,
            &Credential::new("mailer", Role::Work).limited_to(["mail.bulk", "mail"])
        );
        let e = entry("mailer", Role::Work, &["bad queue".to_owned()], &secret).unwrap_err();
        assert!(e.starts_with("tokens[0].queues[0]: "), "{e}");
    }

    #[test]
    fn a_new_token_makes_an_entry_the_file_reads_back() {
        let secret = new_secret().unwrap();
        assert_eq!(secret.len(), 64);
        assert_ne!(secret, new_secret().unwrap());
        let text = entry("ci \"nightly\" \\ eu", Role::Enqueue, &[], &secret).unwrap();
        let credentials = Credentials::parse_file(&text).unwrap();
        let found = credentials.find(&secret).unwrap();
        assert_eq!(
            (found.name.as_str(), found.role),
            ("ci \"nightly\" \\ eu", Role::Enqueue)
        );
        assert!(
            entry("", Role::Read, &[], &secret)
                .unwrap_err()
                .starts_with("tokens[0].name")
        );
    }

    #[test]
    fn the_admin_token_joins_the_file_unless_it_repeats_a_secret() {
        let mut credentials = Credentials::none();
        let admin = Credential::new("token", Role::Admin);
        credentials
            .add_secret("0123456789abcdef", admin.clone())
            .unwrap();
        assert_eq!(credentials.find("0123456789abcdef"), Some(&admin));
        assert!(credentials.add_secret("0123456789abcdef", admin).is_err());
    }
}
