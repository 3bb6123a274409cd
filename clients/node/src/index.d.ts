// Types of Cairn's Node client. Options are camelCase, with durations in seconds (numbers) and times RFC 3339 strings
// or `Date`s; what the server answers keeps its own names (snake_case) and its times as RFC 3339 strings. Each
// interface named after a body of the server's OpenAPI document declares every field of it, and no other: the test
// `test/parity.test.js` compares them.

export const DEFAULT_URL: string;

export type JobState = "scheduled" | "queued" | "waiting" | "running" | "completed" | "failed" | "cancelled";

/** Whose the children are that a job's runs create: the run's (the default) or, as in Bedrock, the job's. */
export type Children = "run" | "job";

/** The kinds of event the activity log records. */
export type EventKind =
  | "added"
  | "debounced"
  | "started"
  | "heartbeat_lost"
  | "retried"
  | "finished"
  | "failed"
  | "cancelled"
  | "released"
  | "requeued"
  | "unfailed"
  | "worker_started"
  | "worker_stopped"
  | "worker_lost"
  | "moved"
  | "rescheduled"
  | "prioritized"
  | "deleted"
  | "queue_changed"
  | "promoted"
  | "audit"
  | "step_recorded"
  | "suspended"
  | "signal_received";

/**
 * How an attempt ended: `suspended` when its job went to sleep (`job.sleep`) or waits for a signal
 * (`job.waitForSignal`) or its children (`job.join`), which does not count as an attempt.
 */
export type AttemptOutcome =
  | "completed"
  | "retried"
  | "failed"
  | "lease_expired"
  | "cancelled"
  | "crashed"
  | "released"
  | "requeued"
  | "suspended";

/** A time: an RFC 3339 string (`2026-01-31T09:00:00Z`) or a `Date`. */
export type Time = string | Date;

/** The lease on a running job (LeaseBody). */
export interface Lease {
  job: number;
  /** 64-bit, so a string. */
  token: string;
  worker: string;
  expires_at: string;
}

/** Attempts and backoff, as the server shows them (RetryPolicyBody). */
export interface RetryPolicy {
  max_attempts: number;
  initial_delay_ms: number;
  multiplier: number;
  max_delay_ms: number;
  jitter: number;
}

/** What an attempt's process used, when its worker measured it (UsageBody). */
export interface Usage {
  run_ms: number;
  cpu_ms: number;
  peak_memory: number;
}

/** One attempt at running a job (AttemptBody). */
export interface Attempt {
  number: number;
  worker: string;
  started_at: string;
  finished_at?: string | null;
  /** Null while it runs. */
  outcome?: AttemptOutcome | null;
  error?: string | null;
  /** What a completed attempt finished with. */
  result?: unknown;
  usage?: Usage | null;
}

/** A job as the server shows it (JobBody: `get`, `jobs`, `peek`, `wait`). */
export interface Job {
  id: number;
  queue: string;
  name: string;
  state: JobState;
  data: unknown;
  /** What its last completed run produced, kept apart from its data; null when none (each attempt in `history` has its own). */
  result?: unknown;
  /** The last progress reported. */
  progress?: unknown;
  priority: number;
  weight: number;
  attempt: number;
  retry: RetryPolicy;
  run_at: string;
  due_at?: string | null;
  created_at: string;
  started_at?: string | null;
  finished_at?: string | null;
  lease_timeout_ms: number;
  lease_expires_at?: string | null;
  timeout_ms?: number | null;
  worker?: string | null;
  error?: string | null;
  failure_group?: string | null;
  tags: string[];
  tracked: boolean;
  schedule?: string | null;
  time_zone?: string | null;
  unique_key?: string | null;
  depends_on: number[];
  parent?: number | null;
  awaits_parent: boolean;
  children?: Children;
  batch?: number | null;
  trace_parent?: string | null;
  concurrency_key?: string | null;
  concurrency_limit?: number | null;
  debounce_key?: string | null;
  throttle_key?: string | null;
  /** Its attempts, oldest first (empty in listings). */
  history: Attempt[];
  /** How many steps its handler has recorded. */
  step_count: number;
  /** The steps its handler has recorded, in order (empty in listings): what a handler that runs again reads back. */
  steps: Step[];
  /** The key of the signal its handler waits for, while it waits (`scheduled` until the signal or the timeout). */
  awaits_signal?: string | null;
  /** When its handler suspended it (a sleep, a wait for a signal or for its children), while it stays so; null otherwise. */
  suspended_at?: string | null;
}

