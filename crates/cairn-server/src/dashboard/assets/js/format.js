// Numbers, times and durations as the dashboard shows them.

const integer = new Intl.NumberFormat(undefined, { maximumFractionDigits: 0 });

export function count(n) {
  return n === null || n === undefined ? "–" : integer.format(n);
}

/** A duration in milliseconds, in the largest units that keep it short: `850 ms`, `12.3 s`, `4 min 10 s`. */
export function duration(ms) {
  if (ms === null || ms === undefined || Number.isNaN(ms)) return "–";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s < 10 && !Number.isInteger(s) ? s.toFixed(1) : Math.round(s)} s`;
  const units = [["d", 86400], ["h", 3600], ["min", 60], ["s", 1]];
  let rest = Math.round(s);
  const parts = [];
  for (const [name, size] of units) {
    if (rest >= size) {
      parts.push(`${Math.floor(rest / size)} ${name}`);
      rest %= size;
    }
    if (parts.length === 2) break;
  }
  return parts.join(" ");
}

/** The units a duration may be counted in, smallest first. */
export const UNITS = [["ms", 1], ["s", 1000], ["min", 60000], ["h", 3600000], ["d", 86400000]];

/** The largest unit of which `ms` makes at least one (milliseconds for less than a second). */
export function unitFor(ms) {
  return UNITS.reduce((chosen, unit) => (Math.abs(ms) >= unit[1] ? unit : chosen), UNITS[0]);
}

const short = new Intl.NumberFormat(undefined, { maximumFractionDigits: 1 });

/**
 * A duration in one unit, short enough for a chart's axis: `850 ms`, `4.2 min`, `472 d` (where `duration` says
 * `472 d 5 h`): a decimal below ten of the unit, whole numbers above.
 */
export function compactDuration(ms) {
  if (ms === null || ms === undefined || Number.isNaN(ms)) return "–";
  if (ms === 0) return "0";
  const [name, size] = unitFor(ms);
  const value = ms / size;
  return `${short.format(Math.abs(value) < 10 ? value : Math.round(value))} ${name}`;
}

/** `value` of `unit` (a name of `UNITS`) on an axis: `0.5 h`, `500 d`. */
export function inUnit(value, unit) {
  return value === 0 ? "0" : `${short.format(value)} ${unit}`;
}

const compact = new Intl.NumberFormat(undefined, { notation: "compact", maximumFractionDigits: 1 });

/** A count on an axis: in full up to 9,999, then `10K`, `1.5M`. */
export function compactCount(n) {
  return Math.abs(n) < 10000 ? integer.format(n) : compact.format(n);
}

export function percent(fraction) {
  return fraction === null || fraction === undefined ? "–" : `${Math.round(fraction * 100)} %`;
}

/** A time: the clock time today, the date too otherwise. Absolute, so that a view that is not redrawn stays true. */
export function when(iso) {
  if (!iso) return "–";
  const date = new Date(iso);
  const today = new Date();
  const sameDay = date.toDateString() === today.toDateString();
  return sameDay
    ? date.toLocaleTimeString(undefined, { hour12: false })
    : date.toLocaleString(undefined, { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", hour12: false });
}

/** A `<time>` element showing `when(iso)`, with the full UTC time as its tooltip. */
export function timeElement(iso) {
  const element = document.createElement("time");
  if (iso) {
    element.dateTime = iso;
    element.title = iso;
  }
  element.textContent = when(iso);
  return element;
}

/** A chart axis label for a bucket's start, at the resolution of the period: over a week, only at midnights. */
export function tickLabel(iso, period) {
  const date = new Date(iso);
  if (period === "week") {
    return date.getHours() === 0 ? date.toLocaleDateString(undefined, { weekday: "short", day: "numeric" }) : null;
  }
  return date.toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit", hour12: false });
}

/** A bucket's start in full, for tooltips. */
export function bucketLabel(iso) {
  return new Date(iso).toLocaleString(undefined, { weekday: "short", hour: "2-digit", minute: "2-digit", hour12: false });
}

export function json(value) {
  return JSON.stringify(value, null, 2);
}
