// Keeping the page up to date. While the server's event stream (`GET /v1/events`) is up, the page refreshes when an
// event says something changed: only for events the view cares about, only what they could change, and at most once
// per half second (or the view's own gap); no timer runs. When the stream is down (an error, a server restarting, a
// refused token), a timer refreshes every few seconds while the stream reconnects with backoff, resuming after the
// last event it gave. A hidden tab does neither: the stream is closed and no timer runs, so a dashboard left open in
// a background tab costs the server nothing.

import { openStream } from "./api.js";

/** How long a stream may stay silent before it counts as broken: the server sends a comment every 15 s. */
const SILENT_MS = 45000;
/**
 * The waits before connecting again: doubling from the first up to the last, each with up to a fifth more; after a
 * connection the server accepted, from the first again.
 */
const BACKOFF_FIRST_MS = 1000;
const BACKOFF_MAX_MS = 30000;
/** Past this many events waiting for a refresh, it refreshes everything instead of keeping them all. */
const MOST_EVENTS = 1000;

/**
 * Server-Sent Events read as the HTML standard says, from bytes as they come: a chunk may end anywhere, in a line, in
 * a character or between a CR and its LF. `push(bytes)` returns the events the bytes completed, each
 * `{ id, event, data }`: `id` the last id the stream gave (it carries over to later events, as `Last-Event-ID`
 * does), `event` its name (`message` when it has none), `data` its data lines joined by line feeds. Comments (lines
 * starting with `:`, the server's keep-alive) and unknown fields are skipped; an event without data is not one; an
 * event the stream ends in the middle of is dropped.
 */
export class SseParser {
  constructor() {
    // UTF-8, without a leading byte-order mark, as the standard reads a stream.
    this.decoder = new TextDecoder();
    this.buffer = "";
    this.afterCr = false;
    this.lastId = "";
    this.type = "";
    this.data = "";
  }

  push(bytes) {
    let text = this.decoder.decode(bytes, { stream: true });
    // A CR that ended the last chunk ended its line; a LF right after it belongs to that line end.
    if (this.afterCr && text.length > 0) {
      if (text[0] === "\n") text = text.slice(1);
      this.afterCr = false;
    }
    this.buffer += text;
    const events = [];
    const end = /\r\n|\r|\n/g;
    let start = 0;
    for (let match = end.exec(this.buffer); match !== null; match = end.exec(this.buffer)) {
      this.line(this.buffer.slice(start, match.index), events);
      start = end.lastIndex;
      this.afterCr = match[0] === "\r" && start === this.buffer.length;
    }
    this.buffer = this.buffer.slice(start);
    return events;
  }

  line(line, events) {
    if (line === "") {
      this.dispatch(events);
      return;
    }
    if (line.startsWith(":")) return;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") this.type = value;
    else if (field === "data") this.data += `${value}\n`;
    else if (field === "id" && !value.includes("\0")) this.lastId = value;
  }

  dispatch(events) {
    if (this.data !== "") events.push({ id: this.lastId, event: this.type || "message", data: this.data.slice(0, -1) });
    this.data = "";
    this.type = "";
  }
}

/** Whether an answer refuses the request itself (a bad filter, a refused token): asking again will not help. */
function isRefusal(error) {
  return error.status >= 400 && error.status < 500 && error.status !== 408 && error.status !== 429;
}

/**
 * Follows `GET /v1/events` with a filter. It tells `onOpen({ resumed })` when the server accepted a connection
 * (`resumed`: after the last event it gave), `onEvent(event)` for each event (as `SseParser` gives them), and
 * `onDown(error)` when a connection could not be made, failed or ended. Then it connects again by itself, with
 * backoff, resuming after the last event; but not after a refusal (a 4xx: a refused token, a bad filter), which
 * only `follow` ends.
 */