/** What came of a sleep (SleptBody). */
export interface Slept {
  /** Whether the job now sleeps: its lease is over, and the run must stop. False once the sleep's time has passed. */
  suspended: boolean;
  /** When it wakes, while it sleeps; null otherwise. */
  until: string | null;
}

/** When a sleep wakes: `seconds` after the step is first reached (the server's clock), or `until`; one of the two. */
export type SleepFor = { seconds: number; until?: undefined } | { until: Time; seconds?: undefined };

/** What came of a wait for a signal (SignalWaitBody): one of `suspended`, `received` and `timed_out` is true. */
export interface SignalWait {
  /** Whether the job now waits: its lease is over, and the run must stop; it runs again on the signal or at `until`. */
  suspended: boolean;
  /** When the wait times out, while the job waits; null otherwise. */
  until: string | null;
  /** Whether the signal came: `data` is its data. */
  received: boolean;
  /** The signal's data once received (which may be null); null otherwise. */
  data: unknown;
  /** Whether the wait's time passed with no signal. */
  timed_out: boolean;
}

/** How long a wait for a signal lasts: `seconds` from the first time its step is reached (the server's clock). */
export interface SignalWaitFor {
  seconds: number;
}

/** What came of a signal sent (SignalSentBody). */
export interface SignalSent {
  /** Whether a job waited for the key and received it; false when it is kept for the first job that waits. */
  delivered: boolean;
  /** The job that received it; null when it is kept. */
  job: number | null;
}

/**
 * What `job.waitForSignal` answers: the signal's data when it came (`received: true`, even when the data is null), or
 * `received: false` when the wait's time passed with none.
 */
export type Signal<T = unknown> = { received: true; data: T } | { received: false; data: null };

/** The jobs a spawn pushed (SpawnedBody). */
export interface Spawned {
  /** Their ids, in the order given. */
  children: number[];
}

/** How a child had ended when its parent joined it (JoinedChildBody). */
export interface JoinedChild {
  id: number;
  /** `completed`, `cancelled`, or `failed` (when the parent's children are its own, and failed ones do not hold it). */
  state: "completed" | "failed" | "cancelled";
  /** What it completed with; null when none. */
  result: unknown;
}

/** What came of a join (JoinedBody). */
export interface Joined {
  /** Whether the job now waits for its children: its lease is over, and the run must stop; `children` is then empty. */
  suspended: boolean;
  /** How each child ended, oldest first, once none holds the job. */
  children: JoinedChild[];
}

/** A step of a handler's run, as recorded (StepBody). */
export interface Step {
  /** Its name within the job; a name used again in one run is numbered (`page#2`). */
  name: string;
  /** What it produced. */
  result: unknown;
  /** The attempt that recorded it. */
  attempt: number;
  recorded_at: string;
}

export interface ClaimedJob {
  job: Job;
  lease: Lease;
}

/** What an enqueue did (EnqueuedBody). */
export interface Enqueued {
  id: number;
  state: string;
  /** Whether a live job already held the unique key, or a debounce or throttle key (and this is that job). */
  existing: boolean;
}

/** Attempts and backoff for one job: any of them, the queue's default for the rest. */
export interface RetryOptions {
  /** Attempts in all, counting the first: 1 runs the job once. */
  maxAttempts?: number;
  /** Seconds after the first failed attempt. */
  initialDelay?: number;
  multiplier?: number;
  /** Seconds no delay is longer than. */
  maxDelay?: number;
  jitter?: number;
}

