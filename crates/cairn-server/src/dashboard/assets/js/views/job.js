// One job's whole story: its details, data and result, its trace, the steps its handler recorded (a timeline, ending
// with what a suspended job waits for), the history of its attempts with their errors and results, and its activity
// log (where the server keeps one); with the actions that fit its state.

import { del, get, post, segment } from "../api.js";
import { h, fill, table, redraw, errorBox, badge, confirmDialog } from "../dom.js";
import { duration, json, timeElement, when } from "../format.js";

/** The states of a job that has not ended. */
const LIVE = ["scheduled", "queued", "waiting", "running"];
/**
 * The states each action takes, as the API holds them (it answers 409 otherwise, and a bulk action skips the
 * others); delete and track take any.
 */
export const ALLOWED = {
  // A failed job cancelled leaves its failure group; a completed one cannot be cancelled.
  cancel: [...LIVE, "failed"],
  requeue: ["completed", "failed", "cancelled"],
  priority: LIVE,
  reschedule: ["scheduled", "queued"],
  // Any but running, which stays in the queue its worker took it from; one that ended runs again there.
  move: ["scheduled", "queued", "waiting", "completed", "failed", "cancelled"],
};
/** A result longer than this shows folded in the history of attempts. */
const SHORT_RESULT = 120;

