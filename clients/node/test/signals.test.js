// Signals (`job.waitForSignal`, `client.waitForSignal`, `client.signal`), against a real server as Rust's
// `tests/it/steps.rs` holds them: a job that waits gives up its worker until the signal comes, a signal sent before
// the wait is kept and received at once by one job, a wait times out for the handler to decide, a key whose only
// waiter was cancelled refuses signals, and bad input is refused naming its field.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { Client, FailJob, InvalidInput, InvalidState, LeaseLost, Suspended } from "../src/index.js";
import { RunningJob } from "../src/job.js";
import { eventually, startServer } from "./server.js";
import { startWorker } from "./workers.js";

let server;
let client;
before(async () => {
  server = await startServer();
  client = new Client(server.url);
});
after(async () => server.stop());

const HOUR = 3600;

const completed = (id) => async () => (await client.get(id)).state === "completed";

test("a handler that waits for a signal frees its slot, and the signal sent while it waits completes it", async () => {
  const { id } = await client.enqueue("order.fulfil", { order: 1 }, { queue: "signal-wait" });
  // Counted outside the queue: how many times the charge's body ran.
  let charged = 0;
  const worker = startWorker(server.url, "signal-wait", {
    "order.fulfil": async (job) => {
      const receipt = await job.step("charge", () => `ch_${++charged}`);
      const packed = await job.waitForSignal("packed", "order-1/packed", HOUR);
      return { receipt, received: packed.received, parcel: packed.data?.parcel };
    },
  });
  let report;
  try {
    await eventually("the job waits for its signal", async () => (await client.get(id)).awaits_signal === "order-1/packed");
    const waiting = await client.get(id);
    assert.equal(waiting.state, "scheduled");
    const [stats] = (await client.queues()).filter((q) => q.queue === "signal-wait");
    assert.deepEqual([typeof waiting.suspended_at, stats.suspended], ["string", 1], "suspended while it waits, and counted so");
    assert.ok(Date.parse(waiting.run_at) > Date.now() + (HOUR - 60) * 1000, `it waits until the timeout: ${waiting.run_at}`);
    const [info] = (await client.workers()).filter((w) => w.id === "node-signal-wait");
    assert.deepEqual(info.jobs, [], "the worker holds no job while it waits");
    assert.deepEqual(await client.signal("order-1/packed", { parcel: "P-1" }), { delivered: true, job: id });
    await eventually("the job completes", completed(id));
  } finally {
    report = await worker.stop();
  }
  assert.deepEqual([report.suspended, report.finished, report.retried, report.lost], [1, 1, 0, 0]);
  assert.equal(charged, 1, "the charge's body ran once");
  const job = await client.get(id);
  assert.deepEqual(job.result, { receipt: "ch_1", received: true, parcel: "P-1" });
  assert.deepEqual([job.awaits_signal ?? null, job.suspended_at], [null, null]);
  assert.deepEqual(job.history.map((a) => a.outcome), ["suspended", "completed"]);
  assert.deepEqual(
    job.steps.map((s) => [s.name, s.result]),
    [
      ["charge", "ch_1"],
      ["packed", { signal: { parcel: "P-1" } }],
    ],
  );
  const { events } = await client.activity({ job: id });
  assert.deepEqual([events.filter((e) => e.event === "suspended").length, events.filter((e) => e.event === "signal_received").length], [1, 1]);
});

test("a signal sent before the wait is kept and received at once, by one job only", async () => {
  assert.deepEqual(await client.signal("order-2/packed", { parcel: "P-2" }), { delivered: false, job: null });
  // Two jobs wait for the key in turn (one slot): the first receives the kept signal, the second times out.
  const first = await client.enqueue("order.fulfil", null, { queue: "signal-early" });
  const second = await client.enqueue("order.fulfil", null, { queue: "signal-early" });
  const worker = startWorker(server.url, "signal-early", { "order.fulfil": async (job) => job.waitForSignal("packed", "order-2/packed", 0.3) });
  let report;
  try {
    await eventually("both jobs complete", async () => (await completed(first.id)()) && completed(second.id)());
  } finally {
    report = await worker.stop();
  }
  assert.deepEqual([report.finished, report.suspended, report.retried], [2, 1, 0]);
  const received = await client.get(first.id);
  assert.deepEqual(received.result, { received: true, data: { parcel: "P-2" } });
  assert.deepEqual(received.history.map((a) => a.outcome), ["completed"], "no suspension: the signal was there");
  const timedOut = await client.get(second.id);
  assert.deepEqual(timedOut.result, { received: false, data: null });
  assert.deepEqual(timedOut.history.map((a) => a.outcome), ["suspended", "completed"]);
});