/** Every option of a push (the fields of `POST /v1/jobs` but `name` and `data`, which are arguments). */
export interface PushOptions {
  queue?: string;
  priority?: number;
  /** Seconds from now until the job is ready. */
  delay?: number;
  runAt?: Time;
  uniqueKey?: string;
  tags?: string[];
  /** Older code passed the server's own fields (`{max_attempts, initial_delay_ms, …}`), which still work. */
  retry?: RetryOptions | Partial<RetryPolicy>;
  /** Seconds a lease lasts without a heartbeat. */
  leaseTimeout?: number;
  /** Seconds one attempt may run, heartbeats or not. */
  timeout?: number;
  weight?: number;
  /** Bedrock's repeat syntax (`FINISHED, +5 MINUTES`) or a cron expression (in `timeZone`). */
  schedule?: string;
  /** The IANA time zone of a cron `schedule` (`Europe/Berlin`); UTC when absent. */
  timeZone?: string;
  /** Jobs that must complete before this one runs. */
  dependsOn?: number[];
  /** The running job creating this one: the child starts when that run finishes. */
  parent?: number;
  /** Whose the children are that this job's runs create. */
  children?: Children;
  /** A W3C `traceparent` the job's worker runs it in. */
  traceParent?: string;
  /** The batch the job joins, which must not have completed. */
  batch?: number;
  /** A burst of pushes with one key makes one job, run `delay` seconds after the latest, at most `maxWait` after the first. */
  debounce?: { key: string; delay: number; maxWait: number };
  /** One job per key per `period` seconds, counting earlier jobs in `states` only when given. */
  throttle?: { key: string; period: number; states?: JobState[] };
  /** Keyed jobs take turns by key, and at most the queue's limit per key run at once. */
  concurrencyKey?: string;
  /** At most this many jobs of the key run at once when this one is next, instead of the queue's limit per key. */
  concurrencyLimit?: number;
}

/** A job to enqueue, as the server takes it (PushRequest): what `push` makes. */
export interface PushBody {
  name: string;
  data?: unknown;
  queue?: string;
  priority?: number;
  delay_ms?: number;
  run_at?: string;
  unique_key?: string;
  tags?: string[];
  retry?: Partial<RetryPolicy>;
  lease_timeout_ms?: number;
  timeout_ms?: number;
  weight?: number;
  schedule?: string;
  time_zone?: string;
  depends_on?: number[];
  parent?: number;
  children?: Children;
  trace_parent?: string;
  batch?: number;
  debounce?: { key: string; delay_ms: number; max_wait_ms: number };
  throttle?: { key: string; period_ms: number; states?: JobState[] };
  concurrency?: { key: string; limit?: number };
}

export function push(name: string, data?: unknown, options?: PushOptions): PushBody;

/** A batch's callback: the job it pushes, and the job it pushed once the batch reached its end (BatchCallbackBody). */
export interface BatchCallback {
  queue: string;
  name: string;
  job?: number | null;
  /** Why it could not be pushed when the batch reached its end, if it could not. */
  error?: string | null;
}

/** A batch and its progress (BatchBody). */
export interface Batch {
  id: number;
  description?: string | null;
  state: "open" | "running" | "completed";
  total: number;
  pending: number;
  completed: number;
  failed: number;
  cancelled: number;
  created_at: string;
  completed_at?: string | null;
  succeeded_at?: string | null;
  on_success?: BatchCallback | null;
  on_complete?: BatchCallback | null;
}

export interface BatchOptions {
  /** Pushed once every job has completed (a job made with `push`). */
  onSuccess?: PushBody | null;
  /** Pushed once every job has completed, failed or been cancelled. */
  onComplete?: PushBody | null;
  /** Hold the batch open until `closeBatch`. */
  open?: boolean;
  description?: string | null;
}

/** Which jobs: the filters of `GET /v1/jobs`. */
export interface JobSelection {
  queue?: string;
  state?: JobState;
  /** A GLOB pattern. */
  name?: string;
  tag?: string;
  failureGroup?: string;
  /** The children of this job. */
  parent?: number;
  batch?: number;
  tracked?: boolean;
}

export interface JobFilter extends JobSelection {
  /** Jobs older than this id: the `next` of the previous page. */
  before?: number;
  limit?: number;
}

export type BulkAction = "cancel" | "delete" | "retry" | "move";

/** The jobs of a filter, or those listed; `queue` is where `move` takes them. */
export type BulkSelection = ({ filter: JobSelection; ids?: never } | { ids: number[]; filter?: never }) & { queue?: string };

/** What a bulk action did (BulkBody). */
export interface BulkOutcome {
  matched: number;
  done: number;
  skipped: number;
}

/** A concurrency key of a queue (KeyStatsBody). */
export interface KeyStats {
  key: string;
  running: number;
  queued: number;
  full: boolean;
  limit?: number | null;
  weight?: number;
}

/** A rate limit: at most `jobs` starts per `per_ms` (RateLimitBody). */
export interface RateLimit {
  jobs: number;
  per_ms: number;
}

