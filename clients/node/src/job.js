// The job a handler receives: the job's fields as the server sends them (`client.get` has the same, snake_case:
// `failure_group`, `trace_parent`), and the calls a handler makes about its own run, under the run's lease: progress,
// heartbeat and checkpoint, steps, and the result and data its finish carries. Python's worker hands its handlers the
// same. Also what a handler throws to say how its job goes on (`RetryLater`, `FailJob`), which the worker reads, and
// what `job.sleep`, `job.waitForSignal` and `job.join` throw when the job gives up its worker (`Suspended`), which the
// handler lets through.

import { isDeepStrictEqual } from "node:util";

import { joinedChildren } from "./client.js";
import { CairnError, LeaseLost } from "./errors.js";
import { describe, invalid, list, millis, time } from "./options.js";

/** Thrown by a handler: the job runs again after its backoff (or `delay` seconds), with this message as its error. */
export class RetryLater extends Error {
  constructor(message, { delay = null, cause } = {}) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = "RetryLater";
    this.delay = delay;
  }
}

/** Thrown by a handler: the job fails for good, in failure group `group`. */
export class FailJob extends Error {
  constructor(group, message, { cause } = {}) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = "FailJob";
    this.group = group;
  }
}

/**
 * Thrown by `job.sleep` and `job.sleepUntil` when the job now sleeps, by `job.waitForSignal` when it now waits for its
 * signal, and by `job.join` when it now waits for its children: its lease is over, so the handler must let this
 * through (rethrow it when it catches errors). The worker ends the run without finishing, retrying or failing the job,
 * which runs again at `until` (or when the signal comes, or once its children have ended) and replays its steps.
 * `step` is the step's name as recorded (`nap`, `nap#2`).
 */
export class Suspended extends Error {
  constructor(step, until, key = null, { children = false } = {}) {
    let waits = `sleeps until ${until}`;
    if (children) waits = "waits for its children";
    else if (key !== null) waits = `waits for a signal to ${JSON.stringify(key)} until ${until}`;
    super(`step ${JSON.stringify(step)}: the job ${waits}, without its worker; let this error through`);
    this.name = "Suspended";
    this.step = step;
    // When the job runs again at the latest; null for a join, which waits as long as its children take.
    this.until = until ?? null;
    // The key a wait for a signal waits for; null for a sleep or a join.
    this.key = key;
    // Whether a join waits for the job's children.
    this.children = children;
  }
}

/** The error text a retry records for something a handler threw that is neither `RetryLater` nor `FailJob`. */
export function failureText(error) {
  return `${error?.name ?? "Error"}: ${error?.message ?? String(error)}`;
}

// A step's name, as the server's rule for it says: not empty, at most 255 bytes.
const MAX_STEP_NAME_BYTES = 255;
// A signal's key, as the server's rule for it says: 1 to 255 bytes, without control characters.
const MAX_SIGNAL_KEY_BYTES = 255;
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

/** How the worker reads what a handler set, without a method of that name on the job. */
export const SETTLED = Symbol("what the handler set");

/** A job as its handler gets it; the worker makes one per run. */
export class RunningJob {
  #run;
  #result = undefined;
  #data = undefined;
  // The steps this run knows of, by name: those recorded by earlier attempts (with the claim) and by this one.
  #recorded;
  // How many times this run has used each name a handler gave a step (`step`, `sleep`, `spawn`, …), which numbers a
  // name used again.
  #used = new Map();

  /**
   * @param claimed the job and its lease, as the dequeue answered
   * @param run `{client, signal, extended(), lost(error), suspended(error)}`: the worker's side of this run
   */
  constructor(claimed, run) {
    // `progress`, the last progress reported before this run, would hide the method of that name; `client.get` shows it.
    const { progress: _progress, ...fields } = claimed.job;
    Object.assign(this, fields);
    // Not fields of the job: kept out of `JSON.stringify(job)` and of a spread copy.
    Object.defineProperty(this, "lease", { value: claimed.lease, enumerable: false });
    Object.defineProperty(this, "signal", { value: run.signal, enumerable: false });
    this.#run = run;
    this.#recorded = new Map((claimed.job.steps ?? []).map((step) => [step.name, step.result]));
  }

