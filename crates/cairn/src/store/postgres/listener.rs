//! What a node hears from the others: a session that `LISTEN`s on the ready, settings, ended and due channels and passes each
//! notification to the writer, so that a job enqueued on one node wakes a worker waiting on another at once,
//! without polling the database. It speaks in [`Notice`]s; the writer's channel turns them into its own commands.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::time::Duration;

use crate::error::Error;
use crate::store::postgres::hosts::Hosts;
use crate::store::postgres::notify::{
    DUE_CHANNEL, JOB_ENDED_CHANNEL, READY_CHANNEL, SETTINGS_CHANNEL,
};
use crate::store::postgres::session::{CALL_TIMEOUT, Opening, Session};

/// How often the listener looks whether the queue closed, or the primary moved, while nothing arrives.
const STOP_CHECK: Duration = Duration::from_millis(250);

/// The longest wait before connecting again after the listening session broke: short, because until it listens
/// again, workers parked on this node wait out their long polls for jobs pushed on another.
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// What the listener tells the writer.
pub(crate) enum Notice {
    /// Another node made jobs ready in these queues.
    Ready(Vec<String>),
    /// Another node changed a queue's settings or an option: load them again.
    SettingsChanged,
    /// Another node ended these jobs, which a wait on some node waits for.
    JobsEnded(Vec<i64>),
    /// Another node wrote something due at this time (milliseconds), for the leader of the timed work.
    Due(i64),
    /// Notifications may have been missed (at start, or while the listening session was down): look at every
    /// queue again.
    MayHaveMissed,
}

/// Starts the listener thread of node `node`, which sends what it hears to `writer`. It stops once `stop` is set
/// or the writer is gone.
pub(crate) fn start<C: From<Notice> + Send + 'static>(
    hosts: Arc<Hosts>,
    node: String,
    writer: Sender<C>,
    stop: Arc<AtomicBool>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("cairn-listener".into())
        .spawn(move || listen(&hosts, &node, &writer, &stop))
}

fn listen<C: From<Notice>>(hosts: &Arc<Hosts>, node: &str, writer: &Sender<C>, stop: &AtomicBool) {
    let mut backoff = Duration::from_millis(100);
    while !stop.load(Ordering::SeqCst) {
        let (heard, mut hearing) = tokio::sync::mpsc::unbounded_channel();
        let opening = Opening {
            role: "cairn listener",
            extra: "",
            notifications: Some(heard),
            call_timeout: CALL_TIMEOUT,
            stop: Some(stop),
            writes: true,
        };
        let listening = Session::open_with(hosts, opening).and_then(|session| {
            let channels = format!(
                "LISTEN {READY_CHANNEL}; LISTEN {SETTINGS_CHANNEL}; LISTEN {JOB_ENDED_CHANNEL}; \
                 LISTEN {DUE_CHANNEL}"
            );
            session.call(session.client().batch_execute(&channels), |e| {
                Error::storage("listening for other nodes", e)
            })?;
            Ok(session)
        });
        let session = match listening {
            Ok(session) => session,
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for other nodes; trying again");
                std::thread::sleep(backoff);
                backoff = (backoff * 2).min(MAX_BACKOFF);
                continue;
            }
        };
        backoff = Duration::from_millis(100);
        // Whatever was said before this session listened is lost: while it was down, and at start, between the
        // queue loading its settings and the LISTEN. Look at everything again, now that nothing more can be missed.
        let sent = writer.send(Notice::SettingsChanged.into()).is_ok()
            && writer.send(Notice::MayHaveMissed.into()).is_ok();
        if !sent {
            return;
        }
        loop {
            if stop.load(Ordering::SeqCst) {
                return;
            }
            // A session on a server that is no longer the primary hears nothing the other nodes say: another
            // session of this node found the primary moved (or the link silent), and this one follows.
            if session.is_broken() {
                tracing::warn!("the session listening for other nodes broke; connecting again");
                break;
            }
            let Some(next) = session.wait_for(STOP_CHECK, hearing.recv()) else {
                continue;
            };
            let Some(n) = next else {
                // The connection ended, and with it its sender.
                tracing::warn!("the session listening for other nodes ended; connecting again");
                break;
            };
            if let Some(notice) = notice_for(n.channel(), n.payload(), node)
                && writer.send(notice.into()).is_err()
            {
                return;
            }
        }
    }
}

/// What a notification asks of this node's writer; nothing for its own.
fn notice_for(channel: &str, payload: &str, node: &str) -> Option<Notice> {
    if channel == JOB_ENDED_CHANNEL {
        // This node's own too: its waits are woken by the writer after its commits, but a wait registered in the
        // same batch as the end reads the job again at no cost.
        let jobs = payload
            .split(',')
            .filter_map(|id| id.parse().ok())
            .collect();
        return Some(Notice::JobsEnded(jobs));
    }
    let mut lines = payload.split('\n');
    if lines.next() == Some(node) {
        return None;
    }
    match channel {
        READY_CHANNEL => Some(Notice::Ready(lines.map(str::to_owned).collect())),
        SETTINGS_CHANNEL => Some(Notice::SettingsChanged),
        DUE_CHANNEL => lines.next()?.parse().ok().map(Notice::Due),
        _ => None,
    }
}
