"""`Worker`: runs a handler for each job it takes from a Cairn server, as the Rust `cairn::Worker` does.

It takes as many jobs per request as it has free slots (a long poll when none is ready), heartbeats each job while
its handler runs, and reports the jobs that end together in one request. A handler's slot is free once it
returns: its finish goes meanwhile, with others', one request at a time, and the worker takes its next jobs without
waiting for the answer (a finish waits for the server's fsync; a take does not), while fewer than its slots' worth
(and at least 32) wait for theirs. A handler that raises `RetryLater` or any other exception has the
job retried with the exception's text as the error; `FailJob` fails it for good. A lost lease (the job cancelled,
or taken back after the lease expired) stops reporting: what the handler returns is dropped. A handler that sleeps
or waits for a signal or for its children (`job.sleep`, `job.wait_for_signal`, `job.join`, which raise
`Suspended`) has given up its lease: the run ends with nothing reported. On SIGTERM or SIGINT (`run`) or `stop()`,
it takes no more jobs, lets running ones finish until the deadline, gives back the rest, and says it stopped.

Handlers may be plain functions (run on threads of the worker's own, as many as its slots) or `async def` functions
(run on the worker's event loop); either takes the job (a `RunningJob`: the job's fields, and calls about its run)
and returns the job's result (None for none), which the job keeps apart from its data. `set_data` replaces the data
(what a recurring job's next run starts from).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import json
import logging
import re
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from collections import deque
from typing import Any, Awaitable, Callable, Deque, Dict, List, Optional, Pattern, Sequence, Tuple, Union

from ._async_client import AsyncClient
from ._calls import Finish
from ._client import ClientCert
from ._errors import CairnError, FailJob, InvalidInput, LeaseLost, RetryLater, Suspended
from ._options import Seconds, millis
from ._running import RunningJob
from ._types import ClaimedJob

log = logging.getLogger("cairn.worker")

# A worker of few slots still takes jobs while this many finishes wait for their answer (see the Rust worker).
MIN_UNANSWERED_FINISHES = 32
# The most finishes one request carries.
MAX_PER_CALL = 100


Handler = Callable[[RunningJob], Union[Any, Awaitable[Any]]]
"""A handler: given the job, it returns the job's result (None for none), or an awaitable of it."""


@dataclass
class WorkerReport:
    """How the jobs a worker took ended."""

    finished: int = 0
    retried: int = 0
    failed: int = 0
    lost: int = 0
    released: int = 0
    # Jobs whose handler slept or waited for a signal (`job.sleep`, `job.wait_for_signal`): they run again at their
    # time, or when the signal comes.
    suspended: int = 0


