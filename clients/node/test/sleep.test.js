// Sleeping without holding a worker (`job.sleep`, `client.sleep`), against a real server as Rust's
// `tests/it/steps.rs` holds it: the job gives up its lease, the worker ends the run with no call about it (counted as
// suspended), and the job runs again at the wake time, replaying its steps; a sleep is fenced by the lease, and the
// client refuses a sleep that says neither or both of when it wakes.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { Client, FailJob, InvalidInput, LeaseLost, Suspended } from "../src/index.js";
import { RunningJob } from "../src/job.js";
import { eventually, startServer } from "./server.js";
import { work } from "./workers.js";

let server;
let client;
before(async () => {
  server = await startServer();
  client = new Client(server.url);
});
after(async () => server.stop());


const completed = (id) => async () => (await client.get(id)).state === "completed";

test("a handler that sleeps frees its slot and finishes later", async () => {
  const { id } = await client.enqueue("wait-and-see", null, { queue: "sleep-worker" });
  // Counted outside the queue: how many times the steps' bodies ran.
  let ran = 0;
  const report = await work(server.url, 
    "sleep-worker",
    {
      "wait-and-see": async (job) => {
        await job.step("before", () => ran++);
        await job.sleep("nap", 0.3);
        await job.step("after", () => ran++);
      },
    },
    "the job completes",
    completed(id),
  );
  assert.deepEqual([report.finished, report.suspended, report.retried, report.lost], [1, 1, 0, 0]);
  assert.equal(ran, 2, "each step's body once");
  const job = await client.get(id);
  assert.deepEqual(job.history.map((a) => a.outcome), ["suspended", "completed"]);
  assert.deepEqual(job.steps.map((s) => s.name), ["before", "nap", "after"]);
  assert.ok(!Number.isNaN(Date.parse(job.steps[1].result?.until)), `the nap's result is its wake time: ${JSON.stringify(job.steps[1])}`);
  const { events } = await client.activity({ job: id });
  assert.equal(events.filter((e) => e.event === "suspended").length, 1);
});

test("a handler that swallows Suspended still ends its run with no call about the job", async () => {
  const { id } = await client.enqueue("swallow", null, { queue: "sleep-swallow" });
  const report = await work(server.url, 
    "sleep-swallow",
    {
      swallow: async (job) => {
        try {
          await job.sleep("nap", 0.2);
        } catch (e) {
          if (!(e instanceof Suspended)) throw e;
          assert.equal(job.signal.aborted, true, "the signal says the run is over");
          return "dropped";
        }
        return "woke";
      },
    },
    "the job completes",
    completed(id),
  );
  assert.deepEqual([report.finished, report.suspended, report.retried, report.lost], [1, 1, 0, 0]);
  const job = await client.get(id);
  assert.deepEqual([job.result, job.history.map((a) => a.outcome)], ["woke", ["suspended", "completed"]]);
});

test("client.sleep suspends the job, is fenced by the lease, and answers not suspended once the time has passed", async () => {
  const { id } = await client.enqueue("x", null, { queue: "sleep-lease" });
  const [first] = await client.dequeue("node-sleep", { queues: ["sleep-lease"] });
  const slept = await client.sleep(first.lease, "nap", { seconds: 0.2 });
  assert.equal(slept.suspended, true);
  assert.ok(Date.parse(slept.until) > Date.now() - 1000, slept.until);
  assert.equal((await client.get(id)).state, "scheduled");
  // The lease is over: the sleep gave it up.
  await assert.rejects(client.sleep(first.lease, "nap", { seconds: 0.2 }), (e) => e instanceof LeaseLost && e.status === 409);
  await assert.rejects(client.finish(first.lease), LeaseLost);

  let second;
  await eventually("the job wakes", async () => ([second] = await client.dequeue("node-sleep", { queues: ["sleep-lease"] })).length > 0);
  assert.equal(second.job.id, id);
  assert.deepEqual(await client.sleep(second.lease, "nap", { seconds: 0.2 }), { suspended: false, until: null });
  // A time passed already, the first time: the run goes on.
  assert.deepEqual(await client.sleep(second.lease, "past", { until: new Date(Date.now() - 60_000) }), { suspended: false, until: null });
  await client.finish(second.lease);
  assert.deepEqual((await client.get(id)).history.map((a) => a.outcome), ["suspended", "completed"]);
});

