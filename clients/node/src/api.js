// What of the server's HTTP API this client covers, in one place: the method that makes each operation of the OpenAPI
// document (by its operationId), and what the client leaves out, each with why. `test/parity.test.js` holds this to
// a real server's `GET /v1/openapi.json` both ways: an operation or a push field the server has and the client neither
// reaches nor lists here fails it, and so does an entry here the server does not have.

import {
  ACTIVITY_FILTER,
  BATCH_FILTER,
  BATCH_OPTIONS,
  BULK_OPTIONS,
  CHANGE_OPTIONS,
  DEQUEUE_OPTIONS,
  EVENT_OPTIONS,
  FINISH_OPTIONS,
  JOB_FILTER,
  PEEK_OPTIONS,
  RATE_OPTIONS,
  RECURRING_OPTIONS,
  REQUEUE_OPTIONS,
  RETRY_CALL_OPTIONS,
  SIGNAL_WAIT_OPTIONS,
  SLEEP_OPTIONS,
  UNFAIL_OPTIONS,
} from "./client.js";
import { PUSH_OPTIONS } from "./push.js";

/** Each operation's `Client` method. */
export const OPERATIONS = {
  health: "health",
  token: "whoami",
  enqueue: "enqueue",
  enqueue_batch: "enqueueBatch",
  get_job: "get", // and `wait`, with `wait_ms`
  list_jobs: "jobs",
  cancel: "cancel",
  delete: "delete",
  requeue: "requeue",
  reschedule: "reschedule",
  set_priority: "setPriority",
  move_job: "move",
  set_data: "setData",
  change_dependencies: "changeDependencies",
  change_tags: "changeTags",
  track: "track",
  untrack: "untrack",
  bulk: "bulk",
  create_batch: "createBatch",
  add_to_batch: "addToBatch",
  close_batch: "closeBatch",
  get_batch: "batch",
  list_batches: "batches",
  list_queues: "queues",
  pause: "pauseQueue",
  resume: "resumeQueue",
  peek: "peek",
  set_concurrency: "limitQueue",
  set_key_concurrency: "limitKeys",
  set_key_weight: "weighKey",
  set_rate: "rateLimitQueue",
  set_aging: "ageQueue",
  list_failures: "failureGroups",
  unfail: "unfail",
  set_recurring: "setRecurring",
  get_recurring: "getRecurring",
  list_recurring: "listRecurring",
  pause_recurring: "pauseRecurring",
  resume_recurring: "resumeRecurring",
  run_recurring: "runRecurring",
  remove_recurring: "removeRecurring",
  list_workers: "workers",
  activity: "activity",
  events: "events",
  dequeue: "dequeue",
  heartbeat: "heartbeat",
  update: "progress",
  checkpoint: "checkpoint",
  record_step: "recordStep", // and `job.step` in a handler
  sleep: "sleep", // and `job.sleep`, `job.sleepUntil` in a handler
  wait_for_signal: "waitForSignal", // and `job.waitForSignal` in a handler
  send_signal: "signal",
  spawn: "spawn", // and `job.spawn` in a handler
  join: "join", // and `job.join` in a handler
  finish: "finish",
  finish_many: "finishMany", // and `finishAndTake`, with `take`
  retry: "retry",
  fail: "fail",
  release: "release",
  stop_worker: "workerStopped",
};

/**
 * The request bodies the client builds from options: the table of options (`src/options.js` says how to read one),
 * the body's schema, and its fields the call takes as arguments rather than options. A nested table (`retry`,
 * `debounce`) is held to the schema of its field.
 */
export const REQUESTS = [
  { schema: "PushRequest", options: PUSH_OPTIONS, arguments: ["name", "data"] },
  { schema: "CreateBatchRequest", options: BATCH_OPTIONS, arguments: ["jobs"] },
  { schema: "RecurringRequest", options: RECURRING_OPTIONS, arguments: [] },
  { schema: "DequeueRequest", options: DEQUEUE_OPTIONS, arguments: ["worker"] },
  { schema: "FinishRequest", options: FINISH_OPTIONS, arguments: ["token", "data"] },
  { schema: "RetryRequest", options: RETRY_CALL_OPTIONS, arguments: ["token", "error"] },
  { schema: "SleepRequest", options: SLEEP_OPTIONS, arguments: ["token", "name"] },
  { schema: "SignalWaitRequest", options: SIGNAL_WAIT_OPTIONS, arguments: ["token", "name", "key"] },
  { schema: "SignalRequest", options: {}, arguments: ["key", "data"] },
  { schema: "SpawnRequest", options: {}, arguments: ["token", "name", "jobs"] },
  { schema: "JoinRequest", options: {}, arguments: ["token", "name"] },
  { schema: "BulkRequest", options: BULK_OPTIONS, arguments: ["action"] },
  { schema: "DependenciesRequest", options: CHANGE_OPTIONS, arguments: [] },
  { schema: "TagsRequest", options: CHANGE_OPTIONS, arguments: [] },
  { schema: "RequeueRequest", options: REQUEUE_OPTIONS, arguments: [] },
  { schema: "UnfailRequest", options: UNFAIL_OPTIONS, arguments: [] },
  { schema: "RateLimitBody", options: RATE_OPTIONS, arguments: [] },
];

/** The query strings the client builds from options, by operation (the path's own parameters are arguments). */
export const QUERIES = [
  { operation: "list_jobs", options: JOB_FILTER },
  { operation: "list_batches", options: BATCH_FILTER },
  { operation: "activity", options: ACTIVITY_FILTER },
  { operation: "events", options: EVENT_OPTIONS },
  { operation: "peek", options: PEEK_OPTIONS },
];

/** What the client leaves out of the server's API, and why. */
export const LEFT_OUT = {
  operations: {
    metrics: "Prometheus's text format, for a scraper rather than a program",
    sql: "read-only SQL against the database's own tables, whose shape is the server's to change: `cairn sql` and the dashboard",
    stats: "the dashboard's graphs and `cairn stats`, shaped for them",
    worker_stats: "the dashboard's utilization graphs and `cairn stats`, shaped for them",
    list_config: "the server's run-time options are its operator's: `cairn config` and the dashboard",
    get_config: "the server's run-time options are its operator's: `cairn config` and the dashboard",
    set_config: "the server's run-time options are its operator's: `cairn config` and the dashboard",
    unset_config: "the server's run-time options are its operator's: `cairn config` and the dashboard",
  },
  // Fields of the requests above that no option fills, by schema. Every field of `POST /v1/jobs` (PushRequest) is an
  // option of `push`.
  fields: {
    FinishRequest: { usage: "what the attempt's process used, which `cairn work` measures; a Node handler runs in the worker's process" },
    RetryRequest: { usage: "what the attempt's process used, which `cairn work` measures; a Node handler runs in the worker's process" },
  },
};
