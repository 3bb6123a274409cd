// The event stream (`client.events`) against a real server: typed events through the filters, a clean stop three
// ways, and a resume after a disconnect from the last event given. The disconnect is a TCP proxy the test cuts, so
// that the events committed while the stream is away are known to come after its cut. The server's format (comments,
// an event split across chunks, CRLF lines, the `missed` notice) is read from a stand-in that writes it.
import assert from "node:assert/strict";
import http from "node:http";
import net from "node:net";
import { after, before, test } from "node:test";

import { Client, InvalidInput } from "../src/index.js";
import { startServer } from "./server.js";

let server;
let client;
before(async () => {
  server = await startServer();
  client = new Client(server.url);
});
after(async () => server.stop());

/** The next `count` events of an iterator, failing after `timeoutMs`. */
async function take(iterator, count, timeoutMs = 20_000) {
  const events = [];
  let timer;
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`only ${events.length} of ${count} events came: ${JSON.stringify(events)}`)), timeoutMs);
  });
  try {
    while (events.length < count) {
      const { value, done } = await Promise.race([iterator.next(), late]);
      assert.ok(!done, "the stream ended early");
      events.push(value);
    }
  } finally {
    clearTimeout(timer);
  }
  return events;
}

/** A TCP proxy to `target` that can be cut (every connection closed, new ones refused) and opened again, on one port. */
async function cuttableProxy(target) {
  const { hostname, port } = new URL(target);
  const sockets = new Set();
  const requests = [];
  let listener = null;
  let listenPort = 0;
  const open = () =>
    new Promise((resolve) => {
      listener = net.createServer((socket) => {
        const upstream = net.connect(Number(port), hostname);
        for (const s of [socket, upstream]) {
          sockets.add(s);
          s.on("error", () => {});
          s.on("close", () => sockets.delete(s));
        }
        socket.on("data", (chunk) => requests.push(chunk.toString("latin1")));
        socket.on("close", () => upstream.destroy());
        upstream.on("close", () => socket.destroy());
        socket.pipe(upstream).pipe(socket);
      });
      listener.listen(listenPort, "127.0.0.1", () => {
        listenPort = listener.address().port;
        resolve();
      });
    });
  await open();
  return {
    url: () => `http://127.0.0.1:${listenPort}`,
    requests,
    open,
    async cut() {
      const closed = new Promise((resolve) => listener.close(resolve));
      for (const socket of sockets) socket.destroy();
      await closed;
    },
  };
}

test("events come typed and filtered, and leaving the loop closes the stream", async () => {
  const stream = await client.events({ queue: "ev-typed", kinds: ["added", "finished"] });
  const { id } = await client.enqueue("ev.job", { n: 1 }, { queue: "ev-typed" });
  await client.enqueue("ev.elsewhere", null, { queue: "ev-other" });
  const [claimed] = await client.dequeue("ev-worker", { queues: ["ev-typed"] });
  await client.finish(claimed.lease, null, { result: 1 });
  const seen = [];
  for await (const event of stream) {
    seen.push(event);
    if (event.event === "finished") break;
  }
  assert.deepEqual(
    seen.map((e) => [e.event, e.job, e.queue, e.name, typeof e.id, typeof e.at]),
    [
      ["added", id, "ev-typed", "ev.job", "number", "string"],
      ["finished", id, "ev-typed", "ev.job", "number", "string"],
    ],
  );
  assert.ok(stream.closed, "leaving the loop closed it");
  assert.equal(stream.position, seen[1].id);
});

test("close() and an aborted signal end a stream that is waiting for an event", async () => {
  const stream = await client.events({ queue: "ev-quiet" });
  const waiting = stream[Symbol.asyncIterator]().next();
  setTimeout(() => stream.close(), 100);
  assert.deepEqual(await waiting, { value: undefined, done: true });

  const abort = new AbortController();
  const watched = await client.events({ queue: "ev-quiet", signal: abort.signal });
  setTimeout(() => abort.abort(), 100);
  const seen = [];
  for await (const event of watched) seen.push(event);
  assert.deepEqual(seen, []);
});

