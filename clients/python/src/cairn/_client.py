"""`Client`: the API's calls (see `_calls`), sent blocking with httpx; `AsyncClient` (`_async_client`) sends the same
calls on asyncio, and shares the request building and answer reading here.

`Client` sends through an httpx transport (its connection pool, HTTP/1.1 and TLS) rather than an `httpx.Client`:
the client's layers (base URLs, cookies, redirects, authentication flows, proxies from the environment) are of no
use to a Cairn server's API and cost more than the rest of a request. `AsyncClient`, which a worker's every round of
jobs goes through, sends on connections of its own on asyncio (`_http`), for a fifth of the Python that httpx's async
transport spent per request. So the server is reached directly, whatever HTTP_PROXY says.
"""

from __future__ import annotations

import json
import ssl
from typing import TYPE_CHECKING, Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, TypeVar, Union

import httpx

from ._calls import Call, Calls, Finishing, Waiting
from ._errors import CairnError, InvalidInput, Unavailable, error_from_body
from ._events import EventStream, _Position
from ._options import PushBody, Seconds, Time, push, rfc3339
from ._types import (ActivityPage, Batch, BatchCreated, BatchPage, BulkResult, ClaimedJob, Enqueued, FailureGroup,
                     FinishAndTake, Job, JobPage, Joined, Lease, QueueStats, Recurring, SignalSent, SignalWait, Slept,
                     Spawned, Step, Token, WorkerInfo)

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ._options import JobFilter, PushOptions

DEFAULT_URL = "http://127.0.0.1:6670"

T = TypeVar("T")


