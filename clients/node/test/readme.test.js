// The README's examples, run as written, from the package a user installs: `npm pack` makes the tarball, `npm install`
// puts it in an empty directory (offline: the client has no dependencies), and each ```js block of the README runs
// there with node, in the README's order, against a real server. A block that runs a worker (`worker.run()`) keeps
// running while the later blocks run, as it would in its own terminal, and gets SIGTERM after them; every block must
// exit 0.
//
// The examples use the server's default address, `http://127.0.0.1:6670`, as a reader's code would. The test's server
// listens on a free port instead (so that the tests never touch a server of the machine's, and run side by side), and
// the test rewrites that one URL in each block: nothing else of the README's text changes.
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";

import { startServer } from "./server.js";

const PACKAGE = fileURLToPath(new URL("..", import.meta.url));
const README_URL = "http://127.0.0.1:6670";

let server;
let dir;
before(async () => {
  server = await startServer();
  dir = mkdtempSync(join(tmpdir(), "cairn-node-readme-"));
});
after(async () => {
  await server.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** The README's ```js blocks, in order. */
function examples() {
  const text = readFileSync(join(PACKAGE, "README.md"), "utf8");
  return [...text.matchAll(/^```js\n([\s\S]*?)^```$/gm)].map((m) => m[1]);
}

/** Runs a file with node in `dir`; resolves to its exit code, signal and output once it exits. */
function run(file) {
  const child = spawn(process.execPath, [file], { cwd: dir, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  child.stdout.on("data", (chunk) => (out += chunk));
  child.stderr.on("data", (chunk) => (out += chunk));
  const exited = new Promise((resolve) => child.once("exit", (code, signal) => resolve({ code, signal, out })));
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

test("the package installs from its tarball, with its types", () => {
  execFileSync("npm", ["pack", "--silent", "--pack-destination", dir], { cwd: PACKAGE, stdio: ["ignore", "pipe", "inherit"] });
  const [tarball] = readdirSync(dir).filter((name) => name.endsWith(".tgz"));
  assert.ok(tarball, "npm pack made a tarball");
  execFileSync("npm", ["install", "--offline", "--no-audit", "--no-fund", "--silent", join(dir, tarball)], { cwd: dir, stdio: ["ignore", "pipe", "inherit"] });
  const installed = join(dir, "node_modules", "@cairn", "client");
  const manifest = JSON.parse(readFileSync(join(installed, "package.json"), "utf8"));
  assert.equal(manifest.types, "./src/index.d.ts");
  for (const file of ["src/index.js", "src/index.d.ts", "README.md"]) readFileSync(join(installed, file));
});

test("the README's examples run as written against a real server", { timeout: 180_000 }, async () => {
  const blocks = examples();
  assert.ok(blocks.length >= 4, `the README has ${blocks.length} js examples`);
  const background = [];
  const outputs = [];
  try {
    for (const [i, block] of blocks.entries()) {
      assert.ok(block.includes(README_URL), `example ${i + 1} talks to ${README_URL}`);
      const file = join(dir, `example-${i + 1}.mjs`);
      writeFileSync(file, block.replaceAll(README_URL, server.url));
      const running = run(file);
      if (/\bworker\.run\(\)/.test(block)) {
        background.push({ i, ...running });
        continue;
      }
      const { code, out } = await exitsWithin(`example ${i + 1}`, running.exited, 90_000);
      assert.equal(code, 0, `example ${i + 1} exited with ${code}:\n${out}`);
      outputs.push(out);
    }
  } finally {
    for (const { child } of background) child.kill("SIGTERM");
  }
  for (const { i, exited } of background) {
    const { code, out } = await exitsWithin(`example ${i + 1} after SIGTERM`, exited, 40_000);
    assert.equal(code, 0, `example ${i + 1} exited with ${code}:\n${out}`);
    assert.match(out, /finished: [1-9]/, "the worker said what it did");
  }
  assert.ok(outputs.some((out) => out.includes("completed { shipped: [ 'label for book', 'label for pen' ] }")), outputs.join("\n---\n"));
  // The steps example: the charge recorded by the first attempt, read back by the second, which labels the boxes.
  assert.ok(outputs.some((out) => out.includes("{ receipt: 'ch_7', labels: [ 'label 1', 'label 2' ] } [ 'charge (attempt 1)', 'label (attempt 2)', 'label#2 (attempt 2)' ]")), outputs.join("\n---\n"));
  // The sleep example: the job slept once without its worker, then ran again and completed.
  assert.ok(outputs.some((out) => out.includes("reminder to 7 [ 'suspended', 'completed' ] 1")), outputs.join("\n---\n"));
  // The signals example: the job waited without its worker, and the signal sent then made it run again and complete.
  assert.ok(outputs.some((out) => out.includes("true { receipt: 'ch_42', parcel: 'P-981' } [ 'suspended', 'completed' ] 1")), outputs.join("\n---\n"));
  // The fan-out example: the children pushed once, joined in order, and four jobs finished (the three and their parent).
  assert.ok(outputs.some((out) => out.includes("{ taxes: [ 24, 16, 9 ], inOrder: true } [ 'lines', 'taxes' ] 4")), outputs.join("\n---\n"));
});
