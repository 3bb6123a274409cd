//! A failover of PostgreSQL under two `cairn serve` nodes: a primary with a synchronous hot standby on loopback
//! (`scripts/postgres standby`), both nodes given a URL that names both hosts, producers and workers on both nodes
//! throughout. Four faults, one test each:
//! - the primary killed, and the standby promoted 3 s later;
//! - the primary turned read-only with its sessions left open (as a managed database's switchover does), and the
//!   standby promoted;
//! - the primary's host gone silent (a proxy in front of it black-holes every byte, nothing closes), and the
//!   standby promoted 4 s later;
//! - the standby lost: writes wait or fail with a status that says to try again, and none is acknowledged until
//!   the standby is back.
//!
//! In each: no request gets anything but success or 503; each node serves pushes and dequeues again within 5 s of
//! the promotion; nothing acknowledged is lost and nothing finished twice; and on the new primary a delayed job
//! comes due, an abandoned lease expires, and a job pushed on one node wakes a worker waiting on the other.

use cairn::Jobs;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn::__private::PrivateCluster;
use cairn::{Dequeue, ErrorKind, Push, RetryPolicy};
use cairn_client::Client;

use crate::harness::{TestServer, eventually, poll, until_waiting};
use crate::load::{
    Load, all_jobs_with_history, assert_never_held_twice, assert_nothing_lost, drain,
};

#[path = "../../../cairn/tests/it/proxy.rs"]
mod proxy;

use proxy::Proxy;

/// The jobs' leases: long enough that a finish delayed by the failover still holds its lease.
const LEASE: Duration = Duration::from_secs(10);

/// How soon after the promotion each node must serve again.
const SERVING_WITHIN: Duration = Duration::from_secs(5);

/// A primary and its synchronous standby, and the URL the nodes are given: both hosts, the primary first (through
/// `proxy` when there is one).
struct Pair {
    primary: Arc<PrivateCluster>,
    standby: Arc<PrivateCluster>,
    url: String,
    proxy: Option<Proxy>,
}

impl Pair {
    async fn start(through_proxy: bool) -> Pair {
        let (primary, standby) = tokio::task::spawn_blocking(|| {
            let primary = PrivateCluster::start();
            let standby = primary.standby();
            (primary, standby)
        })
        .await
        .unwrap();
        let proxy = through_proxy.then(|| Proxy::start(primary.address()));
        let first: SocketAddr = proxy.as_ref().map_or(primary.address(), |p| p.addr);
        let url = format!("postgres://cairn@{first},{}/cairn", standby.address());
        Pair {
            primary: Arc::new(primary),
            standby: Arc::new(standby),
            url,
            proxy,
        }
    }

    /// Promotes the standby once the fault has lasted `outage`; returns when it takes writes.
    async fn promote_after(&self, outage: Duration) -> Instant {
        // Real time: a trial's fault lasts so long before anyone promotes the standby (3 s for the primary killed,
        // 4 s for its host gone silent), the nodes failing against it meanwhile (their calls to a silent host
        // running into their deadlines), as in production.
        tokio::time::sleep(outage).await;
        self.promote().await
    }

    /// Promotes the standby; returns when it takes writes.
    async fn promote(&self) -> Instant {
        let standby = self.standby.clone();
        tokio::task::spawn_blocking(move || standby.promote())
            .await
            .unwrap();
        Instant::now()
    }
}

/// Runs each of `statements` on the server at `url`, outside Cairn.
async fn admin(url: &str, statements: &'static [&'static str]) {
    let url = url.to_owned();
    tokio::task::spawn_blocking(move || {
        let mut client = cairn::postgres::Client::connect(&url, cairn::postgres::NoTls).unwrap();
        for statement in statements {
            client.batch_execute(statement).unwrap();
        }
    })
    .await
    .unwrap();
}

/// Two nodes on the pair, with producers and workers on each.
fn nodes_under_load(pair: &Pair) -> (Vec<TestServer>, Vec<Client>, Load) {
    let nodes: Vec<TestServer> = (0..2)
        .map(|_| TestServer::spawn_on_postgres(&pair.url, &[]))
        .collect();
    let clients: Vec<Client> = nodes.iter().map(TestServer::client).collect();
    let mut load = Load::new();
    for (i, client) in clients.iter().enumerate() {
        load.producer(client.clone(), i as u64, LEASE);
        for w in 0..2 {
            load.consumer_across_failover(client.clone(), format!("n{i}-w{w}"), LEASE);
        }
    }
    (nodes, clients, load)
}

