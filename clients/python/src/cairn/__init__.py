"""Cairn's Python client: enqueue jobs and work them over a Cairn server's HTTP API.

`Client` blocks; `AsyncClient` is the same for asyncio. `push` builds a job for `enqueue_batch`, `Finish` a job's
finish with its result for `finish_many`. `Worker` runs handlers for the jobs it takes. Errors are `CairnError`s
that carry the server's `kind` and the `field` they name.
"""

from ._calls import Finish, push
from ._client import AsyncClient, Client
from ._errors import CairnError, InvalidInput, InvalidState, LeaseLost, NotFound, Unauthorized, Unavailable
from ._types import ClaimedJob, Enqueued, FinishAndTake, Job, Lease
from ._worker import FailJob, JobContext, RetryLater, Worker, WorkerReport

__all__ = [
    "AsyncClient",
    "CairnError",
    "ClaimedJob",
    "Client",
    "Enqueued",
    "FailJob",
    "Finish",
    "FinishAndTake",
    "InvalidInput",
    "InvalidState",
    "Job",
    "JobContext",
    "Lease",
    "LeaseLost",
    "NotFound",
    "RetryLater",
    "Unauthorized",
    "Unavailable",
    "Worker",
    "WorkerReport",
    "push",
]
