// The client against the server's own description of its API (`GET /v1/openapi.json` of a real `cairn serve`), both
// ways: every operation has a method, every field of a request the client builds has an option, every field of an
// answer has its place in the type declarations, unless `src/api.js` lists it as left out, with why; and nothing the
// client sends or declares is missing from the server. The declarations are also held to the runtime: the exported
// names, `Client`'s methods, the handler's job's methods and the option tables.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, test } from "node:test";

import { LEFT_OUT, OPERATIONS, QUERIES, REQUESTS } from "../src/api.js";
import {
  ACTIVITY_FILTER,
  BATCH_OPTIONS,
  BULK_OPTIONS,
  CLIENT_OPTIONS,
  DEQUEUE_OPTIONS,
  EVENT_OPTIONS,
  FINISH_OPTIONS,
  JOB_FILTER,
  RECURRING_OPTIONS,
  SIGNAL_WAIT_OPTIONS,
} from "../src/client.js";
import { RunningJob } from "../src/job.js";
import { offered } from "../src/options.js";
import { PUSH_OPTIONS, RETRY_OPTIONS } from "../src/push.js";
import * as client from "../src/index.js";
import { WORKER_OPTIONS } from "../src/worker.js";
import { startServer } from "./server.js";

const declarations = readFileSync(new URL("../src/index.d.ts", import.meta.url), "utf8");

// Each interface of the declarations that stands for a body of the server's answers (or, PushBody, of a request).
const ANSWERS = {
  Job: "JobBody",
  Attempt: "AttemptBody",
  Step: "StepBody",
  Slept: "SleptBody",
  SignalWait: "SignalWaitBody",
  SignalSent: "SignalSentBody",
  Spawned: "SpawnedBody",
  Joined: "JoinedBody",
  JoinedChild: "JoinedChildBody",
  Usage: "UsageBody",
  Lease: "LeaseBody",
  RetryPolicy: "RetryPolicyBody",
  Enqueued: "EnqueuedBody",
  PushBody: "PushRequest",
  Batch: "BatchBody",
  BatchCallback: "BatchCallbackBody",
  QueueStats: "QueueStatsBody",
  KeyStats: "KeyStatsBody",
  RateLimit: "RateLimitBody",
  FailureGroup: "FailureGroupBody",
  Recurring: "RecurringBody",
  WorkerInfo: "WorkerBody",
  TokenInfo: "TokenBody",
  Health: "HealthBody",
  ActivityEvent: "ActivityEventBody",
};

// Each interface of the declarations that stands for a table of options.
const OPTION_TYPES = {
  PushOptions: PUSH_OPTIONS,
  RetryOptions: RETRY_OPTIONS,
  ClientOptions: CLIENT_OPTIONS,
  WorkerOptions: WORKER_OPTIONS,
  DequeueOptions: DEQUEUE_OPTIONS,
  BatchOptions: BATCH_OPTIONS,
  FinishOptions: FINISH_OPTIONS,
  RecurringOptions: RECURRING_OPTIONS,
  JobFilter: JOB_FILTER,
  JobSelection: BULK_OPTIONS.filter.options,
  EventFilter: EVENT_OPTIONS,
  ActivityFilter: ACTIVITY_FILTER,
  SignalWaitFor: SIGNAL_WAIT_OPTIONS,
};

let doc;
before(async () => {
  const server = await startServer();
  try {
    doc = await (await fetch(`${server.url}/v1/openapi.json`)).json();
  } finally {
    await server.stop();
  }
});

const schemas = () => doc.components.schemas;

/** The properties of a schema, by name. */
function properties(name) {
  const schema = schemas()[name];
  assert.ok(schema, `the server's document has no schema ${name}`);
  return schema.properties ?? {};
}

/** The schema a property refers to (`$ref`, or the one of `oneOf: [null, $ref]`), by name. */
function referred(property) {
  const ref = property.$ref ?? property.oneOf?.find((s) => s.$ref)?.$ref;
  return ref?.split("/").at(-1) ?? null;
}

