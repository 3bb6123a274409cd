// The Node worker's throughput, as `cairn bench --scenario workers --clients 1` measures the Rust one: a producer
// enqueues `--batch-size` jobs per request while one Worker of `--slots` slots runs them with a no-op handler; the time
// is from the start until the worker has reported every job.
//
//     node clients/node/bench.mjs --server http://127.0.0.1:6670 --jobs 20000 --slots 8
import { parseArgs } from "node:util";

import { Client, Worker, push } from "./src/index.js";

const { values } = parseArgs({
  options: {
    server: { type: "string", default: "http://127.0.0.1:6670" },
    jobs: { type: "string", default: "20000" },
    slots: { type: "string", default: "8" },
    "batch-size": { type: "string", default: "100" },
  },
});
const [jobs, slots, batch] = [Number(values.jobs), Number(values.slots), Number(values["batch-size"])];
const queue = `bench-node-${Date.now()}`;
let handled = 0;
let allHandled;
const done = new Promise((resolve) => (allHandled = resolve));
const worker = new Worker(values.server, "bench-node", { queues: [queue], maxConcurrency: slots, wait: 1 }).handler("bench.noop", () => {
  if (++handled === jobs) allHandled();
});
const started = performance.now();
const running = worker.start();
const client = new Client(values.server);
for (let first = 0; first < jobs; first += batch) {
  const last = Math.min(jobs, first + batch);
  await client.enqueueBatch(Array.from({ length: last - first }, (_, i) => push("bench.noop", { i: first + i }, { queue })));
}
await done;
worker.stop();
const report = await running;
const seconds = (performance.now() - started) / 1000;
console.log(`node worker (${slots} slots): ${report.finished.toLocaleString("en")} jobs in ${seconds.toFixed(2)}s, ${Math.round(report.finished / seconds).toLocaleString("en")} jobs/s`);
