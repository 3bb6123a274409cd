"""Each call of the HTTP API once: the request it makes and how its answer reads. `Client` and `AsyncClient` only
send them, so the two cannot drift apart."""

from __future__ import annotations

import math
import time
from datetime import timedelta
from urllib.parse import quote
from typing import Any, Callable, Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple, Union

from ._errors import CairnError, InvalidInput, error_from_body
from ._types import ClaimedJob, Enqueued, FinishAndTake, Job, Lease

Seconds = Union[float, int, timedelta]
"""A duration: seconds as a number, or a `timedelta`."""

# How much longer than a long poll's wait the HTTP request may take before it counts as lost.
LONG_POLL_MARGIN = 10.0
# The longest wait for a job, as the Rust client's (a day); the server caps each request's part of it.
MAX_WAIT = 24 * 3600.0
# The states a job ends in: a wait for it is over.
ENDED = frozenset(("completed", "failed", "cancelled"))


class Call(NamedTuple):
    method: str
    path: str
    body: Optional[Dict[str, Any]]
    read: Callable[[Any], Any]
    # Seconds the whole request may take; None: the client's own timeout.
    timeout: Optional[float] = None


def millis(duration: Seconds, field: str) -> int:
    """Whole milliseconds of a duration, refusing a negative one as the server would."""
    seconds = duration.total_seconds() if isinstance(duration, timedelta) else float(duration)
    if seconds < 0:
        raise InvalidInput("invalid_input", f"{field}: must not be negative, got {seconds} s", field)
    return int(round(seconds * 1000))


def push(
    name: str,
    data: Any = None,
    *,
    queue: Optional[str] = None,
    priority: Optional[int] = None,
    delay: Optional[Seconds] = None,
    run_at: Optional[str] = None,
    unique_key: Optional[str] = None,
    tags: Sequence[str] = (),
    retry: Optional[Dict[str, Any]] = None,
    lease_timeout: Optional[Seconds] = None,
    timeout: Optional[Seconds] = None,
    weight: Optional[int] = None,
    schedule: Optional[str] = None,
    debounce: Optional[Tuple[str, Seconds, Seconds]] = None,
    throttle: Optional[Tuple[str, Seconds]] = None,
    concurrency_key: Optional[str] = None,
    concurrency_limit: Optional[int] = None,
) -> Dict[str, Any]:
    """A job to enqueue, as `Client.enqueue_batch` takes them; the server validates every field and names a bad
    one. `run_at` is an RFC 3339 time; `schedule` a Bedrock repeat or a cron expression; `retry` the whole policy
    (`max_attempts`, `initial_delay_ms`, `multiplier`, `max_delay_ms`, `jitter`), the queue's default when absent.
    `debounce=(key, delay, max_wait)`: a push whose key a pending job holds lands in that job, which then runs
    `delay` after the latest push and no later than `max_wait` after the first. `throttle=(key, period)`: one job
    per key per period, whatever became of it. Both answer with the job they landed in (`existing`).
    `concurrency_key`: keyed jobs take turns by key, and at most the queue's limit per key run at once
    (`concurrency_limit`: this job's own limit instead)."""
    body: Dict[str, Any] = {"name": name}
    if data is not None:
        body["data"] = data
    optional = {
        "queue": queue,
        "priority": priority,
        "run_at": run_at,
        "unique_key": unique_key,
        "weight": weight,
        "schedule": schedule,
    }
    body.update({k: v for k, v in optional.items() if v is not None})
    if delay is not None:
        body["delay_ms"] = millis(delay, "delay")
    if lease_timeout is not None:
        body["lease_timeout_ms"] = millis(lease_timeout, "lease_timeout")
    if timeout is not None:
        body["timeout_ms"] = millis(timeout, "timeout")
    if tags:
        body["tags"] = list(tags)
    if retry is not None:
        body["retry"] = dict(retry)
    if debounce is not None:
        key, wait, max_wait = debounce
        body["debounce"] = {
            "key": key,
            "delay_ms": millis(wait, "debounce.delay"),
            "max_wait_ms": millis(max_wait, "debounce.max_wait"),
        }
    if throttle is not None:
        key, period = throttle
        body["throttle"] = {"key": key, "period_ms": millis(period, "throttle.period")}
    if concurrency_key is not None or concurrency_limit is not None:
        concurrency: Dict[str, Any] = {"key": concurrency_key}
        if concurrency_limit is not None:
            concurrency["limit"] = concurrency_limit
        body["concurrency"] = concurrency
    return body


def dequeue_body(
    worker: str,
    queues: Sequence[str],
    names: Sequence[str],
    limit: int,
    wait: Optional[Seconds],
    max_weight: Optional[int] = None,
) -> Dict[str, Any]:
    body: Dict[str, Any] = {"worker": worker, "limit": limit}
    if max_weight is not None:
        body["max_weight"] = max_weight
    if queues:
        body["queues"] = list(queues)
    if names:
        body["names"] = list(names)
    if wait is not None:
        body["wait_ms"] = millis(wait, "wait")
    return body


def _claimed(body: Any) -> List[ClaimedJob]:
    return [ClaimedJob.from_body(c) for c in body.get("jobs", [])]


def _none(_: Any) -> None:
    return None


class Finish(NamedTuple):
    """A job to finish with what it produced: `result`, kept apart from its data, and `data`, which replaces its
    input (what a recurring job's next run starts from); None leaves each out."""

    lease: Lease
    data: Any = None
    result: Any = None


Finishing = Union[Lease, Tuple[Lease, Any], Finish]
"""A job to finish: its lease, its lease and the data that replaces its input, or a `Finish`."""


