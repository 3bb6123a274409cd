//! Several `cairn serve` processes on one PostgreSQL database (a database of its own on the cluster `scripts/test`
//! starts): a job enqueued on one node wakes a worker waiting on another; a node killed with SIGKILL mid-load loses
//! nothing acknowledged and its workers' jobs are taken by the others once their leases expire; no job is ever held
//! by two workers at once; a recurring template's slot runs once, even when the node leading the timed work dies;
//! a batch finished across the nodes makes its callbacks once, even when the node that ended it dies at once.

use cairn::Jobs;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use cairn::{CreateBatch, Dequeue, Finish, Job, JobFilter, JobId, MissedSlots, Push, Recurring};
use cairn_client::Client;

use crate::harness::{TestDatabase, TestServer, all_jobs, eventually};
use crate::load::{
    Load, all_jobs_with_history, assert_never_held_twice, assert_nothing_lost, drain,
};

/// Three servers on one fresh database, started one after another (the first leads the timed work).
fn cluster(database: &TestDatabase) -> Vec<TestServer> {
    (0..3)
        .map(|_| TestServer::spawn_on_postgres(&database.url, &[]))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_enqueued_on_one_node_wakes_workers_waiting_on_the_others() {
    let database = TestDatabase::new();
    let nodes = cluster(&database);
    let mut waiting = Vec::new();
    for i in [1, 2] {
        let client = nodes[i].client();
        waiting.push(tokio::spawn(async move {
            client
                .dequeue(Dequeue::new(format!("w{i}").as_str()).wait(Duration::from_secs(50)))
                .await
                .unwrap()
        }));
    }
    // Both workers are parked on their nodes (a waiting worker counts as seen) before anything is enqueued.
    let observer = nodes[0].client();
    crate::harness::eventually(Duration::from_secs(20), "both workers wait", || {
        let observer = observer.clone();
        async move {
            let workers = observer.workers().await.unwrap();
            ["w1", "w2"]
                .iter()
                .all(|w| workers.iter().any(|seen| seen.id.as_str() == *w))
        }
    })
    .await;
    let pushed: BTreeSet<JobId> = [
        observer.enqueue(Push::new("a")).await.unwrap().id,
        observer.enqueue(Push::new("b")).await.unwrap().id,
    ]
    .into();
    // Without a wake-up from node 0, each would return empty only after its 50 s wait.
    let mut taken = BTreeSet::new();
    for handle in waiting {
        let claimed = handle.await.unwrap();
        assert_eq!(claimed.len(), 1, "each waiting worker gets a job");
        assert!(taken.insert(claimed[0].job.id));
    }
    assert_eq!(taken, pushed);
}

/// How long a job's lease lasts: the jobs the doomed worker held come back this long after it took them.
const LEASE: Duration = Duration::from_secs(3);

/// The lease the consumers ask for: the killed node's consumers' jobs come back after it, in the drain.
const CONSUMER_LEASE: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_killed_mid_load_loses_nothing_and_the_others_take_its_jobs() {
    let database = TestDatabase::new();
    let mut nodes = cluster(&database);
    let mut load = Load::new();
    for (i, node) in nodes.iter().enumerate() {
        let client = node.client();
        load.producer(client.clone(), i as u64, LEASE);
        for w in 0..2 {
            load.consumer(client.clone(), format!("n{i}-w{w}"), CONSUMER_LEASE);
        }
    }
    load.runs_for(50, "the load runs on the three nodes").await;
    // A worker on node 0 takes jobs it will never finish: it dies with the node.
    let orphaned: Vec<JobId> = nodes[0]
        .client()
        .dequeue(Dequeue::new("doomed").limit(5).wait(Duration::from_secs(5)))
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.job.id)
        .collect();
    assert!(!orphaned.is_empty(), "the doomed worker took jobs");
    // Node 0 started first and leads the timed work: killing it also tests that another node takes the lead.
    // Its other workers die with it too, holding whatever they had taken.
    let mut killed = nodes.remove(0);
    tokio::task::spawn_blocking(move || killed.kill())
        .await
        .unwrap();
    // The others go on until every job the doomed worker held came back, its lease run out: found by the node
    // that took over the timed work.
    let survivor = nodes[0].client();
    eventually(
        Duration::from_secs(60),
        "the doomed worker's jobs came back",
        || async {
            for id in &orphaned {
                // The doomed worker's attempt, the first, has an outcome once its lease ran out.
                let job = survivor.get(*id).await.unwrap();
                if job.history.first().is_none_or(|a| a.outcome.is_none()) {
                    return false;
                }
            }
            true
        },
    )
    .await;
    let acked = load.stop().await;

    // Drain through the survivors: every job comes back, and none is handed out twice.
    let survivors: Vec<Client> = nodes.iter().map(TestServer::client).collect();
    drain(&survivors).await;
    let jobs = all_jobs_with_history(&survivors[1]).await;
    let by_id: BTreeMap<JobId, &Job> = jobs.iter().map(|j| (j.id, j)).collect();
    assert_nothing_lost(&acked, &jobs);
    assert_never_held_twice(&jobs);
    // What the dead node's worker held ran again after its leases expired, on another node.
    for id in &orphaned {
        let job = by_id[id];
        assert_eq!(job.history[0].worker.as_str(), "doomed");
        assert_eq!(
            job.history[0].outcome,
            Some(cairn::AttemptOutcome::LeaseExpired),
            "job {id}, held on the killed node, came back through lease expiry"
        );
        assert_ne!(job.history.last().unwrap().worker.as_str(), "doomed");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recurring_slot_runs_once_across_nodes_even_when_the_leader_dies() {
    let database = TestDatabase::new();
    let mut nodes = cluster(&database);
    nodes[1]
        .client()
        .set_recurring(Recurring {
            key: "tick".into(),
            cron: "* * * * * *".into(),
            time_zone: "UTC".into(),
            missed: MissedSlots::RunAll,
            overlap: cairn::Overlap::Allow,
            job: Push::new("tick").lease_timeout(LEASE),
        })
        .await
        .unwrap();
    let mut load = Load::new();
    for (i, node) in nodes.iter().enumerate() {
        load.consumer(node.client(), format!("n{i}"), CONSUMER_LEASE);
    }
    // Slots of the first leader's, then it dies, then slots of its successor's (due a second after the death at
    // least, so that the first leader could not have made them).
    let observer = nodes[1].client();
    let slots_after = |at: jiff::Timestamp| {
        let observer = observer.clone();
        async move {
            all_jobs(&observer)
                .await
                .iter()
                .filter(|job| job.run_at > at)
                .count()
        }
    };
    eventually(Duration::from_secs(30), "two slots ran", || async {
        slots_after(jiff::Timestamp::MIN).await >= 2
    })
    .await;
    let mut leader = nodes.remove(0);
    tokio::task::spawn_blocking(move || leader.kill())
        .await
        .unwrap();
    let after_the_death = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(1);
    eventually(
        Duration::from_secs(30),
        "two slots ran after the leader died",
        || async { slots_after(after_the_death).await >= 2 },
    )
    .await;
    load.stop().await;

    let jobs = all_jobs_with_history(&nodes[0].client()).await;
    let mut slots = BTreeSet::new();
    for job in &jobs {
        assert!(
            slots.insert(job.run_at),
            "two jobs for the slot {}",
            job.run_at
        );
    }
    // One job a second, created by the first leader and then by its successor.
    assert!(
        jobs.len() >= 4,
        "slots kept coming after the leader died: {}",
        jobs.len()
    );
    let first = slots.first().copied().unwrap();
    let last = slots.last().copied().unwrap();
    assert_eq!(
        slots.len() as i64,
        first.duration_until(last).as_secs() + 1,
        "every second between the first and the last slot has its job, once"
    );
    assert_never_held_twice(&jobs);
}

/// Takes and finishes jobs of `queue` through `client`, many to a request, until a wait finds none.
async fn finish_all(client: Client, queue: &'static str, worker: String) -> usize {
    let mut finished = 0;
    loop {
        let claimed = client
            .dequeue(
                Dequeue::new(worker.as_str())
                    .queue(queue)
                    .limit(25)
                    .wait(Duration::from_millis(300)),
            )
            .await
            .unwrap();
        if claimed.is_empty() {
            return finished;
        }
        let finishes = claimed.iter().map(|c| Finish::new(&c.lease)).collect();
        for result in client.finish_many(finishes).await.unwrap() {
            result.unwrap();
            finished += 1;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_finished_across_nodes_makes_its_callbacks_once_even_when_the_last_node_dies() {
    let database = TestDatabase::new();
    let mut nodes = cluster(&database);
    let clients: Vec<Client> = nodes.iter().map(TestServer::client).collect();
    const JOBS: usize = 1000;
    let created = clients[0]
        .create_batch(
            CreateBatch::new(
                (0..JOBS)
                    .map(|i| {
                        Push::new("part")
                            .queue("parts")
                            .data(serde_json::json!({"i": i}))
                    })
                    .collect(),
            )
            .on_complete(Push::new("batch.complete").queue("callbacks"))
            .on_success(Push::new("batch.success").queue("callbacks")),
        )
        .await
        .unwrap();
    // One job is kept aside on node 2, under a lease that outlasts the test; workers on all three nodes finish
    // the other 999 at once.
    let last = clients[2]
        .dequeue(
            Dequeue::new("last")
                .queue("parts")
                .lease_timeout(Duration::from_secs(600)),
        )
        .await
        .unwrap()
        .remove(0);
    let workers: Vec<_> = clients
        .iter()
        .enumerate()
        .map(|(i, client)| tokio::spawn(finish_all(client.clone(), "parts", format!("w{i}"))))
        .collect();
    let mut finished = 0;
    for worker in workers {
        finished += worker.await.unwrap();
    }
    assert_eq!(finished, JOBS - 1);
    let batch = clients[0].batch(created.batch).await.unwrap();
    assert_eq!((batch.pending, batch.completed), (1, JOBS as u64 - 1));
    assert!(
        batch.on_complete.unwrap().job.is_none(),
        "one job is still running"
    );

    // The last job's finish is acknowledged (committed), and its node dies at once.
    clients[2].finish(&last.lease, None).await.unwrap();
    nodes[2].kill();

    let batch = clients[0].batch(created.batch).await.unwrap();
    assert_eq!(batch.state, cairn::BatchState::Completed);
    assert_eq!(batch.completed, JOBS as u64);
    let callbacks = clients[1]
        .list(JobFilter {
            queue: Some("callbacks".to_owned()),
            ..JobFilter::default()
        })
        .await
        .unwrap()
        .jobs;
    let mut names: Vec<&str> = callbacks.iter().map(|j| j.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        ["batch.complete", "batch.success"],
        "each callback once"
    );
    assert!(batch.on_complete.unwrap().job.is_some());
    for job in &callbacks {
        assert_eq!(job.data["batch"]["completed"], serde_json::json!(JOBS));
        assert_eq!(job.data["batch"]["failed_ids"], serde_json::json!([]));
    }
    // The two nodes still up go on: nothing more is made, and the callbacks are taken once.
    let taken = finish_all(clients[0].clone(), "callbacks", "cb".to_owned()).await
        + finish_all(clients[1].clone(), "callbacks", "cb".to_owned()).await;
    assert_eq!(taken, 2);
}
