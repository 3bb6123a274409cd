"""Errors from a Cairn server: what went wrong (`kind`), which input field (`field`), and the server's message."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:
    from ._options import Seconds


class CairnError(Exception):
    """An error the server answered with, or a request that could not reach it.

    `kind` is the server's error kind (`invalid_input`, `not_found`, `lease_lost`, `invalid_state`,
    `unauthorized`, `unavailable`, …), `field` the input field it names, if any, and `status` the HTTP status
    (None when no answer came).
    """

    def __init__(
        self,
        kind: str,
        message: str,
        field: Optional[str] = None,
        status: Optional[int] = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.field = field
        self.status = status

    def __repr__(self) -> str:
        return f"{type(self).__name__}(kind={self.kind!r}, field={self.field!r}, message={self.message!r})"


class InvalidInput(CairnError):
    """A field broke a rule; `field` names it and the message says the rule."""


class NotFound(CairnError):
    """No such job, queue or schedule."""


class LeaseLost(CairnError):
    """The lease is no longer valid: the job was taken back (it expired, was cancelled, or ran elsewhere)."""


class InvalidState(CairnError):
    """The job is not in a state that allows this (cancelling a finished job, say)."""


class Unauthorized(CairnError):
    """The server wants a bearer token, and this one is missing or wrong, or its role does not allow the call
    (`kind` is then `forbidden`)."""


class Unavailable(CairnError):
    """The server or its database cannot answer now; the same call may succeed later."""


# What a handler raises (here rather than with the worker, so that a running job's steps can raise them too).
class RetryLater(Exception):
    """Raised by a handler: the job runs again after its backoff (or `delay`), with this message as its error."""

    def __init__(self, message: str, delay: Optional[Seconds] = None) -> None:
        super().__init__(message)
        self.delay = delay


class FailJob(Exception):
    """Raised by a handler: the job fails for good, in failure group `group`, with `message` as its error."""

    def __init__(self, group: str, message: str) -> None:
        super().__init__(message)
        self.group = group
        self.message = message


class Suspended(BaseException):
    """Raised by `job.sleep`, `job.sleep_until`, `job.wait_for_signal` and `job.join` when the job now sleeps, waits
    for a signal or waits for its children: its lease is over, and the handler must let this propagate (stop at
    once). The worker ends the run without finishing, retrying or failing the job, which runs again at `until` (RFC
    3339), when the signal comes, or once its children have ended, replaying its steps. `name` is the step's name
    (`nap#2` for a name used again); `key` is the signal's key for a wait, None otherwise; `until` is None for a join,
    which waits for no time.

    It is a `BaseException`, as `asyncio.CancelledError` is, so that an `except Exception:` in the handler does not
    swallow it and go on with work meant for after the sleep."""

    def __init__(self, name: str, until: Optional[str], key: Optional[str] = None) -> None:
        step = f"step {json.dumps(name, ensure_ascii=False)}"
        if until is None:
            super().__init__(f"{step}: the job waits for its children")
        elif key is None:
            super().__init__(f"{step}: the job sleeps until {until}")
        else:
            quoted = json.dumps(key, ensure_ascii=False)
            super().__init__(f"{step}: the job waits for a signal to {quoted} until {until}")
        self.name = name
        self.until = until
        self.key = key


_BY_KIND = {
    "invalid_input": InvalidInput,
    "not_found": NotFound,
    "lease_lost": LeaseLost,
    "invalid_state": InvalidState,
    "unauthorized": Unauthorized,
    "forbidden": Unauthorized,
    "unavailable": Unavailable,
}


def error_from_body(detail: Any, status: Optional[int]) -> CairnError:
    """The exception for an error body's `error` object (or something that is not one)."""
    if not isinstance(detail, dict) or not isinstance(detail.get("kind"), str):
        return CairnError("unknown", f"the server answered {status} without an error body", status=status)
    kind = detail["kind"]
    cls = _BY_KIND.get(kind, CairnError)
    return cls(kind, str(detail.get("message", "")), detail.get("field"), status)


class UnknownOption(InvalidInput, TypeError):
    """An option, filter or member this client does not know, refused before anything is sent: `field` names it,
    and the message lists the names it takes. It is a `TypeError` too, as Python's own unknown keyword is."""
