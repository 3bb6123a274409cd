"""What a caller says about a job: `push`'s options, a retry policy, a debounce, a throttle and a filter of jobs, each
turned into the server's fields here and nowhere else. A name this client does not know is refused before anything
is sent, naming it and listing the names it takes: the server refuses unknown fields so that a misspelt option is an
error, and the client keeps that promise (`UnknownOption`)."""

from __future__ import annotations

import difflib
import re
from datetime import datetime, timedelta
from typing import (TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Literal, Mapping, NamedTuple, Optional,
                    Sequence, Tuple, Type, TypedDict, TypeVar, Union)

if TYPE_CHECKING:
    from typing_extensions import Unpack

from ._errors import InvalidInput, UnknownOption

Seconds = Union[float, int, timedelta]
"""A duration: seconds as a number, or a `timedelta`."""

Time = Union[str, datetime]
"""A time: an RFC 3339 string, or a `datetime` with its time zone."""

Tup = TypeVar("Tup", bound=Tuple[Any, ...])

PushBody = Dict[str, Any]
"""A job to enqueue, as the server takes it (`POST /v1/jobs`): what `push` makes."""


def millis(duration: Seconds, field: str) -> int:
    """Whole milliseconds of a duration, refusing a negative one as the server would."""
    if isinstance(duration, timedelta):
        seconds = duration.total_seconds()
    elif isinstance(duration, (int, float)) and not isinstance(duration, bool):
        seconds = float(duration)
    else:
        raise InvalidInput("invalid_input", f"{field}: must be seconds (a number or a timedelta), got {duration!r}", field)
    if seconds < 0:
        raise InvalidInput("invalid_input", f"{field}: must not be negative, got {seconds} s", field)
    return int(round(seconds * 1000))


def rfc3339(time: Time, field: str) -> str:
    """A time as the server reads it: a string as it is, a `datetime` in RFC 3339 (it must say its time zone)."""
    if isinstance(time, datetime):
        if time.tzinfo is None or time.utcoffset() is None:
            raise InvalidInput(
                "invalid_input", f"{field}: a datetime must have a time zone (datetime.now(timezone.utc)), got {time}",
                field,
            )
        return time.isoformat()
    return time


def refuse_unknown(
    given: Iterable[str], known: Iterable[str], what: str, prefix: str = "", hints: Mapping[str, str] = {}
) -> None:
    """Raises `UnknownOption` for the first of `given` that is not one of `known`, naming it, where it belongs
    (`hints`, by the name in snake case) or the name it is close to, and every known one."""
    known = sorted(known)
    for name in given:
        if name not in known:
            snake = re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()
            close = difflib.get_close_matches(name, known, n=1)
            if snake in hints:
                hint = f" ({hints[snake]})"
            else:
                hint = f" (did you mean {close[0]}?)" if close else ""
            message = f"{prefix}{name}: is not {what}{hint}; the names it takes are {', '.join(known)}"
            raise UnknownOption("invalid_input", message, prefix + name)


class Retry(NamedTuple):
    """A retry policy in seconds, any part of it: what it leaves out is the queue's default (`Retry(max_attempts=1)`
    tries the job once). A dict with the server's names (`{"max_attempts": 1, "initial_delay_ms": 500}`) says the
    same, and so does a job's `retry`."""

    max_attempts: Optional[int] = None
    initial_delay: Optional[Seconds] = None
    multiplier: Optional[float] = None
    max_delay: Optional[Seconds] = None
    jitter: Optional[float] = None


class RetryPolicy(TypedDict, total=False):
    """A retry policy with the server's names and units, as a job's `retry` shows it."""

    max_attempts: int
    initial_delay_ms: int
    multiplier: float
    max_delay_ms: int
    jitter: float


class Debounce(NamedTuple):
    """A burst of pushes of one `key` makes one job, which runs `delay` after the latest push and no later than
    `max_wait` after the first. A plain `(key, delay, max_wait)` says the same."""

    key: str
    delay: Seconds
    max_wait: Seconds


class Throttle(NamedTuple):
    """One job per `key` per `period`, whatever became of the earlier one (only one in `states`, when given, counts).
    A plain `(key, period)` says the same."""

    key: str
    period: Seconds
    states: Sequence[str] = ()


