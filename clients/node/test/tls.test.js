// HTTPS and mutual TLS against a real `cairn serve --tls-cert … --tls-client-ca …`: the client and a worker, with
// the test CA of `clients/testdata/tls` (test files, keys included).
import assert from "node:assert/strict";
import { dirname, join } from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";

import { Client, InvalidInput, Unavailable, Worker } from "../src/index.js";
import { eventually, startServer } from "./server.js";

const tls = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "testdata", "tls");
const caFile = join(tls, "ca.crt");
const certificate = { certFile: join(tls, "client.crt"), keyFile: join(tls, "client.key") };

let server;
before(async () => {
  const flags = ["--tls-cert", join(tls, "server.crt"), "--tls-key", join(tls, "server.key"), "--tls-client-ca", caFile];
  server = await startServer({ flags });
});
after(async () => server.stop());

test("the client trusts its CA file and shows its certificate; without either it is refused", async () => {
  assert.match(server.url, /^https:\/\/127\.0\.0\.1:/);
  const client = new Client(server.url, { caFile, ...certificate });
  const job = await client.enqueue("over.https", { n: 1 });
  assert.deepEqual((await client.get(job.id)).data, { n: 1 });
  await assert.rejects(new Client(server.url, { caFile }).health(), Unavailable);
  await assert.rejects(new Client(server.url, certificate).health(), (e) => {
    assert.ok(e instanceof Unavailable);
    assert.match(e.message, /certificate/i);
    return true;
  });
});

test("a worker runs jobs over mutual TLS", async () => {
  const client = new Client(server.url, { caFile, ...certificate });
  const job = await client.enqueue("tls.job", { n: 2 });
  const worker = new Worker(server.url, "node-tls", { caFile, ...certificate, wait: 1 });
  worker.handler("tls.job", (j) => ({ doubled: j.data.n * 2 }));
  const running = worker.run();
  await eventually("the job completed", async () => (await client.get(job.id)).state === "completed");
  worker.stop();
  await running;
  assert.deepEqual((await client.get(job.id)).result, { doubled: 4 });
});

test("TLS files that cannot be read are refused by name", () => {
  assert.throws(() => new Client("https://127.0.0.1:1", { caFile: "/nonexistent/ca.crt" }), (e) => e instanceof InvalidInput && e.field === "caFile");
  assert.throws(() => new Client("https://127.0.0.1:1", { certFile: join(tls, "client.crt") }), (e) => e instanceof InvalidInput && e.field === "keyFile");
});
