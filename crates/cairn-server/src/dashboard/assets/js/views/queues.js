// The queues page, the dashboard's home: every queue with its jobs counted by state, its limits and a pause or
// resume button; totals across queues; the concurrency keys of the queues that have some; and, below, the failure
// groups and workers at a glance.

import { get, post, segment } from "../api.js";
import { h, fill, table, redraw } from "../dom.js";
import { count, duration } from "../format.js";
import { FAILURE_EVENTS, FAILURE_EVENTS_LATER, failureTable } from "./failures.js";
import { WORKER_EVENTS, WORKER_EVENTS_LATER, workerTable } from "./workers.js";

/** The counts of `GET /v1/queues`, in the order a job lives through them. */
export const COUNTED = ["scheduled", "waiting", "queued", "running", "stalled", "failed", "completed", "cancelled"];
/** Of the scheduled and waiting jobs, those their handler suspended: shown beside the states, not added to them. */
const SUSPENDED = "suspended";
/**
 * The events of a queue rather than a job that change its row: paused, resumed or limited (`queue_changed`), its
 * scheduled jobs due (`promoted`). Every job's event changes the counts too.
 */
export const QUEUE_EVENTS = ["queue_changed", "promoted"];
/** How many concurrency keys `GET /v1/queues` lists per queue at most. */
const TOP_KEYS = 10;

export function mount(root, _params, ctx) {
  const totals = h("div", { class: "tiles", id: "totals" });
  const queues = h("div", { id: "queue-list" });
  const keys = h("div", { id: "key-list" });
  const failures = h("div", { id: "failure-list" });
  const workers = h("div", { id: "worker-list" });
  fill(root,
    h("h1", {}, "Queues"),
    totals,
    queues,
    keys,
    h("div", { class: "columns" },
      h("section", { class: "panel" }, h("h2", {}, h("a", { href: "#/failures" }, "Failure groups")), failures),
      h("section", { class: "panel" }, h("h2", {}, h("a", { href: "#/workers" }, "Workers")), workers)));
  return {
    // Every event: each job's changes the counts, a queue's its settings. A refresh for events asks only for the
    // parts they change; an event of a kind this page does not know, without a job, changes none.
    async refresh(events) {
      const changes = (kinds) => events === null || events.some((e) => kinds.includes(e.event));
      const ask = (wanted, path) => (wanted ? get(path) : null);
      const [q, f, w] = await Promise.all([
        ask(changes(QUEUE_EVENTS) || events.some((e) => e.job !== null && e.job !== undefined), "/v1/queues"),
        ask(changes([...FAILURE_EVENTS, ...FAILURE_EVENTS_LATER]), "/v1/failures"),
        ask(changes([...WORKER_EVENTS, ...WORKER_EVENTS_LATER]), "/v1/workers"),
      ]);
      if (q) {
        redraw(totals, q, () => totalTiles(q.queues));
        redraw(queues, q, () => queueTable(q.queues, ctx));
        redraw(keys, q, () => keyPanels(q.queues));
      }
      if (f) redraw(failures, f, () => failureTable(f.groups, ctx));
      if (w) redraw(workers, w, () => workerTable(w.workers));
    },
  };
}

/** `#/jobs` filtered by queue and state; stalled jobs are running ones. */
function jobsLink(queue, state) {
  const query = new URLSearchParams();
  if (queue) query.set("queue", queue);
  query.set("state", state === "stalled" ? "running" : state);
  return `#/jobs?${query}`;
}

function totalTiles(queues) {
  const tiles = COUNTED.map((state) => {
    const total = queues.reduce((sum, q) => sum + q[state], 0);
    return h("a", { class: `tile state-${state}${total === 0 ? " zero" : ""}`, href: jobsLink(null, state), "data-total": state },
      h("span", { class: "tile-value" }, count(total)), h("span", { class: "tile-label" }, state));
  });
  // A server older than suspended jobs does not count them.
  if (queues.some((q) => q[SUSPENDED] !== undefined)) {
    const total = queues.reduce((sum, q) => sum + (q[SUSPENDED] ?? 0), 0);
    tiles.push(h("span", { class: `tile state-${SUSPENDED}${total === 0 ? " zero" : ""}`, "data-total": SUSPENDED,
      title: "Of the scheduled and waiting jobs, those their handler suspended: they hold no worker" },
    h("span", { class: "tile-value" }, count(total)), h("span", { class: "tile-label" }, "of them suspended")));
  }
  return tiles;
}

