// `Worker`: runs a handler for each job it takes from a Cairn server, as the Rust `cairn::Worker` does.
//
// It takes as many jobs per request as it has free slots (a long poll when none is ready), extends each running job's
// lease every third of its timeout, and reports the jobs that ended together in one request (`POST /v1/finish`), one
// such request at a time, while it takes the next ones: a take that carried the finishes would come back only once they
// are durable. A slot is free once its handler settles. A handler gets the job (`src/job.js`: its fields, and progress,
// heartbeat, checkpoint, step, sleep, waitForSignal, spawn, join, setResult and setData), and a context that older
// handlers read (`{lease, signal, setData}`). What it returns is the job's result (or what it passed to `setResult`),
// kept apart from its data, which `setData` replaces. A handler that throws `RetryLater` or anything else has the job
// retried with the error's text; `FailJob` fails it for good. A lost lease aborts the handler's `signal` and drops what
// it returns. A job that sleeps or waits for a signal or its children (`job.sleep`, `job.waitForSignal`, `job.join`,
// which throw `Suspended`) gave up its lease: its signal aborts too, and the run ends with no call about it, counted as
// `suspended`. `stop()` (or SIGTERM with `run()`) takes no more jobs, lets running ones finish until the deadline,
// gives back the rest, and says the worker stopped.

import { Client } from "./client.js";
import { CairnError, InvalidInput, LeaseLost } from "./errors.js";
import { FailJob, RetryLater, RunningJob, SETTLED, Suspended, failureText } from "./job.js";
import { as, checkOptions } from "./options.js";

// A worker of few slots still takes jobs while this many finishes wait for their answer (see the Rust worker).
const MIN_UNANSWERED_FINISHES = 32;
const MAX_PER_CALL = 100;

// What a handler throws (or lets through): defined with the job it gets, which throws them too (`job.step`,
// `job.sleep`, `job.waitForSignal`, `job.join`).
export { FailJob, RetryLater, Suspended };

/** SQLite's GLOB as a regular expression: `*`, `?`, `[abc]`, `[a-z]`, `[^abc]`; case-sensitive. */
export function globRegExp(pattern) {
  let out = "";
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === "*") out += "[\\s\\S]*";
    else if (c === "?") out += "[\\s\\S]";
    else if (c === "[") {
      let j = i + 1;
      const negate = pattern[j] === "^";
      if (negate) j++;
      const start = j;
      // A `]` first in the set is one of its characters.
      const end = pattern.indexOf("]", pattern[j] === "]" ? j + 1 : j);
      if (end < 0) throw new InvalidInput("invalid_input", `name_pattern: unclosed [ in ${JSON.stringify(pattern)}`, "name_pattern");
      const members = pattern.slice(start, end).replace(/[\\\]\[^]/g, "\\$&");
      out += `[${negate ? "^" : ""}${members}]`;
      i = end;
    } else out += c.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
  }
  return new RegExp(`^${out}$`, "u");
}

