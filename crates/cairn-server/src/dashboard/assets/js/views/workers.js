// Workers: every worker the server has seen, when, what it holds now, which of its jobs stalled, and (where the
// server keeps statistics) how busy it was over the last hour.

import { get } from "../api.js";
import { h, fill, table, redraw } from "../dom.js";
import { percent, timeElement, count } from "../format.js";

/**
 * The events that change the workers' list: one came, stopped or was lost, or took or let go of a job (a job cancelled
 * or lost on its worker included).
 */
export const WORKER_EVENTS = [
  "worker_started", "worker_stopped", "worker_lost",
  "started", "finished", "retried", "failed", "released", "heartbeat_lost", "cancelled",
];
/** A running job deleted, from servers that log deletes apart from cancels: older ones refuse the kind. */
export const WORKER_EVENTS_LATER = ["deleted"];

export function mount(root) {
  const list = h("div", { id: "worker-list" });
  const note = h("p", { class: "hint" });
  fill(root, h("h1", {}, "Workers"), list, note);
  let statsMissing = false;
  return {
    follow: { kinds: WORKER_EVENTS.join(","), later: WORKER_EVENTS_LATER },
    async refresh() {
      const body = await get("/v1/workers");
      let usage = null;
      if (!statsMissing) {
        try {
          usage = await get("/v1/stats/workers", { period: "hour" });
        } catch (error) {
          if (!error.isMissingRoute) throw error;
          // An older server: the list works without the utilization column; say so once.
          statsMissing = true;
          note.textContent = "Utilization: statistics not available on this server.";
        }
      }
      redraw(list, { body, usage }, () => workerTable(body.workers, usage));
    },
  };
}

/** What each worker status means. */
const STATUS = {
  live: "seen within five minutes, or holding a lease that has not run out",
  stopped: "it said it stops: a worker shut down, or a one-off cairn dequeue",
  gone: "silent for five minutes, holding no live lease",
};

/** Workers and their jobs; with `usage` (`GET /v1/stats/workers`), how busy each was. */
export function workerTable(workers, usage = null) {
  if (workers.length === 0) {
    return h("p", { class: "empty" }, "No workers seen yet. They show here once they take a job or heartbeat.");
  }
  const busy = new Map((usage ? usage.workers : []).map((w) => [w.worker, w]));
  const columns = [
    { label: "Worker", class: "name" },
    { label: "Status" },
    { label: "Last seen" },
    { label: "Holds" },
    { label: "Stalled" },
    ...(usage ? [{ label: "Busy (last hour)", class: "num" }, { label: "Attempts", class: "num" }] : [{ label: "First seen" }]),
  ];
  const rows = workers.map((w) => {
    const stats = busy.get(w.id);
    return {
      attributes: { "data-worker": w.id, "data-status": w.status },
      cells: [
        w.id,
        h("span", { class: w.status === "live" ? null : "muted", title: STATUS[w.status] ?? "" }, w.status),
        timeElement(w.last_seen),
        jobLinks(w.jobs, "none"),
        w.stalled.length ? h("span", { class: "warn" }, jobLinks(w.stalled)) : h("span", { class: "muted" }, "none"),
        ...(usage ? [percent(stats ? stats.utilization : null), count(stats ? stats.attempts : 0)] : [timeElement(w.first_seen)]),
      ],
    };
  });
  return table(columns, rows, { class: "stack workers" });
}

function jobLinks(ids, none = "") {
  if (ids.length === 0) return h("span", { class: "muted" }, none);
  return ids.map((id, i) => [i ? ", " : "", h("a", { href: `#/jobs/${id}` }, `#${id}`)]);
}