# The client's name of each member of an object option, and the server's: durations are seconds here and
# milliseconds there.
RETRY_MEMBERS = {"max_attempts": "max_attempts", "initial_delay": "initial_delay_ms", "multiplier": "multiplier",
                 "max_delay": "max_delay_ms", "jitter": "jitter"}
DEBOUNCE_MEMBERS = {"key": "key", "delay": "delay_ms", "max_wait": "max_wait_ms"}
THROTTLE_MEMBERS = {"key": "key", "period": "period_ms", "states": "states"}


def _members(value: Tuple[Any, ...], members: Mapping[str, str], field: str) -> Dict[str, Any]:
    body: Dict[str, Any] = {}
    for (name, wire), member in zip(members.items(), value):
        if member is None:
            continue
        if wire.endswith("_ms"):
            body[wire] = millis(member, f"{field}.{name}")
        elif isinstance(member, (list, tuple)):
            if member:  # a throttle's states: none is any state, as when absent
                body[wire] = list(member)
        else:
            body[wire] = member
    return body


def _retry(value: Union[Retry, RetryPolicy, Mapping[str, Any]], field: str) -> Dict[str, Any]:
    if isinstance(value, Retry):
        return _members(value, RETRY_MEMBERS, field)
    if not isinstance(value, Mapping):
        raise InvalidInput("invalid_input", f"{field}: must be a Retry or a dict of a retry policy, got {value!r}", field)
    refuse_unknown(value, RETRY_MEMBERS.values(), "a member of a retry policy", f"{field}.")
    return {k: v for k, v in value.items() if v is not None}


def _tuple(kind: Type[Tup], value: Any, field: str, shape: str) -> Tup:
    if isinstance(value, kind):
        return value
    if not isinstance(value, tuple):
        raise InvalidInput("invalid_input", f"{field}: must be {shape}, got {value!r}", field)
    try:
        return kind(*value)
    except TypeError:
        raise InvalidInput("invalid_input", f"{field}: must be {shape}, got {value!r}", field) from None


def _debounce(value: Any, field: str) -> Dict[str, Any]:
    return _members(_tuple(Debounce, value, field, "a Debounce or (key, delay, max_wait)"), DEBOUNCE_MEMBERS, field)


def _throttle(value: Any, field: str) -> Dict[str, Any]:
    shape = "a Throttle, (key, period) or (key, period, states)"
    return _members(_tuple(Throttle, value, field, shape), THROTTLE_MEMBERS, field)


def _as_is(value: Any, field: str) -> Any:
    return value


def _list(value: Any, field: str) -> List[Any]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise InvalidInput("invalid_input", f"{field}: must be a list, got {value!r}", field)
    return list(value)


# A retry policy's members given to push itself: where they belong.
_RETRY_HINTS = {name: f"it belongs in retry=Retry({name}=…)" for name in RETRY_MEMBERS}
_RETRY_HINTS.update({wire: f"it belongs in retry={{{wire!r}: …}}" for wire in RETRY_MEMBERS.values() if wire not in RETRY_MEMBERS})


class PushOptions(TypedDict, total=False):
    """What `push` (and `enqueue`) take besides the name and data; None leaves an option out."""

    queue: Optional[str]
    priority: Optional[int]
    delay: Optional[Seconds]
    run_at: Optional[Time]
    unique_key: Optional[str]
    tags: Optional[Sequence[str]]
    retry: Optional[Union[Retry, RetryPolicy]]
    lease_timeout: Optional[Seconds]
    timeout: Optional[Seconds]
    weight: Optional[int]
    schedule: Optional[str]
    time_zone: Optional[str]
    debounce: Optional[Union[Debounce, Tuple[str, Seconds, Seconds]]]
    throttle: Optional[Union[Throttle, Tuple[str, Seconds], Tuple[str, Seconds, Sequence[str]]]]
    concurrency_key: Optional[str]
    concurrency_limit: Optional[int]
    depends_on: Optional[Sequence[int]]
    parent: Optional[int]
    trace_parent: Optional[str]
    batch: Optional[int]
    children: Optional[Literal["run", "job"]]


