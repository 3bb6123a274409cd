// `Client`: the HTTP API's calls, one method each (`src/api.js` lists which method makes which operation of the
// server's OpenAPI document, and the few it leaves out). Options are camelCase and checked here: an unknown one is
// refused by name before anything is sent. Answers are the server's JSON as it sends it (snake_case fields).

import { EVENT_FILTER, EventStream } from "./events.js";
import { errorFromBody } from "./errors.js";
import { as, build, checkOptions, invalid, list, listField, local, millis, nested, query, seconds, time, timeField } from "./options.js";
import { push } from "./push.js";
import { Transport } from "./transport.js";

export { push };

export const DEFAULT_URL = "http://127.0.0.1:6670";
// How much longer than a long poll's wait the request may take before it counts as lost (ms).
const LONG_POLL_MARGIN_MS = 10_000;
// The longest wait for a job, as the Rust client's (a day, ms); the server caps each request's part of it.
const MAX_WAIT_MS = 24 * 3600 * 1000;
// The states a job ends in: a wait for it is over.
const ENDED = new Set(["completed", "failed", "cancelled"]);

export const CLIENT_OPTIONS = { token: as("token"), timeout: as("timeout"), caFile: as("caFile"), certFile: as("certFile"), keyFile: as("keyFile") };

/** The filters of `GET /v1/jobs` (and of a bulk action, without the paging). */
const JOB_SELECTION = {
  queue: as("queue"),
  state: as("state"),
  name: as("name"),
  tag: as("tag"),
  failureGroup: as("failure_group"),
  parent: as("parent"),
  batch: as("batch"),
  tracked: as("tracked"),
};
export const JOB_FILTER = { ...JOB_SELECTION, before: as("before"), limit: as("limit") };
export const BATCH_FILTER = { state: as("state"), before: as("before"), limit: as("limit") };
export const ACTIVITY_FILTER = {
  queue: as("queue"),
  job: as("job"),
  worker: as("worker"),
  since: timeField("since"),
  until: timeField("until"),
  before: as("before"),
  limit: as("limit"),
};

export const DEQUEUE_OPTIONS = {
  queues: listField("queues"),
  names: listField("names"),
  limit: as("limit"),
  wait: seconds("wait_ms"),
  maxWeight: as("max_weight"),
  leaseTimeout: seconds("lease_timeout_ms"),
  priority: as("priority"),
  order: as("order"),
  weights: listField("weights"),
  signal: local("signal"),
};
export const BATCH_OPTIONS = { onSuccess: as("on_success"), onComplete: as("on_complete"), open: as("open"), description: as("description") };
export const NEXT_OPTIONS = { queue: as("queue"), delay: seconds("delay_ms"), dependsOn: listField("depends_on") };
export const FINISH_OPTIONS = { result: as("result"), next: nested("next", NEXT_OPTIONS, "next option") };
export const RETRY_CALL_OPTIONS = { delay: seconds("delay_ms"), runAt: timeField("run_at") };
// When a sleep wakes: one of the two.
export const SLEEP_OPTIONS = { seconds: seconds("for_ms"), until: timeField("until") };
// How long a wait for a signal lasts.
export const SIGNAL_WAIT_OPTIONS = { seconds: seconds("timeout_ms") };
export const RECURRING_OPTIONS = { cron: as("cron"), job: as("job"), timeZone: as("time_zone"), missed: as("missed"), overlap: as("overlap") };
export const BULK_OPTIONS = { filter: nested("filter", JOB_SELECTION, "filter option"), ids: listField("ids"), queue: as("queue") };
export const CHANGE_OPTIONS = { add: listField("add"), remove: listField("remove") };
export const UNFAIL_OPTIONS = { limit: as("limit"), queue: as("queue") };
export const RATE_OPTIONS = { jobs: as("jobs"), per: seconds("per_ms") };
export const EVENT_OPTIONS = { ...EVENT_FILTER, signal: local("signal") };
export const REQUEUE_OPTIONS = { runAt: timeField("run_at") };
export const PEEK_OPTIONS = { limit: as("limit") };

/** The request body of a dequeue; `wait` is left out of a take, which never waits. */
function dequeueBody(worker, options) {
  const { signal: _signal, ...body } = build(DEQUEUE_OPTIONS, options, "dequeue option");
  return { worker, limit: 1, ...body };
}

function finishFields(body, data, result) {
  if (result !== undefined && result !== null) body.result = result;
  if (data !== undefined && data !== null) body.data = data;
  return body;
}

