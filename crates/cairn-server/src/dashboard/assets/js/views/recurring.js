// Recurring templates: each with the job it makes, its cron schedule and time zone, its overlap policy, its next and
// last runs and whether it is paused; paused and resumed, run now (its job made at once, as a slot would make it) and removed
// from here. `GET /v1/recurring` names the last job a template made (`last_job`, at a slot or run by hand), which
// the row links; a Run now made here says so beside it.

import { del, get, post, segment } from "../api.js";
import { h, fill, table, redraw, confirmDialog } from "../dom.js";
import { timeElement, when } from "../format.js";

/** What each overlap policy does when the previous run is still live at the next slot. */
const OVERLAP = {
  allow: "another run starts beside it",
  skip: "the slot is skipped (and Run now refused)",
  replace: "the previous run is cancelled",
};

/**
 * The jobs Run now made on this page, by template key: `{ id, existing, lastRun }`, `lastRun` the template's last
 * run as the page saw it after the run. Kept while the page is open, across views; dropped once the template's
 * last run moves on (a slot made a newer job) or the template is gone.
 */
const madeHere = new Map();

export function mount(root, _params, ctx) {
  const list = h("div", { id: "recurring-list" });
  fill(root,
    h("h1", {}, "Recurring templates"),
    h("p", { class: "hint" }, "At every slot of its schedule a template makes its job, due at the slot. ",
      "Paused, it makes none, and its slots are not made up when it resumes. Run now makes its job at once, ",
      "as a slot would: its overlap policy and unique key hold."),
    list);
  return {
    // A template changes when it makes a job: an `added` event (which does not say which template made it).
    // Set, paused or removed elsewhere, it shows with the next refresh.
    follow: { kinds: "added" },
    gap: 1000,
    async refresh() {
      const body = await get("/v1/recurring");
      const keys = new Set(body.recurring.map((t) => t.key));
      for (const [key, made] of madeHere) {
        const template = body.recurring.find((t) => t.key === key);
        if (!keys.has(key)) madeHere.delete(key);
        else if (made.lastRun === undefined) made.lastRun = template.last_run;
        else if (made.lastRun !== template.last_run) madeHere.delete(key);
      }
      const shown = body.recurring.map((t) => ({ ...t, made: madeHere.get(t.key) ?? null }));
      redraw(list, shown, () => templateTable(shown, ctx));
    },
  };
}

function templateTable(templates, ctx) {
  if (templates.length === 0) {
    return h("p", { class: "empty" }, "No recurring templates. Set one with ",
      h("code", {}, 'cairn recurring set KEY --cron "0 4 * * *" --name NAME'), " or ", h("code", {}, "PUT /v1/recurring/KEY"), ".");
  }
  const columns = [
    { label: "Template", class: "name" },
    { label: "Schedule" },
    { label: "Overlap" },
    { label: "Next run" },
    { label: "Last run" },
    { label: "", class: "actions" },
  ];
  const rows = templates.map((t) => ({
    attributes: { "data-key": t.key, "data-paused": String(t.paused), class: t.paused ? "paused" : null },
    cells: [
      [h("code", { class: "template-key" }, t.key), t.paused ? h("span", { class: "badge paused" }, "paused") : null,
        h("div", { class: "muted template-job" }, "makes ", h("code", {}, t.job.name), " in ", t.job.queue ?? "default")],
      h("span", {}, h("code", {}, t.cron), " ", h("span", { class: "muted" }, t.time_zone)),
      h("span", { title: OVERLAP[t.overlap] ?? "" }, t.overlap),
      t.paused ? h("span", { class: "muted" }, "paused") : t.next_run ? timeElement(t.next_run) : h("span", { class: "muted" }, "none"),
      lastRun(t),
      actions(t, ctx),
    ],
  }));
  return table(columns, rows, { class: "stack recurring" });
}

/** When its last slot made a job, and the last job itself where known. */
function lastRun(t) {
  const link = (id, note) => [" · ", h("a", { href: `#/jobs/${id}`, "data-last-job": id }, `job #${id}`), h("span", { class: "muted" }, ` ${note}`)];
  const time = t.last_run ? timeElement(t.last_run) : h("span", { class: "muted" }, "never");
  // One element, so that a phone's card keeps the time and the job together.
  const job = t.made
    ? link(t.made.id, t.made.existing ? "(run now: already live)" : "(run now)")
    : t.last_job != null
      ? link(t.last_job, "")
      : null;
  return h("span", {}, time, job);
}

function actions(t, ctx) {
  const path = `/v1/recurring/${segment(t.key)}`;
  const button = (action, label, onclick, { primary, danger } = {}) => h("button", {
    type: "button",
    class: [primary ? "primary" : null, danger ? "danger" : null].filter(Boolean).join(" ") || null,
    "data-action": action,
    "data-key": t.key,
    onclick,
  }, label);
  return h("div", { class: "row-actions" },
    t.paused
      ? button("resume", "Resume", (event) => ctx.act(() => post(`${path}/resume`, {}),
        (answer) => `${t.key}: resumed${answer.next_run ? `, next run at ${when(answer.next_run)}` : ""}`, event.currentTarget),
      { primary: true })
      : button("pause", "Pause", (event) => ctx.act(() => post(`${path}/pause`, {}),
        `${t.key}: paused`, event.currentTarget)),
    button("run", "Run now", (event) => ctx.act(() => post(`${path}/run`, {}), (answer) => {
      madeHere.set(t.key, { id: answer.id, existing: answer.existing, lastRun: undefined });
      return answer.existing
        ? `${t.key}: job #${answer.id} already holds its unique key (${answer.state})`
        : `${t.key}: made job #${answer.id} (${answer.state})`;
    }, event.currentTarget)),
    button("remove", "Remove…", async (event) => {
      const target = event.currentTarget;
      const yes = await confirmDialog({
        question: `Remove the template ${t.key}?`,
        detail: "It makes no more jobs. The jobs it made stay, and so does a run under way.",
        yes: "Remove the template",
      });
      if (yes) ctx.act(() => del(path), `${t.key}: removed`, target);
    }, { danger: true }));
}
