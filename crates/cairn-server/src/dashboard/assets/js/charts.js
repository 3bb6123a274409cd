// Charts drawn as inline SVG, with no library: bars over time (stacked, with an optional line), lines over time,
// histograms, and horizontal meters. Each function takes plain numbers and returns an <svg> sized in real pixels
// for the width it is given; colours come from the stylesheet through the classes `s-KEY`. Axis labels are short
// (one unit: `500 d`, `20K`) and measured: the gutter left of the plot is as wide as its widest label, and labels
// under it keep apart and inside the chart, at any width.

import { compactCount, compactDuration, inUnit, unitFor } from "./format.js";

const NS = "http://www.w3.org/2000/svg";
const HEIGHT = 200;
const MARGIN = { top: 10, right: 12, bottom: 24 };
/** The axis labels' font size, as the stylesheet sets it for `.chart .axis`. */
const AXIS_FONT_PX = 11;
/** Between a y label and the plot; around each x label. */
const LABEL_GAP = 6;

/** An SVG element with attributes and children (strings become text). */
export function svg(tag, attributes = {}, ...children) {
  const element = document.createElementNS(NS, tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value !== null && value !== undefined) element.setAttribute(name, String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return element;
}

/** The smallest of 1, 2 or 5 times a power of ten that is at least `max`, so that axis labels are round. */
export function niceMax(max) {
  if (!(max > 0)) return 1;
  const power = 10 ** Math.floor(Math.log10(max));
  const step = [1, 2, 5, 10].find((f) => f * power >= max);
  return step * power;
}

let measuring = null;

/** How wide `text` is in pixels at the axis labels' size, in the page's font. */
export function textWidth(text) {
  if (measuring === null) {
    measuring = document.createElement("canvas").getContext("2d") ?? false;
    if (measuring) measuring.font = `${AXIS_FONT_PX}px ${getComputedStyle(document.documentElement).fontFamily}`;
  }
  // Without a canvas: about what a digit takes, on the wide side.
  return measuring ? measuring.measureText(text).width : text.length * AXIS_FONT_PX * 0.62;
}

/**
 * A y axis from 0 to at least `max`: its ticks (`{ value, label }`, 0 first) at round numbers, quarters of a 2 and
 * fifths of a 1 or 5 times a power of ten. Durations (`kind` "duration", in milliseconds) count in the one unit that
 * keeps labels short, their top round in that unit (`500 d`, not `472 d 5 h`).
 */
export function axisTicks(max, kind = "count") {
  const [unit, size] = kind === "duration" ? unitFor(max) : [null, 1];
  const top = niceMax(max / size);
  const mantissa = Math.round(top / 10 ** Math.floor(Math.log10(top)));
  const steps = mantissa === 2 ? 4 : 5;
  const ticks = [];
  for (let i = 0; i <= steps; i += 1) {
    // Rounded, so that 0.1 + 0.2 steps print as 0.3.
    const value = Number(((top * i) / steps).toPrecision(12));
    ticks.push({ value: value * size, label: unit ? inUnit(value, unit) : compactCount(value) });
  }
  return ticks;
}

/** An empty chart: the root, and the plotting area's box, its left gutter as wide as the y axis's widest label. */
function frame(width, label, ticks) {
  const left = Math.ceil(Math.max(0, ...ticks.map((t) => textWidth(t.label)))) + LABEL_GAP + 4;
  const plot = {
    left,
    top: MARGIN.top,
    width: Math.max(10, width - left - MARGIN.right),
    height: HEIGHT - MARGIN.top - MARGIN.bottom,
  };
  plot.bottom = plot.top + plot.height;
  plot.right = plot.left + plot.width;
  const root = svg("svg", {
    class: "chart", width, height: HEIGHT, viewBox: `0 0 ${width} ${HEIGHT}`, role: "img", "aria-label": label,
  });
  return { root, plot };
}

/** Horizontal grid lines and their labels, at `ticks` (from `axisTicks`). Returns the value → y function. */
function yAxis(root, plot, ticks) {
  const top = ticks[ticks.length - 1].value;
  const y = (value) => plot.bottom - (value / top) * plot.height;
  for (const tick of ticks) {
    root.append(
      svg("line", { class: "grid", x1: plot.left, x2: plot.right, y1: y(tick.value), y2: y(tick.value) }),
      svg("text", { class: "axis", x: plot.left - LABEL_GAP, y: y(tick.value) + 4, "text-anchor": "end" }, tick.label),
    );
  }
  return y;
}

/**
 * Labels under the plot for `count` evenly spaced slots: those for which `label(i)` gives text (null: no label
 * there), each clear of the last by a gap and moved in where it would stick out of the chart. Returns a slot's
 * width.
 */
function xAxis(root, plot, count, label, chartWidth) {
  const band = plot.width / count;
  let lastRight = -Infinity;
  for (let i = 0; i < count; i += 1) {
    const centre = plot.left + band * (i + 0.5);
    // Not even asked for a label where none could fit.
    if (centre - lastRight < LABEL_GAP * 2) continue;
    const text = label(i);
    if (text === null) continue;
    const half = textWidth(text) / 2;
    const x = Math.min(Math.max(centre, half + 1), chartWidth - half - 1);
    if (x - half < lastRight + LABEL_GAP * 2) continue;
    root.append(svg("text", { class: "axis", x, y: plot.bottom + 16, "text-anchor": "middle" }, text));
    lastRight = x + half;
  }
  return band;
}

function emptyNote(root, plot, text) {
  root.append(svg("text", {
    class: "empty-note", x: plot.left + plot.width / 2, y: plot.top + plot.height / 2, "text-anchor": "middle",
  }, text));
}

/**
 * Stacked bars per time bucket, and an optional line over them.
 * @param {object} o
 * @param {object[]} o.series the buckets, oldest first
 * @param {{key: string, label: string}[]} o.stacks the values stacked in each bar, bottom first
 * @param {{key: string, label: string}} [o.line] a value drawn as a line across the buckets
 * @param {(i: number) => string | null} o.tick the axis label of bucket i, if it gets one
 * @param {(i: number) => string} o.label bucket i in full, for its tooltip
 */
export function stackedBars({ width, series, stacks, line, tick, label, format = String, title }) {
  const total = (point) => stacks.reduce((sum, s) => sum + (point[s.key] || 0), 0);
  const highest = Math.max(0, ...series.map((p) => Math.max(total(p), line ? p[line.key] || 0 : 0)));
  const ticks = axisTicks(Math.max(highest, 5));
  const { root, plot } = frame(width, title, ticks);
  const y = yAxis(root, plot, ticks);
  const band = xAxis(root, plot, series.length, tick, width);
  const barWidth = Math.max(1, band * 0.72);
  series.forEach((point, i) => {
    const x = plot.left + band * i + (band - barWidth) / 2;
    let base = 0;
    const group = svg("g", { class: "bucket" });
    for (const stack of stacks) {
      const value = point[stack.key] || 0;
      if (value > 0) {
        group.append(svg("rect", {
          class: `bar s-${stack.key}`, x, width: barWidth, y: y(base + value), height: y(base) - y(base + value),
        }));
      }
      base += value;
    }
    // One hover area per bucket, the whole height, so that a tooltip shows even over an empty bucket.
    const parts = [...stacks, ...(line ? [line] : [])].map((s) => `${s.label} ${format(point[s.key] || 0)}`);
    group.append(svg("rect", { class: "hover", x: plot.left + band * i, width: band, y: plot.top, height: plot.height },
      svg("title", {}, `${label(i)}: ${parts.join(", ")}`)));
    root.append(group);
  });
  if (line) root.append(path(series.map((p) => p[line.key] ?? 0), plot, band, y, `line s-${line.key}`));
  if (highest === 0) emptyNote(root, plot, "nothing in this period");
  return root;
}

/** A line through the non-null values, broken where a value is null. */
function path(values, plot, band, y, cls) {
  let d = "";
  let open = false;
  values.forEach((value, i) => {
    if (value === null || value === undefined) {
      open = false;
      return;
    }
    d += `${open ? "L" : "M"}${(plot.left + band * (i + 0.5)).toFixed(1)},${y(value).toFixed(1)}`;
    open = true;
  });
  return svg("path", { class: cls, d: d || "M0,0" });
}

/**
 * Lines over time buckets; null values leave gaps (no job in that bucket). `tick` and `label` as for `stackedBars`;
 * `axis` "duration" for values in milliseconds.
 * @param {{key: string, label: string}[]} o.lines
 */
export function lines({ width, series, lines: drawn, tick, label, format = String, title, axis = "count" }) {
  const values = drawn.flatMap((l) => series.map((p) => p[l.key])).filter((v) => v !== null && v !== undefined);
  const ticks = axisTicks(Math.max(5, ...values), axis);
  const { root, plot } = frame(width, title, ticks);
  const y = yAxis(root, plot, ticks);
  const band = xAxis(root, plot, series.length, tick, width);
  for (const l of drawn) {
    root.append(path(series.map((p) => p[l.key]), plot, band, y, `line s-${l.key}`));
    const missing = (i) => series[i] === undefined || series[i][l.key] === null || series[i][l.key] === undefined;
    series.forEach((point, i) => {
      const value = point[l.key];
      if (missing(i)) return;
      // With many points the line says it all; a point with no neighbour has no line, so it gets a dot.
      if (series.length > 60 && !missing(i - 1) && !missing(i + 1)) return;
      root.append(svg("circle", { class: `dot s-${l.key}`, cx: plot.left + band * (i + 0.5), cy: y(value), r: 2.5 },
        svg("title", {}, `${label(i)}: ${l.label} ${format(value)}`)));
    });
  }
  if (values.length === 0) emptyNote(root, plot, "no jobs in this period");
  return root;
}

/**
 * A histogram of durations: one bar per non-empty bucket, in order, labelled under it by where it starts.
 * `format` writes a duration in full, for the tooltips.
 * @param {{from_ms: number, to_ms: number, count: number}[]} o.buckets
 */
export function histogram({ width, buckets, format, title, cls = "s-histogram" }) {
  const ticks = axisTicks(Math.max(5, ...buckets.map((b) => b.count)));
  const { root, plot } = frame(width, title, ticks);
  const y = yAxis(root, plot, ticks);
  if (buckets.length === 0) {
    emptyNote(root, plot, "no jobs in this period");
    return root;
  }
  const band = xAxis(root, plot, buckets.length, (i) => compactDuration(buckets[i].from_ms), width);
  const barWidth = Math.max(1, band * 0.8);
  buckets.forEach((bucket, i) => {
    const x = plot.left + band * i + (band - barWidth) / 2;
    root.append(svg("rect", {
      class: `bar ${cls}`, x, width: barWidth, y: y(bucket.count), height: plot.bottom - y(bucket.count),
    }, svg("title", {}, `${format(bucket.from_ms)} to ${format(bucket.to_ms)}: ${bucket.count} jobs`)));
  });
  return root;
}

/**
 * Horizontal meters, one row per item, for fractions from 0 to 1 (null: unknown).
 * @param {{label: string, value: number | null, text: string}[]} o.items
 */
export function meters({ width, items, title }) {
  const row = 24;
  const labelWidth = Math.min(180, width * 0.4);
  const barLeft = labelWidth + 8;
  const barWidth = Math.max(20, width - barLeft - 60);
  const height = Math.max(row, items.length * row);
  const root = svg("svg", {
    class: "chart", width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": title,
  });
  items.forEach((item, i) => {
    const top = i * row;
    const fraction = Math.min(1, Math.max(0, item.value ?? 0));
    root.append(
      svg("text", { class: "axis label", x: labelWidth, y: top + 16, "text-anchor": "end" }, clip(item.label, labelWidth)),
      svg("rect", { class: "track", x: barLeft, y: top + 5, width: barWidth, height: 14, rx: 3 }),
      svg("rect", { class: "bar s-utilization", x: barLeft, y: top + 5, width: barWidth * fraction, height: 14, rx: 3 },
        svg("title", {}, `${item.label}: ${item.text}`)),
      svg("text", { class: "axis", x: barLeft + barWidth + 6, y: top + 16 }, item.text),
    );
  });
  return root;
}

/** `text` shortened to about what fits in `pixels` at the axis font size. */
function clip(text, pixels) {
  const fits = Math.max(4, Math.floor(pixels / 7));
  return text.length > fits ? `${text.slice(0, fits - 1)}…` : text;
}

/** A legend for the series drawn with classes `s-KEY`. */
export function legend(entries) {
  const list = document.createElement("ul");
  list.className = "legend";
  for (const entry of entries) {
    const item = document.createElement("li");
    const swatch = document.createElement("span");
    swatch.className = `swatch s-${entry.key}`;
    item.append(swatch, entry.label);
    list.append(item);
  }
  return list;
}