function queueTable(queues, ctx) {
  if (queues.length === 0) {
    return h("p", { class: "empty" }, "No queues yet. Push a job (", h("code", {}, "cairn push NAME"), ") and its queue shows here.");
  }
  const columns = [
    { label: "Queue", class: "name" },
    ...COUNTED.map((state) => ({ label: state, class: "num" })),
    { label: SUSPENDED, class: "num" },
    { label: "Limits" },
    { label: "", class: "actions" },
  ];
  const rows = queues.map((q) => ({
    attributes: { "data-queue": q.queue, "data-paused": String(q.paused), class: q.paused ? "paused" : null },
    cells: [
      [h("a", { href: `#/jobs?queue=${encodeURIComponent(q.queue)}` }, q.queue), q.paused ? h("span", { class: "badge paused" }, "paused") : null],
      ...COUNTED.map((state) => h("a", { class: q[state] === 0 ? "zero" : `count state-${state}`, href: jobsLink(q.queue, state) }, count(q[state]))),
      h("span", { class: q[SUSPENDED] ? `count state-${SUSPENDED}` : "zero", "data-suspended": q[SUSPENDED] ?? 0 }, count(q[SUSPENDED] ?? 0)),
      limits(q),
      pauseButton(q, ctx),
    ],
  }));
  return table(columns, rows, { class: "stack queues" });
}

function limits(q) {
  const parts = [];
  if (q.concurrency !== null) parts.push(`${q.concurrency} at once`);
  if (q.key_concurrency) parts.push(`${q.key_concurrency} per key`);
  if (q.rate_limit) parts.push(`${q.rate_limit.jobs} per ${duration(q.rate_limit.per_ms)}`);
  if (q.priority_aging_ms) parts.push(`aging +1 per ${duration(q.priority_aging_ms)}`);
  return parts.length ? parts.join(", ") : h("span", { class: "muted" }, "none");
}

/** A panel per queue whose jobs have concurrency keys: its top keys, and the ready jobs that wait on a full one. */
function keyPanels(queues) {
  const keyed = queues.filter((q) => q.top_keys.length > 0);
  if (keyed.length === 0) return null;
  return h("div", { class: "columns" }, keyed.map((q) =>
    h("section", { class: "panel keys", "data-keys-queue": q.queue },
      h("h2", {}, "Concurrency keys · ", h("a", { href: `#/jobs?queue=${encodeURIComponent(q.queue)}` }, q.queue)),
      keyTable(q.top_keys),
      h("p", { class: q.waiting_on_keys > 0 ? "hint warn" : "hint", "data-waiting-on-keys": q.waiting_on_keys },
        `${count(q.waiting_on_keys)} ready ${q.waiting_on_keys === 1 ? "job waits" : "jobs wait"} on a key at its limit`,
        q.top_keys.length >= TOP_KEYS ? ` (the ${TOP_KEYS} keys with the most running, then ready, jobs shown)` : null))));
}

function keyTable(keys) {
  const columns = [
    { label: "Key", class: "name" },
    { label: "Running", class: "num" },
    { label: "Queued", class: "num" },
    { label: "Limit", class: "num" },
    { label: "Full" },
    { label: "Weight", class: "num" },
  ];
  const rows = keys.map((k) => ({
    attributes: { "data-key": k.key, "data-full": String(k.full) },
    cells: [
      h("code", {}, k.key),
      count(k.running),
      count(k.queued),
      k.limit === null ? h("span", { class: "muted" }, "none") : count(k.limit),
      k.full ? h("span", { class: "badge full" }, "full") : h("span", { class: "muted" }, "no"),
      count(k.weight ?? 1),
    ],
  }));
  return table(columns, rows, { class: "stack keys" });
}

function pauseButton(q, ctx) {
  const action = q.paused ? "resume" : "pause";
  return h("button", {
    type: "button",
    class: q.paused ? "primary" : "",
    "data-action": action,
    "data-queue": q.queue,
    onclick: (event) => ctx.act(
      () => post(`/v1/queues/${segment(q.queue)}/${action}`),
      `${q.queue}: ${q.paused ? "resumed" : "paused"}`,
      event.currentTarget),
  }, q.paused ? "Resume" : "Pause");
}
