// One batch: its state and counts with a bar of its progress, its times, its callbacks (and the jobs they made,
// once made), a page of its jobs; closed, its remaining jobs cancelled or its failed ones retried from here. The
// cancel and the retry are each one `POST /v1/jobs/bulk` over the batch's jobs, as the jobs list's bulk actions.

import { get, post, segment } from "../api.js";
import { h, fill, table, redraw, errorBox, badge, confirmDialog } from "../dom.js";
import { count, timeElement } from "../format.js";
import { BATCH_EVENTS, BATCH_EVENTS_LATER, progress } from "./batches.js";
import { bulkOutcome, jobs } from "./jobs.js";

const PAGE = 50;
/** The counts shown as tiles, with the state of the jobs each one lists. */
const TILES = [
  ["total", null],
  ["pending", null],
  ["completed", "completed"],
  ["failed", "failed"],
  ["cancelled", "cancelled"],
];

export function mount(root, params, ctx) {
  const head = h("div", { id: "batch-head" });
  const summary = h("div", { id: "batch-summary" });
  const callbacks = h("section", { class: "panel", id: "batch-callbacks", hidden: true });
  const list = h("section", { id: "batch-jobs" });
  fill(root, head, summary, callbacks, list);
  /** The jobs on the page, whose every event may change it. */
  let shown = new Set();
  return {
    // Its jobs' ends change its counts, but an event does not say which batch its job is in: every job's end
    // brings a refresh (at most one a second), and any event of a job on the page.
    follow: {},
    gap: 1000,
    concerns: (event) => event.job !== null && event.job !== undefined
      && ([...BATCH_EVENTS, ...BATCH_EVENTS_LATER].includes(event.event) || shown.has(event.job)),
    async refresh() {
      let batch;
      try {
        batch = await get(`/v1/batches/${segment(params.id)}`);
      } catch (error) {
        if (error.kind !== "not_found" && error.kind !== "invalid_input") throw error;
        redraw(head, { error: error.message }, () => [h("h1", {}, `Batch ${params.id}`), errorBox(error, { id: "batch-error" })]);
        for (const region of [summary, callbacks, list]) {
          fill(region);
          delete region.dataset.key;
        }
        callbacks.hidden = true;
        return;
      }
      const page = await get("/v1/jobs", { batch: batch.id, before: params.before, limit: PAGE });
      shown = new Set(page.jobs.map((job) => job.id));
      redraw(head, { id: batch.id, state: batch.state, pending: batch.pending, failed: batch.failed, description: batch.description },
        () => batchHead(batch, ctx));
      redraw(summary, batch, () => batchSummary(batch));
      callbacks.hidden = false;
      redraw(callbacks, [batch.on_success, batch.on_complete], () => callbackList(batch));
      redraw(list, page, () => [h("h2", {}, "Jobs"), jobTable(batch, page, params)]);
    },
  };
}

/** Its id, state and description, with the buttons its state allows. */
function batchHead(batch, ctx) {
  const filter = { batch: batch.id };
  const remaining = batch.pending + batch.failed;
  const bulk = (action, body) => post("/v1/jobs/bulk", { action, filter: { ...filter, ...body } });
  const actions = [
    batch.state === "open" ? h("button", {
      type: "button", class: "primary", "data-action": "close",
      title: "It completes once every job has ended; jobs can be added until then",
      onclick: (event) => ctx.act(() => post(`/v1/batches/${batch.id}/close`, {}),
        (answer) => `batch #${batch.id}: closed (${answer.state})`, event.currentTarget),
    }, "Close") : null,
    batch.failed > 0 ? h("button", {
      type: "button", "data-action": "retry",
      title: "Run its failed jobs again, with fresh attempts",
      onclick: (event) => ctx.act(() => bulk("retry", { state: "failed" }),
        (answer) => said(batch, bulkOutcome("retry", answer)), event.currentTarget),
    }, `Retry ${jobs(batch.failed)} failed`) : null,
    remaining > 0 ? h("button", {
      type: "button", class: "danger", "data-action": "cancel",
      title: "Cancel its jobs that have not ended, and its failed ones",
      onclick: async (event) => {
        const target = event.currentTarget;
        const yes = await confirmDialog({
          question: `Cancel the remaining jobs of batch #${batch.id}?`,
          detail: `${cancelWords(batch)} Running ones' workers are refused from then on, and the jobs that wait for them are cancelled too; failed ones leave their failure groups. Completed ones stay as they are.`,
          yes: `Cancel ${jobs(remaining)}`,
        });
        if (yes) ctx.act(() => bulk("cancel", {}), (answer) => said(batch, bulkOutcome("cancel", answer)), target);
      },
    }, "Cancel remaining…") : null,
  ];
  return h("div", { class: "title-row", "data-state": batch.state },
    h("h1", {}, `Batch #${batch.id} `, badge(batch.state)),
    h("div", { class: "actions" }, actions));
}

