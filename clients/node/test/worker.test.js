// The Worker against a real server: handlers by name and GLOB, outcomes, slots, heartbeats, lost leases, and
// stopping on SIGTERM or dying on SIGKILL.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import { setTimeout as sleep } from "node:timers/promises";

import { Client, FailJob, LeaseLost, RetryLater, Worker, push } from "../src/index.js";
import { eventually, startServer } from "./server.js";

let server;
let client;
before(async () => {
  server = await startServer();
  client = new Client(server.url);
});
after(async () => server.stop());

const quiet = { warn() {}, error() {} };
const states = (ids) => Promise.all(ids.map(async (id) => (await client.get(id)).state));
const count = async (ids, state) => (await states(ids)).filter((s) => s === state).length;

test("handlers by name and GLOB run their jobs and keep their results", async () => {
  const names = ["resize", "resize", "email.send", "email.bounce", "resize[1]", "other"];
  const ids = (await client.enqueueBatch(names.map((n, i) => push(n, { n: i }, { queue: "q1" })))).map((e) => e.id);
  const worker = new Worker(server.url, "node-1", { queues: ["q1"], wait: 1 })
    .handler("resize", (job) => ({ resized: job.data.n }))
    .globHandler("email.*", async (job) => ({ mailed: job.name }))
    .handler("resize[1]", () => undefined); // a name with GLOB characters is matched exactly
  const running = worker.start();
  await eventually("five jobs completed", async () => (await count(ids, "completed")) === 5);
  worker.stop();
  const report = await running;
  assert.deepEqual([report.finished, report.retried, report.failed, report.lost], [5, 0, 0, 0]);
  assert.deepEqual(await states(ids), [...Array(5).fill("completed"), "queued"]);
  const [resized, mailed, none] = await Promise.all([ids[0], ids[3], ids[4]].map((id) => client.get(id)));
  assert.deepEqual([resized.result, resized.data], [{ resized: 0 }, { n: 0 }], "the result is kept apart from the data");
  assert.deepEqual([mailed.result, mailed.data], [{ mailed: "email.bounce" }, { n: 3 }]);
  assert.deepEqual([none.result, none.data], [null, { n: 4 }], "undefined is no result");
  assert.deepEqual(resized.history.at(-1).result, { resized: 0 });
});

test("setData replaces the data, and the return value stays the result", async () => {
  const ids = [];
  for (const name of ["next", "only-data"]) ids.push((await client.enqueue(name, { step: 1 }, { queue: "q-data" })).id);
  const worker = new Worker(server.url, "node-data", { queues: ["q-data"], wait: 1 })
    .handler("next", async (job, { setData }) => {
      setData({ step: job.data.step + 1 });
      return { did: "next" };
    })
    .handler("only-data", (job, { setData }) => setData({ step: 10 }));
  const running = worker.start();
  await eventually("both completed", async () => (await count(ids, "completed")) === 2);
  worker.stop();
  assert.equal((await running).finished, 2);
  const [a, b] = await Promise.all(ids.map((id) => client.get(id)));
  assert.deepEqual([a.data, a.result], [{ step: 2 }, { did: "next" }]);
  assert.deepEqual([b.data, b.result], [{ step: 10 }, null]);
});