export class EventFeed {
  constructor({ onOpen, onEvent, onDown }) {
    this.onOpen = onOpen;
    this.onEvent = onEvent;
    this.onDown = onDown;
    this.query = null;
    this.key = null;
    this.lastId = null;
    /** Counts runs: a run that is no longer the current one stops at its next step. */
    this.run = 0;
    this.active = false;
    this.controller = null;
    /** Whether the server refused the kinds of `later` (a server older than them): asked for no more. */
    this.laterRefused = false;
  }

  /**
   * Follows the events that `query` selects; the same filter as the run under way changes nothing. Returns whether
   * it (re)connects.
   */
  follow(query) {
    const key = JSON.stringify(query);
    if (key === this.key && this.active) return false;
    // Another filter's last id would replay this filter's past since then: start from now.
    if (key !== this.key) this.lastId = null;
    this.key = key;
    this.query = query;
    this.stop();
    this.active = true;
    this.loop(this.run).catch((error) => console.error(error));
    return true;
  }

  /** Closes the stream and stops connecting; `follow` goes on after the last event given. */
  stop() {
    this.run += 1;
    this.active = false;
    if (this.controller) this.controller.abort();
    this.controller = null;
  }

  async loop(run) {
    let failures = 0;
    while (run === this.run) {
      const controller = new AbortController();
      this.controller = controller;
      let error;
      try {
        const { query, withLater } = this.request();
        let response;
        try {
          response = await openStream("/v1/events", query, { lastId: this.lastId, signal: controller.signal });
        } catch (e) {
          // A server that does not know a kind refuses the whole filter: without the newer kinds, at once.
          if (withLater && isRefusal(e) && e.field === "kinds" && run === this.run) {
            this.laterRefused = true;
            continue;
          }
          throw e;
        }
        if (run !== this.run) {
          response.body.cancel().catch(() => {});
          return;
        }
        failures = 0;
        this.onOpen({ resumed: this.lastId !== null });
        await this.read(response, controller, run);
        error = new Error("the server ended the event stream");
      } catch (e) {
        error = e;
      }
      if (run !== this.run) return;
      this.onDown(error);
      if (isRefusal(error)) {
        this.active = false;
        return;
      }
      failures += 1;
      const wait = Math.min(BACKOFF_MAX_MS, BACKOFF_FIRST_MS * 2 ** (failures - 1));
      await new Promise((resolve) => { setTimeout(resolve, wait * (1 + Math.random() / 5)); });
    }
  }

  /**
   * The stream's query for the filter followed: its `kinds`, with those of `later` (kinds that a server older than
   * this page does not know yet) unless the server refused them; `withLater` says whether it has them.
   */
  request() {
    const { later, ...query } = this.query;
    const withLater = Boolean(query.kinds) && Array.isArray(later) && later.length > 0 && !this.laterRefused;
    if (withLater) query.kinds = [query.kinds, ...later].join(",");
    return { query, withLater };
  }

  /** Reads events until the stream ends (returns) or fails or stays silent too long (throws). */
  async read(response, controller, run) {
    const reader = response.body.getReader();
    const parser = new SseParser();
    let silence = null;
    const listen = () => {
      clearTimeout(silence);
      silence = setTimeout(() => controller.abort(new Error(`the event stream was silent for ${SILENT_MS / 1000} s`)), SILENT_MS);
    };
    try {
      listen();
      for (;;) {
        const { value, done } = await reader.read();
        if (done || run !== this.run) return;
        listen();
        const events = parser.push(value);
        if (parser.lastId !== "") this.lastId = parser.lastId;
        for (const event of events) this.onEvent(event);
      }
    } finally {
      clearTimeout(silence);
      reader.cancel().catch(() => {});
    }
  }
}

/**
 * Runs a view's refresh: `now()` at once, `soon(event)` for an event (coalesced: at most one refresh per gap, given
 * every event since the last), and, while `timed`, every interval. Never two at once; `refresh(events)` gets the
 * events it covers, or null for a whole refresh. After a failed refresh it tries again at the interval even when
 * not timed. `onDone(error, startedAt)` hears how each went.
 */
