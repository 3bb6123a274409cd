"""What the server answers with, as plain data classes whose attributes are the server's field names (`_openapi`
lists which class reads which schema, and a test holds them to the server's document). Times stay RFC 3339 strings
and durations milliseconds, as the server sends them; `raw` keeps the whole body where a class has it."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Type, TypedDict, TypeVar

from ._options import RetryPolicy

T = TypeVar("T")


def _read(cls: Type[T], body: Dict[str, Any], **nested: Callable[[Any], Any]) -> T:
    """An instance of the data class `cls` from a body: each field from the member of its name, through
    `nested[name]` for a member that is an object of its own; a member absent or null takes the field's default
    (None for a field without one). `raw`, where the class has it, is the whole body."""
    values: Dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        value = body.get(f.name)
        if f.name == "raw":
            values["raw"] = body
        elif value is not None:
            read = nested.get(f.name)
            values[f.name] = value if read is None else read(value)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            values[f.name] = None
    return cls(**values)


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
class Attempt:
    """One attempt at running a job: its worker, when it started and ended, and how (`outcome`)."""

    number: int
    worker: str
    started_at: str
    finished_at: Optional[str] = None
    # `completed`, `retried`, `failed`, `lease_expired`, `cancelled`, `crashed`, `released`, `requeued` or
    # `suspended` (the handler slept, waits for a signal or for its children: `RunningJob.sleep`,
    # `RunningJob.wait_for_signal`, `RunningJob.join`); None while it runs.
    outcome: Optional[str] = None
    error: Optional[str] = None
    # What a completed attempt finished with.
    result: Any = None
    # What its process used (`run_ms`, `cpu_ms`, `peak_memory`), when the worker measured it.
    usage: Optional[Dict[str, int]] = None

    @staticmethod
    def from_body(body: Dict[str, Any]) -> "Attempt":
        return _read(Attempt, body)


@dataclass(frozen=True)
class Step:
    """A step of a handler's run as recorded (`RunningJob.step`): its `name` within the job (`page#2` for a name
    used again), what it produced, the attempt that recorded it, and when."""

    name: str
    result: Any
    attempt: int
    recorded_at: str

    @staticmethod
    def from_body(body: Dict[str, Any]) -> "Step":
        return _read(Step, body)


@dataclass(frozen=True)
class Slept:
    """What came of a sleep (`Client.sleep`): `suspended` when the job now sleeps until `until` (its lease is over,
    and the handler must stop), or not (`until` None) when the sleep's time had passed already."""

    suspended: bool
    until: Optional[str] = None

    @staticmethod
    def from_body(body: Dict[str, Any]) -> "Slept":
        return _read(Slept, body)


@dataclass(frozen=True)
class SignalWait:
    """What came of a wait for a signal (`Client.wait_for_signal`): exactly one of `suspended`, `received` and
    `timed_out` is true. `suspended`: the job now waits until the signal comes or `until` (its lease is over, and the
    handler must stop); `received`: the signal came, and `data` is its data (which may be None, JSON's null);
    `timed_out`: the wait's time passed with no signal."""

    suspended: bool
    received: bool
    timed_out: bool
    until: Optional[str] = None
    data: Any = None

    @staticmethod
    def from_body(body: Dict[str, Any]) -> "SignalWait":
        return _read(SignalWait, body)


@dataclass(frozen=True)
class SignalSent:
    """What came of a signal (`Client.signal`): `delivered` to job `job`, which waited for the key, or not (`job`
    None): kept for the first job that waits for it."""

    delivered: bool
    job: Optional[int] = None

    @staticmethod
    def from_body(body: Dict[str, Any]) -> "SignalSent":
        return _read(SignalSent, body)


@dataclass(frozen=True)
class Signal:
    """What a handler's `job.wait_for_signal` answers: `received` and the signal's `data` (which may be None, JSON's
    null), or not `received` (`data` None) when the wait timed out. Not the server's: `received` tells the two apart
    where `data` cannot."""

    received: bool
    data: Any = None


@dataclass(frozen=True)
class Spawned:
    """What a spawn pushed (`Client.spawn`): the `children`'s ids, in the order of the jobs given (a step recorded
    already answers the ids it recorded, and pushes nothing)."""

    children: List[int] = field(default_factory=list)

    @staticmethod
    def from_body(body: Dict[str, Any]) -> "Spawned":
        return _read(Spawned, body)


@dataclass(frozen=True)
class JoinedChild:
    """How a child of the job ended, as a join answers it (`RunningJob.join`, `Client.join`): its `id`, its `state`
    (`completed`, `cancelled`, or `failed` where a failed child does not hold its parent) and its `result` (None
    unless it completed with one)."""

    id: int
    state: str
    result: Any = None

    @staticmethod
    def from_body(body: Dict[str, Any]) -> "JoinedChild":
        return _read(JoinedChild, body)