/** A queue: whether it is paused, its jobs counted by state, and its limits (QueueStatsBody). */
export interface QueueStats {
  queue: string;
  paused: boolean;
  scheduled: number;
  queued: number;
  waiting: number;
  running: number;
  stalled: number;
  failed: number;
  completed: number;
  cancelled: number;
  /** Of the scheduled and waiting jobs, those their handler suspended (they hold no worker); counted in those too. */
  suspended: number;
  concurrency?: number | null;
  key_concurrency?: number | null;
  rate_limit?: RateLimit | null;
  priority_aging_ms?: number | null;
  top_keys?: KeyStats[];
  waiting_on_keys?: number;
}

/** A failure group (FailureGroupBody). */
export interface FailureGroup {
  group: string;
  count: number;
  first_failed_at: string;
  last_failed_at: string;
}

export type MissedSlots = "skip" | "once" | "all";
export type OverlapPolicy = "allow" | "skip" | "replace";

/** A recurring template, with its job and when it runs (RecurringBody). */
export interface Recurring {
  key: string;
  cron: string;
  time_zone: string;
  /** The job each slot creates, as `push` makes it. */
  job: PushBody;
  missed: MissedSlots;
  overlap: OverlapPolicy;
  paused?: boolean;
  next_run?: string | null;
  last_run?: string | null;
  last_job?: number | null;
}

export interface RecurringOptions {
  /** A cron expression, such as `0 4 * * *`. */
  cron: string;
  /** The job to create at each slot, made with `push` (without timing). */
  job: PushBody;
  /** An IANA time zone such as `Europe/Berlin`; UTC when absent. */
  timeZone?: string;
  missed?: MissedSlots;
  overlap?: OverlapPolicy;
}

/** A worker the queue has seen (WorkerBody). */
export interface WorkerInfo {
  id: string;
  first_seen: string;
  last_seen: string;
  jobs: number[];
  stalled: number[];
  /** `live` (seen within five minutes, or holding a live lease), `stopped` (it said it stops) or `gone`. */
  status: "live" | "stopped" | "gone";
}

/** The caller's token (TokenBody). */
export interface TokenInfo {
  role: "read" | "enqueue" | "work" | "admin";
  name?: string | null;
  queues?: string[] | null;
}

/** The server's health (HealthBody). */
export interface Health {
  status: string;
  version?: string | null;
}

/** One transition in the activity log (ActivityEventBody): an event of `activity` and of `events`. */
export interface ActivityEvent {
  id: number;
  at: string;
  event: EventKind;
  job?: number | null;
  queue?: string | null;
  name?: string | null;
  worker?: string | null;
  detail?: string | null;
}

/** The server's notice that a resumed stream starts past events its log no longer holds: it goes on from `oldest`. */
export interface EventsMissed {
  event: "missed";
  after: number;
  oldest: number;
}

export type StreamEvent = ActivityEvent | EventsMissed;

export interface EventFilter {
  queue?: string;
  /** A GLOB pattern. */
  name?: string;
  job?: number;
  kinds?: EventKind[];
  /** Start after this event's id: every event the log still holds after it, then the new ones. */
  after?: number;
  /** Closes the stream when aborted. */
  signal?: AbortSignal;
}

/** The server's events as they are committed; it resumes after a disconnect from the last event it gave. */
export class EventStream implements AsyncIterable<StreamEvent> {
  private constructor();
  /** The id of the last event given: where the stream resumes. */
  readonly position: number;
  readonly closed: boolean;
  /** Ends the stream: a `for await` over it ends. */
  close(): void;
  [Symbol.asyncIterator](): AsyncIterator<StreamEvent>;
}

export interface ActivityFilter {
  queue?: string;
  job?: number;
  worker?: string;
  since?: Time;
  until?: Time;
  /** Events older than this id: the `next_before` of the previous page. */
  before?: number;
  limit?: number;
}

export interface DequeueOptions {
  queues?: string[];
  /** GLOB patterns. */
  names?: string[];
  limit?: number;
  /** Seconds to wait for a job (a long poll). */
  wait?: number;
  maxWeight?: number;
  /** Seconds these leases last before their first heartbeat, instead of each job's lease timeout. */
  leaseTimeout?: number;
  /** Only jobs of exactly this priority. */
  priority?: number;
  order?: "ordered" | "round_robin";
  /** With `round_robin`, how many jobs each queue gives per turn. */
  weights?: number[];
  /** Ends the request when aborted; the server gives back a job it claimed for it. */
  signal?: AbortSignal;
}

