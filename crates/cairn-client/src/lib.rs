//! The client for a Cairn server: [`Client`] runs every request that has a route ([`cairn::Runs`]), so it has the
//! calls of [`cairn::Jobs`] as the embedded [`cairn::Queue`] does, with the same types and errors, and implements
//! [`cairn::Backend`]: moving a worker from the embedded queue to a server is a change of one constructor:
//!
//! ```no_run
//! # async fn run() -> cairn::Result<()> {
//! use cairn::Worker;
//! use cairn_client::Client;
//!
//! let client = Client::new("http://127.0.0.1:6670")?; // was: cairn::Queue::open("jobs.db").await?
//! let worker = Worker::builder(&client, "worker-1")
//!     .handler("email.send", |job| async move { Ok(()) })
//!     .start()?;
//! # worker.stop(std::time::Duration::from_secs(30)).await?;
//! # Ok(())
//! # }
//! ```
//!
//! The JSON bodies of the HTTP API are [`cairn_api`], which the server shares.
//!
//! HTTPS is rustls on ring, through reqwest's `rustls-no-provider` feature. That feature applies to every reqwest
//! client of the program: one built without a TLS configuration of its own needs rustls's process-wide provider.
//! Building a [`Client`] installs ring as that provider unless the program installed one first;
//! [`install_ring_provider`] does it for a program that builds its own reqwest clients before any [`Client`].

#![warn(missing_docs)]

// The README's examples use both the engine and this client, so they are compiled here.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

mod client;
mod tls;

pub use cairn::{Jobs, Runs};
pub use cairn_api::Route;
pub use client::{Client, ClientEvents, install_ring_provider};
pub use tls::ClientTls;
