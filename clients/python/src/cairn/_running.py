"""`RunningJob`: what a `Worker`'s handler gets. It is the job (every field of `Job`: `id`, `name`, `data`,
`attempt`, `queue`, `tags`, `trace_parent`, `failure_group`, …) with its lease, and the calls a handler makes about
its run: `set_result`, `set_data`, `report_progress`, `heartbeat`, `checkpoint`, `step`, `sleep`, `sleep_until`,
`wait_for_signal`, `spawn` and `join`.

A handler may be an `async def` (run on the worker's event loop) or a plain function (run on one of the worker's
threads), so the calls that reach the server work from either: on the loop they start at once and return something
to `await`; on a handler's thread they go to the worker's loop, and return once the server answered (what they
return then needs no `await`). Either way a refusal is raised to the handler: `LeaseLost` once the job was taken
back, and the worker then drops what the handler returns.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
import threading
import unicodedata
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Dict, Generator, List, Optional, Sequence, Tuple

from ._calls import signal_timeout_ms, spawn_jobs
from ._errors import CairnError, FailJob, LeaseLost, RetryLater, Suspended
from ._options import PushBody, Seconds, Time, millis, rfc3339
from ._types import ClaimedJob, Job, JoinedChild, Lease, Signal

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
        # The steps known to this run by name (None until the first `step`, which reads the job's `steps`), and how
        # many times this run used each name, which numbers a name used again.
        self.recorded: Optional[Dict[str, Any]] = None
        self.used: Dict[str, int] = {}
        self.steps_lock = threading.Lock()
        # When the job sleeps until, once a sleep or a wait for a signal suspended it ("" once a join did, which waits
        # for no time): its lease is over, and the run ends with no finish.
        self.suspended: Optional[str] = None


# The longest step name (and signal key) the server takes, in bytes of UTF-8.
MAX_STEP_NAME = 255


@dataclass(frozen=True, eq=False)
class RunningJob(Job):
    """The job a handler runs: its fields, its `lease`, and calls about this run.

    What the handler returns is the job's result; `set_result(value)` says it instead, for a handler that returns
    None. `set_data(value)` replaces the job's data when it finishes (what a recurring job's next run starts from).
    `report_progress(value)`, `heartbeat()` and `checkpoint(data)` reach the server at once: `await` them in an async
    handler; in a plain function, call them. So are `step(name, fn)`, which runs `fn` once across the job's attempts,
    `sleep(name, seconds)` and `sleep_until(name, when)`, which give up the worker until then,
    `wait_for_signal(name, key, timeout)`, which gives it up until a signal comes, `spawn(name, jobs)`, which pushes
    child jobs once, and `join(name)`, which gives it up until they have ended.
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

    def step(self, name: str, fn: Callable[[], Any]) -> Any:
        """Runs `fn` (no arguments) as step `name` of the job, once: the first time, `fn` runs and what it returns
        (any JSON) is recorded under the job's lease before it is returned; on every later attempt (after a crash, a
        deploy, a retry) the recorded result is returned and `fn` does not run. In a plain-function handler it
        returns the result, `fn` running on the handler's thread; in an async handler, `await job.step(…)`, and
        `fn` may be a plain function or an `async def`.

        A name used again in one run is numbered (`page`, `page#2`, `page#3`, …), so the turns of a loop are steps
        of their own, found again in the order the run reaches them: keep that order from run to run.

        If `fn` raises, nothing is recorded and the error is the handler's, its message naming the step
        (`step "charge": card declined`): a `FailJob` stays one, a `RetryLater` too, and any other exception becomes
        a `RetryLater`. A name that is empty, longer than 255 bytes, or holds `#` or a control character, and a
        result that is not JSON, fail the job for good (`FailJob` in group `step`). So does a result the server
        refuses to record (`InvalidInput` or `InvalidState`: larger than the largest job data, a job at its limit of
        steps): `fn` has run, and a retry would run it again only to be refused again. A lost lease raises
        `LeaseLost`; any other error (the server unavailable, say) retries the job, its message naming the step.
        """
        full, recorded, known = self._next_step(name)
        state = self._state
        if self._on_worker_loop():

            async def run() -> Any:
                if known:
                    return recorded
                try:
                    value = fn()
                    if inspect.isawaitable(value):
                        value = await value
                except Exception as e:
                    raise _in_step(full, e) from e
                return await self._record_step(full, value)

            return run()
        if known:
            return recorded
        loop = state.loop
        if loop is None:
            raise RuntimeError("this job is not running in a worker")
        try:
            value = fn()
            if inspect.isawaitable(value):
                # An `async def` body, from a handler's thread: the worker's loop runs it.
                value = asyncio.run_coroutine_threadsafe(_awaited(value), loop).result()
        except Exception as e:
            raise _in_step(full, e) from e
        return asyncio.run_coroutine_threadsafe(self._record_step(full, value), loop).result()

    def sleep(self, name: str, seconds: Seconds) -> Awaitable[None]:
        """Sleeps for `seconds` (a number or a timedelta) as step `name`, without holding a worker, as the Rust
        client's `JobContext::sleep` does. The first time, the server records the wake time (its now plus `seconds`)
        as the step's result and the job gives up its lease: this raises `Suspended`, which the handler must let
        through. The worker then ends the run without finishing, retrying or failing the job (the attempt does not
        count; its history says `suspended`), and the job runs again at that time, replaying its steps: this sleep
        then finds its time passed and returns, and the handler goes on. A job woken early (requeued) sleeps again
        until the same time.

        In a plain-function handler it returns once the server answered; in an async handler, `await` it. A name used
        again in one run is numbered, and shares its count with `step`'s (`nap`, `nap#2`, …); a bad name fails the
        job for good, as for `step`. A lost lease raises `LeaseLost`; another refusal retries the job, its message
        naming the step."""
        millis(seconds, "seconds")  # a bad duration is refused here, before anything is sent
        return self._sleep(name, seconds, None)

    def sleep_until(self, name: str, when: Time) -> Awaitable[None]:
        """Sleeps until `when` (an RFC 3339 string, or a datetime with its time zone) as step `name`; see `sleep`."""
        return self._sleep(name, None, rfc3339(when, "when"))

    def _sleep(self, name: str, seconds: Optional[Seconds], until: Optional[str]) -> Awaitable[None]:
        state = self._state
        if state.client is None or state.loop is None:
            raise RuntimeError("this job is not running in a worker")
        client, loop = state.client, state.loop
        # Asked of the server every time, even on a replay: its clock says whether the time has passed.
        full, _, _ = self._next_step(name)

        async def sleep() -> None:
            try:
                slept = await client.sleep(self.lease, full, seconds=seconds, until=until)
            except LeaseLost:
                state.lost = True
                raise
            except Exception as e:
                raise _in_step(full, e) from e
            if slept.suspended:
                state.suspended = slept.until or ""
                raise Suspended(full, state.suspended)

        if self._on_worker_loop():
            return sleep()
        asyncio.run_coroutine_threadsafe(sleep(), loop).result()
        return _Done()

    def wait_for_signal(self, name: str, key: str, timeout: Seconds) -> Any:
        """Waits as step `name` for a signal sent to `key` (`Client.signal`), without holding a worker, for at most
        `timeout` (seconds, a number or a timedelta; at most ten years) from the first time the step is reached, as
        the Rust client's `JobContext::wait_for_signal` does. It answers a `Signal`: `received` with the signal's
        `data` (which may be None, JSON's null), or not `received` once the time passed with no signal, for the
        handler to decide. In a plain-function handler it returns the `Signal`; in an async handler, `await` it.

        A signal sent before the wait is kept, and received at once. Otherwise the job gives up its lease: this raises
        `Suspended` (with the `key`), which the handler must let through, and the worker ends the run as after a
        sleep. The job runs again when the signal comes or the time passes, replaying its steps, and this wait then
        answers what came. What it got is recorded as the step's result, so a later attempt gets the same answer
        without asking the server.

        A name used again in one run is numbered, and shares its count with `step`'s and `sleep`'s; a bad name or key
        (empty, over 255 bytes, a control character) fails the job for good, as for `step`. A bad timeout raises
        `InvalidInput` before anything is sent. A lost lease raises `LeaseLost`; another refusal retries the job, its
        message naming the step."""
        signal_timeout_ms(timeout)  # a bad timeout is refused here, before anything is sent
        state = self._state
        if state.client is None or state.loop is None:
            raise RuntimeError("this job is not running in a worker")
        client, loop = state.client, state.loop
        full, recorded, known = self._next_step(name)
        problem = _text_problem(key)
        if problem is not None:
            raise FailJob("step", f"step {_quoted(full)}: key: {problem}")

        async def wait() -> Signal:
            # Received or timed out on an earlier attempt: no request on a replay.
            if known and isinstance(recorded, dict):
                if "signal" in recorded:
                    return Signal(received=True, data=recorded["signal"])
                if "timed_out" in recorded:
                    return Signal(received=False)
            try:
                waited = await client.wait_for_signal(self.lease, full, key, timeout)
            except LeaseLost:
                state.lost = True
                raise
            except Exception as e:
                raise _in_step(full, e) from e
            if waited.suspended:
                state.suspended = waited.until or ""
                raise Suspended(full, state.suspended, key)
            with state.steps_lock:
                assert state.recorded is not None
                state.recorded[full] = {"signal": waited.data} if waited.received else {"timed_out": True}
            return Signal(received=waited.received, data=waited.data if waited.received else None)

        if self._on_worker_loop():
            return wait()
        return asyncio.run_coroutine_threadsafe(wait(), loop).result()

    def spawn(self, name: str, jobs: Sequence[PushBody]) -> Any:
        """Pushes `jobs` (each made by `push`, as `Client.enqueue_batch` takes them; at most 1,000) as children of
        this job, as step `name`, all or none, as the Rust client's `JobContext::spawn` does, and answers their ids
        (a list of ints, in the order given). Their ids are recorded, so a later attempt gets the same ids back
        without a request and pushes nothing again. The children start at once: they are the step's, so they neither
        wait for the run to finish nor go if it fails. Wait for them with `join`. In a plain-function handler it
        returns the ids; in an async handler, `await` it.

        A job that is not one `push` made (or a dict of the same) raises `InvalidInput` before anything is sent; an
        option `push` does not know raises `UnknownOption` there. A name used again in one run is numbered, and
        shares its count with `step`'s, `sleep`'s and `wait_for_signal`'s; a bad name fails the job for good, as for
        `step`. A spawn the server refuses for its input (`InvalidInput` or `InvalidState`: a job naming another
        `parent`, field `jobs[i].parent`) fails the job for good too, in group `step`, since a retry would be refused
        the same. A lost lease raises `LeaseLost`; any other error (the server unavailable, say) retries the job, its
        message naming the step."""
        children = spawn_jobs(jobs)  # refused here, before anything is sent
        client, loop = self._worker()
        full, recorded, known = self._next_step(name)
        state = self._state

        async def spawn() -> List[int]:
            # Spawned by an earlier attempt: no request on a replay.
            ids = _spawned(recorded) if known else None
            if ids is not None:
                return ids
            try:
                spawned = await client.spawn(self.lease, full, children)
            except LeaseLost:
                state.lost = True
                raise
            except Exception as e:
                raise _in_step(full, _refused_for_good(e)) from e
            with state.steps_lock:
                assert state.recorded is not None
                state.recorded[full] = {"children": list(spawned.children)}
            return list(spawned.children)

        if self._on_worker_loop():
            return spawn()
        return asyncio.run_coroutine_threadsafe(spawn(), loop).result()

    def join(self, name: str) -> Any:
        """Waits as step `name` until every child of this job has ended, without holding a worker, as the Rust
        client's `JobContext::join` does, and answers how each ended, oldest first: a list of `JoinedChild` (`id`,
        `state`, `result`). In a plain-function handler it returns the list; in an async handler, `await` it.

        While some child has not ended, the job gives up its lease: this raises `Suspended` (`until` None), which the
        handler must let through, and the worker ends the run as after a sleep. The job is `waiting` meanwhile, and
        runs again once the last child has ended, replaying its steps: this join then answers. A child that fails
        holds the join, as it holds a parent: requeue it, or cancel it to go on (the join then says `cancelled`).
        What the join answered is recorded as the step's result, so a later attempt gets the same answer without
        asking the server.

        A name used again in one run is numbered, and shares its count with the other steps'; a bad name fails the
        job for good, as for `step`. A lost lease raises `LeaseLost`; another refusal retries the job, its message
        naming the step."""
        client, loop = self._worker()
        full, recorded, known = self._next_step(name)
        state = self._state

        async def join() -> List[JoinedChild]:
            # Answered on an earlier attempt: no request on a replay. One not recorded yet is always asked, since only
            # the server knows whether the children have ended.
            ended = _joined(recorded) if known else None
            if ended is not None:
                return ended
            try:
                joined = await client.join(self.lease, full)
            except LeaseLost:
                state.lost = True
                raise
            except Exception as e:
                raise _in_step(full, e) from e
            if joined.suspended:
                state.suspended = ""
                raise Suspended(full, None)
            with state.steps_lock:
                assert state.recorded is not None
                state.recorded[full] = {"children": [dataclasses.asdict(c) for c in joined.children]}
            return list(joined.children)

        if self._on_worker_loop():
            return join()
        return asyncio.run_coroutine_threadsafe(join(), loop).result()

    def _worker(self) -> Tuple["AsyncClient", asyncio.AbstractEventLoop]:
        """The worker's client and event loop, which the calls that reach the server go through."""
        state = self._state
        if state.client is None or state.loop is None:
            raise RuntimeError("this job is not running in a worker")
        return state.client, state.loop

    def _next_step(self, name: str) -> Tuple[str, Any, bool]:
        """The name the next use of `name` records under, and its recorded result with whether there is one."""
        if "#" in name:
            message = "a step's name must not hold '#', which numbers a name used again"
            raise FailJob("step", f"step {_quoted(name)}: {message}")
        state = self._state
        with state.steps_lock:
            if state.recorded is None:
                state.recorded = {s.name: s.result for s in self.steps}
            used = state.used[name] = state.used.get(name, 0) + 1
            full = name if used == 1 else f"{name}#{used}"
            known = full in state.recorded
            recorded = state.recorded.get(full)
        # As the server checks it, before the body runs.
        problem = _text_problem(full)
        if problem is not None:
            raise FailJob("step", f"step: {problem}")
        return full, recorded, known

    async def _record_step(self, full: str, value: Any) -> Any:
        """Records `value` as step `full` (on the worker's loop), and returns the result that stands."""
        state = self._state
        if state.client is None:
            raise RuntimeError("this job is not running in a worker")
        try:
            # As the request will carry it: a NaN is no more JSON than an object is.
            sent = json.loads(json.dumps(value, allow_nan=False))
        except (TypeError, ValueError) as e:
            raise FailJob("step", f"step {_quoted(full)}: its result is not JSON: {e}") from e
        try:
            stored = await state.client.record_step(self.lease, full, sent)
        except LeaseLost:
            state.lost = True
            raise
        except Exception as e:
            raise _in_step(full, _refused_for_good(e)) from e
        with state.steps_lock:
            assert state.recorded is not None
            state.recorded[full] = stored.result
        # Recorded already under this name (a request sent again after its answer was lost): the first stands.
        return value if stored.result == sent else stored.result

    def _on_worker_loop(self) -> bool:
        try:
            running: Optional[asyncio.AbstractEventLoop] = asyncio.get_running_loop()
        except RuntimeError:
            return False
        return running is self._state.loop

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


