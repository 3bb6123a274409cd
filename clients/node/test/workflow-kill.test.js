// A durable workflow survives SIGKILL (issue 43's "Done when"), as Rust's `tests/it/workflow_kill.rs` holds it: a job
// of ten steps (eight bodies, a sleep after s3 and a wait for a signal after s6) is run by a worker in a process of its
// own (test/workflow-kill-worker.js), which is killed at random moments (a seeded generator) and started again. Each
// round's job completes with the signal's data, every body runs, and a body runs twice only when it was in flight at a
// kill: the last body in the log before a `kill` line, and the first after it.
//
// The test sends the signal itself: in half the rounds right after the push (kept until the job waits), in the others
// once the job shows that it waits (`awaits_signal`), and in any case before the last worker, which it does not kill.
// CAIRN_KILL_SEED picks another seed.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { appendFileSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { setTimeout as pause } from "node:timers/promises";
import { fileURLToPath } from "node:url";

import { Client } from "../src/index.js";
import { startServer } from "./server.js";

const WORKER = fileURLToPath(new URL("./workflow-kill-worker.js", import.meta.url));
// More than issue 43's ten: about a second each.
const ROUNDS = 20;
/** The most kills in a round; then a last worker runs the job to its end. */
const MOST_KILLS = 3;
/** A worker is killed this long after it starts, at most (ms). */
const MOST_LIFE_MS = 800;
const BODIES = ["s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8"];
const QUEUE = "workflow-kill";

let server;
let client;
let dir;
before(async () => {
  server = await startServer();
  client = new Client(server.url);
  dir = mkdtempSync(join(tmpdir(), "cairn-node-kill-"));
});
after(async () => {
  await server.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** Mulberry32: numbers in [0, 1) from a 32-bit seed, the same ones each run. */
function generator(seed) {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Starts a worker process for the round's job; `exited` resolves to `{code, signal, err}`. */
function startWorker(log, id) {
  const child = spawn(process.execPath, [WORKER, server.url, QUEUE, log, String(id)], { stdio: ["ignore", "ignore", "pipe"] });
  let err = "";
  child.stderr.on("data", (chunk) => (err += chunk));
  const exited = new Promise((resolve) => child.once("exit", (code, signal) => resolve({ code, signal, err })));
  return { child, exited };
}

async function exitsWithin(what, exited, ms) {
  let timer;
  const late = new Promise((_, reject) => (timer = setTimeout(() => reject(new Error(`${what} did not exit within ${ms} ms`)), ms)));
  try {
    return await Promise.race([exited, late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Checks what ran around the kills: every body at least once, in order, and a body run again only as the first after
 * a kill when it was the last before it (the step in flight). Returns how many bodies ran twice.
 */
function checkLog(lines, round) {
  const ran = [];
  let twice = 0;
  for (const [at, line] of lines.entries()) {
    if (line === "kill") continue;
    if (ran.includes(line)) {
      const before = lines.slice(0, at).findLast((l) => l !== "kill");
      assert.ok(at > 0 && lines[at - 1] === "kill" && before === line, `round ${round}: ${line} ran again though it was not in flight at a kill: ${lines.join(" ")}`);
      twice += 1;
    } else {
      ran.push(line);
    }
  }
  assert.deepEqual(ran, BODIES, `round ${round}: every body ran, in order: ${lines.join(" ")}`);
  return twice;
}

/** One round: a job, killed workers, a last one; resolves to what it saw. */
async function runRound(round, random) {
  const log = join(dir, `round-${round}.log`);
  appendFileSync(log, "");
  const key = `workflow-${round}/approved`;
  const data = { round, by: "test" };
  // A lease of a second brings a killed worker's job back fast; kills must not use up its attempts.
  const { id } = await client.enqueue("workflow", { key }, { queue: QUEUE, leaseTimeout: 1, retry: { maxAttempts: 20, initialDelay: 0 } });
  const early = round % 2 === 0;
  let sending = null;
  const send = () => (sending ??= client.signal(key, data));
  if (early) assert.deepEqual(await send(), { delivered: false, job: null }, `round ${round}: kept`);
  // Sends the signal once the job waits for it (a later round's workers may all be dead by then).
  let watching = true;
  const watcher = (async () => {
    while (watching && sending === null) {
      if ((await client.get(id)).awaits_signal === key) assert.deepEqual(await send(), { delivered: true, job: id }, `round ${round}: delivered`);
      else await pause(25);
    }
  })();

  let kills = 0;
  try {
    const planned = 1 + Math.floor(random() * MOST_KILLS);
    for (let k = 0; k < planned; k++) {
      const { child, exited } = startWorker(log, id);
      await pause(Math.floor(random() * MOST_LIFE_MS));
      child.kill("SIGKILL");
      const { code, signal, err } = await exitsWithin("a killed worker", exited, 10_000);
      if (signal === "SIGKILL") {
        // Written once the process is gone: every line it wrote comes before this one.
        appendFileSync(log, "kill\n");
        kills += 1;
      } else {
        // It saw the job complete and exited by itself before the kill.
        assert.equal(code, 0, `round ${round}: a worker failed: ${err}`);
        break;
      }
    }
    await send();
    const last = startWorker(log, id);
    const { code, err } = await exitsWithin(`round ${round}'s last worker`, last.exited, 30_000);
    assert.equal(code, 0, `round ${round}: the last worker failed: ${err}`);
  } finally {
    watching = false;
    await watcher;
  }
  const job = await client.get(id);
  assert.equal(job.state, "completed", `round ${round}`);
  assert.deepEqual(job.result, { approval: { received: true, data } }, `round ${round}`);
  const lines = readFileSync(log, "utf8").split("\n").filter(Boolean);
  return { kills, twice: checkLog(lines, round), early, lines };
}

test("a workflow of ten steps completes whatever moments its worker is killed at, and only a step in flight runs twice", { timeout: 180_000 }, async (t) => {
  const seed = Number(process.env.CAIRN_KILL_SEED ?? 43);
  const random = generator(seed);
  const started = Date.now();
  const seen = { kills: 0, twice: 0, early: 0 };
  for (let round = 0; round < ROUNDS; round++) {
    const { kills, twice, early, lines } = await runRound(round, random);
    t.diagnostic(`round ${round}: ${lines.join(" ")}`);
    seen.kills += kills;
    seen.twice += twice;
    seen.early += early ? 1 : 0;
  }
  const seconds = ((Date.now() - started) / 1000).toFixed(1);
  const summary = `workflow under SIGKILL (seed ${seed}): ${ROUNDS} rounds, ${seen.kills} kills, ${seen.twice} bodies run twice, ${seen.early} signals sent before the wait, in ${seconds} s`;
  t.diagnostic(summary);
  // A worker that finished the job before its kill exits by itself; most are killed.
  assert.ok(seen.kills >= ROUNDS / 2, `kills in most rounds: ${summary}`);
});
