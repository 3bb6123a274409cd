// Options as the client's calls take them, in camelCase: an unknown one is refused by name before anything is sent,
// listing those the call takes, and each known one becomes the request field the server reads (durations in seconds
// become milliseconds, a `Date` an RFC 3339 time). The server refuses unknown fields for the same reason: a misspelt
// option must be an error, not a job that runs without it.

import { InvalidInput } from "./errors.js";

/** The error for a value the client refuses itself: the field, then the rule, as the server words its own. */
export function invalid(field, rule) {
  return new InvalidInput("invalid_input", `${field}: ${rule}`, field);
}

/** A value as an error message shows what came instead of what a rule wants. */
export function describe(value) {
  if (typeof value === "string") return `the text ${JSON.stringify(value)}`;
  if (Array.isArray(value)) return "an array";
  if (value instanceof Date) return "a Date";
  if (value === null) return "null";
  if (typeof value === "object") return "an object";
  if (typeof value === "function") return "a function";
  return String(value);
}

/** Whole milliseconds of a duration in seconds, refusing a negative one as the server would. */
export function millis(seconds, field) {
  if (typeof seconds !== "number" || !(seconds >= 0) || seconds === Infinity) {
    throw invalid(field, `must be a number of seconds, at least 0, got ${describe(seconds)}`);
  }
  return Math.round(seconds * 1000);
}

/** An RFC 3339 time from a string (sent as it is, for the server to check) or a `Date`. */
export function time(value, field) {
  if (typeof value === "string") return value;
  if (value instanceof Date && !Number.isNaN(value.getTime())) return value.toISOString();
  throw invalid(field, `must be a time, as an RFC 3339 string (2026-01-31T09:00:00Z) or a valid Date, got ${describe(value)}`);
}

/** An array, copied. */
export function list(value, field) {
  if (!Array.isArray(value)) throw invalid(field, `must be an array, got ${describe(value)}`);
  return [...value];
}

// How an option becomes its request field: `field` is the field's name in the request, `convert` turns the value,
// `options` is the table of an option that is itself an object of options, and `part` names the member of `field`
// that several options fill together (`concurrencyKey` and `concurrencyLimit` make `concurrency`). An option marked
// `legacy` is accepted and not offered: a spelling earlier versions took; one made with `local` is not sent.
export const as = (field) => ({ field, convert: (value) => value });
export const seconds = (field) => ({ field, convert: millis });
export const timeField = (field) => ({ field, convert: time });
export const listField = (field) => ({ field, convert: list });
export const part = (field, member) => ({ field, part: member, convert: (value) => value });
export const nested = (field, options, what) => ({
  field,
  options,
  convert: (value, path) => build(options, value, what, `${path}.`),
});
export const legacy = (spec) => ({ ...spec, legacy: true });
// An option the client keeps for itself (an `AbortSignal`): it fills no field of the request.
export const local = (name) => ({ field: name, local: true, convert: (value) => value });

/** The options a table offers, in its order, without the legacy spellings. */
export const offered = (table) => Object.keys(table).filter((option) => !table[option].legacy);

const squash = (name) => name.toLowerCase().replaceAll("_", "");

/** How many letters to add, remove or change to make `a` into `b` (Levenshtein's distance). */
function distance(a, b) {
  let row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++) next[j] = Math.min(row[j] + 1, next[j - 1] + 1, row[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    row = next;
  }
  return row[b.length];
}

/**
 * What an unknown option may have meant: a hint given for it, an option spelt another way (`time_zone`, `timezone`),
 * the option that fills a field of that name (`delay_ms`), or one a slip of two letters away (`queues`, `maxAttempt`).
 */
function suggestion(key, table, hints) {
  if (hints[key]) return hints[key];
  const options = offered(table);
  const near =
    options.find((option) => squash(option) === squash(key)) ??
    options.find((option) => table[option].field === key && !table[option].part) ??
    options.find((option) => key.length > 3 && distance(squash(option), squash(key)) <= 2);
  return near ? `did you mean ${near}?` : null;
}

/**
 * Refuses `given` unless it is an object whose keys all name options of `table`; the error names the first unknown
 * one and lists what `what` takes. `hints` maps an unknown key to a pointer (`retry: { maxAttempts }`).
 */
export function checkOptions(given, table, what, path = "", hints = {}) {
  if (given === undefined || given === null) return {};
  if (typeof given !== "object" || Array.isArray(given) || given instanceof Date) {
    const field = path ? path.replace(/\.$/, "") : "options";
    throw invalid(field, `must be an object of ${what}s, got ${describe(given)}`);
  }
  for (const key of Object.keys(given)) {
    if (Object.hasOwn(table, key)) continue;
    const hint = suggestion(key, table, hints);
    throw invalid(`${path}${key}`, `is not ${article(what)} ${what}${hint ? ` (${hint})` : ""}; the ${what}s are ${offered(table).join(", ")}`);
  }
  return given;
}

const article = (what) => (/^[aeiou]/.test(what) ? "an" : "a");

/**
 * The request fields of the options `given`, by `table`: unknown options refused, undefined and null ones left out
 * (the server's default), each field set once (`maxAttempts` with the older `max_attempts` is refused).
 */
export function build(table, given, what, path = "", hints = {}) {
  checkOptions(given, table, what, path, hints);
  const body = {};
  const setBy = {};
  for (const [option, value] of Object.entries(given ?? {})) {
    if (value === undefined || value === null) continue;
    const spec = table[option];
    const at = `${path}${option}`;
    const slot = spec.part ? `${spec.field}.${spec.part}` : spec.field;
    if (setBy[slot]) throw invalid(at, `sets the same field as ${path}${setBy[slot]}; give one of them`);
    setBy[slot] = option;
    const wire = spec.convert(value, at);
    if (spec.part) (body[spec.field] ??= {})[spec.part] = wire;
    else body[spec.field] = wire;
  }
  return body;
}

/** A query string (`?a=1&b=x`, or nothing) of the options `given`, by a table of query parameters. */
export function query(table, given, what) {
  const fields = build(table, given, what);
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(fields)) params.set(name, Array.isArray(value) ? value.join(",") : String(value));
  const text = params.toString();
  return text ? `?${text}` : "";
}