/** The GLOB pattern that matches `name` alone. */
export const exactPattern = (name) => name.replace(/[*?[]/g, "[$&]");

export const WORKER_OPTIONS = Object.fromEntries(
  ["token", "caFile", "certFile", "keyFile", "queues", "maxConcurrency", "wait", "shutdownDeadline", "logger"].map((o) => [o, as(o)]),
);

export class Worker {
  /**
   * @param {string} url the server
   * @param {string} id the worker's id
   * @param {{token?: string, caFile?: string, certFile?: string, keyFile?: string, queues?: string[],
   *   maxConcurrency?: number, wait?: number, shutdownDeadline?: number,
   *   logger?: {warn: Function, error: Function}}} options durations in seconds; `logger` is `console` by default
   */
  constructor(url, id, options = {}) {
    checkOptions(options, WORKER_OPTIONS, "worker option");
    const {
      token = null,
      caFile = null,
      certFile = null,
      keyFile = null,
      queues = [],
      maxConcurrency = 4,
      wait = 30,
      shutdownDeadline = 30,
      logger = console,
    } = options ?? {};
    if (!(Number.isInteger(maxConcurrency) && maxConcurrency >= 1)) {
      throw new InvalidInput("invalid_input", `maxConcurrency: must be an integer of at least 1, got ${maxConcurrency}`, "maxConcurrency");
    }
    this.client = new Client(url, { token, caFile, certFile, keyFile });
    this.id = id;
    this.queues = [...queues];
    this.maxConcurrency = maxConcurrency;
    this.wait = wait;
    this.shutdownDeadlineMs = shutdownDeadline * 1000;
    this.logger = logger;
    this.exact = new Map();
    this.globs = [];
    this.stopping = null;
  }

  /**
   * Registers `fn(job, {lease, signal, setData})` for jobs named exactly `name`. What it returns is the job's result
   * (undefined or null: what it passed to `job.setResult`, or none); `job.setData(value)` replaces the job's data
   * (what a recurring job's next run starts from).
   */
  handler(name, fn) {
    this.exact.set(name, fn);
    return this;
  }

  /** Registers `fn` for jobs whose name matches the GLOB `pattern` (`email.*`), after exact names. */
  globHandler(pattern, fn) {
    this.globs.push({ pattern, regex: globRegExp(pattern), fn });
    return this;
  }

  handlerFor(name) {
    return this.exact.get(name) ?? this.globs.find((g) => g.regex.test(name))?.fn ?? null;
  }

  patterns() {
    return [...[...this.exact.keys()].map(exactPattern), ...this.globs.map((g) => g.pattern)];
  }

  /** Runs until SIGTERM or SIGINT (or `stop()`), then stops gracefully; resolves to what became of the jobs. */
  async run() {
    const onSignal = () => this.stop();
    process.once("SIGTERM", onSignal);
    process.once("SIGINT", onSignal);
    try {
      return await this.start();
    } finally {
      process.off("SIGTERM", onSignal);
      process.off("SIGINT", onSignal);
    }
  }

  /** Asks a running worker to stop. */
  stop() {
    this.stopping?.abort();
  }

  /** Runs until `stop()`; resolves to `{finished, retried, failed, lost, released, suspended}`. */
  async start() {
    if (this.exact.size === 0 && this.globs.length === 0) {
      throw new InvalidInput("invalid_input", "handlers: a worker needs at least one", "handlers");
    }
    this.stopping = new AbortController();
    return new Run(this, this.stopping.signal).run();
  }
}

/** One run of a worker: its jobs, its finishes, and its report. */
class Run {
  constructor(worker, stopSignal) {
    this.worker = worker;
    this.client = worker.client;
    this.stopSignal = stopSignal;
    this.report = { finished: 0, retried: 0, failed: 0, lost: 0, released: 0, suspended: 0 };
    this.weight = 0;
    this.jobs = new Map(); // job id -> {claimed, promise, abort, every, next}
    this.finishes = []; // finishes no request carries yet
    this.unanswered = 0;
    this.closing = false;
    this.wakeLoop = null;
    this.wakeFinisher = null;
    this.log = worker.logger;
  }

  async run() {
    const heartbeats = setInterval(() => this.heartbeat(), 50);
    const finisher = this.finishLoop();
    const bound = Math.max(this.worker.maxConcurrency, MIN_UNANSWERED_FINISHES);
    const stopped = new Promise((resolve) => this.stopSignal.addEventListener("abort", resolve, { once: true }));
    while (!this.stopSignal.aborted) {
      if (this.jobs.size) await new Promise((resolve) => setImmediate(resolve)); // let jobs ending together free slots
      const room = this.worker.maxConcurrency - this.weight;
      if (room <= 0 || this.unanswered >= bound) {
        await Promise.race([new Promise((resolve) => (this.wakeLoop = resolve)), stopped]);
        continue;
      }
      const outcome = await this.client
        .dequeue(this.worker.id, {
          queues: this.worker.queues,
          names: this.worker.patterns(),
          limit: room,
          maxWeight: room,
          wait: this.worker.wait,
          signal: this.stopSignal, // stopping ends the poll; the server gives back a job it claimed for it
        })
        .then((jobs) => ({ jobs }), (error) => ({ error }));
      if (this.stopSignal.aborted) {
        // The answer came as the worker stopped: the jobs it brought go back rather than wait out their leases.
        for (const job of outcome.jobs ?? []) await this.record(this.client.release(job.lease), "released");
        break;
      }
      if (outcome.error) {
        if (!(outcome.error instanceof CairnError)) throw outcome.error;
        this.log.error(`worker ${this.worker.id}: taking jobs failed (${outcome.error.message}); trying again in a second`);
        await Promise.race([new Promise((resolve) => setTimeout(resolve, 1000)), stopped]);
        continue;
      }
      for (const job of outcome.jobs) this.start(job);
    }
    await this.drain();
    clearInterval(heartbeats);
    this.closing = true;
    this.wakeFinisher?.();
    await finisher;
    await this.client.workerStopped(this.worker.id).catch(() => {});
    return this.report;
  }

  freeSlot(weight) {
    this.weight -= weight;
    const wake = this.wakeLoop;
    this.wakeLoop = null;
    wake?.();
  }

  start(claimed) {
    const weight = claimed.job.weight ?? 1;
    this.weight += weight;
    const every = Math.max((claimed.job.lease_timeout_ms ?? 60_000) / 3, 50);
    // lost: the lease was lost; givenBack: released at stop; suspended: the job sleeps or waits for a signal or its
    // children, its lease given up. In each case, what the handler returns is dropped.
    const entry = { claimed, abort: new AbortController(), every, next: Date.now() + every, lost: false, givenBack: false, suspended: false };
    this.jobs.set(claimed.job.id, entry);
    entry.promise = this.runJob(entry, weight).finally(() => this.jobs.delete(claimed.job.id));
  }

  async runJob(entry, weight) {
    const { claimed } = entry;
    const handler = this.worker.handlerFor(claimed.job.name);
    if (!handler) {
      this.freeSlot(weight);
      return this.record(this.client.release(claimed.lease), "released");
    }
    let returned;
    let failure = null;
    const job = new RunningJob(claimed, {
      client: this.client,
      signal: entry.abort.signal,
      extended: () => (entry.next = Date.now() + entry.every),
      lost: (e) => this.leaseLost(entry, e),
      suspended: (e) => this.suspended(entry, e),
    });
    const context = { lease: claimed.lease, signal: entry.abort.signal, setData: (value) => job.setData(value) };
    try {
      returned = await handler(job, context);
    } catch (e) {
      failure = e;
    }
    const { result: set, data } = job[SETTLED]();
    const result = returned ?? set;
    this.freeSlot(weight);
    // The sleep (or wait) ended the lease as it was recorded: nothing is left to say, whatever the handler did with
    // `Suspended`.
    if (entry.suspended) {
      this.report.suspended += 1;
      return;
    }
    if (entry.lost) {
      this.report.lost += 1;
      return;
    }
    if (entry.givenBack) return;
    if (failure) return this.failed(claimed, failure);
    for (const [what, value] of [["result", result], ["data", data]]) {
      if (value === undefined || value === null) continue;
      try {
        JSON.stringify(value);
      } catch (e) {
        return this.record(this.client.retry(claimed.lease, `the handler's ${what} is not JSON: ${e.message}`), "retried");
      }
    }
    this.unanswered += 1;
    this.finishes.push({ lease: claimed.lease, data, result });
    this.wakeFinisher?.();
  }

  failed(claimed, error) {
    const lease = claimed.lease;
    if (error instanceof FailJob) return this.record(this.client.fail(lease, error.group, error.message), "failed");
    const delay = error instanceof RetryLater ? { delay: error.delay } : {};
    const text = error instanceof RetryLater ? error.message : failureText(error);
    return this.record(this.client.retry(lease, text, delay), "retried");
  }

  async record(call, outcome) {
    try {
      await call;
      this.report[outcome] += 1;
    } catch (e) {
      if (!(e instanceof LeaseLost)) this.log.error(`worker ${this.worker.id}: could not record a job's outcome (${e.message}); its lease will expire`);
      this.report.lost += 1;
    }
  }

  heartbeat() {
    const now = Date.now();
    for (const entry of this.jobs.values()) {
      if (entry.next > now || entry.lost || entry.suspended) continue;
      entry.next = now + entry.every;
      this.client.heartbeat(entry.claimed.lease).catch((e) => {
        if (e instanceof LeaseLost) this.leaseLost(entry, e);
        else this.log.warn(`job ${entry.claimed.job.id}: heartbeat failed (${e.message}); trying again`);
      });
    }
  }

  /** The job was taken back: its handler's `signal` aborts, and what it returns is dropped. */
  leaseLost(entry, e) {
    // A heartbeat in flight as the job went to sleep may come back refused: the lease was given up, not lost.
    if (entry.lost || entry.suspended) return;
    this.log.warn(`job ${entry.claimed.job.id}: lease lost (${e.message}); its handler's result will not be reported`);
    entry.lost = true;
    entry.abort.abort(e);
  }

  /**
   * The job sleeps or waits for a signal or its children: its lease is over, so its handler's `signal` aborts and no
   * heartbeat extends it.
   */
  suspended(entry, e) {
    entry.suspended = true;
    entry.abort.abort(e);
  }

  countFinished(errors) {
    for (const error of errors) this.report[error === null ? "finished" : "lost"] += 1;
    this.unanswered -= errors.length;
    const wake = this.wakeLoop;
    this.wakeLoop = null;
    wake?.();
  }

  /** Sends the finishes waiting, one request at a time: those of jobs that end meanwhile go together in the next. */
  async finishLoop() {
    for (;;) {
      if (!this.finishes.length) {
        if (this.closing) return;
        await new Promise((resolve) => (this.wakeFinisher = resolve));
        this.wakeFinisher = null;
        continue;
      }
      await new Promise((resolve) => setImmediate(resolve)); // let jobs ending together hand in their finishes
      while (this.finishes.length) await this.finishBatch(this.finishes.splice(0, MAX_PER_CALL));
    }
  }

  async finishBatch(batch) {
    let delayMs = 100;
    for (;;) {
      try {
        return this.countFinished(await this.client.finishMany(batch));
      } catch (e) {
        if (e.kind !== "unavailable" || delayMs > 30_000) {
          this.log.error(`worker ${this.worker.id}: finishing ${batch.length} jobs failed (${e.message}); their leases will expire`);
          return this.countFinished(batch.map(() => e));
        }
        await new Promise((resolve) => setTimeout(resolve, delayMs));
        delayMs *= 2;
      }
    }
  }

  /** Waits for running jobs until the deadline, then gives back the rest. */
  async drain() {
    const running = [...this.jobs.values()];
    if (!running.length) return;
    let timer;
    const deadline = new Promise((resolve) => (timer = setTimeout(resolve, this.worker.shutdownDeadlineMs)));
    await Promise.race([Promise.allSettled(running.map((e) => e.promise)), deadline]);
    clearTimeout(timer);
    for (const entry of this.jobs.values()) {
      entry.givenBack = true;
      entry.abort.abort(new Error("the worker stops"));
      if (!entry.suspended) await this.record(this.client.release(entry.claimed.lease), "released");
    }
  }
}