async def _awaited(value: Awaitable[Any]) -> Any:
    return await value


def _spawned(recorded: Any) -> Optional[List[int]]:
    """The ids a spawn recorded (`{"children": [ids]}`), or None for a result that is not a spawn's."""
    ids = recorded.get("children") if isinstance(recorded, dict) else None
    if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        return None
    return list(ids)


def _joined(recorded: Any) -> Optional[List[JoinedChild]]:
    """How the children ended, as a join recorded it (`{"children": [{"id", "state", "result"}]}`), or None for a
    result that is not a join's."""
    children = recorded.get("children") if isinstance(recorded, dict) else None
    if not isinstance(children, list):
        return None
    if not all(isinstance(c, dict) and isinstance(c.get("id"), int) and isinstance(c.get("state"), str) for c in children):
        return None
    return [JoinedChild.from_body(c) for c in children]


def _text_problem(text: str) -> Optional[str]:
    """What is wrong with a step's name or a signal's key, as the server checks both, or None."""
    if not text:
        return "must not be empty"
    if len(text.encode()) > MAX_STEP_NAME:
        return f"must be at most {MAX_STEP_NAME} bytes, got {len(text.encode())}"
    control = next((c for c in text if unicodedata.category(c) == "Cc"), None)
    if control is not None:
        return f"must not contain control characters, got {control!r}"
    return None