  /**
   * Runs `fn` once for this job, as Rust's `JobContext::step` does: the first time, `fn` runs and its result (JSON) is
   * recorded under the lease before it is returned; when an earlier attempt recorded `name`, that result is returned
   * and `fn` does not run. A name used again in one run is numbered: `page`, `page#2`, `page#3`. A `fn` that throws
   * records nothing, and its error says the step: `FailJob` and `RetryLater` keep their kind, `LeaseLost` stays as it
   * is, anything else becomes a `RetryLater`. A result the server refuses to record (`InvalidInput` or `InvalidState`:
   * over the largest job data, a job at its limit of steps) fails the job in group `step`: `fn` has run, and a retry
   * would run it again only to be refused again.
   */
  async step(name, fn) {
    this.#checkName(name);
    if (typeof fn !== "function") throw new FailJob("step", `step ${JSON.stringify(name)}: its body must be a function, got ${typeof fn}`);
    const full = this.#nextName(name);
    if (this.#recorded.has(full)) return this.#recorded.get(full);

    let value;
    try {
      value = await fn();
    } catch (e) {
      throw inStep(full, e);
    }
    let json;
    try {
      json = JSON.stringify(value ?? null);
    } catch (e) {
      throw new FailJob("step", `step ${JSON.stringify(full)}: its result is not JSON: ${e.message}`);
    }
    if (json === undefined) throw new FailJob("step", `step ${JSON.stringify(full)}: its result is not JSON: a ${typeof value}`);
    const result = JSON.parse(json);
    let stored;
    try {
      stored = await this.#call(() => this.#run.client.recordStep(this.lease, full, result));
    } catch (e) {
      throw inStep(full, refusedForGood(e));
    }
    this.#run.extended();
    this.#recorded.set(full, stored.result);
    // Recorded already under this name (a request sent again after its answer was lost): the first stands.
    return isDeepStrictEqual(stored.result, result) ? value : stored.result;
  }

  /**
   * Sleeps `seconds` as step `name`, without holding a worker, as Rust's `JobContext::sleep` does: the first time, the
   * wake time (the server's now plus `seconds`) is recorded as the step's result, the job gives up its lease, and this
   * rejects with `Suspended`, which the handler lets through; the job runs again at that time, replaying its steps,
   * and the attempt does not count. When it runs again, the step finds its time passed and resolves. A name used
   * again in one run is numbered, as for `step`, with which it shares the count.
   */
  async sleep(name, seconds) {
    this.#checkName(name);
    const full = this.#nextName(name);
    this.#checkWake(full, () => millis(seconds, "seconds"));
    return this.#sleep(full, { seconds });
  }

  /** Sleeps until `when` (an RFC 3339 string or a `Date`) as step `name`; see `sleep`. */
  async sleepUntil(name, when) {
    this.#checkName(name);
    const full = this.#nextName(name);
    this.#checkWake(full, () => time(when, "until"));
    return this.#sleep(full, { until: when });
  }

  /**
   * Waits as step `name` for a signal sent to `key` (`client.signal(key, data)`), for at most `seconds` from the first
   * time the step is reached, without holding a worker, as Rust's `JobContext::wait_for_signal` does. Resolves to
   * `{received: true, data}` when the signal came (kept from before the wait, or sent while the job waited), and to
   * `{received: false, data: null}` when the wait's time passed with none, for the handler to decide. Otherwise the job
   * gives up its lease and this rejects with `Suspended`, which the handler lets through; the job runs again when the
   * signal comes or the time passes, replaying its steps. What the wait got is the step's result, so a later attempt
   * reads it from the claim without a request. A name used again in one run is numbered, as for `step`.
   */
  async waitForSignal(name, key, seconds) {
    this.#checkName(name);
    const full = this.#nextName(name);
    this.#checkWake(full, () => checkKey(key));
    this.#checkWake(full, () => millis(seconds, "seconds"));
    const recorded = this.#recorded.get(full);
    // Received or timed out on an earlier attempt: no request on a replay. Another step of this name goes to the
    // server, which refuses it for what it is.
    if (recorded !== null && typeof recorded === "object" && Object.hasOwn(recorded, "signal")) return { received: true, data: recorded.signal };
    if (recorded !== null && typeof recorded === "object" && recorded.timed_out === true) return { received: false, data: null };
    let waited;
    try {
      waited = await this.#call(() => this.#run.client.waitForSignal(this.lease, full, key, { seconds }));
    } catch (e) {
      throw inStep(full, e);
    }
    if (waited.received) {
      this.#recorded.set(full, { signal: waited.data });
      return { received: true, data: waited.data };
    }
    if (waited.timed_out) {
      this.#recorded.set(full, { timed_out: true });
      return { received: false, data: null };
    }
    const suspended = new Suspended(full, waited.until, key);
    this.#run.suspended(suspended);
    throw suspended;
  }

  /**
   * Pushes `jobs` (made with `push`, at most 1,000) as step `name`, as Rust's `JobContext::spawn` does: the first time,
   * the server pushes them as this job's children, all or none, starts them at once, and records their ids, which this
   * resolves to, in order; when an earlier attempt recorded `name`, the recorded ids come back from the claim without
   * a request, and nothing is pushed again. A job naming another parent is refused, and a spawn refused for its input
   * (`InvalidInput` or `InvalidState`) fails the job in group `step`, since a retry would be refused the same. A name
   * used again in one run is numbered, as for `step`.
   */
  async spawn(name, jobs) {
    this.#checkName(name);
    const full = this.#nextName(name);
    this.#checkWake(full, () => list(jobs, "jobs"));
    const recorded = spawnedIds(this.#recorded.get(full));
    // Spawned on an earlier attempt: no request on a replay. Another step of this name goes to the server, which
    // refuses it for what it is.
    if (recorded) return recorded;
    let spawned;
    try {
      spawned = await this.#call(() => this.#run.client.spawn(this.lease, full, jobs));
    } catch (e) {
      throw inStep(full, refusedForGood(e));
    }
    this.#run.extended();
    this.#recorded.set(full, { children: spawned.children });
    return [...spawned.children];
  }

  /**
   * Waits as step `name` for this job's children (those `spawn` pushed, and any other), without holding a worker, as
   * Rust's `JobContext::join` does. Once none holds the job, resolves to how each ended, oldest first: `{id, state,
   * result}`, `state` `completed` or `cancelled` (or `failed` for a job whose children are its own), `result` null
   * when it completed with none. Until then the job gives up its lease and this rejects with `Suspended`, which the
   * handler lets through; the job runs again once they have ended, replaying its steps. A child that fails holds the
   * join until it is requeued or cancelled. The answer is the step's result, so a later attempt reads it from the claim
   * without a request. A name used again in one run is numbered, as for `step`.
   */
  async join(name) {
    this.#checkName(name);
    const full = this.#nextName(name);
    const recorded = joinedOf(this.#recorded.get(full));
    if (recorded) return recorded;
    let joined;
    try {
      // Asked of the server when not recorded, even on a replay: it knows whether the children have ended.
      joined = await this.#call(() => this.#run.client.join(this.lease, full));
    } catch (e) {
      throw inStep(full, e);
    }
    if (!joined.suspended) {
      this.#run.extended();
      this.#recorded.set(full, { children: joined.children });
      return joined.children.map((child) => ({ ...child }));
    }
    const suspended = new Suspended(full, null, null, { children: true });
    this.#run.suspended(suspended);
    throw suspended;
  }

  /** Records the job's progress (any JSON), for queries and the dashboard to show. */
  async progress(value) {
    await this.#call(() => this.#run.client.progress(this.lease, value));
  }

  /** Extends the lease now (the worker also does every third of its timeout), recording `progress` when given. */
  async heartbeat(progress = null) {
    const expiry = await this.#call(() => this.#run.client.heartbeat(this.lease, progress));
    this.#run.extended();
    return expiry;
  }

  /** Saves the data a retry of this job starts from, and extends the lease. */
  async checkpoint(data) {
    const expiry = await this.#call(() => this.#run.client.checkpoint(this.lease, data));
    this.#run.extended();
    return expiry;
  }

  /** The job's result when the handler returns undefined or null (what it returns otherwise is the result). */
  setResult(value) {
    this.#result = value;
  }

  /** Replaces the job's data when the handler returns (what a recurring job's next run starts from); null keeps it. */
  setData(value) {
    this.#data = value;
  }

  /** What the handler set: `{result, data}`. */
  [SETTLED]() {
    return { result: this.#result, data: this.#data };
  }

  /** Refuses a name no step may have, before it is numbered. */
  #checkName(name) {
    if (typeof name !== "string") throw new FailJob("step", `step: a step's name must be a string, got ${typeof name}`);
    if (name.includes("#")) {
      throw new FailJob("step", `step ${JSON.stringify(name)}: a step's name must not hold '#', which numbers a name used again`);
    }
  }

  /** The name the next use of `name` in this run records under (`page`, `page#2`), checked. */
  #nextName(name) {
    // Numbered before anything is awaited: steps started together are numbered in the order the run reaches them.
    const used = (this.#used.get(name) ?? 0) + 1;
    this.#used.set(name, used);
    const full = used === 1 ? name : `${name}#${used}`;
    if (full === "") throw new FailJob("step", "step: must not be empty");
    const bytes = Buffer.byteLength(full);
    if (bytes > MAX_STEP_NAME_BYTES) throw new FailJob("step", `step: must be at most ${MAX_STEP_NAME_BYTES} bytes, got ${bytes}`);
    return full;
  }

  /**
   * A sleep's duration or time, a wait's key or duration, or a spawn's list of jobs, checked: one a retry cannot mend
   * fails the job in group `step`, as a bad name does.
   */
  #checkWake(full, check) {
    try {
      check();
    } catch (e) {
      throw new FailJob("step", `step ${JSON.stringify(full)}: ${e.message}`);
    }
  }

  async #sleep(full, wake) {
    let slept;
    try {
      // Asked of the server every time, even on a replay: its clock says whether the time has passed.
      slept = await this.#call(() => this.#run.client.sleep(this.lease, full, wake));
    } catch (e) {
      throw inStep(full, e);
    }
    if (!slept.suspended) return;
    const suspended = new Suspended(full, slept.until);
    this.#run.suspended(suspended);
    throw suspended;
  }

  /** A call under the lease; a lost lease also aborts `signal` and drops what the handler returns. */
  async #call(call) {
    try {
      return await call();
    } catch (e) {
      if (e instanceof LeaseLost) this.#run.lost(e);
      throw e;
    }
  }
}

