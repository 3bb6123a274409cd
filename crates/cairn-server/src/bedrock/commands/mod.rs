//! The Bedrock::Jobs commands over the engine: [`BedrockCommands`] reads a request's headers, runs the checks of
//! reference §5 in Bedrock's order with Bedrock's status lines, calls the engine, and answers as Bedrock does.
//!
//! Bedrock's model is translated at this edge, so that a Bedrock client sees Bedrock behaviour:
//! - Bedrock jobs live in Cairn's `default` queue; priorities are Cairn's plus 500 (Bedrock's default 500 is
//!   Cairn's default 0).
//! - Bedrock has no leases: the jobs a GetJob hands out are leased for a day, and the lease is kept here, by job,
//!   so that FinishJob, RetryJob and FailJob can name the job alone. Jobs created here never run out of attempts.
//! - A finished job that Bedrock would delete is `completed` in Cairn (its history is kept); to a Bedrock client
//!   it is gone.
//!
//! `values` holds the header checks and the translations; one file per group of commands does the rest, and
//! `query` answers the DB plugin's `Query` over Bedrock's view of the jobs.

mod create;
mod get;
mod lifecycle;
mod manage;
mod query;
mod values;

use cairn::Jobs;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;

use cairn::{JobId, Lease, Queue};

use crate::bedrock::connection::{Commands, Signals};
use crate::bedrock::frame::{Request, Response};

/// The Jobs commands, over one queue.
pub struct BedrockCommands {
    queue: Queue,
    /// The leases of the jobs handed out by GetJob(s) and not yet finished, retried, failed or given back.
    leases: Mutex<HashMap<JobId, Lease>>,
    /// Held by a unique CreateJob from its lookup to its write.
    unique: tokio::sync::Mutex<()>,
}

impl BedrockCommands {
    /// The commands over `queue`.
    pub fn new(queue: Queue) -> Self {
        BedrockCommands {
            queue,
            leases: Mutex::new(HashMap::new()),
            unique: tokio::sync::Mutex::new(()),
        }
    }

    fn remember(&self, lease: Lease) {
        self.leases
            .lock()
            .expect("the lease map is never poisoned")
            .insert(lease.job, lease);
    }

    /// The lease this layer holds on a running job: from memory, or, after a restart (the server keeps leases
    /// across restarts), from the engine when the job is held by this layer's worker.
    async fn lease_of(&self, job: JobId) -> Option<Lease> {
        let known = self
            .leases
            .lock()
            .expect("the lease map is never poisoned")
            .get(&job)
            .cloned();
        if known.is_some() {
            return known;
        }
        let lease = self.queue.lease(job).await.ok().flatten()?;
        if lease.worker.as_str() != get::WORKER {
            // Taken through another door (the HTTP API): not this layer's to end.
            return None;
        }
        self.remember(lease.clone());
        Some(lease)
    }

    fn forget(&self, job: JobId) {
        self.leases
            .lock()
            .expect("the lease map is never poisoned")
            .remove(&job);
    }

    async fn dispatch(&self, request: Request, signals: &Signals) -> Response {
        let verb = request.verb.to_ascii_lowercase();
        if request
            .headers
            .get("connection")
            .is_some_and(|c| c.eq_ignore_ascii_case("forget"))
        {
            // Nobody will read the answer. A GetJob would take jobs only to give them back (Bedrock requeues
            // them), so it takes none; anything else runs, and its outcome is dropped.
            if !matches!(verb.as_str(), "getjob" | "getjobs") {
                let _ = self.dispatch_verb(&verb, &request, signals).await;
            }
            // The connection closes after this answer (see `connection::wants_close`).
            return Response::status("202 Successfully queued");
        }
        self.dispatch_verb(&verb, &request, signals).await
    }

    async fn dispatch_verb(&self, verb: &str, request: &Request, signals: &Signals) -> Response {
        let result = match verb {
            "createjob" => self.create_job(&request.headers).await,
            "createjobs" => self.create_jobs(&request.headers).await,
            "getjob" => self.get_jobs(&request.headers, false, signals).await,
            "getjobs" => self.get_jobs(&request.headers, true, signals).await,
            "queryjob" => self.query_job(&request.headers).await,
            "updatejob" => self.update_job(&request.headers).await,
            "finishjob" => self.finish_job(&request.headers).await,
            "retryjob" => self.retry_job(&request.headers).await,
            "failjob" => self.fail_job(&request.headers).await,
            "canceljob" => self.cancel_job(&request.headers).await,
            "deletejob" => self.delete_job(&request.headers).await,
            "requeuejobs" => self.requeue_jobs(&request.headers).await,
            // Bedrock's liveness check (Bedrock-PHP's `Status::ping`).
            "ping" => Ok(Response::status("200 OK")),
            // The DB plugin's read of Bedrock's table: `Query: …sql…` on the method line, or `Query` and a header.
            v if v == "query" || v.starts_with("query:") => self.query(request).await,
            _ => Err(Response::status("430 Unrecognized command")),
        };
        result.unwrap_or_else(|error| error)
    }
}

impl Commands for BedrockCommands {
    fn run<'a>(
        &'a self,
        request: Request,
        signals: &'a Signals,
    ) -> Pin<Box<dyn Future<Output = Response> + Send + 'a>> {
        Box::pin(self.dispatch(request, signals))
    }

    fn undelivered(&self, response: &Response) {
        // A GetJob whose answer never reached its client gives its jobs back at once (reference §7.7).
        for job in &response.handed_out {
            let held = self
                .leases
                .lock()
                .expect("the lease map is never poisoned")
                .remove(job);
            if let Some(lease) = held {
                let queue = self.queue.clone();
                tokio::spawn(async move {
                    if let Err(e) = queue.release(&lease).await {
                        tracing::warn!(job = %lease.job, error = %e, "could not give back an undelivered job");
                    }
                });
            }
        }
    }
}

/// What a command answers: a response, or an error status (also a response).
type Answer = Result<Response, Response>;
