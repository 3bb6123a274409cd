// `Client`: the HTTP API's calls on Node's own `node:http` (or `node:https`), over kept-alive connections. Node's
// `fetch` cost about 590 µs per request on loopback where `node:http` took 260, and a worker makes a request or two
// per round of jobs.

import http from "node:http";
import https from "node:https";
import { readFileSync } from "node:fs";

import { CairnError, InvalidInput, Unavailable, errorFromBody } from "./errors.js";

export const DEFAULT_URL = "http://127.0.0.1:6670";
// How much longer than a long poll's wait the request may take before it counts as lost (ms).
const LONG_POLL_MARGIN_MS = 10_000;
// The longest wait for a job, as the Rust client's (a day, ms); the server caps each request's part of it.
const MAX_WAIT_MS = 24 * 3600 * 1000;
// The states a job ends in: a wait for it is over.
const ENDED = new Set(["completed", "failed", "cancelled"]);

/** Whole milliseconds of a duration in seconds, refusing a negative one as the server would. */
export function millis(seconds, field) {
  if (typeof seconds !== "number" || !(seconds >= 0)) {
    throw new InvalidInput("invalid_input", `${field}: must be a number of seconds, at least 0, got ${seconds}`, field);
  }
  return Math.round(seconds * 1000);
}

/**
 * A job to enqueue, as `enqueueBatch` takes them; the server validates every field and names a bad one.
 * Durations are seconds (`delay`, `leaseTimeout`, `timeout`); `runAt` is an RFC 3339 time; `retry` the whole policy.
 * `debounce: {key, delay, maxWait}`: a push whose key a pending job holds lands in that job, which then runs `delay`
 * after the latest push and no later than `maxWait` after the first. `throttle: {key, period}`: one job per key per
 * period, whatever became of it. Both answer with the job they landed in (`existing`). `concurrencyKey`: keyed jobs
 * take turns by key, and at most the queue's limit per key run at once (`concurrencyLimit`: this job's own limit).
 * `batch`: the id of a batch the job joins (see `Client.createBatch`).
 */
export function push(name, data, options = {}) {
  const body = { name };
  if (data !== undefined && data !== null) body.data = data;
  const direct = { queue: "queue", priority: "priority", runAt: "run_at", uniqueKey: "unique_key", weight: "weight", schedule: "schedule", retry: "retry", batch: "batch" };
  for (const [option, field] of Object.entries(direct)) {
    if (options[option] !== undefined && options[option] !== null) body[field] = options[option];
  }
  if (options.delay != null) body.delay_ms = millis(options.delay, "delay");
  if (options.leaseTimeout != null) body.lease_timeout_ms = millis(options.leaseTimeout, "lease_timeout");
  if (options.timeout != null) body.timeout_ms = millis(options.timeout, "timeout");
  if (options.tags?.length) body.tags = [...options.tags];
  if (options.debounce != null) {
    const { key, delay, maxWait } = options.debounce;
    body.debounce = { key, delay_ms: millis(delay, "debounce.delay"), max_wait_ms: millis(maxWait, "debounce.max_wait") };
  }
  if (options.throttle != null) {
    const { key, period } = options.throttle;
    body.throttle = { key, period_ms: millis(period, "throttle.period") };
  }
  if (options.concurrencyKey != null || options.concurrencyLimit != null) {
    body.concurrency = { key: options.concurrencyKey ?? null };
    if (options.concurrencyLimit != null) body.concurrency.limit = options.concurrencyLimit;
  }
  return body;
}

