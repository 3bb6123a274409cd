// Options as a caller writes them: each push option becomes its field of `POST /v1/jobs`, and an option the client
// does not know is refused, naming it and the options there are, before any request leaves.
import assert from "node:assert/strict";
import { test } from "node:test";

import { Client, InvalidInput, Worker, push } from "../src/index.js";

// Nothing listens on port 9 (discard): a call that sent a request would fail as Unavailable, not as InvalidInput.
const unreachable = new Client("http://127.0.0.1:9", { timeout: 2 });

/** Asserts that `call` throws (or rejects with) an InvalidInput naming `field`, whose message matches each of `words`. */
async function refused(call, field, ...words) {
  let error = null;
  try {
    await call();
  } catch (e) {
    error = e;
  }
  assert.ok(error instanceof InvalidInput, `expected an InvalidInput naming ${field}, got ${error}`);
  assert.equal(error.field, field);
  assert.equal(error.status, null, "the client refused it itself");
  for (const word of words) assert.match(error.message, word);
}

test("each push option fills its field", () => {
  const check = (options, expected) => assert.deepEqual(push("x", { n: 1 }, options), { name: "x", data: { n: 1 }, ...expected }, JSON.stringify(options));
  check({}, {});
  check({ queue: "mail", priority: 5, weight: 2, uniqueKey: "u", tags: ["a", "b"] }, { queue: "mail", priority: 5, weight: 2, unique_key: "u", tags: ["a", "b"] });
  check({ delay: 1.5, leaseTimeout: 60, timeout: 0.25 }, { delay_ms: 1500, lease_timeout_ms: 60_000, timeout_ms: 250 });
  check({ runAt: "2030-01-31T09:00:00Z" }, { run_at: "2030-01-31T09:00:00Z" });
  check({ runAt: new Date(Date.UTC(2030, 0, 31, 9)) }, { run_at: "2030-01-31T09:00:00.000Z" });
  check({ schedule: "0 4 * * *", timeZone: "Europe/Berlin" }, { schedule: "0 4 * * *", time_zone: "Europe/Berlin" });
  check({ dependsOn: [1, 2], parent: 3, children: "job" }, { depends_on: [1, 2], parent: 3, children: "job" });
  check({ traceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", batch: 7 }, {
    trace_parent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    batch: 7,
  });
  check({ retry: { maxAttempts: 1 } }, { retry: { max_attempts: 1 } });
  check({ retry: { maxAttempts: 3, initialDelay: 5, multiplier: 2, maxDelay: 600, jitter: 0.1 } }, {
    retry: { max_attempts: 3, initial_delay_ms: 5000, multiplier: 2, max_delay_ms: 600_000, jitter: 0.1 },
  });
  check({ retry: { max_attempts: 2, initial_delay_ms: 30_000 } }, { retry: { max_attempts: 2, initial_delay_ms: 30_000 } });
  check({ debounce: { key: "k", delay: 30, maxWait: 300 } }, { debounce: { key: "k", delay_ms: 30_000, max_wait_ms: 300_000 } });
  check({ throttle: { key: "k", period: 86400, states: ["queued"] } }, { throttle: { key: "k", period_ms: 86_400_000, states: ["queued"] } });
  check({ concurrencyKey: "customer:42", concurrencyLimit: 2 }, { concurrency: { key: "customer:42", limit: 2 } });
  check({ queue: undefined, priority: null }, {});
  assert.deepEqual(push("x"), { name: "x" });
});

