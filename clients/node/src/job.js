// The job a handler receives: the job's fields as the server sends them (`client.get` has the same, snake_case:
// `failure_group`, `trace_parent`), and the calls a handler makes about its own run, under the run's lease: progress,
// heartbeat and checkpoint, and the result and data its finish carries. Python's worker hands its handlers the same.

import { LeaseLost } from "./errors.js";

/** How the worker reads what a handler set, without a method of that name on the job. */
export const SETTLED = Symbol("what the handler set");

/** A job as its handler gets it; the worker makes one per run. */
export class RunningJob {
  #run;
  #result = undefined;
  #data = undefined;

  /**
   * @param claimed the job and its lease, as the dequeue answered
   * @param run `{client, signal, extended(), lost(error)}`: the worker's side of this run
   */
  constructor(claimed, run) {
    // `progress`, the last progress reported before this run, would hide the method of that name; `client.get` shows it.
    const { progress: _progress, ...fields } = claimed.job;
    Object.assign(this, fields);
    // Not fields of the job: kept out of `JSON.stringify(job)` and of a spread copy.
    Object.defineProperty(this, "lease", { value: claimed.lease, enumerable: false });
    Object.defineProperty(this, "signal", { value: run.signal, enumerable: false });
    this.#run = run;
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