class Option(NamedTuple):
    """How a push option becomes the body's `field` (`a.b`: member `b` of the object `a`)."""

    field: str
    encode: Callable[[Any, str], Any]
    # For an option that is an object: its members, the client's name to the server's.
    members: Mapping[str, str] = {}


PUSH_OPTIONS: Dict[str, Option] = {
    "queue": Option("queue", _as_is),
    "priority": Option("priority", _as_is),
    "delay": Option("delay_ms", millis),
    "run_at": Option("run_at", rfc3339),
    "unique_key": Option("unique_key", _as_is),
    "tags": Option("tags", _list),
    "retry": Option("retry", _retry, RETRY_MEMBERS),
    "lease_timeout": Option("lease_timeout_ms", millis),
    "timeout": Option("timeout_ms", millis),
    "weight": Option("weight", _as_is),
    "schedule": Option("schedule", _as_is),
    "time_zone": Option("time_zone", _as_is),
    "debounce": Option("debounce", _debounce, DEBOUNCE_MEMBERS),
    "throttle": Option("throttle", _throttle, THROTTLE_MEMBERS),
    "concurrency_key": Option("concurrency.key", _as_is),
    "concurrency_limit": Option("concurrency.limit", _as_is),
    "depends_on": Option("depends_on", _list),
    "parent": Option("parent", _as_is),
    "trace_parent": Option("trace_parent", _as_is),
    "batch": Option("batch", _as_is),
    "children": Option("children", _as_is),
}


def push(name: str, data: Any = None, **options: Unpack[PushOptions]) -> PushBody:
    """A job to enqueue, as `Client.enqueue_batch`, `create_batch` and `set_recurring` take them; `enqueue` takes
    the same options. Durations are seconds (a number or a `timedelta`), times RFC 3339 strings or `datetime`s.

    `schedule` is a Bedrock repeat or a cron expression (in `time_zone`, UTC by default); `retry` any part of a
    policy (`Retry(max_attempts=1)` or `{"max_attempts": 1}`). `debounce=(key, delay, max_wait)`: a push whose key
    a pending job holds lands in that job, which then runs `delay` after the latest push and no later than
    `max_wait` after the first. `throttle=(key, period)`: one job per key per period, whatever became of it. Both
    answer with the job they landed in (`existing`). `concurrency_key`: keyed jobs take turns by key, and at most
    the queue's limit per key run at once (`concurrency_limit`: this job's own limit instead). `depends_on` are
    jobs that must complete first; `parent` the running job creating this one (`children`: whose the children are,
    `run` or `job`); `batch` the batch it joins; `trace_parent` a W3C `traceparent`. The server checks every value
    and names a bad one; an option this client does not know raises `UnknownOption` before anything is sent."""
    refuse_unknown(options, PUSH_OPTIONS, "a push option", hints=_RETRY_HINTS)
    body: PushBody = {"name": name}
    if data is not None:
        body["data"] = data
    for option, value in options.items():
        if value is None:
            continue
        spec = PUSH_OPTIONS[option]
        encoded = spec.encode(value, option)
        if option == "tags" and not encoded:
            continue
        parent, _, member = spec.field.partition(".")
        if member:
            body.setdefault(parent, {})[member] = encoded
        else:
            body[parent] = encoded
    return body


class JobFilter(TypedDict, total=False):
    """Which jobs a listing or a bulk action is about, as `GET /v1/jobs` filters them; None leaves a filter out."""

    queue: Optional[str]
    state: Optional[str]
    # A GLOB: `email.*`.
    name: Optional[str]
    tag: Optional[str]
    failure_group: Optional[str]
    parent: Optional[int]
    batch: Optional[int]
    tracked: Optional[bool]


JOB_FILTERS = ("queue", "state", "name", "tag", "failure_group", "parent", "batch", "tracked")


def job_filter(filters: Mapping[str, Any]) -> Dict[str, Any]:
    """The filters given, refusing a name that is not one."""
    refuse_unknown(filters, JOB_FILTERS, "a job filter")
    return {k: v for k, v in filters.items() if v is not None}
