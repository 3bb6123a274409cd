// Jobs by state, searched by name (a GLOB such as `email.*`), tag, queue or id. The search goes to the API as typed:
// the server judges it, and its error (naming the field) shows under the form. Jobs can be selected, some on the
// page or every one the filter matches, and cancelled, deleted, retried or moved at once, in one call to
// `POST /v1/jobs/bulk` (ids, or the filter).

import { get, post } from "../api.js";
import { h, fill, table, redraw, errorBox, badge, confirmDialog } from "../dom.js";
import { count, timeElement } from "../format.js";
import { ALLOWED } from "./job.js";
import { COUNTED } from "./queues.js";

const STATES = ["queued", "scheduled", "waiting", "running", "failed", "completed", "cancelled"];
/** Filters the address may carry besides `state`: the form's fields, then those set by links from other views. */
const SEARCHED = ["name", "tag", "queue"];
const LINKED = ["failure_group", "parent", "batch", "tracked"];
/** The form field that shows an error about each API field (a bad `name` pattern is reported as `names`). */
const FIELD_OF = { names: "name", name_pattern: "name", name: "name", tag: "tag", queue: "queue" };
const PAGE = 50;

export function mount(root, params, ctx) {
  const results = h("div", { id: "job-list" });
  const form = searchForm(params, ctx);
  /** The jobs selected: some ids of the page, or (`all`) every job the filter matches, `total` of them if known. */
  const picked = { ids: new Set(), all: false, total: undefined };
  let page = null;
  const bar = bulkBar(params, ctx, picked, () => page, () => showPicked());
  const showPicked = () => {
    for (const box of results.querySelectorAll("input[data-pick]")) {
      box.checked = picked.all || picked.ids.has(Number(box.dataset.pick));
    }
    bar.update();
  };
  results.addEventListener("change", (event) => {
    const box = event.target.closest("input[data-pick]");
    if (!box || !page) return;
    if (picked.all) {
      picked.all = false;
      picked.ids = new Set(page.jobs.map((job) => job.id));
    }
    const id = Number(box.dataset.pick);
    if (box.checked) picked.ids.add(id);
    else picked.ids.delete(id);
    showPicked();
  });
  fill(root, h("h1", {}, "Jobs"), stateTabs(params), form, linkedFilters(params), bar.element, results);
  return {
    // Only the jobs the list could show: the stream filters by queue and name as the list does. Every event of a
    // job may change the list: a new state, and a move, a new time or priority, a delete where the server logs
    // them (`moved`, `rescheduled`, `prioritized`, `deleted`); an event without a job changes no job.
    follow: { queue: params.queue, name: params.name },
    concerns: (event) => event.job !== null && event.job !== undefined,
    async refresh() {
      try {
        page = await get("/v1/jobs", { ...filters(params), before: params.before, limit: PAGE });
      } catch (error) {
        if (error.kind !== "invalid_input") throw error;
        page = null;
        markField(form, error.field);
        redraw(results, { error: error.message }, () => errorBox(error, { id: "search-error" }));
        bar.update();
        return;
      }
      markField(form, null);
      // A job that left the page (it moved on to another state, say) is no longer selected.
      const shown = new Set(page.jobs.map((job) => job.id));
      for (const id of picked.ids) if (!shown.has(id)) picked.ids.delete(id);
      redraw(results, page, () => jobTable(page, params));
      showPicked();
    },
  };
}

/** The filters in the address, without paging. */
function filters(params) {
  const chosen = {};
  for (const key of ["state", ...SEARCHED, ...LINKED]) {
    if (params[key] !== undefined && params[key] !== "") chosen[key] = params[key];
  }
  return chosen;
}

function address(query) {
  const text = new URLSearchParams(query).toString();
  return text ? `#/jobs?${text}` : "#/jobs";
}

function stateTabs(params) {
  const others = { ...filters(params) };
  delete others.state;
  const tab = (state, label) => h("a", {
    href: address(state ? { ...others, state } : others),
    class: (params.state || "") === state ? "active" : null,
    "data-state": state || "all",
  }, label);
  return h("nav", { class: "tabs", "aria-label": "States" }, tab("", "all"), STATES.map((s) => tab(s, s)));
}

