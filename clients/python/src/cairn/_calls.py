"""Each call of the HTTP API once: the request it makes and how its answer reads. `Client` and `AsyncClient` only
send them, so the two cannot drift apart. (The event stream, which is no request and answer, is `_events`'s.)"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, Generic, Iterable, List, Mapping, NamedTuple, Optional, Sequence, Tuple, TypeVar, Union
from urllib.parse import quote, urlencode

from ._errors import CairnError, InvalidInput, error_from_body
from ._options import PushBody, Seconds, Time, job_filter, millis, rfc3339
from ._types import (ActivityPage, Batch, BatchCreated, BatchPage, BulkResult, ClaimedJob, Enqueued, FailureGroup,
                     FinishAndTake, Job, JobPage, Joined, Lease, QueueStats, Recurring, SignalSent, SignalWait, Slept,
                     Spawned, Step, Token, WorkerInfo)

T = TypeVar("T")

# How much longer than a long poll's wait the HTTP request may take before it counts as lost.
LONG_POLL_MARGIN = 10.0
# The longest wait for a job, as the Rust client's (a day); the server caps each request's part of it.
MAX_WAIT = 24 * 3600.0
# The states a job ends in: a wait for it is over.
ENDED = frozenset(("completed", "failed", "cancelled"))
# The longest wait for a signal the server takes: ten years, in milliseconds.
MAX_SIGNAL_WAIT_MS = 315_360_000_000
# The actions of `POST /v1/jobs/bulk`.
BULK_ACTIONS = ("cancel", "delete", "retry", "move")


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request, and how its answer's JSON reads as what the call returns (`T`)."""

    method: str
    path: str
    body: Optional[Dict[str, Any]]
    read: Callable[[Any], T]
    # Seconds the whole request may take; None: the client's own timeout.
    timeout: Optional[float] = None


def segment(value: Union[str, int]) -> str:
    """A path segment: a queue's name, a template's key or a failure group, whatever characters it holds."""
    return quote(str(value), safe="")


def query(path: str, params: Mapping[str, Any]) -> str:
    """`path` with the parameters that are not None as its query string (booleans as `true` and `false`)."""
    given = {k: ("true" if v else "false") if isinstance(v, bool) else v for k, v in params.items() if v is not None}
    return f"{path}?{urlencode(given)}" if given else path


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


def signal_timeout_ms(timeout: Seconds) -> int:
    """A wait for a signal's timeout in milliseconds, refusing one the server would (negative, or over ten years)."""
    timeout_ms = millis(timeout, "timeout")
    if timeout_ms > MAX_SIGNAL_WAIT_MS:
        message = f"timeout: must be at most ten years ({MAX_SIGNAL_WAIT_MS // 1000} s), got {timeout}"
        raise InvalidInput("invalid_input", message, "timeout")
    return timeout_ms


def spawn_jobs(jobs: Sequence[PushBody]) -> List[PushBody]:
    """The jobs of a spawn, each a job as `push` makes it (which refuses an unknown option by name), refusing what is
    not one before anything is sent."""
    if isinstance(jobs, (str, bytes, Mapping)) or not isinstance(jobs, Iterable):
        raise InvalidInput("invalid_input", f"jobs: must be a list of jobs (made by push), got {jobs!r}", "jobs")
    listed = list(jobs)
    for index, job in enumerate(listed):
        if not isinstance(job, Mapping) or not isinstance(job.get("name"), str):
            field = f"jobs[{index}]"
            message = f"{field}: must be a job made by push(name, data, **options), got {job!r}"
            raise InvalidInput("invalid_input", message, field)
    return [dict(job) for job in listed]


def _claimed(body: Any) -> List[ClaimedJob]:
    return [ClaimedJob.from_body(c) for c in body.get("jobs", [])]


def _none(_: Any) -> None:
    return None


def _state(body: Any) -> str:
    return str(body["state"])


def _expiry(body: Any) -> str:
    return str(body["lease_expires_at"])


