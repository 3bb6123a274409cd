//! `cairn serve` nodes whose PostgreSQL server restarts under them, on a cluster of the test's own (the shared one
//! serves the other tests meanwhile): once the database is back, no request fails, and a job pushed on one node
//! wakes a worker parked on another as before; stopped hard three times and one node SIGKILLed under load, nothing
//! acknowledged is lost, no job is held by two workers at once, and both nodes serve at the end.

use cairn::Jobs;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn::__private::PrivateCluster;
use cairn::{Dequeue, JobId, Push};
use cairn_client::Client;
use serde_json::json;

use crate::harness::{TestServer, until_waiting};
use crate::load::{
    Load, all_jobs_with_history, assert_never_held_twice, assert_nothing_lost, drain,
};

async fn start_cluster() -> PrivateCluster {
    tokio::task::spawn_blocking(PrivateCluster::start)
        .await
        .unwrap()
}

/// Stops the database (`fast` or `immediate`) and starts it again; returns once it accepts sessions.
async fn restart(cluster: &Arc<PrivateCluster>, mode: &'static str, down_for: Duration) {
    let c = cluster.clone();
    tokio::task::spawn_blocking(move || c.down(mode))
        .await
        .unwrap();
    // Real time: an outage lasts a while, so that what the nodes do by the clock (the lead renewed each second,
    // sessions tried again, the load's clients refused) meets it, as it would in production.
    tokio::time::sleep(down_for).await;
    let c = cluster.clone();
    tokio::task::spawn_blocking(move || c.up()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_postgresql_restarts_no_request_fails_and_nodes_still_wake_each_other() {
    let cluster = Arc::new(start_cluster().await);
    let nodes = [
        TestServer::spawn_on_postgres(&cluster.url, &[]),
        TestServer::spawn_on_postgres(&cluster.url, &[]),
    ];
    let clients: Vec<Client> = nodes.iter().map(TestServer::client).collect();
    let mut ids = Vec::new();
    for client in &clients {
        for _ in 0..5 {
            ids.push(client.enqueue(Push::new("kept")).await.unwrap().id);
        }
    }
    for mode in ["fast", "immediate"] {
        // Reads at once on every node, so that each holds several pooled read sessions for the restart to close.
        read_all(&clients, &ids).await.unwrap();
        restart(&cluster, mode, Duration::from_millis(500)).await;

        // The database is back: every request from now on succeeds, the first ones too.
        read_all(&clients, &ids)
            .await
            .unwrap_or_else(|e| panic!("a read after a {mode} restart failed: {e}"));
        for client in &clients {
            let pushed = client
                .enqueue(Push::new("after").data(json!(mode)))
                .await
                .unwrap_or_else(|e| panic!("a push after a {mode} restart failed: {e}"));
            ids.push(pushed.id);
        }

        // A worker parked on the second node is woken by a push on the first, as before the restart.
        let (parked, worker) = (clients[1].clone(), format!("parked-{mode}"));
        let waiting = tokio::spawn(async move {
            parked
                .dequeue(
                    Dequeue::new(worker.as_str())
                        .queue(format!("wake-{mode}"))
                        .wait(Duration::from_secs(20)),
                )
                .await
        });
        until_waiting(&clients[0], &[&format!("parked-{mode}")]).await;
        let pushed_at = Instant::now();
        let woken = clients[0]
            .enqueue(Push::new("wake").queue(format!("wake-{mode}")))
            .await
            .unwrap()
            .id;
        let claimed = waiting.await.unwrap().unwrap();
        let waited = pushed_at.elapsed();
        assert_eq!(claimed.len(), 1, "the parked worker got the job");
        assert_eq!(claimed[0].job.id, woken);
        assert!(
            waited < Duration::from_secs(10),
            "after a {mode} restart, the parked worker was woken by the push ({waited:?}), not by its wait's end"
        );
        clients[1].finish(&claimed[0].lease, None).await.unwrap();
    }
    for id in &ids {
        clients[0].get(*id).await.unwrap();
    }
}

/// Reads every job in `ids` on every node, eight at a time per node, so that each node needs several sessions.
async fn read_all(clients: &[Client], ids: &[JobId]) -> cairn::Result<()> {
    for client in clients {
        for chunk in ids.chunks(8) {
            let mut reads = tokio::task::JoinSet::new();
            for id in chunk {
                let (client, id) = (client.clone(), *id);
                reads.spawn(async move { client.get(id).await });
            }
            while let Some(read) = reads.join_next().await {
                read.unwrap()?;
            }
        }
    }
    Ok(())
}

/// The lease the consumers ask for, and the jobs carry: jobs a killed node's workers held come back after it.
const LEASE: Duration = Duration::from_secs(5);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgresql_stopped_hard_three_times_and_a_node_killed_under_load_loses_nothing() {
    let cluster = Arc::new(start_cluster().await);
    let mut nodes = [
        TestServer::spawn_on_postgres(&cluster.url, &[]),
        TestServer::spawn_on_postgres(&cluster.url, &[]),
    ];
    let mut load = Load::new();
    let start_load = |load: &mut Load, node: usize, client: Client, generation: u64| {
        load.producer(client.clone(), generation * 10 + node as u64, LEASE);
        for w in 0..2 {
            load.consumer(client.clone(), format!("g{generation}-n{node}-w{w}"), LEASE);
        }
    };
    for (i, node) in nodes.iter().enumerate() {
        start_load(&mut load, i, node.client(), 0);
    }
    // Each stop comes while the load runs: through the one before, for the second and third.
    for _ in 0..3 {
        load.runs_for(50, "the load runs before the database stops")
            .await;
        restart(&cluster, "immediate", Duration::from_secs(1)).await;
    }
    // One node dies with SIGKILL, holding whatever its workers had taken; the other serves meanwhile; it comes back
    // on the same database, and the load goes on (the drain below shows that both nodes serve).
    load.runs_for(50, "the load runs after the last stop").await;
    tokio::task::block_in_place(|| nodes[1].kill());
    load.runs_for(20, "the load runs on the node left").await;
    tokio::task::block_in_place(|| nodes[1].start());
    start_load(&mut load, 1, nodes[1].client(), 1);
    load.runs_for(50, "the load runs with the node back").await;
    let acked = load.stop().await;

    // Both nodes serve, and drain what is left.
    let clients: Vec<Client> = nodes.iter().map(TestServer::client).collect();
    drain(&clients).await;
    let jobs = all_jobs_with_history(&clients[0]).await;
    assert_nothing_lost(&acked, &jobs);
    assert_never_held_twice(&jobs);
    eprintln!(
        "three hard stops and a node killed: {} jobs acknowledged, {} finishes acknowledged, none lost",
        acked.enqueued.len(),
        acked.finished.len()
    );
}
