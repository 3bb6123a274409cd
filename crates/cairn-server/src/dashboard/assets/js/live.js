// Keeping the page up to date: run a refresh every few seconds while the tab is visible, never two at once, and
// none at all while it is hidden (a dashboard left open in a background tab should cost the server nothing).

export class Poller {
  /**
   * @param {() => Promise<void>} refresh what to run; a rejection is passed to `onError` and polling goes on.
   * @param {(state: "live" | "paused" | "error", error?: Error) => void} onState told whenever the state changes.
   */
  constructor(refresh, onState) {
    this.refresh = refresh;
    this.onState = onState;
    this.intervalMs = 3000;
    this.timer = null;
    this.running = null;
    this.again = false;
    this.stopped = true;
    document.addEventListener("visibilitychange", () => this.visibilityChanged());
  }

  /** Starts polling (or restarts it at once with a new interval). */
  start(intervalMs = 3000) {
    this.intervalMs = intervalMs;
    this.stopped = false;
    return this.now();
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    this.timer = null;
  }

  /** Refreshes now (after the refresh in flight, if any), then goes on at the interval. */
  async now() {
    clearTimeout(this.timer);
    this.timer = null;
    if (this.running) {
      this.again = true;
      return this.running;
    }
    this.running = this.tick();
    try {
      await this.running;
    } finally {
      this.running = null;
    }
    if (this.again) {
      this.again = false;
      return this.now();
    }
  }

  async tick() {
    try {
      await this.refresh();
      if (!this.stopped) this.onState(document.hidden ? "paused" : "live");
    } catch (error) {
      this.onState("error", error);
    }
    this.schedule();
  }

  schedule() {
    if (this.stopped || document.hidden || this.timer) return;
    this.timer = setTimeout(() => this.now(), this.intervalMs);
  }

  visibilityChanged() {
    if (this.stopped) return;
    if (document.hidden) {
      clearTimeout(this.timer);
      this.timer = null;
      this.onState("paused");
    } else {
      this.now();
    }
  }
}