/// How long after `from` each node first served a push and a dequeue, trying again and again; any answer but
/// success or 503 fails the test.
async fn serving_again(clients: &[Client], from: Instant) -> Vec<Duration> {
    let mut took = Vec::new();
    for (i, client) in clients.iter().enumerate() {
        let give_up = Duration::from_secs(60).saturating_sub(from.elapsed());
        let served = poll(give_up, || async move {
            let pushed = client.enqueue(Push::new("probe").queue("probes")).await;
            let taken = match pushed {
                // Every probe ready, those of earlier rounds whose dequeue failed with them: none is left open.
                Ok(_) => {
                    client
                        .dequeue(Dequeue::new("prober").queue("probes").limit(100))
                        .await
                }
                Err(e) => Err(e),
            };
            match taken {
                Ok(jobs) => {
                    for job in jobs {
                        let _ = client.finish(&job.lease, None).await;
                    }
                    Some(())
                }
                Err(e) => {
                    assert_eq!(e.kind(), ErrorKind::Unavailable, "node {i}: {e}");
                    None
                }
            }
        })
        .await;
        let (_, at) =
            served.unwrap_or_else(|| panic!("node {i} did not serve again within a minute"));
        took.push(at.duration_since(from));
    }
    took
}

/// Waits until a node leads the timed work on the new primary at `url`: its term there is current, and renewed
/// from a session of the new primary's.
async fn leads_on(url: &str) {
    let url = url.to_owned();
    eventually(
        Duration::from_secs(30),
        "a node leads the timed work on the new primary",
        || {
            let url = url.clone();
            async move {
                tokio::task::spawn_blocking(move || {
                    let mut client =
                        cairn::postgres::Client::connect(&url, cairn::postgres::NoTls).unwrap();
                    client
                        .query_one(
                            "SELECT count(*) FROM cairn_leader l WHERE l.expires_at > now() \
                             AND EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = l.pid)",
                            &[],
                        )
                        .unwrap()
                        .get::<_, i64>(0)
                        == 1
                })
                .await
                .unwrap()
            }
        },
    )
    .await;
}

/// On the new primary: a delayed job comes due, an abandoned lease expires and its job comes back, and a job pushed
/// on one node wakes a worker waiting on the other.
async fn timed_work_and_wake_ups(clients: &[Client]) {
    let (a, b) = (&clients[0], &clients[1]);
    let delayed = a
        .enqueue(
            Push::new("delayed")
                .queue("timed")
                .delay(Duration::from_secs(1)),
        )
        .await
        .unwrap()
        .id;
    let abandoned = a
        .enqueue(
            Push::new("abandoned")
                .queue("timed")
                .retry(RetryPolicy::immediate(2)),
        )
        .await
        .unwrap()
        .id;
    let taken = a
        .dequeue(
            Dequeue::new("vanishes")
                .queue("timed")
                .name("abandoned")
                .lease_timeout(Duration::from_secs(1)),
        )
        .await
        .unwrap();
    assert_eq!(taken.len(), 1, "the job to abandon was taken");
    let mut came = Vec::new();
    let give_up = Instant::now() + Duration::from_secs(20);
    while came.len() < 2 && Instant::now() < give_up {
        for job in b
            .dequeue(
                Dequeue::new("timed-worker")
                    .queue("timed")
                    .limit(2)
                    .wait(Duration::from_secs(2)),
            )
            .await
            .unwrap()
        {
            came.push(job.job.id);
            b.finish(&job.lease, None).await.unwrap();
        }
    }
    came.sort();
    assert_eq!(
        came,
        [delayed, abandoned],
        "the delayed job came due and the abandoned lease expired"
    );

    let waiting = {
        let b = b.clone();
        tokio::spawn(async move {
            b.dequeue(
                Dequeue::new("waits")
                    .queue("wake")
                    .wait(Duration::from_secs(20)),
            )
            .await
            .unwrap()
        })
    };
    until_waiting(b, &["waits"]).await;
    let pushed_at = Instant::now();
    let woke = a.enqueue(Push::new("wake").queue("wake")).await.unwrap().id;
    let got = waiting.await.unwrap();
    assert_eq!(
        got.first().map(|c| c.job.id),
        Some(woke),
        "the worker on the other node woke"
    );
    assert!(
        pushed_at.elapsed() < Duration::from_secs(10),
        "woken by the other node, not by its wait running out"
    );
    b.finish(&got[0].lease, None).await.unwrap();
}