test("a stream can start after a given event: it gets every event since", async () => {
  const first = await client.enqueue("ev.from", null, { queue: "ev-after" });
  const [added] = (await client.activity({ job: first.id })).events;
  const second = await client.enqueue("ev.from", null, { queue: "ev-after" });
  const stream = await client.events({ queue: "ev-after", after: added.id });
  const [event] = await take(stream[Symbol.asyncIterator](), 1);
  assert.deepEqual([event.event, event.job], ["added", second.id]);
  stream.close();
});

test("a stream resumes after a disconnect from the last event it gave, losing none", async () => {
  const proxy = await cuttableProxy(server.url);
  const stream = await new Client(proxy.url()).events({ queue: "ev-resume" });
  const events = stream[Symbol.asyncIterator]();
  const a = await client.enqueue("ev.a", null, { queue: "ev-resume" });
  const [first] = await take(events, 1);
  assert.equal(first.job, a.id);

  await proxy.cut();
  // Committed while the stream is cut off: a stream that began again from "now" would never see them.
  const b = await client.enqueue("ev.b", null, { queue: "ev-resume" });
  const c = await client.enqueue("ev.c", null, { queue: "ev-resume" });
  await proxy.open();

  const resumed = await take(events, 2);
  assert.deepEqual(resumed.map((e) => [e.event, e.job]), [["added", b.id], ["added", c.id]]);
  const streams = proxy.requests.filter((r) => r.startsWith("GET /v1/events"));
  assert.ok(streams.length >= 2, "it connected again");
  assert.match(streams.at(-1), new RegExp(`\\r\\nlast-event-id: ${first.id}\\r\\n`, "i"));
  stream.close();
  await proxy.cut();
});

test("a filter or start the server refuses is an error of events(), naming it", async () => {
  await assert.rejects(client.events({ name: "[" }), (e) => e instanceof InvalidInput && e.status === 400 && e.field === "name");
  await assert.rejects(client.events({ after: 10 ** 12 }), (e) => e instanceof InvalidInput && e.field === "Last-Event-ID");
});

test("the stream reads the server's format: comments, split events, CRLF lines and the missed notice", async () => {
  const body = [
    ": a comment\n\n",
    'event: missed\ndata: {"after": 1, "oldest": 5}\n\n',
    'id: 5\nevent: added\ndata: {"id": 5, "at": "2026-01-01T00:00:00Z", "event": "add',
    'ed", "job": 9}\r\n\r\n',
    ": keep-alive\n\n",
    'id: 6\r\nevent: finished\r\ndata: {"id": 6, "at": "2026-01-01T00:00:01Z", "event": "finished", "job": 9}\r\n\r\n',
  ];
  const headers = [];
  const standIn = http.createServer(async (request, response) => {
    headers.push(request.headers["last-event-id"]);
    response.writeHead(200, { "content-type": "text/event-stream" });
    for (const chunk of body) {
      response.write(chunk);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  });
  await new Promise((resolve) => standIn.listen(0, "127.0.0.1", resolve));
  try {
    const stream = await new Client(`http://127.0.0.1:${standIn.address().port}`).events({ after: 1 });
    const events = await take(stream[Symbol.asyncIterator](), 3);
    assert.deepEqual(events, [
      { event: "missed", after: 1, oldest: 5 },
      { id: 5, at: "2026-01-01T00:00:00Z", event: "added", job: 9 },
      { id: 6, at: "2026-01-01T00:00:01Z", event: "finished", job: 9 },
    ]);
    assert.deepEqual([headers, stream.position], [["1"], 6]);
    stream.close();
  } finally {
    standIn.closeAllConnections();
    await new Promise((resolve) => standIn.close(resolve));
  }
});
