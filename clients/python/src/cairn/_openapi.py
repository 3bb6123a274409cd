"""How this client covers the server's OpenAPI document (`GET /v1/openapi.json`), in one place: the method that makes
each operation, the class that reads each answer, the options that send each member of a push, and what is left out,
each with why. `tests/test_parity.py` holds the client to it against a real server's document, both ways: what the
server has that the client lacks, and what the client has that the server does not."""

from __future__ import annotations

from typing import Dict, Mapping, Tuple

from ._options import DEBOUNCE_MEMBERS, JOB_FILTERS, PUSH_OPTIONS, RETRY_MEMBERS, THROTTLE_MEMBERS
from ._types import (ActivityPage, Attempt, Batch, BatchCallback, BatchCreated, BatchPage, BulkResult, Enqueued, Event,
                     FailureGroup, Job, JobPage, Joined, JoinedChild, Lease, QueueStats, Recurring, SignalSent,
                     SignalWait, Slept, Spawned, Step, Token, WorkerInfo)

# Each public method of `Client` (and `AsyncClient`, which has the same), and the operation it makes.
METHODS: Dict[str, str] = {
    "health": "health",
    "token": "token",
    "enqueue": "enqueue",
    "enqueue_batch": "enqueue_batch",
    "get": "get_job",
    "wait": "get_job",
    "list_jobs": "list_jobs",
    "iter_jobs": "list_jobs",
    "bulk": "bulk",
    "cancel": "cancel",
    "delete": "delete",
    "requeue": "requeue",
    "set_priority": "set_priority",
    "reschedule": "reschedule",
    "move": "move_job",
    "set_data": "set_data",
    "change_tags": "change_tags",
    "change_dependencies": "change_dependencies",
    "track": "track",
    "untrack": "untrack",
    "create_batch": "create_batch",
    "add_to_batch": "add_to_batch",
    "close_batch": "close_batch",
    "get_batch": "get_batch",
    "list_batches": "list_batches",
    "queues": "list_queues",
    "pause_queue": "pause",
    "resume_queue": "resume",
    "peek": "peek",
    "limit_queue": "set_concurrency",
    "limit_keys": "set_key_concurrency",
    "weigh_key": "set_key_weight",
    "rate_limit_queue": "set_rate",
    "age_queue": "set_aging",
    "failure_groups": "list_failures",
    "unfail": "unfail",
    "workers": "list_workers",
    "worker_stopped": "stop_worker",
    "activity": "activity",
    "events": "events",
    "set_recurring": "set_recurring",
    "get_recurring": "get_recurring",
    "list_recurring": "list_recurring",
    "pause_recurring": "pause_recurring",
    "resume_recurring": "resume_recurring",
    "run_recurring": "run_recurring",
    "remove_recurring": "remove_recurring",
    "dequeue": "dequeue",
    "heartbeat": "heartbeat",
    "update": "update",
    "checkpoint": "checkpoint",
    "record_step": "record_step",
    "sleep": "sleep",
    "wait_for_signal": "wait_for_signal",
    "signal": "send_signal",
    "spawn": "spawn",
    "join": "join",
    "finish": "finish",
    "finish_many": "finish_many",
    "finish_and_take": "finish_many",
    "retry": "retry",
    "fail": "fail",
    "release": "release",
}

# Operations no method makes, and why.
LEFT_OUT_OPERATIONS: Dict[str, str] = {
    "sql": "one read-only SQL statement, for people at `cairn sql` and the dashboard; a program reads jobs through "
    "list_jobs and get, whose answers keep their shape when the tables change",
    "metrics": "Prometheus's text format, for Prometheus to scrape rather than a client to read",
    "stats": "the dashboard's and `cairn stats`'s time series, drawn for people",
    "worker_stats": "the dashboard's and `cairn stats`'s time series, drawn for people",
    "list_config": "the server's options at run time are its operator's (`cairn config`), not an application's",
    "get_config": "the server's options at run time are its operator's (`cairn config`), not an application's",
    "set_config": "the server's options at run time are its operator's (`cairn config`), not an application's",
    "unset_config": "the server's options at run time are its operator's (`cairn config`), not an application's",
}

# The class (or TypedDict) that reads each answer: its attributes are the schema's properties, by name.
ANSWERS: Dict[str, type] = {
    "JobBody": Job,
    "AttemptBody": Attempt,
    "StepBody": Step,
    "SleptBody": Slept,
    "SignalWaitBody": SignalWait,
    "SignalSentBody": SignalSent,
    "SpawnedBody": Spawned,
    "JoinedBody": Joined,
    "JoinedChildBody": JoinedChild,
    "JobPageBody": JobPage,
    "EnqueuedBody": Enqueued,
    "LeaseBody": Lease,
    "BulkBody": BulkResult,
    "BatchBody": Batch,
    "BatchCallbackBody": BatchCallback,
    "BatchCreatedBody": BatchCreated,
    "BatchListBody": BatchPage,
    "RecurringBody": Recurring,
    "WorkerBody": WorkerInfo,
    "FailureGroupBody": FailureGroup,
    "TokenBody": Token,
    "ActivityEventBody": Event,
    "ActivityPageBody": ActivityPage,
    "QueueStatsBody": QueueStats,
}

# Properties of those schemas, or of the push request, that the client leaves out, and why (none, for now).
LEFT_OUT_FIELDS: Dict[str, Dict[str, str]] = {}

# `push`'s positional arguments, besides its options (`PUSH_OPTIONS`).
PUSH_ARGUMENTS = {"name": "name", "data": "data"}

# A push option that is an object of the server's: its schema, and its members, the client's name to the server's.
PUSH_OBJECTS: Dict[str, Tuple[str, Mapping[str, str]]] = {
    "retry": ("RetryPolicyBody", RETRY_MEMBERS),
    "debounce": ("DebounceBody", DEBOUNCE_MEMBERS),
    "throttle": ("ThrottleBody", THROTTLE_MEMBERS),
    "concurrency": (
        "ConcurrencyBody",
        {name: spec.field.split(".", 1)[1] for name, spec in PUSH_OPTIONS.items() if spec.field.startswith("concurrency.")},
    ),
}

# Query parameters of the operations whose methods take them by name: each method's keyword, by the server's name.
QUERIES: Dict[str, Mapping[str, str]] = {
    "list_jobs": {**{f: f for f in JOB_FILTERS}, "before": "before", "limit": "limit"},
    "events": {"queue": "queue", "name": "name", "job": "job", "kinds": "kinds", "after": "after"},
    "activity": {p: p for p in ("before", "limit", "job", "queue", "worker", "since", "until")},
    "list_batches": {"state": "state", "before": "before", "limit": "limit"},
}


def push_fields() -> Dict[str, str]:
    """Each member of the push body the client can send (`debounce.delay_ms`: a member of an object), and the
    option (or argument) that sends it."""
    fields = dict(PUSH_ARGUMENTS)
    for option, spec in PUSH_OPTIONS.items():
        top = spec.field.split(".", 1)[0]
        fields.setdefault(top, option)
    for top, (_, members) in PUSH_OBJECTS.items():
        for client, server in members.items():
            fields[f"{top}.{server}"] = f"{top}.{client}" if top in PUSH_OPTIONS else client
    return fields