def _finish_fields(body: Dict[str, Any], data: Any, result: Any) -> Dict[str, Any]:
    if result is not None:
        body["result"] = result
    if data is not None:
        body["data"] = data
    return body


def _finish_items(finishes: Iterable[Finishing]) -> List[Dict[str, Any]]:
    items = []
    for finish in finishes:
        if isinstance(finish, Finish):
            lease, data, result = finish
        elif isinstance(finish, tuple):
            (lease, data), result = finish, None
        else:
            lease, data, result = finish, None, None
        items.append(_finish_fields({"id": lease.job, "token": lease.token}, data, result))
    return items


def _finish_errors(body: Any) -> List[Optional[CairnError]]:
    return [
        None if r.get("error") is None else error_from_body(r["error"], 200) for r in body.get("results", [])
    ]


class Waiting:
    """A wait for a job to end, as the Rust client's `Client::wait`: each request asks the server to wait for what is
    left (it caps one request at its --max-wait), until the job has ended or the timeout has run out."""

    def __init__(self, job: int, timeout: Seconds) -> None:
        self.job = int(job)
        self.deadline = time.monotonic() + min(millis(timeout, "timeout") / 1000, MAX_WAIT)

    def call(self) -> Call:
        # Rounded up: a request that answers at its wait's end finds the deadline passed, rather than asking again.
        wait_ms = math.ceil(max(self.deadline - time.monotonic(), 0.0) * 1000)
        path = f"/v1/jobs/{self.job}?wait_ms={wait_ms}"
        return Call("GET", path, None, Job.from_body, wait_ms / 1000 + LONG_POLL_MARGIN)

    def over(self, job: Job) -> bool:
        return job.state in ENDED or time.monotonic() >= self.deadline


class Calls:
    """The API's calls, by the names of the Rust client's methods."""

    @staticmethod
    def health() -> Call:
        return Call("GET", "/v1/health", None, lambda body: body)

    @staticmethod
    def enqueue(job: Dict[str, Any]) -> Call:
        return Call("POST", "/v1/jobs", job, Enqueued.from_body)

    @staticmethod
    def enqueue_batch(jobs: Sequence[Dict[str, Any]]) -> Call:
        return Call(
            "POST", "/v1/jobs/batch", {"jobs": list(jobs)}, lambda body: [Enqueued.from_body(j) for j in body["jobs"]]
        )

    @staticmethod
    def get(job: int) -> Call:
        return Call("GET", f"/v1/jobs/{int(job)}", None, Job.from_body)

    @staticmethod
    def cancel(job: int) -> Call:
        return Call("POST", f"/v1/jobs/{int(job)}/cancel", None, _none)

    @staticmethod
    def queues() -> Call:
        return Call("GET", "/v1/queues", None, lambda body: body["queues"])

    @staticmethod
    def dequeue(
        worker: str,
        queues: Sequence[str],
        names: Sequence[str],
        limit: int,
        wait: Optional[Seconds],
        max_weight: Optional[int] = None,
    ) -> Call:
        body = dequeue_body(worker, queues, names, limit, wait, max_weight)
        timeout = body.get("wait_ms", 0) / 1000 + LONG_POLL_MARGIN
        return Call("POST", "/v1/dequeue", body, _claimed, timeout)

    @staticmethod
    def heartbeat(lease: Lease, progress: Any) -> Call:
        body: Dict[str, Any] = {"token": lease.token}
        if progress is not None:
            body["progress"] = progress
        return Call("POST", f"/v1/jobs/{lease.job}/heartbeat", body, lambda b: b["lease_expires_at"])

    @staticmethod
    def finish(lease: Lease, data: Any, result: Any = None) -> Call:
        body = _finish_fields({"token": lease.token}, data, result)
        return Call("POST", f"/v1/jobs/{lease.job}/finish", body, _none)

    @staticmethod
    def finish_many(finishes: Iterable[Finishing]) -> Call:
        return Call("POST", "/v1/finish", {"jobs": _finish_items(finishes)}, _finish_errors)

    @staticmethod
    def finish_and_take(
        finishes: Iterable[Finishing],
        worker: str,
        queues: Sequence[str],
        names: Sequence[str],
        limit: int,
        max_weight: Optional[int] = None,
    ) -> Call:
        take = dequeue_body(worker, queues, names, limit, None, max_weight)
        body = {"jobs": _finish_items(finishes), "take": take}

        def read(answer: Any) -> FinishAndTake:
            take_error = answer.get("take_error")
            return FinishAndTake(
                errors=list(_finish_errors(answer)),
                taken=_claimed(answer),
                take_error=None if take_error is None else error_from_body(take_error, 200),
            )

        return Call("POST", "/v1/finish", body, read)

    @staticmethod
    def retry(lease: Lease, error: str, delay: Optional[Seconds]) -> Call:
        body: Dict[str, Any] = {"token": lease.token, "error": error}
        if delay is not None:
            body["delay_ms"] = millis(delay, "delay")
        return Call("POST", f"/v1/jobs/{lease.job}/retry", body, lambda b: b["state"])

    @staticmethod
    def fail(lease: Lease, group: str, message: str) -> Call:
        body = {"token": lease.token, "group": group, "message": message}
        return Call("POST", f"/v1/jobs/{lease.job}/fail", body, _none)

    @staticmethod
    def release(lease: Lease) -> Call:
        return Call("POST", f"/v1/jobs/{lease.job}/release", {"token": lease.token}, _none)

    @staticmethod
    def worker_stopped(worker: str) -> Call:
        return Call("POST", f"/v1/workers/{quote(worker, safe='')}/stop", None, _none)
