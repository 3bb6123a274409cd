// Jobs by state, searched by name (a GLOB such as `email.*`), tag, queue or id. The search goes to the API as typed:
// the server judges it, and its error (naming the field) shows under the form.

import { get } from "../api.js";
import { h, fill, table, redraw, errorBox, badge } from "../dom.js";
import { timeElement } from "../format.js";

const STATES = ["queued", "scheduled", "waiting", "running", "failed", "completed", "cancelled"];
/** Filters the address may carry besides `state`: the form's fields, then those set by links from other views. */
const SEARCHED = ["name", "tag", "queue"];
const LINKED = ["failure_group", "parent", "tracked"];
/** The form field that shows an error about each API field (a bad `name` pattern is reported as `names`). */
const FIELD_OF = { names: "name", name_pattern: "name", name: "name", tag: "tag", queue: "queue" };
const PAGE = 50;

export function mount(root, params, ctx) {
  const results = h("div", { id: "job-list" });
  const form = searchForm(params, ctx);
  fill(root, h("h1", {}, "Jobs"), stateTabs(params), form, linkedFilters(params), results);
  return {
    // Only the jobs the list could show: the stream filters by queue and name as the list does.
    follow: { queue: params.queue, name: params.name },
    concerns: (event) => event.job !== null && event.job !== undefined,
    async refresh() {
      let page;
      try {
        page = await get("/v1/jobs", { ...filters(params), before: params.before, limit: PAGE });
      } catch (error) {
        if (error.kind !== "invalid_input") throw error;
        markField(form, error.field);
        redraw(results, { error: error.message }, () => errorBox(error, { id: "search-error" }));
        return;
      }
      markField(form, null);
      redraw(results, page, () => jobTable(page, params));
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
      h("a", { href: `#/jobs/${job.id}` }, `#${job.id}`),
      h("a", { href: `#/jobs/${job.id}` }, job.name),
      h("a", { href: address({ queue: job.queue }) }, job.queue),
      badge(job.state),
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
