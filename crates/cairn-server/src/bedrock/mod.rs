//! The Bedrock::Jobs text protocol (issue 5), so that clients written for Bedrock work against Cairn unchanged.
//!
//! Built so far: `frame` (reading requests and writing responses, reference §1.2–1.3), `escape` (the backslash
//! escaping of header values) and `connection` (the listener: pipelining, `Connection: close`, limits, slow and
//! vanishing clients, shutdown), all tested over real TCP with a stand-in for the commands. Next: the commands of
//! §5 over the engine (`Commands`), `cairn serve --bedrock ADDR`, real blocking for `Connection: wait`, and
//! `docs/bedrock.md`.

pub mod connection;
pub mod escape;
pub mod frame;
