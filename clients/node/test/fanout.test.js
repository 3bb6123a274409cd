// Fan-out and fan-in (`job.spawn`, `job.join`, `client.spawn`, `client.join`), against a real server as Rust's
// `tests/it/fan_out.rs` holds them: a parent pushes its children once as a step and gives up its worker until they have
// ended, then reads how each ended; a failed child holds the join until it is cancelled; a spawn naming another parent
// is refused naming the field, all or none; both are fenced by the lease.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { Client, FailJob, InvalidInput, LeaseLost, Suspended, push } from "../src/index.js";
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


const completed = (id) => async () => (await client.get(id)).state === "completed";

test("a parent spawns three children, joins them without its worker, and sums their results", async () => {
  const queue = "fan-sum";
  const { id } = await client.enqueue("sum", null, { queue });
  // Counted outside the queue: how many times each child's handler ran, and what the parent's spawn and join answered.
  const doubled = [];
  const spawnedIds = [];
  const joinedIds = [];
  // One slot: the children cannot run before the parent gives it up, so the join suspends the parent at least once.
  const worker = startWorker(server.url, queue, {
    double: async (job) => {
      doubled.push(job.data);
      return job.data * 2;
    },
    sum: async (job) => {
      const ids = await job.spawn("parts", [1, 2, 3].map((n) => push("double", n, { queue })));
      spawnedIds.push(ids);
      const children = await job.join("gather");
      joinedIds.push(children.map((child) => child.id));
      job.setResult(children.reduce((sum, child) => sum + child.result, 0));
    },
  });
  let report;
  try {
    await eventually("the parent completes", completed(id));
  } finally {
    report = await worker.stop();
  }
  const parent = await client.get(id);
  assert.equal(parent.result, 12);
  assert.ok(report.suspended >= 1, `the parent was suspended: ${JSON.stringify(report)}`);
  assert.deepEqual([report.finished, report.retried, report.failed, report.lost], [4, 0, 0, 0]);
  assert.deepEqual(doubled.sort(), [1, 2, 3], "each child ran once");
  assert.equal(parent.history.at(-1).outcome, "completed");
  assert.ok(parent.history.slice(0, -1).every((a) => a.outcome === "suspended"), JSON.stringify(parent.history));

  // Nothing pushed twice: the replay read the ids from the claim.
  const { jobs } = await client.jobs({ queue, limit: 100 });
  assert.equal(jobs.length, 4, "exactly the parent and its three children");
  const [first] = spawnedIds;
  assert.ok(spawnedIds.every((ids) => JSON.stringify(ids) === JSON.stringify(first)), `every run got the same ids: ${JSON.stringify(spawnedIds)}`);
  assert.deepEqual(joinedIds, [first], "the join answered once, with the spawn's ids in order");
  const children = (await client.jobs({ parent: id })).jobs;
  assert.deepEqual(children.map((j) => j.id).sort((a, b) => a - b), [...first].sort((a, b) => a - b));

  const [parts, gather] = parent.steps;
  assert.deepEqual(parent.steps.map((s) => s.name), ["parts", "gather"]);
  assert.deepEqual(parts.result, { children: first });
  assert.deepEqual(
    gather.result.children.map((child) => [child.id, child.state, child.result]),
    first.map((childId, i) => [childId, "completed", (i + 1) * 2]),
  );
});

test("a failed child holds the join until it is cancelled, and the join then says cancelled", async () => {
  const queue = "fan-failed";
  const { id } = await client.enqueue("gather", null, { queue });
  const worker = startWorker(server.url, queue, {
    double: async (job) => job.data * 2,
    broken: async () => {
      throw new FailJob("broken", "no good");
    },
    gather: async (job) => {
      await job.spawn("parts", [push("double", 5, { queue }), push("broken", null, { queue })]);
      return job.join("gather");
    },
  });
  let ids;
  try {
    await eventually("the broken child fails", async () => {
      const children = (await client.jobs({ parent: id })).jobs;
      return children.length === 2 && children.some((j) => j.state === "failed") && children.some((j) => j.state === "completed");
    });
    ids = (await client.get(id)).steps[0].result.children;
    const held = await client.get(id);
    assert.equal(held.state, "waiting", "the failed child holds the parent");
    assert.deepEqual(held.history.map((a) => a.outcome), ["suspended"]);
    await client.cancel(ids[1]);
    await eventually("the parent completes", completed(id));
  } finally {
    await worker.stop();
  }
  const parent = await client.get(id);
  assert.deepEqual(parent.result, [
    { id: ids[0], state: "completed", result: 10 },
    { id: ids[1], state: "cancelled", result: null },
  ]);
  assert.deepEqual(parent.history.map((a) => a.outcome), ["suspended", "completed"]);
});

