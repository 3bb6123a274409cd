// Workers for the tests of handlers against a real server: started on one queue with the given handlers, quiet.
// The step, sleep, signal and fan-out tests share them.

import { Worker } from "../src/index.js";
import { eventually } from "./server.js";

/** A logger that says nothing. */
export const quiet = { warn() {}, error() {} };

/** A worker of `url` on `queue` with `handlers` and one slot, started; `stop()` resolves to its report. */
export function startWorker(url, queue, handlers) {
  const worker = new Worker(url, `node-${queue}`, { queues: [queue], wait: 1, maxConcurrency: 1, logger: quiet });
  for (const [name, fn] of Object.entries(handlers)) worker.handler(name, fn);
  const running = worker.start();
  return {
    async stop() {
      worker.stop();
      return running;
    },
  };
}

/** Runs a worker of `url` on `queue` with `handlers` until `done()`, then stops it; resolves to its report. */
export async function work(url, queue, handlers, what, done) {
  const worker = new Worker(url, `node-${queue}`, { queues: [queue], wait: 1, logger: quiet });
  for (const [name, fn] of Object.entries(handlers)) worker.handler(name, fn);
  const running = worker.start();
  try {
    await eventually(what, done);
  } finally {
    worker.stop();
  }
  return running;
}
