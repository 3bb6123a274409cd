// Requests to a Cairn server on Node's own `node:http` (or `node:https`), over kept-alive connections. Node's `fetch`
// cost about 590 µs per request on loopback where `node:http` took 260, and a worker makes a request or two per round
// of jobs. `Client` builds its calls on `send`; the event stream reads an answer that does not end, through `open`.

import http from "node:http";
import https from "node:https";
import { readFileSync } from "node:fs";

import { Unavailable, errorFromBody } from "./errors.js";
import { invalid } from "./options.js";

/** Why a request went unanswered: the error's code and what it says (`UNABLE_TO_VERIFY_LEAF_SIGNATURE: unable to verify
 * the first certificate`), either alone when that is all there is. */
function unreachable(e) {
  const code = e?.code;
  const message = e?.message;
  if (code && message && !message.includes(code)) return `${code}: ${message}`;
  return message || code || "the connection closed";
}

/** The TLS files as `https.Agent` takes them, read now, so that a file that cannot be read is an error here. */
function tlsOptions({ caFile, certFile, keyFile }) {
  if ((certFile === null) !== (keyFile === null)) {
    const missing = certFile === null ? "certFile" : "keyFile";
    throw invalid(missing, "a client certificate needs both certFile and keyFile");
  }
  const read = (field, path) => {
    try {
      return readFileSync(path);
    } catch (e) {
      throw invalid(field, `cannot read ${JSON.stringify(path)}: ${e.message}`);
    }
  };
  const options = {};
  if (caFile !== null) options.ca = read("caFile", caFile);
  if (certFile !== null) {
    options.cert = read("certFile", certFile);
    options.key = read("keyFile", keyFile);
  }
  return options;
}

/** One server's address, credentials and connection pool. */
export class Transport {
  constructor(url, { token, timeout, caFile, certFile, keyFile }) {
    this.url = url.replace(/\/+$/, "");
    let parsed;
    try {
      parsed = new URL(this.url);
    } catch {
      parsed = null;
    }
    if (!parsed || !["http:", "https:"].includes(parsed.protocol)) {
      throw invalid("server", `must be an http:// or https:// URL, got ${JSON.stringify(url)}`);
    }
    this.http = parsed.protocol === "https:" ? https : http;
    // An IPv6 host comes bracketed in a URL (`[::1]`), and bare to `node:http`.
    const hostname = parsed.hostname.replace(/^\[(.*)\]$/, "$1");
    this.target = { hostname, port: parsed.port || undefined, prefix: parsed.pathname.replace(/\/+$/, "") };
    // Idle connections wait in the pool for the next request, without keeping the process alive.
    this.agent = new this.http.Agent({ keepAlive: true, ...tlsOptions({ caFile, certFile, keyFile }) });
    this.headers = { "content-type": "application/json" };
    if (token) this.headers.authorization = `Bearer ${token}`;
    this.timeoutMs = timeout * 1000;
  }

  /** A call: its JSON answer, or the server's error as a `CairnError`. */
  async send(method, path, body = null, timeoutMs = this.timeoutMs, signal = null) {
    const { status, text } = await this.exchange(method, path, body, timeoutMs, signal);
    let parsed = null;
    try {
      parsed = text ? JSON.parse(text) : {};
    } catch {
      parsed = null;
    }
    if (status >= 200 && status < 300) return parsed;
    throw errorFromBody(parsed?.error, status);
  }

  request(method, path, headers, onResponse) {
    return this.http.request({ ...this.target, path: this.target.prefix + path, method, headers, agent: this.agent }, onResponse);
  }

  /** One request and its whole answer. It ends at its timeout, or when `signal` aborts (a worker that stops mid-poll). */
  exchange(method, path, body, timeoutMs, signal) {
    return new Promise((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      const payload = body === null ? null : JSON.stringify(body);
      const headers = { ...this.headers };
      if (payload !== null) headers["content-length"] = Buffer.byteLength(payload);
      let settled = false;
      const settle = (outcome) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        outcome();
      };
      const fail = (e) =>
        settle(() => {
          if (signal?.aborted) reject(signal.reason ?? e);
          else reject(new Unavailable("unavailable", `${method} ${path}: ${unreachable(e)}`));
        });
      const request = this.request(method, path, headers, (response) => {
        const chunks = [];
        response.on("data", (chunk) => chunks.push(chunk));
        response.on("end", () => settle(() => resolve({ status: response.statusCode, text: Buffer.concat(chunks).toString("utf8") })));
        response.on("error", fail);
        // Closed before its end: the connection was cut mid-answer.
        response.on("close", () => fail(new Error("the answer was cut short")));
      });
      const timer = setTimeout(() => request.destroy(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
      const onAbort = () => request.destroy(signal.reason);
      signal?.addEventListener("abort", onAbort, { once: true });
      request.on("error", fail);
      request.end(payload ?? undefined);
    });
  }

  /**
   * A GET whose answer does not end (the event stream): the response once its head came with a 2xx status, to read
   * as it arrives. A connection silent for `silentMs` is cut (the response ends with an error). An aborted `signal`
   * cuts it too.
   */
  open(path, extraHeaders, silentMs, signal) {
    return new Promise((resolve, reject) => {
      if (signal.aborted) return reject(signal.reason);
      const headers = { ...this.headers, accept: "text/event-stream", ...extraHeaders };
      delete headers["content-type"];
      const request = this.request("GET", path, headers, (response) => {
        if (response.statusCode >= 200 && response.statusCode < 300) return resolve(response);
        const chunks = [];
        response.on("data", (chunk) => chunks.push(chunk));
        response.on("end", () => {
          let parsed = null;
          try {
            parsed = JSON.parse(Buffer.concat(chunks).toString("utf8"));
          } catch {
            parsed = null;
          }
          reject(errorFromBody(parsed?.error, response.statusCode));
        });
      });
      request.setTimeout(silentMs, () => request.destroy(new Error(`the stream was silent for ${silentMs} ms`)));
      const onAbort = () => request.destroy(signal.reason);
      signal.addEventListener("abort", onAbort, { once: true });
      request.on("close", () => signal.removeEventListener("abort", onAbort));
      request.on("error", (e) => reject(signal.aborted ? signal.reason : new Unavailable("unavailable", `GET ${path}: ${unreachable(e)}`)));
      request.end();
    });
  }
}