export function mount(root, params, ctx) {
  const head = h("div", { id: "job-head" });
  const changes = h("div", { id: "job-changes" });
  const body = h("div", { id: "job-body" });
  const steps = h("section", { id: "steps" });
  const history = h("section", { id: "history" });
  const activity = h("section", { id: "activity" });
  fill(root, h("div", { id: "job" }, head, changes, body), steps, history, activity);
  let activityMissing = false;
  return {
    // This job's events only: each changes it, its history or its activity (a move, a new time or priority, a
    // delete too, where the server logs them; deleted, the page says the job is not found).
    follow: { job: params.id },
    async refresh() {
      let job;
      try {
        job = await get(`/v1/jobs/${segment(params.id)}`);
      } catch (error) {
        if (error.kind !== "not_found" && error.kind !== "invalid_input") throw error;
        redraw(head, { error: error.message }, () => [h("h1", {}, `Job ${params.id}`), errorBox(error, { id: "job-error" })]);
        for (const region of [changes, body, steps, history, activity]) empty(region);
        return;
      }
      // Apart, so that a poll that brings a running job's new lease leaves the buttons and forms alone.
      redraw(head, { id: job.id, name: job.name, state: job.state, tracked: job.tracked }, () => jobHead(job, ctx));
      redraw(changes, { id: job.id, state: job.state, priority: job.priority, queue: job.queue, run_at: job.run_at },
        () => changeForms(job, ctx));
      redraw(body, job, () => jobBody(job));
      const story = { steps: job.steps ?? [], waits: suspension(job) };
      redraw(steps, story, () => story.steps.length || story.waits ? [h("h2", {}, "Steps"), stepTimeline(story)] : null);
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

/** Empties a region that `redraw` fills, so that it draws again whatever comes next. */
function empty(region) {
  fill(region);
  delete region.dataset.key;
}

/** The job's name and state, with the buttons that act on it as a whole. */
function jobHead(job, ctx) {
  const path = `/v1/jobs/${job.id}`;
  /** A button that runs `request` (after `confirm`'s question, if any), saying `describe` when it is done. */
  const button = (action, label, request, describe, { confirm, then, danger } = {}) => h("button", {
    type: "button",
    class: danger ? "danger" : null,
    "data-action": action,
    onclick: async (event) => {
      const target = event.currentTarget;
      if (confirm && !(await confirmDialog(confirm))) return;
      ctx.act(request, describe, target, { then });
    },
  }, label);
  const allowed = (action) => ALLOWED[action].includes(job.state);
  // What a cancel brings, which a delete of a job that has not ended brings too.
  const cascade = "its live children and the jobs that wait for it are cancelled too";
  const cancelled = { failed: "It leaves its failure group", running: "Its worker is refused from then on" }[job.state]
    ?? "It will not run";
  const deleted = LIVE.includes(job.state) || job.state === "failed"
    ? ` It is cancelled first: ${job.state === "running" ? "its worker is refused from then on, and " : ""}${cascade}.`
    : "";
  const actions = [
    allowed("requeue") ? button("requeue", "Run again", () => post(`${path}/requeue`, {}),
      (answer) => `job #${job.id}: runs again (${answer.state})`) : null,
    job.tracked
      ? button("untrack", "Untrack", () => post(`${path}/untrack`), `job #${job.id}: untracked`)
      : button("track", "Track", () => post(`${path}/track`), `job #${job.id}: tracked`),
    allowed("cancel") ? button("cancel", "Cancel…", () => post(`${path}/cancel`), `job #${job.id}: cancelled`, {
      danger: true,
      confirm: {
        question: `Cancel job #${job.id}?`,
        detail: `${cancelled}, and ${cascade}. Run again brings it back.`,
        yes: "Cancel the job",
      },
    }) : null,
    button("delete", "Delete…", () => del(path), `job #${job.id}: deleted`, {
      danger: true,
      then: "#/jobs",
      confirm: {
        question: `Delete job #${job.id}?`,
        detail: `It goes for good, with its history.${deleted}`,
        yes: "Delete the job",
      },
    }),
  ];
  return h("div", { class: "title-row", "data-state": job.state },
    h("h1", {}, `#${job.id} `, h("span", { class: "job-name" }, job.name), " ", badge(job.state)),
    h("div", { class: "actions" }, actions));
}

/** The forms that change one thing about the job: its priority, its time, its queue, as its state allows. */
function changeForms(job, ctx) {
  const allowed = (action) => ALLOWED[action].includes(job.state);
  const forms = [
    allowed("priority") ? priorityForm(job, ctx) : null,
    allowed("reschedule") ? rescheduleForm(job, ctx) : null,
    allowed("move") ? moveForm(job, ctx) : null,
  ].filter(Boolean);
  return forms.length ? h("div", { class: "changes" }, forms) : null;
}

/** A form of one field and a button; `submit(button)` runs when it is sent. */
function changeForm(id, action, label, input, buttonLabel, submit) {
  const button = h("button", { type: "submit", "data-action": action }, buttonLabel);
  const form = h("form", { class: "change", id }, h("label", {}, label, input), button);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    submit(button);
  });
  return form;
}

function priorityForm(job, ctx) {
  const input = h("input", { type: "number", name: "priority", value: job.priority, step: 1, required: true });
  return changeForm("priority-job", "priority", "Priority", input, "Set", (button) => {
    const priority = Number(input.value);
    ctx.act(() => post(`/v1/jobs/${job.id}/priority`, { priority }), `job #${job.id}: priority set to ${priority}`, button);
  });
}

/** A new time for a job that is not running yet, in this browser's time zone, to the minute. */
function rescheduleForm(job, ctx) {
  const input = h("input", { type: "datetime-local", name: "run_at", value: localMinute(job.run_at), required: true });
  return changeForm("reschedule-job", "reschedule", "Run at", input, "Reschedule", (button) => {
    const runAt = new Date(input.value).toISOString();
    ctx.act(() => post(`/v1/jobs/${job.id}/reschedule`, { run_at: runAt }),
      (answer) => `job #${job.id}: runs at ${when(runAt)} (${answer.state})`, button);
  });
}

/** Moving a job that is not running to another queue: the queue's name, then Move. */
function moveForm(job, ctx) {
  const input = h("input", {
    name: "queue", placeholder: "queue", "aria-label": "Move to queue", autocomplete: "off", spellcheck: "false", required: true,
  });
  return changeForm("move-job", "move", "Queue", input, "Move", (button) => {
    const queue = input.value.trim();
    ctx.act(() => post(`/v1/jobs/${job.id}/move`, { queue }), `job #${job.id}: moved to queue ${queue}`, button);
  });
}

/** `iso` as a `datetime-local` input's value: this browser's local time, to the minute. */
function localMinute(iso) {
  const date = new Date(iso);
  const two = (n) => String(n).padStart(2, "0");
  return `${date.getFullYear()}-${two(date.getMonth() + 1)}-${two(date.getDate())}T${two(date.getHours())}:${two(date.getMinutes())}`;
}

function jobBody(job) {
  const hasResult = job.result !== null && job.result !== undefined;
  return [
    job.error ? h("section", { class: "job-error" },
      h("h2", {}, "Error", job.failure_group ? [" · ", h("a", { href: `#/jobs?${new URLSearchParams({ state: "failed", failure_group: job.failure_group })}` }, job.failure_group)] : null),
      h("pre", { class: "error" }, job.error)) : null,
    h("div", { class: "columns" },
      h("section", { class: "panel" }, h("h2", {}, "Details"), details(job)),
      h("div", {},
        hasResult ? h("section", { class: "panel", id: "job-result" }, h("h2", {}, "Result"), h("pre", { class: "data" }, json(job.result))) : null,
        h("section", { class: "panel", id: "job-data" }, h("h2", {}, "Data"), h("pre", { class: "data" }, json(job.data)),
          job.progress !== null ? [h("h3", {}, "Progress"), h("pre", { class: "data" }, json(job.progress))] : null))),
  ];
}

function details(job) {
  const link = (id) => h("a", { href: `#/jobs/${id}` }, `#${id}`);
  const trace = traceParts(job.trace_parent);
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
    ["Trace id", trace ? h("code", { class: "trace-id" }, trace.traceId) : null],
    ["Trace parent", job.trace_parent
      ? [h("code", { class: "trace-parent" }, job.trace_parent), trace ? h("span", { class: "muted" }, trace.sampled ? " (sampled)" : " (not sampled)") : null]
      : null],
    ["Tags", job.tags.length ? job.tags.map((tag) => h("a", { class: "chip", href: `#/jobs?tag=${encodeURIComponent(tag)}` }, tag)) : null],
    ["Batch", job.batch ? h("a", { href: `#/batches/${job.batch}`, "data-batch": job.batch }, `batch #${job.batch}`) : null],
    ["Parent", job.parent ? link(job.parent) : null],
    ["Children", h("a", { href: `#/jobs?parent=${job.id}` }, "list")],
    ["Waits for", job.depends_on.length ? job.depends_on.map((id, i) => [i ? ", " : "", link(id)]) : null],
    ["Schedule", job.schedule ? `${job.schedule}${job.time_zone ? ` (${job.time_zone})` : ""}` : null],
    ["Tracked", job.tracked ? "yes" : null],
    ["Suspended", job.suspended_at ? [suspension(job), " since ", timeElement(job.suspended_at)] : null],
  ];
  return h("dl", { class: "details" }, rows.filter(([, value]) => value !== null && value !== undefined)
    .map(([label, value]) => [h("dt", {}, label), h("dd", {}, value)]));
}

