//! The web dashboard in a real headless Chromium against the real `cairn serve`: every page loads without errors,
//! it updates live, its buttons act on the server, it fits a phone, and it asks for the token when the server has
//! one. Screenshots go to `target/dashboard-screenshots/`; with `CAIRN_DOCS_SCREENSHOT=1` the populated queues
//! page is also saved as `docs/dashboard.png`.

use cairn::Jobs;
use std::path::PathBuf;
use std::time::Duration;

use cairn::{Dequeue, ErrorKind, JobId, JobState, Push};
use cairn_client::Client;
use serde_json::{Value, json};

use crate::browser::{Browser, DEADLINE, Viewport};
use crate::harness::{TestServer, eventually};

/// What `populate` made.
struct Populated {
    failed: JobId,
    running: JobId,
}

/// Queues with jobs in most states: queued, scheduled, waiting, running (held by `worker-2`), completed, failed (in
/// the group `smtp-timeout`), cancelled; a paused queue and a limited one.
async fn populate(client: &Client) -> Populated {
    for (queue, names) in [
        ("email", ["email.send", "email.send", "email.digest"]),
        (
            "reports",
            ["report.daily", "report.weekly", "report.export"],
        ),
        (
            "images",
            ["image.resize", "image.resize", "image.thumbnail"],
        ),
    ] {
        for (i, name) in names.iter().enumerate() {
            let push = Push::new(*name)
                .queue(queue)
                .data(json!({"n": i, "to": format!("user{i}@example.com")}))
                .tag(format!("customer-{i}"));
            client.enqueue(push).await.unwrap();
        }
    }
    client
        .enqueue(
            Push::new("email.reminder")
                .queue("email")
                .delay(Duration::from_secs(3600)),
        )
        .await
        .unwrap();
    let taken = client.dequeue(take("worker-1", "email", 2)).await.unwrap();
    let failed = taken[0].lease.job;
    client
        .fail(
            &taken[0].lease,
            "smtp-timeout",
            "connect to smtp.example.com:25: timed out after 30 s",
        )
        .await
        .unwrap();
    client
        .finish(&taken[1].lease, Some(json!({"sent": true})))
        .await
        .unwrap();
    let running = client
        .dequeue(take("worker-2", "reports", 1))
        .await
        .unwrap()[0]
        .lease
        .job;
    let waiting = Push::new("report.mail")
        .queue("reports")
        .depends_on(running);
    client.enqueue(waiting).await.unwrap();
    let doomed = client
        .enqueue(Push::new("image.cleanup").queue("images"))
        .await
        .unwrap();
    client.cancel(doomed.id).await.unwrap();
    client.pause_queue("images", true).await.unwrap();
    client.limit_queue("reports", Some(4)).await.unwrap();
    Populated { failed, running }
}

/// A batch of three jobs in `queue` with a callback, described: the first completed and the second failed when
/// `finish` (taking from `queue`).
async fn populate_batch(client: &Client, queue: &str, finish: bool) -> cairn::BatchId {
    let parts = (0..3)
        .map(|i| {
            Push::new("export.part")
                .queue(queue)
                .data(json!({ "part": i }))
        })
        .collect();
    let batch = client
        .create_batch(
            cairn::CreateBatch::new(parts)
                .on_complete(Push::new("export.done").queue("callbacks"))
                .description("October's export for the accounting team, in three parts"),
        )
        .await
        .unwrap()
        .batch;
    if finish {
        let taken = client.dequeue(take("w", queue, 2)).await.unwrap();
        client.finish(&taken[0].lease, None).await.unwrap();
        client
            .fail(&taken[1].lease, "disk-full", "no space left")
            .await
            .unwrap();
    }
    batch
}

fn take(worker: &str, queue: &str, limit: u32) -> Dequeue {
    Dequeue {
        queues: vec![queue.to_owned()],
        limit,
        ..Dequeue::new(worker)
    }
}

/// Opens `#/ROUTE` and waits until its view has shown the server's answer once.
async fn open(browser: &Browser, server: &TestServer, route: &str) {
    browser.goto(&format!("{}/#/{route}", server.url())).await;
    wait_loaded(browser, route).await;
}

async fn wait_loaded(browser: &Browser, route: &str) {
    browser
        .wait_for(
            &format!("#/{route} to load"),
            "return document.querySelector('.view[data-loaded=\"true\"]') !== null",
        )
        .await;
}

async fn assert_no_page_errors(browser: &Browser, page: &str) {
    let errors = browser.errors().await;
    assert!(errors.is_empty(), "errors on {page}: {errors:#?}");
}

/// Opens job `id`'s page and returns the text of its details, once they are that job's.
async fn job_details(browser: &Browser, server: &TestServer, id: JobId) -> String {
    open(browser, server, &format!("jobs/{id}")).await;
    let script = format!(
        "const title = document.querySelector('#job h1')?.innerText ?? ''; \
         return title.startsWith('#{id} ') ? document.querySelector('dl.details')?.innerText : null"
    );
    let details = browser
        .wait_for(&format!("job {id}'s details"), &script)
        .await;
    details.as_str().expect("text").to_owned()
}