/** Refuses a key the server would: the job fails in group `step` rather than retry what cannot succeed. */
function checkKey(key) {
  if (typeof key !== "string") throw invalid("key", `must be a string, got ${describe(key)}`);
  const bytes = Buffer.byteLength(key);
  if (bytes === 0) throw invalid("key", "must not be empty");
  if (bytes > MAX_SIGNAL_KEY_BYTES) throw invalid("key", `must be at most ${MAX_SIGNAL_KEY_BYTES} bytes, got ${bytes}`);
  const control = key.match(CONTROL);
  if (control) throw invalid("key", `must not contain control characters, got ${JSON.stringify(control[0])}`);
}

/** The ids a spawn recorded, copied; null when `result` is not a spawn's. */
function spawnedIds(result) {
  const ids = result?.children;
  return Array.isArray(ids) && ids.every(Number.isInteger) ? [...ids] : null;
}

/** The children a join recorded, copied; null when `result` is not a join's. */
function joinedOf(result) {
  const children = result?.children;
  const isChild = (child) => child !== null && typeof child === "object" && Number.isInteger(child.id) && typeof child.state === "string";
  return Array.isArray(children) && children.every(isChild) ? joinedChildren(children) : null;
}

/**
 * A step's record or spawn that the server refused, as Rust's `refused_for_good` reads it: a `FailJob` in group `step`
 * when the refusal is the input's (`invalid_input`, `invalid_state`), which every retry would meet again, running the
 * step's body again each time; the error as it is otherwise (an outage, a lost lease), for a retry.
 */
function refusedForGood(error) {
  if (error instanceof CairnError && (error.kind === "invalid_input" || error.kind === "invalid_state")) {
    return new FailJob("step", error.message, { cause: error });
  }
  return error;
}

/** What a step's body (or its record) threw, its message naming the step, of the kind the worker reads it as. */
function inStep(step, error) {
  const prefix = `step ${JSON.stringify(step)}: `;
  // The lease is gone (or, sleeping, given up): the worker drops the run's outcome, and the handler may want to see it
  // for what it is.
  if (error instanceof LeaseLost || error instanceof Suspended) return error;
  if (error instanceof FailJob) return new FailJob(error.group, prefix + error.message, { cause: error });
  if (error instanceof RetryLater) return new RetryLater(prefix + error.message, { delay: error.delay, cause: error });
  return new RetryLater(prefix + failureText(error), { cause: error });
}
