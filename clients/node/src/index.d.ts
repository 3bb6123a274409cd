// Types of Cairn's Node client. Times are RFC 3339 strings and durations seconds, as numbers.

export const DEFAULT_URL: string;

export interface Lease {
  job: number;
  /** 64-bit, so a string. */
  token: string;
  worker: string;
  expires_at: string;
}

/** A job as the server shows it (every field of `GET /v1/jobs/{id}`). */
export interface Job {
  id: number;
  queue: string;
  name: string;
  state: string;
  data: unknown;
  /** What its last completed run produced, kept apart from its data; null when none (each attempt in `history` has its own). */
  result: unknown;
  priority: number;
  weight: number;
  attempt: number;
  run_at: string;
  lease_timeout_ms: number;
  error: string | null;
  failure_group: string | null;
  tags: string[];
  [field: string]: unknown;
}

export interface ClaimedJob {
  job: Job;
  lease: Lease;
}

export interface Enqueued {
  id: number;
  state: string;
  existing: boolean;
}

export interface RetryPolicy {
  max_attempts: number;
  initial_delay_ms: number;
  multiplier: number;
  max_delay_ms: number;
  jitter: number;
}

export interface PushOptions {
  queue?: string;
  priority?: number;
  /** Seconds from now until the job is ready. */
  delay?: number;
  runAt?: string;
  uniqueKey?: string;
  tags?: string[];
  retry?: RetryPolicy;
  leaseTimeout?: number;
  timeout?: number;
  weight?: number;
  schedule?: string;
  /** A burst of pushes with one key makes one job, run `delay` seconds after the latest, at most `maxWait` after the first. */
  debounce?: { key: string; delay: number; maxWait: number };
  /** One job per key per `period` seconds, whatever became of it. */
  throttle?: { key: string; period: number };
  /** Keyed jobs take turns by key, and at most the queue's limit per key run at once. */
  concurrencyKey?: string;
  /** At most this many jobs of the key run at once when this one is next, instead of the queue's limit per key. */
  concurrencyLimit?: number;
  /** The batch the job joins, which must not have completed. */
  batch?: number;
}

/** A batch's callback: the job it pushes, and the job it pushed once the batch reached its end. */
export interface BatchCallback {
  queue: string;
  name: string;
  job: number | null;
}

/** A batch and its progress (`GET /v1/batches/{id}`). */
export interface Batch {
  id: number;
  description: string | null;
  state: "open" | "running" | "completed";
  total: number;
  pending: number;
  completed: number;
  failed: number;
  cancelled: number;
  created_at: string;
  completed_at: string | null;
  succeeded_at: string | null;
  on_success: BatchCallback | null;
  on_complete: BatchCallback | null;
}

export interface BatchOptions {
  /** Pushed once every job has completed (a job made with `push`). */
  onSuccess?: Record<string, unknown> | null;
  /** Pushed once every job has completed, failed or been cancelled. */
  onComplete?: Record<string, unknown> | null;
  /** Hold the batch open until `closeBatch`. */
  open?: boolean;
  description?: string | null;
}

export interface DequeueOptions {
  queues?: string[];
  names?: string[];
  limit?: number;
  /** Seconds to wait for a job (a long poll). */
  wait?: number;
  maxWeight?: number;
  /** Ends the request when aborted; the server gives back a job it claimed for it. */
  signal?: AbortSignal;
}

/** A job to finish: its lease, or its lease with its `result` and the `data` that replaces its input. */
export type Finishing = Lease | { lease: Lease; data?: unknown; result?: unknown };

export function push(name: string, data?: unknown, options?: PushOptions): Record<string, unknown>;

/** HTTPS settings: a CA file (PEM) for a server whose certificate Node does not trust, a client certificate and key. */
export interface TlsFiles {
  caFile?: string | null;
  certFile?: string | null;
  keyFile?: string | null;
}

