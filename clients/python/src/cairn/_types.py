"""What the server answers with, as plain data classes. Times stay RFC 3339 strings, as the server sends them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional


@dataclass(frozen=True)
class Enqueued:
    """What an enqueue did: the job's id, its state, and whether an existing job held its unique key."""

    id: int
    state: str
    existing: bool = False

    @staticmethod
    def from_body(body: Dict[str, Any]) -> "Enqueued":
        return Enqueued(id=body["id"], state=body["state"], existing=bool(body.get("existing", False)))


@dataclass(frozen=True)
class Job:
    """A job as the server shows it. The fields most code needs are attributes; `raw` holds every field (its
    `history` gives each attempt's own `result`)."""

    id: int
    queue: str
    name: str
    state: str
    data: Any
    priority: int
    attempt: int
    run_at: str
    error: Optional[str]
    raw: Dict[str, Any] = field(repr=False, compare=False)
    # What its last completed run produced, kept apart from its data; None when it has none.
    result: Any = None

    @staticmethod
    def from_body(body: Dict[str, Any]) -> "Job":
        return Job(
            id=body["id"],
            queue=body["queue"],
            name=body["name"],
            state=body["state"],
            data=body.get("data"),
            priority=body.get("priority", 0),
            attempt=body.get("attempt", 0),
            run_at=body.get("run_at", ""),
            error=body.get("error"),
            raw=body,
            result=body.get("result"),
        )


@dataclass(frozen=True)
class Lease:
    """The right to report on a running job. Its token is a string: it is 64-bit."""

    job: int
    token: str
    worker: str
    expires_at: str

    @staticmethod
    def from_body(body: Dict[str, Any]) -> "Lease":
        return Lease(job=body["job"], token=body["token"], worker=body["worker"], expires_at=body["expires_at"])


@dataclass(frozen=True)
class ClaimedJob:
    """A job taken by a worker, with the lease under which it runs."""

    job: Job
    lease: Lease

    @staticmethod
    def from_body(body: Dict[str, Any]) -> "ClaimedJob":
        return ClaimedJob(job=Job.from_body(body["job"]), lease=Lease.from_body(body["lease"]))


@dataclass(frozen=True)
class FinishAndTake:
    """What a finish with a take did: each finish's error (None when done), in order, and the jobs taken."""

    errors: List[Optional[Exception]]
    taken: List[ClaimedJob]
    take_error: Optional[Exception] = None
