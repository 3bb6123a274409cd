// Compiled (never run) by `tsc --noEmit` in scripts/test-node: the declarations in src/index.d.ts hold together and
// describe the calls as the tests and the README make them.
import { Client, FailJob, LeaseLost, RetryLater, Worker, push, type Batch, type ClaimedJob, type Job, type JobContext, type WorkerReport } from "../src/index.js";

async function example(): Promise<WorkerReport> {
  const client = new Client("http://127.0.0.1:6670", { token: "s3cret-token-of-16+", timeout: 10 });
  const { id, state, existing }: { id: number; state: string; existing: boolean } = await client.enqueue("email.send", { to: "a" }, { queue: "mail", delay: 30, tags: ["x"] });
  await client.enqueueBatch([push("a"), push("b", { n: 1 }, { priority: 5, leaseTimeout: 60 })]);
  await client.enqueue("reindex", { n: 1 }, { debounce: { key: "customer:42", delay: 30, maxWait: 300 } });
  await client.enqueue("welcome", null, { throttle: { key: "welcome:ada", period: 86400 } });
  await client.enqueue("report", null, { concurrencyKey: "customer:42", concurrencyLimit: 2 });
  const claimed: ClaimedJob[] = await client.dequeue("w", { queues: ["mail"], names: ["email.*"], limit: 8, wait: 30 });
  for (const { job, lease } of claimed) {
    const expiry: string = await client.heartbeat(lease, { done: 0.5 });
    await client.finish(lease, { ok: expiry, id, state, existing, name: job.name }, { result: [job.result] });
  }
  await client.finish(claimed[0].lease, null, { result: { pages: 12 } });
  const errors = await client.finishMany(claimed.map((c) => ({ lease: c.lease, data: 1, result: "r" })));
  if (errors[0] instanceof LeaseLost && errors[0].field === null) await client.cancel(claimed[0].job.id);
  const { taken, takeError } = await client.finishAndTake([claimed[0].lease], "w", { limit: 2 });
  if (takeError === null) await client.retry(taken[0].lease, "later", { delay: 5 });
  const created = await client.createBatch([push("page", { n: 1 }), push("page", { n: 2 })], {
    onSuccess: push("book.publish", { book: 7 }, { queue: "books" }),
    onComplete: push("book.report"),
    description: "book 7",
  });
  await client.addToBatch(created.id, [push("page", { n: 3 })]);
  await client.enqueue("page", { n: 4 }, { batch: created.id });
  const progress: Batch = await client.batch(created.id);
  if (progress.state === "open") await client.closeBatch(progress.id);
  const { batches, next } = await client.batches({ state: "running", limit: 10 });
  console.log(batches[0]?.on_success?.job, next);
  const waited: Job = await client.wait(id, 60);
  if (waited.state === "completed") console.log(waited.result);
  const worker = new Worker("http://127.0.0.1:6670", "w", { queues: ["mail"], maxConcurrency: 8, logger: console })
    .handler("email.send", async (job, { signal, lease }) => (signal.aborted ? null : { to: job.data, token: lease.token }))
    .handler("email.count", (job, { setData }: JobContext) => setData({ seen: job.data }))
    .globHandler("email.*", () => {
      throw Math.random() > 0.5 ? new RetryLater("later", { delay: 60 }) : new FailJob("bad-input", "no");
    });
  setTimeout(() => worker.stop(), 1000);
  return worker.run();
}

export { example };