function searchForm(params, ctx) {
  const input = (name, label, placeholder) => h("label", {}, label,
    h("input", { name, value: params[name] ?? "", placeholder, autocomplete: "off", spellcheck: "false" }));
  const form = h("form", { class: "search", role: "search", id: "job-search" },
    input("id", "Id", "42"),
    input("name", "Name", "email.*"),
    input("tag", "Tag", "customer-7"),
    input("queue", "Queue", "default"),
    h("button", { type: "submit", class: "primary" }, "Search"),
    h("a", { href: "#/jobs", class: "button" }, "Clear"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const id = String(data.get("id")).trim();
    if (id) {
      ctx.go(`#/jobs/${encodeURIComponent(id)}`);
      return;
    }
    const query = {};
    if (params.state) query.state = params.state;
    for (const key of SEARCHED) {
      const value = String(data.get(key)).trim();
      if (value) query[key] = value;
    }
    for (const key of LINKED) if (params[key]) query[key] = params[key];
    ctx.go(address(query));
  });
  return form;
}

/** Filters set by links from other views (a failure group, a parent), shown so that they can be removed. */
function linkedFilters(params) {
  const set = LINKED.filter((key) => params[key]);
  if (set.length === 0) return null;
  return h("p", { class: "chips" }, set.map((key) => {
    const rest = { ...filters(params) };
    delete rest[key];
    return h("a", { class: "chip", href: address(rest), title: "Remove this filter" }, `${key.replace("_", " ")}: ${params[key]} ×`);
  }));
}

function markField(form, apiField) {
  const name = FIELD_OF[apiField];
  for (const input of form.querySelectorAll("input")) {
    if (input.name === name) input.setAttribute("aria-invalid", "true");
    else input.removeAttribute("aria-invalid");
  }
}

function jobTable(page, params) {
  if (page.jobs.length === 0) return h("p", { class: "empty" }, "No jobs match.");
  const columns = [
    { label: "", class: "pick" },
    { label: "Id", class: "num" },
    { label: "Name", class: "name" },
    { label: "Queue" },
    { label: "State" },
    { label: "Priority", class: "num" },
    { label: "Attempts", class: "num" },
    { label: "Created" },
    { label: "Tags" },
  ];
  const rows = page.jobs.map((job) => ({
    attributes: { "data-job-id": job.id, "data-state": job.state },
    cells: [
      h("input", { type: "checkbox", "data-pick": job.id, "aria-label": `Select job #${job.id}` }),
      h("a", { href: `#/jobs/${job.id}` }, `#${job.id}`),
      h("a", { href: `#/jobs/${job.id}` }, job.name),
      h("a", { href: address({ queue: job.queue }) }, job.queue),
      job.suspended_at ? [badge(job.state), " ", h("span", { class: "badge state-suspended", title: "Its handler suspended it: it holds no worker" }, "suspended")] : badge(job.state),
      String(job.priority),
      `${job.attempt} / ${job.retry.max_attempts}`,
      timeElement(job.created_at),
      job.tags.map((tag) => h("a", { class: "chip", href: address({ tag }) }, tag)),
    ],
  }));
  const rest = filters(params);
  const paging = h("p", { class: "paging" },
    params.before ? h("a", { href: address(rest) }, "← Newest") : null,
    page.next !== null ? h("a", { href: address({ ...rest, before: page.next }), "data-page": "older" }, "Older →") : null);
  return [table(columns, rows, { class: "stack jobs" }), paging];
}

/** The filter of the address as `POST /v1/jobs/bulk` takes it. */
function bulkFilter(params) {
  const filter = filters(params);
  if (filter.parent !== undefined) filter.parent = Number(filter.parent);
  if (filter.batch !== undefined) filter.batch = Number(filter.batch);
  if (filter.tracked !== undefined) filter.tracked = filter.tracked === "true";
  return filter;
}