test("client.sleep refuses neither or both of seconds and until, and unknown options, before sending", async () => {
  // No such job: a request that was sent would come back refused by the server (lease_lost, status 409).
  const lease = { job: 999_999, token: "1" };
  const refused = (field, message) => (e) => e instanceof InvalidInput && e.status === null && e.field === field && message.test(e.message);
  await assert.rejects(client.sleep(lease, "nap", {}), refused("seconds", /^seconds: give seconds .* or until .*, got neither$/));
  await assert.rejects(client.sleep(lease, "nap"), refused("seconds", /got neither/));
  await assert.rejects(client.sleep(lease, "nap", { seconds: 1, until: new Date() }), refused("until", /not both$/));
  await assert.rejects(client.sleep(lease, "nap", { for_ms: 1000 }), refused("for_ms", /did you mean seconds\?/));
  await assert.rejects(client.sleep(lease, "nap", { seconds: -1 }), refused("seconds", /at least 0/));
  await assert.rejects(client.sleep(lease, "nap", { seconds: 1 }), (e) => e instanceof LeaseLost && e.status === 409, "a good one is sent");
});

test("job.sleep numbers names with job.step, throws Suspended, and fails the job on a bad duration", async () => {
  // A job made by hand, with a client that answers as the server does.
  const sent = [];
  const suspensions = [];
  const run = {
    client: {
      async recordStep(lease, name, result) {
        sent.push(["step", name, result]);
        return { name, result, attempt: 1, recorded_at: "2026-01-01T00:00:00Z" };
      },
      async sleep(lease, name, wake) {
        sent.push(["sleep", name, wake]);
        return name === "nap" ? { suspended: false, until: null } : { suspended: true, until: "2030-01-01T00:00:00Z" };
      },
    },
    signal: new AbortController().signal,
    extended() {},
    lost() {},
    suspended: (e) => suspensions.push(e),
  };
  const job = new RunningJob({ job: { id: 1, steps: [] }, lease: { job: 1, token: "1" } }, run);
  assert.equal(await job.sleep("nap", 1), undefined, "woke: the run goes on");
  await job.step("nap", () => 1);
  const until = new Date(0);
  await assert.rejects(job.sleepUntil("nap", until), (e) => e instanceof Suspended && e.step === "nap#3" && e.until === "2030-01-01T00:00:00Z");
  assert.equal(suspensions.length, 1);
  assert.ok(suspensions[0] instanceof Suspended);
  // A sleep inside a step's body goes through it as it is, not as a retry.
  await assert.rejects(job.step("wrapped", () => job.sleep("inner", 5)), (e) => e instanceof Suspended && e.step === "inner");
  assert.deepEqual(sent, [
    ["sleep", "nap", { seconds: 1 }],
    ["step", "nap#2", 1],
    ["sleep", "nap#3", { until }],
    ["sleep", "inner", { seconds: 5 }],
  ]);
  await assert.rejects(job.sleep("bad", -1), (e) => e instanceof FailJob && e.group === "step" && e.message === 'step "bad": seconds: must be a number of seconds, at least 0, got -1');
  await assert.rejects(job.sleepUntil("bad", 5), (e) => e instanceof FailJob && e.group === "step");
  await assert.rejects(job.sleep("nap#9", 1), (e) => e instanceof FailJob && /must not hold '#'/.test(e.message));
  assert.equal(sent.length, 4, "nothing sent for a bad sleep");
});
