// Issue 42's rows for the Node client, against a real server: a cron template with a time zone, a job with
// dependencies and a parent, and a batch with callbacks, each made from this client, whose handlers read `job.id`,
// report progress and set a result.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { Client, Worker, push } from "../src/index.js";
import { eventually, startServer } from "./server.js";

let server;
let client;
before(async () => {
  server = await startServer();
  client = new Client(server.url);
});
after(async () => server.stop());

const QUEUE = "workflows";
/** The ids each handler saw as `job.id`, by job name. */
const seen = new Map();

/** A handler that notes the job's id, reports progress and sets a result made by `make(job)`. */
const handler = (make) => async (job) => {
  seen.set(job.name, [...(seen.get(job.name) ?? []), job.id]);
  await job.progress({ step: "working" });
  job.setResult(await make(job));
};

/** Runs a worker of the workflows' queue until `done()` resolves true. */
async function work(what, done) {
  const worker = new Worker(server.url, `workflows-${what}`, { queues: [QUEUE], wait: 1 })
    .handler("report.nightly", handler((job) => ({ report: job.data.kind, zone: "Europe/Berlin" })))
    .handler("fetch", handler((job) => ({ fetched: job.data.url })))
    .handler("build", async (job) => {
      seen.set("build", [...(seen.get("build") ?? []), job.id]);
      if (!job.data.child) {
        // The first run makes a child, which starts when this run finishes; the job runs again once it has ended.
        const child = await client.enqueue("resize", { width: 100 }, { queue: QUEUE, parent: job.id });
        await job.progress({ step: "waiting for the child" });
        job.setData({ child: child.id });
        return;
      }
      await job.progress({ step: "assembling" });
      const { jobs } = await client.jobs({ parent: job.id });
      job.setResult({ built: jobs.map((child) => child.result) });
    })
    .handler("resize", handler((job) => ({ width: job.data.width, parent: job.parent })))
    .handler("page", handler((job) => ({ page: job.data.n })))
    .handler("book.publish", handler((job) => ({ published: job.data.book, pages: job.data.batch.completed })))
    .handler("book.report", handler((job) => ({ reported: job.data.book, failed: job.data.batch.failed })));
  const running = worker.start();
  try {
    await eventually(what, done);
  } finally {
    worker.stop();
    await running;
  }
}

const state = async (id) => (await client.get(id)).state;

test("a cron template in a time zone: its run's handler reads job.id, reports progress and sets a result", async () => {
  const template = await client.setRecurring("nightly-report", {
    cron: "0 4 * * *",
    timeZone: "Europe/Berlin",
    job: push("report.nightly", { kind: "sales" }, { queue: QUEUE, tags: ["nightly"] }),
    overlap: "skip",
  });
  assert.deepEqual([template.key, template.cron, template.time_zone, template.overlap], ["nightly-report", "0 4 * * *", "Europe/Berlin", "skip"]);
  // 04:00 in Berlin is 03:00 or 02:00 UTC, by the season: never 04:00 UTC.
  assert.match(template.next_run, /T0[23]:00:00/);
  assert.ok((await client.listRecurring()).some((t) => t.key === "nightly-report"));
  const run = await client.runRecurring("nightly-report");
  await work("the nightly report ran", async () => (await state(run.id)) === "completed");
  const job = await client.get(run.id);
  assert.deepEqual(seen.get("report.nightly"), [run.id]);
  assert.deepEqual([job.result, job.progress, job.tags], [{ report: "sales", zone: "Europe/Berlin" }, { step: "working" }, ["nightly"]]);
  assert.equal((await client.getRecurring("nightly-report")).last_job, run.id);
});

test("a recurring template reads back whole: its job and its missed-slots policy (needs the server of issue 42)", async () => {
  const job = push("report.weekly", { kind: "stock" }, { queue: QUEUE, priority: 3 });
  await client.setRecurring("weekly-report", { cron: "0 6 * * MON", timeZone: "America/New_York", job, missed: "skip" });
  const template = await client.getRecurring("weekly-report");
  assert.deepEqual([template.time_zone, template.missed], ["America/New_York", "skip"]);
  assert.deepEqual([template.job.name, template.job.queue, template.job.data, template.job.priority], ["report.weekly", QUEUE, { kind: "stock" }, 3]);
  await client.removeRecurring("weekly-report");
});

test("a job with dependencies and a parent: the handlers read job.id, report progress and set results", async () => {
  const fetched = await client.enqueue("fetch", { url: "https://example.com/a" }, { queue: QUEUE });
  const build = await client.enqueue("build", {}, { queue: QUEUE, dependsOn: [fetched.id] });
  assert.equal(build.state, "waiting");
  assert.deepEqual((await client.get(build.id)).depends_on, [fetched.id]);
  await work("the build completed", async () => (await state(build.id)) === "completed");
  const [child] = (await client.jobs({ parent: build.id })).jobs;
  assert.deepEqual(seen.get("fetch"), [fetched.id]);
  assert.deepEqual(seen.get("build"), [build.id, build.id], "the parent ran again once its child ended");
  assert.deepEqual(seen.get("resize"), [child.id]);
  const [done, fetchedJob] = await Promise.all([client.get(build.id), client.get(fetched.id)]);
  assert.deepEqual(done.result, { built: [{ width: 100, parent: build.id }] });
  assert.deepEqual([done.progress, fetchedJob.result], [{ step: "assembling" }, { fetched: "https://example.com/a" }]);
  assert.deepEqual([child.parent, child.state], [build.id, "completed"]);
  // Children owned by the job rather than the run, as Bedrock's.
  const bedrock = await client.enqueue("bedrock.parent", null, { queue: "elsewhere", children: "job" });
  assert.equal((await client.get(bedrock.id)).children, "job");
});

test("a batch with callbacks: the jobs' and the callbacks' handlers read job.id, report progress and set results", async () => {
  const created = await client.createBatch([push("page", { n: 1 }, { queue: QUEUE }), push("page", { n: 2 }, { queue: QUEUE })], {
    onSuccess: push("book.publish", { book: 7 }, { queue: QUEUE }),
    onComplete: push("book.report", { book: 7 }, { queue: QUEUE }),
    description: "book 7",
  });
  const batch = async () => client.batch(created.id);
  await work("both callbacks completed", async () => {
    const { on_success, on_complete } = await batch();
    return on_success?.job && on_complete?.job && (await state(on_success.job)) === "completed" && (await state(on_complete.job)) === "completed";
  });
  const done = await batch();
  assert.deepEqual([done.state, done.total, done.completed, done.description], ["completed", 2, 2, "book 7"]);
  assert.deepEqual(seen.get("page").sort(), created.jobs.map((j) => j.id).sort());
  assert.deepEqual(seen.get("book.publish"), [done.on_success.job]);
  assert.deepEqual(seen.get("book.report"), [done.on_complete.job]);
  const [publish, report] = await Promise.all([client.get(done.on_success.job), client.get(done.on_complete.job)]);
  assert.deepEqual([publish.result, publish.progress], [{ published: 7, pages: 2 }, { step: "working" }]);
  assert.deepEqual(report.result, { reported: 7, failed: 0 });
  assert.deepEqual((await client.jobs({ batch: created.id })).jobs.map((j) => j.result).sort((a, b) => a.page - b.page), [{ page: 1 }, { page: 2 }]);
});
