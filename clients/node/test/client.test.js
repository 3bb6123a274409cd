// The client against a real server: each call's effect, and errors that name the field and the rule.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";

import { Client, InvalidInput, InvalidState, LeaseLost, NotFound, Unauthorized, Unavailable, push } from "../src/index.js";
import { startServer } from "./server.js";

let server;
before(async () => (server = await startServer()));
after(async () => server.stop());

test("a job goes in and reads back", async () => {
  const client = new Client(server.url);
  assert.equal((await client.health()).status, "ok");
  const job = await client.enqueue("email.send", { to: "a@example.com" }, { queue: "mail-1", priority: 5, tags: ["welcome"] });
  assert.deepEqual([job.state, job.existing], ["queued", false]);
  const read = await client.get(job.id);
  assert.deepEqual([read.queue, read.name, read.state, read.priority], ["mail-1", "email.send", "queued", 5]);
  assert.deepEqual(read.data, { to: "a@example.com" });
  assert.deepEqual(read.tags, ["welcome"]);
  assert.ok((await client.queues()).some((q) => q.queue === "mail-1"));
});

test("a batch goes in whole or not at all, its error naming the bad job", async () => {
  const client = new Client(server.url);
  const done = await client.enqueueBatch([push("a", { n: 1 }, { queue: "batch" }), push("b", null, { queue: "batch", delay: 60 })]);
  assert.deepEqual(done.map((e) => e.state), ["queued", "scheduled"]);
  await assert.rejects(client.enqueueBatch([push("ok", null, { queue: "batch" }), push("", null, { queue: "batch" })]), (e) => {
    assert.ok(e instanceof InvalidInput);
    assert.deepEqual([e.field, e.status], ["jobs[1].name", 400]);
    return true;
  });
  assert.equal((await client.dequeue("w", { queues: ["batch"], limit: 10 })).length, 1, "the refused batch added nothing");
});

test("a batch's callback comes once every job ended, with the counts and the failed ids", async () => {
  const client = new Client(server.url);
  const created = await client.createBatch([push("page", { n: 1 }, { queue: "pages" })], {
    onComplete: push("book.report", { book: 7 }, { queue: "book-callbacks" }),
    open: true,
    description: "book 7",
  });
  await client.addToBatch(created.id, [push("page", { n: 2 }, { queue: "pages" })]);
  await client.enqueue("page", { n: 3 }, { queue: "pages", batch: created.id });
  assert.deepEqual((await client.batch(created.id)).total, 3);
  const taken = await client.dequeue("w", { queues: ["pages"], limit: 3 });
  assert.equal(taken.length, 3);
  await client.finish(taken[0].lease);
  await client.finish(taken[1].lease);
  await client.fail(taken[2].lease, "bad-page", "no such page");
  assert.equal((await client.batch(created.id)).state, "open", "every job ended, but it is open");
  const closed = await client.closeBatch(created.id);
  assert.equal(closed.pending, 0);
  const done = await client.batch(created.id);
  assert.deepEqual([done.state, done.completed, done.failed], ["completed", 2, 1]);
  const callback = await client.get(done.on_complete.job);
  assert.deepEqual(callback.data, {
    book: 7,
    batch: { id: created.id, description: "book 7", total: 3, completed: 2, failed: 1, cancelled: 0, failed_ids: [taken[2].job.id] },
  });
  assert.ok((await client.batches({ state: "completed" })).batches.some((b) => b.id === created.id));
  await assert.rejects(client.addToBatch(created.id, [push("late")]), (e) => e instanceof InvalidState && e.status === 409);
  await assert.rejects(client.createBatch([push("x", null, { uniqueKey: "k" })]), (e) => {
    assert.ok(e instanceof InvalidInput);
    assert.equal(e.field, "jobs[0].unique_key");
    return true;
  });
  await assert.rejects(client.batch(987654), (e) => e instanceof NotFound);
});