/** A job to finish: its lease, or its lease with its `result` and the `data` that replaces its input. */
export type Finishing = Lease | { lease: Lease; data?: unknown; result?: unknown };

export interface FinishOptions {
  result?: unknown;
  /** Instead of completing, the job goes on in `queue`, after `delay` seconds or once `dependsOn` complete. */
  next?: { queue: string; delay?: number; dependsOn?: number[] };
}

/** HTTPS settings: a CA file (PEM) for a server whose certificate Node does not trust, a client certificate and key. */
export interface TlsFiles {
  caFile?: string | null;
  certFile?: string | null;
  keyFile?: string | null;
}

export interface ClientOptions extends TlsFiles {
  token?: string | null;
  /** Seconds a request may take (30). */
  timeout?: number;
}

export class Client {
  constructor(url?: string, options?: ClientOptions);
  readonly url: string;
  health(): Promise<Health>;
  whoami(): Promise<TokenInfo>;

  enqueue(name: string, data?: unknown, options?: PushOptions): Promise<Enqueued>;
  enqueueBatch(jobs: PushBody[]): Promise<Enqueued[]>;
  get(id: number): Promise<Job>;
  /** The job once it ended (completed, failed or cancelled), or as it stands after `timeout` seconds. */
  wait(id: number, timeout: number): Promise<Job>;
  jobs(filter?: JobFilter): Promise<{ jobs: Job[]; next?: number | null }>;
  cancel(id: number): Promise<void>;
  delete(id: number): Promise<void>;
  requeue(id: number, options?: { runAt?: Time }): Promise<string>;
  reschedule(id: number, runAt: Time): Promise<string>;
  setPriority(id: number, priority: number): Promise<void>;
  move(id: number, queue: string): Promise<void>;
  setData(id: number, data: unknown): Promise<void>;
  changeDependencies(id: number, change: { add?: number[]; remove?: number[] }): Promise<string>;
  changeTags(id: number, change: { add?: string[]; remove?: string[] }): Promise<void>;
  track(id: number): Promise<void>;
  untrack(id: number): Promise<void>;
  bulk(action: BulkAction, selection: BulkSelection): Promise<BulkOutcome>;

  createBatch(jobs?: PushBody[], options?: BatchOptions): Promise<{ id: number; jobs: Enqueued[] }>;
  addToBatch(id: number, jobs: PushBody[]): Promise<Enqueued[]>;
  closeBatch(id: number): Promise<Batch>;
  batch(id: number): Promise<Batch>;
  batches(filter?: { state?: "open" | "running" | "completed" | null; before?: number | null; limit?: number }): Promise<{ batches: Batch[]; next?: number | null }>;

  queues(): Promise<QueueStats[]>;
  pauseQueue(queue: string): Promise<void>;
  resumeQueue(queue: string): Promise<void>;
  peek(queue: string, options?: { limit?: number }): Promise<Job[]>;
  /** null removes the limit. */
  limitQueue(queue: string, concurrency: number | null): Promise<void>;
  limitKeys(queue: string, limit: number | null): Promise<void>;
  weighKey(queue: string, key: string, weight: number | null): Promise<void>;
  /** At most `jobs` starts per `per` seconds; null removes the limit. */
  rateLimitQueue(queue: string, rate: { jobs: number; per: number } | null): Promise<void>;
  /** A priority point per `every` seconds of waiting; null goes back to strict priority. */
  ageQueue(queue: string, every: number | null): Promise<void>;
  failureGroups(): Promise<FailureGroup[]>;
  unfail(group: string, options?: { limit?: number; queue?: string }): Promise<number>;

  setRecurring(key: string, template: RecurringOptions): Promise<Recurring>;
  getRecurring(key: string): Promise<Recurring>;
  listRecurring(): Promise<Recurring[]>;
  pauseRecurring(key: string): Promise<Recurring>;
  resumeRecurring(key: string): Promise<Recurring>;
  runRecurring(key: string): Promise<Enqueued>;
  removeRecurring(key: string): Promise<void>;

  /** Sends `data` (null when left out) to the job that waits for `key`, or keeps it for the first that waits. */
  signal(key: string, data?: unknown): Promise<SignalSent>;

