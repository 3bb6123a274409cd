"""`RunningJob`: what a `Worker`'s handler gets. It is the job (every field of `Job`: `id`, `name`, `data`,
`attempt`, `queue`, `tags`, `trace_parent`, `failure_group`, …) with its lease, and the calls a handler makes about
its run: `set_result`, `set_data`, `report_progress`, `heartbeat` and `checkpoint`.

A handler may be an `async def` (run on the worker's event loop) or a plain function (run on one of the worker's
threads), so the calls that reach the server work from either: on the loop they start at once and return something
to `await`; on a handler's thread they go to the worker's loop, and return once the server answered (what they
return then needs no `await`). Either way a refusal is raised to the handler: `LeaseLost` once the job was taken
back, and the worker then drops what the handler returns.
"""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Generator, Optional

from ._errors import LeaseLost
from ._types import ClaimedJob, Job, Lease

if TYPE_CHECKING:
    from ._async_client import AsyncClient

# A placeholder the dataclass needs for a field after fields with defaults; every RunningJob is made with its lease.
_NO_LEASE = Lease(job=0, token="", worker="", expires_at="")


class _Done:
    """What a call made from a handler's thread returns: it is over, and awaiting it does nothing more."""

    def __await__(self) -> Generator[Any, None, None]:
        return
        yield  # a generator, as __await__ must be


class _RunState:
    """What changes while a handler runs: what it set, and whether the lease was lost meanwhile."""

    def __init__(self, client: Optional["AsyncClient"], loop: Optional[asyncio.AbstractEventLoop]) -> None:
        self.client, self.loop = client, loop
        self.lost = False
        self.new_data: Any = None
        self.result: Any = None


@dataclass(frozen=True, eq=False)
class RunningJob(Job):
    """The job a handler runs: its fields, its `lease`, and calls about this run.

    What the handler returns is the job's result; `set_result(value)` says it instead, for a handler that returns
    None. `set_data(value)` replaces the job's data when it finishes (what a recurring job's next run starts from).
    `report_progress(value)`, `heartbeat()` and `checkpoint(data)` reach the server at once: `await` them in an async
    handler; in a plain function, call them.
    """

    lease: Lease = field(default=_NO_LEASE, repr=False)
    _state: _RunState = field(default_factory=lambda: _RunState(None, None), repr=False)

    @staticmethod
    def start(claimed: ClaimedJob, client: "AsyncClient", loop: asyncio.AbstractEventLoop) -> "RunningJob":
        fields = {f.name: getattr(claimed.job, f.name) for f in dataclasses.fields(Job)}
        return RunningJob(**fields, lease=claimed.lease, _state=_RunState(client, loop))

    @property
    def job(self) -> Job:
        """The job itself (as a `JobContext`'s `job` was)."""
        return self

    @property
    def lost(self) -> bool:
        """Whether the lease was lost meanwhile (the job cancelled, or taken back): what the handler returns is
        dropped."""
        return self._state.lost

    def set_result(self, result: Any) -> None:
        """The job's result when the handler returns None (what it returns otherwise wins)."""
        self._state.result = result

    def set_data(self, data: Any) -> None:
        """Replaces the job's data with `data` when the handler returns (None: keeps it): what a recurring job's next
        run starts from. The result is kept apart."""
        self._state.new_data = data

    def report_progress(self, progress: Any) -> Awaitable[None]:
        """Records the job's progress (any JSON: `0.5`, `{"done": 10, "of": 40}`), which the job shows as
        `progress`, and extends the lease. (`progress` itself is the job's field: the progress reported last when
        the job was taken, by an earlier attempt.)"""
        return self._call(lambda client: client.heartbeat(self.lease, progress))

    def heartbeat(self) -> Awaitable[None]:
        """Extends the lease now (the worker does it by itself every third of the lease timeout: call this in a
        handler that blocks its thread longer than a lease, between steps)."""
        return self._call(lambda client: client.heartbeat(self.lease))

    def checkpoint(self, data: Any) -> Awaitable[None]:
        """Saves `data` as the job's data now, so that a retry starts from it, and extends the lease."""
        return self._call(lambda client: client.checkpoint(self.lease, data))

    def _call(self, make: Callable[["AsyncClient"], Awaitable[Any]]) -> Awaitable[None]:
        state = self._state
        if state.client is None or state.loop is None:
            raise RuntimeError("this job is not running in a worker")
        client = state.client

        async def call() -> None:
            try:
                await make(client)
            except LeaseLost:
                state.lost = True
                raise

        try:
            running: Optional[asyncio.AbstractEventLoop] = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is state.loop:
            # Started now, so that it happens even if the handler does not await it.
            return asyncio.ensure_future(call())
        # From a handler's thread: the worker's loop makes the request, and this thread waits for its answer.
        asyncio.run_coroutine_threadsafe(call(), state.loop).result()
        return _Done()


JobContext = RunningJob
"""What handlers got before they got the job itself: the same class (its `job`, `lease`, `data`, `lost` and
`set_data` are still there)."""