test("every push option reaches the server, read back from the job", async () => {
  const client = new Client(server.url);
  const trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  const first = await client.enqueue("options.first", { n: 1 }, {
    queue: "options",
    priority: 3,
    weight: 2,
    uniqueKey: "options-1",
    tags: ["a"],
    leaseTimeout: 90,
    timeout: 30,
    traceParent: trace,
    concurrencyKey: "customer:1",
    concurrencyLimit: 1,
    retry: { maxAttempts: 4, initialDelay: 1, multiplier: 3, maxDelay: 60, jitter: 0 },
  });
  let job = await client.get(first.id);
  assert.deepEqual(
    [job.queue, job.priority, job.weight, job.unique_key, job.tags, job.lease_timeout_ms, job.timeout_ms, job.trace_parent, job.concurrency_key, job.concurrency_limit],
    ["options", 3, 2, "options-1", ["a"], 90_000, 30_000, trace, "customer:1", 1],
  );
  assert.deepEqual(job.retry, { max_attempts: 4, initial_delay_ms: 1000, multiplier: 3, max_delay_ms: 60_000, jitter: 0 });
  const cron = await client.enqueue("options.cron", null, { queue: "options-cron", schedule: "0 4 * * *", timeZone: "Europe/Berlin" });
  const [run] = await client.dequeue("w", { queues: ["options-cron"] });
  await client.finish(run.lease);
  job = await client.get(cron.id);
  assert.deepEqual([job.state, job.schedule, job.time_zone], ["scheduled", "0 4 * * *", "Europe/Berlin"]);
  assert.match(job.run_at, /T0[23]:00:00/, "the next run is at 04:00 in Berlin, not in UTC");
  const later = await client.enqueue("options.later", null, { queue: "options-later", runAt: new Date(Date.UTC(2099, 0, 1)) });
  assert.equal((await client.get(later.id)).run_at, "2099-01-01T00:00:00Z");
  const waiting = await client.enqueue("options.waiting", null, { queue: "options-later", dependsOn: [first.id], children: "job" });
  job = await client.get(waiting.id);
  assert.deepEqual([job.state, job.depends_on, job.children], ["waiting", [first.id], "job"]);
  const [parent] = await client.dequeue("w", { queues: ["options"] });
  const child = await client.enqueue("options.child", null, { queue: "options-later", parent: parent.job.id });
  job = await client.get(child.id);
  assert.deepEqual([job.parent, job.awaits_parent], [parent.job.id, true]);
  const throttle = { key: "options-throttle", period: 3600, states: ["queued"] };
  const throttled = await client.enqueue("options.throttled", null, { queue: "options-later", throttle });
  assert.equal((await client.get(throttled.id)).throttle_key, "options-throttle");
});

test("a partial retry policy: maxAttempts 1 runs the job once (needs the server of issue 42)", async () => {
  const client = new Client(server.url);
  const { id } = await client.enqueue("once", null, { queue: "once", retry: { maxAttempts: 1 } });
  assert.equal((await client.get(id)).retry.max_attempts, 1);
  const [claimed] = await client.dequeue("w", { queues: ["once"] });
  assert.equal(await client.retry(claimed.lease, "boom"), "failed");
  const job = await client.get(id);
  assert.deepEqual([job.state, job.failure_group], ["failed", "retries-exhausted"]);
});

test("a concurrency key limits its jobs and shows on them", async () => {
  const client = new Client(server.url);
  for (const n of [1, 2, 3]) {
    await client.enqueue("report", { n }, { queue: "reports", concurrencyKey: "customer:42", concurrencyLimit: 2 });
  }
  const taken = await client.dequeue("w", { queues: ["reports"], limit: 10 });
  assert.equal(taken.length, 2);
  assert.deepEqual([taken[0].job.concurrency_key, taken[0].job.concurrency_limit], ["customer:42", 2]);
  await assert.rejects(client.enqueue("x", null, { concurrencyKey: "k", concurrencyLimit: 0 }), (e) => {
    assert.ok(e instanceof InvalidInput);
    assert.equal(e.field, "concurrency.limit");
    return true;
  });
});

test("debounced and throttled pushes land in one job", async () => {
  const client = new Client(server.url);
  const debounce = { key: "customer:42", delay: 30, maxWait: 300 };
  const first = await client.enqueue("reindex", { n: 1 }, { queue: "keys", debounce });
  const again = await client.enqueue("reindex", { n: 2 }, { queue: "keys", debounce });
  assert.deepEqual([again.id, again.existing, first.existing], [first.id, true, false]);
  const job = await client.get(first.id);
  assert.deepEqual([job.data, job.debounce_key], [{ n: 2 }, "customer:42"]);
  const throttle = { key: "welcome:ada", period: 86400 };
  const welcome = await client.enqueue("welcome", null, { queue: "keys", throttle });
  assert.equal((await client.enqueue("welcome", null, { queue: "keys", throttle })).id, welcome.id);
  await assert.rejects(client.enqueue("x", null, { debounce: { key: "k", delay: 600, maxWait: 60 } }), (e) => {
    assert.ok(e instanceof InvalidInput);
    assert.equal(e.field, "debounce.delay_ms");
    return true;
  });
});

