//! The Bedrock::Jobs text protocol (issue 5), so that clients written for Bedrock work against Cairn unchanged.
//!
//! Built so far: `frame` (reading requests and writing responses, reference §1.2–1.3) and `escape` (the
//! backslash escaping of header values). Next: the commands of §5 over the engine, the listener behind
//! `cairn serve --bedrock ADDR`, real blocking for `Connection: wait`, and `docs/bedrock.md`.

pub mod escape;
pub mod frame;
