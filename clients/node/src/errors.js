// Errors from a Cairn server: what went wrong (`kind`), which input field (`field`), and the server's message.

/** An error the server answered with, or a request that could not reach it (`status` null). */
export class CairnError extends Error {
  constructor(kind, message, field = null, status = null) {
    super(message);
    this.name = new.target.name;
    this.kind = kind;
    this.field = field;
    this.status = status;
  }
}

/** A field broke a rule; `field` names it and the message says the rule. */
export class InvalidInput extends CairnError {}
/** No such job, queue or schedule. */
export class NotFound extends CairnError {}
/** The lease is no longer valid: the job was taken back. */
export class LeaseLost extends CairnError {}
/** The job is not in a state that allows this. */
export class InvalidState extends CairnError {}
/** The server wants a bearer token, and this one is missing or wrong. */
export class Unauthorized extends CairnError {}
/** The server or its database cannot answer now; the same call may succeed later. */
export class Unavailable extends CairnError {}

const BY_KIND = {
  invalid_input: InvalidInput,
  not_found: NotFound,
  lease_lost: LeaseLost,
  invalid_state: InvalidState,
  unauthorized: Unauthorized,
  // A token whose role does not allow the call (403): no more a passing fault than a wrong token.
  forbidden: Unauthorized,
  unavailable: Unavailable,
};

/** The error for an error body's `error` object (or something that is not one). */
export function errorFromBody(detail, status) {
  if (!detail || typeof detail.kind !== "string") {
    return new CairnError("unknown", `the server answered ${status} without an error body`, null, status);
  }
  const Class = BY_KIND[detail.kind] ?? CairnError;
  return new Class(detail.kind, String(detail.message ?? ""), detail.field ?? null, status);
}