test("a worker's calls: dequeue, heartbeat, finish; a stale lease is refused", async () => {
  const client = new Client(server.url);
  const pushed = await client.enqueue("resize", { w: 100 }, { queue: "calls" });
  const [claimed] = await client.dequeue("w1", { queues: ["calls"], names: ["resize"], limit: 5 });
  assert.equal(claimed.job.id, pushed.id);
  assert.equal(typeof claimed.lease.token, "string");
  assert.ok(await client.heartbeat(claimed.lease, { done: 0.5 }));
  await client.finish(claimed.lease, { w: 100, ok: true });
  const done = await client.get(pushed.id);
  assert.deepEqual([done.state, done.data], ["completed", { w: 100, ok: true }]);
  await assert.rejects(client.finish(claimed.lease), (e) => e instanceof LeaseLost && e.status === 409);
  await assert.rejects(client.get(999_999), NotFound);
});

test("retry, fail and release report what became of the job", async () => {
  const client = new Client(server.url);
  const retry = { max_attempts: 2, initial_delay_ms: 30_000, multiplier: 2, max_delay_ms: 60_000, jitter: 0 };
  const ids = [];
  for (let i = 0; i < 3; i++) ids.push((await client.enqueue("job", null, { queue: "outcomes", retry })).id);
  const [first, second, third] = await client.dequeue("w", { queues: ["outcomes"], limit: 3 });
  assert.equal(await client.retry(first.lease, "flaky", { delay: 30 }), "scheduled");
  await client.fail(second.lease, "bad-input", "cannot parse");
  await client.release(third.lease);
  const states = await Promise.all(ids.map(async (id) => (await client.get(id)).state));
  assert.deepEqual(states, ["scheduled", "failed", "queued"]);
});

test("finishMany answers each job, and finishAndTake brings the next ones", async () => {
  const client = new Client(server.url);
  const ids = [];
  for (let i = 0; i < 4; i++) ids.push((await client.enqueue("n", { i }, { queue: "many" })).id);
  const [first, second] = await client.dequeue("w", { queues: ["many"], limit: 2 });
  const stale = { ...second.lease, token: "12345" };
  const errors = await client.finishMany([{ lease: first.lease, data: { r: 1 } }, stale]);
  assert.equal(errors[0], null);
  assert.ok(errors[1] instanceof LeaseLost);
  const answer = await client.finishAndTake([second.lease], "w", { queues: ["many"], limit: 5 });
  assert.deepEqual(answer.errors, [null]);
  assert.equal(answer.takeError, null);
  assert.deepEqual(answer.taken.map((c) => c.job.id).sort((a, b) => a - b), ids.slice(2));
});

test("a finish keeps its result apart from the data", async () => {
  const client = new Client(server.url);
  const ids = [];
  for (let i = 0; i < 4; i++) ids.push((await client.enqueue("render", { n: i }, { queue: "results" })).id);
  const claimed = new Map((await client.dequeue("w", { queues: ["results"], limit: 4 })).map((c) => [c.job.id, c.lease]));
  await client.finish(claimed.get(ids[0]), null, { result: { pages: 12 } });
  await client.finish(claimed.get(ids[1]), { n: "replaced" }, { result: { pages: 3 } });
  assert.deepEqual(await client.finishMany([{ lease: claimed.get(ids[2]), result: ["many"] }]), [null]);
  const answer = await client.finishAndTake([{ lease: claimed.get(ids[3]), data: { n: "new" }, result: "took" }], "w", { queues: ["results"] });
  assert.deepEqual([answer.errors, answer.taken], [[null], []]);
  const jobs = await Promise.all(ids.map((id) => client.get(id)));
  assert.deepEqual(
    jobs.map((j) => [j.state, j.data, j.result]),
    [
      ["completed", { n: 0 }, { pages: 12 }],
      ["completed", { n: "replaced" }, { pages: 3 }],
      ["completed", { n: 2 }, ["many"]],
      ["completed", { n: "new" }, "took"],
    ],
  );
  assert.deepEqual(jobs[0].history.at(-1).result, { pages: 12 }, "the attempt keeps its own");
});

