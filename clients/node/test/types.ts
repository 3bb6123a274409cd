// Compiled (never run) by `tsc --noEmit` in scripts/test-node: the declarations in src/index.d.ts hold together and
// describe the calls as the tests and the README make them.
import {
  Client,
  EventStream,
  FailJob,
  InvalidInput,
  InvalidState,
  LeaseLost,
  RetryLater,
  Suspended,
  Worker,
  push,
  type ActivityEvent,
  type AttemptOutcome,
  type Batch,
  type ClaimedJob,
  type Job,
  type JobContext,
  type Joined,
  type JoinedChild,
  type PushBody,
  type Recurring,
  type RunningJob,
  type Signal,
  type SignalSent,
  type SignalWait,
  type Slept,
  type Spawned,
  type Step,
  type StreamEvent,
  type WorkerReport,
} from "../src/index.js";

async function example(): Promise<WorkerReport> {
  const client = new Client("http://127.0.0.1:6670", { token: "s3cret-token-of-16+", timeout: 10 });
  const { id, state, existing }: { id: number; state: string; existing: boolean } = await client.enqueue("email.send", { to: "a" }, { queue: "mail", delay: 30, tags: ["x"] });
  await client.enqueueBatch([push("a"), push("b", { n: 1 }, { priority: 5, leaseTimeout: 60 })]);
  await client.enqueue("email.send", { to: "bob@example.com" }, { queue: "mail", delay: 30, retry: { maxAttempts: 1 } });
  await client.enqueue("legacy", null, { retry: { max_attempts: 2, initial_delay_ms: 30_000, multiplier: 2, max_delay_ms: 60_000, jitter: 0 } });
  await client.enqueue("reindex", { n: 1 }, { debounce: { key: "customer:42", delay: 30, maxWait: 300 } });
  await client.enqueue("welcome", null, { throttle: { key: "welcome:ada", period: 86400, states: ["queued", "running"] } });
  await client.enqueue("report", null, { concurrencyKey: "customer:42", concurrencyLimit: 2 });
  await client.enqueue("nightly", null, { schedule: "0 4 * * *", timeZone: "Europe/Berlin", runAt: new Date(), uniqueKey: "u", weight: 2, timeout: 60 });
  await client.enqueue("child", null, { parent: id, dependsOn: [id], children: "job", traceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" });
  const body: PushBody = push("report.nightly", { kind: "sales" }, { queue: "reports" });
  const template: Recurring = await client.setRecurring("nightly-report", { cron: "0 4 * * *", timeZone: "Europe/Berlin", job: body, missed: "skip", overlap: "replace" });
  console.log(template.job.name, template.missed, (await client.getRecurring("nightly-report")).next_run);
  await client.pauseRecurring("nightly-report");
  await client.resumeRecurring("nightly-report");
  const run = await client.runRecurring("nightly-report");
  console.log(run.id, (await client.listRecurring()).length);
  await client.removeRecurring("nightly-report");

  const claimed: ClaimedJob[] = await client.dequeue("w", { queues: ["mail"], names: ["email.*"], limit: 8, wait: 30, leaseTimeout: 60, order: "round_robin", weights: [1] });
  for (const { job, lease } of claimed) {
    const expiry: string = await client.heartbeat(lease, { done: 0.5 });
    await client.progress(lease, { done: 0.7 });
    await client.checkpoint(lease, { row: 5 });
    const step: Step = await client.recordStep(lease, "charge", { id: "ch_1" });
    console.log(step.name, step.result, step.attempt, step.recorded_at, job.step_count, job.steps[0]?.result);
    const slept: Slept = await client.sleep(lease, "nap", { seconds: 60 });
    if (!slept.suspended) await client.sleep(lease, "until", { until: new Date() });
    // @ts-expect-error: one of seconds and until, not both
    await client.sleep(lease, "both", { seconds: 1, until: new Date() });
    const outcome: AttemptOutcome | null | undefined = job.history[0]?.outcome;
    if (outcome === "suspended") console.log(slept.until?.length);
    const waited: SignalWait = await client.waitForSignal(lease, "approved", `order-${job.id}/approved`, { seconds: 3600 });
    if (waited.received) console.log(waited.data, waited.timed_out, waited.suspended, waited.until, job.awaits_signal?.length);
    // @ts-expect-error: the wait's duration is an option, in seconds
    await client.waitForSignal(lease, "approved", "k", 3600);
    const spawned: Spawned = await client.spawn(lease, "parts", [push("double", 1), push("double", 2, { queue: "math" })]);
    const joined: Joined = await client.join(lease, "gather");
    if (!joined.suspended) console.log(spawned.children[0] === joined.children[0]?.id, joined.children[0]?.state, joined.children[0]?.result);
    // @ts-expect-error: spawn takes jobs made with push
    await client.spawn(lease, "parts", [{ queue: "math" }]);
    await client.finish(lease, { ok: expiry, id, state, existing, name: job.name }, { result: [job.result] });
  }
  await client.finish(claimed[0].lease, null, { result: { pages: 12 }, next: { queue: "step-2", delay: 5, dependsOn: [id] } });
  const errors = await client.finishMany(claimed.map((c) => ({ lease: c.lease, data: 1, result: "r" })));
  if (errors[0] instanceof LeaseLost && errors[0].field === null) await client.cancel(claimed[0].job.id);
  const { taken, takeError } = await client.finishAndTake([claimed[0].lease], "w", { limit: 2 });
  if (takeError === null) await client.retry(taken[0].lease, "later", { delay: 5 });
  await client.retry(taken[0].lease, "later", { runAt: "2030-01-01T00:00:00Z" });

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
  if (waited.state === "completed") console.log(waited.result, waited.history[0]?.outcome, waited.retry.max_attempts);

  const page = await client.jobs({ queue: "mail", state: "failed", name: "email.*", tag: "x", failureGroup: "g", parent: 1, batch: 2, tracked: true, before: 9, limit: 10 });
  console.log(page.jobs.map((j) => j.failure_group), page.next);
  const outcome = await client.bulk("retry", { filter: { queue: "mail", state: "failed" } });
  await client.bulk("move", { ids: [1, 2], queue: "fast" });
  console.log(outcome.matched + outcome.done + outcome.skipped);
  await client.delete(id);
  const requeued: string = await client.requeue(id, { runAt: new Date() });
  const rescheduled: string = await client.reschedule(id, "2030-01-01T00:00:00Z");
  await client.setPriority(id, 5);
  await client.move(id, "fast");
  await client.setData(id, { n: 2 });
  const dependent: string = await client.changeDependencies(id, { add: [1], remove: [2] });
  await client.changeTags(id, { add: ["vip"] });
  await client.track(id);
  await client.untrack(id);
  console.log(requeued, rescheduled, dependent);

  await client.pauseQueue("mail");
  await client.resumeQueue("mail");
  const next3: Job[] = await client.peek("mail", { limit: 3 });
  await client.limitQueue("mail", 4);
  await client.limitKeys("mail", null);
  await client.weighKey("mail", "customer:42", 3);
  await client.rateLimitQueue("mail", { jobs: 10, per: 60 });
  await client.ageQueue("mail", null);
  const queues = await client.queues();
  console.log(next3.length, queues.map((q) => [q.queue, q.paused, q.rate_limit?.per_ms, q.top_keys?.[0]?.full]));
  const groups = await client.failureGroups();
  const moved: number = await client.unfail(groups[0].group, { limit: 10, queue: "retry-here" });
  const workers = await client.workers();
  const me = await client.whoami();
  const { events: logged, next_before } = await client.activity({ queue: "mail", since: new Date(), limit: 5 });
  console.log(moved, workers[0]?.stalled, me.role, logged[0]?.event, next_before);

  const abort = new AbortController();
  const stream: EventStream = await client.events({ queue: "shop", kinds: ["finished"], signal: abort.signal });
  for await (const event of stream) {
    const seen: StreamEvent = event;
    if (seen.event === "missed") console.log(seen.oldest);
    else {
      const activity: ActivityEvent = seen;
      console.log(`${activity.event}: job ${activity.job} (${activity.name})`, stream.position);
      if (activity.name === "order.packed") break;
    }
  }
  stream.close();
  await client.events({ after: 5 });

  try {
    push("x", {}, { retry: { maxAttempts: 3 } });
  } catch (e) {
    if (e instanceof InvalidInput) console.log(e.field, e.status);
  }

  const worker = new Worker("http://127.0.0.1:6670", "w", { queues: ["mail"], maxConcurrency: 8, logger: console })
    .handler("email.send", async (job, { signal, lease }) => (signal.aborted ? null : { to: job.data, token: lease.token }))
    .handler("email.count", (job, { setData }: JobContext) => setData({ seen: job.data }))
    .handler("report.nightly", async (job: RunningJob) => {
      const { id: jobId, name, data, attempt, queue, tags, trace_parent, failure_group } = job;
      await job.progress({ step: "working" });
      const expiry: string = await job.heartbeat();
      await job.checkpoint({ ...Object(data), at: expiry });
      const receipt: { id: string } = await job.step("charge", async () => ({ id: "ch_1" }));
      const page: number = await job.step("page", () => 3);
      try {
        await job.sleep("cool-off", 0.5);
      } catch (e) {
        if (e instanceof Suspended) console.log(e.step, e.until);
        throw e;
      }
      await job.sleepUntil("tomorrow", "2030-01-01T00:00:00Z");
      const packed: Signal<{ parcel: string }> = await job.waitForSignal<{ parcel: string }>("packed", `order-${jobId}/packed`, 2 * 86400);
      const parcel: string | null = packed.received ? packed.data.parcel : packed.data;
      const anything: Signal = await job.waitForSignal("approved", "k", 60);
      if (anything.received) console.log(anything.data);
      const partIds: number[] = await job.spawn("parts", [1, 2, 3].map((n) => push("double", n)));
      const ended: JoinedChild[] = await job.join("gather");
      const total = ended.reduce((sum, child) => sum + (child.state === "completed" ? Number(child.result) : 0), partIds.length);
      try {
        await job.join("again");
      } catch (e) {
        if (e instanceof Suspended && e.children && e.until === null) console.log(e.step, total);
        throw e;
      }
      job.setData({ next: attempt, receipt: receipt.id, page, parcel, steps: job.steps.map((s) => s.name) });
      job.setResult({ jobId, name, queue, tags, trace_parent, failure_group, aborted: job.signal.aborted, token: job.lease.token });
    })
    .handler("typed.before", (job: Job, context: JobContext) => ({ id: job.id, token: context.lease.token }))
    .globHandler("email.*", () => {
      throw Math.random() > 0.5 ? new RetryLater("later", { delay: 60, cause: null }) : new FailJob("bad-input", "no", { cause: 1 });
    });
  setTimeout(() => worker.stop(), 1000);
  const sent: SignalSent = await client.signal("order-42/packed", { parcel: "P-981" });
  if (sent.delivered) console.log(sent.job?.toFixed(), (await client.signal("order-43/packed")).job);
  try {
    await client.signal("order-44/packed", null);
  } catch (e) {
    if (e instanceof InvalidState) console.log(e.message, e.status);
    else if (e instanceof Suspended) console.log(e.key?.length, e.step);
  }
  const report = await worker.run();
  return { ...report, suspended: report.suspended + report.finished };
}

export { example };
