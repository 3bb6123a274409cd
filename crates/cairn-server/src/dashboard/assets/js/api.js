// The /v1 API as the dashboard calls it: the bearer token (kept in this browser's localStorage), query parameters
// passed through as typed so that the server judges them, and every error turned into an `ApiError` that carries the
// server's own `{kind, field, message}`.

const TOKEN_KEY = "cairn.token";

/** An error answer of the API, or a server that did not answer. */
export class ApiError extends Error {
  constructor(status, kind, field, message) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.kind = kind;
    this.field = field;
  }

  /** Whether the server lacks this route (an endpoint that an older server does not have), not a missing job. */
  get isMissingRoute() {
    return this.status === 404 && this.kind === "not_found" && this.message.startsWith("no route");
  }
}

export function token() {
  return localStorage.getItem(TOKEN_KEY);
}

export function setToken(value) {
  localStorage.setItem(TOKEN_KEY, value);
}

export function forgetToken() {
  localStorage.removeItem(TOKEN_KEY);
}

/** `path` with the non-empty entries of `query` as its query string. */
export function withQuery(path, query = {}) {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) {
    if (value !== undefined && value !== null && value !== "") params.set(key, String(value));
  }
  const text = params.toString();
  return text ? `${path}?${text}` : path;
}

/** One path segment, escaped: names may hold any character. */
export function segment(value) {
  return encodeURIComponent(String(value));
}

/** The headers of every call: what it accepts, and the token if one is saved. */
function headersFor(accept) {
  const headers = { Accept: accept };
  const saved = token();
  if (saved) headers.Authorization = `Bearer ${saved}`;
  return headers;
}

async function request(method, path, body) {
  const headers = headersFor("application/json");
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: "no-store",
    });
  } catch (e) {
    throw new ApiError(0, "unavailable", null, `the server did not answer (${e.message})`);
  }
  return answer(method, path, response);
}

/** The body of a response as JSON, or its error as an `ApiError`. */
async function answer(method, path, response) {
  const text = await response.text();
  let parsed = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    // Not JSON: a proxy's error page, say. Handled below with the status line.
  }
  if (response.ok) return parsed;
  const detail = parsed && parsed.error;
  if (detail && typeof detail.message === "string") {
    throw new ApiError(response.status, detail.kind, detail.field ?? null, detail.message);
  }
  throw new ApiError(response.status, "unavailable", null, `${method} ${path}: HTTP ${response.status} ${response.statusText}`);
}

export function get(path, query) {
  return request("GET", withQuery(path, query));
}

export function post(path, body = {}) {
  return request("POST", path, body);
}

/** `DELETE path` (`delete` is taken by the language). */
export function del(path) {
  return request("DELETE", path);
}

/**
 * Opens a stream of Server-Sent Events (`GET path`, with the token, which `EventSource` cannot send): resolves with
 * the response once the server accepted it, its body still to read; an error answer is an `ApiError` as for any call.
 * `lastId`, when given, is sent as `Last-Event-ID` to resume after that event.
 */
export async function openStream(path, query, { lastId = null, signal } = {}) {
  const headers = headersFor("text/event-stream");
  if (lastId) headers["Last-Event-ID"] = lastId;
  const url = withQuery(path, query);
  let response;
  try {
    response = await fetch(url, { headers, cache: "no-store", signal });
  } catch (e) {
    if (signal && signal.aborted) throw e;
    throw new ApiError(0, "unavailable", null, `the server did not answer (${e.message})`);
  }
  // An error answer throws as for any call.
  if (!response.ok) await answer("GET", url, response);
  const type = response.headers.get("Content-Type") || "";
  if (!type.startsWith("text/event-stream")) {
    response.body?.cancel();
    throw new ApiError(response.status, "unavailable", null, `GET ${url}: not an event stream (${type || "no content type"})`);
  }
  return response;
}
