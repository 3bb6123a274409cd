// The worker of test/workflow-kill.test.js, in a process of its own, which the test SIGKILLs: not a test itself. It
// runs the ten-step workflow (eight bodies, a sleep and a wait for a signal) until the round's job completed, then
// stops and exits 0. Each body appends its name to the log, a file outside the queue, in one write synced to disk
// before the step is recorded, and takes a moment, so that kills land inside bodies as well as between them.
//
//     node workflow-kill-worker.js URL QUEUE LOG JOB_ID
import { closeSync, fsyncSync, openSync, writeSync } from "node:fs";
import { setTimeout as pause } from "node:timers/promises";

import { Client, Worker } from "../src/index.js";

const [url, queue, log, jobId] = process.argv.slice(2);
// No worker outlives its test, even one whose parent is gone.
const LIFETIME_MS = 60_000;
setTimeout(() => {
  console.error("the worker ran out of time");
  process.exit(3);
}, LIFETIME_MS).unref();

/** Appends `line` to the log in one write, synced to disk. */
function append(line) {
  const fd = openSync(log, "a");
  try {
    const text = `${line}\n`;
    if (writeSync(fd, text) !== Buffer.byteLength(text)) throw new Error(`a short write to ${log}`);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Step `name`, whose body notes that it ran. */
const body = (job, name) =>
  job.step(name, async () => {
    append(name);
    await pause(15);
    return name;
  });

const worker = new Worker(url, `node-kill-${process.pid}`, { queues: [queue], wait: 1, logger: { warn() {}, error: console.error } }).handler(
  "workflow",
  async (job) => {
    for (const name of ["s1", "s2", "s3"]) await body(job, name);
    await job.sleep("nap", 0.2);
    for (const name of ["s4", "s5", "s6"]) await body(job, name);
    const approval = await job.waitForSignal("approved", job.data.key, 60);
    for (const name of ["s7", "s8"]) await body(job, name);
    return { approval };
  },
);
const running = worker.start();
const client = new Client(url);
while ((await client.get(Number(jobId))).state !== "completed") await pause(50);
worker.stop();
await running;
