// Building DOM nodes without HTML strings: nothing the server sends is ever parsed as markup.

/**
 * An element: `h("a", { href: "#/jobs", class: "x", onclick: f }, "text", child, [more])`.
 * Attributes whose value is null, undefined or false are left out; `true` sets an empty attribute.
 */
export function h(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  setAttributes(element, attributes);
  append(element, children);
  return element;
}

export function setAttributes(element, attributes) {
  for (const [name, value] of Object.entries(attributes || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") {
      element.addEventListener(name.slice(2), value);
    } else {
      element.setAttribute(name, value === true ? "" : String(value));
    }
  }
}

export function append(element, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return element;
}

/** Replaces what `element` holds with `children`. */
export function fill(element, ...children) {
  element.replaceChildren();
  return append(element, children);
}

/** A table whose cells carry their column's name, so that narrow screens can show each row as a card. */
export function table(columns, rows, attributes = {}) {
  const head = h("thead", {}, h("tr", {}, columns.map((c) => h("th", { scope: "col", class: c.class }, c.label))));
  const body = h("tbody", {}, rows.map(({ cells, attributes: rowAttributes }) =>
    h("tr", rowAttributes, cells.map((cell, i) =>
      h("td", { "data-label": columns[i].label, class: columns[i].class }, cell)))));
  return h("div", { class: "table-wrap" }, h("table", { class: "stack", ...attributes }, head, body));
}

/** The API's error as people read it: the message names the field; the kind says what sort of error it is. */
export function errorBox(error, attributes = {}) {
  return h("div", { class: "error-box", role: "alert", "data-error-kind": error.kind ?? "", ...attributes },
    h("strong", {}, error.kind ?? "error"), " ", error.message,
    error.field ? h("span", { class: "field" }, ` (field: ${error.field})`) : null);
}

export function badge(state) {
  return h("span", { class: `badge state-${state}` }, state);
}

/**
 * Redraws `region` with `render()` only when `data` differs from what it last showed, so that a poll that brings
 * nothing new leaves the page alone (no flicker, no lost hover, no button replaced under the pointer).
 */
export function redraw(region, data, render) {
  const key = JSON.stringify(data);
  if (region.dataset.key === key) return;
  fill(region, render());
  region.dataset.key = key;
}

/**
 * Asks before an action that cannot be undone: a modal dialog with `question`, what follows in `detail`, and two
 * buttons. Resolves true when `yes` was chosen; `no`, Escape or closing it otherwise resolve false. The safe answer
 * has the focus, so that Enter keeps things as they are.
 */
export function confirmDialog({ question, detail, yes, no = "Keep it" }) {
  return new Promise((resolve) => {
    const dialog = h("dialog", { id: "confirm-dialog", class: "confirm" },
      h("form", { method: "dialog" },
        h("h2", {}, question),
        detail ? h("p", {}, detail) : null,
        h("div", { class: "dialog-buttons" },
          h("button", { type: "submit", value: "no", autofocus: true }, no),
          h("button", { type: "submit", value: "yes", class: "danger primary" }, yes))));
    dialog.addEventListener("close", () => {
      dialog.remove();
      resolve(dialog.returnValue === "yes");
    });
    document.body.append(dialog);
    dialog.showModal();
  });
}
