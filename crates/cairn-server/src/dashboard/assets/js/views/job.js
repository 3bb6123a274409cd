// One job's whole story: its details and data, the history of its attempts with their errors, and its activity log
// (where the server keeps one); with the actions that fit its state.

import { get, post, segment } from "../api.js";
import { h, fill, table, redraw, errorBox, badge } from "../dom.js";
import { duration, json, timeElement } from "../format.js";

const LIVE = ["scheduled", "queued", "waiting", "running"];
/** The states a job may be moved to another queue in: any but running (one that ended runs again there). */
const MOVABLE = ["scheduled", "queued", "waiting", "completed", "failed", "cancelled"];

export function mount(root, params, ctx) {
  const summary = h("div", { id: "job" });
  const history = h("section", { id: "history" });
  const activity = h("section", { id: "activity" });
  fill(root, summary, history, activity);
  let activityMissing = false;
  return {
    async refresh() {
      let job;
      try {
        job = await get(`/v1/jobs/${segment(params.id)}`);
      } catch (error) {
        if (error.kind !== "not_found" && error.kind !== "invalid_input") throw error;
        redraw(summary, { error: error.message }, () => [h("h1", {}, `Job ${params.id}`), errorBox(error, { id: "job-error" })]);
        fill(history);
        fill(activity);
        return;
      }
      redraw(summary, job, () => jobSummary(job, ctx));
      redraw(history, job.history, () => [h("h2", {}, "Attempts"), attemptTable(job.history)]);
      if (activityMissing) return;
      try {
        const log = await get("/v1/activity", { job: job.id, limit: 50 });
        redraw(activity, log, () => [h("h2", {}, "Activity"), eventTable(log)]);
      } catch (error) {
        if (!error.isMissingRoute) throw error;
        activityMissing = true;
        fill(activity, h("h2", {}, "Activity"), h("p", { class: "unavailable" }, "Activity log not available on this server."));
      }
    },
  };
}

function jobSummary(job, ctx) {
  const act = (action, label, path, body) => h("button", {
    type: "button",
    "data-action": action,
    onclick: (event) => ctx.act(() => post(`/v1/jobs/${job.id}/${path}`, body), `job #${job.id}: ${label.toLowerCase()} done`, event.currentTarget),
  }, label);
  const actions = [
    LIVE.includes(job.state) ? act("cancel", "Cancel", "cancel") : act("requeue", "Run again", "requeue", {}),
    job.tracked ? act("untrack", "Untrack", "untrack") : act("track", "Track", "track"),
    MOVABLE.includes(job.state) ? moveForm(job, ctx) : null,
  ];
  return [
    h("div", { class: "title-row" },
      h("h1", {}, `#${job.id} `, h("span", { class: "job-name" }, job.name), " ", badge(job.state)),
      h("div", { class: "actions" }, actions)),
    job.error ? h("section", { class: "job-error" },
      h("h2", {}, "Error", job.failure_group ? [" · ", h("a", { href: `#/jobs?${new URLSearchParams({ state: "failed", failure_group: job.failure_group })}` }, job.failure_group)] : null),
      h("pre", { class: "error" }, job.error)) : null,
    h("div", { class: "columns" },
      h("section", { class: "panel" }, h("h2", {}, "Details"), details(job)),
      h("section", { class: "panel" }, h("h2", {}, "Data"), h("pre", { class: "data" }, json(job.data)),
        job.progress !== null ? [h("h3", {}, "Progress"), h("pre", { class: "data" }, json(job.progress))] : null)),
  ];
}

/** Moving a job that has not started to another queue: the queue's name, then Move. */
function moveForm(job, ctx) {
  const input = h("input", {
    name: "queue", placeholder: "queue", "aria-label": "Move to queue", autocomplete: "off", spellcheck: "false", required: true,
  });
  const button = h("button", { type: "submit", "data-action": "move" }, "Move");
  const form = h("form", { class: "move", id: "move-job" }, input, button);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const queue = input.value.trim();
    ctx.act(() => post(`/v1/jobs/${job.id}/move`, { queue }), `job #${job.id}: moved to queue ${queue}`, button);
  });
  return form;
}