export class Client {
  constructor(url?: string, options?: { token?: string | null; timeout?: number } & TlsFiles);
  health(): Promise<{ status: string; version: string }>;
  enqueue(name: string, data?: unknown, options?: PushOptions): Promise<Enqueued>;
  enqueueBatch(jobs: Record<string, unknown>[]): Promise<Enqueued[]>;
  get(id: number): Promise<Job>;
  createBatch(jobs?: Record<string, unknown>[], options?: BatchOptions): Promise<{ id: number; jobs: Enqueued[] }>;
  addToBatch(id: number, jobs: Record<string, unknown>[]): Promise<Enqueued[]>;
  closeBatch(id: number): Promise<Batch>;
  batch(id: number): Promise<Batch>;
  batches(options?: { state?: "open" | "running" | "completed" | null; before?: number | null; limit?: number }): Promise<{ batches: Batch[]; next: number | null }>;
  /** The job once it ended (completed, failed or cancelled), or as it stands after `timeout` seconds. */
  wait(id: number, timeout: number): Promise<Job>;
  cancel(id: number): Promise<void>;
  queues(): Promise<Record<string, unknown>[]>;
  dequeue(worker: string, options?: DequeueOptions): Promise<ClaimedJob[]>;
  heartbeat(lease: Lease, progress?: unknown): Promise<string>;
  finish(lease: Lease, data?: unknown, options?: { result?: unknown }): Promise<void>;
  finishMany(finishes: Finishing[]): Promise<(CairnError | null)[]>;
  finishAndTake(
    finishes: Finishing[],
    worker: string,
    options?: Omit<DequeueOptions, "wait" | "signal">,
  ): Promise<{ errors: (CairnError | null)[]; taken: ClaimedJob[]; takeError: CairnError | null }>;
  retry(lease: Lease, error: string, options?: { delay?: number }): Promise<string>;
  fail(lease: Lease, group: string, message: string): Promise<void>;
  release(lease: Lease): Promise<void>;
  workerStopped(worker: string): Promise<void>;
}

export class CairnError extends Error {
  kind: string;
  field: string | null;
  /** The HTTP status; null when no answer came. */
  status: number | null;
}
export class InvalidInput extends CairnError {}
export class NotFound extends CairnError {}
export class LeaseLost extends CairnError {}
export class InvalidState extends CairnError {}
export class Unauthorized extends CairnError {}
export class Unavailable extends CairnError {}

export class RetryLater extends Error {
  constructor(message: string, options?: { delay?: number | null });
  delay: number | null;
}
export class FailJob extends Error {
  constructor(group: string, message: string);
  group: string;
}

/** What a handler gets besides the job. */
export interface JobContext {
  lease: Lease;
  /** Aborted when the lease is lost, or when the worker stops and gives the job back. */
  signal: AbortSignal;
  /** Replaces the job's data when the handler returns (what a recurring job's next run starts from); null keeps it. */
  setData(data: unknown): void;
}

/** What a handler returns becomes the job's result, kept apart from its data; undefined or null is none. */
export type Handler = (job: Job, context: JobContext) => unknown | Promise<unknown>;

export interface WorkerReport {
  finished: number;
  retried: number;
  failed: number;
  lost: number;
  released: number;
}

export class Worker {
  constructor(
    url: string,
    id: string,
    options?: {
      token?: string | null;
      queues?: string[];
      maxConcurrency?: number;
      wait?: number;
      shutdownDeadline?: number;
      logger?: { warn(message: string): void; error(message: string): void };
    } & TlsFiles,
  );
  handler(name: string, fn: Handler): this;
  globHandler(pattern: string, fn: Handler): this;
  /** Runs until SIGTERM or SIGINT, or `stop()`. */
  run(): Promise<WorkerReport>;
  /** Runs until `stop()`. */
  start(): Promise<WorkerReport>;
  stop(): void;
}

export function globRegExp(pattern: string): RegExp;
export function exactPattern(name: string): string;
