// The calls that look after jobs, queues and templates, against a real server: each call's effect, read back.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { Client, InvalidState, NotFound, push } from "../src/index.js";
import { startServer } from "./server.js";

let server;
let client;
before(async () => {
  server = await startServer();
  client = new Client(server.url);
});
after(async () => server.stop());

const ids = (page) => page.jobs.map((j) => j.id);

test("jobs are listed by every filter of GET /v1/jobs, a page at a time", async () => {
  const a = await client.enqueue("list.a", null, { queue: "list", tags: ["vip"] });
  const b = await client.enqueue("list.b", null, { queue: "list" });
  const c = await client.enqueue("other.c", null, { queue: "list-other" });
  assert.deepEqual(ids(await client.jobs({ queue: "list" })), [b.id, a.id], "newest first");
  assert.deepEqual(ids(await client.jobs({ name: "list.*" })), [b.id, a.id]);
  assert.deepEqual(ids(await client.jobs({ tag: "vip" })), [a.id]);
  assert.deepEqual(ids(await client.jobs({ queue: "list-other", state: "queued" })), [c.id]);
  await client.track(b.id);
  assert.deepEqual(ids(await client.jobs({ tracked: true })), [b.id]);
  await client.untrack(b.id);
  assert.deepEqual(ids(await client.jobs({ tracked: true })), []);
  const first = await client.jobs({ queue: "list", limit: 1 });
  assert.deepEqual([ids(first), typeof first.next], [[b.id], "number"]);
  assert.deepEqual(ids(await client.jobs({ queue: "list", limit: 1, before: first.next })), [a.id]);
  const [claimed] = await client.dequeue("admin", { queues: ["list-other"] });
  await client.fail(claimed.lease, "bad-input", "no");
  assert.deepEqual(ids(await client.jobs({ failureGroup: "bad-input" })), [c.id]);
  assert.ok((await client.failureGroups()).some((g) => g.group === "bad-input" && g.count === 1));
  assert.equal(await client.unfail("bad-input", { queue: "list-again" }), 1);
  const again = await client.get(c.id);
  assert.deepEqual([again.state, again.queue], ["queued", "list-again"]);
});

test("a job's own changes: priority, time, queue, data, tags, dependencies, requeue, cancel and delete", async () => {
  const dep = await client.enqueue("dep", null, { queue: "own" });
  const { id } = await client.enqueue("own", { v: 1 }, { queue: "own", delay: 3600 });
  await client.setPriority(id, 7);
  assert.equal(await client.reschedule(id, new Date(Date.now() + 7200_000)), "scheduled");
  await client.move(id, "own-moved");
  await client.setData(id, { v: 2 });
  await client.changeTags(id, { add: ["a", "b"] });
  await client.changeTags(id, { remove: ["a"] });
  assert.equal(await client.changeDependencies(id, { add: [dep.id] }), "waiting");
  let job = await client.get(id);
  assert.deepEqual([job.priority, job.queue, job.data, job.tags, job.depends_on], [7, "own-moved", { v: 2 }, ["b"], [dep.id]]);
  assert.equal(await client.changeDependencies(id, { remove: [dep.id] }), "scheduled");
  await client.cancel(id);
  assert.equal((await client.get(id)).state, "cancelled");
  assert.equal(await client.requeue(id), "queued");
  job = await client.get(id);
  assert.deepEqual([job.state, job.attempt], ["queued", 0]);
  assert.equal(await client.requeue(dep.id, { runAt: "2099-01-01T00:00:00Z" }), "scheduled");
  assert.equal((await client.get(dep.id)).run_at, "2099-01-01T00:00:00Z");
  await client.delete(id);
  await assert.rejects(client.get(id), NotFound);
});

test("a bulk action takes a filter or ids, and moves to a queue", async () => {
  const pushed = await client.enqueueBatch([1, 2, 3].map((n) => push("bulk", { n }, { queue: "bulk" })));
  const [one, two, three] = pushed.map((e) => e.id);
  assert.deepEqual(await client.bulk("move", { ids: [one, two], queue: "bulk-moved" }), { matched: 2, done: 2, skipped: 0 });
  assert.deepEqual(await client.bulk("cancel", { filter: { queue: "bulk-moved" } }), { matched: 2, done: 2, skipped: 0 });
  assert.deepEqual(await client.bulk("retry", { filter: { queue: "bulk-moved", state: "cancelled" } }), { matched: 2, done: 2, skipped: 0 });
  assert.deepEqual(await client.bulk("delete", { ids: [three] }), { matched: 1, done: 1, skipped: 0 });
  assert.deepEqual(ids(await client.jobs({ queue: "bulk-moved", state: "queued" })).sort(), [one, two]);
  await assert.rejects(client.get(three), NotFound);
});