@dataclass(frozen=True)
class Joined:
    """What came of a join (`Client.join`): `suspended` when the job now waits for its children (its lease is over,
    and the handler must stop; `children` is empty), or not, and `children` says how each ended, oldest first."""

    suspended: bool
    children: List[JoinedChild] = field(default_factory=list)

    @staticmethod
    def from_body(body: Dict[str, Any]) -> "Joined":
        return _read(Joined, body, children=lambda children: [JoinedChild.from_body(c) for c in children])


@dataclass(frozen=True)
class Job:
    """A job as the server shows it, every field of its body an attribute of the same name; `raw` is the body."""

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
    weight: int = 1
    retry: Optional[RetryPolicy] = None
    lease_timeout_ms: int = 0
    tags: List[str] = field(default_factory=list)
    # True while it is a child waiting for the run of its parent that created it to finish.
    awaits_parent: bool = False
    tracked: bool = False
    # The jobs it still waits for.
    depends_on: List[int] = field(default_factory=list)
    created_at: str = ""
    # Its attempts, oldest first (empty in listings).
    history: List[Attempt] = field(default_factory=list, repr=False)
    batch: Optional[int] = None
    # Whose the children its runs create are: `run` or `job`.
    children: str = "run"
    concurrency_key: Optional[str] = None
    concurrency_limit: Optional[int] = None
    debounce_key: Optional[str] = None
    due_at: Optional[str] = None
    failure_group: Optional[str] = None
    finished_at: Optional[str] = None
    lease_expires_at: Optional[str] = None
    parent: Optional[int] = None
    # The last progress reported.
    progress: Any = None
    schedule: Optional[str] = None
    started_at: Optional[str] = None
    throttle_key: Optional[str] = None
    time_zone: Optional[str] = None
    timeout_ms: Optional[int] = None
    trace_parent: Optional[str] = None
    unique_key: Optional[str] = None
    # The worker holding it, while it runs.
    worker: Optional[str] = None
    # How many steps its handler has recorded.
    step_count: int = 0
    # Those steps, in the order recorded (empty in listings): what a handler that runs again reads back.
    steps: List[Step] = field(default_factory=list, repr=False)
    # The key of the signal its handler waits for, while it waits (`RunningJob.wait_for_signal`); the job is
    # `scheduled` meanwhile.
    awaits_signal: Optional[str] = None
    # When its handler suspended it (a sleep, a wait for a signal or for its children), while it stays so.
    suspended_at: Optional[str] = None

    @staticmethod
    def from_body(body: Dict[str, Any]) -> "Job":
        return _read(
            Job,
            body,
            history=lambda history: [Attempt.from_body(a) for a in history],
            steps=lambda steps: [Step.from_body(s) for s in steps],
        )


@dataclass(frozen=True)
class JobPage:
    """A page of jobs, newest first; `next` is the `before` of the next page (None on the last)."""

    jobs: List[Job]
    next: Optional[int] = None

    @staticmethod
    def from_body(body: Dict[str, Any]) -> "JobPage":
        return _read(JobPage, body, jobs=lambda jobs: [Job.from_body(j) for j in jobs])


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


@dataclass(frozen=True)
class BulkResult:
    """What a bulk action did: the jobs it selected, those it acted on, and those it left as they were."""

    matched: int
    done: int
    skipped: int

    @staticmethod
    def from_body(body: Dict[str, Any]) -> "BulkResult":
        return _read(BulkResult, body)


@dataclass(frozen=True)
class BatchCallback:
    """A batch's callback: the job it pushes (`queue`, `name`), and the job it pushed once the batch ended, or why
    it could not (`error`)."""

    queue: str
    name: str
    job: Optional[int] = None
    error: Optional[str] = None

    @staticmethod
    def from_body(body: Dict[str, Any]) -> "BatchCallback":
        return _read(BatchCallback, body)


@dataclass(frozen=True)
class Batch:
    """A batch and its progress: `state` is `open`, `running` or `completed`."""

    id: int
    state: str
    total: int
    pending: int
    completed: int
    failed: int
    cancelled: int
    created_at: str
    completed_at: Optional[str] = None
    succeeded_at: Optional[str] = None
    description: Optional[str] = None
    on_success: Optional[BatchCallback] = None
    on_complete: Optional[BatchCallback] = None

    @staticmethod
    def from_body(body: Dict[str, Any]) -> "Batch":
        return _read(Batch, body, on_success=BatchCallback.from_body, on_complete=BatchCallback.from_body)