test("wait answers the moment another request finishes the job", async () => {
  const client = new Client(server.url);
  const { id } = await client.enqueue("render", { n: 1 }, { queue: "wait" });
  const [claimed] = await client.dequeue("w", { queues: ["wait"] });
  let answeredAt = null;
  const waiting = new Client(server.url).wait(id, 30).then((job) => {
    answeredAt = Date.now();
    return job;
  });
  await sleep(500);
  assert.equal(answeredAt, null, "the wait holds while the job runs");
  const finishedAt = Date.now();
  await client.finish(claimed.lease, null, { result: { pages: 12 } });
  const job = await waiting;
  assert.deepEqual([job.id, job.state, job.result, job.data], [id, "completed", { pages: 12 }, { n: 1 }]);
  assert.ok(answeredAt - finishedAt < 5000, "it answered when the job ended, not at its timeout");
});

test("a wait on a job that stays queued answers with it at its timeout", async () => {
  const client = new Client(server.url);
  const { id } = await client.enqueue("later", null, { queue: "wait-queued" });
  const started = Date.now();
  const job = await client.wait(id, 1);
  const elapsed = Date.now() - started;
  assert.deepEqual([job.id, job.state, job.result], [id, "queued", null]);
  assert.ok(elapsed >= 900 && elapsed < 5000, `${elapsed} ms`);
  await assert.rejects(client.wait(999_999, 1), NotFound);
  await assert.rejects(client.wait(id, -1), (e) => e instanceof InvalidInput && e.field === "timeout");
});

test("a wait longer than the server's cap asks again", async () => {
  const capped = await startServer({ flags: ["--max-wait", "1s"] });
  try {
    const client = new Client(capped.url);
    const { id } = await client.enqueue("later");
    let started = Date.now();
    assert.equal((await client.wait(id, 2.5)).state, "queued");
    const elapsed = Date.now() - started;
    assert.ok(elapsed >= 2400 && elapsed < 10_000, `three requests of at most 1 s each, not one: ${elapsed} ms`);
    const [claimed] = await client.dequeue("w");
    setTimeout(() => new Client(capped.url).finish(claimed.lease, null, { result: "late" }), 1500);
    started = Date.now();
    const job = await client.wait(id, 30);
    assert.deepEqual([job.state, job.result], ["completed", "late"]);
    assert.ok(Date.now() - started < 10_000);
  } finally {
    await capped.stop();
  }
});

test("a long poll answers when a job arrives", async () => {
  const client = new Client(server.url);
  setTimeout(() => new Client(server.url).enqueue("late", null, { queue: "poll" }), 300);
  const started = Date.now();
  const [claimed] = await client.dequeue("w", { queues: ["poll"], wait: 10 });
  assert.equal(claimed.job.name, "late");
  assert.ok(Date.now() - started < 9000, "it answered when the job came");
  assert.deepEqual(await client.dequeue("w", { queues: ["poll"], wait: 0.2 }), []);
});

test("bad input names the field and the rule", async () => {
  const client = new Client(server.url);
  await assert.rejects(client.enqueue("x", null, { priority: 10 ** 12 }), (e) => e instanceof InvalidInput && e.field === "priority");
  await assert.rejects(client.dequeue("w", { limit: 0 }), (e) => e instanceof InvalidInput && e.field === "limit" && /limit/.test(e.message));
  await assert.rejects(client.enqueue("x", null, { delay: -1 }), (e) => e instanceof InvalidInput && e.field === "delay");
});

test("a token is sent, and a missing one refused", async () => {
  const guarded = await startServer({ token: "s3cret-token-of-16+" });
  try {
    await assert.rejects(new Client(guarded.url).enqueue("x"), Unauthorized);
    assert.equal((await new Client(guarded.url, { token: "s3cret-token-of-16+" }).enqueue("x")).state, "queued");
  } finally {
    await guarded.stop();
  }
});

test("a server out of reach is unavailable", async () => {
  await assert.rejects(new Client("http://127.0.0.1:9", { timeout: 2 }).enqueue("x"), (e) => e instanceof Unavailable && e.status === null);
});

test("a URL that is not http:// or https:// is refused at once, naming the server", () => {
  for (const bad of ["127.0.0.1:6670", "ftp://example.com", "not a url"]) {
    assert.throws(() => new Client(bad), (e) => e instanceof InvalidInput && e.field === "server", bad);
  }
});
