// Batches, newest first, by state: each with its progress (a bar of its jobs completed, failed, cancelled and
// pending), its times and its description. A batch's own page is `batch.js`.

import { get } from "../api.js";
import { h, fill, table, redraw, errorBox, badge } from "../dom.js";
import { count, timeElement } from "../format.js";
import { svg } from "../charts.js";

const STATES = ["open", "running", "completed"];
const PAGE = 50;

/**
 * The events that change a batch's counts: a job added, ended, or brought back from an end (run again, a failure
 * group retried); a job whose lease ran out may fail for good.
 */
export const BATCH_EVENTS = ["added", "finished", "failed", "cancelled", "requeued", "unfailed", "heartbeat_lost"];
/**
 * The same from servers that log them apart (a live job deleted counts as cancelled, an ended job moved runs
 * again); older ones refuse these kinds, and the page then follows without them.
 */
export const BATCH_EVENTS_LATER = ["deleted", "moved"];

export function mount(root, params) {
  const list = h("div", { id: "batch-list" });
  fill(root, h("h1", {}, "Batches"), stateTabs(params), list);
  return {
    // Any batch's counts may change with a job's end; the events do not say which batch a job is in. Created
    // empty or closed elsewhere, a batch shows with the next refresh.
    follow: { kinds: BATCH_EVENTS.join(","), later: BATCH_EVENTS_LATER },
    gap: 1000,
    async refresh() {
      let page;
      try {
        page = await get("/v1/batches", { state: params.state, before: params.before, limit: PAGE });
      } catch (error) {
        if (error.kind !== "invalid_input") throw error;
        redraw(list, { error: error.message }, () => errorBox(error, { id: "batch-error" }));
        return;
      }
      redraw(list, page, () => batchTable(page, params));
    },
  };
}

function address(query) {
  const text = new URLSearchParams(query).toString();
  return text ? `#/batches?${text}` : "#/batches";
}

function stateTabs(params) {
  const tab = (state, label) => h("a", {
    href: address(state ? { state } : {}),
    class: (params.state || "") === state ? "active" : null,
    "data-state": state || "all",
  }, label);
  return h("nav", { class: "tabs", "aria-label": "States" }, tab("", "all"), STATES.map((s) => tab(s, s)));
}

function batchTable(page, params) {
  if (page.batches.length === 0) {
    return h("p", { class: "empty" }, params.state ? `No ${params.state} batches.` : "No batches yet.");
  }
  const columns = [
    { label: "Batch", class: "name" },
    { label: "State" },
    { label: "Progress", class: "progress-cell" },
    { label: "Created" },
    { label: "Completed" },
    { label: "Succeeded" },
  ];
  const rows = page.batches.map((b) => ({
    attributes: { "data-batch": b.id, "data-state": b.state },
    cells: [
      [h("a", { href: `#/batches/${b.id}` }, `#${b.id}`),
        b.description ? h("span", { class: "batch-description" }, b.description) : null],
      badge(b.state),
      progress(b),
      timeElement(b.created_at),
      b.completed_at ? timeElement(b.completed_at) : h("span", { class: "muted" }, "–"),
      b.succeeded_at ? timeElement(b.succeeded_at) : h("span", { class: "muted" }, "–"),
    ],
  }));
  const paging = h("p", { class: "paging" },
    params.before ? h("a", { href: address(params.state ? { state: params.state } : {}) }, "← Newest") : null,
    page.next !== null && page.next !== undefined
      ? h("a", { href: address({ ...(params.state ? { state: params.state } : {}), before: page.next }), "data-page": "older" }, "Older →")
      : null);
  return [table(columns, rows, { class: "stack batches" }), paging];
}

/** The parts of a batch's jobs, in the order the bar draws them. */
const PARTS = ["completed", "failed", "cancelled", "pending"];

/** `n` of `total` in words. */
function summary(b) {
  const ended = b.completed + b.failed + b.cancelled;
  const parts = PARTS.filter((part) => b[part] > 0).map((part) => `${count(b[part])} ${part}`);
  return `${count(ended)} of ${count(b.total)} ended${parts.length ? `: ${parts.join(", ")}` : ""}`;
}

/**
 * A batch's progress: a bar with a part per count (drawn in SVG, whose sizes are attributes: the page's policy
 * allows no inline style), and the counts in words.
 */
export function progress(b) {
  const total = Math.max(1, b.total);
  let x = 0;
  const bar = svg("svg", {
    class: "progress-bar", viewBox: `0 0 ${total} 1`, preserveAspectRatio: "none", role: "img", "aria-label": summary(b),
  }, svg("rect", { class: "track", x: 0, y: 0, width: total, height: 1 }));
  for (const part of PARTS.slice(0, 3)) {
    if (b[part] > 0) bar.append(svg("rect", { class: `part part-${part}`, x, y: 0, width: b[part], height: 1 }));
    x += b[part];
  }
  return h("div", {
    class: "progress",
    "data-total": b.total, "data-pending": b.pending, "data-completed": b.completed, "data-failed": b.failed, "data-cancelled": b.cancelled,
  }, bar, h("span", { class: "progress-text" }, summary(b)));
}
