"""Cairn's Python client: enqueue jobs, manage them and work them over a Cairn server's HTTP API.

`Client` blocks; `AsyncClient` is the same for asyncio. `push` builds a job for `enqueue_batch`, `create_batch` and
`set_recurring` (with `Retry`, `Debounce` and `Throttle` for its options), `Finish` a job's finish with its result for
`finish_many`. `Worker` runs handlers for the jobs it takes, each given the job (`RunningJob`); a handler's
`job.sleep`, `job.wait_for_signal` and `job.join` raise `Suspended` for it to let through, `signal` sends what a
wait receives (a `Signal`), and `job.spawn` pushes children that `job.join` answers (each a `JoinedChild`). `events`
follows the activity log. Errors are `CairnError`s that carry the server's `kind`
and the `field` they name.
"""

from ._async_client import AsyncClient
from ._calls import Finish
from ._client import Client
from ._errors import (CairnError, FailJob, InvalidInput, InvalidState, LeaseLost, NotFound, RetryLater, Suspended,
                      Unauthorized, Unavailable, UnknownOption)
from ._events import AsyncEventStream, EventStream, Missed
from ._options import Debounce, JobFilter, PushOptions, Retry, RetryPolicy, Throttle, push
from ._running import JobContext, RunningJob
from ._types import (ActivityPage, Attempt, Batch, BatchCallback, BatchCreated, BatchPage, BulkResult, ClaimedJob,
                     Enqueued, Event, FailureGroup, FinishAndTake, Job, JobPage, Joined, JoinedChild, Lease, QueueStats,
                     Recurring, Signal, SignalSent, SignalWait, Slept, Spawned, Step, Token, WorkerInfo)
from ._worker import Worker, WorkerReport

__all__ = [
    "ActivityPage",
    "AsyncClient",
    "AsyncEventStream",
    "Attempt",
    "Batch",
    "BatchCallback",
    "BatchCreated",
    "BatchPage",
    "BulkResult",
    "CairnError",
    "ClaimedJob",
    "Client",
    "Debounce",
    "Enqueued",
    "Event",
    "EventStream",
    "FailJob",
    "FailureGroup",
    "Finish",
    "FinishAndTake",
    "InvalidInput",
    "InvalidState",
    "Job",
    "JobContext",
    "JobFilter",
    "JobPage",
    "Joined",
    "JoinedChild",
    "Lease",
    "LeaseLost",
    "Missed",
    "NotFound",
    "PushOptions",
    "QueueStats",
    "Recurring",
    "Retry",
    "RetryLater",
    "RetryPolicy",
    "RunningJob",
    "Signal",
    "SignalSent",
    "SignalWait",
    "Slept",
    "Spawned",
    "Step",
    "Suspended",
    "Throttle",
    "Token",
    "Unauthorized",
    "Unavailable",
    "UnknownOption",
    "Worker",
    "WorkerInfo",
    "WorkerReport",
    "push",
]