function details(job) {
  const link = (id) => h("a", { href: `#/jobs/${id}` }, `#${id}`);
  const rows = [
    ["Queue", h("a", { href: `#/jobs?queue=${encodeURIComponent(job.queue)}` }, job.queue)],
    ["Priority", String(job.priority)],
    ["Weight", String(job.weight)],
    ["Attempts", `${job.attempt} of ${job.retry.max_attempts}`],
    ["Created", timeElement(job.created_at)],
    ["Runs at", timeElement(job.run_at)],
    ["Started", job.started_at ? timeElement(job.started_at) : null],
    ["Finished", job.finished_at ? timeElement(job.finished_at) : null],
    ["Worker", job.worker],
    ["Lease ends", job.lease_expires_at ? timeElement(job.lease_expires_at) : null],
    ["Lease timeout", duration(job.lease_timeout_ms)],
    ["Timeout", job.timeout_ms ? duration(job.timeout_ms) : null],
    ["Unique key", job.unique_key],
    ["Debounce key", job.debounce_key],
    ["Throttle key", job.throttle_key],
    ["Concurrency key", job.concurrency_key],
    ["Concurrency limit", job.concurrency_limit ? `${job.concurrency_limit} of its key at once (its own)` : null],
    ["Tags", job.tags.length ? job.tags.map((tag) => h("a", { class: "chip", href: `#/jobs?tag=${encodeURIComponent(tag)}` }, tag)) : null],
    ["Parent", job.parent ? link(job.parent) : null],
    ["Children", h("a", { href: `#/jobs?parent=${job.id}` }, "list")],
    ["Waits for", job.depends_on.length ? job.depends_on.map((id, i) => [i ? ", " : "", link(id)]) : null],
    ["Schedule", job.schedule ? `${job.schedule}${job.time_zone ? ` (${job.time_zone})` : ""}` : null],
    ["Tracked", job.tracked ? "yes" : null],
  ];
  return h("dl", { class: "details" }, rows.filter(([, value]) => value !== null && value !== undefined)
    .map(([label, value]) => [h("dt", {}, label), h("dd", {}, value)]));
}

function attemptTable(attempts) {
  if (attempts.length === 0) return h("p", { class: "empty" }, "No attempt yet.");
  const columns = [
    { label: "#", class: "num" },
    { label: "Worker" },
    { label: "Started" },
    { label: "Took", class: "num" },
    { label: "Outcome" },
    { label: "Error", class: "wide" },
    { label: "Used" },
  ];
  const rows = attempts.map((a) => ({
    attributes: { "data-attempt": a.number },
    cells: [
      String(a.number),
      a.worker,
      timeElement(a.started_at),
      a.finished_at ? duration(Date.parse(a.finished_at) - Date.parse(a.started_at)) : "running",
      a.outcome ? badge(a.outcome) : badge("running"),
      a.error ? h("code", { class: "error" }, a.error) : "",
      a.usage ? `${duration(a.usage.cpu_ms)} CPU, ${(a.usage.peak_memory / 1048576).toFixed(1)} MiB` : "",
    ],
  }));
  return table(columns, rows, { class: "stack attempts" });
}

function eventTable(log) {
  if (log.events.length === 0) return h("p", { class: "empty" }, "Nothing logged yet.");
  const columns = [{ label: "When" }, { label: "Event" }, { label: "Worker" }, { label: "Detail", class: "wide" }];
  const rows = log.events.map((e) => ({
    attributes: { "data-event": e.event },
    cells: [timeElement(e.at), badge(e.event), e.worker ?? "", e.detail ?? ""],
  }));
  return [
    table(columns, rows, { class: "stack events" }),
    log.next_before !== null ? h("p", { class: "hint" }, "Older events are not shown.") : null,
  ];
}