class _Requests:
    """Builds the requests of one server: its URL, headers and default timeout, computed once."""

    def __init__(self, url: str, token: Optional[str], timeout: float) -> None:
        self.base = url.rstrip("/")
        self.headers: List[Tuple[bytes, bytes]] = [(b"accept", b"application/json")]
        if token:
            if not token.isascii() or not token.isprintable():
                raise InvalidInput("invalid_input", "token: must be printable ASCII", "token")
            self.headers.append((b"authorization", f"Bearer {token}".encode()))
        self.plain_headers = [(name.decode(), value.decode()) for name, value in self.headers]
        self.timeout_seconds = timeout
        self.timeout = httpx.Timeout(timeout).as_dict()
        # Parsed once per path: the worker's few paths are asked for again and again.
        self.urls: Dict[str, httpx.URL] = {}

    def url(self, path: str) -> httpx.URL:
        url = self.urls.get(path)
        if url is None:
            url = httpx.URL(self.base + path)
            if len(self.urls) < 64:  # paths with a job's id in them are many; those are parsed each time
                self.urls[path] = url
        return url

    def build(self, call: Call[Any]) -> httpx.Request:
        timeout = httpx.Timeout(call.timeout).as_dict() if call.timeout is not None else self.timeout
        headers = self.headers
        content = b""
        if call.body is not None:
            content = json.dumps(call.body, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()
            headers = headers + [(b"content-type", b"application/json")]
        return httpx.Request(
            call.method, self.url(call.path), headers=headers, content=content, extensions={"timeout": timeout}
        )


# A client certificate: one PEM file holding the certificate and its key, or (certificate file, key file).
ClientCert = Union[str, Tuple[str, str]]


def _ssl_context(ca_file: Optional[str], client_cert: Optional[ClientCert]) -> ssl.SSLContext:
    """How an https:// server is checked, and the certificate shown to one that requires one: the authorities of
    `ca_file` (PEM) if given, else httpx's (certifi's, SSL_CERT_FILE and SSL_CERT_DIR)."""
    try:
        context = ssl.create_default_context(cafile=ca_file) if ca_file else httpx.create_ssl_context()
    except (OSError, ssl.SSLError) as e:
        raise InvalidInput("invalid_input", f"ca_file: cannot use {ca_file!r}: {e}", "ca_file") from None
    if client_cert is not None:
        cert, key = (client_cert, None) if isinstance(client_cert, str) else client_cert
        try:
            context.load_cert_chain(cert, key)
        except (OSError, ssl.SSLError) as e:
            raise InvalidInput("invalid_input", f"client_cert: cannot use {client_cert!r}: {e}", "client_cert") from None
    return context


def _read(call: Call[T], status: int, content: bytes) -> T:
    try:
        body = json.loads(content) if content else {}
    except ValueError:
        body = None
    if 200 <= status < 300:
        return call.read(body)
    detail = body.get("error") if isinstance(body, dict) else None
    raise error_from_body(detail, status)


def _unreachable(call: Call[Any], error: Exception) -> CairnError:
    return Unavailable("unavailable", f"{call.method} {call.path}: {error or type(error).__name__}")


def activity_params(
    before: Optional[int], limit: Optional[int], job: Optional[int], queue: Optional[str], worker: Optional[str],
    since: Optional[Time], until: Optional[Time],
) -> Dict[str, Any]:
    return {
        "before": before, "limit": limit, "job": job, "queue": queue, "worker": worker,
        "since": None if since is None else rfc3339(since, "since"),
        "until": None if until is None else rfc3339(until, "until"),
    }


class Client:
    """A blocking client of a Cairn server: every call of its API, by the names of the Rust client's methods.

    >>> with Client("http://127.0.0.1:6670") as cairn:
    ...     job = cairn.enqueue("email.send", {"to": "a@example.com"})
    """

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        token: Optional[str] = None,
        timeout: float = 30.0,
        ca_file: Optional[str] = None,
        client_cert: Optional[ClientCert] = None,
    ) -> None:
        """`ca_file` (PEM) is the authority an https:// server's certificate must come from, when not one the
        machine trusts; `client_cert` is shown to a server that requires one (`cairn serve --tls-client-ca`)."""
        self._requests = _Requests(url, token, timeout)
        self._http = httpx.HTTPTransport(verify=_ssl_context(ca_file, client_cert))

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()

    def _send(self, call: Call[T]) -> T:
        try:
            response = self._http.handle_request(self._requests.build(call))
            try:
                response.read()
            finally:
                response.close()
        except httpx.TransportError as e:
            raise _unreachable(call, e) from e
        return _read(call, response.status_code, response.content)

    def _open(self, path: str, headers: List[Tuple[str, str]], read_timeout: float) -> httpx.Response:
        """A response whose body is left to read as it comes (the event stream's)."""
        call = Call("GET", path, None, lambda body: body)
        request = self._requests.build(call)
        for name, value in headers:
            request.headers[name] = value
        timeout = httpx.Timeout(self._requests.timeout_seconds, read=read_timeout).as_dict()
        request.extensions["timeout"] = timeout
        try:
            return self._http.handle_request(request)
        except httpx.TransportError as e:
            raise _unreachable(call, e) from e

    def health(self) -> Dict[str, Any]:
        """The server's status and version."""
        return self._send(Calls.health())

    def token(self) -> Token:
        """Who this client is to the server: its token's name, role and the queues it is limited to, if any."""
        return self._send(Calls.token())

    # Jobs.

    def enqueue(self, name: str, data: Any = None, **options: Unpack[PushOptions]) -> Enqueued:
        """Enqueues one job; `options` are `push`'s (queue, priority, delay, run_at, depends_on, parent, …)."""
        return self._send(Calls.enqueue(push(name, data, **options)))

    def enqueue_batch(self, jobs: Sequence[PushBody]) -> List[Enqueued]:
        """Enqueues jobs made with `push`, all or none (a bad job's error names its index: `jobs[3].name`)."""
        return self._send(Calls.enqueue_batch(jobs))

    def get(self, job: int) -> Job:
        """The job, as it is now, with its history."""
        return self._send(Calls.get(job))

    def wait(self, job: int, timeout: Seconds) -> Job:
        """Waits until the job ends (completed, failed or cancelled), at most `timeout`, and returns it with its result
        or error; at the timeout, as it stands (check its `state`). The server answers the moment the job ends; a wait
        longer than its --max-wait (60 s by default) asks again."""
        waiting = Waiting(job, timeout)
        while True:
            found = self._send(waiting.call())
            if waiting.over(found):
                return found

    def list_jobs(
        self, *, before: Optional[int] = None, limit: Optional[int] = None, **filters: Unpack[JobFilter]
    ) -> JobPage:
        """A page of jobs, newest first, by the filters of `GET /v1/jobs` (queue, state, name GLOB, tag,
        failure_group, parent, batch, tracked); pass the page's `next` as `before` for the next page."""
        return self._send(Calls.list_jobs(filters, before, limit))

    def iter_jobs(self, *, page_size: Optional[int] = None, **filters: Unpack[JobFilter]) -> Iterator[Job]:
        """Every job the filters choose, newest first, a page at a time."""
        before = None
        while True:
            page = self.list_jobs(before=before, limit=page_size, **filters)
            yield from page.jobs
            if page.next is None:
                return
            before = page.next

    def bulk(
        self, action: str, ids: Optional[Sequence[int]] = None, *, to_queue: Optional[str] = None,
        **filters: Unpack[JobFilter],
    ) -> BulkResult:
        """One action (`cancel`, `delete`, `retry` or `move` to `to_queue`) over the jobs of `ids`, or over every job
        the filters choose when it starts, a chunk per transaction."""
        return self._send(Calls.bulk(action, ids, to_queue, filters))

    def cancel(self, job: int) -> None:
        """Cancels a job that has not finished; its worker, if any, is refused from then on."""
        self._send(Calls.cancel(job))

    def delete(self, job: int) -> None:
        """Deletes a job and its history (a live one is cancelled first)."""
        self._send(Calls.delete(job))

    def requeue(self, job: int, *, run_at: Optional[Time] = None) -> str:
        """Runs a job again, whatever became of it, with a fresh count of attempts (at `run_at`, or now); its state."""
        return self._send(Calls.requeue(job, run_at))

    def set_priority(self, job: int, priority: int) -> None:
        """Changes the priority of a job that has not finished."""
        self._send(Calls.set_priority(job, priority))

    def reschedule(self, job: int, run_at: Time) -> str:
        """Moves a job that is not running to another time; its state."""
        return self._send(Calls.reschedule(job, run_at))

    def move(self, job: int, queue: str) -> None:
        """Moves a job that is not running to another queue (to run again there, if it ended)."""
        self._send(Calls.move(job, queue))

    def set_data(self, job: int, data: Any) -> None:
        """Replaces the data of a job that is not running."""
        self._send(Calls.set_data(job, data))

    def change_tags(self, job: int, *, add: Sequence[str] = (), remove: Sequence[str] = ()) -> None:
        """Adds and removes tags of a job, whatever its state."""
        self._send(Calls.change_tags(job, add, remove))

    def change_dependencies(self, job: int, *, add: Sequence[int] = (), remove: Sequence[int] = ()) -> str:
        """Adds and removes dependencies of a job that has not started; its state."""
        return self._send(Calls.change_dependencies(job, add, remove))

    def track(self, job: int) -> None:
        """Marks a job to keep an eye on (`list_jobs(tracked=True)`)."""
        self._send(Calls.track(job, True))

    def untrack(self, job: int) -> None:
        """Stops tracking a job."""
        self._send(Calls.track(job, False))

    # Batches.

    def create_batch(
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
        return self._send(Calls.create_batch(jobs, on_success, on_complete, open, description))

    def add_to_batch(self, batch: int, jobs: Sequence[PushBody]) -> List[Enqueued]:
        """Adds jobs to a batch that has not completed, all or none."""
        return self._send(Calls.add_to_batch(batch, jobs))

    def close_batch(self, batch: int) -> Batch:
        """Closes an open batch: it completes once every job has ended."""
        return self._send(Calls.close_batch(batch))

    def get_batch(self, batch: int) -> Batch:
        """A batch's state, counts and callbacks."""
        return self._send(Calls.get_batch(batch))

    def list_batches(
        self, *, state: Optional[str] = None, before: Optional[int] = None, limit: Optional[int] = None
    ) -> BatchPage:
        """A page of batches, newest first (`state`: `open`, `running` or `completed`)."""
        return self._send(Calls.list_batches(state, before, limit))

    # Queues, failures, workers and the activity log.

    def queues(self) -> List[QueueStats]:
        """Every queue with its jobs counted by state, whether it is paused, and its limits."""
        return self._send(Calls.queues())

    def pause_queue(self, queue: str) -> None:
        """Stops a queue from handing out jobs; everything else goes on."""
        self._send(Calls.pause_queue(queue, True))

    def resume_queue(self, queue: str) -> None:
        """Lets a paused queue hand out jobs again."""
        self._send(Calls.pause_queue(queue, False))

    def peek(self, queue: str, limit: Optional[int] = None) -> List[Job]:
        """The next jobs a worker would get from the queue, without taking them."""
        return self._send(Calls.peek(queue, limit))

    def limit_queue(self, queue: str, concurrency: Optional[int]) -> None:
        """Lets at most `concurrency` of the queue's jobs run at once across all workers (None: no limit)."""
        self._send(Calls.limit_queue(queue, concurrency))

    def limit_keys(self, queue: str, limit: Optional[int]) -> None:
        """Lets at most `limit` jobs of one concurrency key run at once in the queue (None: no limit)."""
        self._send(Calls.limit_keys(queue, limit))

    def weigh_key(self, queue: str, key: str, weight: Optional[int]) -> None:
        """Lets a concurrency key take `weight` jobs per turn where the others take one (None: back to 1)."""
        self._send(Calls.weigh_key(queue, key, weight))

    def rate_limit_queue(self, queue: str, jobs: Optional[int] = None, per: Optional[Seconds] = None) -> None:
        """Lets at most `jobs` of the queue's jobs start `per` period; neither removes the limit."""
        self._send(Calls.rate_limit_queue(queue, jobs, per))

    def age_queue(self, queue: str, every: Optional[Seconds]) -> None:
        """Priority aging: a ready job gains a point of priority `every` period it waits (None: strict priority)."""
        self._send(Calls.age_queue(queue, every))

    def failure_groups(self) -> List[FailureGroup]:
        """Every failure group that holds failed jobs."""
        return self._send(Calls.failure_groups())

    def unfail(self, group: str, *, limit: Optional[int] = None, queue: Optional[str] = None) -> int:
        """Puts the oldest failed jobs of a group back in their queue (or `queue`), at most `limit`; how many."""
        return self._send(Calls.unfail(group, limit, queue))

    def workers(self) -> List[WorkerInfo]:
        """Every worker the server has seen lately, with the jobs it holds."""
        return self._send(Calls.workers())

    def worker_stopped(self, worker: str) -> None:
        """Says the worker stops: the activity log shows it stopped, not lost."""
        self._send(Calls.worker_stopped(worker))

    def activity(
        self, *, before: Optional[int] = None, limit: Optional[int] = None, job: Optional[int] = None,
        queue: Optional[str] = None, worker: Optional[str] = None, since: Optional[Time] = None,
        until: Optional[Time] = None,
    ) -> ActivityPage:
        """A page of the activity log, newest first; pass its `next_before` as `before` for the next page."""
        params = activity_params(before, limit, job, queue, worker, since, until)
        return self._send(Calls.activity(params))

    def events(
        self, *, after: Optional[int] = None, kinds: Sequence[str] = (), queue: Optional[str] = None,
        name: Optional[str] = None, job: Optional[int] = None,
    ) -> EventStream:
        """The activity log's events as they are committed, from the next one (or every one kept after the id
        `after`), of these `kinds` (`finished`, `failed`, …), queue, name GLOB or job: `for event in stream`. It
        resumes by itself after a dropped connection, from the last event it gave; `close()` ends it."""
        return EventStream(self, _Position(after, kinds, queue, name, job))

    # Recurring templates.

    def set_recurring(
        self, key: str, cron: str, job: PushBody, *, time_zone: Optional[str] = None, missed: Optional[str] = None,
        overlap: Optional[str] = None,
    ) -> Recurring:
        """Creates or replaces the template `key`: at every slot of `cron` in `time_zone` (UTC by default) it creates
        a job like `job` (made with `push`). `missed`: `skip`, `once` or `all`; `overlap`: `allow`, `skip` or
        `replace`."""
        return self._send(Calls.set_recurring(key, cron, job, time_zone, missed, overlap))

    def get_recurring(self, key: str) -> Recurring:
        """A template, with its job and policies, and its next and last runs."""
        return self._send(Calls.get_recurring(key))

    def list_recurring(self) -> List[Recurring]:
        """Every template."""
        return self._send(Calls.list_recurring())

    def pause_recurring(self, key: str) -> Recurring:
        """Pauses a template: it creates no job until resumed."""
        return self._send(Calls.pause_recurring(key, True))

    def resume_recurring(self, key: str) -> Recurring:
        """Resumes a template; its next slot counts from now."""
        return self._send(Calls.pause_recurring(key, False))

    def run_recurring(self, key: str) -> Enqueued:
        """Creates the template's job now, as a slot would (its overlap policy and unique key hold)."""
        return self._send(Calls.run_recurring(key))

    def remove_recurring(self, key: str) -> None:
        """Removes a template; the jobs it created stay."""
        self._send(Calls.remove_recurring(key))

    # A worker's calls.

    def dequeue(
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
        return self._send(Calls.dequeue(worker, queues, names, limit, wait, max_weight))

    def heartbeat(self, lease: Lease, progress: Any = None) -> str:
        """Extends the lease, recording `progress` when given; returns its new expiry."""
        return self._send(Calls.heartbeat(lease, progress))

    def update(self, lease: Lease, progress: Any) -> None:
        """Records the job's progress (any JSON), for queries to show."""
        self._send(Calls.update(lease, progress))

    def checkpoint(self, lease: Lease, data: Any) -> str:
        """Saves the data a retry starts from, and extends the lease; returns its new expiry."""
        return self._send(Calls.checkpoint(lease, data))

    def record_step(self, lease: Lease, name: str, result: Any) -> Step:
        """Records step `name` of the job's run with what it produced (any JSON), and extends the lease; answers the
        step as stored, whose result is the first one recorded under that name. A handler calls `job.step` instead,
        which numbers a name used again and reads recorded steps back."""
        return self._send(Calls.record_step(lease, name, result))

    def sleep(
        self, lease: Lease, name: str, *, seconds: Optional[Seconds] = None, until: Optional[Time] = None
    ) -> Slept:
        """Sleeps as step `name` of the job's run, for `seconds` (a number or a timedelta) or until `until` (an RFC
        3339 string or a datetime with its time zone): exactly one of the two, or the client refuses it before
        sending. The first time, the server records the wake time as the step's result; while that time is ahead, the
        answer is `suspended` with `until`, and the lease is over: stop, and do not finish, retry or fail the job,
        which runs again then. Once the time has passed, the answer is not suspended and the run goes on. A handler
        calls `job.sleep` or `job.sleep_until` instead, which number a name used again and raise `Suspended`."""
        return self._send(Calls.sleep(lease, name, seconds, until))

    def wait_for_signal(self, lease: Lease, name: str, key: str, timeout: Seconds) -> SignalWait:
        """Waits for a signal to `key` as step `name` of the job's run, for at most `timeout` (seconds, a number or a
        timedelta; at most ten years) from the first time the step is reached. A signal kept for the key, or one that
        came while the job waited, answers `received` with its `data`; once the time has passed with none, the answer
        is `timed_out`. Otherwise the answer is `suspended` with `until`, and the lease is over: stop, and do not
        finish, retry or fail the job, which runs again when the signal comes or at `until`. A handler calls
        `job.wait_for_signal` instead, which numbers a name used again, answers a replay from the job's recorded
        steps and raises `Suspended`."""
        return self._send(Calls.wait_for_signal(lease, name, key, timeout))

    def spawn(self, lease: Lease, name: str, jobs: Sequence[PushBody]) -> Spawned:
        """Pushes `jobs` (each made by `push`, as `enqueue_batch` takes them; at most 1,000) as children of the job, as
        step `name` of its run, all or none, and records their ids; answers them (`children`, in the order given). A
        step recorded already answers the ids it recorded and pushes nothing. The children start at once: they
        neither wait for the run to finish nor go if it fails. A job naming another `parent` is refused
        (`InvalidInput`, field `jobs[i].parent`). A handler calls `job.spawn` instead, which numbers a name used again
        and answers a replay from the job's recorded steps."""
        return self._send(Calls.spawn(lease, name, jobs))

    def join(self, lease: Lease, name: str) -> Joined:
        """Waits for the job's children as step `name` of its run. Once none holds the job (each has ended; a failed
        one holds it, as it holds a parent, until it is requeued or cancelled), the answer is not suspended and
        `children` says how each ended, oldest first, recorded as the step's result. Otherwise the answer is
        `suspended`, and the lease is over: stop, and do not finish, retry or fail the job, which is `waiting` and
        runs again once its children have ended. A handler calls `job.join` instead, which numbers a name used again,
        answers a replay from the job's recorded steps and raises `Suspended`."""
        return self._send(Calls.join(lease, name))

    def signal(self, key: str, data: Any = None) -> SignalSent:
        """Sends `data` (any JSON; None is null) to `key`: the job that waits for it (the oldest, if several do)
        receives it and runs again at once (`delivered`, with the `job`); with none waiting, it is kept for the first
        job that waits for the key. Each signal is received once. A key that only a cancelled job waited for refuses
        it: `InvalidState`, naming the job."""
        return self._send(Calls.signal(key, data))

    def finish(self, lease: Lease, data: Any = None, *, result: Any = None) -> None:
        """Completes the job with `result` (what it produced, kept apart from its data) when given, replacing its
        data with `data` when given."""
        self._send(Calls.finish(lease, data, result))

    def finish_many(self, finishes: Iterable[Finishing]) -> List[Optional[CairnError]]:
        """Completes many jobs in one request (leases, `(lease, data)` pairs, or `Finish(lease, data=…, result=…)`);
        each one's error (None when done), in order."""
        return self._send(Calls.finish_many(finishes))

    def finish_and_take(
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
        return self._send(Calls.finish_and_take(finishes, worker, queues, names, limit, max_weight))

    def retry(
        self, lease: Lease, error: str, *, delay: Optional[Seconds] = None, run_at: Optional[Time] = None
    ) -> str:
        """Reports a transient error; returns the job's new state (`queued`, `scheduled`, or `failed`)."""
        return self._send(Calls.retry(lease, error, delay, run_at))

    def fail(self, lease: Lease, group: str, message: str) -> None:
        """Fails the job for good, in failure group `group`."""
        self._send(Calls.fail(lease, group, message))

    def release(self, lease: Lease) -> None:
        """Gives the job back unrun; the attempt does not count."""
        self._send(Calls.release(lease))