function finishItems(finishes) {
  return finishes.map((f) => {
    const { lease, data, result } = f.lease ? f : { lease: f };
    return finishFields({ id: lease.job, token: lease.token }, data, result);
  });
}

/** Children as a join answers (or records) them, each with its result (null when none). */
export const joinedChildren = (children) => children.map((child) => ({ id: child.id, state: child.state, result: child.result ?? null }));

const finishErrors = (body) => (body.results ?? []).map((r) => (r.error ? errorFromBody(r.error, 200) : null));
const id = (value) => Number(value);
const segment = (value) => encodeURIComponent(value);

/** A client of a Cairn server: every method returns a promise. */
export class Client {
  #http;

  /**
   * @param {string} url the server's base URL
   * @param {{token?: string, timeout?: number, caFile?: string, certFile?: string, keyFile?: string}} options a bearer
   *   token, and seconds a request may take (30); over https://, the CA (PEM) the server's certificate must come from
   *   when it is not one Node trusts, and a client certificate and key (PEM) for a server that requires one
   */
  constructor(url = DEFAULT_URL, options = {}) {
    checkOptions(options, CLIENT_OPTIONS, "client option");
    const { token = null, timeout = 30, caFile = null, certFile = null, keyFile = null } = options ?? {};
    this.#http = new Transport(url, { token, timeout, caFile, certFile, keyFile });
    this.url = this.#http.url;
  }

