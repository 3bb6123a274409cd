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
