// `EventStream`: the server's activity log as it is committed (`GET /v1/events`, Server-Sent Events), read with
// `for await`. A dropped connection (the server restarted, the network broke, or nothing came for three of the
// server's 15 s keep-alive comments) is made again after a second, then longer up to ten, resuming after the last
// event given with `Last-Event-ID`, so that no event is lost or given twice. `close()`, an aborted `signal`, or leaving
// the loop ends it. A refusal that asking again cannot mend (a bad filter, a token without the right) ends the loop
// with its error.

import { Unavailable } from "./errors.js";
import { as, build, listField } from "./options.js";

// Three of the server's keep-alive comments (one every 15 s): a connection silent that long is broken.
const SILENT_MS = 45_000;
// The most of one event held before giving up on the stream (a server's event is a small JSON object).
const MAX_EVENT_CHARS = 1 << 20;
const FIRST_BACKOFF_MS = 1000;
const MAX_BACKOFF_MS = 10_000;

/** The filters of `GET /v1/events`, and where to start (`after`: an event's id). */
export const EVENT_FILTER = { queue: as("queue"), name: as("name"), job: as("job"), kinds: listField("kinds"), after: as("after") };

/** The event a block of the stream holds, or null for a block without data (a comment). */
function parseBlock(block) {
  let kind = "message";
  const data = [];
  for (const line of block.split("\n")) {
    if (line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "event") kind = value;
    else if (field === "data") data.push(value);
  }
  if (!data.length) return null;
  const body = JSON.parse(data.join("\n"));
  // The notice of events pruned before a resumed stream's start: `{after, oldest}`, named as the event's kind says.
  return kind === "missed" ? { event: "missed", ...body } : body;
}

const pause = (ms, signal) =>
  new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => (clearTimeout(timer), resolve()), { once: true });
  });

export class EventStream {
  #transport;
  #path;
  #stop = new AbortController();
  #response = null;
  #iterator;

  /** Made by `Client.events`, which connects it before handing it over. */
  constructor(transport, path, after, signal) {
    this.#transport = transport;
    this.#path = path;
    /** The id of the last event given: where the stream resumes. */
    this.position = after;
    if (signal) {
      if (signal.aborted) this.close();
      else signal.addEventListener("abort", () => this.close(), { once: true });
    }
    this.#iterator = this.#events();
  }

  /** Connects (again), resuming after `position`. */
  async connect() {
    const headers = { "last-event-id": String(this.position) };
    this.#response = await this.#transport.open(this.#path, headers, SILENT_MS, this.#stop.signal);
  }

  /** Ends the stream: the loop reading it ends, and the connection closes. */
  close() {
    this.#stop.abort(new Error("the event stream was closed"));
    this.#response?.destroy();
  }

  get closed() {
    return this.#stop.signal.aborted;
  }

  [Symbol.asyncIterator]() {
    return this.#iterator;
  }

  async *#events() {
    let backoff = FIRST_BACKOFF_MS;
    try {
      for (;;) {
        if (this.closed) return;
        if (!this.#response) {
          try {
            await this.connect();
          } catch (e) {
            if (this.closed) return;
            if (!(e instanceof Unavailable)) throw e;
            await pause(backoff, this.#stop.signal);
            backoff = Math.min(backoff * 2, MAX_BACKOFF_MS);
            continue;
          }
        }
        // A connection that gave events is made again at once; one that gave none waits, as a failed one does.
        if (yield* this.#read(this.#response)) backoff = FIRST_BACKOFF_MS;
        else {
          await pause(backoff, this.#stop.signal);
          backoff = Math.min(backoff * 2, MAX_BACKOFF_MS);
        }
        this.#response = null;
      }
    } finally {
      this.close();
    }
  }

  /** The events of one connection, until it ends or breaks; returns whether it gave any. */
  async *#read(response) {
    const decoder = new TextDecoder();
    let pending = "";
    let gave = false;
    try {
      for await (const chunk of response) {
        pending += decoder.decode(chunk, { stream: true }).replaceAll("\r\n", "\n");
        for (let end = pending.indexOf("\n\n"); end >= 0; end = pending.indexOf("\n\n")) {
          const event = parseBlock(pending.slice(0, end));
          pending = pending.slice(end + 2);
          if (event === null) continue;
          if (typeof event.id === "number") this.position = event.id;
          gave = true;
          yield event;
          if (this.closed) return gave;
        }
        if (pending.length > MAX_EVENT_CHARS) {
          throw new Unavailable("unavailable", "the event stream sent more than a megabyte without ending an event");
        }
      }
    } catch (e) {
      // What this reader throws itself (an event too long, data that is not JSON) says the answer is not a stream of
      // Cairn's events; anything else is the connection cut or gone silent, and it is made again.
      const own = e instanceof Unavailable || e instanceof SyntaxError;
      if (own && !this.closed) throw e;
    } finally {
      response.destroy();
    }
    return gave;
  }
}