/** The filter in words, for the question before acting on all it matches. */
function filterWords(params) {
  const set = Object.entries(filters(params));
  if (set.length === 0) return "No filter: every job on the server.";
  return `The filter: ${set.map(([key, value]) => `${key.replace("_", " ")} ${value}`).join(", ")}.`;
}

/**
 * How many jobs the filter matches, where the API counts them (by queue and state: `GET /v1/queues`; a failure
 * group: `GET /v1/failures`); null otherwise. A count of the moment: the action answers with what it found.
 */
async function matching(params) {
  const filter = filters(params);
  const keys = Object.keys(filter);
  if (keys.every((key) => key === "queue" || key === "state")) {
    const body = await get("/v1/queues");
    // A stalled job is a running one whose lease ran out: the list shows it as running.
    let states = COUNTED;
    if (filter.state === "running") states = ["running", "stalled"];
    else if (filter.state !== undefined) states = [filter.state];
    return body.queues.filter((q) => filter.queue === undefined || q.queue === filter.queue)
      .reduce((sum, q) => sum + states.reduce((n, state) => n + (q[state] ?? 0), 0), 0);
  }
  if (keys.every((key) => key === "failure_group" || key === "state") && (filter.state ?? "failed") === "failed") {
    const body = await get("/v1/failures");
    const group = body.groups.find((g) => g.group === filter.failure_group);
    return group ? group.count : 0;
  }
  return null;
}

/** `n` jobs in words: "1 job", "10,000 jobs". */
export function jobs(n) {
  return `${count(n)} ${n === 1 ? "job" : "jobs"}`;
}

/** What a bulk action's answer says, in words: "Cancelled 10,000 jobs", and those skipped. */
export function bulkOutcome(action, answer, queue) {
  const done = {
    cancel: `Cancelled ${jobs(answer.done)}`,
    delete: `Deleted ${jobs(answer.done)}`,
    retry: `Retried ${jobs(answer.done)}`,
    move: `Moved ${jobs(answer.done)} to queue ${queue}`,
  }[action];
  const why = {
    cancel: "gone, or already completed or cancelled",
    delete: "gone",
    retry: "gone, or not ended",
    move: "gone, or running",
  }[action];
  return answer.skipped > 0 ? `${done}; skipped ${jobs(answer.skipped)} (${why})` : done;
}

/**
 * The bar above the list: a box that selects the page, what is selected, the offer to select every job the filter
 * matches when there is more than a page, and the actions. Built once per view and updated in place, so that a
 * refresh keeps a queue name being typed.
 */
