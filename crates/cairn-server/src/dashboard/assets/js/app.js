// The dashboard's shell: which view the address shows (`#/jobs?state=failed`, `#/jobs/42`, …), what keeps it live
// (the event stream, or polling while the stream is down), the notice line for errors and results, and the token
// dialog when the API answers 401.

import { ApiError, get, token } from "./api.js";
import { Live } from "./live.js";
import { askForToken, setUpForget } from "./token.js";
import { fill, h } from "./dom.js";
import * as queues from "./views/queues.js";
import * as jobs from "./views/jobs.js";
import * as job from "./views/job.js";
import * as failures from "./views/failures.js";
import * as workers from "./views/workers.js";
import * as stats from "./views/stats.js";
import * as recurring from "./views/recurring.js";
import * as batches from "./views/batches.js";
import * as batch from "./views/batch.js";

const VIEWS = { queues, jobs, job, failures, workers, stats, recurring, batches, batch };
/** The views of one thing (`#/jobs/42`, `#/batches/3`), under the section of the list they belong to. */
const ONE = { jobs: "job", batches: "batch" };
const SECTION = Object.fromEntries(Object.entries(ONE).map(([list, one]) => [one, list]));

/** The view and its parameters for an address such as `#/jobs?state=failed`, `#/jobs/42` or `#/batches/3`. */
function parseRoute(hash) {
  const raw = hash.replace(/^#\/?/, "");
  const mark = raw.indexOf("?");
  const path = mark < 0 ? raw : raw.slice(0, mark);
  const params = Object.fromEntries(new URLSearchParams(mark < 0 ? "" : raw.slice(mark + 1)));
  const parts = path.split("/").filter(Boolean);
  if (Object.hasOwn(ONE, parts[0]) && parts.length > 1) {
    return { view: ONE[parts[0]], params: { ...params, id: decodeURIComponent(parts.slice(1).join("/")) } };
  }
  const view = Object.hasOwn(VIEWS, parts[0]) && !Object.hasOwn(SECTION, parts[0]) ? parts[0] : "queues";
  return { view, params };
}

const main = document.getElementById("main");
const notice = document.getElementById("notice");
const indicator = document.getElementById("live");
let current = null;
let version = null;
/** The token the page last asked the server about (`GET /v1/token`), and so whose role it shows; `undefined` before. */
let identityOf;

/** Shows an error (or, with `ok`, a result) above the view. Poll errors go away when polling works again. */
function notify(message, { ok = false, source = "action" } = {}) {
  notice.hidden = false;
  notice.dataset.source = source;
  notice.className = ok ? "notice ok" : "notice";
  const text = message instanceof ApiError
    ? [h("strong", {}, message.kind), " ", message.message, message.field ? ` (field: ${message.field})` : ""]
    : [String(message && message.message ? message.message : message)];
  fill(notice, ...text, h("button", { type: "button", class: "link close", "aria-label": "Dismiss", onclick: () => { notice.hidden = true; } }, "×"));
}

/** What views get: ways to act, to move, and to refresh now. */
const ctx = {
  /**
   * Runs an action (a POST or DELETE): with the token dialog first if the server wants one, then a refresh, or with
   * `then` a move to that address (the result's notice goes along). Its result or its error shows in the notice
   * line; the button is disabled meanwhile. After a refusal (the job moved on since the page last looked, say) the
   * view is refreshed too, so that it shows what is true now beside the API's error. Resolves to whether it worked.
   */
  async act(action, describe, button, { then } = {}) {
    if (button) button.disabled = true;
    try {
      let result;
      try {
        result = await action();
      } catch (error) {
        if (error.kind !== "unauthorized") throw error;
        await askForToken(token() !== null);
        result = await action();
      }
      const message = typeof describe === "function" ? describe(result) : describe;
      if (then && location.hash !== then) {
        notify(message, { ok: true, source: "carried" });
        location.hash = then;
      } else {
        notify(message, { ok: true });
        await live.now();
      }
      return true;
    } catch (error) {
      notify(error);
      if (error.status >= 400 && error.status < 500) await live.now();
      return false;
    } finally {
      if (button) button.disabled = false;
    }
  },
  go(hash) {
    if (location.hash === hash) live.now();
    else location.hash = hash;
  },
  refreshNow: () => live.now(),
};

/** A view's refresh, for the events given (or null: all of it), with what the shell adds around it. */
async function refresh(mine, events) {
  if (version === null) {
    // Without the token, a server that has tokens answers that it is up, without its version: ask again later.
    const health = await get("/v1/health");
    version = health.version ?? null;
    if (version !== null) document.getElementById("version").textContent = `Cairn ${version}`;
  }
  if (identityOf !== token()) await showIdentity();
  await mine.instance.refresh(events);
  if (current === mine) {
    mine.root.dataset.loaded = "true";
    if (notice.dataset.source === "poll") notice.hidden = true;
  }
}

/**
 * Asks the server who the token is, and shows it: its name and role at the foot, and, for any role but admin (which
 * alone may change things from here), the page without its buttons and forms (see `body.read-only`).
 */
async function showIdentity() {
  const asked = token();
  const me = await get("/v1/token");
  identityOf = asked;
  const readOnly = me.role !== "admin";
  document.body.classList.toggle("read-only", readOnly);
  document.body.dataset.role = me.role;
  const label = document.getElementById("role");
  label.hidden = !me.name;
  // A token limited to some queues says which: the views over every queue refuse it.
  const queues = me.queues ? ` (queues ${me.queues.join(", ")})` : "";
  label.textContent = me.name ? `token “${me.name}”, ${me.role}${queues}${readOnly ? ": read-only here" : ""}` : "";
}

/** What the indicator in the bar says, and its tooltip. */
const STATES = {
  live: ["live", "Following the server's events: the page changes as the jobs do"],
  polling: ["polling", "The server's event stream is not up: refreshing every few seconds while it reconnects"],
  paused: ["paused", "Paused while this tab is hidden"],
  error: ["offline", "The server did not answer the last refresh"],
};

function stateChanged(state, error) {
  indicator.dataset.state = state;
  [indicator.textContent, indicator.title] = STATES[state];
  if (state !== "error") return;
  if (error.kind === "unauthorized") {
    live.stop();
    askForToken(token() !== null).then(() => live.start());
    return;
  }
  notify(error, { source: "poll" });
}

const live = new Live(stateChanged);

function show() {
  const route = parseRoute(location.hash);
  const root = h("div", { class: "view", "data-view": route.view });
  fill(main, root);
  document.body.dataset.view = route.view;
  const section = SECTION[route.view] ?? route.view;
  for (const link of document.querySelectorAll("#nav a")) {
    link.classList.toggle("active", link.dataset.view === section);
  }
  // The result of the action that led here stays; any other action's notice was about the view left.
  if (notice.dataset.source === "carried") notice.dataset.source = "action";
  else if (notice.dataset.source === "action") notice.hidden = true;
  const mine = { root };
  mine.instance = VIEWS[route.view].mount(root, route.params, ctx);
  current = mine;
  live.show({
    refresh: (events) => refresh(mine, events),
    interval: mine.instance.interval,
    gap: mine.instance.gap,
    follow: mine.instance.follow,
    concerns: mine.instance.concerns,
  });
}

setUpForget(() => {
  version = null;
  live.start();
});
window.addEventListener("hashchange", show);
show();