test("a queue is paused, resumed, peeked and limited", async () => {
  const { id } = await client.enqueue("q.job", null, { queue: "ops", priority: 1 });
  await client.pauseQueue("ops");
  assert.deepEqual(await client.dequeue("admin", { queues: ["ops"] }), [], "a paused queue hands out nothing");
  let stats = (await client.queues()).find((q) => q.queue === "ops");
  assert.equal(stats.paused, true);
  await client.resumeQueue("ops");
  assert.deepEqual((await client.peek("ops", { limit: 5 })).map((j) => j.id), [id]);
  await client.limitQueue("ops", 3);
  await client.limitKeys("ops", 2);
  await client.weighKey("ops", "customer:1", 4);
  await client.rateLimitQueue("ops", { jobs: 10, per: 60 });
  stats = (await client.queues()).find((q) => q.queue === "ops");
  assert.deepEqual([stats.paused, stats.concurrency, stats.key_concurrency, stats.rate_limit], [false, 3, 2, { jobs: 10, per_ms: 60_000 }]);
  await Promise.all([client.limitQueue("ops", null), client.limitKeys("ops", null), client.weighKey("ops", "customer:1", null), client.rateLimitQueue("ops", null)]);
  await client.ageQueue("ops-aging", 60);
  assert.equal((await client.queues()).find((q) => q.queue === "ops-aging").priority_aging_ms, 60_000);
  await client.ageQueue("ops-aging", null);
  stats = (await client.queues()).find((q) => q.queue === "ops");
  assert.deepEqual([stats.concurrency ?? null, stats.key_concurrency ?? null, stats.rate_limit ?? null], [null, null, null]);
  const [claimed] = await client.dequeue("admin", { queues: ["ops"], priority: 1, leaseTimeout: 5, order: "round_robin" });
  assert.equal(claimed.job.id, id);
});

test("a recurring template is listed, paused, resumed, run and removed", async () => {
  await client.setRecurring("hourly", { cron: "0 * * * *", job: push("tick", { n: 1 }, { queue: "ticks" }), overlap: "skip" });
  assert.equal((await client.pauseRecurring("hourly")).paused, true);
  assert.equal((await client.listRecurring()).find((t) => t.key === "hourly").paused, true);
  const resumed = await client.resumeRecurring("hourly");
  assert.deepEqual([resumed.paused, typeof resumed.next_run], [false, "string"]);
  const run = await client.runRecurring("hourly");
  assert.deepEqual((await client.get(run.id)).data, { n: 1 });
  await assert.rejects(client.runRecurring("hourly"), InvalidState, "under skip, not while the previous run is live");
  await client.removeRecurring("hourly");
  await assert.rejects(client.getRecurring("hourly"), NotFound);
  assert.equal((await client.get(run.id)).state, "queued", "its jobs stay");
});

test("steps, retries at a time, workers, the caller and the activity log", async () => {
  const first = await client.enqueue("step.one", { n: 1 }, { queue: "steps" });
  let [claimed] = await client.dequeue("stepper", { queues: ["steps"] });
  await client.finish(claimed.lease, { n: 2 }, { next: { queue: "steps-two", delay: 0 } });
  let job = await client.get(first.id);
  assert.deepEqual([job.state, job.queue, job.data], ["queued", "steps-two", { n: 2 }]);
  [claimed] = await client.dequeue("stepper", { queues: ["steps-two"] });
  assert.equal(await client.retry(claimed.lease, "later", { runAt: new Date(Date.now() + 3600_000) }), "scheduled");
  job = await client.get(first.id);
  assert.ok(Date.parse(job.run_at) > Date.now() + 3500_000, job.run_at);
  assert.ok((await client.workers()).some((w) => w.id === "stepper"));
  assert.deepEqual(await client.whoami(), { role: "admin" });
  const { events } = await client.activity({ job: first.id, limit: 10 });
  assert.deepEqual(events.map((e) => e.event).reverse().slice(0, 3), ["added", "started", "finished"]);
  assert.ok((await client.activity({ worker: "stepper", since: new Date(Date.now() - 60_000) })).events.length >= 2);
});