def _enqueued(body: Any) -> List[Enqueued]:
    return [Enqueued.from_body(j) for j in body["jobs"]]


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
            lease, data, result = finish[0], finish[1], None
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

    def call(self) -> Call[Job]:
        # Rounded up: a request that answers at its wait's end finds the deadline passed, rather than asking again.
        wait_ms = math.ceil(max(self.deadline - time.monotonic(), 0.0) * 1000)
        path = f"/v1/jobs/{self.job}?wait_ms={wait_ms}"
        return Call("GET", path, None, Job.from_body, wait_ms / 1000 + LONG_POLL_MARGIN)

    def over(self, job: Job) -> bool:
        return job.state in ENDED or time.monotonic() >= self.deadline


def _batch_body(
    jobs: Sequence[PushBody],
    on_success: Optional[PushBody],
    on_complete: Optional[PushBody],
    open: bool,
    description: Optional[str],
) -> Dict[str, Any]:
    body: Dict[str, Any] = {"jobs": list(jobs)}
    for name, value in (("on_success", on_success), ("on_complete", on_complete), ("description", description)):
        if value is not None:
            body[name] = value
    if open:
        body["open"] = True
    return body


def _bulk_body(action: str, ids: Optional[Sequence[int]], to_queue: Optional[str], filters: Mapping[str, Any]) -> Dict[str, Any]:
    if action not in BULK_ACTIONS:
        raise InvalidInput("invalid_input", f"action: must be one of {', '.join(BULK_ACTIONS)}, got {action!r}", "action")
    selection = job_filter(filters)
    if ids is None and not selection:
        # The server would take an empty filter as every job: a bulk delete of everything deserves more than a
        # forgotten argument.
        raise InvalidInput("invalid_input", "ids: give the jobs' ids or at least one filter (queue=, state=, …)", "ids")
    body: Dict[str, Any] = {"action": action}
    if ids is not None:
        body["ids"] = [int(i) for i in ids]
    if selection:
        body["filter"] = selection
    if to_queue is not None:
        body["queue"] = to_queue
    return body


def _tags(add: Sequence[Any], remove: Sequence[Any]) -> Dict[str, Any]:
    body: Dict[str, Any] = {}
    if add:
        body["add"] = list(add)
    if remove:
        body["remove"] = list(remove)
    return body


def _recurring_body(
    cron: str, job: PushBody, time_zone: Optional[str], missed: Optional[str], overlap: Optional[str]
) -> Dict[str, Any]:
    body: Dict[str, Any] = {"cron": cron, "job": job}
    for name, value in (("time_zone", time_zone), ("missed", missed), ("overlap", overlap)):
        if value is not None:
            body[name] = value
    return body