test("an unknown option is refused, naming it and listing the options", async () => {
  await refused(() => push("x", {}, { dependsOn: [1], maxAttempts: 3 }), "maxAttempts", /^maxAttempts: is not a push option \(it belongs in retry: \{ maxAttempts \}\); the push options are queue, priority, delay, runAt, /);
  await refused(() => push("x", {}, { time_zone: "Europe/Berlin" }), "time_zone", /did you mean timeZone\?/);
  await refused(() => push("x", {}, { timezone: "Europe/Berlin" }), "timezone", /did you mean timeZone\?/);
  await refused(() => push("x", {}, { delay_ms: 5 }), "delay_ms", /did you mean delay\?/);
  await refused(() => push("x", {}, { data: 1 }), "data", /the data is the second argument of push and enqueue/);
  await refused(() => push("x", {}, { concurrency: { key: "k" } }), "concurrency", /concurrencyKey and concurrencyLimit/);
  await refused(() => push("x", {}, { retry: { maxAttempt: 1 } }), "retry.maxAttempt", /is not a retry option \(did you mean maxAttempts\?\); the retry options are maxAttempts, initialDelay, multiplier, maxDelay, jitter$/);
  await refused(() => push("x", {}, { debounce: { key: "k", delay: 1, maxwait: 2 } }), "debounce.maxwait", /did you mean maxWait\?/);
  await refused(() => push("x", {}, { throttle: { key: "k", period: 1, every: 2 } }), "throttle.every", /the throttle options are key, period, states/);
  await refused(() => push("x", {}, "mail"), "options", /must be an object of push options, got the text "mail"/);
  await refused(() => push("x", {}, { retry: 3 }), "retry", /must be an object of retry options, got 3/);
});

test("a value the client converts is checked, naming the option", async () => {
  await refused(() => push("x", {}, { delay: -1 }), "delay", /^delay: must be a number of seconds, at least 0, got -1$/);
  await refused(() => push("x", {}, { retry: { initialDelay: "5s" } }), "retry.initialDelay", /got the text "5s"/);
  await refused(() => push("x", {}, { tags: "vip" }), "tags", /^tags: must be an array, got the text "vip"$/);
  await refused(() => push("x", {}, { dependsOn: 4 }), "dependsOn", /must be an array, got 4/);
  await refused(() => push("x", {}, { runAt: new Date("no") }), "runAt", /must be a time/);
  await refused(() => push("x", {}, { retry: { maxAttempts: 1, max_attempts: 2 } }), "retry.max_attempts", /sets the same field as retry\.maxAttempts/);
});

test("every call refuses an option it does not know before sending anything", async () => {
  await refused(() => unreachable.enqueue("x", {}, { schedule: "0 4 * * *", timezone: "Europe/Berlin" }), "timezone", /did you mean timeZone/);
  await refused(() => unreachable.jobs({ failure_group: "g" }), "failure_group", /did you mean failureGroup\?/);
  await refused(() => unreachable.jobs({ status: "failed" }), "status", /the job filters are queue, state, name, tag, failureGroup, parent, batch, tracked, before, limit/);
  await refused(() => unreachable.bulk("cancel", { filter: { queues: "q" } }), "filter.queues", /did you mean queue\?/);
  await refused(() => unreachable.bulk("cancel", { id: [1] }), "id", /the bulk options are filter, ids, queue/);
  await refused(() => unreachable.events({ kind: ["finished"] }), "kind", /the event filters are queue, name, job, kinds, after, signal/);
  await refused(() => unreachable.setRecurring("k", { cron: "0 4 * * *", job: push("x"), tz: "UTC" }), "tz", /the recurring options are cron, job, timeZone, missed, overlap/);
  await refused(() => unreachable.createBatch([], { onsuccess: push("x") }), "onsuccess", /did you mean onSuccess\?/);
  await refused(() => unreachable.dequeue("w", { queue: "mail" }), "queue", /the dequeue options are queues, /);
  await refused(() => unreachable.finish({ job: 1, token: "1" }, null, { results: 1 }), "results", /the finish options are result, next/);
  await refused(() => unreachable.retry({ job: 1, token: "1" }, "e", { delay_ms: 5 }), "delay_ms", /did you mean delay\?/);
  await refused(() => unreachable.activity({ limt: 5 }), "limt", /the activity filters are /);
  await refused(() => unreachable.rateLimitQueue("q", { jobs: 1, per_ms: 1000 }), "per_ms", /did you mean per\?/);
  await refused(() => new Client("http://127.0.0.1:9", { tokn: "x" }), "tokn", /the client options are token, timeout, caFile, certFile, keyFile/);
  await refused(() => new Worker("http://127.0.0.1:9", "w", { queue: "mail" }), "queue", /did you mean queues\?/);
});