/// The end of a trial: the load stopped, both nodes drain what is left, and the checks on every job.
async fn settle(clients: &[Client], load: Load, trial: &str, serving: &[Duration]) {
    let acked = load.stop().await;
    drain(clients).await;
    let jobs = all_jobs_with_history(&clients[0]).await;
    assert_nothing_lost(&acked, &jobs);
    assert_never_held_twice(&jobs);
    eprintln!(
        "{trial}: nodes served again {serving:?} after; {} jobs and {} finishes acknowledged, none lost",
        acked.enqueued.len(),
        acked.finished.len()
    );
}

fn assert_serving_within(serving: &[Duration], trial: &str) {
    for (i, took) in serving.iter().enumerate() {
        assert!(
            *took <= SERVING_WITHIN,
            "{trial}: node {i} served again {took:?} after, past {SERVING_WITHIN:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_primary_killed_and_the_standby_promoted_is_ridden_through() {
    let pair = Pair::start(false).await;
    let (_nodes, clients, load) = nodes_under_load(&pair);
    load.runs_for(50, "the load runs before the fault").await;

    let primary = pair.primary.clone();
    tokio::task::spawn_blocking(move || primary.down("immediate"))
        .await
        .unwrap();
    let promoted = pair.promote_after(Duration::from_secs(3)).await;
    let serving = serving_again(&clients, promoted).await;
    assert_serving_within(&serving, "killed and promoted");
    leads_on(&pair.standby.url).await;
    timed_work_and_wake_ups(&clients).await;
    settle(&clients, load, "killed and promoted", &serving).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_turned_read_only_with_its_sessions_open_is_left_for_the_promoted_standby() {
    let pair = Pair::start(false).await;
    let (_nodes, clients, load) = nodes_under_load(&pair);
    load.runs_for(50, "the load runs before the fault").await;

    // As a switchover does: the old primary refuses writes from now on, every session of it still open.
    admin(
        &pair.primary.url,
        &[
            "ALTER SYSTEM SET default_transaction_read_only = on",
            "SELECT pg_reload_conf()",
        ],
    )
    .await;
    let promoted = pair.promote().await;
    let serving = serving_again(&clients, promoted).await;
    assert_serving_within(&serving, "read-only and promoted");
    leads_on(&pair.standby.url).await;
    timed_work_and_wake_ups(&clients).await;
    settle(&clients, load, "read-only and promoted", &serving).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_whose_host_went_silent_is_left_for_the_promoted_standby() {
    let pair = Pair::start(true).await;
    let (_nodes, clients, load) = nodes_under_load(&pair);
    load.runs_for(50, "the load runs before the fault").await;

    pair.proxy.as_ref().unwrap().black_hole();
    let promoted = pair.promote_after(Duration::from_secs(4)).await;
    let serving = serving_again(&clients, promoted).await;
    assert_serving_within(&serving, "silent and promoted");
    leads_on(&pair.standby.url).await;
    timed_work_and_wake_ups(&clients).await;
    settle(&clients, load, "silent and promoted", &serving).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_synchronous_standby_lost_no_write_is_acknowledged_until_it_is_back() {
    let pair = Pair::start(false).await;
    let (_nodes, clients, load) = nodes_under_load(&pair);
    load.runs_for(50, "the load runs before the fault").await;

    let standby = pair.standby.clone();
    tokio::task::spawn_blocking(move || standby.down("immediate"))
        .await
        .unwrap();
    // Pushed meanwhile on each node: refused with 503 (the commit waits for a standby that is gone), never
    // acknowledged.
    for (i, client) in clients.iter().enumerate() {
        let push = client
            .enqueue(Push::new("unsynced").queue("unsynced"))
            .await;
        match push {
            Err(e) => assert_eq!(e.kind(), ErrorKind::Unavailable, "node {i}: {e}"),
            Ok(enqueued) => panic!(
                "node {i} acknowledged job {} without the synchronous standby",
                enqueued.id
            ),
        }
    }
    let standby = pair.standby.clone();
    tokio::task::spawn_blocking(move || standby.up())
        .await
        .unwrap();
    let back = Instant::now();
    let serving = serving_again(&clients, back).await;
    // A push refused for want of the standby may have committed on the primary all the same (PostgreSQL commits
    // locally, then waits): never acknowledged, it may run or not. Taken here, so that nothing is left open.
    for job in clients[0]
        .dequeue(Dequeue::new("cleaner").queue("unsynced").limit(10))
        .await
        .unwrap()
    {
        clients[0].finish(&job.lease, None).await.unwrap();
    }
    timed_work_and_wake_ups(&clients).await;
    settle(&clients, load, "standby lost and back", &serving).await;
}