function bulkBar(params, ctx, picked, currentPage, changed) {
  let busy = false;
  const pageBox = h("input", { type: "checkbox", id: "bulk-page" });
  const said = h("span", { id: "bulk-count" });
  const allButton = h("button", { type: "button", class: "link", id: "bulk-all" });
  const clearButton = h("button", { type: "button", class: "link", id: "bulk-clear" }, "Clear selection");
  const button = (action, label, title, danger) => h("button", {
    type: "button", class: danger ? "danger" : null, "data-bulk": action, title,
    onclick: (event) => act(action, event.currentTarget),
  }, label);
  const buttons = [
    button("retry", "Retry", "Run again the selected jobs that ended (failed, cancelled or completed)", false),
    button("cancel", "Cancel…", "Cancel the selected jobs that have not ended, and failed ones", true),
    button("delete", "Delete…", "Delete the selected jobs and their history", true),
  ];
  const queueInput = h("input", {
    name: "queue", placeholder: "queue", "aria-label": "Move to queue", autocomplete: "off", spellcheck: "false", required: true,
  });
  const moveButton = h("button", { type: "submit", "data-bulk": "move", title: "Move the selected jobs that are not running to this queue" }, "Move");
  const moveForm = h("form", { class: "change", id: "bulk-move" }, queueInput, moveButton);
  moveForm.addEventListener("submit", (event) => {
    event.preventDefault();
    act("move", moveButton, queueInput.value.trim());
  });
  const element = h("div", { class: "bulk", id: "bulk", hidden: true },
    h("div", { class: "bulk-pick" }, h("label", {}, pageBox, "Select page"), said, allButton, clearButton),
    h("div", { class: "bulk-actions" }, buttons, moveForm));

  const clear = () => {
    picked.all = false;
    picked.ids.clear();
    picked.total = undefined;
    changed();
  };
  pageBox.addEventListener("change", () => {
    const page = currentPage();
    if (!pageBox.checked || !page) clear();
    else {
      picked.ids = new Set(page.jobs.map((job) => job.id));
      changed();
    }
  });
  allButton.addEventListener("click", () => {
    picked.all = true;
    changed();
  });
  clearButton.addEventListener("click", clear);

  /** Whether `action` applies to any job selected: the page's states, or the filter's state for all. */
  const applies = (action) => {
    if (action === "delete") return true;
    const allowed = ALLOWED[action === "retry" ? "requeue" : action];
    if (picked.all) return !params.state || allowed.includes(params.state);
    const page = currentPage();
    return page !== null && page.jobs.some((job) => picked.ids.has(job.id) && allowed.includes(job.state));
  };

  function update() {
    const page = currentPage();
    element.hidden = page === null || page.jobs.length === 0;
    if (element.hidden) return;
    const wholePage = page.jobs.every((job) => picked.ids.has(job.id));
    pageBox.checked = picked.all || wholePage;
    pageBox.indeterminate = !pageBox.checked && picked.ids.size > 0;
    const more = page.next !== null || params.before !== undefined;
    allButton.hidden = picked.all || !wholePage || !more;
    if (!allButton.hidden && picked.total === undefined) {
      picked.total = null;
      matching(params).then((total) => { picked.total = total; }, () => {}).finally(update);
    }
    if (!pageBox.checked && !pageBox.indeterminate) picked.total = undefined;
    const total = picked.total ?? null;
    allButton.textContent = total !== null ? `Select all ${count(total)} jobs matching this filter` : "Select every job matching this filter";
    if (picked.all) {
      said.textContent = total !== null ? `All ${jobs(total)} matching this filter are selected.` : "Every job matching this filter is selected.";
    } else {
      said.textContent = picked.ids.size > 0 ? `${count(picked.ids.size)} selected` : "";
    }
    clearButton.hidden = !picked.all && picked.ids.size === 0;
    const none = !picked.all && picked.ids.size === 0;
    for (const b of [...buttons, moveButton]) b.disabled = busy || none || !applies(b.dataset.bulk);
    queueInput.disabled = busy || none || !applies("move");
  }

  /** Asks first for cancel and delete, then makes the one call, then says what the server did. */
  async function act(action, target, queue) {
    const total = picked.all ? picked.total ?? null : picked.ids.size;
    const what = picked.all
      ? (total !== null ? `all ${jobs(total)} matching this filter` : "every job matching this filter")
      : `${count(total)} selected ${total === 1 ? "job" : "jobs"}`;
    const scope = picked.all ? `${filterWords(params)} ` : "";
    const yes = (verb) => (total !== null ? `${verb} ${jobs(total)}` : `${verb} the jobs`);
    const questions = {
      cancel: {
        question: `Cancel ${what}?`,
        detail: `${scope}Those not started will not run, running ones' workers are refused from then on, and their live children and the jobs that wait for them are cancelled too. Completed and cancelled ones are skipped. Retry brings them back.`,
        yes: yes("Cancel"),
      },
      delete: {
        question: `Delete ${what}?`,
        detail: `${scope}They go for good, with their history. Those that have not ended are cancelled first, with their live children and the jobs that wait for them.`,
        yes: yes("Delete"),
      },
    };
    if (questions[action] && !(await confirmDialog(questions[action]))) return;
    const body = { action };
    if (action === "move") body.queue = queue;
    if (picked.all) body.filter = bulkFilter(params);
    else body.ids = [...picked.ids];
    busy = true;
    update();
    const worked = await ctx.act(() => post("/v1/jobs/bulk", body), (answer) => bulkOutcome(action, answer, queue), target);
    busy = false;
    if (worked) {
      if (action === "move") queueInput.value = "";
      clear();
    } else {
      update();
    }
  }

  return { element, update };
}