/** What a suspended job waits for, in words, or null for a job its handler did not suspend. */
function suspension(job) {
  if (!job.suspended_at) return null;
  if (job.awaits_signal) return `waits for the signal ${job.awaits_signal} until ${when(job.run_at)}`;
  if (job.state === "waiting") return "waits for its children to end";
  return `sleeps until ${when(job.run_at)}`;
}

/**
 * The steps its handler recorded, oldest first, as a timeline: when, which attempt, the step's name and its result;
 * then, for a suspended job, what it waits for now.
 */
function stepTimeline({ steps, waits }) {
  const items = steps.map((step) => h("li", { "data-step": step.name },
    timeElement(step.recorded_at),
    h("span", { class: "step-name" }, step.name),
    h("span", { class: "muted" }, ` attempt ${step.attempt}`),
    attemptResult(step.result)));
  if (waits) items.push(h("li", { class: "now", "data-suspended": "true" }, h("span", { class: "step-name" }, "now"), ` ${waits}`));
  return h("ol", { class: "timeline" }, items);
}

/** A W3C `traceparent` of version 00 in its parts, or null for none (or a form this page does not know). */
function traceParts(value) {
  const match = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/.exec(value ?? "");
  return match ? { traceId: match[1], parentId: match[2], sampled: (parseInt(match[3], 16) & 1) === 1 } : null;
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
    { label: "Result", class: "wide" },
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
      attemptResult(a.result),
      a.usage ? `${duration(a.usage.cpu_ms)} CPU, ${(a.usage.peak_memory / 1048576).toFixed(1)} MiB` : "",
    ],
  }));
  return table(columns, rows, { class: "stack attempts" });
}

/** An attempt's result on one line, or folded when it is long (the job's last one shows in full above). */
function attemptResult(result) {
  if (result === null || result === undefined) return "";
  const text = JSON.stringify(result);
  if (text.length <= SHORT_RESULT) return h("code", { class: "result" }, text);
  return h("details", { class: "result" },
    h("summary", {}, h("code", {}, `${text.slice(0, SHORT_RESULT)}…`)),
    h("pre", { class: "data" }, json(result)));
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
