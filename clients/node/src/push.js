// `push`: a job to enqueue, from the options a Node caller writes to the body `POST /v1/jobs` takes. The tables here
// are the one statement of which option fills which field; `test/parity.test.js` holds them to the server's OpenAPI
// document both ways.

import { as, build, legacy, listField, nested, part, seconds, timeField } from "./options.js";

/** Attempts and backoff: any of them, the queue's default for the rest. Durations are seconds. */
export const RETRY_OPTIONS = {
  maxAttempts: as("max_attempts"),
  initialDelay: seconds("initial_delay_ms"),
  multiplier: as("multiplier"),
  maxDelay: seconds("max_delay_ms"),
  jitter: as("jitter"),
  // The request's own names, which `retry` took as they are before it took options of its own.
  max_attempts: legacy(as("max_attempts")),
  initial_delay_ms: legacy(as("initial_delay_ms")),
  max_delay_ms: legacy(as("max_delay_ms")),
};

const DEBOUNCE_OPTIONS = { key: as("key"), delay: seconds("delay_ms"), maxWait: seconds("max_wait_ms") };
const THROTTLE_OPTIONS = { key: as("key"), period: seconds("period_ms"), states: listField("states") };

/** Every option of a push, and the request field each fills. */
export const PUSH_OPTIONS = {
  queue: as("queue"),
  priority: as("priority"),
  delay: seconds("delay_ms"),
  runAt: timeField("run_at"),
  uniqueKey: as("unique_key"),
  tags: listField("tags"),
  retry: nested("retry", RETRY_OPTIONS, "retry option"),
  leaseTimeout: seconds("lease_timeout_ms"),
  timeout: seconds("timeout_ms"),
  weight: as("weight"),
  schedule: as("schedule"),
  timeZone: as("time_zone"),
  dependsOn: listField("depends_on"),
  parent: as("parent"),
  children: as("children"),
  traceParent: as("trace_parent"),
  batch: as("batch"),
  debounce: nested("debounce", DEBOUNCE_OPTIONS, "debounce option"),
  throttle: nested("throttle", THROTTLE_OPTIONS, "throttle option"),
  concurrencyKey: part("concurrency", "key"),
  concurrencyLimit: part("concurrency", "limit"),
};

/** The fields `push` takes as arguments rather than options. */
export const PUSH_ARGUMENTS = { name: "the first argument", data: "the second argument" };

// Pointers for options that belong elsewhere: a retry setting given at the top, a field that is an argument.
const HINTS = {
  ...Object.fromEntries(
    Object.keys(RETRY_OPTIONS)
      .filter((option) => !RETRY_OPTIONS[option].legacy)
      .map((option) => [option, `it belongs in retry: { ${option} }`]),
  ),
  ...Object.fromEntries(Object.entries(PUSH_ARGUMENTS).map(([field, where]) => [field, `the ${field} is ${where} of push and enqueue, before the options`])),
  concurrency: "did you mean concurrencyKey and concurrencyLimit?",
};

/**
 * A job to enqueue, as `enqueue`, `enqueueBatch`, batches and recurring templates take it: the request body of
 * `POST /v1/jobs`. Durations are seconds; times RFC 3339 strings or `Date`s. An option it does not know is refused,
 * naming it, before anything is sent.
 */
export function push(name, data, options = {}) {
  const body = { name };
  if (data !== undefined && data !== null) body.data = data;
  return Object.assign(body, build(PUSH_OPTIONS, options, "push option", "", HINTS));
}