test("a wait that times out answers received false, and a signal of null data answers received true", async () => {
  const late = await client.enqueue("approve", { key: "order-3/approved" }, { queue: "signal-timeout" });
  const nulled = await client.enqueue("approve", { key: "order-4/approved" }, { queue: "signal-timeout" });
  const worker = startWorker(server.url, "signal-timeout", {
    approve: async (job) => {
      const signal = await job.waitForSignal("approved", job.data.key, 0.3);
      return { ...signal, replayed: (await job.waitForSignal("approved", "other", 1)).received };
    },
  });
  try {
    await eventually("the second job waits", async () => (await client.get(nulled.id)).awaits_signal === "order-4/approved");
    assert.deepEqual(await client.signal("order-4/approved"), { delivered: true, job: nulled.id });
    await eventually("both jobs complete", async () => (await completed(late.id)()) && completed(nulled.id)());
  } finally {
    await worker.stop();
  }
  // `approved#2` times out too (its own step); the first wait's answer tells a timeout from a null signal.
  const timedOut = await client.get(late.id);
  assert.deepEqual(timedOut.result, { received: false, data: null, replayed: false });
  assert.deepEqual(timedOut.steps[0].result, { timed_out: true });
  const received = await client.get(nulled.id);
  assert.deepEqual(received.result, { received: true, data: null, replayed: false });
  assert.deepEqual(received.steps[0].result, { signal: null });
});

test("a signal to a key whose only waiter was cancelled is refused with the server's message, naming the job", async () => {
  const { id } = await client.enqueue("x", null, { queue: "signal-cancel" });
  const [claimed] = await client.dequeue("node-signal-cancel", { queues: ["signal-cancel"] });
  const waited = await client.waitForSignal(claimed.lease, "approved", "order-5/approved", { seconds: HOUR });
  assert.deepEqual({ ...waited, until: null }, { suspended: true, until: null, received: false, data: null, timed_out: false });
  assert.ok(Date.parse(waited.until) > Date.now(), waited.until);
  // The lease is over: the wait gave it up.
  await assert.rejects(client.waitForSignal(claimed.lease, "approved", "order-5/approved", { seconds: HOUR }), LeaseLost);
  await client.cancel(id);
  await assert.rejects(client.signal("order-5/approved", { ok: true }), (e) => {
    assert.ok(e instanceof InvalidState, e);
    assert.equal(e.status, 409);
    assert.equal(e.kind, "invalid_state");
    assert.match(e.message, new RegExp(`\\b${id}\\b`), "the message names the job");
    return true;
  });
});

test("client.waitForSignal answers a kept signal at once, and a wait whose time has passed on its next run", async () => {
  await client.enqueue("x", null, { queue: "signal-lease" });
  const [first] = await client.dequeue("node-signal-lease", { queues: ["signal-lease"] });
  await client.signal("order-6/packed", [1, 2]);
  assert.deepEqual(await client.waitForSignal(first.lease, "packed", "order-6/packed", { seconds: 60 }), {
    suspended: false,
    until: null,
    received: true,
    data: [1, 2],
    timed_out: false,
  });
  const short = await client.waitForSignal(first.lease, "approved", "order-6/approved", { seconds: 0.2 });
  assert.equal(short.suspended, true);
  let second;
  await eventually("the wait times out", async () => ([second] = await client.dequeue("node-signal-lease", { queues: ["signal-lease"] })).length > 0);
  assert.deepEqual(await client.waitForSignal(second.lease, "approved", "order-6/approved", { seconds: 0.2 }), {
    suspended: false,
    until: null,
    received: false,
    data: null,
    timed_out: true,
  });
  await client.finish(second.lease);
});

test("bad keys and durations are refused naming the field: negative or missing seconds by the client, the rest by the server", async () => {
  await client.enqueue("x", null, { queue: "signal-input" });
  const [claimed] = await client.dequeue("node-signal-input", { queues: ["signal-input"] });
  const { lease } = claimed;
  const byClient = (field, message) => (e) => e instanceof InvalidInput && e.status === null && e.field === field && message.test(e.message);
  const byServer = (field) => (e) => e instanceof InvalidInput && e.status === 400 && e.field === field && e.message.startsWith(`${field}: `);
  await assert.rejects(client.waitForSignal(lease, "w", "k", { seconds: -1 }), byClient("seconds", /^seconds: must be a number of seconds, at least 0, got -1$/));
  await assert.rejects(client.waitForSignal(lease, "w", "k", {}), byClient("seconds", /^seconds: give seconds/));
  await assert.rejects(client.waitForSignal(lease, "w", "k"), byClient("seconds", /^seconds: give seconds/));
  await assert.rejects(client.waitForSignal(lease, "w", "k", { timeout_ms: 5 }), byClient("timeout_ms", /did you mean seconds\?/));
  await assert.rejects(client.waitForSignal(lease, "w", "", { seconds: 1 }), byServer("key"));
  await assert.rejects(client.waitForSignal(lease, "w", "k", { seconds: 315_360_001 }), byServer("timeout_ms"));
  await assert.rejects(client.signal(""), byServer("key"));
  await assert.rejects(client.signal("x".repeat(256)), byServer("key"));
  // Nothing above touched the lease: a good wait still goes through under it.
  assert.equal((await client.waitForSignal(lease, "w", "k", { seconds: HOUR })).suspended, true);
});