/// A queue's settings and counts, over HTTP.
async fn queue_body(client: &Client, queue: &str) -> Value {
    let body = client.answer(cairn::ListQueues).await.unwrap();
    let found = body.queues.into_iter().find(|q| q.queue == queue);
    serde_json::to_value(found.expect("the queue is listed")).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_page_loads_without_errors() {
    let server = TestServer::spawn();
    let jobs = populate(&server.client()).await;
    let batch = populate_batch(&server.client(), "email", false).await;
    server
        .client()
        .set_recurring(template(
            "reports/nightly",
            "report.nightly",
            cairn::Overlap::Skip,
        ))
        .await
        .unwrap();
    let browser = Browser::start(Viewport::Desktop).await;
    let failed = jobs.failed.0.to_string();
    let pages = [
        ("queues", "queues"),
        ("jobs", "jobs"),
        ("jobs?state=failed", "jobs-failed"),
        (&format!("jobs/{failed}"), "job-failed"),
        (&format!("jobs/{}", jobs.running.0), "job-running"),
        ("failures", "failures"),
        ("workers", "workers"),
        ("batches", "batches-list"),
        (&format!("batches/{batch}"), "batch"),
        (&format!("jobs?batch={batch}"), "jobs-of-batch"),
        ("recurring", "recurring-list"),
        ("stats", "stats-hour"),
        ("stats?period=day", "stats-day"),
        ("stats?period=week", "stats-week"),
    ];
    for (route, name) in pages {
        open(&browser, &server, route).await;
        browser.screenshot(name).await;
        assert_no_page_errors(&browser, route).await;
    }

    // What the pages show comes from the server.
    open(&browser, &server, "queues").await;
    let queues = browser
        .execute(
            "return [...document.querySelectorAll('tr[data-queue]')].map(r => [r.dataset.queue, r.dataset.paused])",
            json!([]),
        )
        .await;
    assert_eq!(
        queues,
        json!([["email", "false"], ["images", "true"], ["reports", "false"]])
    );
    open(&browser, &server, "workers").await;
    let workers = browser
        .wait_for(
            "the workers, each with its status",
            "const rows = [...document.querySelectorAll('tr[data-worker]')]; \
             return rows.length > 0 && rows.map(r => [r.dataset.worker, r.dataset.status, r.cells[1].innerText])",
        )
        .await;
    assert!(
        workers
            .as_array()
            .unwrap()
            .contains(&json!(["worker-2", "live", "live"])),
        "{workers}"
    );
    if std::env::var_os("CAIRN_DOCS_SCREENSHOT").is_some() {
        let shot = browser.screenshot("dashboard").await;
        let docs = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/dashboard.png");
        std::fs::copy(shot, docs).expect("copying the screenshot to docs/");
    }
    open(&browser, &server, &format!("jobs/{failed}")).await;
    browser
        .wait_for(
            "the failed attempt's error in the history",
            "return document.querySelector('#history [data-attempt=\"1\"]')?.innerText.includes('timed out after 30 s')",
        )
        .await;
    open(&browser, &server, "stats").await;
    browser
        .wait_for(
            "charts, or the note that the server keeps no statistics",
            "return document.querySelector('#stats svg.chart, #stats [data-unavailable]') !== null",
        )
        .await;
    // A job's page shows its flow-control keys.
    let keyed = server
        .client()
        .enqueue(
            Push::new("reindex")
                .debounce(
                    "customer:42",
                    Duration::from_secs(60),
                    Duration::from_secs(600),
                )
                .throttle("reindex:42", Duration::from_secs(3600)),
        )
        .await
        .unwrap();
    open(&browser, &server, &format!("jobs/{}", keyed.id)).await;
    browser
        .wait_for(
            "the job's debounce and throttle keys in its details",
            "const d = document.querySelector('dl.details')?.innerText ?? ''; \
             return d.includes('customer:42') && d.includes('reindex:42')",
        )
        .await;
    assert_no_page_errors(&browser, "the second visits").await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_concurrency_key_shows_on_the_queues_page_and_jobs_show_their_keys() {
    let server = TestServer::spawn();
    let client = server.client();
    client.limit_keys("tenants", Some(1)).await.unwrap();
    client
        .weigh_key("tenants", "customer:42", Some(2))
        .await
        .unwrap();
    let keyed = |key: &str| Push::new("sync").queue("tenants").concurrency_key(key);
    let first = client.enqueue(keyed("customer:42")).await.unwrap().id;
    let second = client.enqueue(keyed("customer:42")).await.unwrap().id;
    let taken = client.dequeue(take("w", "tenants", 1)).await.unwrap();
    assert_eq!(taken.len(), 1);
    let waiting = if taken[0].lease.job == first {
        second
    } else {
        first
    };
    // Pushed after the take, so that the take had only customer:42's jobs to choose from. Its key is markup, which
    // the page must show as text.
    let own = client
        .enqueue(keyed("<b>vip</b>").concurrency_limit(3))
        .await
        .unwrap()
        .id;
    // What the server says, so that a failure below is the dashboard's.
    let body = queue_body(&client, "tenants").await;
    assert_eq!(body["key_concurrency"], json!(1));
    assert_eq!(body["waiting_on_keys"], json!(1));
    assert_eq!(
        body["top_keys"],
        json!([
            {"key": "customer:42", "running": 1, "queued": 1, "limit": 1, "full": true, "weight": 2},
            {"key": "<b>vip</b>", "running": 0, "queued": 1, "limit": 3, "full": false, "weight": 1},
        ])
    );

    let browser = Browser::start(Viewport::Desktop).await;
    open(&browser, &server, "queues").await;
    browser
        .wait_for(
            "the queue's limit per key among its limits",
            "return document.querySelector('tr[data-queue=\"tenants\"] td[data-label=\"Limits\"]')\
             ?.innerText.includes('1 per key')",
        )
        .await;
    let keys = browser
        .wait_for(
            "the queue's keys",
            "const rows = [...document.querySelectorAll('[data-keys-queue=\"tenants\"] tr[data-key]')]\
               .map(r => [...r.cells].map(c => c.innerText.trim())); \
             return rows.length ? rows : null",
        )
        .await;
    assert_eq!(
        keys,
        json!([
            ["customer:42", "1", "1", "1", "full", "2"],
            ["<b>vip</b>", "0", "1", "3", "no", "1"],
        ])
    );
    let note = browser
        .execute(
            "return document.querySelector('[data-keys-queue=\"tenants\"] [data-waiting-on-keys]')?.innerText",
            json!([]),
        )
        .await;
    assert_eq!(note, json!("1 ready job waits on a key at its limit"));
    assert_eq!(
        browser
            .execute(
                "return document.querySelectorAll('#key-list b').length",
                json!([])
            )
            .await,
        json!(0),
        "a key was read as markup"
    );
    browser.screenshot("queues-keys").await;

    let details = job_details(&browser, &server, waiting).await;
    assert!(
        details.contains("Concurrency key\ncustomer:42"),
        "{details}"
    );
    assert!(!details.contains("Concurrency limit"), "{details}");
    let details = job_details(&browser, &server, own).await;
    assert!(details.contains("Concurrency key\n<b>vip</b>"), "{details}");
    assert!(
        details.contains("Concurrency limit\n3 of its key at once"),
        "{details}"
    );
    assert_no_page_errors(&browser, "the queues and job pages with keys").await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pushed_job_shows_up_without_a_reload() {
    let server = TestServer::spawn();
    let client = server.client();
    let browser = Browser::start(Viewport::Desktop).await;
    open(&browser, &server, "jobs").await;
    browser
        .execute("window.notReloaded = true", json!([]))
        .await;

    let job = client
        .enqueue(Push::new("email.send").queue("email"))
        .await
        .unwrap();
    let row = format!("tr[data-job-id=\"{}\"]", job.id.0);
    browser
        .wait_for(
            "the new job's row",
            &format!("return document.querySelector('{row}')?.dataset.state"),
        )
        .await;
    assert_eq!(
        browser
            .execute("return window.notReloaded === true", json!([]))
            .await,
        json!(true),
        "the page was reloaded"
    );
    assert_no_page_errors(&browser, "jobs").await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_group_is_retried_from_the_failures_page() {
    let server = TestServer::spawn();
    let client = server.client();
    let jobs = populate(&client).await;
    let browser = Browser::start(Viewport::Desktop).await;
    open(&browser, &server, "failures").await;

    browser
        .click("button[data-action=\"unfail\"][data-group=\"smtp-timeout\"]")
        .await;
    let job = jobs.failed;
    eventually(DEADLINE, "the failed job queued again", || async {
        client.get(job).await.unwrap().state == JobState::Queued
    })
    .await;
    browser
        .wait_for(
            "the result in the notice line",
            "return document.querySelector('#notice.ok')?.innerText.includes('1 job back')",
        )
        .await;
    browser
        .wait_for(
            "the emptied failures list",
            "return document.querySelector('#failure-list')?.innerText.includes('No failed jobs')",
        )
        .await;
    browser.screenshot("failures-retried").await;
    assert_no_page_errors(&browser, "failures").await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_is_paused_and_resumed_from_the_queues_page() {
    let server = TestServer::spawn();
    let client = server.client();
    client
        .enqueue(Push::new("email.send").queue("email"))
        .await
        .unwrap();
    let browser = Browser::start(Viewport::Desktop).await;
    open(&browser, &server, "queues").await;

    browser
        .click("button[data-action=\"pause\"][data-queue=\"email\"]")
        .await;
    eventually(DEADLINE, "the queue paused", || async {
        queue_body(&client, "email").await["paused"] == json!(true)
    })
    .await;
    browser
        .wait_for(
            "the queue shown paused",
            "return document.querySelector('tr[data-queue=\"email\"][data-paused=\"true\"] button[data-action=\"resume\"]') !== null",
        )
        .await;

    browser
        .click("button[data-action=\"resume\"][data-queue=\"email\"]")
        .await;
    eventually(DEADLINE, "the queue resumed", || async {
        queue_body(&client, "email").await["paused"] == json!(false)
    })
    .await;
    browser
        .wait_for(
            "the queue shown running",
            "return document.querySelector('tr[data-queue=\"email\"][data-paused=\"false\"]') !== null",
        )
        .await;
    assert_no_page_errors(&browser, "queues").await;
    browser.close().await;
}

/// The text of the notice line once it shows an error (`ok` false) or a result (`ok` true) that contains `part`.
async fn notice(browser: &Browser, ok: bool, part: &str) -> String {
    let script = format!(
        "const n = document.querySelector('#notice:not([hidden])'); \
         return n && n.classList.contains('ok') === {ok} && n.innerText.includes({part:?}) ? n.innerText : null"
    );
    let what = format!(
        "{} saying {part:?} in the notice line",
        if ok { "a result" } else { "an error" }
    );
    let text = browser.wait_for(&what, &script).await;
    text.as_str().expect("text").to_owned()
}

/// Waits until job `id`'s page shows it in `state`.
async fn wait_state(browser: &Browser, id: JobId, state: &str) {
    browser
        .wait_for(
            &format!("job {id} shown {state}"),
            &format!(
                "return document.querySelector('#job h1')?.innerText.startsWith('#{id} ') \
                 && document.querySelector('#job h1 .badge')?.innerText === '{state}'"
            ),
        )
        .await;
}

/// The `data-action`s of the buttons and forms job `id`'s page offers, in order.
async fn offered(browser: &Browser) -> Value {
    browser
        .execute(
            "return [...document.querySelectorAll('#job [data-action]')].map(e => e.dataset.action)",
            json!([]),
        )
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jobs_page_shows_its_result_and_trace_context() {
    const TRACE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let server = TestServer::spawn();
    let client = server.client();
    let id = client
        .enqueue(
            Push::new("report.export")
                .queue("reports")
                .data(json!({"month": "2026-10"}))
                .trace_parent(TRACE),
        )
        .await
        .unwrap()
        .id;
    // A first attempt that retries (no result), then one that finishes with a result; the result holds markup, which
    // the page must show as text.
    let first = client.dequeue(take("w", "reports", 1)).await.unwrap();
    let retried = client
        .retry(&first[0].lease, "disk full", Some(Duration::ZERO))
        .await
        .unwrap();
    assert_eq!(retried, JobState::Queued);
    let second = client.dequeue(take("w", "reports", 1)).await.unwrap();
    let result = json!({"pages": 12, "file": "<b>october</b>.pdf"});
    client
        .finish_with(cairn::Finish {
            result: Some(result.clone()),
            ..cairn::Finish::new(&second[0].lease)
        })
        .await
        .unwrap();
    // What the server says, so that a failure below is the dashboard's.
    let body = serde_json::to_value(client.answer(cairn::GetJob::new(id)).await.unwrap()).unwrap();
    assert_eq!(body["result"], result);
    assert_eq!(body["trace_parent"], json!(TRACE));
    assert_eq!(body["history"][0]["result"], Value::Null);
    assert_eq!(body["history"][1]["result"], result);

    let browser = Browser::start(Viewport::Desktop).await;
    let details = job_details(&browser, &server, id).await;
    assert!(
        details.contains("Trace id\n4bf92f3577b34da6a3ce929d0e0e4736"),
        "{details}"
    );
    assert!(
        details.contains(&format!("Trace parent\n{TRACE} (sampled)")),
        "{details}"
    );
    let shown = browser
        .wait_for(
            "the job's result",
            "return document.querySelector('#job-result pre')?.innerText",
        )
        .await;
    let shown: Value = serde_json::from_str(shown.as_str().unwrap()).expect("the result as JSON");
    assert_eq!(shown, result);
    let data = browser
        .execute(
            "return document.querySelector('#job-data pre')?.innerText",
            json!([]),
        )
        .await;
    assert_eq!(
        serde_json::from_str::<Value>(data.as_str().unwrap()).unwrap(),
        json!({"month": "2026-10"}),
        "the data, apart from the result"
    );
    let results = browser
        .wait_for(
            "each attempt's result in the history",
            "const rows = [...document.querySelectorAll('#history tr[data-attempt]')]\
               .map(r => r.querySelector('td[data-label=\"Result\"]').innerText); \
             return rows.length === 2 ? rows : null",
        )
        .await;
    assert_eq!(results[0], json!(""), "the retried attempt has no result");
    assert_eq!(
        serde_json::from_str::<Value>(results[1].as_str().unwrap()).unwrap(),
        result
    );
    assert_eq!(
        browser
            .execute(
                "return document.querySelectorAll('#job b, #history b').length",
                json!([])
            )
            .await,
        json!(0),
        "the result was read as markup"
    );
    browser.screenshot("job-result").await;

    // A job without either shows neither.
    let plain = client.enqueue(Push::new("plain")).await.unwrap().id;
    let details = job_details(&browser, &server, plain).await;
    assert!(!details.contains("Trace"), "{details}");
    assert_eq!(
        browser
            .execute("return document.querySelector('#job-result')", json!([]))
            .await,
        Value::Null
    );
    assert_no_page_errors(&browser, "the job pages with and without a result").await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_job_is_cancelled_then_deleted_from_its_page_each_after_asking() {
    let server = TestServer::spawn();
    let client = server.client();
    let id = client
        .enqueue(Push::new("email.send").queue("email"))
        .await
        .unwrap()
        .id;
    let browser = Browser::start(Viewport::Desktop).await;
    open(&browser, &server, &format!("jobs/{id}")).await;
    wait_state(&browser, id, "queued").await;
    assert_eq!(
        offered(&browser).await,
        json!([
            "track",
            "cancel",
            "delete",
            "priority",
            "reschedule",
            "move"
        ])
    );

    // Asked, and kept: nothing happens.
    browser.click("button[data-action=\"cancel\"]").await;
    let question = browser
        .wait_for(
            "the question before cancelling",
            "return document.querySelector('#confirm-dialog[open]')?.innerText",
        )
        .await;
    assert!(
        question
            .as_str()
            .unwrap()
            .contains(&format!("Cancel job #{id}?")),
        "{question}"
    );
    browser.screenshot("job-cancel-question").await;
    browser.click("#confirm-dialog button[value=no]").await;
    browser
        .wait_for(
            "the question gone",
            "return document.querySelector('#confirm-dialog') === null",
        )
        .await;
    assert_eq!(client.get(id).await.unwrap().state, JobState::Queued);

    // Asked, and confirmed.
    browser.click("button[data-action=\"cancel\"]").await;
    browser
        .click("#confirm-dialog[open] button[value=yes]")
        .await;
    eventually(DEADLINE, "the job cancelled", || async {
        client.get(id).await.unwrap().state == JobState::Cancelled
    })
    .await;
    notice(&browser, true, &format!("job #{id}: cancelled")).await;
    wait_state(&browser, id, "cancelled").await;
    assert_eq!(
        offered(&browser).await,
        json!(["requeue", "track", "delete", "move"]),
        "a cancelled job can run again, be moved or deleted, not cancelled"
    );

    // Deleted, after asking: the page goes back to the list, saying so.
    browser.click("button[data-action=\"delete\"]").await;
    let question = browser
        .wait_for(
            "the question before deleting",
            "return document.querySelector('#confirm-dialog[open]')?.innerText",
        )
        .await;
    assert!(
        question
            .as_str()
            .unwrap()
            .contains(&format!("Delete job #{id}?")),
        "{question}"
    );
    browser
        .click("#confirm-dialog[open] button[value=yes]")
        .await;
    eventually(DEADLINE, "the job deleted", || async {
        client
            .get(id)
            .await
            .is_err_and(|e| e.kind() == ErrorKind::NotFound)
    })
    .await;
    browser
        .wait_for(
            "the jobs list",
            "return location.hash === '#/jobs' && document.querySelector('.view[data-view=\"jobs\"][data-loaded=\"true\"]') !== null",
        )
        .await;
    notice(&browser, true, &format!("job #{id}: deleted")).await;
    assert_no_page_errors(&browser, "cancelling and deleting a job").await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jobs_priority_time_and_queue_are_changed_from_its_page() {
    let server = TestServer::spawn();
    let client = server.client();
    let id = client
        .enqueue(Push::new("report.daily").queue("reports"))
        .await
        .unwrap()
        .id;
    let browser = Browser::start(Viewport::Desktop).await;
    open(&browser, &server, &format!("jobs/{id}")).await;

    browser
        .type_into("#priority-job input[name=priority]", "7")
        .await;
    browser.click("#priority-job button[type=submit]").await;
    eventually(DEADLINE, "the priority changed", || async {
        client.get(id).await.unwrap().priority == 7
    })
    .await;
    notice(&browser, true, "priority set to 7").await;
    browser
        .wait_for(
            "the new priority in the details",
            "return document.querySelector('dl.details')?.innerText.includes('Priority\\n7')",
        )
        .await;

    // A name the engine refuses: its error shows, naming the field, and nothing moves.
    browser
        .type_into("#move-job input[name=queue]", &"q".repeat(300))
        .await;
    browser.click("#move-job button[type=submit]").await;
    let message = notice(&browser, false, "invalid_input").await;
    assert!(message.contains("field: queue"), "{message}");
    assert_eq!(client.get(id).await.unwrap().queue.as_str(), "reports");

    browser
        .type_into("#move-job input[name=queue]", "urgent")
        .await;
    browser.click("#move-job button[type=submit]").await;
    eventually(DEADLINE, "the job moved", || async {
        client.get(id).await.unwrap().queue.as_str() == "urgent"
    })
    .await;
    browser
        .wait_for(
            "the job shown in its new queue",
            "return document.querySelector('#job a[href=\"#/jobs?queue=urgent\"]') !== null",
        )
        .await;

    // Rescheduled to a later time (in the browser's time zone, as the form reads it): scheduled.
    let later = browser
        .execute(
            "const input = document.querySelector('#reschedule-job input[name=run_at]'); \
             input.value = '2030-01-02T03:04'; \
             return new Date(input.value).toISOString()",
            json!([]),
        )
        .await;
    let later: jiff::Timestamp = later.as_str().unwrap().parse().unwrap();
    browser.click("#reschedule-job button[type=submit]").await;
    eventually(DEADLINE, "the job rescheduled", || async {
        let job = client.get(id).await.unwrap();
        job.state == JobState::Scheduled && job.run_at == later
    })
    .await;
    wait_state(&browser, id, "scheduled").await;
    notice(&browser, true, "(scheduled)").await;

    // Running: it can change priority, not time or queue.
    client.reschedule(id, jiff::Timestamp::now()).await.unwrap();
    client.dequeue(take("w", "urgent", 1)).await.unwrap();
    wait_state(&browser, id, "running").await;
    assert_eq!(
        offered(&browser).await,
        json!(["track", "cancel", "delete", "priority"])
    );
    assert_no_page_errors(&browser, "job").await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_action_shows_the_apis_error_and_the_job_as_it_is() {
    let server = TestServer::spawn();
    let client = server.client();
    let id = client
        .enqueue(Push::new("report.daily").queue("reports"))
        .await
        .unwrap()
        .id;
    let browser = Browser::start(Viewport::Desktop).await;
    open(&browser, &server, &format!("jobs/{id}")).await;
    wait_state(&browser, id, "queued").await;

    // The page stops following the server as in a hidden tab (no stream, no timer), so that it still shows the job
    // queued when a worker takes it.
    browser
        .execute(
            "Object.defineProperty(document, 'hidden', { configurable: true, get: () => true }); \
             document.dispatchEvent(new Event('visibilitychange'))",
            json!([]),
        )
        .await;
    browser
        .wait_for(
            "the page to pause",
            "return document.getElementById('live').dataset.state === 'paused'",
        )
        .await;
    client.dequeue(take("w", "reports", 1)).await.unwrap();
    browser
        .execute(
            "document.querySelector('#reschedule-job input[name=run_at]').value = '2030-01-02T03:04'",
            json!([]),
        )
        .await;
    browser.click("#reschedule-job button[type=submit]").await;
    let message = notice(&browser, false, "invalid_state").await;
    assert!(
        message.contains(&format!(
            "job {id} is running; only scheduled and queued jobs can be rescheduled"
        )),
        "{message}"
    );
    // The page looks again: the job is running, and offers no reschedule.
    wait_state(&browser, id, "running").await;
    assert_eq!(
        browser
            .execute(
                "return document.querySelector('#reschedule-job')",
                json!([])
            )
            .await,
        Value::Null
    );
    assert_eq!(client.get(id).await.unwrap().state, JobState::Running);
    browser.screenshot("job-refused").await;
    // Visible again (the next page is the same document: only its address's `#` part changes).
    browser
        .execute(
            "delete document.hidden; document.dispatchEvent(new Event('visibilitychange'))",
            json!([]),
        )
        .await;

    // A refusal the page cannot foresee: running again a job whose unique key a new job holds.
    let key = |name: &str| {
        Push::new(name)
            .queue("exports")
            .unique_key("export:2026-10")
    };
    let done = client.enqueue(key("export")).await.unwrap().id;
    let taken = client.dequeue(take("w", "exports", 1)).await.unwrap();
    client.finish(&taken[0].lease, None).await.unwrap();
    let holder = client.enqueue(key("export")).await.unwrap();
    assert!(!holder.existing);
    open(&browser, &server, &format!("jobs/{done}")).await;
    wait_state(&browser, done, "completed").await;
    browser.click("button[data-action=\"requeue\"]").await;
    let message = notice(&browser, false, "invalid_state").await;
    assert!(
        message.contains(&format!("job {} holds the unique key", holder.id)),
        "{message}"
    );
    assert_eq!(client.get(done).await.unwrap().state, JobState::Completed);
    assert_no_page_errors(&browser, "refused actions").await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pages_fit_a_phone() {
    let server = TestServer::spawn();
    let jobs = populate(&server.client()).await;
    let batch = populate_batch(&server.client(), "exports", true).await;
    server
        .client()
        .set_recurring(template(
            "reports/nightly",
            "report.nightly",
            cairn::Overlap::Skip,
        ))
        .await
        .unwrap();
    let browser = Browser::start(Viewport::Phone).await;
    let job = format!("jobs/{}", jobs.failed.0);
    let batch = format!("batches/{batch}");
    for (route, name) in [
        ("queues", "phone-queues"),
        ("jobs", "phone-jobs"),
        (job.as_str(), "phone-job"),
        ("batches", "phone-batches"),
        (batch.as_str(), "phone-batch"),
        ("recurring", "phone-recurring"),
        ("stats", "phone-stats"),
    ] {
        open(&browser, &server, route).await;
        let sizes = browser
            .execute(
                "return [window.innerWidth, document.documentElement.scrollWidth]",
                json!([]),
            )
            .await;
        assert_eq!(sizes[0], json!(390), "the phone's viewport");
        assert!(
            sizes[1].as_u64() <= sizes[0].as_u64(),
            "#/{route} is wider than the phone: {sizes}"
        );
        browser.screenshot(name).await;
        assert_no_page_errors(&browser, route).await;
    }
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_token_the_page_asks_for_it_then_works() {
    let server = TestServer::spawn_with(&["--token", "dashboard-s3cret-token"]);
    let client = server.client();
    client
        .enqueue(Push::new("email.send").queue("email"))
        .await
        .unwrap();
    let browser = Browser::start(Viewport::Desktop).await;
    browser.goto(&format!("{}/#/queues", server.url())).await;
    let dialog = "return document.querySelector('#token-dialog').open";
    browser.wait_for("the token dialog", dialog).await;
    browser.screenshot("token-dialog").await;

    // A wrong token is refused, and the dialog says so.
    browser.type_into("#token-input", "wrong").await;
    browser.click("#token-form button[type=submit]").await;
    browser
        .wait_for(
            "the dialog again, saying the token was refused",
            "const d = document.querySelector('#token-dialog'); \
             return d.open && !document.querySelector('#token-error').hidden",
        )
        .await;

    browser
        .type_into("#token-input", "dashboard-s3cret-token")
        .await;
    browser.click("#token-form button[type=submit]").await;
    wait_loaded(&browser, "queues").await;
    assert_eq!(
        browser
            .execute("return localStorage.getItem('cairn.token')", json!([]))
            .await,
        json!("dashboard-s3cret-token")
    );
    // Actions carry the token too.
    browser
        .click("button[data-action=\"pause\"][data-queue=\"email\"]")
        .await;
    eventually(DEADLINE, "the queue paused with the token", || async {
        queue_body(&client, "email").await["paused"] == json!(true)
    })
    .await;
    assert_no_page_errors(&browser, "queues with a token").await;
    browser.close().await;
}

/// Whether no control that changes something shows (buttons, the bulk bar, the change forms, row checkboxes).
const NO_CONTROLS: &str = "return [...document.querySelectorAll('[data-action], [data-bulk], form.change, #bulk, \
     input[data-pick]')].every((e) => e.offsetParent === null)";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_token_sees_every_page_without_its_controls_and_the_server_refuses_them_by_hand() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tokens.toml");
    let read_secret = "dashboard-read-only-0123456789";
    std::fs::write(
        &file,
        format!(
            "[[tokens]]\nname = \"on-call\"\nrole = \"read\"\nsecret_sha256 = \"{}\"\n",
            crate::harness::sha256(read_secret)
        ),
    )
    .unwrap();
    let server = TestServer::spawn_with(&[
        "--token",
        "dashboard-admin-0123456789",
        "--token-file",
        file.to_str().unwrap(),
    ]);
    let populated = populate(&server.client()).await;
    let browser = Browser::start(Viewport::Desktop).await;
    browser.goto(&format!("{}/#/queues", server.url())).await;
    browser
        .wait_for(
            "the token dialog",
            "return document.querySelector('#token-dialog').open",
        )
        .await;
    browser.type_into("#token-input", read_secret).await;
    browser.click("#token-form button[type=submit]").await;
    wait_loaded(&browser, "queues").await;
    browser
        .wait_for(
            "the page marked read-only",
            "return document.body.classList.contains('read-only')",
        )
        .await;
    let foot = browser
        .execute(
            "return document.querySelector('#role').innerText",
            json!([]),
        )
        .await;
    assert_eq!(foot, json!("token “on-call”, read: read-only here"));
    for route in [
        "queues".to_owned(),
        "jobs".to_owned(),
        format!("jobs/{}", populated.failed),
        "failures".to_owned(),
        "recurring".to_owned(),
        "batches".to_owned(),
    ] {
        open(&browser, &server, &route).await;
        assert_eq!(
            browser.execute(NO_CONTROLS, json!([])).await,
            json!(true),
            "#/{route}"
        );
        browser
            .screenshot(&format!("read-only-{}", route.replace('/', "-")))
            .await;
    }
    assert_no_page_errors(&browser, "the read-only pages").await;
    browser.close().await;

    // What the page hides, the server refuses when sent by hand with the same token.
    let (status, body) = crate::harness::raw(
        reqwest::Method::POST,
        format!("{}/v1/queues/email/pause", server.url()),
        Some(read_secret),
        Some("{}"),
    )
    .await;
    assert_eq!(status, 403, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("\"on-call\", whose role is read"),
        "{body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_token_sees_the_controls() {
    let server = TestServer::spawn_with(&["--token", "dashboard-admin-0123456789"]);
    server
        .client()
        .enqueue(Push::new("email.send").queue("email"))
        .await
        .unwrap();
    let browser = Browser::start(Viewport::Desktop).await;
    // The token saved in this browser, as the dialog saves it, before the page loads again.
    browser.goto(&format!("{}/#/queues", server.url())).await;
    browser
        .execute(
            "localStorage.setItem('cairn.token', 'dashboard-admin-0123456789')",
            json!([]),
        )
        .await;
    browser.goto("about:blank").await;
    open(&browser, &server, "queues").await;
    browser
        .wait_for(
            "the role asked",
            "return document.body.dataset.role === 'admin'",
        )
        .await;
    let controls = browser
        .execute(
            "return document.querySelectorAll('[data-action]').length",
            json!([]),
        )
        .await;
    assert!(controls.as_u64().unwrap() > 0, "{controls}");
    assert_eq!(browser.execute(NO_CONTROLS, json!([])).await, json!(false));
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_search_shows_the_apis_error() {
    let server = TestServer::spawn();
    populate(&server.client()).await;
    let browser = Browser::start(Viewport::Desktop).await;
    open(&browser, &server, "jobs").await;

    browser
        .type_into("#job-search input[name=name]", "email[")
        .await;
    browser.click("#job-search button[type=submit]").await;
    let message = browser
        .wait_for(
            "the API's error under the search form",
            "return document.querySelector('#search-error')?.innerText",
        )
        .await;
    let message = message.as_str().unwrap();
    assert!(message.contains("invalid_input"), "{message}");
    assert!(message.contains("never closed"), "{message}");
    assert_eq!(
        browser
            .execute(
                "return document.querySelector('#job-search input[name=name]').getAttribute('aria-invalid')",
                json!([])
            )
            .await,
        json!("true")
    );
    browser.screenshot("search-error").await;

    // A search that the API accepts clears it.
    browser
        .type_into("#job-search input[name=name]", "email.*")
        .await;
    browser.click("#job-search button[type=submit]").await;
    browser
        .wait_for(
            "the jobs named email.*",
            "return document.querySelectorAll('tr[data-job-id]').length > 0 && !document.querySelector('#search-error')",
        )
        .await;
    assert_no_page_errors(&browser, "jobs").await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_needs_no_token_and_the_api_still_does() {
    let server = TestServer::spawn_with(&["--token", "dashboard-s3cret-token"]);
    let http = crate::harness::http();
    for (path, content_type) in [
        ("/", "text/html; charset=utf-8"),
        ("/assets/js/app.js", "text/javascript; charset=utf-8"),
        ("/assets/style.css", "text/css; charset=utf-8"),
        ("/assets/icon.svg", "image/svg+xml"),
    ] {
        let response = http
            .get(format!("{}{path}", server.url()))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 200, "{path}");
        assert_eq!(response.headers()["content-type"], content_type, "{path}");
        assert_eq!(response.headers()["cache-control"], "no-cache", "{path}");
        // The browser may keep what it has while the server says it did not change.
        let etag = response.headers()["etag"].clone();
        let again = http
            .get(format!("{}{path}", server.url()))
            .header("If-None-Match", etag)
            .send()
            .await
            .unwrap();
        assert_eq!(again.status().as_u16(), 304, "{path}");
    }
    let api = http
        .get(format!("{}/v1/queues", server.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(api.status().as_u16(), 401);
    let missing = http
        .get(format!("{}/assets/nothing.js", server.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status().as_u16(), 404);
}

/// Watches the page's calls from its start: `probe.requests` lists each (`url`, and `lastEventId` sent); the event
/// stream's body passes through a stream of the test's, which `probe.cut()` breaks (as a dropped connection) and
/// `probe.end()` ends (as a server that stops), and into which `probe.inject(text)` writes (as events the server
/// sent); while `probe.refuse` is set, new connections to the stream fail; while `probe.older` is set, the stream
/// refuses the kinds of events older servers do not know, as they do.
const PROBE: &str = r#"
window.probe = { requests: [], streams: [], refuse: false };
// Streams the page gave up on are errored already, and stay so.
const each = (f) => probe.streams.splice(0).forEach((s) => { try { f(s); } catch {} });
probe.cut = () => each((s) => s.error(new TypeError("cut by the test")));
probe.end = () => each((s) => s.close());
probe.inject = (text) => probe.streams.forEach((s) => { try { s.inject(text); } catch {} });
probe.refreshes = () => probe.requests.filter((r) => !r.url.startsWith("/v1/events")).length;
probe.streamed = () => probe.requests.filter((r) => r.url.startsWith("/v1/events"));
const passOn = window.fetch.bind(window);
window.fetch = async (input, init = {}) => {
  const url = String(input);
  const headers = init.headers || {};
  probe.requests.push({ url, lastEventId: headers["Last-Event-ID"] ?? null });
  if (!url.startsWith("/v1/events")) return passOn(input, init);
  if (probe.refuse) throw new TypeError("refused by the test");
  const newer = /[?&]kinds=[^&]*\b(moved|rescheduled|prioritized|deleted|queue_changed|promoted)\b/.exec(decodeURIComponent(url));
  if (probe.older && newer) {
    const error = { kind: "invalid_input", field: "kinds", message: `kinds: must name kinds of events (added, finished, …), got "${newer[1]}"` };
    return new Response(JSON.stringify({ error }), { status: 400, headers: { "Content-Type": "application/json" } });
  }
  const response = await passOn(input, init);
  if (!response.ok) return response;
  const reader = response.body.getReader();
  const body = new ReadableStream({
    start(controller) {
      probe.streams.push({
        error: (e) => controller.error(e),
        close: () => { controller.close(); reader.cancel(); },
        inject: (text) => controller.enqueue(new TextEncoder().encode(text)),
      });
    },
    async pull(controller) {
      const { value, done } = await reader.read();
      if (done) controller.close();
      else controller.enqueue(value);
    },
    cancel(reason) {
      return reader.cancel(reason);
    },
  });
  return new Response(body, { status: response.status, headers: response.headers });
};
"#;

/// Waits until the indicator in the bar says `state` (`live`, `polling`, `paused`, `error`).
async fn wait_live_state(browser: &Browser, state: &str) {
    browser
        .wait_for_within(
            Duration::from_secs(30),
            &format!("the page {state}"),
            &format!("return document.getElementById('live').dataset.state === '{state}'"),
        )
        .await;
}

/// Lets longer than the poll interval (3 s) pass in the page, with a timer of the page's own.
async fn let_a_poll_interval_pass(browser: &Browser) {
    browser
        .execute(
            "window.intervalOver = false; setTimeout(() => { window.intervalOver = true; }, 4500)",
            json!([]),
        )
        .await;
    browser
        .wait_for(
            "a poll interval to pass",
            "return window.intervalOver === true",
        )
        .await;
}

/// Waits until job `id`'s row shows on the jobs list.
async fn wait_row(browser: &Browser, id: JobId) {
    browser
        .wait_for(
            &format!("job {id}'s row"),
            &format!("return document.querySelector('tr[data-job-id=\"{id}\"]') !== null"),
        )
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_follows_the_event_stream_with_no_timer_and_polls_while_it_is_down() {
    let server = TestServer::spawn();
    let client = server.client();
    let browser = Browser::start(Viewport::Desktop).await;
    browser.before_each_page(PROBE).await;
    open(&browser, &server, "jobs").await;
    wait_live_state(&browser, "live").await;

    // Nothing happens: nothing is asked, though more than a poll interval passes.
    browser
        .execute("probe.requests.length = 0", json!([]))
        .await;
    let_a_poll_interval_pass(&browser).await;
    assert_eq!(
        browser.execute("return probe.requests", json!([])).await,
        json!([]),
        "a request while nothing happened and the stream was up"
    );

    // A job pushed: the stream says so, and the list shows it.
    let first = client
        .enqueue(Push::new("email.send").queue("email"))
        .await
        .unwrap()
        .id;
    wait_row(&browser, first).await;
    assert!(
        browser
            .execute("return probe.refreshes()", json!([]))
            .await
            .as_u64()
            .unwrap()
            > 0
    );
    assert_eq!(
        browser
            .execute("return probe.streamed().length", json!([]))
            .await,
        json!(0),
        "the stream connected again"
    );

    // The stream breaks and cannot connect again: the page polls, and shows a job the stream could not tell of.
    browser
        .execute("probe.refuse = true; probe.cut()", json!([]))
        .await;
    wait_live_state(&browser, "polling").await;
    let second = client
        .enqueue(Push::new("email.send").queue("email"))
        .await
        .unwrap()
        .id;
    wait_row(&browser, second).await;

    // Back: it resumes after the last event it had, the first job's push, and polls no more.
    let log = client
        .answer(cairn::ActivityFilter {
            job: Some(first),
            ..Default::default()
        })
        .await
        .unwrap();
    let added = log
        .events
        .iter()
        .find(|e| e.event == "added")
        .expect("the first job's push in the log")
        .id;
    browser
        .execute("probe.requests.length = 0; probe.refuse = false", json!([]))
        .await;
    wait_live_state(&browser, "live").await;
    let streamed = browser.execute("return probe.streamed()", json!([])).await;
    let last = streamed.as_array().unwrap().last().unwrap();
    assert_eq!(last["lastEventId"], json!(added.to_string()), "{streamed}");
    // The second job's push comes again, and the page refreshes for it once.
    browser
        .wait_for(
            "a refresh after the stream connected again",
            "const r = probe.requests; \
             const i = r.findLastIndex((x) => x.url.startsWith('/v1/events')); \
             return r.slice(i + 1).some((x) => x.url.startsWith('/v1/jobs'))",
        )
        .await;
    browser
        .execute("probe.requests.length = 0", json!([]))
        .await;
    let_a_poll_interval_pass(&browser).await;
    assert_eq!(
        browser.execute("return probe.requests", json!([])).await,
        json!([]),
        "polling went on once the stream was back"
    );

    // Hidden, the page asks nothing and follows nothing; shown again, it looks at once and resumes after the last
    // event it had.
    browser
        .execute(
            "Object.defineProperty(document, 'hidden', { configurable: true, get: () => true }); \
             document.dispatchEvent(new Event('visibilitychange')); \
             probe.requests.length = 0",
            json!([]),
        )
        .await;
    wait_live_state(&browser, "paused").await;
    let hidden = client
        .enqueue(Push::new("email.send").queue("email"))
        .await
        .unwrap()
        .id;
    let_a_poll_interval_pass(&browser).await;
    assert_eq!(
        browser.execute("return probe.requests", json!([])).await,
        json!([]),
        "a request from a hidden page"
    );
    browser
        .execute(
            "delete document.hidden; document.dispatchEvent(new Event('visibilitychange'))",
            json!([]),
        )
        .await;
    wait_row(&browser, hidden).await;
    wait_live_state(&browser, "live").await;
    let streamed = browser.execute("return probe.streamed()", json!([])).await;
    assert_eq!(streamed.as_array().unwrap().len(), 1, "{streamed}");
    assert!(
        streamed[0]["lastEventId"].is_string(),
        "resumed after an event: {streamed}"
    );

    // The server ends the stream (as when it stops): the page connects again after a second.
    browser.execute("probe.end()", json!([])).await;
    browser
        .wait_for(
            "a new connection to the stream",
            "return probe.streamed().length > 0",
        )
        .await;
    wait_live_state(&browser, "live").await;
    let third = client
        .enqueue(Push::new("email.send").queue("email"))
        .await
        .unwrap()
        .id;
    wait_row(&browser, third).await;
    browser.screenshot("jobs-live").await;
    assert_no_page_errors(&browser, "jobs, following the stream").await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_event_streams_parser_reads_frames_split_anywhere() {
    let server = TestServer::spawn();
    let browser = Browser::start(Viewport::Desktop).await;
    open(&browser, &server, "queues").await;
    // Every way of cutting the bytes in three gives the events of the whole: lines ended by CR LF, LF or CR alone,
    // comments, multi-line data, an id that carries over, an event without data (none), a character of three bytes,
    // and an event the stream ends in the middle of (dropped).
    let checked = browser
        .execute(
            r#"
            return import("/assets/js/live.js").then(({ SseParser }) => {
              const text = ": keep-alive\r\nid: 7\r\nevent: added\r\ndata: {\"a\":1}\r\ndata:second\r\n\r\n"
                + "id: 8\ndata: é€\n\n:another\n\nevent: nothing\n\n"
                + "data\rdata:  two spaces\r\rid: 9\nevent: unfinished\ndata: x";
              const bytes = new TextEncoder().encode(text);
              const expected = [
                { id: "7", event: "added", data: "{\"a\":1}\nsecond" },
                { id: "8", event: "message", data: "é€" },
                { id: "8", event: "message", data: "\n two spaces" },
              ];
              const whole = new SseParser().push(bytes);
              if (JSON.stringify(whole) !== JSON.stringify(expected)) return `whole: ${JSON.stringify(whole)}`;
              let cases = 0;
              for (let i = 0; i <= bytes.length; i += 1) {
                for (let j = i; j <= bytes.length; j += 1) {
                  const parser = new SseParser();
                  const got = [...parser.push(bytes.slice(0, i)), ...parser.push(bytes.slice(i, j)), ...parser.push(bytes.slice(j))];
                  if (JSON.stringify(got) !== JSON.stringify(expected)) return `cut at ${i} and ${j}: ${JSON.stringify(got)}`;
                  if (parser.lastId !== "9") return `cut at ${i} and ${j}: last id ${parser.lastId}`;
                  cases += 1;
                }
              }
              return cases;
            });
            "#,
            json!([]),
        )
        .await;
    assert!(checked.as_u64().is_some_and(|n| n > 1000), "{checked}");
    assert_no_page_errors(&browser, "the parser's test").await;
    browser.close().await;
}

/// A queue's count of jobs in `state`, over HTTP (0 for a queue not listed).
async fn queue_count(client: &Client, queue: &str, state: &str) -> u64 {
    let body = client.answer(cairn::ListQueues).await.unwrap();
    body.queues
        .into_iter()
        .find(|q| q.queue == queue)
        .map(|q| serde_json::to_value(q).unwrap()[state].as_u64().unwrap())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_job_of_a_filter_is_cancelled_in_one_bulk_action() {
    let server = TestServer::spawn();
    let client = server.client();
    for _ in 0..10 {
        let batch = (0..1000)
            .map(|i| {
                Push::new("export.row")
                    .queue("exports")
                    .data(json!({ "row": i }))
            })
            .collect();
        client.enqueue_batch(batch).await.unwrap();
    }
    for _ in 0..2 {
        client
            .enqueue(Push::new("email.send").queue("email"))
            .await
            .unwrap();
    }
    let browser = Browser::start(Viewport::Desktop).await;
    browser.before_each_page(PROBE).await;
    open(&browser, &server, "jobs?queue=exports&state=queued").await;
    wait_live_state(&browser, "live").await;

    // The page's 50, then every job of the filter.
    browser.click("#bulk-page").await;
    browser
        .wait_for(
            "the page's jobs selected",
            "return document.querySelectorAll('input[data-pick]:checked').length === 50 \
             && document.querySelector('#bulk-count').innerText === '50 selected'",
        )
        .await;
    let offer = browser
        .wait_for(
            "the offer to select all 10,000",
            "const b = document.querySelector('#bulk-all'); \
             return b.checkVisibility() && b.innerText.includes('10,000') ? b.innerText : null",
        )
        .await;
    assert_eq!(offer, json!("Select all 10,000 jobs matching this filter"));
    browser.click("#bulk-all").await;
    browser
        .wait_for(
            "all of them selected",
            "return document.querySelector('#bulk-count').innerText === 'All 10,000 jobs matching this filter are selected.'",
        )
        .await;
    browser.screenshot("jobs-bulk-all").await;

    browser.click("button[data-bulk=cancel]").await;
    let question = browser
        .wait_for(
            "the question before cancelling",
            "return document.querySelector('#confirm-dialog[open]')?.innerText",
        )
        .await;
    let question = question.as_str().unwrap();
    assert!(
        question.contains("Cancel all 10,000 jobs matching this filter?"),
        "{question}"
    );
    assert!(
        question.contains("The filter: state queued, queue exports."),
        "{question}"
    );
    browser.screenshot("jobs-bulk-question").await;
    browser
        .execute("probe.requests.length = 0", json!([]))
        .await;
    browser
        .click("#confirm-dialog[open] button[value=yes]")
        .await;
    browser
        .wait_for_within(
            Duration::from_secs(120),
            "the count the server answered",
            "return document.querySelector('#notice.ok:not([hidden])')?.innerText.includes('Cancelled 10,000 jobs')",
        )
        .await;
    let bulk = browser
        .execute(
            "return probe.requests.filter((r) => r.url === '/v1/jobs/bulk').length",
            json!([]),
        )
        .await;
    assert_eq!(bulk, json!(1), "one call for the whole filter");
    assert_eq!(queue_count(&client, "exports", "cancelled").await, 10_000);
    assert_eq!(queue_count(&client, "exports", "queued").await, 0);
    assert_eq!(
        queue_count(&client, "email", "queued").await,
        2,
        "another queue's jobs"
    );
    browser
        .wait_for(
            "the emptied list, nothing selected",
            "return document.querySelector('#job-list')?.innerText.includes('No jobs match') \
             && !document.querySelector('#bulk').checkVisibility()",
        )
        .await;
    browser.screenshot("jobs-bulk-done").await;
    assert_no_page_errors(&browser, "a bulk cancel").await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selected_jobs_only_are_moved_and_cancelled_on_a_phone() {
    let server = TestServer::spawn();
    let client = server.client();
    let mut ids = Vec::new();
    for i in 0..6 {
        let push = Push::new("email.send")
            .queue("mail")
            .data(json!({ "n": i }));
        ids.push(client.enqueue(push).await.unwrap().id);
    }
    // The oldest one completes.
    let taken = client.dequeue(take("w", "mail", 1)).await.unwrap();
    assert_eq!(taken[0].lease.job, ids[0]);
    client.finish(&taken[0].lease, None).await.unwrap();
    let browser = Browser::start(Viewport::Phone).await;
    open(&browser, &server, "jobs?queue=mail").await;
    for id in &ids {
        wait_row(&browser, *id).await;
    }
    let pick = |id: JobId| format!("input[data-pick=\"{id}\"]");

    // Two of them, moved.
    browser.click(&pick(ids[1])).await;
    browser.click(&pick(ids[2])).await;
    browser
        .wait_for(
            "two selected",
            "return document.querySelector('#bulk-count').innerText === '2 selected'",
        )
        .await;
    assert_eq!(
        browser
            .execute(
                "return document.querySelector('#bulk-all').checkVisibility()",
                json!([])
            )
            .await,
        json!(false),
        "no offer to select more than the page holds"
    );
    browser
        .type_into("#bulk-move input[name=queue]", "later")
        .await;
    browser.screenshot("phone-jobs-bulk").await;
    browser.click("#bulk-move button[type=submit]").await;
    notice(&browser, true, "Moved 2 jobs to queue later").await;
    for (i, id) in ids.iter().enumerate() {
        let queue = client.get(*id).await.unwrap().queue;
        let expected = if i == 1 || i == 2 { "later" } else { "mail" };
        assert_eq!(queue.as_str(), expected, "job {id}");
    }
    browser
        .wait_for(
            "the moved jobs gone from the list, nothing selected",
            &format!(
                "return document.querySelector('{}') === null && document.querySelector('#bulk-count').innerText === ''",
                pick(ids[1])
            ),
        )
        .await;

    // The completed one and a queued one, cancelled after asking: the completed one is skipped.
    browser.click(&pick(ids[0])).await;
    browser.click(&pick(ids[3])).await;
    browser.click("button[data-bulk=cancel]").await;
    let question = browser
        .wait_for(
            "the question before cancelling",
            "return document.querySelector('#confirm-dialog[open]')?.innerText",
        )
        .await;
    assert!(
        question
            .as_str()
            .unwrap()
            .contains("Cancel 2 selected jobs?"),
        "{question}"
    );
    browser
        .click("#confirm-dialog[open] button[value=yes]")
        .await;
    let said = notice(&browser, true, "Cancelled 1 job").await;
    assert!(said.contains("skipped 1 job"), "{said}");
    let state = |i: usize| {
        let client = client.clone();
        let id = ids[i];
        async move { client.get(id).await.unwrap().state }
    };
    assert_eq!(state(0).await, JobState::Completed);
    assert_eq!(state(3).await, JobState::Cancelled);
    for i in [4, 5] {
        assert_eq!(state(i).await, JobState::Queued, "job {}", ids[i]);
    }
    let sizes = browser
        .execute(
            "return [window.innerWidth, document.documentElement.scrollWidth]",
            json!([]),
        )
        .await;
    assert!(
        sizes[1].as_u64() <= sizes[0].as_u64(),
        "wider than the phone: {sizes}"
    );
    assert_no_page_errors(&browser, "bulk actions on a phone").await;
    browser.close().await;
}

/// The axis labels of every chart on the page that stick out of their chart, as `label: how` (none: an empty list).
const LABELS_OUTSIDE: &str = "
    const out = [];
    for (const chart of document.querySelectorAll('svg.chart')) {
      const width = chart.viewBox.baseVal.width;
      for (const text of chart.querySelectorAll('text.axis')) {
        const box = text.getBBox();
        if (box.x < 0 || box.x + box.width > width) out.push(`${text.textContent}: ${box.x} to ${box.x + box.width} of ${width}`);
      }
    }
    return out;";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graph_labels_fit_with_waits_of_a_year_and_more() {
    let server = TestServer::spawn();
    let client = server.client();
    // Jobs that were due 472 days and 5 hours ago, and 3 days ago, taken now: waits the axes must label.
    let now = jiff::Timestamp::now();
    for hours in [472 * 24 + 5, 72] {
        let due = now - jiff::SignedDuration::from_hours(hours);
        client
            .enqueue(Push::new("report.yearly").queue("reports").run_at(due))
            .await
            .unwrap();
    }
    for taken in client.dequeue(take("w", "reports", 2)).await.unwrap() {
        client.finish(&taken.lease, None).await.unwrap();
    }
    for (viewport, name) in [
        (Viewport::Desktop, "stats"),
        (Viewport::Phone, "phone-stats"),
    ] {
        let browser = Browser::start(viewport).await;
        open(&browser, &server, "stats").await;
        let top = browser
            .wait_for(
                "the wait-time chart's axis",
                "const chart = document.querySelector('svg.chart[aria-label=\"wait time\"]'); \
                 const labels = chart ? [...chart.querySelectorAll('text.axis')].map((t) => t.textContent) : []; \
                 return labels.includes('500 d') ? labels : null",
            )
            .await;
        assert!(
            !top.to_string().contains(" h\""),
            "one unit on the axis: {top}"
        );
        for (chart, shot) in [
            ("wait time", "waits"),
            ("Wait time distribution", "histograms"),
        ] {
            browser
                .execute(
                    &format!("document.querySelector('svg.chart[aria-label=\"{chart}\"]').scrollIntoView()"),
                    json!([]),
                )
                .await;
            browser.screenshot(&format!("{name}-{shot}")).await;
        }
        let outside = browser.execute(LABELS_OUTSIDE, json!([])).await;
        assert_eq!(outside, json!([]), "labels outside their chart ({name})");
        let histogram = browser
            .execute(
                "return [...document.querySelectorAll('svg.chart[aria-label=\"Wait time distribution\"] text.axis')].map((t) => t.textContent)",
                json!([]),
            )
            .await;
        assert!(
            histogram.to_string().contains(" d\""),
            "a bucket of days under the histogram: {histogram}"
        );
        assert_no_page_errors(&browser, name).await;
        browser.close().await;
    }
}

/// A recurring template of a job in `reports`, at 04:00 in Berlin (no slot comes during a test), with `overlap`.
fn template(key: &str, name: &str, overlap: cairn::Overlap) -> cairn::Recurring {
    cairn::Recurring {
        key: key.to_owned(),
        cron: "0 4 * * *".into(),
        time_zone: "Europe/Berlin".into(),
        missed: cairn::MissedSlots::Skip,
        overlap,
        job: Push::new(name).queue("reports"),
    }
}

/// The template `key` as the API lists it.
async fn template_info(client: &Client, key: &str) -> Option<cairn::RecurringInfo> {
    client
        .recurring()
        .await
        .unwrap()
        .into_iter()
        .find(|t| t.key == key)
}

/// The selector of template `key`'s row.
fn template_row(key: &str) -> String {
    format!("tr[data-key={key:?}]")
}

/// The jobs named `name`, newest first, over HTTP.
async fn jobs_named(client: &Client, name: &str) -> Vec<JobId> {
    let page = client
        .list(cairn::JobFilter {
            name: Some(name.to_owned()),
            ..Default::default()
        })
        .await
        .unwrap();
    page.jobs.iter().map(|job| job.id).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recurring_templates_are_paused_run_now_and_removed_from_their_page() {
    let server = TestServer::spawn();
    let client = server.client();
    // Keys with a '/', a space and a '?', which each path must carry percent-encoded.
    let nightly = "reports/nightly export?";
    let single = "cleanup/one at a time";
    client
        .set_recurring(template(nightly, "report.nightly", cairn::Overlap::Allow))
        .await
        .unwrap();
    client
        .set_recurring(template(single, "cleanup", cairn::Overlap::Skip))
        .await
        .unwrap();
    let browser = Browser::start(Viewport::Desktop).await;
    open(&browser, &server, "recurring").await;
    let row = template_row(nightly);
    let cells = browser
        .wait_for(
            "the template's row",
            &format!(
                "const r = document.querySelector({row:?}); \
                 return r && [...r.cells].slice(0, 5).map(c => c.innerText.trim())"
            ),
        )
        .await;
    assert_eq!(
        cells[0],
        json!(format!("{nightly}\nmakes report.nightly in reports"))
    );
    assert_eq!(cells[1], json!("0 4 * * * Europe/Berlin"));
    assert_eq!(cells[2], json!("allow"));
    assert_eq!(cells[4], json!("never"), "no slot has run yet");
    assert_eq!(
        browser
            .execute(
                "return document.querySelectorAll('tr[data-key]').length",
                json!([])
            )
            .await,
        json!(2)
    );
    browser.screenshot("recurring").await;

    // Paused: the page and the API agree; then resumed.
    browser
        .click(&format!("{row} button[data-action=pause]"))
        .await;
    eventually(DEADLINE, "the template paused", || async {
        template_info(&client, nightly).await.unwrap().paused
    })
    .await;
    browser
        .wait_for(
            "the template shown paused",
            &format!(
                "const r = document.querySelector({:?}); \
                 return r?.querySelector('button[data-action=resume]') && r.cells[3].innerText === 'paused'",
                format!("{row}[data-paused=\"true\"]")
            ),
        )
        .await;
    notice(&browser, true, &format!("{nightly}: paused")).await;
    browser
        .click(&format!("{row} button[data-action=resume]"))
        .await;
    eventually(DEADLINE, "the template resumed", || async {
        !template_info(&client, nightly).await.unwrap().paused
    })
    .await;
    browser
        .wait_for(
            "the template shown running",
            &format!(
                "return document.querySelector({:?}) !== null",
                format!("{row}[data-paused=\"false\"] button[data-action=pause]")
            ),
        )
        .await;

    // Run now: the job is made, and linked from the template's row.
    browser
        .click(&format!("{row} button[data-action=run]"))
        .await;
    let made = browser
        .wait_for(
            "the job run now, linked",
            &format!("return document.querySelector({row:?})?.querySelector('a[data-last-job]')?.dataset.lastJob"),
        )
        .await;
    let made = JobId(made.as_str().unwrap().parse().unwrap());
    notice(
        &browser,
        true,
        &format!("{nightly}: made job #{made} (queued)"),
    )
    .await;
    assert_eq!(jobs_named(&client, "report.nightly").await, vec![made]);
    // Loaded afresh (what the page made itself forgotten), it still links it: the API names a template's last job.
    browser.execute("location.reload()", json!([])).await;
    let linked = browser
        .wait_for(
            "the last job linked after a reload",
            &format!("return document.querySelector({row:?})?.querySelector('a[data-last-job]')?.dataset.lastJob"),
        )
        .await;
    assert_eq!(linked, json!(made.0.to_string()));
    let job = client.get(made).await.unwrap();
    assert_eq!(
        (job.queue.as_str(), job.state),
        ("reports", JobState::Queued)
    );

    // Under skip, a second run while the first is live is refused: the server's message shows, nothing is made.
    let single_row = template_row(single);
    browser
        .click(&format!("{single_row} button[data-action=run]"))
        .await;
    notice(&browser, true, &format!("{single}: made job #")).await;
    let first = jobs_named(&client, "cleanup").await;
    assert_eq!(first.len(), 1);
    browser
        .click(&format!("{single_row} button[data-action=run]"))
        .await;
    let message = notice(&browser, false, "invalid_state").await;
    assert!(
        message.contains(&format!(
            "recurring template {single:?}: its previous run, job {}, is still live, and its overlap policy is skip",
            first[0]
        )),
        "{message}"
    );
    assert_eq!(jobs_named(&client, "cleanup").await, first);

    // Removed, after asking.
    browser
        .click(&format!("{row} button[data-action=remove]"))
        .await;
    let question = browser
        .wait_for(
            "the question before removing",
            "return document.querySelector('#confirm-dialog[open]')?.innerText",
        )
        .await;
    assert!(
        question
            .as_str()
            .unwrap()
            .contains(&format!("Remove the template {nightly}?")),
        "{question}"
    );
    browser
        .click("#confirm-dialog[open] button[value=yes]")
        .await;
    eventually(DEADLINE, "the template removed", || async {
        template_info(&client, nightly).await.is_none()
    })
    .await;
    browser
        .wait_for(
            "the template's row gone",
            &format!(
                "return document.querySelector({row:?}) === null \
                 && document.querySelector({single_row:?}) !== null"
            ),
        )
        .await;
    notice(&browser, true, &format!("{nightly}: removed")).await;
    assert!(client.get(made).await.is_ok(), "the job it made stays");
    assert_no_page_errors(&browser, "recurring templates").await;
    browser.close().await;
}

/// Batch `id` as the API shows it.
async fn batch_body(client: &Client, id: cairn::BatchId) -> Value {
    serde_json::to_value(client.answer(cairn::GetBatch { batch: id }).await.unwrap()).unwrap()
}

/// Waits until the batch's page shows `counts` (`[total, pending, completed, failed, cancelled]`) in its tiles and
/// its progress bar, and its state badge says `state`.
async fn wait_counts(browser: &Browser, counts: [u64; 5], state: &str) {
    let expected = serde_json::to_string(&counts).unwrap();
    browser
        .wait_for(
            &format!("the batch's counts {expected}, {state}"),
            &format!(
                "const tile = (k) => document.querySelector(`#batch-summary [data-count=${{k}}] .tile-value`)?.innerText; \
                 const bar = document.querySelector('#batch-summary .progress')?.dataset ?? {{}}; \
                 const keys = ['total', 'pending', 'completed', 'failed', 'cancelled']; \
                 const tiles = JSON.stringify(keys.map((k) => Number(tile(k)))); \
                 const bars = JSON.stringify(keys.map((k) => Number(bar[k]))); \
                 return tiles === '{expected}' && bars === '{expected}' \
                   && document.querySelector('#batch-head h1 .badge')?.innerText === '{state}'"
            ),
        )
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batchs_page_follows_its_counts_live_and_links_its_callback() {
    let server = TestServer::spawn();
    let client = server.client();
    let parts = (0..3)
        .map(|i| {
            Push::new("export.part")
                .queue("exports")
                .data(json!({ "part": i }))
        })
        .collect();
    let created = client
        .create_batch(
            cairn::CreateBatch::new(parts)
                .on_complete(Push::new("export.done").queue("callbacks"))
                .on_success(Push::new("export.mail").queue("callbacks"))
                .description("October's export, in <b>three</b> parts"),
        )
        .await
        .unwrap();
    let id = created.batch;
    let browser = Browser::start(Viewport::Desktop).await;

    // Listed, newest first, with its progress.
    open(&browser, &server, "batches").await;
    let row = browser
        .wait_for(
            "the batch's row",
            &format!(
                "const r = document.querySelector('tr[data-batch=\"{id}\"]'); \
                 return r && [r.dataset.state, r.querySelector('.progress').dataset.total, \
                   r.querySelector('.progress').dataset.pending, r.cells[0].innerText]"
            ),
        )
        .await;
    assert_eq!(
        row,
        json!([
            "running",
            "3",
            "3",
            format!("#{id}\nOctober's export, in <b>three</b> parts")
        ])
    );
    browser.screenshot("batches").await;

    // Its page, which follows its jobs as they end through the API, without a reload.
    browser.click(&format!("a[href=\"#/batches/{id}\"]")).await;
    wait_loaded(&browser, &format!("batches/{id}")).await;
    browser
        .execute("window.notReloaded = true", json!([]))
        .await;
    wait_counts(&browser, [3, 3, 0, 0, 0], "running").await;
    assert_eq!(
        browser
            .execute(
                "return document.querySelectorAll('#batch-jobs tr[data-job-id]').length",
                json!([])
            )
            .await,
        json!(3)
    );
    wait_live_state(&browser, "live").await;
    let claimed = client.dequeue(take("w", "exports", 3)).await.unwrap();
    client.finish(&claimed[0].lease, None).await.unwrap();
    wait_counts(&browser, [3, 2, 1, 0, 0], "running").await;
    client.finish(&claimed[1].lease, None).await.unwrap();
    wait_counts(&browser, [3, 1, 2, 0, 0], "running").await;
    browser
        .wait_for(
            "no callback made yet",
            "return document.querySelector('[data-callback=on_complete]')?.innerText.includes('not made yet')",
        )
        .await;
    let failed = claimed[2].lease.job;
    client
        .fail(&claimed[2].lease, "disk-full", "no space left")
        .await
        .unwrap();
    wait_counts(&browser, [3, 0, 2, 1, 0], "completed").await;

    // Every job ended: on_complete made its job, linked; on_success made none (one failed).
    let body = batch_body(&client, id).await;
    let callback = body["on_complete"]["job"]
        .as_i64()
        .expect("on_complete's job, made");
    assert_eq!(body["on_success"]["job"], Value::Null);
    let linked = browser
        .wait_for(
            "the callback's job linked",
            "return document.querySelector('[data-callback=on_complete] a[data-callback-job]')?.getAttribute('href')",
        )
        .await;
    assert_eq!(linked, json!(format!("#/jobs/{callback}")));
    assert!(
        browser
            .execute(
                "return document.querySelector('[data-callback=on_success]').innerText",
                json!([])
            )
            .await
            .as_str()
            .unwrap()
            .contains("export.mail in callbacks: not made yet")
    );
    assert_eq!(
        browser
            .execute(
                "return document.querySelectorAll('#batch-summary b').length",
                json!([])
            )
            .await,
        json!(0),
        "the description was read as markup"
    );
    browser.screenshot("batch-completed").await;

    // Its failed job retried from the page: one call, and it is pending again.
    browser.click("#batch-head button[data-action=retry]").await;
    notice(&browser, true, &format!("batch #{id}: retried 1 job")).await;
    assert_eq!(client.get(failed).await.unwrap().state, JobState::Queued);
    wait_counts(&browser, [3, 1, 2, 0, 0], "completed").await;
    assert_eq!(
        browser
            .execute("return window.notReloaded === true", json!([]))
            .await,
        json!(true),
        "the page was reloaded"
    );

    // A job's page links its batch.
    browser
        .click(&format!("#batch-jobs a[href=\"#/jobs/{failed}\"]"))
        .await;
    wait_loaded(&browser, &format!("jobs/{failed}")).await;
    let link = browser
        .wait_for(
            "the job's batch linked",
            "return document.querySelector('dl.details a[data-batch]')?.getAttribute('href')",
        )
        .await;
    assert_eq!(link, json!(format!("#/batches/{id}")));
    assert_no_page_errors(&browser, "a batch's page").await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batchs_remaining_jobs_are_cancelled_and_an_open_batch_closed_from_its_page() {
    let server = TestServer::spawn();
    let client = server.client();
    let imports = (0..4)
        .map(|i| {
            Push::new("import.row")
                .queue("imports")
                .data(json!({ "row": i }))
        })
        .collect();
    let running = client
        .create_batch(cairn::CreateBatch::new(imports))
        .await
        .unwrap()
        .batch;
    let first = client.dequeue(take("w", "imports", 1)).await.unwrap();
    client.finish(&first[0].lease, None).await.unwrap();
    let open_batch = client
        .create_batch(cairn::CreateBatch::new(vec![Push::new("sync").queue("sync")]).open())
        .await
        .unwrap()
        .batch;
    let browser = Browser::start(Viewport::Desktop).await;
    browser.before_each_page(PROBE).await;

    // The list by state: the open batch only.
    open(&browser, &server, "batches?state=open").await;
    let listed = browser
        .wait_for(
            "the open batches",
            "const ids = [...document.querySelectorAll('tr[data-batch]')].map(r => r.dataset.batch); \
             return ids.length ? ids : null",
        )
        .await;
    assert_eq!(listed, json!([open_batch.to_string()]));

    // The remaining jobs cancelled, after asking, in one call; the count shown is the server's.
    open(&browser, &server, &format!("batches/{running}")).await;
    wait_counts(&browser, [4, 3, 1, 0, 0], "running").await;
    browser
        .click("#batch-head button[data-action=cancel]")
        .await;
    let question = browser
        .wait_for(
            "the question before cancelling",
            "return document.querySelector('#confirm-dialog[open]')?.innerText",
        )
        .await;
    let question = question.as_str().unwrap();
    assert!(
        question.contains(&format!("Cancel the remaining jobs of batch #{running}?")),
        "{question}"
    );
    assert!(question.contains("Its 3 jobs not ended"), "{question}");
    browser
        .execute("probe.requests.length = 0", json!([]))
        .await;
    browser
        .click("#confirm-dialog[open] button[value=yes]")
        .await;
    let message = notice(
        &browser,
        true,
        &format!("batch #{running}: cancelled 3 jobs"),
    )
    .await;
    assert!(
        message.contains("skipped 1 job (gone, or already completed or cancelled)"),
        "{message}"
    );
    let bulk = browser
        .execute(
            "return probe.requests.filter((r) => r.url === '/v1/jobs/bulk').length",
            json!([]),
        )
        .await;
    assert_eq!(bulk, json!(1), "one call for the batch's jobs");
    let body = batch_body(&client, running).await;
    assert_eq!(
        (
            &body["state"],
            &body["pending"],
            &body["completed"],
            &body["cancelled"]
        ),
        (&json!("completed"), &json!(0), &json!(1), &json!(3))
    );
    wait_counts(&browser, [4, 0, 1, 0, 3], "completed").await;
    assert_eq!(
        browser
            .execute(
                "return document.querySelector('#batch-head button[data-action]')",
                json!([])
            )
            .await,
        Value::Null,
        "nothing left to close, cancel or retry"
    );
    browser.screenshot("batch-cancelled").await;

    // The open batch closed: it runs, and offers no close.
    open(&browser, &server, &format!("batches/{open_batch}")).await;
    wait_counts(&browser, [1, 1, 0, 0, 0], "open").await;
    browser.click("#batch-head button[data-action=close]").await;
    eventually(DEADLINE, "the batch closed", || async {
        batch_body(&client, open_batch).await["state"] == json!("running")
    })
    .await;
    notice(
        &browser,
        true,
        &format!("batch #{open_batch}: closed (running)"),
    )
    .await;
    wait_counts(&browser, [1, 1, 0, 0, 0], "running").await;
    assert_eq!(
        browser
            .execute(
                "return document.querySelector('#batch-head button[data-action=close]')",
                json!([])
            )
            .await,
        Value::Null
    );
    assert_no_page_errors(&browser, "cancelling and closing batches").await;
    browser.close().await;
}

/// One event as the server would send it on the stream, without an id (so that the page resumes after the real
/// ones): `kind`, of `job` (or none) in `queue`.
fn injected(kind: &str, job: Option<JobId>, queue: &str) -> String {
    let body = json!({
        "id": 0, "at": "2026-11-26T12:00:00Z", "event": kind, "job": job.map(|j| j.0),
        "queue": queue, "name": null, "worker": null, "detail": null,
    });
    format!("event: {kind}\ndata: {body}\n\n")
}

/// Writes `text` into the page's event stream as if the server sent it.
async fn inject(browser: &Browser, text: &str) {
    browser
        .execute("probe.inject(arguments[0])", json!([text]))
        .await;
}

/// Waits until the page asks for `path` (a request whose address starts with it).
async fn wait_request(browser: &Browser, what: &str, path: &str) {
    browser
        .wait_for(
            what,
            &format!("return probe.requests.some((r) => r.url.startsWith({path:?}))"),
        )
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_of_kinds_logged_apart_refresh_what_they_change_and_unknown_ones_nothing() {
    let server = TestServer::spawn();
    let client = server.client();
    let job = client
        .enqueue(Push::new("email.send").queue("email"))
        .await
        .unwrap()
        .id;
    let browser = Browser::start(Viewport::Desktop).await;
    browser.before_each_page(PROBE).await;

    // The queues page: a queue's own events (no job) refresh its counts and settings; a kind it does not know,
    // without a job, asks nothing.
    open(&browser, &server, "queues").await;
    wait_live_state(&browser, "live").await;
    for kind in ["queue_changed", "promoted"] {
        browser
            .execute("probe.requests.length = 0", json!([]))
            .await;
        inject(&browser, &injected(kind, None, "email")).await;
        wait_request(
            &browser,
            &format!("the queues asked for after {kind}"),
            "/v1/queues",
        )
        .await;
    }
    browser
        .execute("probe.requests.length = 0", json!([]))
        .await;
    inject(&browser, &injected("frobnicated", None, "email")).await;
    inject(&browser, "event: frobnicated\ndata: not JSON at all\n\n").await;
    let_a_poll_interval_pass(&browser).await;
    assert_eq!(
        browser.execute("return probe.requests", json!([])).await,
        json!([]),
        "a request for events of a kind the page does not know"
    );
    wait_live_state(&browser, "live").await;

    // The jobs list and a job's page: a move, a new time or priority, a delete.
    for (route, path) in [
        ("jobs?queue=email".to_owned(), "/v1/jobs?".to_owned()),
        (format!("jobs/{job}"), format!("/v1/jobs/{job}")),
    ] {
        open(&browser, &server, &route).await;
        wait_live_state(&browser, "live").await;
        for kind in ["moved", "rescheduled", "prioritized", "deleted"] {
            browser
                .execute("probe.requests.length = 0", json!([]))
                .await;
            inject(&browser, &injected(kind, Some(job), "email")).await;
            wait_request(
                &browser,
                &format!("#/{route} refreshed after {kind}"),
                &path,
            )
            .await;
        }
    }

    // Told that it resumed after events the server no longer keeps, the page looks at everything again.
    open(&browser, &server, "jobs").await;
    wait_live_state(&browser, "live").await;
    browser
        .execute("probe.requests.length = 0", json!([]))
        .await;
    inject(
        &browser,
        "event: missed\ndata: {\"after\":1,\"oldest\":9}\n\n",
    )
    .await;
    wait_request(
        &browser,
        "the list asked for after missed events",
        "/v1/jobs?",
    )
    .await;

    // Pages that follow some kinds only ask for the kinds logged apart too, and follow without them where the
    // server does not know them (as an older server, which refuses the filter).
    for older in [false, true] {
        browser
            .execute("probe.older = arguments[0]", json!([older]))
            .await;
        for (route, new_kind) in [
            ("failures", "deleted"),
            ("workers", "deleted"),
            ("batches", "moved"),
        ] {
            // From another page, so that each follows from the start.
            open(&browser, &server, "queues").await;
            browser
                .execute("probe.requests.length = 0", json!([]))
                .await;
            open(&browser, &server, route).await;
            wait_live_state(&browser, "live").await;
            let kinds = browser
                .execute(
                    "return probe.streamed().map((r) => new URL(r.url, location.href).searchParams.get('kinds'))",
                    json!([]),
                )
                .await;
            let kinds: Vec<String> = serde_json::from_value(kinds).unwrap();
            let has = |i: usize, kind: &str| kinds[i].split(',').any(|k| k == kind);
            if !older {
                assert_eq!(kinds.len(), 1, "#/{route}, newer server: {kinds:?}");
                assert!(has(0, new_kind), "#/{route}: {kinds:?}");
            } else if route == "failures" {
                // Refused once, it follows without them at once; the page remembers it until it is loaded again.
                assert_eq!(kinds.len(), 2, "#/{route}, older server: {kinds:?}");
                assert!(
                    has(0, new_kind) && !has(1, new_kind),
                    "#/{route}: {kinds:?}"
                );
                assert!(has(1, "cancelled"), "#/{route}: {kinds:?}");
            } else {
                assert_eq!(kinds.len(), 1, "#/{route}, older server: {kinds:?}");
                assert!(
                    !has(0, new_kind) && has(0, "cancelled"),
                    "#/{route}: {kinds:?}"
                );
            }
        }
    }
    assert_no_page_errors(&browser, "events of new and unknown kinds").await;
    browser.close().await;
}

/// A workflow's job shows its steps as a timeline ending with what it waits for, the queues page counts it as
/// suspended, and once the signal comes the page says so without a reload.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspended_job_shows_its_steps_and_what_it_waits_for() {
    let server = TestServer::spawn();
    let client = server.client();
    let id = client
        .enqueue(Push::new("order.fulfil").queue("orders"))
        .await
        .unwrap()
        .id;
    let claimed = client
        .dequeue(take("worker-1", "orders", 1))
        .await
        .unwrap()
        .remove(0);
    for (name, result) in [("charge", json!({"receipt": 7})), ("pack", json!("box-3"))] {
        client
            .record_step(
                &claimed.lease,
                cairn::StepName::parse(name).unwrap(),
                result,
            )
            .await
            .unwrap();
    }
    let waited = client
        .wait_for_signal(
            &claimed.lease,
            cairn::StepName::parse("shipped").unwrap(),
            cairn::SignalKey::parse("order-1/shipped").unwrap(),
            Duration::from_secs(3600),
        )
        .await
        .unwrap();
    assert!(matches!(waited, cairn::SignalWait::Suspended { .. }));
    assert_eq!(queue_body(&client, "orders").await["suspended"], json!(1));

    let browser = Browser::start(Viewport::Desktop).await;
    let details = job_details(&browser, &server, id).await;
    assert!(
        details.contains("Suspended\nwaits for the signal order-1/shipped until"),
        "{details}"
    );
    let timeline = browser
        .wait_for(
            "the steps' timeline",
            "const items = [...document.querySelectorAll('#steps ol.timeline li')]; \
             return items.length === 3 ? items.map(i => i.dataset.step ?? (i.dataset.suspended && 'now')) : null",
        )
        .await;
    assert_eq!(timeline, json!(["charge", "pack", "now"]));
    let pack = browser
        .execute(
            "return document.querySelector('#steps li[data-step=\"pack\"]').innerText",
            json!([]),
        )
        .await;
    assert!(
        pack.as_str().unwrap().contains("attempt 1")
            && pack.as_str().unwrap().contains("\"box-3\""),
        "{pack}"
    );
    browser.screenshot("job-steps").await;

    // The signal comes: the page follows without a reload, the step received and nothing waited for.
    client
        .signal(
            cairn::SignalKey::parse("order-1/shipped").unwrap(),
            json!({"parcel": "P-1"}),
        )
        .await
        .unwrap();
    let after = browser
        .wait_for(
            "the received signal on the timeline",
            "const items = [...document.querySelectorAll('#steps ol.timeline li')]; \
             return items.length === 3 && !document.querySelector('#steps li.now') \
               ? items.map(i => i.dataset.step) : null",
        )
        .await;
    assert_eq!(after, json!(["charge", "pack", "shipped"]));

    open(&browser, &server, "queues").await;
    let suspended = browser
        .wait_for(
            "the orders queue's suspended count",
            "return document.querySelector('tr[data-queue=\"orders\"] [data-suspended]')?.dataset.suspended ?? null",
        )
        .await;
    assert_eq!(suspended, json!("0"), "taken off by the signal");
    assert_no_page_errors(&browser, "a suspended job's page and the queues page").await;
    browser.close().await;
}