def glob_regex(pattern: str) -> Pattern[str]:
    """SQLite's GLOB as a regular expression: `*`, `?`, `[abc]`, `[a-z]`, `[^abc]`; case-sensitive."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if c == "*":
            out.append(".*")
        elif c == "?":
            out.append(".")
        elif c == "[":
            j = i + 1
            negate = pattern[j : j + 1] == "^"
            j += negate
            start = j
            # A `]` first in the set is one of its characters.
            end = pattern.find("]", j + 1 if pattern[j : j + 1] == "]" else j)
            if end < 0:
                raise InvalidInput("invalid_input", f"name_pattern: unclosed [ in {pattern!r}", "name_pattern")
            members = "".join("\\" + ch if ch in "\\]^[" else ch for ch in pattern[start:end])
            out.append(f"[{'^' if negate else ''}{members}]")
            i = end
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out), re.DOTALL)


def exact_pattern(name: str) -> str:
    """The GLOB pattern that matches `name` alone."""
    return re.sub(r"([*?\[])", r"[\1]", name)


class Worker:
    """Runs handlers for jobs from a Cairn server.

    >>> worker = Worker("http://127.0.0.1:6670", "resizer-1", max_concurrency=8)
    >>> @worker.handler("image.resize")
    ... def resize(job):
    ...     return {"url": make_thumbnail(job.data["url"])}   # the job's result
    >>> worker.run()   # until SIGTERM or SIGINT
    """

    def __init__(
        self,
        url: str,
        worker_id: str,
        *,
        token: Optional[str] = None,
        ca_file: Optional[str] = None,
        client_cert: Optional[ClientCert] = None,
        queues: Sequence[str] = (),
        max_concurrency: int = 4,
        wait: Seconds = 30.0,
        shutdown_deadline: Seconds = 30.0,
    ) -> None:
        if max_concurrency < 1:
            raise InvalidInput("invalid_input", f"max_concurrency: must be at least 1, got {max_concurrency}", "max_concurrency")
        self.url, self.id, self.token = url, worker_id, token
        self.ca_file, self.client_cert = ca_file, client_cert
        self.queues = list(queues)
        self.max_concurrency = max_concurrency
        self.wait = millis(wait, "wait") / 1000
        self.shutdown_deadline = millis(shutdown_deadline, "shutdown_deadline") / 1000
        self._exact: Dict[str, Handler] = {}
        self._globs: List[Tuple[str, Pattern[str], Handler]] = []
        self._async: Dict[Handler, bool] = {}
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._stop: Optional[asyncio.Event] = None

    def handler(self, name: str, fn: Optional[Handler] = None) -> Any:
        """Registers `fn` for jobs named exactly `name` (usable as a decorator)."""
        return self._register(name, None, fn)

    def glob_handler(self, pattern: str, fn: Optional[Handler] = None) -> Any:
        """Registers `fn` for jobs whose name matches the GLOB `pattern` (`email.*`), after exact names."""
        return self._register(pattern, glob_regex(pattern), fn)

    def _register(self, key: str, regex: Optional[Pattern[str]], fn: Optional[Handler]) -> Any:
        def add(handler: Handler) -> Handler:
            self._async[handler] = inspect.iscoroutinefunction(handler)
            if regex is None:
                self._exact[key] = handler
            else:
                self._globs.append((key, regex, handler))
            return handler

        return add if fn is None else add(fn)

    def _handler_for(self, name: str) -> Optional[Handler]:
        if name in self._exact:
            return self._exact[name]
        return next((h for _, regex, h in self._globs if regex.fullmatch(name)), None)

    def _is_async(self, handler: Handler) -> bool:
        return self._async[handler]

    def _patterns(self) -> List[str]:
        return [exact_pattern(n) for n in self._exact] + [p for p, _, _ in self._globs]

    def run(self) -> WorkerReport:
        """Runs until SIGTERM or SIGINT (or `stop()`), then stops gracefully; returns what became of the jobs."""

        async def main() -> WorkerReport:
            loop = asyncio.get_running_loop()
            stop = asyncio.Event()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, stop.set)
            return await self.run_async(stop)

        return asyncio.run(main())

    def stop(self) -> None:
        """Asks a running worker to stop (from any thread)."""
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)

    async def run_async(self, stop: Optional[asyncio.Event] = None) -> WorkerReport:
        """`run` on the running event loop, until `stop` is set."""
        if not self._exact and not self._globs:
            raise InvalidInput("invalid_input", "handlers: a worker needs at least one", "handlers")
        self._loop, self._stop = asyncio.get_running_loop(), stop or asyncio.Event()
        async with AsyncClient(
            self.url, token=self.token, ca_file=self.ca_file, client_cert=self.client_cert
        ) as client:
            return await _Run(self, client, self._stop).run()


class _Heartbeat:
    """A running job's lease to extend, and when."""

    def __init__(self, claimed: ClaimedJob, job: RunningJob, task: "Optional[asyncio.Task[Any]]") -> None:
        self.claimed, self.job, self.task = claimed, job, task
        self.every = max((claimed.job.lease_timeout_ms or 60_000) / 3000, 0.05)
        self.next = time.monotonic() + self.every