test("thrown errors retry or fail the job with their text", async () => {
  const ids = [];
  for (const name of ["later", "bad", "boom", "not-json", "not-json-data"]) ids.push((await client.enqueue(name, null, { queue: "q2" })).id);
  const circular = {};
  circular.self = circular;
  const worker = new Worker(server.url, "node-2", { queues: ["q2"], wait: 1, logger: quiet })
    .handler("later", () => {
      throw new RetryLater("rate limited", { delay: 60 });
    })
    .handler("bad", () => {
      throw new FailJob("bad-input", "cannot parse");
    })
    .handler("boom", async () => {
      throw new TypeError("boom");
    })
    .handler("not-json", () => circular)
    .handler("not-json-data", (job, { setData }) => setData({ n: 1n }));
  const running = worker.start();
  await eventually("all five handled", async () => (await states(ids)).every((s) => s !== "queued" && s !== "running"));
  worker.stop();
  const report = await running;
  assert.deepEqual([report.retried, report.failed, report.finished], [4, 1, 0]);
  const [a, b, c, d, e] = await Promise.all(ids.map((id) => client.get(id)));
  assert.deepEqual([a.state, a.error], ["scheduled", "rate limited"]);
  assert.deepEqual([b.state, b.error, b.failure_group], ["failed", "cannot parse", "bad-input"]);
  assert.deepEqual([c.state, c.error], ["scheduled", "TypeError: boom"]);
  assert.match(d.error, /^the handler's result is not JSON: /);
  assert.match(e.error, /^the handler's data is not JSON: /);
});

test("no more than maxConcurrency run at once", async () => {
  const ids = (await client.enqueueBatch(Array.from({ length: 9 }, () => push("slow", null, { queue: "q3" })))).map((e) => e.id);
  let now = 0;
  let most = 0;
  const worker = new Worker(server.url, "node-3", { queues: ["q3"], maxConcurrency: 3, wait: 1 }).handler("slow", async () => {
    most = Math.max(most, ++now);
    await sleep(200);
    now--;
  });
  const running = worker.start();
  await eventually("all nine completed", async () => (await count(ids, "completed")) === 9);
  worker.stop();
  await running;
  assert.equal(most, 3, "three slots, all of them used");
});

test("heartbeats keep a job longer than its lease", async () => {
  const { id } = await client.enqueue("long", null, { queue: "q4", leaseTimeout: 1 });
  const worker = new Worker(server.url, "node-4", { queues: ["q4"], wait: 1 }).handler("long", async () => {
    await sleep(2500);
    return { ok: true };
  });
  const running = worker.start();
  await eventually("the job completed", async () => (await count([id], "completed")) === 1);
  worker.stop();
  const report = await running;
  const done = await client.get(id);
  assert.deepEqual([done.attempt, done.result, report.finished], [1, { ok: true }, 1]);
});

test("a lost lease aborts the handler's signal and drops its result", async () => {
  const { id } = await client.enqueue("held", null, { queue: "q5", leaseTimeout: 1 });
  let started;
  const startedPromise = new Promise((resolve) => (started = resolve));
  let aborted = false;
  const worker = new Worker(server.url, "node-5", { queues: ["q5"], wait: 1, logger: quiet }).handler("held", async (job, { signal }) => {
    started();
    await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
    aborted = true;
    return { "should not": "be saved" };
  });
  const running = worker.start();
  await startedPromise;
  await client.cancel(id);
  await eventually("the handler was told", async () => aborted);
  worker.stop();
  const report = await running;
  assert.deepEqual([report.lost, report.finished], [1, 0]);
  const cancelled = await client.get(id);
  assert.deepEqual([cancelled.state, cancelled.data, cancelled.result], ["cancelled", {}, null]);
});

test("a handler gets the job: its fields, progress, heartbeat and setResult", async () => {
  const trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  const pushed = await client.enqueue("report.job", { n: 1 }, { queue: "q-job", tags: ["t"], traceParent: trace });
  const set = await client.enqueue("report.set", null, { queue: "q-job" });
  const both = await client.enqueue("report.both", null, { queue: "q-job" });
  const seen = {};
  const worker = new Worker(server.url, "node-job", { queues: ["q-job"], wait: 1 })
    .handler("report.job", async (job, context) => {
      const { id, name, data, attempt, queue, tags, trace_parent, failure_group } = job;
      seen.fields = { id, name, data, attempt, queue, tags, trace_parent, failure_group };
      seen.same = context.lease === job.lease && context.signal === job.signal;
      await job.progress({ done: 0.5 });
      seen.expiry = await job.heartbeat({ done: 0.9 });
      seen.json = Object.keys(JSON.parse(JSON.stringify(job)));
      return { pages: 12 };
    })
    .handler("report.set", (job) => job.setResult({ set: true }))
    .handler("report.both", (job) => {
      job.setResult("set");
      return "returned";
    });
  const running = worker.start();
  await eventually("the three completed", async () => (await count([pushed.id, set.id, both.id], "completed")) === 3);
  worker.stop();
  await running;
  assert.deepEqual(seen.fields, { id: pushed.id, name: "report.job", data: { n: 1 }, attempt: 1, queue: "q-job", tags: ["t"], trace_parent: trace, failure_group: null });
  assert.ok(seen.same, "the context's lease and signal are the job's");
  assert.match(seen.expiry, /^\d{4}-\d\d-\d\dT/);
  assert.ok(!seen.json.includes("lease") && !seen.json.includes("signal") && seen.json.includes("trace_parent"), "the job's JSON is its fields");
  const [done, setOnly, returned] = await Promise.all([pushed.id, set.id, both.id].map((id) => client.get(id)));
  assert.deepEqual([done.result, done.progress], [{ pages: 12 }, { done: 0.9 }]);
  assert.deepEqual(setOnly.result, { set: true });
  assert.equal(returned.result, "returned", "what the handler returns wins over setResult");
});

test("a checkpoint is the data the retry starts from", async () => {
  const { id } = await client.enqueue("import", { row: 0 }, { queue: "q-checkpoint" });
  const starts = [];
  const worker = new Worker(server.url, "node-checkpoint", { queues: ["q-checkpoint"], wait: 1, logger: quiet }).handler("import", async (job) => {
    starts.push(job.data.row);
    if (job.attempt > 1) return { rows: job.data.row };
    assert.match(await job.checkpoint({ row: 500 }), /^\d{4}-/);
    throw new RetryLater("the database went away", { delay: 0 });
  });
  const running = worker.start();
  await eventually("the job completed", async () => (await count([id], "completed")) === 1);
  worker.stop();
  await running;
  assert.deepEqual(starts, [0, 500]);
  assert.deepEqual((await client.get(id)).result, { rows: 500 });
});

test("a call under a lost lease rejects, aborts the signal and drops the result", async () => {
  const { id } = await client.enqueue("held.job", null, { queue: "q-job-lost" });
  let cancelled;
  const cancelledPromise = new Promise((resolve) => (cancelled = resolve));
  const outcome = {};
  const worker = new Worker(server.url, "node-job-lost", { queues: ["q-job-lost"], wait: 1, logger: quiet }).handler("held.job", async (job) => {
    await client.cancel(job.id);
    cancelled();
    outcome.error = await job.progress({ done: 1 }).then(() => null, (e) => e);
    outcome.aborted = job.signal.aborted;
    return { "should not": "be saved" };
  });
  const running = worker.start();
  await cancelledPromise;
  await eventually("the handler returned", async () => "aborted" in outcome);
  worker.stop();
  const report = await running;
  assert.ok(outcome.error instanceof LeaseLost, String(outcome.error));
  assert.equal(outcome.aborted, true);
  assert.deepEqual([report.lost, report.finished], [1, 0]);
  assert.deepEqual((await client.get(id)).result, null);
});

const WORKER_SCRIPT = `
import { writeFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { Worker } from ${JSON.stringify(fileURLToPath(new URL("../src/index.js", import.meta.url)))};
const [url, marker, queue] = process.argv.slice(2);
const worker = new Worker(url, "node-process", { queues: [queue], wait: 1, shutdownDeadline: 20 }).handler("step", async (job, { lease }) => {
  writeFileSync(marker, JSON.stringify(lease));
  await sleep(job.data.seconds * 1000);
  return { done: true };
});
const running = worker.run();
// Listeners run in the order they were added: by the time this one writes, the worker has been told to stop.
process.on("SIGTERM", () => writeFileSync(marker + ".stopping", ""));
console.log(JSON.stringify(await running));
`;

function runWorkerProcess(queue) {
  const script = join(server.dir, `worker-${queue}.mjs`);
  writeFileSync(script, WORKER_SCRIPT);
  const marker = join(server.dir, `started-${queue}.json`);
  const child = spawn(process.execPath, [script, server.url, marker, queue], { stdio: ["ignore", "pipe", "inherit"] });
  let out = "";
  child.stdout.on("data", (chunk) => (out += chunk));
  const exited = new Promise((resolve) => child.once("exit", (code, signal) => resolve({ code, signal, out: () => out })));
  return { child, marker, exited };
}

async function leaseFrom(marker) {
  await eventually("the handler started", async () => existsSync(marker) && readFileSync(marker, "utf8").length > 0);
  return JSON.parse(readFileSync(marker, "utf8"));
}

test("SIGTERM lets the running job finish and takes no more", async () => {
  const first = (await client.enqueue("step", { seconds: 1 }, { queue: "q6" })).id;
  const { child, marker, exited } = runWorkerProcess("q6");
  await leaseFrom(marker);
  child.kill("SIGTERM");
  // The second job comes once the worker has seen the signal: one it took before would be its to run.
  await eventually("the worker was told to stop", async () => existsSync(`${marker}.stopping`));
  const second = (await client.enqueue("step", { seconds: 0 }, { queue: "q6" })).id;
  const { code, out } = await exited;
  assert.equal(code, 0);
  assert.equal(JSON.parse(out().trim().split("\n").at(-1)).finished, 1);
  // The second job ran nowhere. It is queued, unless the server claimed it for the long poll the worker dropped as
  // it stopped and wrote its answer to the closed connection: then it stays leased, unrun, until its lease expires
  // (an answer already on its way cannot be given back over HTTP).
  const [ran, after] = await states([first, second]);
  assert.equal(ran, "completed");
  assert.ok(["queued", "running"].includes(after), after);
  assert.equal((await client.get(second)).result ?? null, null);
});

test("SIGKILL mid-job loses nothing, and the dead worker's late finish is refused", async () => {
  const { id } = await client.enqueue("step", { seconds: 3600 }, { queue: "q7", leaseTimeout: 1 });
  const { child, marker, exited } = runWorkerProcess("q7");
  const lease = await leaseFrom(marker);
  child.kill("SIGKILL");
  await exited;
  const survivor = new Worker(server.url, "node-survivor", { queues: ["q7"], wait: 1 }).handler("step", () => ({ again: true }));
  const running = survivor.start();
  await eventually("the job ran again", async () => (await count([id], "completed")) === 1);
  survivor.stop();
  await running;
  const done = await client.get(id);
  assert.deepEqual([done.result, done.attempt], [{ again: true }, 2]);
  await assert.rejects(client.finish(lease, { late: true }, { result: { late: true } }), LeaseLost);
  const late = await client.get(id);
  assert.deepEqual([late.result, late.data], [{ again: true }, { seconds: 3600 }]);
});
