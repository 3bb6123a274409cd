//! Integration tests of the server crate: the Bedrock text protocol over real TCP on loopback, on a real SQLite
//! file.

mod bedrock;