function dequeueBody(worker, { queues = [], names = [], limit = 1, wait = null, maxWeight = null } = {}) {
  const body = { worker, limit };
  if (queues.length) body.queues = [...queues];
  if (names.length) body.names = [...names];
  if (wait != null) body.wait_ms = millis(wait, "wait");
  if (maxWeight != null) body.max_weight = maxWeight;
  return body;
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

const finishErrors = (body) => (body.results ?? []).map((r) => (r.error ? errorFromBody(r.error, 200) : null));

/** Why a request went unanswered: the error's code and what it says (`UNABLE_TO_VERIFY_LEAF_SIGNATURE: unable to verify
 * the first certificate`), either alone when that is all there is. */
function unreachable(e) {
  const code = e?.code;
  const message = e?.message;
  if (code && message && !message.includes(code)) return `${code}: ${message}`;
  return message || code || "the connection closed";
}

/** The TLS files as `https.Agent` takes them, read now, so that a file that cannot be read is an error here. */
function tlsOptions({ caFile, certFile, keyFile }) {
  if ((certFile === null) !== (keyFile === null)) {
    const missing = certFile === null ? "certFile" : "keyFile";
    throw new InvalidInput("invalid_input", `${missing}: a client certificate needs both certFile and keyFile`, missing);
  }
  const read = (field, path) => {
    try {
      return readFileSync(path);
    } catch (e) {
      throw new InvalidInput("invalid_input", `${field}: cannot read ${JSON.stringify(path)}: ${e.message}`, field);
    }
  };
  const options = {};
  if (caFile !== null) options.ca = read("caFile", caFile);
  if (certFile !== null) {
    options.cert = read("certFile", certFile);
    options.key = read("keyFile", keyFile);
  }
  return options;
}

/** A blocking-free client of a Cairn server: every method returns a promise. */
export class Client {
  /**
   * @param {string} url the server's base URL
   * @param {{token?: string, timeout?: number, caFile?: string, certFile?: string, keyFile?: string}} options a bearer
   *   token, and seconds a request may take (30); over https://, the CA (PEM) the server's certificate must come from
   *   when it is not one Node trusts, and a client certificate and key (PEM) for a server that requires one
   */
  constructor(url = DEFAULT_URL, { token = null, timeout = 30, caFile = null, certFile = null, keyFile = null } = {}) {
    this.url = url.replace(/\/+$/, "");
    let parsed;
    try {
      parsed = new URL(this.url);
    } catch {
      parsed = null;
    }
    if (!parsed || !["http:", "https:"].includes(parsed.protocol)) {
      throw new InvalidInput("invalid_input", `server: must be an http:// or https:// URL, got ${JSON.stringify(url)}`, "server");
    }
    this.transport = parsed.protocol === "https:" ? https : http;
    // An IPv6 host comes bracketed in a URL (`[::1]`), and bare to `node:http`.
    const hostname = parsed.hostname.replace(/^\[(.*)\]$/, "$1");
    this.target = { hostname, port: parsed.port || undefined, prefix: parsed.pathname.replace(/\/+$/, "") };
    // Idle connections wait in the pool for the next request, without keeping the process alive.
    this.agent = new this.transport.Agent({ keepAlive: true, ...tlsOptions({ caFile, certFile, keyFile }) });
    this.headers = { "content-type": "application/json" };
    if (token) this.headers.authorization = `Bearer ${token}`;
    this.timeoutMs = timeout * 1000;
  }

  async #send(method, path, body = null, timeoutMs = this.timeoutMs, signal = null) {
    const { status, text } = await this.#exchange(method, path, body, timeoutMs, signal);
    let parsed = null;
    try {
      parsed = text ? JSON.parse(text) : {};
    } catch {
      parsed = null;
    }
    if (status >= 200 && status < 300) return parsed;
    throw errorFromBody(parsed?.error, status);
  }

  /** One request and its whole answer. It ends at its timeout, or when `signal` aborts (a worker that stops mid-poll). */
  #exchange(method, path, body, timeoutMs, signal) {
    return new Promise((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      const payload = body === null ? null : JSON.stringify(body);
      const headers = { ...this.headers };
      if (payload !== null) headers["content-length"] = Buffer.byteLength(payload);
      let settled = false;
      const settle = (outcome) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        outcome();
      };
      const fail = (e) =>
        settle(() => {
          if (signal?.aborted) reject(signal.reason ?? e);
          else reject(new Unavailable("unavailable", `${method} ${path}: ${unreachable(e)}`));
        });
      const request = this.transport.request(
        { ...this.target, path: this.target.prefix + path, method, headers, agent: this.agent },
        (response) => {
          const chunks = [];
          response.on("data", (chunk) => chunks.push(chunk));
          response.on("end", () =>
            settle(() => resolve({ status: response.statusCode, text: Buffer.concat(chunks).toString("utf8") })),
          );
          response.on("error", fail);
          // Closed before its end: the connection was cut mid-answer.
          response.on("close", () => fail(new Error("the answer was cut short")));
        },
      );
      const timer = setTimeout(() => request.destroy(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
      const onAbort = () => request.destroy(signal.reason);
      signal?.addEventListener("abort", onAbort, { once: true });
      request.on("error", fail);
      request.end(payload ?? undefined);
    });
  }

  /** The server's status and version. */
  async health() {
    return this.#send("GET", "/v1/health");
  }

  /** Enqueues one job; `options` are `push`'s. Resolves to `{id, state, existing}`. */
  async enqueue(name, data, options = {}) {
    return this.#send("POST", "/v1/jobs", push(name, data, options));
  }

  /** Enqueues jobs made with `push`, all or none (a bad job's error names its index: `jobs[3].name`). */
  async enqueueBatch(jobs) {
    return (await this.#send("POST", "/v1/jobs/batch", { jobs })).jobs;
  }

  /** The job, as it is now. */
  async get(id) {
    return this.#send("GET", `/v1/jobs/${Number(id)}`);
  }

  /**
   * Waits until the job ends (completed, failed or cancelled), at most `timeout` seconds, and resolves to it with its
   * result or error; at the timeout, as it stands (check its `state`). The server answers the moment the job ends; a
   * wait longer than its --max-wait (60 s by default) asks again, as the Rust client's `Client::wait` does.
   */
  async wait(id, timeout) {
    const deadline = performance.now() + Math.min(millis(timeout, "timeout"), MAX_WAIT_MS);
    for (;;) {
      // Rounded up: a request that answers at its wait's end finds the deadline passed, rather than asking again.
      const waitMs = Math.ceil(Math.max(deadline - performance.now(), 0));
      const job = await this.#send("GET", `/v1/jobs/${Number(id)}?wait_ms=${waitMs}`, null, waitMs + LONG_POLL_MARGIN_MS);
      if (ENDED.has(job.state) || performance.now() >= deadline) return job;
    }
  }

  /**
   * Creates a batch of jobs made with `push`, all or none: `onComplete` (a job made with `push`, without timing) is
   * pushed once every job has completed, failed or been cancelled, `onSuccess` once every job has completed, each
   * exactly once; their data, an object, gets a member `batch` with the counts and the failed jobs' ids. `open` holds
   * the batch open until `closeBatch`. Resolves to `{id, jobs}`.
   */
  async createBatch(jobs = [], { onSuccess = null, onComplete = null, open = false, description = null } = {}) {
    const body = { jobs };
    if (onSuccess) body.on_success = onSuccess;
    if (onComplete) body.on_complete = onComplete;
    if (open) body.open = true;
    if (description !== null) body.description = description;
    return this.#send("POST", "/v1/batches", body);
  }

  /** Adds jobs made with `push` to a batch that has not completed, all or none. */
  async addToBatch(id, jobs) {
    return (await this.#send("POST", `/v1/batches/${Number(id)}/jobs`, { jobs })).jobs;
  }

  /** Closes an open batch: it completes once every job has ended. Resolves to the batch. */
  async closeBatch(id) {
    return this.#send("POST", `/v1/batches/${Number(id)}/close`, {});
  }

  /** A batch: its state (`open`, `running`, `completed`), counts and callbacks. */
  async batch(id) {
    return this.#send("GET", `/v1/batches/${Number(id)}`);
  }

  /** Batches, newest first: `{batches, next}` (pass `next` as `before` for the next page). */
  async batches({ state = null, before = null, limit = 100 } = {}) {
    const query = new URLSearchParams({ limit: String(limit) });
    if (state !== null) query.set("state", state);
    if (before !== null) query.set("before", String(before));
    return this.#send("GET", `/v1/batches?${query}`);
  }

  /** Cancels a job that has not finished; its worker, if any, is refused from then on. */
  async cancel(id) {
    await this.#send("POST", `/v1/jobs/${Number(id)}/cancel`);
  }

  /** Every queue with its jobs counted by state. */
  async queues() {
    return (await this.#send("GET", "/v1/queues")).queues;
  }

  /**
   * Takes up to `limit` ready jobs (`{job, lease}` each); with `wait` (seconds), a long poll that returns the moment one
   * is ready. An aborted `signal` ends the request; the server gives back a job it claimed for it.
   */
  async dequeue(worker, options = {}) {
    const body = dequeueBody(worker, options);
    const timeoutMs = (body.wait_ms ?? 0) + LONG_POLL_MARGIN_MS;
    return (await this.#send("POST", "/v1/dequeue", body, timeoutMs, options.signal ?? null)).jobs;
  }

  /** Extends the lease; resolves to its new expiry. */
  async heartbeat(lease, progress = null) {
    const body = { token: lease.token };
    if (progress !== null) body.progress = progress;
    return (await this.#send("POST", `/v1/jobs/${lease.job}/heartbeat`, body)).lease_expires_at;
  }

  /**
   * Completes the job with `result` (what it produced, kept apart from its data) when given, replacing its data with
   * `data` when given.
   */
  async finish(lease, data = null, { result = null } = {}) {
    await this.#send("POST", `/v1/jobs/${lease.job}/finish`, finishFields({ token: lease.token }, data, result));
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
    const take = dequeueBody(worker, { ...options, wait: null });
    const body = await this.#send("POST", "/v1/finish", { jobs: finishItems(finishes), take });
    return {
      errors: finishErrors(body),
      taken: body.jobs ?? [],
      takeError: body.take_error ? errorFromBody(body.take_error, 200) : null,
    };
  }

  /** Reports a transient error; resolves to the job's new state (`queued`, `scheduled`, or `failed`). */
  async retry(lease, error, { delay = null } = {}) {
    const body = { token: lease.token, error };
    if (delay !== null) body.delay_ms = millis(delay, "delay");
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
    await this.#send("POST", `/v1/workers/${encodeURIComponent(worker)}/stop`);
  }
}

export { CairnError };