  workers(): Promise<WorkerInfo[]>;
  activity(filter?: ActivityFilter): Promise<{ events: ActivityEvent[]; next_before?: number | null }>;
  events(filter?: EventFilter): Promise<EventStream>;

  dequeue(worker: string, options?: DequeueOptions): Promise<ClaimedJob[]>;
  heartbeat(lease: Lease, progress?: unknown): Promise<string>;
  progress(lease: Lease, progress: unknown): Promise<void>;
  checkpoint(lease: Lease, data: unknown): Promise<string>;
  /** Records a step under the lease, and extends it; a name recorded already keeps its first result, which it answers. */
  recordStep(lease: Lease, name: string, result: unknown): Promise<Step>;
  /** Sleeps as a step under the lease; `suspended: true`: the lease is over, and the job runs again at `until`. */
  sleep(lease: Lease, name: string, wake: SleepFor): Promise<Slept>;
  /** Waits for a signal to `key` as a step under the lease; `suspended: true`: the lease is over, and the job waits. */
  waitForSignal(lease: Lease, name: string, key: string, wait: SignalWaitFor): Promise<SignalWait>;
  /** Pushes `jobs` as the job's children and records their ids as a step under the lease; a replay pushes nothing. */
  spawn(lease: Lease, name: string, jobs: PushBody[]): Promise<Spawned>;
  /** Waits for the job's children as a step under the lease; `suspended: true`: the lease is over, and the job waits. */
  join(lease: Lease, name: string): Promise<Joined>;
  finish(lease: Lease, data?: unknown, options?: FinishOptions): Promise<void>;
  finishMany(finishes: Finishing[]): Promise<(CairnError | null)[]>;
  finishAndTake(
    finishes: Finishing[],
    worker: string,
    options?: Omit<DequeueOptions, "wait" | "signal">,
  ): Promise<{ errors: (CairnError | null)[]; taken: ClaimedJob[]; takeError: CairnError | null }>;
  retry(lease: Lease, error: string, options?: { delay?: number; runAt?: Time }): Promise<string>;
  fail(lease: Lease, group: string, message: string): Promise<void>;
  release(lease: Lease): Promise<void>;
  workerStopped(worker: string): Promise<void>;
}

export class CairnError extends Error {
  kind: string;
  field: string | null;
  /** The HTTP status; null when no answer came, or when the client refused the input itself. */
  status: number | null;
}
export class InvalidInput extends CairnError {}
export class NotFound extends CairnError {}
export class LeaseLost extends CairnError {}
export class InvalidState extends CairnError {}
export class Unauthorized extends CairnError {}
export class Unavailable extends CairnError {}

export class RetryLater extends Error {
  constructor(message: string, options?: { delay?: number | null; cause?: unknown });
  delay: number | null;
}
export class FailJob extends Error {
  constructor(group: string, message: string, options?: { cause?: unknown });
  group: string;
}
/**
 * Thrown by `job.sleep` and `job.sleepUntil` when the job now sleeps, by `job.waitForSignal` when it now waits for its
 * signal, and by `job.join` when it now waits for its children: its lease is over, so let it through. The worker ends
 * the run without a call about the job, which runs again at `until` (or when the signal comes, or once its children
 * have ended).
 */
export class Suspended extends Error {
  constructor(step: string, until: string | null, key?: string | null, options?: { children?: boolean });
  /** The step's name as recorded (`nap`, `nap#2`). */
  step: string;
  /** When the job runs again at the latest; null for a join, which waits as long as its children take. */
  until: string | null;
  /** The key a wait for a signal waits for; null for a sleep or a join. */
  key: string | null;
  /** Whether a join waits for the job's children. */
  children: boolean;
}

/**
 * The job a handler gets: every field of `Job` as the run starts, and the calls about its own run. `progress` is the
 * method that reports progress (the last one reported before this run is `client.get(job.id)`'s `progress`).
 */