test("a spawn naming another parent is refused naming the field, and pushes none of its jobs", async () => {
  const queue = "fan-parent";
  const other = await client.enqueue("other", null, { queue: "fan-elsewhere" });
  const { id } = await client.enqueue("p", null, { queue });
  const [claimed] = await client.dequeue("node-fan-parent", { queues: [queue] });
  const jobs = [push("double", 1, { queue }), push("double", 2, { queue, parent: other.id })];
  await assert.rejects(client.spawn(claimed.lease, "parts", jobs), (e) => {
    assert.ok(e instanceof InvalidInput, e);
    assert.deepEqual([e.status, e.field], [400, "jobs[1].parent"]);
    assert.match(e.message, /^jobs\[1\]\.parent: /);
    return true;
  });
  // The job's own id as the parent is no other parent.
  const { children } = await client.spawn(claimed.lease, "parts", [push("double", 3, { queue, parent: id })]);
  assert.equal(children.length, 1);
  assert.deepEqual((await client.jobs({ queue })).jobs.map((j) => j.id).sort((a, b) => a - b), [id, children[0]]);
  // A step recorded answers its ids: the same name pushes nothing again, whatever it is given.
  assert.deepEqual(await client.spawn(claimed.lease, "parts", [push("double", 4, { queue })]), { children });
  await assert.rejects(client.spawn(claimed.lease, "parts#2", "not a list"), (e) => e instanceof InvalidInput && e.status === null && e.field === "jobs");
  // In a handler, the refusal fails the job for good (a retry would be refused the same), its message naming the step
  // and the field.
  const job = new RunningJob(claimed, { client, signal: new AbortController().signal, extended() {}, lost() {}, suspended() {} });
  await assert.rejects(job.spawn("more", jobs), (e) => e instanceof FailJob && e.group === "step" && /^step "more": jobs\[1\]\.parent: /.test(e.message));
  assert.equal((await client.jobs({ queue })).jobs.length, 2);
});

test("spawn and join are refused under a stale lease", async () => {
  const queue = "fan-stale";
  const { id } = await client.enqueue("p", null, { queue });
  const [claimed] = await client.dequeue("node-fan-stale", { queues: [queue] });
  const { children } = await client.spawn(claimed.lease, "parts", [push("double", 1, { queue })]);
  assert.deepEqual(await client.join(claimed.lease, "gather"), { suspended: true, children: [] });
  // The join gave the lease up: the job waits for its child, and nothing more runs under that lease.
  assert.equal((await client.get(id)).state, "waiting");
  await assert.rejects(client.spawn(claimed.lease, "more", [push("double", 2, { queue })]), LeaseLost);
  await assert.rejects(client.join(claimed.lease, "gather"), LeaseLost);
  await assert.rejects(client.spawn({ ...claimed.lease, token: "12345" }, "parts", []), LeaseLost);
  assert.deepEqual((await client.jobs({ parent: id })).jobs.map((j) => j.id), children, "nothing pushed under the stale lease");
  // Its child ends, and the next run's join answers under its own lease.
  const [child] = await client.dequeue("node-fan-stale", { queues: [queue] });
  assert.equal(child.job.id, children[0]);
  await client.finish(child.lease, null, { result: "done" });
  const [again] = await client.dequeue("node-fan-stale", { queues: [queue] });
  assert.equal(again.job.id, id);
  assert.deepEqual(await client.join(again.lease, "gather"), { suspended: false, children: [{ id: children[0], state: "completed", result: "done" }] });
  await client.finish(again.lease);
  await assert.rejects(client.join(again.lease, "gather"), LeaseLost);
});

/** A job made by hand, with a client that answers spawns and joins from `answers` (by step name) and notes calls. */
function handMadeJob(steps, answers) {
  const sent = [];
  const suspensions = [];
  const run = {
    client: {
      async spawn(lease, name, jobs) {
        sent.push(["spawn", name, jobs.length]);
        return answers[name];
      },
      async join(lease, name) {
        sent.push(["join", name]);
        return answers[name];
      },
      async recordStep(lease, name, result) {
        sent.push(["step", name]);
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

const at = "2026-01-01T00:00:00Z";

test("job.spawn and job.join replay recorded steps without a request, number names with steps, and join throws Suspended", async () => {
  const steps = [
    { name: "parts", result: { children: [7, 8] }, attempt: 1, recorded_at: at },
    { name: "gather", result: { children: [{ id: 7, state: "completed", result: 14 }, { id: 8, state: "cancelled" }] }, attempt: 1, recorded_at: at },
  ];
  const { job, sent, suspensions } = handMadeJob(steps, {
    "parts#3": { children: [9] },
    "gather#2": { suspended: true, children: [] },
  });
  assert.deepEqual(await job.spawn("parts", [push("double", 1)]), [7, 8]);
  assert.deepEqual(await job.join("gather"), [
    { id: 7, state: "completed", result: 14 },
    { id: 8, state: "cancelled", result: null },
  ]);
  assert.deepEqual(sent, [], "no request on a replay");
  await job.step("parts", () => 1);
  assert.deepEqual(await job.spawn("parts", [push("double", 2)]), [9]);
  await assert.rejects(job.join("gather"), (e) => {
    assert.ok(e instanceof Suspended, e);
    assert.deepEqual([e.step, e.until, e.key, e.children], ["gather#2", null, null, true]);
    assert.equal(e.message, 'step "gather#2": the job waits for its children, without its worker; let this error through');
    return true;
  });
  assert.equal(suspensions.length, 1);
  assert.deepEqual(sent, [
    ["step", "parts#2"],
    ["spawn", "parts#3", 1],
    ["join", "gather#2"],
  ]);
});

test("a step recorded as something else goes to the server, and a bad list of jobs fails the job in group step", async () => {
  const steps = [
    { name: "parts", result: "a plain step", attempt: 1, recorded_at: at },
    { name: "gather", result: { children: [1, 2] }, attempt: 1, recorded_at: at },
  ];
  const { job, sent } = handMadeJob(steps, { parts: { children: [3] }, gather: { suspended: false, children: [] } });
  assert.deepEqual(await job.spawn("parts", []), [3]);
  assert.deepEqual(await job.join("gather"), []);
  assert.deepEqual(sent, [
    ["spawn", "parts", 0],
    ["join", "gather"],
  ]);
  await assert.rejects(job.spawn("more", push("double")), (e) => e instanceof FailJob && e.group === "step" && e.message === 'step "more": jobs: must be an array, got an object');
  await assert.rejects(job.join("a#b"), (e) => e instanceof FailJob && /must not hold '#'/.test(e.message));
});
