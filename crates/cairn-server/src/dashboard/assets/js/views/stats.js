// Graphs over the last hour, day or week: throughput, wait time and run time per bucket, histograms of wait and run
// times, and how busy workers and queues were. On a server without `/v1/stats` the page says so and the rest of
// the dashboard works as usual.

import { get } from "../api.js";
import { h, fill, redraw, errorBox } from "../dom.js";
import { bucketLabel, count, duration, percent, tickLabel } from "../format.js";
import { stackedBars, lines, histogram, meters, legend } from "../charts.js";

const PERIODS = ["hour", "day", "week"];
const THROUGHPUT = [
  { key: "finished", label: "finished" },
  { key: "retried", label: "retried" },
  { key: "failed", label: "failed" },
];
const ADDED = { key: "added", label: "added" };

export function mount(root, params, ctx) {
  const period = params.period || "hour";
  const content = h("div", { id: "stats" });
  const form = filterForm(params, period, ctx);
  fill(root, h("h1", {}, "Graphs"), periodTabs(params, period), form, content);
  return {
    // The numbers move slowly (one-minute buckets at the finest): no need to ask more than every ten seconds, on a
    // timer or for events.
    interval: 10000,
    gap: 10000,
    follow: { queue: params.queue, name: params.name },
    async refresh() {
      const query = { period, queue: params.queue, name: params.name };
      let stats;
      try {
        stats = await get("/v1/stats", query);
      } catch (error) {
        if (error.isMissingRoute) {
          redraw(content, "missing", () => h("p", { class: "unavailable", "data-unavailable": "stats" },
            "Statistics not available: this server does not keep them (no /v1/stats)."));
          return;
        }
        if (error.kind !== "invalid_input") throw error;
        redraw(content, { error: error.message }, () => errorBox(error, { id: "stats-error" }));
        return;
      }
      const usage = await workerUsage(period);
      // The charts sit in panels: their padding and border take about 32 pixels of the page's width.
      const width = Math.max(280, (content.clientWidth || 672) - 32);
      redraw(content, { stats, usage, width }, () => charts(stats, usage, period, width));
    },
  };
}

/** How busy workers and queues were, or null on a server without `/v1/stats/workers`. */
async function workerUsage(period) {
  try {
    return await get("/v1/stats/workers", { period });
  } catch (error) {
    if (error.isMissingRoute) return null;
    throw error;
  }
}

function periodTabs(params, period) {
  return h("nav", { class: "tabs", "aria-label": "Period" }, PERIODS.map((p) => h("a", {
    href: `#/stats?${new URLSearchParams({ ...params, period: p })}`,
    class: p === period ? "active" : null,
    "data-period": p,
  }, `last ${p}`)));
}

function filterForm(params, period, ctx) {
  const input = (name, label, placeholder) => h("label", {}, label,
    h("input", { name, value: params[name] ?? "", placeholder, autocomplete: "off", spellcheck: "false" }));
  const form = h("form", { class: "search", id: "stats-filter" },
    input("queue", "Queue", "all queues"),
    input("name", "Name", "all names"),
    h("button", { type: "submit", class: "primary" }, "Show"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const query = { period };
    for (const key of ["queue", "name"]) {
      const value = String(data.get(key)).trim();
      if (value) query[key] = value;
    }
    ctx.go(`#/stats?${new URLSearchParams(query)}`);
  });
  return form;
}

function charts(stats, usage, period, width) {
  const tick = (i) => tickLabel(stats.series[i].at, period);
  const label = (i) => bucketLabel(stats.series[i].at);
  const bucket = duration(stats.bucket_ms);
  const ms = (v) => duration(v);
  return [
    h("div", { class: "tiles" }, ["added", "started", "finished", "retried", "failed"].map((key) =>
      h("div", { class: `tile s-${key}`, "data-total": key },
        h("span", { class: "tile-value" }, count(stats.totals[key])), h("span", { class: "tile-label" }, key)))),
    chartPanel(`Throughput (jobs per ${bucket})`, [...THROUGHPUT, ADDED],
      stackedBars({ width, series: stats.series, stacks: THROUGHPUT, line: ADDED, tick, label, format: (v) => count(v), title: "throughput" })),
    chartPanel(`Wait time (per ${bucket})`, [{ key: "wait_mean_ms", label: "mean" }, { key: "wait_max_ms", label: "max" }],
      lines({ width, series: stats.series, lines: [{ key: "wait_mean_ms", label: "mean" }, { key: "wait_max_ms", label: "max" }], tick, label, format: ms, axis: "duration", title: "wait time" })),
    chartPanel(`Run time (per ${bucket})`, [{ key: "run_mean_ms", label: "mean" }, { key: "run_max_ms", label: "max" }],
      lines({ width, series: stats.series, lines: [{ key: "run_mean_ms", label: "mean" }, { key: "run_max_ms", label: "max" }], tick, label, format: ms, axis: "duration", title: "run time" })),
    h("div", { class: "columns" },
      distribution("Wait time distribution", stats.wait, width, "s-wait"),
      distribution("Run time distribution", stats.run, width, "s-run")),
    h("p", { class: "hint" }, `Service (wait and run): ${count(stats.service.count)} jobs, mean ${ms(stats.service.mean_ms)}, `,
      `min ${ms(stats.service.min_ms)}, max ${ms(stats.service.max_ms)}.`),
    usage ? utilization(usage, width) : h("p", { class: "unavailable" }, "Worker utilization not available on this server."),
  ];
}

function chartPanel(title, keys, chart) {
  return h("section", { class: "panel chart-panel" }, h("h2", {}, title), legend(keys), chart);
}

/** One histogram panel, with the summary numbers above it. Two sit side by side on wide screens. */
function distribution(title, summary, width, cls) {
  const half = width >= 760 ? Math.floor(width / 2) - 12 : width;
  return h("section", { class: "panel chart-panel" },
    h("h2", {}, title),
    h("p", { class: "hint" }, `${count(summary.count)} jobs · mean ${duration(summary.mean_ms)} · σ ${duration(summary.stddev_ms)} · `,
      `min ${duration(summary.min_ms)} · max ${duration(summary.max_ms)}`),
    histogram({ width: half, buckets: summary.histogram, format: duration, title, cls }));
}

function utilization(usage, width) {
  const items = (rows, key) => rows.map((r) => ({ label: r[key], value: r.utilization, text: percent(r.utilization) }));
  return h("div", { class: "columns" },
    h("section", { class: "panel chart-panel" }, h("h2", {}, "Workers: time busy"),
      usage.workers.length ? meters({ width: Math.min(width, 560), items: items(usage.workers, "worker"), title: "worker utilization" })
        : h("p", { class: "empty" }, "No workers in this period.")),
    h("section", { class: "panel chart-panel" }, h("h2", {}, "Queues: time busy"),
      usage.queues.length ? meters({ width: Math.min(width, 560), items: items(usage.queues, "queue"), title: "queue utilization" })
        : h("p", { class: "empty" }, "No queues in this period.")));
}
