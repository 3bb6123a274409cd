//! Integration tests through the public API, one module per area. One binary, so it links once.

mod harness;

mod claim;
mod enqueue;
mod leases;
mod lifecycle;
mod storage;
mod worker;