class Calls:
    """The API's calls, by the names of the clients' methods (`_openapi.OPERATIONS` says which is which)."""

    @staticmethod
    def health() -> Call[Dict[str, Any]]:
        return Call("GET", "/v1/health", None, lambda body: body)

    @staticmethod
    def token() -> Call[Token]:
        return Call("GET", "/v1/token", None, Token.from_body)

    # Jobs.

    @staticmethod
    def enqueue(job: PushBody) -> Call[Enqueued]:
        return Call("POST", "/v1/jobs", job, Enqueued.from_body)

    @staticmethod
    def enqueue_batch(jobs: Sequence[PushBody]) -> Call[List[Enqueued]]:
        return Call("POST", "/v1/jobs/batch", {"jobs": list(jobs)}, _enqueued)

    @staticmethod
    def get(job: int) -> Call[Job]:
        return Call("GET", f"/v1/jobs/{int(job)}", None, Job.from_body)

    @staticmethod
    def list_jobs(filters: Mapping[str, Any], before: Optional[int], limit: Optional[int]) -> Call[JobPage]:
        params = {**job_filter(filters), "before": before, "limit": limit}
        return Call("GET", query("/v1/jobs", params), None, JobPage.from_body)

    @staticmethod
    def bulk(action: str, ids: Optional[Sequence[int]], to_queue: Optional[str], filters: Mapping[str, Any]) -> Call[BulkResult]:
        return Call("POST", "/v1/jobs/bulk", _bulk_body(action, ids, to_queue, filters), BulkResult.from_body)

    @staticmethod
    def cancel(job: int) -> Call[None]:
        return Call("POST", f"/v1/jobs/{int(job)}/cancel", None, _none)

    @staticmethod
    def delete(job: int) -> Call[None]:
        return Call("DELETE", f"/v1/jobs/{int(job)}", None, _none)

    @staticmethod
    def requeue(job: int, run_at: Optional[Time]) -> Call[str]:
        body = {} if run_at is None else {"run_at": rfc3339(run_at, "run_at")}
        return Call("POST", f"/v1/jobs/{int(job)}/requeue", body, _state)

    @staticmethod
    def set_priority(job: int, priority: int) -> Call[None]:
        return Call("POST", f"/v1/jobs/{int(job)}/priority", {"priority": priority}, _none)

    @staticmethod
    def reschedule(job: int, run_at: Time) -> Call[str]:
        return Call("POST", f"/v1/jobs/{int(job)}/reschedule", {"run_at": rfc3339(run_at, "run_at")}, _state)

    @staticmethod
    def move(job: int, queue: str) -> Call[None]:
        return Call("POST", f"/v1/jobs/{int(job)}/move", {"queue": queue}, _none)

    @staticmethod
    def set_data(job: int, data: Any) -> Call[None]:
        return Call("POST", f"/v1/jobs/{int(job)}/data", {"data": data}, _none)

    @staticmethod
    def change_tags(job: int, add: Sequence[str], remove: Sequence[str]) -> Call[None]:
        return Call("POST", f"/v1/jobs/{int(job)}/tags", _tags(add, remove), _none)

    @staticmethod
    def change_dependencies(job: int, add: Sequence[int], remove: Sequence[int]) -> Call[str]:
        return Call("POST", f"/v1/jobs/{int(job)}/dependencies", _tags(add, remove), _state)

    @staticmethod
    def track(job: int, tracked: bool) -> Call[None]:
        return Call("POST", f"/v1/jobs/{int(job)}/{'track' if tracked else 'untrack'}", None, _none)

    # Batches.

    @staticmethod
    def create_batch(
        jobs: Sequence[PushBody],
        on_success: Optional[PushBody],
        on_complete: Optional[PushBody],
        open: bool,
        description: Optional[str],
    ) -> Call[BatchCreated]:
        body = _batch_body(jobs, on_success, on_complete, open, description)
        return Call("POST", "/v1/batches", body, BatchCreated.from_body)

    @staticmethod
    def add_to_batch(batch: int, jobs: Sequence[PushBody]) -> Call[List[Enqueued]]:
        return Call("POST", f"/v1/batches/{int(batch)}/jobs", {"jobs": list(jobs)}, _enqueued)

    @staticmethod
    def close_batch(batch: int) -> Call[Batch]:
        return Call("POST", f"/v1/batches/{int(batch)}/close", {}, Batch.from_body)

    @staticmethod
    def get_batch(batch: int) -> Call[Batch]:
        return Call("GET", f"/v1/batches/{int(batch)}", None, Batch.from_body)

    @staticmethod
    def list_batches(state: Optional[str], before: Optional[int], limit: Optional[int]) -> Call[BatchPage]:
        path = query("/v1/batches", {"state": state, "before": before, "limit": limit})
        return Call("GET", path, None, BatchPage.from_body)

    # Queues, failures and workers.

    @staticmethod
    def queues() -> Call[List[QueueStats]]:
        return Call("GET", "/v1/queues", None, lambda body: body["queues"])

    @staticmethod
    def pause_queue(queue: str, paused: bool) -> Call[None]:
        return Call("POST", f"/v1/queues/{segment(queue)}/{'pause' if paused else 'resume'}", None, _none)

    @staticmethod
    def peek(queue: str, limit: Optional[int]) -> Call[List[Job]]:
        path = query(f"/v1/queues/{segment(queue)}/peek", {"limit": limit})
        return Call("GET", path, None, lambda body: [Job.from_body(j) for j in body["jobs"]])

    @staticmethod
    def limit_queue(queue: str, concurrency: Optional[int]) -> Call[None]:
        return Call("POST", f"/v1/queues/{segment(queue)}/concurrency", {"concurrency": concurrency}, _none)

    @staticmethod
    def limit_keys(queue: str, limit: Optional[int]) -> Call[None]:
        return Call("POST", f"/v1/queues/{segment(queue)}/key-concurrency", {"limit": limit}, _none)

    @staticmethod
    def weigh_key(queue: str, key: str, weight: Optional[int]) -> Call[None]:
        return Call("POST", f"/v1/queues/{segment(queue)}/key-weight", {"key": key, "weight": weight}, _none)

    @staticmethod
    def rate_limit_queue(queue: str, jobs: Optional[int], per: Optional[Seconds]) -> Call[None]:
        if (jobs is None) != (per is None):
            raise InvalidInput("invalid_input", "per: a rate limit needs both jobs and per, or neither to remove it", "per")
        rate = None if jobs is None or per is None else {"jobs": jobs, "per_ms": millis(per, "per")}
        return Call("POST", f"/v1/queues/{segment(queue)}/rate", {"rate": rate}, _none)

    @staticmethod
    def age_queue(queue: str, every: Optional[Seconds]) -> Call[None]:
        every_ms = None if every is None else millis(every, "every")
        return Call("POST", f"/v1/queues/{segment(queue)}/aging", {"every_ms": every_ms}, _none)

    @staticmethod
    def failure_groups() -> Call[List[FailureGroup]]:
        return Call("GET", "/v1/failures", None, lambda body: [FailureGroup.from_body(g) for g in body["groups"]])

    @staticmethod
    def unfail(group: str, limit: Optional[int], queue: Optional[str]) -> Call[int]:
        body = {k: v for k, v in (("limit", limit), ("queue", queue)) if v is not None}
        return Call("POST", f"/v1/failures/{segment(group)}/unfail", body, lambda b: int(b["moved"]))

    @staticmethod
    def workers() -> Call[List[WorkerInfo]]:
        return Call("GET", "/v1/workers", None, lambda body: [WorkerInfo.from_body(w) for w in body["workers"]])

    @staticmethod
    def worker_stopped(worker: str) -> Call[None]:
        return Call("POST", f"/v1/workers/{segment(worker)}/stop", None, _none)

    @staticmethod
    def activity(params: Mapping[str, Any]) -> Call[ActivityPage]:
        return Call("GET", query("/v1/activity", params), None, ActivityPage.from_body)

    # Recurring templates.

    @staticmethod
    def set_recurring(
        key: str, cron: str, job: PushBody, time_zone: Optional[str], missed: Optional[str], overlap: Optional[str]
    ) -> Call[Recurring]:
        body = _recurring_body(cron, job, time_zone, missed, overlap)
        return Call("PUT", f"/v1/recurring/{segment(key)}", body, Recurring.from_body)

    @staticmethod
    def get_recurring(key: str) -> Call[Recurring]:
        return Call("GET", f"/v1/recurring/{segment(key)}", None, Recurring.from_body)

    @staticmethod
    def list_recurring() -> Call[List[Recurring]]:
        return Call("GET", "/v1/recurring", None, lambda b: [Recurring.from_body(r) for r in b["recurring"]])

    @staticmethod
    def pause_recurring(key: str, paused: bool) -> Call[Recurring]:
        action = "pause" if paused else "resume"
        return Call("POST", f"/v1/recurring/{segment(key)}/{action}", {}, Recurring.from_body)

    @staticmethod
    def run_recurring(key: str) -> Call[Enqueued]:
        return Call("POST", f"/v1/recurring/{segment(key)}/run", {}, Enqueued.from_body)

    @staticmethod
    def remove_recurring(key: str) -> Call[None]:
        return Call("DELETE", f"/v1/recurring/{segment(key)}", None, _none)

    # A worker's calls.

    @staticmethod
    def dequeue(
        worker: str,
        queues: Sequence[str],
        names: Sequence[str],
        limit: int,
        wait: Optional[Seconds],
        max_weight: Optional[int] = None,
    ) -> Call[List[ClaimedJob]]:
        body = dequeue_body(worker, queues, names, limit, wait, max_weight)
        timeout = body.get("wait_ms", 0) / 1000 + LONG_POLL_MARGIN
        return Call("POST", "/v1/dequeue", body, _claimed, timeout)

    @staticmethod
    def heartbeat(lease: Lease, progress: Any) -> Call[str]:
        body: Dict[str, Any] = {"token": lease.token}
        if progress is not None:
            body["progress"] = progress
        return Call("POST", f"/v1/jobs/{lease.job}/heartbeat", body, _expiry)

    @staticmethod
    def update(lease: Lease, progress: Any) -> Call[None]:
        return Call("POST", f"/v1/jobs/{lease.job}/update", {"token": lease.token, "progress": progress}, _none)

    @staticmethod
    def checkpoint(lease: Lease, data: Any) -> Call[str]:
        return Call("POST", f"/v1/jobs/{lease.job}/checkpoint", {"token": lease.token, "data": data}, _expiry)

    @staticmethod
    def record_step(lease: Lease, name: str, result: Any) -> Call[Step]:
        body = {"token": lease.token, "name": name, "result": result}
        return Call("POST", f"/v1/jobs/{lease.job}/steps", body, Step.from_body)

    @staticmethod
    def sleep(lease: Lease, name: str, seconds: Optional[Seconds], until: Optional[Time]) -> Call[Slept]:
        if (seconds is None) == (until is None):
            given = "both" if seconds is not None else "neither"
            raise InvalidInput(
                "invalid_input", f"seconds: a sleep takes exactly one of seconds and until, got {given}", "seconds"
            )
        body: Dict[str, Any] = {"token": lease.token, "name": name}
        if seconds is not None:
            body["for_ms"] = millis(seconds, "seconds")
        else:
            assert until is not None
            body["until"] = rfc3339(until, "until")
        return Call("POST", f"/v1/jobs/{lease.job}/sleep", body, Slept.from_body)

    @staticmethod
    def wait_for_signal(lease: Lease, name: str, key: str, timeout: Seconds) -> Call[SignalWait]:
        body = {"token": lease.token, "name": name, "key": key, "timeout_ms": signal_timeout_ms(timeout)}
        return Call("POST", f"/v1/jobs/{lease.job}/wait_for_signal", body, SignalWait.from_body)

    @staticmethod
    def spawn(lease: Lease, name: str, jobs: Sequence[PushBody]) -> Call[Spawned]:
        body = {"token": lease.token, "name": name, "jobs": spawn_jobs(jobs)}
        return Call("POST", f"/v1/jobs/{lease.job}/spawn", body, Spawned.from_body)

    @staticmethod
    def join(lease: Lease, name: str) -> Call[Joined]:
        body = {"token": lease.token, "name": name}
        return Call("POST", f"/v1/jobs/{lease.job}/join", body, Joined.from_body)

    @staticmethod
    def signal(key: str, data: Any) -> Call[SignalSent]:
        return Call("POST", "/v1/signals", {"key": key, "data": data}, SignalSent.from_body)

    @staticmethod
    def finish(lease: Lease, data: Any, result: Any = None) -> Call[None]:
        body = _finish_fields({"token": lease.token}, data, result)
        return Call("POST", f"/v1/jobs/{lease.job}/finish", body, _none)

    @staticmethod
    def finish_many(finishes: Iterable[Finishing]) -> Call[List[Optional[CairnError]]]:
        return Call("POST", "/v1/finish", {"jobs": _finish_items(finishes)}, _finish_errors)

    @staticmethod
    def finish_and_take(
        finishes: Iterable[Finishing],
        worker: str,
        queues: Sequence[str],
        names: Sequence[str],
        limit: int,
        max_weight: Optional[int] = None,
    ) -> Call[FinishAndTake]:
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
    def retry(lease: Lease, error: str, delay: Optional[Seconds], run_at: Optional[Time] = None) -> Call[str]:
        body: Dict[str, Any] = {"token": lease.token, "error": error}
        if delay is not None:
            body["delay_ms"] = millis(delay, "delay")
        if run_at is not None:
            body["run_at"] = rfc3339(run_at, "run_at")
        return Call("POST", f"/v1/jobs/{lease.job}/retry", body, _state)

    @staticmethod
    def fail(lease: Lease, group: str, message: str) -> Call[None]:
        body = {"token": lease.token, "group": group, "message": message}
        return Call("POST", f"/v1/jobs/{lease.job}/fail", body, _none)

    @staticmethod
    def release(lease: Lease) -> Call[None]:
        return Call("POST", f"/v1/jobs/{lease.job}/release", {"token": lease.token}, _none)