@dataclass(frozen=True)
class BatchCreated:
    """A new batch: its id, and its jobs in the order they were given."""

    id: int
    jobs: List[Enqueued]

    @staticmethod
    def from_body(body: Dict[str, Any]) -> "BatchCreated":
        return _read(BatchCreated, body, jobs=lambda jobs: [Enqueued.from_body(j) for j in jobs])


@dataclass(frozen=True)
class BatchPage:
    """A page of batches, newest first; `next` is the `before` of the next page (None on the last)."""

    batches: List[Batch]
    next: Optional[int] = None

    @staticmethod
    def from_body(body: Dict[str, Any]) -> "BatchPage":
        return _read(BatchPage, body, batches=lambda batches: [Batch.from_body(b) for b in batches])


@dataclass(frozen=True)
class Recurring:
    """A recurring template: at every slot of `cron` in `time_zone` it creates a job like `job` (a push body, as
    `push` makes one); `missed` and `overlap` are its policies for slots missed and runs still live."""

    key: str
    cron: str
    time_zone: str
    overlap: str
    paused: bool = False
    next_run: Optional[str] = None
    last_run: Optional[str] = None
    # The last job it created (at a slot, or run by hand); it may be gone since.
    last_job: Optional[int] = None
    job: Optional[Dict[str, Any]] = None
    # `skip`, `once` or `all`.
    missed: Optional[str] = None

    @staticmethod
    def from_body(body: Dict[str, Any]) -> "Recurring":
        return _read(Recurring, body)


@dataclass(frozen=True)
class WorkerInfo:
    """A worker the server has seen: when, the jobs it holds, those of them whose lease ran out, and whether it is
    `live`, `stopped` (it said so) or `gone` (not seen for a while)."""

    id: str
    first_seen: str
    last_seen: str
    jobs: List[int]
    stalled: List[int]
    status: Optional[str] = None

    @staticmethod
    def from_body(body: Dict[str, Any]) -> "WorkerInfo":
        return _read(WorkerInfo, body)


@dataclass(frozen=True)
class FailureGroup:
    """A failure group: how many failed jobs it holds, and when they failed."""

    group: str
    count: int
    first_failed_at: str
    last_failed_at: str

    @staticmethod
    def from_body(body: Dict[str, Any]) -> "FailureGroup":
        return _read(FailureGroup, body)


@dataclass(frozen=True)
class Token:
    """The caller's token: its `role` (`read`, `enqueue`, `work` or `admin`), its `name` in the token file, and the
    only `queues` it may reach when it is limited to some."""

    role: str
    name: Optional[str] = None
    queues: Optional[List[str]] = None

    @staticmethod
    def from_body(body: Dict[str, Any]) -> "Token":
        return _read(Token, body)


@dataclass(frozen=True)
class Event:
    """One transition of the activity log, as `GET /v1/activity` and the event stream show it: `event` is its kind
    (`added`, `started`, `finished`, `failed`, `step_recorded`, `suspended`, `signal_received`, …), `id` its place
    in the log."""

    id: int
    at: str
    event: str
    job: Optional[int] = None
    queue: Optional[str] = None
    name: Optional[str] = None
    worker: Optional[str] = None
    # An error message, a reason, a count.
    detail: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @staticmethod
    def from_body(body: Dict[str, Any]) -> "Event":
        return _read(Event, body)


@dataclass(frozen=True)
class ActivityPage:
    """A page of the activity log, newest first; `next_before` is the `before` of the next page."""

    events: List[Event]
    next_before: Optional[int] = None

    @staticmethod
    def from_body(body: Dict[str, Any]) -> "ActivityPage":
        return _read(ActivityPage, body, events=lambda events: [Event.from_body(e) for e in events])


class QueueStats(TypedDict, total=False):
    """One queue, as `Client.queues` lists them (a dict, as it always was): its jobs counted by state, whether it
    is paused, and its limits."""

    queue: str
    paused: bool
    scheduled: int
    queued: int
    waiting: int
    running: int
    stalled: int
    failed: int
    completed: int
    cancelled: int
    # Of the scheduled and waiting jobs, those their handler suspended (they hold no worker); counted in those too.
    suspended: int
    concurrency: Optional[int]
    key_concurrency: Optional[int]
    priority_aging_ms: Optional[int]
    # `{"jobs": N, "per_ms": M}`.
    rate_limit: Optional[Dict[str, int]]
    # The busiest concurrency keys: `key`, `running`, `queued`, `full`, `limit`, `weight`.
    top_keys: List[Dict[str, Any]]
    waiting_on_keys: int