export class Poller {
  constructor(refresh, onDone) {
    this.refresh = refresh;
    this.onDone = onDone;
    this.intervalMs = 3000;
    this.gapMs = 500;
    this.timed = true;
    this.stopped = true;
    this.failed = false;
    this.timer = null;
    this.due = Infinity;
    /** Why the timer is set: "timed" (the interval) or "soon" (events). */
    this.kind = null;
    /** What the next refresh covers: nothing (null), everything ("all"), or the events since the last one. */
    this.wanted = null;
    this.running = null;
    this.startedAt = -Infinity;
  }

  /** Starts refreshing (or starts again, with new settings): one refresh now. */
  start(intervalMs = 3000, gapMs = 500) {
    this.intervalMs = intervalMs;
    this.gapMs = gapMs;
    this.stopped = false;
    return this.now();
  }

  stop() {
    this.stopped = true;
    this.pause();
  }

  /** Drops what was to come (a hidden tab): `now()` starts again. */
  pause() {
    this.disarm();
    this.wanted = null;
  }

  /** Whether the timer refreshes every interval. */
  setTimed(timed) {
    this.timed = timed;
    if (!timed && this.kind === "timed") this.disarm();
    this.schedule();
  }

  /** Refreshes everything now (after the refresh in flight, if any); resolves once that is done. */
  now() {
    this.wanted = "all";
    return this.run();
  }

  /** Runs what is wanted, now (after the refresh in flight, if any). */
  run() {
    this.disarm();
    if (!this.running) {
      this.running = this.loop().finally(() => {
        this.running = null;
        this.next();
      });
    }
    return this.running;
  }

  /** Refreshes for `event` soon (everything, for null). */
  soon(event) {
    if (this.stopped) return;
    if (event === null || this.wanted?.length >= MOST_EVENTS) this.wanted = "all";
    else if (this.wanted !== "all") (this.wanted ??= []).push(event);
    if (!this.running) this.arm(this.startedAt + this.gapMs - Date.now(), "soon");
  }

  async loop() {
    while (this.wanted === "all" || (this.wanted !== null && Date.now() >= this.startedAt + this.gapMs)) {
      const covering = this.wanted;
      this.wanted = null;
      const startedAt = Date.now();
      this.startedAt = startedAt;
      let error = null;
      try {
        await this.refresh(covering === "all" ? null : covering);
      } catch (e) {
        error = e;
      }
      this.failed = error !== null;
      this.onDone(error, startedAt);
    }
  }

  /** After a run: the events that came meanwhile, once the gap has passed; else the timer. */
  next() {
    if (this.stopped) return;
    if (this.wanted !== null) this.arm(this.startedAt + this.gapMs - Date.now(), "soon");
    else this.schedule();
  }

  schedule() {
    if (this.stopped || document.hidden || this.running || this.timer) return;
    if (this.timed || this.failed) this.arm(this.intervalMs, "timed");
  }

  /** A refresh in `delay` ms, unless one is due sooner already. */
  arm(delay, kind) {
    const wait = Math.max(0, delay);
    if (this.timer && this.due <= Date.now() + wait) return;
    this.disarm();
    this.due = Date.now() + wait;
    this.kind = kind;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.due = Infinity;
      if (kind === "timed") this.now();
      else this.run();
    }, wait);
  }

  disarm() {
    clearTimeout(this.timer);
    this.timer = null;
    this.due = Infinity;
    this.kind = null;
  }
}