/**
 * The members of `export <kind> <name> … { … }` in the declarations: its properties and its methods, with those of the
 * interfaces it extends.
 */
function declared(kind, name) {
  const lines = declarations.split("\n");
  const start = lines.findIndex((line) => new RegExp(`^export (declare )?${kind} ${name}\\b`).test(line));
  assert.ok(start >= 0, `src/index.d.ts declares no ${kind} ${name}`);
  const members = { properties: [], methods: [] };
  const base = lines[start].match(/ extends (\w+)/)?.[1];
  if (base && base !== "Job") {
    const inherited = declared("interface", base);
    members.properties.push(...inherited.properties);
    members.methods.push(...inherited.methods);
  }
  for (const line of lines.slice(start + 1)) {
    if (line === "}") break;
    const property = line.match(/^ {2}(?:readonly )?(\w+)\??: /);
    const method = line.match(/^ {2}(\w+)(?:<[^>]*>)?\(/);
    if (property) members.properties.push(property[1]);
    else if (method && method[1] !== "constructor") members.methods.push(method[1]);
  }
  return members;
}

/**
 * What is wrong between a table of options and the schema of the body it builds: a property no option fills (and
 * that is neither an argument nor listed as left out), and a field an option fills that the schema lacks.
 */
function requestProblems(table, schema, args = [], leftOut = {}) {
  const problems = [];
  const wanted = properties(schema);
  const filled = new Map();
  for (const [option, spec] of Object.entries(table)) {
    if (spec.local) continue;
    if (!Object.hasOwn(wanted, spec.field)) {
      problems.push(`${option}: fills ${spec.field}, which ${schema} does not have`);
      continue;
    }
    filled.set(spec.field, [...(filled.get(spec.field) ?? []), spec]);
    if (spec.options) problems.push(...requestProblems(spec.options, referred(wanted[spec.field]), [], LEFT_OUT.fields[referred(wanted[spec.field])]));
  }
  for (const [field, specs] of filled) {
    const parts = specs.filter((spec) => spec.part).map((spec) => spec.part);
    if (!parts.length) continue;
    const inner = referred(wanted[field]);
    for (const member of Object.keys(properties(inner))) {
      if (!parts.includes(member)) problems.push(`${inner}.${member}: no option fills it`);
    }
    for (const member of parts) if (!Object.hasOwn(properties(inner), member)) problems.push(`${field}.${member}: ${inner} has no such field`);
  }
  for (const field of Object.keys(wanted)) {
    if (!filled.has(field) && !args.includes(field) && !Object.hasOwn(leftOut ?? {}, field)) {
      problems.push(`${schema}.${field}: the server takes it, and no option of the client fills it (nor does src/api.js list it as left out)`);
    }
  }
  return problems;
}

test("every field of a push, a retry policy and each request the client builds has its option, and no option fills a field the server lacks", () => {
  const problems = REQUESTS.flatMap(({ options, schema, arguments: args }) => requestProblems(options, schema, args, LEFT_OUT.fields[schema]));
  assert.deepEqual(problems, []);
  for (const [schema, fields] of Object.entries(LEFT_OUT.fields)) {
    for (const field of Object.keys(fields)) assert.ok(Object.hasOwn(properties(schema), field), `src/api.js leaves out ${schema}.${field}, which the server does not have`);
  }
});

test("the parity check fails when an option is missing or fills a field the server lacks", () => {
  const { timeZone: _gone, ...withoutTimeZone } = PUSH_OPTIONS;
  assert.deepEqual(requestProblems(withoutTimeZone, "PushRequest", ["name", "data"]), [
    "PushRequest.time_zone: the server takes it, and no option of the client fills it (nor does src/api.js list it as left out)",
  ]);
  const { maxDelay: _also, ...withoutMaxDelay } = RETRY_OPTIONS;
  const { max_delay_ms: _legacy, ...retry } = withoutMaxDelay;
  const shortRetry = { ...PUSH_OPTIONS, retry: { ...PUSH_OPTIONS.retry, options: retry } };
  const retrySchema = referred(properties("PushRequest").retry);
  assert.deepEqual(requestProblems(shortRetry, "PushRequest", ["name", "data"]), [
    `${retrySchema}.max_delay_ms: the server takes it, and no option of the client fills it (nor does src/api.js list it as left out)`,
  ]);
  const extra = { ...PUSH_OPTIONS, colour: { field: "colour" } };
  assert.deepEqual(requestProblems(extra, "PushRequest", ["name", "data"]), ["colour: fills colour, which PushRequest does not have"]);
});

test("every query parameter of the calls with filters has its option", () => {
  const problems = [];
  for (const { operation, options } of QUERIES) {
    const op = Object.values(doc.paths).flatMap((path) => Object.values(path)).find((o) => o?.operationId === operation);
    assert.ok(op, `the server has no operation ${operation}`);
    const params = (op.parameters ?? []).filter((p) => p.in === "query").map((p) => p.name);
    const fields = Object.values(options).filter((spec) => !spec.local).map((spec) => spec.field);
    for (const param of params) if (!fields.includes(param)) problems.push(`${operation}: no option fills ?${param}`);
    for (const field of fields) if (!params.includes(field)) problems.push(`${operation}: the server has no ?${field}`);
  }
  assert.deepEqual(problems, []);
});

test("every operation of the server has a method of Client, or is listed as left out with why", () => {
  const operations = Object.values(doc.paths)
    .flatMap((path) => Object.values(path))
    .map((op) => op?.operationId)
    .filter(Boolean);
  const problems = [];
  for (const operation of operations) {
    const method = OPERATIONS[operation];
    const why = LEFT_OUT.operations[operation];
    if (method && why) problems.push(`${operation}: both made by ${method} and left out`);
    else if (method === undefined && why === undefined) problems.push(`${operation}: no method of Client makes it (nor does src/api.js list it as left out)`);
    else if (method && typeof client.Client.prototype[method] !== "function") problems.push(`${operation}: Client has no method ${method}`);
  }
  for (const operation of [...Object.keys(OPERATIONS), ...Object.keys(LEFT_OUT.operations)]) {
    if (!operations.includes(operation)) problems.push(`${operation}: src/api.js lists it, and the server has no such operation`);
  }
  assert.deepEqual(problems, []);
});

test("each answer's interface in the declarations has every field of the server's body, and no other", () => {
  const problems = [];
  for (const [type, schema] of Object.entries(ANSWERS)) {
    const fields = declared("interface", type).properties;
    const wanted = Object.keys(properties(schema));
    for (const field of wanted) if (!fields.includes(field)) problems.push(`${type}.${field}: ${schema} has it, the declarations do not`);
    for (const field of fields) if (!wanted.includes(field)) problems.push(`${type}.${field}: declared, and ${schema} has no such field`);
  }
  assert.deepEqual(problems, []);
});

test("the declarations match the runtime: exports, Client's methods, the handler's job, the option tables", () => {
  const exported = [...declarations.matchAll(/^export (?:declare )?(?:class|function|const) (\w+)/gm)].map((m) => m[1]);
  assert.deepEqual(exported.sort(), Object.keys(client).sort(), "the names src/index.d.ts declares are those src/index.js exports");

  const methods = Object.getOwnPropertyNames(client.Client.prototype).filter((m) => m !== "constructor");
  assert.deepEqual(declared("class", "Client").methods.sort(), methods.sort(), "Client's methods");

  const jobMethods = Object.getOwnPropertyNames(RunningJob.prototype).filter((m) => m !== "constructor");
  assert.deepEqual(declared("interface", "RunningJob").methods.sort(), jobMethods.sort(), "the handler's job's methods");

  for (const [type, table] of Object.entries(OPTION_TYPES)) {
    assert.deepEqual(declared("interface", type).properties.sort(), offered(table).sort(), `${type}: the options of the declarations are those the client takes`);
  }
});
