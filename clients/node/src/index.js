// Cairn's Node client: enqueue jobs and work them over a Cairn server's HTTP API, on Node's own `node:http`.
export { Client, push, DEFAULT_URL } from "./client.js";
export { CairnError, InvalidInput, InvalidState, LeaseLost, NotFound, Unauthorized, Unavailable } from "./errors.js";
export { EventStream } from "./events.js";
export { FailJob, RetryLater, Suspended, Worker, exactPattern, globRegExp } from "./worker.js";
