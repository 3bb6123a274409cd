// Failure groups: failed jobs gathered by why they failed, each with a link to its jobs and a bulk retry (unfail:
// every job of the group back to its queue with fresh attempts, in one statement on the server).

import { get, post, segment } from "../api.js";
import { h, fill, table, redraw } from "../dom.js";
import { count, timeElement } from "../format.js";

/** The events that change failure groups: a job failed, or left its group (retried, run again, cancelled, deleted). */
export const FAILURE_EVENTS = ["failed", "unfailed", "requeued", "cancelled"];
/** The same from servers that log deletes and moves apart (a failed job moved runs again): older ones refuse them. */
export const FAILURE_EVENTS_LATER = ["deleted", "moved"];

export function mount(root, _params, ctx) {
  const list = h("div", { id: "failure-list" });
  fill(root,
    h("h1", {}, "Failure groups"),
    h("p", { class: "hint" }, "A group is the reason a worker gave when it failed a job, or retries-exhausted. ",
      "Retrying a group puts all of its jobs back in their queues with fresh attempts; their history is kept."),
    list);
  return {
    follow: { kinds: FAILURE_EVENTS.join(","), later: FAILURE_EVENTS_LATER },
    async refresh() {
      const body = await get("/v1/failures");
      redraw(list, body, () => failureTable(body.groups, ctx));
    },
  };
}

export function failureTable(groups, ctx) {
  if (groups.length === 0) return h("p", { class: "empty" }, "No failed jobs.");
  const columns = [
    { label: "Group", class: "name" },
    { label: "Jobs", class: "num" },
    { label: "First failed" },
    { label: "Last failed" },
    { label: "", class: "actions" },
  ];
  const rows = groups.map((g) => ({
    attributes: { "data-group": g.group },
    cells: [
      h("a", { href: `#/jobs?${new URLSearchParams({ state: "failed", failure_group: g.group })}` }, g.group),
      count(g.count),
      timeElement(g.first_failed_at),
      timeElement(g.last_failed_at),
      h("button", {
        type: "button",
        class: "primary",
        "data-action": "unfail",
        "data-group": g.group,
        onclick: (event) => ctx.act(
          () => post(`/v1/failures/${segment(g.group)}/unfail`, {}),
          (result) => `${g.group}: ${count(result.moved)} ${result.moved === 1 ? "job" : "jobs"} back in their queues`,
          event.currentTarget),
      }, `Retry all ${count(g.count)}`),
    ],
  }));
  return table(columns, rows, { class: "stack failures" });
}