/** A job made by hand, with a client that answers waits from `answers` (by step name) and notes what was sent. */
function handMadeJob(steps, answers) {
  const sent = [];
  const suspensions = [];
  const run = {
    client: {
      async waitForSignal(lease, name, key, wait) {
        sent.push([name, key, wait]);
        return { suspended: false, until: null, received: false, data: null, timed_out: false, ...answers[name] };
      },
      async recordStep(lease, name, result) {
        sent.push([name, result]);
        return { name, result, attempt: 1, recorded_at: "2026-01-01T00:00:00Z" };
      },
    },
    signal: new AbortController().signal,
    extended() {},
    lost() {},
    suspended: (e) => suspensions.push(e),
  };
  const job = new RunningJob({ job: { id: 1, steps }, lease: { job: 1, token: "1" } }, run);
  return { job, sent, suspensions };
}

test("job.waitForSignal replays a recorded wait without a request, numbers names with steps, and throws Suspended", async () => {
  const steps = [
    { name: "packed", result: { signal: null }, attempt: 1, recorded_at: "2026-01-01T00:00:00Z" },
    { name: "packed#2", result: { timed_out: true }, attempt: 1, recorded_at: "2026-01-01T00:00:00Z" },
  ];
  const { job, sent, suspensions } = handMadeJob(steps, {
    "packed#3": { received: true, data: { parcel: "P-9" } },
    "packed#4": { timed_out: true },
    approved: { suspended: true, until: "2030-01-01T00:00:00Z" },
  });
  assert.deepEqual(await job.waitForSignal("packed", "k", 1), { received: true, data: null }, "a null signal, replayed");
  assert.deepEqual(await job.waitForSignal("packed", "k", 1), { received: false, data: null }, "a timeout, replayed");
  assert.deepEqual(sent, [], "no request on a replay");
  assert.deepEqual(await job.waitForSignal("packed", "k", 1), { received: true, data: { parcel: "P-9" } });
  assert.deepEqual(await job.waitForSignal("packed", "k", 1), { received: false, data: null });
  await job.step("packed", () => 5);
  await assert.rejects(job.waitForSignal("approved", "order-7/approved", 60), (e) => {
    assert.ok(e instanceof Suspended, e);
    assert.deepEqual([e.step, e.until, e.key], ["approved", "2030-01-01T00:00:00Z", "order-7/approved"]);
    assert.match(e.message, /^step "approved": the job waits for a signal to "order-7\/approved" until 2030-01-01T00:00:00Z/);
    return true;
  });
  assert.equal(suspensions.length, 1);
  assert.deepEqual(sent, [
    ["packed#3", "k", { seconds: 1 }],
    ["packed#4", "k", { seconds: 1 }],
    ["packed#5", 5],
    ["approved", "order-7/approved", { seconds: 60 }],
  ]);
});

test("job.waitForSignal fails the job in group step on a bad key or duration, before sending anything", async () => {
  const { job, sent } = handMadeJob([], {});
  const failed = (message) => (e) => e instanceof FailJob && e.group === "step" && e.message === message;
  await assert.rejects(job.waitForSignal("w", "", 1), failed('step "w": key: must not be empty'));
  await assert.rejects(job.waitForSignal("w", 7, 1), failed('step "w#2": key: must be a string, got 7'));
  await assert.rejects(job.waitForSignal("w", "é".repeat(128), 1), failed('step "w#3": key: must be at most 255 bytes, got 256'));
  await assert.rejects(job.waitForSignal("w", "a\nb", 1), failed('step "w#4": key: must not contain control characters, got "\\n"'));
  await assert.rejects(job.waitForSignal("w", "k", -1), failed('step "w#5": seconds: must be a number of seconds, at least 0, got -1'));
  await assert.rejects(job.waitForSignal("w", "k"), failed('step "w#6": seconds: must be a number of seconds, at least 0, got undefined'));
  await assert.rejects(job.waitForSignal("w#2", "k", 1), (e) => e instanceof FailJob && /must not hold '#'/.test(e.message));
  assert.deepEqual(sent, []);
});