export interface RunningJob extends Job {
  readonly lease: Lease;
  /**
   * Aborted when the lease is lost, when the job goes to sleep or waits for a signal or its children, or when the
   * worker stops and gives the job back.
   */
  readonly signal: AbortSignal;
  /** Records progress (any JSON) for queries and the dashboard. */
  progress(value: unknown): Promise<void>;
  /** Extends the lease now, recording `progress` when given; resolves to its new expiry. */
  heartbeat(progress?: unknown): Promise<string>;
  /** Saves the data a retry starts from, and extends the lease; resolves to its new expiry. */
  checkpoint(data: unknown): Promise<string>;
  /**
   * Runs `fn` once for this job: the first time, its result (JSON) is recorded before it is returned; once recorded,
   * every later attempt gets the recorded result back and `fn` does not run. A name used again in one run is numbered
   * (`page`, `page#2`); a name holding `#` fails the job in group `step`. What `fn` throws records nothing and rejects,
   * its message naming the step: `FailJob` and `RetryLater` as they were, `LeaseLost` as it is, anything else as a
   * `RetryLater`. A result the server refuses to record (over the largest job data, a job at its limit of steps) fails
   * the job in group `step`, since a retry would run `fn` again only to be refused again. A replayed result is the
   * JSON recorded (a `Date` comes back a string).
   */
  step<T>(name: string, fn: () => T | Promise<T>): Promise<T>;
  /**
   * Sleeps `seconds` as step `name`, without holding a worker: the first time, the job gives up its lease and this
   * rejects with `Suspended`, which the handler lets through; the job runs again then, replaying its steps, and this
   * resolves. Names are numbered as `step`'s, with the same count.
   */
  sleep(name: string, seconds: number): Promise<void>;
  /** Sleeps until `when` as step `name`; see `sleep`. */
  sleepUntil(name: string, when: Time): Promise<void>;
  /**
   * Waits as step `name` for a signal sent to `key` (`client.signal`), for at most `seconds`, without holding a worker:
   * `{received: true, data}` when it came, `{received: false, data: null}` when the time passed with none. Otherwise
   * the job gives up its lease and this rejects with `Suspended`, which the handler lets through; the job runs again
   * when the signal comes or the time passes, replaying its steps. A bad key or duration fails the job in group `step`.
   */
  waitForSignal<T = unknown>(name: string, key: string, seconds: number): Promise<Signal<T>>;
  /**
   * Pushes `jobs` (made with `push`, at most 1,000) as step `name`: the first time, as this job's children, all or
   * none, started at once, resolving to their ids in order; every later attempt gets the recorded ids back and pushes
   * nothing. A job naming another parent is refused, and a spawn refused for its input fails the job in group `step`.
   * Names are numbered as `step`'s, with the same count.
   */
  spawn(name: string, jobs: PushBody[]): Promise<number[]>;
  /**
   * Waits as step `name` for this job's children, without holding a worker: once none holds the job, resolves to how
   * each ended, oldest first. Until then the job gives up its lease and this rejects with `Suspended`, which the
   * handler lets through; the job runs again once they have ended, replaying its steps. A failed child holds the join
   * until it is requeued or cancelled (then its state is `cancelled`). Names are numbered as `step`'s.
   */
  join(name: string): Promise<JoinedChild[]>;
  /** The result when the handler returns undefined or null. */
  setResult(value: unknown): void;
  /** Replaces the job's data when the handler returns; null keeps it. */
  setData(value: unknown): void;
}

/** What a handler gets besides the job, as older handlers read it. */
export interface JobContext {
  lease: Lease;
  /**
   * Aborted when the lease is lost, when the job goes to sleep or waits for a signal or its children, or when the
   * worker stops and gives the job back.
   */
  signal: AbortSignal;
  /** As `job.setData`. */
  setData(data: unknown): void;
}

/** What a handler returns becomes the job's result, kept apart from its data; undefined or null: `setResult`'s, or none. */
export type Handler = (job: RunningJob, context: JobContext) => unknown | Promise<unknown>;

export interface WorkerReport {
  finished: number;
  retried: number;
  failed: number;
  lost: number;
  released: number;
  /**
   * Runs that ended with their job asleep or waiting for a signal or its children (`job.sleep`, `job.waitForSignal`,
   * `job.join`): no call about them, and the job runs again later.
   */
  suspended: number;
}

export interface WorkerOptions extends TlsFiles {
  token?: string | null;
  queues?: string[];
  maxConcurrency?: number;
  /** Seconds a request for jobs waits for one (a long poll). */
  wait?: number;
  /** Seconds running jobs get to finish once the worker stops. */
  shutdownDeadline?: number;
  logger?: { warn(message: string): void; error(message: string): void };
}

export class Worker {
  constructor(url: string, id: string, options?: WorkerOptions);
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
