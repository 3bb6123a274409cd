"""`AsyncClient`: `Client`'s calls (see `_calls`), awaited, sent on connections of its own on asyncio (`_http`)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, AsyncIterator, Dict, Iterable, List, Optional, Sequence, Tuple, TypeVar

from ._calls import Call, Calls, Finishing, Waiting
from ._client import DEFAULT_URL, ClientCert, _Requests, _read, _ssl_context, _unreachable, activity_params
from ._errors import CairnError, InvalidInput, Unavailable
from ._events import AsyncEventStream, _Position
from ._http import Connections, HTTPError, _Connection
from ._options import PushBody, Seconds, Time, push
from ._types import (ActivityPage, Batch, BatchCreated, BatchPage, BulkResult, ClaimedJob, Enqueued, FailureGroup,
                     FinishAndTake, Job, JobPage, Joined, Lease, QueueStats, Recurring, SignalSent, SignalWait, Slept,
                     Spawned, Step, Token, WorkerInfo)

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ._options import JobFilter, PushOptions

T = TypeVar("T")


class AsyncClient:
    """`Client` for asyncio: the same methods, awaited (`events` and `iter_jobs` are async iterators)."""

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        token: Optional[str] = None,
        timeout: float = 30.0,
        ca_file: Optional[str] = None,
        client_cert: Optional[ClientCert] = None,
    ) -> None:
        self._requests = _Requests(url, token, timeout)
        # TLS made only for https://: `Client`'s settings.
        tls = _ssl_context(ca_file, client_cert) if url.startswith("https:") else None
        try:
            self._http = Connections(self._requests.base, tls)
        except ValueError as e:
            raise InvalidInput("invalid_input", f"url: {e}", "url") from None
        # Each path's request head, for the worker's few paths asked for again and again.
        self._heads: Dict[Tuple[str, str], bytes] = {}

    async def aclose(self) -> None:
        self._http.close()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *_: Any) -> None:
        await self.aclose()

    def _request(self, call: Call[Any]) -> bytes:
        """The request's bytes: its head (each path's made once) and its JSON body."""
        key = (call.method, call.path)
        head = self._heads.get(key)
        if head is None:
            headers = self._requests.plain_headers
            if call.body is not None:
                headers = headers + [("content-type", "application/json")]
            head = self._http.head(call.method, call.path, headers)
            if len(self._heads) < 64:  # paths with a job's id in them are many; those are made each time
                self._heads[key] = head
        if call.body is None:
            # A POST without a body still says so, as httpx does.
            return head + (b"\r\n" if call.method == "GET" else b"Content-Length: 0\r\n\r\n")
        body = json.dumps(call.body, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()
        return b"%sContent-Length: %d\r\n\r\n%s" % (head, len(body), body)

    async def _send(self, call: Call[T]) -> T:
        request = self._request(call)
        timeout = call.timeout if call.timeout is not None else self._requests.timeout_seconds
        try:
            status, content = await self._http.request(request, timeout)
        except HTTPError as e:
            raise _unreachable(call, e) from e
        return _read(call, status, content)

    async def _open(
        self, path: str, headers: List[Tuple[str, str]], read_timeout: float
    ) -> Tuple[int, Dict[str, str], _Connection]:
        """A response whose body is left to read as it comes (the event stream's), on a connection of its own."""
        head = self._http.head("GET", path, self._requests.plain_headers + headers)
        try:
            return await self._http.stream(head + b"\r\n", self._requests.timeout_seconds)
        except HTTPError as e:
            raise Unavailable("unavailable", f"GET {path}: {e}") from e

    async def health(self) -> Dict[str, Any]:
        """The server's status and version."""
        return await self._send(Calls.health())

    async def token(self) -> Token:
        """Who this client is to the server: its token's name, role and the queues it is limited to, if any."""
        return await self._send(Calls.token())

    # Jobs.

    async def enqueue(self, name: str, data: Any = None, **options: Unpack[PushOptions]) -> Enqueued:
        """Enqueues one job; `options` are `push`'s (queue, priority, delay, run_at, depends_on, parent, …)."""
        return await self._send(Calls.enqueue(push(name, data, **options)))

    async def enqueue_batch(self, jobs: Sequence[PushBody]) -> List[Enqueued]:
        """Enqueues jobs made with `push`, all or none (a bad job's error names its index: `jobs[3].name`)."""
        return await self._send(Calls.enqueue_batch(jobs))

    async def get(self, job: int) -> Job:
        """The job, as it is now, with its history."""
        return await self._send(Calls.get(job))

    async def wait(self, job: int, timeout: Seconds) -> Job:
        """Waits until the job ends (completed, failed or cancelled), at most `timeout`, and returns it with its result
        or error; at the timeout, as it stands (check its `state`). The server answers the moment the job ends; a wait
        longer than its --max-wait (60 s by default) asks again."""
        waiting = Waiting(job, timeout)
        while True:
            found = await self._send(waiting.call())
            if waiting.over(found):
                return found

    async def list_jobs(
        self, *, before: Optional[int] = None, limit: Optional[int] = None, **filters: Unpack[JobFilter]
    ) -> JobPage:
        """A page of jobs, newest first, by the filters of `GET /v1/jobs` (queue, state, name GLOB, tag,
        failure_group, parent, batch, tracked); pass the page's `next` as `before` for the next page."""
        return await self._send(Calls.list_jobs(filters, before, limit))

    async def iter_jobs(self, *, page_size: Optional[int] = None, **filters: Unpack[JobFilter]) -> AsyncIterator[Job]:
        """Every job the filters choose, newest first, a page at a time: `async for job in client.iter_jobs(…)`."""
        before = None
        while True:
            page = await self.list_jobs(before=before, limit=page_size, **filters)
            for job in page.jobs:
                yield job
            if page.next is None:
                return
            before = page.next

    async def bulk(
        self, action: str, ids: Optional[Sequence[int]] = None, *, to_queue: Optional[str] = None,
        **filters: Unpack[JobFilter],
    ) -> BulkResult:
        """One action (`cancel`, `delete`, `retry` or `move` to `to_queue`) over the jobs of `ids`, or over every job
        the filters choose when it starts, a chunk per transaction."""
        return await self._send(Calls.bulk(action, ids, to_queue, filters))

    async def cancel(self, job: int) -> None:
        """Cancels a job that has not finished; its worker, if any, is refused from then on."""
        await self._send(Calls.cancel(job))

    async def delete(self, job: int) -> None:
        """Deletes a job and its history (a live one is cancelled first)."""
        await self._send(Calls.delete(job))

    async def requeue(self, job: int, *, run_at: Optional[Time] = None) -> str:
        """Runs a job again, whatever became of it, with a fresh count of attempts (at `run_at`, or now); its state."""
        return await self._send(Calls.requeue(job, run_at))

    async def set_priority(self, job: int, priority: int) -> None:
        """Changes the priority of a job that has not finished."""
        await self._send(Calls.set_priority(job, priority))

    async def reschedule(self, job: int, run_at: Time) -> str:
        """Moves a job that is not running to another time; its state."""
        return await self._send(Calls.reschedule(job, run_at))

    async def move(self, job: int, queue: str) -> None:
        """Moves a job that is not running to another queue (to run again there, if it ended)."""
        await self._send(Calls.move(job, queue))

    async def set_data(self, job: int, data: Any) -> None:
        """Replaces the data of a job that is not running."""
        await self._send(Calls.set_data(job, data))

    async def change_tags(self, job: int, *, add: Sequence[str] = (), remove: Sequence[str] = ()) -> None:
        """Adds and removes tags of a job, whatever its state."""
        await self._send(Calls.change_tags(job, add, remove))

    async def change_dependencies(self, job: int, *, add: Sequence[int] = (), remove: Sequence[int] = ()) -> str:
        """Adds and removes dependencies of a job that has not started; its state."""
        return await self._send(Calls.change_dependencies(job, add, remove))

    async def track(self, job: int) -> None:
        """Marks a job to keep an eye on (`list_jobs(tracked=True)`)."""
        await self._send(Calls.track(job, True))

    async def untrack(self, job: int) -> None:
        """Stops tracking a job."""
        await self._send(Calls.track(job, False))

    # Batches.

    async def create_batch(
        self,
        jobs: Sequence[PushBody] = (),
        *,
        on_success: Optional[PushBody] = None,
        on_complete: Optional[PushBody] = None,
        open: bool = False,
        description: Optional[str] = None,
    ) -> BatchCreated:
        """Creates a batch of jobs made with `push`, all or none: `on_success` (a `push`) is pushed once every job
        has completed, `on_complete` once every job has ended, each with the batch's counts in its data's `batch`.
        An `open` batch does not complete until `close_batch`."""
        return await self._send(Calls.create_batch(jobs, on_success, on_complete, open, description))

    async def add_to_batch(self, batch: int, jobs: Sequence[PushBody]) -> List[Enqueued]:
        """Adds jobs to a batch that has not completed, all or none."""
        return await self._send(Calls.add_to_batch(batch, jobs))

    async def close_batch(self, batch: int) -> Batch:
        """Closes an open batch: it completes once every job has ended."""
        return await self._send(Calls.close_batch(batch))

    async def get_batch(self, batch: int) -> Batch:
        """A batch's state, counts and callbacks."""
        return await self._send(Calls.get_batch(batch))

    async def list_batches(
        self, *, state: Optional[str] = None, before: Optional[int] = None, limit: Optional[int] = None
    ) -> BatchPage:
        """A page of batches, newest first (`state`: `open`, `running` or `completed`)."""
        return await self._send(Calls.list_batches(state, before, limit))

    # Queues, failures, workers and the activity log.

    async def queues(self) -> List[QueueStats]:
        """Every queue with its jobs counted by state, whether it is paused, and its limits."""
        return await self._send(Calls.queues())

    async def pause_queue(self, queue: str) -> None:
        """Stops a queue from handing out jobs; everything else goes on."""
        await self._send(Calls.pause_queue(queue, True))

    async def resume_queue(self, queue: str) -> None:
        """Lets a paused queue hand out jobs again."""
        await self._send(Calls.pause_queue(queue, False))

    async def peek(self, queue: str, limit: Optional[int] = None) -> List[Job]:
        """The next jobs a worker would get from the queue, without taking them."""
        return await self._send(Calls.peek(queue, limit))

    async def limit_queue(self, queue: str, concurrency: Optional[int]) -> None:
        """Lets at most `concurrency` of the queue's jobs run at once across all workers (None: no limit)."""
        await self._send(Calls.limit_queue(queue, concurrency))

    async def limit_keys(self, queue: str, limit: Optional[int]) -> None:
        """Lets at most `limit` jobs of one concurrency key run at once in the queue (None: no limit)."""
        await self._send(Calls.limit_keys(queue, limit))

    async def weigh_key(self, queue: str, key: str, weight: Optional[int]) -> None:
        """Lets a concurrency key take `weight` jobs per turn where the others take one (None: back to 1)."""
        await self._send(Calls.weigh_key(queue, key, weight))

    async def rate_limit_queue(self, queue: str, jobs: Optional[int] = None, per: Optional[Seconds] = None) -> None:
        """Lets at most `jobs` of the queue's jobs start `per` period; neither removes the limit."""
        await self._send(Calls.rate_limit_queue(queue, jobs, per))

    async def age_queue(self, queue: str, every: Optional[Seconds]) -> None:
        """Priority aging: a ready job gains a point of priority `every` period it waits (None: strict priority)."""
        await self._send(Calls.age_queue(queue, every))

    async def failure_groups(self) -> List[FailureGroup]:
        """Every failure group that holds failed jobs."""
        return await self._send(Calls.failure_groups())

    async def unfail(self, group: str, *, limit: Optional[int] = None, queue: Optional[str] = None) -> int:
        """Puts the oldest failed jobs of a group back in their queue (or `queue`), at most `limit`; how many."""
        return await self._send(Calls.unfail(group, limit, queue))

    async def workers(self) -> List[WorkerInfo]:
        """Every worker the server has seen lately, with the jobs it holds."""
        return await self._send(Calls.workers())

    async def worker_stopped(self, worker: str) -> None:
        """Says the worker stops: the activity log shows it stopped, not lost."""
        await self._send(Calls.worker_stopped(worker))

    async def activity(
        self, *, before: Optional[int] = None, limit: Optional[int] = None, job: Optional[int] = None,
        queue: Optional[str] = None, worker: Optional[str] = None, since: Optional[Time] = None,
        until: Optional[Time] = None,
    ) -> ActivityPage:
        """A page of the activity log, newest first; pass its `next_before` as `before` for the next page."""
        params = activity_params(before, limit, job, queue, worker, since, until)
        return await self._send(Calls.activity(params))

    def events(
        self, *, after: Optional[int] = None, kinds: Sequence[str] = (), queue: Optional[str] = None,
        name: Optional[str] = None, job: Optional[int] = None,
    ) -> AsyncEventStream:
        """The activity log's events as they are committed, from the next one (or every one kept after the id
        `after`), of these `kinds` (`finished`, `failed`, …), queue, name GLOB or job: `async for event in
        stream`. It resumes by itself after a dropped connection, from the last event it gave; `aclose()` ends it."""
        return AsyncEventStream(self, _Position(after, kinds, queue, name, job))

    # Recurring templates.

    async def set_recurring(
        self, key: str, cron: str, job: PushBody, *, time_zone: Optional[str] = None, missed: Optional[str] = None,
        overlap: Optional[str] = None,
    ) -> Recurring:
        """Creates or replaces the template `key`: at every slot of `cron` in `time_zone` (UTC by default) it creates
        a job like `job` (made with `push`). `missed`: `skip`, `once` or `all`; `overlap`: `allow`, `skip` or
        `replace`."""
        return await self._send(Calls.set_recurring(key, cron, job, time_zone, missed, overlap))

    async def get_recurring(self, key: str) -> Recurring:
        """A template, with its job and policies, and its next and last runs."""
        return await self._send(Calls.get_recurring(key))

    async def list_recurring(self) -> List[Recurring]:
        """Every template."""
        return await self._send(Calls.list_recurring())

    async def pause_recurring(self, key: str) -> Recurring:
        """Pauses a template: it creates no job until resumed."""
        return await self._send(Calls.pause_recurring(key, True))

    async def resume_recurring(self, key: str) -> Recurring:
        """Resumes a template; its next slot counts from now."""
        return await self._send(Calls.pause_recurring(key, False))

    async def run_recurring(self, key: str) -> Enqueued:
        """Creates the template's job now, as a slot would (its overlap policy and unique key hold)."""
        return await self._send(Calls.run_recurring(key))

    async def remove_recurring(self, key: str) -> None:
        """Removes a template; the jobs it created stay."""
        await self._send(Calls.remove_recurring(key))

    # A worker's calls.

    async def dequeue(
        self,
        worker: str,
        *,
        queues: Sequence[str] = (),
        names: Sequence[str] = (),
        limit: int = 1,
        wait: Optional[Seconds] = None,
        max_weight: Optional[int] = None,
    ) -> List[ClaimedJob]:
        """Takes up to `limit` ready jobs (of at most `max_weight` in all); with `wait`, a long poll that returns the
        moment one is ready."""
        return await self._send(Calls.dequeue(worker, queues, names, limit, wait, max_weight))

    async def heartbeat(self, lease: Lease, progress: Any = None) -> str:
        """Extends the lease, recording `progress` when given; returns its new expiry."""
        return await self._send(Calls.heartbeat(lease, progress))

    async def update(self, lease: Lease, progress: Any) -> None:
        """Records the job's progress (any JSON), for queries to show."""
        await self._send(Calls.update(lease, progress))

    async def checkpoint(self, lease: Lease, data: Any) -> str:
        """Saves the data a retry starts from, and extends the lease; returns its new expiry."""
        return await self._send(Calls.checkpoint(lease, data))

    async def record_step(self, lease: Lease, name: str, result: Any) -> Step:
        """Records step `name` of the job's run with what it produced (any JSON), and extends the lease; answers the
        step as stored, whose result is the first one recorded under that name. A handler calls `job.step` instead,
        which numbers a name used again and reads recorded steps back."""
        return await self._send(Calls.record_step(lease, name, result))

    async def sleep(
        self, lease: Lease, name: str, *, seconds: Optional[Seconds] = None, until: Optional[Time] = None
    ) -> Slept:
        """Sleeps as step `name` of the job's run, for `seconds` (a number or a timedelta) or until `until` (an RFC
        3339 string or a datetime with its time zone): exactly one of the two, or the client refuses it before
        sending. The first time, the server records the wake time as the step's result; while that time is ahead, the
        answer is `suspended` with `until`, and the lease is over: stop, and do not finish, retry or fail the job,
        which runs again then. Once the time has passed, the answer is not suspended and the run goes on. A handler
        calls `job.sleep` or `job.sleep_until` instead, which number a name used again and raise `Suspended`."""
        return await self._send(Calls.sleep(lease, name, seconds, until))

    async def wait_for_signal(self, lease: Lease, name: str, key: str, timeout: Seconds) -> SignalWait:
        """Waits for a signal to `key` as step `name` of the job's run, for at most `timeout` (seconds, a number or a
        timedelta; at most ten years) from the first time the step is reached. A signal kept for the key, or one that
        came while the job waited, answers `received` with its `data`; once the time has passed with none, the answer
        is `timed_out`. Otherwise the answer is `suspended` with `until`, and the lease is over: stop, and do not
        finish, retry or fail the job, which runs again when the signal comes or at `until`. A handler calls
        `job.wait_for_signal` instead, which numbers a name used again, answers a replay from the job's recorded
        steps and raises `Suspended`."""
        return await self._send(Calls.wait_for_signal(lease, name, key, timeout))

    async def spawn(self, lease: Lease, name: str, jobs: Sequence[PushBody]) -> Spawned:
        """Pushes `jobs` (each made by `push`, as `enqueue_batch` takes them; at most 1,000) as children of the job, as
        step `name` of its run, all or none, and records their ids; answers them (`children`, in the order given). A
        step recorded already answers the ids it recorded and pushes nothing. The children start at once: they
        neither wait for the run to finish nor go if it fails. A job naming another `parent` is refused
        (`InvalidInput`, field `jobs[i].parent`). A handler calls `job.spawn` instead, which numbers a name used again
        and answers a replay from the job's recorded steps."""
        return await self._send(Calls.spawn(lease, name, jobs))

    async def join(self, lease: Lease, name: str) -> Joined:
        """Waits for the job's children as step `name` of its run. Once none holds the job (each has ended; a failed
        one holds it, as it holds a parent, until it is requeued or cancelled), the answer is not suspended and
        `children` says how each ended, oldest first, recorded as the step's result. Otherwise the answer is
        `suspended`, and the lease is over: stop, and do not finish, retry or fail the job, which is `waiting` and
        runs again once its children have ended. A handler calls `job.join` instead, which numbers a name used again,
        answers a replay from the job's recorded steps and raises `Suspended`."""
        return await self._send(Calls.join(lease, name))

    async def signal(self, key: str, data: Any = None) -> SignalSent:
        """Sends `data` (any JSON; None is null) to `key`: the job that waits for it (the oldest, if several do)
        receives it and runs again at once (`delivered`, with the `job`); with none waiting, it is kept for the first
        job that waits for the key. Each signal is received once. A key that only a cancelled job waited for refuses
        it: `InvalidState`, naming the job."""
        return await self._send(Calls.signal(key, data))

    async def finish(self, lease: Lease, data: Any = None, *, result: Any = None) -> None:
        """Completes the job with `result` (what it produced, kept apart from its data) when given, replacing its
        data with `data` when given."""
        await self._send(Calls.finish(lease, data, result))

    async def finish_many(self, finishes: Iterable[Finishing]) -> List[Optional[CairnError]]:
        """Completes many jobs in one request (leases, `(lease, data)` pairs, or `Finish(lease, data=…, result=…)`);
        each one's error (None when done), in order."""
        return await self._send(Calls.finish_many(finishes))

    async def finish_and_take(
        self,
        finishes: Iterable[Finishing],
        worker: str,
        *,
        queues: Sequence[str] = (),
        names: Sequence[str] = (),
        limit: int = 1,
        max_weight: Optional[int] = None,
    ) -> FinishAndTake:
        """Completes jobs and takes the next ones (without waiting) in one request."""
        return await self._send(Calls.finish_and_take(finishes, worker, queues, names, limit, max_weight))

    async def retry(
        self, lease: Lease, error: str, *, delay: Optional[Seconds] = None, run_at: Optional[Time] = None
    ) -> str:
        """Reports a transient error; returns the job's new state (`queued`, `scheduled`, or `failed`)."""
        return await self._send(Calls.retry(lease, error, delay, run_at))

    async def fail(self, lease: Lease, group: str, message: str) -> None:
        """Fails the job for good, in failure group `group`."""
        await self._send(Calls.fail(lease, group, message))

    async def release(self, lease: Lease) -> None:
        """Gives the job back unrun; the attempt does not count."""
        await self._send(Calls.release(lease))
