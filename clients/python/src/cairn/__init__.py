"""Cairn's Python client: enqueue jobs and work them over a Cairn server's HTTP API.

`Client` blocks; `AsyncClient` is the same for asyncio. `push` builds a job for `enqueue_batch`. Errors are
`CairnError`s that carry the server's `kind` and the `field` they name.
"""

from ._calls import push
from ._client import AsyncClient, Client
from ._errors import CairnError, InvalidInput, InvalidState, LeaseLost, NotFound, Unauthorized, Unavailable
from ._types import ClaimedJob, Enqueued, FinishAndTake, Job, Lease

__all__ = [
    "AsyncClient",
    "CairnError",
    "ClaimedJob",
    "Client",
    "Enqueued",
    "FinishAndTake",
    "InvalidInput",
    "InvalidState",
    "Job",
    "Lease",
    "LeaseLost",
    "NotFound",
    "Unauthorized",
    "Unavailable",
    "push",
]