class _Run:
    """One run of a worker: its jobs, its finishes, and its report."""

    def __init__(self, worker: Worker, client: AsyncClient, stop: asyncio.Event) -> None:
        self.worker, self.client, self.stop = worker, client, stop
        self.report = WorkerReport()
        self.weight = 0
        self.jobs: Dict[asyncio.Task[None], ClaimedJob] = {}
        self.slot_freed = asyncio.Event()
        # Finishes no request carries yet: the finisher sends those waiting together, one request at a time.
        self.finishes: Deque[Finish] = deque()
        self.finish_ready = asyncio.Event()
        self.closing = False
        self.unanswered = 0
        self.heartbeats: Dict[int, _Heartbeat] = {}
        self.heartbeat_wake = asyncio.Event()
        # When the heartbeat loop wakes next by itself: a job whose first beat is due later needs no wake-up.
        self.heartbeat_at = 0.0
        # The names asked for, computed again only when handlers are added while running.
        self.patterns: List[str] = []
        self.patterns_for = -1
        # Threads for plain-function handlers, one per slot at most, made as they are needed: the default executor
        # has no more than 32 (cores + 4), fewer than a worker's slots may be.
        self.threads: Optional[ThreadPoolExecutor] = None

    async def run(self) -> WorkerReport:
        finisher = asyncio.create_task(self.finish_loop())
        heartbeater = asyncio.create_task(self.heartbeat_loop())
        stopping = asyncio.create_task(self.stop.wait())
        bound = max(self.worker.max_concurrency, MIN_UNANSWERED_FINISHES)
        while not self.stop.is_set():
            if self.jobs:
                # Jobs that end together end in the same turn of the loop: let their slots free before asking.
                await asyncio.sleep(0)
            room = self.worker.max_concurrency - self.weight
            if room <= 0 or self.unanswered >= bound:
                self.slot_freed.clear()
                freed = asyncio.create_task(self.slot_freed.wait())
                await asyncio.wait({freed, stopping}, return_when=asyncio.FIRST_COMPLETED)
                freed.cancel()
                continue
            # The finishes go on their own meanwhile: a take never waits for them to be durable, as a finish does.
            fetch = asyncio.create_task(
                self.client.dequeue(
                    self.worker.id,
                    queues=self.worker.queues,
                    names=self.names(),
                    limit=room,
                    max_weight=room,
                    wait=self.worker.wait,
                )
            )
            await asyncio.wait({fetch, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if not fetch.done():
                # Stopping: the server gives back a job it claimed for a request that went away.
                fetch.cancel()
                break
            try:
                claimed = fetch.result()
            except CairnError as e:
                if self.stop.is_set():
                    break
                log.error("worker %s: taking jobs failed (%s); trying again in a second", self.worker.id, e)
                await asyncio.wait({stopping}, timeout=1.0)
                continue
            if self.stop.is_set():
                # The answer and the stop came in the same turn: the jobs go back rather than run after the stop.
                await self.release_all(claimed)
                break
            for job in claimed:
                self.start(job)
        stopping.cancel()
        await self.drain()
        heartbeater.cancel()
        if self.threads is not None:
            # A handler still running past the deadline goes on (a thread cannot be stopped); its job was given back.
            self.threads.shutdown(wait=False)
        self.closing = True
        self.finish_ready.set()
        await finisher
        try:
            await self.client.worker_stopped(self.worker.id)
        except CairnError as e:
            log.debug("worker %s: could not say it stopped: %s", self.worker.id, e)
        return self.report

    def start(self, claimed: ClaimedJob) -> None:
        weight = claimed.job.weight
        self.weight += weight
        task = asyncio.create_task(self.run_job(claimed, weight))
        self.jobs[task] = claimed
        task.add_done_callback(lambda t: self.jobs.pop(t, None))

    def free(self, weight: int) -> None:
        self.weight -= weight
        self.slot_freed.set()

    async def run_job(self, claimed: ClaimedJob, weight: int) -> None:
        job = RunningJob.start(claimed, self.client, asyncio.get_running_loop())
        handler = self.worker._handler_for(claimed.job.name)
        if handler is None:  # only names with a handler are asked for
            self.free(weight)
            await self.record(claimed, self.client.release(claimed.lease), "released")
            return
        beat = _Heartbeat(claimed, job, asyncio.current_task())
        self.heartbeats[claimed.job.id] = beat
        if beat.next < self.heartbeat_at:
            self.heartbeat_wake.set()
        try:
            try:
                if self.worker._is_async(handler):
                    result = await handler(job)
                else:
                    # A thread cannot be stopped: on a lost lease, what it returns is dropped.
                    result = await self.on_thread(handler, job)
            finally:
                self.heartbeats.pop(claimed.job.id, None)
        except asyncio.CancelledError:
            if not job.lost:
                raise  # stopping: `drain` gives the job back
            self.free(weight)
            self.report.lost += 1
            return
        except Suspended:
            # The sleep (or the wait) ended the lease in the same request that recorded it: nothing is left to say.
            self.free(weight)
            self.report.suspended += 1
            return
        except Exception as e:  # noqa: BLE001 - the handler's failure is the job's outcome, below
            self.free(weight)
            if job._state.suspended is not None:
                self.report.suspended += 1  # the handler caught `Suspended` and failed after it: the job sleeps
            elif job.lost:
                self.report.lost += 1
            else:
                await self.failed(claimed, e)
            return
        self.free(weight)
        if job._state.suspended is not None:
            # The handler caught `Suspended` and returned: the job sleeps all the same, and nothing is finished.
            log.warning(
                "job %s: its handler went on after a sleep or a wait (for a signal or its children) suspended it; "
                "its result is dropped",
                claimed.job.id,
            )
            self.report.suspended += 1
            return
        if job.lost:
            self.report.lost += 1
            return
        state = job._state
        finish = Finish(claimed.lease, data=state.new_data, result=state.result if result is None else result)
        for what, value in (("result", finish.result), ("data", finish.data)):
            if value is None:
                continue
            try:
                # As the request will carry it: a NaN is no more JSON than an object is.
                json.dumps(value, allow_nan=False)
            except (TypeError, ValueError) as e:
                error = f"the handler's {what} is not JSON: {e}"
                await self.record(claimed, self.client.retry(claimed.lease, error), "retried")
                return
        self.unanswered += 1
        self.finishes.append(finish)
        self.finish_ready.set()

    def on_thread(self, handler: Handler, job: RunningJob) -> "asyncio.Future[Any]":
        """Runs a plain-function handler on one of the worker's threads, in a copy of this context (as
        `asyncio.to_thread` does)."""
        if self.threads is None:
            self.threads = ThreadPoolExecutor(self.worker.max_concurrency, thread_name_prefix=f"cairn-{self.worker.id}")
        call = functools.partial(contextvars.copy_context().run, handler, job)
        return asyncio.get_running_loop().run_in_executor(self.threads, call)

    async def failed(self, claimed: ClaimedJob, error: Exception) -> None:
        """Reports a handler's exception: a retry, or a failure for `FailJob`."""
        lease = claimed.lease
        if isinstance(error, RetryLater):
            await self.record(claimed, self.client.retry(lease, str(error), delay=error.delay), "retried")
        elif isinstance(error, FailJob):
            await self.record(claimed, self.client.fail(lease, error.group, error.message), "failed")
        else:
            # Any other failure is a retry, as a panic is in the Rust worker.
            text = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
            await self.record(claimed, self.client.retry(lease, text), "retried")

    async def heartbeat_loop(self) -> None:
        """Extends the leases of running jobs, each every third of its lease timeout; a lost lease stops its job."""
        while True:
            now = time.monotonic()
            # A job that sleeps has no lease left to extend.
            due = [b for b in self.heartbeats.values() if b.next <= now and b.job._state.suspended is None]
            for b in due:
                b.next = now + b.every
            if due:
                await asyncio.gather(*(self.heartbeat(b) for b in due))
                continue
            self.heartbeat_wake.clear()
            self.heartbeat_at = min((b.next for b in self.heartbeats.values()), default=now + 60)
            sleep = self.heartbeat_at - now
            try:
                await asyncio.wait_for(self.heartbeat_wake.wait(), timeout=max(sleep, 0.01))
            except asyncio.TimeoutError:
                pass

    async def heartbeat(self, beat: "_Heartbeat") -> None:
        try:
            await self.client.heartbeat(beat.claimed.lease)
        except LeaseLost as e:
            if self.heartbeats.pop(beat.claimed.job.id, None) is None or beat.job._state.suspended is not None:
                return  # it ended meanwhile, or it sleeps
            log.warning("job %s: lease lost (%s); its handler's result will not be reported", beat.claimed.job.id, e)
            beat.job._state.lost = True
            if beat.task is not None:
                beat.task.cancel()
        except CairnError as e:
            log.warning("job %s: heartbeat failed (%s); trying again", beat.claimed.job.id, e)

    async def record(self, claimed: ClaimedJob, call: Awaitable[Any], outcome: str) -> None:
        try:
            await call
        except LeaseLost:
            self.report.lost += 1
            return
        except CairnError as e:
            log.error("job %s: could not record its outcome (%s); its lease will expire", claimed.job.id, e)
            self.report.lost += 1
            return
        setattr(self.report, outcome, getattr(self.report, outcome) + 1)

    def names(self) -> List[str]:
        """The name patterns to ask for: every handler's."""
        handlers = len(self.worker._exact) + len(self.worker._globs)
        if handlers != self.patterns_for:
            self.patterns, self.patterns_for = self.worker._patterns(), handlers
        return self.patterns

    def waiting_finishes(self) -> List[Finish]:
        """The finishes no request carries yet, at most a request's worth."""
        batch: List[Finish] = []
        while len(batch) < MAX_PER_CALL and self.finishes:
            batch.append(self.finishes.popleft())
        return batch

    def count_finished(self, errors: Sequence[Optional[Exception]]) -> None:
        for error in errors:
            if error is None:
                self.report.finished += 1
            else:
                self.report.lost += 1
        self.unanswered -= len(errors)
        self.slot_freed.set()

    async def finish_loop(self) -> None:
        while True:
            await self.finish_ready.wait()
            self.finish_ready.clear()
            # Jobs that end together end in the same turn of the loop: let them all hand in their finishes.
            await asyncio.sleep(0)
            while self.finishes:
                await self.finish_batch(self.waiting_finishes())
            if self.closing and not self.finishes:
                return

    async def finish_batch(self, batch: List[Finish]) -> None:
        delay = 0.1
        while True:
            try:
                errors: Sequence[Optional[Exception]] = await self.client.finish_many(batch)
                break
            except CairnError as e:
                if e.kind != "unavailable" or delay > 30:
                    log.error("finishing %d jobs failed (%s); their leases will expire", len(batch), e)
                    errors = [e] * len(batch)
                    break
                await asyncio.sleep(delay)
                delay *= 2
            except Exception as e:  # noqa: BLE001 - a bug must not stop the worker's other reports
                log.exception("finishing %d jobs failed; their leases will expire", len(batch))
                errors = [e] * len(batch)
                break
        self.count_finished(errors)

    async def drain(self) -> None:
        """Waits for running jobs until the deadline, then gives back the rest."""
        log.info(
            "worker %s: stopping; %d running jobs have %ss to finish",
            self.worker.id,
            len(self.jobs),
            self.worker.shutdown_deadline,
        )
        if self.jobs:
            await asyncio.wait(set(self.jobs), timeout=self.worker.shutdown_deadline)
        left = list(self.jobs.items())
        for task, _ in left:
            task.cancel()
        await self.release_all([claimed for _, claimed in left])

    async def release_all(self, jobs: List[ClaimedJob]) -> None:
        """Gives the jobs back, all at once: a stopping worker does not make them wait for each other."""
        await asyncio.gather(*(self.record(job, self.client.release(job.lease), "released") for job in jobs))