  #send(method, path, body = null, timeoutMs = undefined, signal = null) {
    return this.#http.send(method, path, body, timeoutMs, signal);
  }

  /** The server's status and version. */
  async health() {
    return this.#send("GET", "/v1/health");
  }

  /** Who the client is to the server: its token's name, role and queues. */
  async whoami() {
    return this.#send("GET", "/v1/token");
  }

  // Jobs.

  /** Enqueues one job; `options` are `push`'s. Resolves to `{id, state, existing}`. */
  async enqueue(name, data, options = {}) {
    return this.#send("POST", "/v1/jobs", push(name, data, options));
  }

  /** Enqueues jobs made with `push`, all or none (a bad job's error names its index: `jobs[3].name`). */
  async enqueueBatch(jobs) {
    return (await this.#send("POST", "/v1/jobs/batch", { jobs })).jobs;
  }

  /** The job, as it is now, with its history. */
  async get(jobId) {
    return this.#send("GET", `/v1/jobs/${id(jobId)}`);
  }

  /**
   * Waits until the job ends (completed, failed or cancelled), at most `timeout` seconds, and resolves to it with its
   * result or error; at the timeout, as it stands (check its `state`). The server answers the moment the job ends; a
   * wait longer than its --max-wait (60 s by default) asks again, as the Rust client's `Client::wait` does.
   */
  async wait(jobId, timeout) {
    const deadline = performance.now() + Math.min(millis(timeout, "timeout"), MAX_WAIT_MS);
    for (;;) {
      // Rounded up: a request that answers at its wait's end finds the deadline passed, rather than asking again.
      const waitMs = Math.ceil(Math.max(deadline - performance.now(), 0));
      const job = await this.#send("GET", `/v1/jobs/${id(jobId)}?wait_ms=${waitMs}`, null, waitMs + LONG_POLL_MARGIN_MS);
      if (ENDED.has(job.state) || performance.now() >= deadline) return job;
    }
  }

  /** A page of jobs, newest first, by the filters of `GET /v1/jobs`: `{jobs, next}` (pass `next` as `before`). */
  async jobs(filter = {}) {
    return this.#send("GET", `/v1/jobs${query(JOB_FILTER, filter, "job filter")}`);
  }

  /** Cancels a job that has not finished; its worker, if any, is refused from then on. */
  async cancel(jobId) {
    await this.#send("POST", `/v1/jobs/${id(jobId)}/cancel`);
  }

  /** Deletes a job and its history (a live one is cancelled first). */
  async delete(jobId) {
    await this.#send("DELETE", `/v1/jobs/${id(jobId)}`);
  }

  /** Runs a job again with fresh attempts, whatever became of it, now or at `runAt`; resolves to its new state. */
  async requeue(jobId, options = {}) {
    return (await this.#send("POST", `/v1/jobs/${id(jobId)}/requeue`, build(REQUEUE_OPTIONS, options, "requeue option"))).state;
  }

  /** Moves a job that has not started to another time; resolves to its new state. */
  async reschedule(jobId, runAt) {
    return (await this.#send("POST", `/v1/jobs/${id(jobId)}/reschedule`, { run_at: time(runAt, "runAt") })).state;
  }

  /** Changes the priority of a job that has not finished. */
  async setPriority(jobId, priority) {
    await this.#send("POST", `/v1/jobs/${id(jobId)}/priority`, { priority });
  }

  /** Moves a job that is not running to another queue (to run again there if it ended). */
  async move(jobId, queue) {
    await this.#send("POST", `/v1/jobs/${id(jobId)}/move`, { queue });
  }

  /** Replaces the data of a job that is not running. */
  async setData(jobId, data) {
    await this.#send("POST", `/v1/jobs/${id(jobId)}/data`, { data });
  }

  /** Adds and removes dependencies (`{add, remove}`: job ids) of a job that has not started; resolves to its state. */
  async changeDependencies(jobId, change) {
    return (await this.#send("POST", `/v1/jobs/${id(jobId)}/dependencies`, build(CHANGE_OPTIONS, change, "dependency change"))).state;
  }

  /** Adds and removes tags (`{add, remove}`), whatever the job's state. */
  async changeTags(jobId, change) {
    await this.#send("POST", `/v1/jobs/${id(jobId)}/tags`, build(CHANGE_OPTIONS, change, "tag change"));
  }

  /** Marks a job to keep an eye on (`jobs({ tracked: true })` lists it). */
  async track(jobId) {
    await this.#send("POST", `/v1/jobs/${id(jobId)}/track`);
  }

  /** Stops tracking a job. */
  async untrack(jobId) {
    await this.#send("POST", `/v1/jobs/${id(jobId)}/untrack`);
  }

  /**
   * One action over many jobs: `cancel`, `delete`, `retry` (run again those that ended) or `move` (with `queue`),
   * over the jobs of `filter` (the filters of `jobs`, without paging) or the `ids` listed. Resolves to
   * `{matched, done, skipped}`.
   */
  async bulk(action, selection) {
    return this.#send("POST", "/v1/jobs/bulk", { action, ...build(BULK_OPTIONS, selection, "bulk option") });
  }

  // Batches.

  /**
   * Creates a batch of jobs made with `push`, all or none: `onComplete` (a job made with `push`, without timing) is
   * pushed once every job has completed, failed or been cancelled, `onSuccess` once every job has completed, each
   * exactly once; their data, an object, gets a member `batch` with the counts and the failed jobs' ids. `open` holds
   * the batch open until `closeBatch`. Resolves to `{id, jobs}`.
   */
  async createBatch(jobs = [], options = {}) {
    const body = { jobs, ...build(BATCH_OPTIONS, options, "batch option") };
    if (body.open === false) delete body.open;
    return this.#send("POST", "/v1/batches", body);
  }

  /** Adds jobs made with `push` to a batch that has not completed, all or none. */
  async addToBatch(batchId, jobs) {
    return (await this.#send("POST", `/v1/batches/${id(batchId)}/jobs`, { jobs })).jobs;
  }

  /** Closes an open batch: it completes once every job has ended. Resolves to the batch. */
  async closeBatch(batchId) {
    return this.#send("POST", `/v1/batches/${id(batchId)}/close`, {});
  }

  /** A batch: its state (`open`, `running`, `completed`), counts and callbacks. */
  async batch(batchId) {
    return this.#send("GET", `/v1/batches/${id(batchId)}`);
  }

  /** Batches, newest first: `{batches, next}` (pass `next` as `before` for the next page). */
  async batches(filter = {}) {
    return this.#send("GET", `/v1/batches${query(BATCH_FILTER, { limit: 100, ...filter }, "batch filter")}`);
  }

  // Signals.

  /**
   * Sends a signal to `key` with `data` (any JSON; null when left out): the job that waits for the key (the oldest,
   * if several do) receives it and runs again at once, and with no job waiting it is kept for the first that waits.
   * Resolves to `{delivered, job}`: `job` received it, or (`delivered: false`, `job: null`) it is kept. Rejects with
   * `InvalidState` (409) when only a cancelled job waited for the key: the signal is refused, not kept.
   */
  async signal(key, data = null) {
    const sent = await this.#send("POST", "/v1/signals", { key, data: data ?? null });
    return { delivered: sent.delivered, job: sent.job ?? null };
  }

  // Queues and failures.

  /** Every queue with its jobs counted by state, whether it is paused, and its limits. */
  async queues() {
    return (await this.#send("GET", "/v1/queues")).queues;
  }

  /** Stops a queue from handing out jobs; everything else about it goes on. */
  async pauseQueue(queue) {
    await this.#send("POST", `/v1/queues/${segment(queue)}/pause`);
  }

  /** Lets a paused queue hand out jobs again. */
  async resumeQueue(queue) {
    await this.#send("POST", `/v1/queues/${segment(queue)}/resume`);
  }

  /** The next jobs a worker would take from a queue (at most `limit`), without taking them. */
  async peek(queue, options = {}) {
    return (await this.#send("GET", `/v1/queues/${segment(queue)}/peek${query(PEEK_OPTIONS, options, "peek option")}`)).jobs;
  }

  /** Lets at most `concurrency` of a queue's jobs run at once across all workers; null removes the limit. */
  async limitQueue(queue, concurrency) {
    await this.#send("POST", `/v1/queues/${segment(queue)}/concurrency`, { concurrency: concurrency ?? null });
  }

  /** Lets at most `limit` jobs of one concurrency key run at once in a queue; null removes the limit. */
  async limitKeys(queue, limit) {
    await this.#send("POST", `/v1/queues/${segment(queue)}/key-concurrency`, { limit: limit ?? null });
  }

  /** Lets a concurrency key take `weight` jobs per turn in a queue; null goes back to 1. */
  async weighKey(queue, key, weight) {
    await this.#send("POST", `/v1/queues/${segment(queue)}/key-weight`, { key, weight: weight ?? null });
  }

  /** Lets at most `{jobs}` of a queue's jobs start `{per}` seconds; null removes the limit. */
  async rateLimitQueue(queue, rate) {
    const body = rate == null ? null : build(RATE_OPTIONS, rate, "rate option");
    await this.#send("POST", `/v1/queues/${segment(queue)}/rate`, { rate: body });
  }

  /** Turns on priority aging, a point per `every` seconds of waiting; null goes back to strict priority. */
  async ageQueue(queue, every) {
    await this.#send("POST", `/v1/queues/${segment(queue)}/aging`, { every_ms: every == null ? null : millis(every, "every") });
  }

  /** Every failure group that holds failed jobs, with how many and when they failed. */
  async failureGroups() {
    return (await this.#send("GET", "/v1/failures")).groups;
  }

  /** Puts the oldest failed jobs of a group back (`limit` of them, to `queue`); resolves to how many went back. */
  async unfail(group, options = {}) {
    return (await this.#send("POST", `/v1/failures/${segment(group)}/unfail`, build(UNFAIL_OPTIONS, options, "unfail option"))).moved;
  }

  // Recurring templates.

  /**
   * Creates or replaces the template `key`: at every slot of `cron` in `timeZone` (UTC when absent), the job `job`
   * (made with `push`, without timing) is created; `missed` is `skip`, `once` or `all`, `overlap` `allow`, `skip` or
   * `replace`. Resolves to the template.
   */
  async setRecurring(key, template) {
    return this.#send("PUT", `/v1/recurring/${segment(key)}`, build(RECURRING_OPTIONS, template, "recurring option"));
  }

  /** The template `key`, with its job and its next and last runs. */
  async getRecurring(key) {
    return this.#send("GET", `/v1/recurring/${segment(key)}`);
  }

  /** Every template. */
  async listRecurring() {
    return (await this.#send("GET", "/v1/recurring")).recurring;
  }

  /** Pauses a template: it creates no job until resumed. Resolves to the template. */
  async pauseRecurring(key) {
    return this.#send("POST", `/v1/recurring/${segment(key)}/pause`, {});
  }

  /** Resumes a template; its next slot counts from now. Resolves to the template. */
  async resumeRecurring(key) {
    return this.#send("POST", `/v1/recurring/${segment(key)}/resume`, {});
  }

  /** Creates the template's job now, as a slot would; resolves to it as `enqueue` does. */
  async runRecurring(key) {
    return this.#send("POST", `/v1/recurring/${segment(key)}/run`, {});
  }

  /** Removes a template; the jobs it created stay. */
  async removeRecurring(key) {
    await this.#send("DELETE", `/v1/recurring/${segment(key)}`);
  }

  // Seeing what happens.

  /** Every worker seen: when last, the jobs it holds and which of them stalled. */
  async workers() {
    return (await this.#send("GET", "/v1/workers")).workers;
  }

  /** A page of the activity log, newest first: `{events, next_before}`. */
  async activity(filter = {}) {
    return this.#send("GET", `/v1/activity${query(ACTIVITY_FILTER, filter, "activity filter")}`);
  }

  /**
   * Follows the server's events as they are committed (`for await (const event of stream)`), those of `queue`,
   * `name` (a GLOB), `job` and `kinds` only when given, from the next one or after the event `after`. It resumes by
   * itself after a disconnect. Resolves once connected; a bad filter is refused here.
   */
  async events(filter = {}) {
    const { signal = null, after, ...params } = build(EVENT_OPTIONS, filter, "event filter");
    const search = new URLSearchParams();
    for (const [name, value] of Object.entries(params)) search.set(name, Array.isArray(value) ? value.join(",") : String(value));
    const path = `/v1/events${search.toString() ? `?${search}` : ""}`;
    // "Now" is where the log stands, so that a connection made again before any event resumes from there.
    const from = after ?? (await this.activity({ limit: 1 })).events[0]?.id ?? 0;
    const stream = new EventStream(this.#http, path, from, signal);
    await stream.connect();
    return stream;
  }

  // A worker's calls, under a lease.

  /**
   * Takes up to `limit` ready jobs (`{job, lease}` each); with `wait` (seconds), a long poll that returns the moment one
   * is ready. An aborted `signal` ends the request; the server gives back a job it claimed for it.
   */
  async dequeue(worker, options = {}) {
    const body = dequeueBody(worker, options);
    const timeoutMs = (body.wait_ms ?? 0) + LONG_POLL_MARGIN_MS;
    return (await this.#send("POST", "/v1/dequeue", body, timeoutMs, options?.signal ?? null)).jobs;
  }

  /** Extends the lease, recording `progress` when given; resolves to its new expiry. */
  async heartbeat(lease, progress = null) {
    const body = { token: lease.token };
    if (progress !== null && progress !== undefined) body.progress = progress;
    return (await this.#send("POST", `/v1/jobs/${lease.job}/heartbeat`, body)).lease_expires_at;
  }

  /** Records the job's progress, for queries and the dashboard to show. */
  async progress(lease, progress) {
    await this.#send("POST", `/v1/jobs/${lease.job}/update`, { token: lease.token, progress });
  }

  /** Saves the data a retry of the job starts from, and extends the lease; resolves to its new expiry. */
  async checkpoint(lease, data) {
    return (await this.#send("POST", `/v1/jobs/${lease.job}/checkpoint`, { token: lease.token, data })).lease_expires_at;
  }

  /**
   * Records a step of the running attempt under `name`, its `result` any JSON (undefined: null), and extends the
   * lease; resolves to the step as stored. A step already recorded under that name keeps its first result, which the
   * answer gives. `job.step` in a handler numbers names and reads recorded steps back; this is the call it makes.
   */
  async recordStep(lease, name, result) {
    return this.#send("POST", `/v1/jobs/${lease.job}/steps`, { token: lease.token, name, result: result ?? null });
  }

  /**
   * Sleeps as step `name` of the running attempt, waking `{seconds}` after the step is first reached (by the server's
   * clock) or at `{until}` (an RFC 3339 string or a `Date`), one of the two. Resolves to `{suspended: true, until}`
   * when the job now sleeps: its lease is over, and it runs again at `until`; or to `{suspended: false, until: null}`
   * when the step's time had passed already (a job woken from this sleep), and the run goes on. `job.sleep` and
   * `job.sleepUntil` in a handler number names and throw `Suspended`; this is the call they make.
   */
  async sleep(lease, name, wake) {
    const fields = build(SLEEP_OPTIONS, wake, "sleep option");
    const given = Object.keys(fields).length;
    if (given !== 1) {
      throw invalid(given ? "until" : "seconds", `give seconds (how long the job sleeps) or until (when it wakes), ${given ? "not both" : "got neither"}`);
    }
    const slept = await this.#send("POST", `/v1/jobs/${lease.job}/sleep`, { token: lease.token, name, ...fields });
    return { suspended: slept.suspended, until: slept.until ?? null };
  }

  /**
   * Waits as step `name` of the running attempt for a signal sent to `key`, for `{seconds}` from the first time the
   * step is reached (by the server's clock; at most ten years). Resolves to `{suspended, until, received, data,
   * timed_out}`, of which exactly one flag is true: `received` when the signal came (kept from before the wait, or
   * received while the job waited), with its `data`; `timed_out` when the wait's time passed with no signal; or
   * `suspended` when the job now waits: its lease is over, and it runs again when the signal comes or at `until`.
   * `job.waitForSignal` in a handler numbers names, reads a replay from the claim, and throws `Suspended`; this is the
   * call it makes.
   */
  async waitForSignal(lease, name, key, wait) {
    const fields = build(SIGNAL_WAIT_OPTIONS, wait, "signal wait option");
    if (fields.timeout_ms === undefined) throw invalid("seconds", "give seconds: how long the wait lasts, got nothing");
    const waited = await this.#send("POST", `/v1/jobs/${lease.job}/wait_for_signal`, { token: lease.token, name, key, ...fields });
    return {
      suspended: waited.suspended,
      until: waited.until ?? null,
      received: waited.received,
      data: waited.data ?? null,
      timed_out: waited.timed_out,
    };
  }

  /**
   * Spawns `jobs` (made with `push`, as `enqueueBatch` takes them; at most 1,000) as step `name` of the running attempt:
   * the server pushes them as the job's children, all or none, starts them at once, records their ids as the step's
   * result, and extends the lease. Resolves to `{children}`: their ids, in order. A step already recorded under `name`
   * answers its ids and pushes nothing. A job naming another parent is refused (`jobs[3].parent`). `job.spawn` in a
   * handler numbers names and reads a replay from the claim; this is the call it makes.
   */
  async spawn(lease, name, jobs) {
    const spawned = await this.#send("POST", `/v1/jobs/${lease.job}/spawn`, { token: lease.token, name, jobs: list(jobs, "jobs") });
    return { children: spawned.children };
  }

  /**
   * Waits as step `name` of the running attempt for the job's children. Resolves to `{suspended: false, children}` once
   * none holds the job: each child's `{id, state, result}`, oldest first (`result` null when it completed with none),
   * recorded as the step's result; or to `{suspended: true, children: []}` when the job now waits: its lease is over,
   * and it runs again once they have ended. A failed child holds the join until it is requeued or cancelled.
   * `job.join` in a handler numbers names, reads a replay from the claim, and throws `Suspended`; this is the call it
   * makes.
   */
  async join(lease, name) {
    const joined = await this.#send("POST", `/v1/jobs/${lease.job}/join`, { token: lease.token, name });
    return { suspended: joined.suspended, children: joinedChildren(joined.children ?? []) };
  }

  /**
   * Completes the job with `result` (what it produced, kept apart from its data) when given, replacing its data with
   * `data` when given; with `next: {queue, delay, dependsOn}`, the job goes on in that queue instead.
   */
  async finish(lease, data = null, options = {}) {
    const { result, ...rest } = build(FINISH_OPTIONS, options, "finish option");
    await this.#send("POST", `/v1/jobs/${lease.job}/finish`, finishFields({ token: lease.token, ...rest }, data, result));
  }

  /**
   * Completes many jobs (leases, or `{lease, data, result}`) in one request; each one's error (null when done), in
   * order.
   */
  async finishMany(finishes) {
    return finishErrors(await this.#send("POST", "/v1/finish", { jobs: finishItems(finishes) }));
  }

  /** Completes jobs and takes the next ones (without waiting) in one request: `{errors, taken, takeError}`. */
  async finishAndTake(finishes, worker, options = {}) {
    const { wait_ms: _wait, ...take } = dequeueBody(worker, options);
    const body = await this.#send("POST", "/v1/finish", { jobs: finishItems(finishes), take });
    return {
      errors: finishErrors(body),
      taken: body.jobs ?? [],
      takeError: body.take_error ? errorFromBody(body.take_error, 200) : null,
    };
  }

  /** Reports a transient error; resolves to the job's new state (`queued`, `scheduled`, or `failed`). */
  async retry(lease, error, options = {}) {
    const body = { token: lease.token, error, ...build(RETRY_CALL_OPTIONS, options, "retry call option") };
    return (await this.#send("POST", `/v1/jobs/${lease.job}/retry`, body)).state;
  }

  /** Fails the job for good, in failure group `group`. */
  async fail(lease, group, message) {
    await this.#send("POST", `/v1/jobs/${lease.job}/fail`, { token: lease.token, group, message });
  }

  /** Gives the job back unrun; the attempt does not count. */
  async release(lease) {
    await this.#send("POST", `/v1/jobs/${lease.job}/release`, { token: lease.token });
  }

  /** Says the worker stops: the activity log shows it stopped, not lost. */
  async workerStopped(worker) {
    await this.#send("POST", `/v1/workers/${segment(worker)}/stop`);
  }
}