def _quoted(name: str) -> str:
    """A step's name in double quotes, as the Rust client writes it in messages."""
    return json.dumps(name, ensure_ascii=False)


def _refused_for_good(error: Exception) -> Exception:
    """A step's record or spawn that the server refused, as the Rust client's `refused_for_good` reads it: a `FailJob`
    in group `step` when the refusal is the input's (`invalid_input`, `invalid_state`), which every retry would meet
    again, running the step's body again each time; the error as it is otherwise (an outage), for a retry."""
    if isinstance(error, CairnError) and error.kind in ("invalid_input", "invalid_state"):
        return FailJob("step", error.message)
    return error


def _in_step(name: str, error: Exception) -> Exception:
    """The same failure, its message saying that it happened in step `name`: a `FailJob` stays one and a `RetryLater`
    too; any other exception becomes a `RetryLater` with the text the worker would have written for it."""
    prefix = f"step {_quoted(name)}: "
    if isinstance(error, FailJob):
        return FailJob(error.group, prefix + error.message)
    if isinstance(error, RetryLater):
        return RetryLater(prefix + str(error), delay=error.delay)
    text = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    return RetryLater(prefix + text)


JobContext = RunningJob
"""What handlers got before they got the job itself: the same class (its `job`, `lease`, `data`, `lost` and
`set_data` are still there)."""