/**
 * The page's liveness: a view refreshed from the event stream while it is up, by the timer while it is down, neither
 * while the tab is hidden. `onState(state, error)` hears "live" (the stream is up and the view refreshed since it
 * opened), "polling", "paused" (hidden) or "error" (the last refresh failed, with its error) as it changes, and
 * each failed refresh.
 *
 * A view is `{ refresh(events), interval, gap, follow, concerns(event) }`: `refresh` gets the events since its last
 * refresh, or null for a whole one; `interval` is the timer's period and `gap` the least time between refreshes for
 * events (3 s and 500 ms unless it says); `follow` is the stream's filter (`{ queue, name, job, kinds, later }`;
 * every event without one: `kinds` the kinds, separated by commas, and `later` more of them, in a list, that an
 * older server does not know and refuses, then left out); `concerns` says which events may change what it shows
 * (every one without it). An event of a kind the page does not know is one more event: a view's `concerns` and
 * `refresh` look at its kind and its job, and a kind none of them names changes nothing.
 */
export class Live {
  constructor(onState) {
    this.onState = onState;
    this.view = null;
    this.stopped = true;
    this.streaming = false;
    this.openedAt = 0;
    this.caughtUp = false;
    this.error = null;
    this.state = null;
    this.poller = new Poller((events) => this.view.refresh(events), (error, startedAt) => this.refreshed(error, startedAt));
    this.feed = new EventFeed({
      onOpen: (how) => this.opened(how),
      onEvent: (event) => this.received(event),
      onDown: () => this.down(),
    });
    document.addEventListener("visibilitychange", () => this.visibilityChanged());
  }

  /** Keeps `view` (just shown) up to date: a refresh now, then as events or the timer say. */
  show(view) {
    this.view = view;
    return this.start();
  }

  /** Starts again after `stop`. */
  start() {
    this.stopped = false;
    this.error = null;
    this.follow();
    return this.poller.start(this.view.interval ?? 3000, this.view.gap ?? 500);
  }

  /** Stops refreshing and following (while the token dialog is open). */
  stop() {
    this.stopped = true;
    this.poller.stop();
    this.feed.stop();
    this.streaming = false;
  }

  /** Refreshes the view now (after an action); resolves once it is done. */
  now() {
    return this.poller.now();
  }

  follow() {
    if (document.hidden) return;
    if (this.feed.follow(this.view.follow ?? {})) {
      this.streaming = false;
      this.poller.setTimed(true);
    }
  }

  opened({ resumed }) {
    this.streaming = true;
    this.openedAt = Date.now();
    this.poller.setTimed(false);
    // Resumed, the stream replays what was missed since its last event. Otherwise something may have changed
    // between the view's last refresh and the stream's start: refresh once more, and be live after that.
    this.caughtUp = resumed;
    if (!resumed) this.poller.soon(null);
    this.report();
  }

  down() {
    this.streaming = false;
    this.poller.setTimed(true);
    this.report();
  }

  received(raw) {
    // Resumed after events the server no longer keeps: those cannot be replayed, so everything is looked at again.
    if (raw.event === "missed") {
      this.poller.soon(null);
      return;
    }
    let event;
    try {
      event = JSON.parse(raw.data);
    } catch {
      event = { event: raw.event };
    }
    if (!this.view.concerns || this.view.concerns(event)) this.poller.soon(event);
  }

  refreshed(error, startedAt) {
    this.error = error;
    if (!error && this.streaming && startedAt >= this.openedAt) this.caughtUp = true;
    this.report(error !== null);
  }

  visibilityChanged() {
    if (this.stopped) return;
    if (document.hidden) {
      this.feed.stop();
      this.poller.pause();
      this.streaming = false;
      this.report();
    } else {
      this.follow();
      this.poller.now();
    }
  }

  /** Tells the state if it changed, or if `failed`: a refresh just failed (each failure is told, once). */
  report(failed = false) {
    let state = "polling";
    if (this.error) state = "error";
    else if (document.hidden) state = "paused";
    else if (this.streaming && this.caughtUp) state = "live";
    if (state === this.state && !failed) return;
    this.state = state;
    this.onState(state, this.error);
  }
}