/** What a bulk action over the batch's jobs did, as the notice line says it: "batch #3: cancelled 2 jobs". */
function said(batch, outcome) {
  return `batch #${batch.id}: ${outcome.charAt(0).toLowerCase()}${outcome.slice(1)}`;
}

/** What a cancel of the batch's remaining jobs reaches, in words. */
function cancelWords(batch) {
  const parts = [];
  if (batch.pending > 0) parts.push(`${jobs(batch.pending)} not ended`);
  if (batch.failed > 0) parts.push(`${jobs(batch.failed)} failed`);
  return `Its ${parts.join(" and ")}, as counted a moment ago, in one call.`;
}

function batchSummary(batch) {
  const jobsOf = (state) => `#/jobs?${new URLSearchParams(state ? { batch: batch.id, state } : { batch: batch.id })}`;
  const tiles = TILES.map(([key, state]) => h(key === "pending" ? "span" : "a", {
    class: `tile count-${key}${batch[key] === 0 ? " zero" : ""}${state ? ` state-${state}` : ""}`,
    href: key === "pending" ? null : jobsOf(state),
    "data-count": key,
  }, h("span", { class: "tile-value" }, count(batch[key])), h("span", { class: "tile-label" }, key)));
  const times = [
    ["Created", timeElement(batch.created_at)],
    ["Completed", batch.completed_at ? timeElement(batch.completed_at) : null],
    ["Succeeded", batch.succeeded_at ? timeElement(batch.succeeded_at) : null],
    ["State", {
      open: "open: it does not complete until closed, and jobs can be added",
      running: "running: closed, with jobs to go",
      completed: "completed: every job ended",
    }[batch.state] ?? batch.state],
  ];
  return [
    batch.description ? h("p", { class: "batch-description", id: "batch-description" }, batch.description) : null,
    h("div", { class: "tiles" }, tiles),
    progress(batch),
    h("dl", { class: "details" }, times.filter(([, value]) => value !== null)
      .map(([label, value]) => [h("dt", {}, label), h("dd", {}, value)])),
  ];
}

/** Its callbacks: the job each pushes, and the job it made once the batch reached its end. */
function callbackList(batch) {
  const callbacks = [
    ["on_success", "On success", "once every job has completed", batch.on_success],
    ["on_complete", "On complete", "once every job has ended", batch.on_complete],
  ].filter(([, , , c]) => c);
  if (callbacks.length === 0) return [h("h2", {}, "Callbacks"), h("p", { class: "empty" }, "No callbacks.")];
  return [
    h("h2", {}, "Callbacks"),
    h("dl", { class: "details" }, callbacks.map(([key, label, when, c]) => [
      h("dt", {}, label),
      h("dd", { "data-callback": key },
        h("span", { class: "job-name" }, c.name), " in ", h("a", { href: `#/jobs?queue=${encodeURIComponent(c.queue)}` }, c.queue), ": ",
        c.job !== null && c.job !== undefined
          ? ["made ", h("a", { href: `#/jobs/${c.job}`, "data-callback-job": c.job }, `job #${c.job}`)]
          : h("span", { class: "muted" }, `not made yet (${when})`)),
    ])),
  ];
}

function jobTable(batch, page, params) {
  if (page.jobs.length === 0) return h("p", { class: "empty" }, "No jobs in this batch.");
  const columns = [
    { label: "Id", class: "num" },
    { label: "Name", class: "name" },
    { label: "Queue" },
    { label: "State" },
    { label: "Attempts", class: "num" },
    { label: "Created" },
  ];
  const rows = page.jobs.map((job) => ({
    attributes: { "data-job-id": job.id, "data-state": job.state },
    cells: [
      h("a", { href: `#/jobs/${job.id}` }, `#${job.id}`),
      h("a", { href: `#/jobs/${job.id}` }, job.name),
      h("a", { href: `#/jobs?queue=${encodeURIComponent(job.queue)}` }, job.queue),
      badge(job.state),
      `${job.attempt} / ${job.retry.max_attempts}`,
      timeElement(job.created_at),
    ],
  }));
  const here = `#/batches/${batch.id}`;
  const paging = h("p", { class: "paging" },
    params.before ? h("a", { href: here }, "← Newest") : null,
    page.next !== null && page.next !== undefined ? h("a", { href: `${here}?before=${page.next}`, "data-page": "older" }, "Older →") : null,
    h("a", { href: `#/jobs?batch=${batch.id}`, "data-jobs-list": batch.id }, "In the jobs list, to filter and act on them"));
  return [table(columns, rows, { class: "stack jobs" }), paging];
}
