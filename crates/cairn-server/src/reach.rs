//! Tokens limited to some queues (`queues` in a token file): a request of such a token may name only those queues,
//! and jobs and batches in them. A route that reaches the whole server is refused outright (`auth::allow`, from its
//! declared [`Reach`](cairn_api::Reach)); one that reaches the queues it names is held here to what its path names,
//! before its body is read, and then to what its body names. Jobs and batches are looked up on a reader: only
//! requests of limited tokens pay for it.

use std::collections::BTreeSet;

use axum::http::Method;
use cairn::QueuesOf;
use cairn_api::Named;

use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;

/// Holds `caller` to the queues it is limited to, if it is, for a request (`method`, `path`) that names `named`.
///
/// # Errors
/// [`ApiError`] 403 naming the queue, job or batch out of its reach; the lookup's own error if the database
/// cannot be read.
pub async fn hold(
    state: &AppState,
    caller: Option<&Caller>,
    named: Named,
    method: &Method,
    path: &str,
) -> Result<(), ApiError> {
    let Some((caller, queues)) = caller.and_then(|c| c.queues.as_ref().map(|queues| (c, queues)))
    else {
        return Ok(());
    };
    let refuse = |why: String| limited(caller, queues, method, path, &why);
    if named.every_queue {
        return Err(refuse(
            "it names no queue, so it reaches every one".to_owned(),
        ));
    }
    if let Some(queue) = named.queues.iter().find(|q| !queues.contains(*q)) {
        return Err(refuse(format!("it names queue {queue:?}")));
    }
    if named.jobs.is_empty() && named.batch.is_none() {
        return Ok(());
    }
    let found = state
        .queue
        .run(QueuesOf {
            jobs: named.jobs,
            batch: named.batch,
        })
        .await?;
    if let Some((job, _)) = found.jobs.iter().find(|(_, q)| !queues.contains(q)) {
        return Err(refuse(format!("job {job} is in another queue")));
    }
    if let (Some(batch), true) = (named.batch, !found.batch.is_subset(queues)) {
        return Err(refuse(format!("batch {batch} has jobs in other queues")));
    }
    Ok(())
}

/// The refusal of a request (`method`, `path`) to `caller`, which is limited to `queues`, and `why` it reaches
/// beyond them. The queues of jobs it may not reach are not named.
pub fn limited(
    caller: &Caller,
    queues: &BTreeSet<String>,
    method: &Method,
    path: &str,
    why: &str,
) -> ApiError {
    let mut listed: Vec<&str> = queues.iter().map(String::as_str).take(10).collect();
    if queues.len() > listed.len() {
        listed.push("…");
    }
    ApiError::forbidden(&format!(
        "{method} {path} to token {:?}, which is limited to queues {}: {why}",
        caller.name,
        listed.join(", ")
    ))
}
