// A real `cairn serve` per test, on a fresh SQLite file and a free loopback port. The binary is `CAIRN_BIN`, or the
// repository's debug build (`cargo build -p cairn-cli` makes it).
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

const repo = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");

export function cairnBinary() {
  const path = resolve(process.env.CAIRN_BIN ?? join(repo, "target", "debug", "cairn"));
  if (!existsSync(path)) throw new Error(`no cairn binary at ${path}: build it with \`cargo build -p cairn-cli\` or set CAIRN_BIN`);
  return path;
}

/** Starts a server (with `flags` besides the usual ones); resolves to `{url, dir, stop()}` once it listens. */
export async function startServer({ token = null, flags = [] } = {}) {
  const dir = mkdtempSync(join(tmpdir(), "cairn-node-"));
  const args = ["serve", "--db", join(dir, "cairn.db"), "--http", "127.0.0.1:0", "--bedrock", "off"];
  if (token) args.push("--token", token);
  args.push(...flags);
  const env = { ...process.env, CAIRN_LOG: "warn" };
  delete env.CAIRN_TOKEN;
  delete env.CAIRN_CONFIG;
  const child = spawn(cairnBinary(), args, { cwd: dir, env, stdio: ["ignore", "pipe", "inherit"] });
  const lines = createInterface({ input: child.stdout });
  const first = await new Promise((resolve, reject) => {
    lines.once("line", resolve);
    child.once("exit", (code) => reject(new Error(`cairn serve exited with ${code} before listening`)));
  });
  const url = first.split(/\s+/).find((word) => word.startsWith("http://") || word.startsWith("https://"));
  if (!url) throw new Error(`no address in the server's first line: ${first}`);
  return {
    url,
    dir,
    async stop() {
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGTERM");
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Waits until `check()` resolves true, failing after `timeout` ms. */
export async function eventually(what, check, timeout = 20_000) {
  const deadline = Date.now() + timeout;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
