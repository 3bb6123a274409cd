"""The client against the server's own description of its API (`GET /v1/openapi.json` from a real `cairn serve`):
every operation has a method, every member of a push an option, every property of an answer an attribute, and the
reverse, but for what `cairn._openapi` leaves out with its reason. The check is shown to fail when the client loses an
option, a field or a method, or has one the server does not."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any, Dict, Iterator, List, Set

import httpx
import pytest

import cairn
from cairn import AsyncClient, Client, JobFilter
from cairn import _openapi, _options

from conftest import Server

Document = Dict[str, Any]


@pytest.fixture(scope="module")
def document(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Document]:
    server = Server(tmp_path_factory.mktemp("openapi"))
    try:
        yield httpx.get(f"{server.url}/v1/openapi.json").json()
    finally:
        server.stop()


def schema(document: Document, name: str) -> Dict[str, Any]:
    found = document["components"]["schemas"][name]
    assert isinstance(found, dict)
    return found


def properties(document: Document, name: str) -> Set[str]:
    return set(schema(document, name).get("properties", {}))


def operations(document: Document) -> Dict[str, Dict[str, Any]]:
    return {
        op["operationId"]: op
        for path in document["paths"].values()
        for op in path.values()
        if isinstance(op, dict) and "operationId" in op
    }


def attributes(cls: type) -> Set[str]:
    """A data class's fields, or a TypedDict's keys; `raw` (the whole body) is no property."""
    if hasattr(cls, "__dataclass_fields__"):
        return set(cls.__dataclass_fields__) - {"raw"}
    return set(cls.__annotations__)


def left_out(schema_name: str) -> Set[str]:
    return set(_openapi.LEFT_OUT_FIELDS.get(schema_name, {}))


def public_methods(cls: type) -> Set[str]:
    return {name for name, _ in inspect.getmembers(cls, callable) if not name.startswith("_")} - {"close", "aclose"}


def push_differences(document: Document) -> List[str]:
    found = []
    sent = _openapi.push_fields()
    server = {p for p in properties(document, "PushRequest")} - left_out("PushRequest")
    for top, (nested, _) in _openapi.PUSH_OBJECTS.items():
        server |= {f"{top}.{p}" for p in properties(document, nested) - left_out(nested)}
    for field in sorted(server - set(sent)):
        found.append(f"the push request's {field}: no option of push sends it")
    for field in sorted(set(sent) - server):
        found.append(f"push's {sent[field]}: sends {field}, which the server's push request does not have")
    retry_keys = set(_options.RetryPolicy.__annotations__)
    if retry_keys != set(_options.RETRY_MEMBERS.values()):
        found.append(f"RetryPolicy's keys {sorted(retry_keys)} are not a retry policy's members")
    return found


def answer_differences(document: Document) -> List[str]:
    found = []
    for name, cls in _openapi.ANSWERS.items():
        server, client = properties(document, name) - left_out(name), attributes(cls)
        for field in sorted(server - client):
            found.append(f"{name}.{field}: {cls.__name__} has no attribute for it")
        for field in sorted(client - server):
            found.append(f"{cls.__name__}.{field}: {name} has no such property")
    return found


def operation_differences(document: Document) -> List[str]:
    found = []
    ops = operations(document)
    made = set(_openapi.METHODS.values())
    for op in sorted(set(ops) - made - set(_openapi.LEFT_OUT_OPERATIONS)):
        found.append(f"operation {op}: no method makes it, and it is not left out with a reason")
    for method, op in sorted(_openapi.METHODS.items()):
        if op not in ops:
            found.append(f"method {method}: makes {op}, which the server does not have")
    for op in sorted(set(_openapi.LEFT_OUT_OPERATIONS) - set(ops)):
        found.append(f"operation {op} is left out, but the server does not have it")
    for cls in (Client, AsyncClient):
        for method in sorted(public_methods(cls) ^ set(_openapi.METHODS)):
            where = "is not in _openapi.METHODS" if method in public_methods(cls) else "is missing"
            found.append(f"{cls.__name__}.{method} {where}")
    for op, keywords in _openapi.QUERIES.items():
        declared = {p["name"] for p in ops[op].get("parameters", []) if p["in"] == "query"}
        for param in sorted(declared ^ set(keywords)):
            found.append(f"operation {op}'s query parameter {param}: the client and the server differ")
        for method in (m for m, o in _openapi.METHODS.items() if o == op and m not in ("iter_jobs",)):
            accepted = set(inspect.signature(getattr(Client, method)).parameters) | set(JobFilter.__annotations__)
            for keyword in sorted(set(keywords.values()) - accepted):
                found.append(f"Client.{method} takes no {keyword}")
    return found


def differences(document: Document) -> List[str]:
    return push_differences(document) + answer_differences(document) + operation_differences(document)


def test_the_client_covers_the_servers_document_and_nothing_more(document: Document) -> None:
    assert differences(document) == []


def test_the_check_names_an_option_a_field_or_a_method_lost_or_invented(
    document: Document, monkeypatch: pytest.MonkeyPatch
) -> None:
    options = dict(_options.PUSH_OPTIONS)
    del options["time_zone"]
    options["priority_class"] = _options.Option("priority_class", lambda v, f: v)
    monkeypatch.setattr(_openapi, "PUSH_OPTIONS", options)
    retry = {k: v for k, v in _options.RETRY_MEMBERS.items() if k != "jitter"}
    monkeypatch.setitem(_openapi.PUSH_OBJECTS, "retry", ("RetryPolicyBody", retry))
    monkeypatch.setitem(_openapi.ANSWERS, "JobBody", cairn.Attempt)
    methods = dict(_openapi.METHODS)
    del methods["peek"]
    methods["purge"] = "purge_queue"
    monkeypatch.setattr(_openapi, "METHODS", methods)
    found = "\n".join(differences(document))
    assert "the push request's time_zone: no option of push sends it" in found
    assert "push's priority_class: sends priority_class, which the server's push request does not have" in found
    assert "the push request's retry.jitter: no option of push sends it" in found
    assert "JobBody.failure_group: Attempt has no attribute for it" in found
    assert "operation peek: no method makes it" in found
    assert "method purge: makes purge_queue, which the server does not have" in found
    assert "Client.peek is not in _openapi.METHODS" in found


def test_both_clients_have_each_method_with_the_same_parameters() -> None:
    for name in _openapi.METHODS:
        blocking, awaited = getattr(Client, name), getattr(AsyncClient, name)
        assert inspect.signature(blocking).parameters.keys() == inspect.signature(awaited).parameters.keys(), name
        # Each AsyncClient method is awaited, or iterated with `async for` (events, iter_jobs).
        assert inspect.iscoroutinefunction(awaited) or name in ("events", "iter_jobs"), name


def test_unknown_push_options_are_refused_before_anything_is_sent() -> None:
    # No server: nothing may be sent, so nothing needs one.
    with Client("http://127.0.0.1:9") as client:
        with pytest.raises(cairn.UnknownOption) as refused:
            client.enqueue("report", {}, schedule="0 4 * * *", time_zon="Europe/Berlin")  # type: ignore[call-arg]
    error = refused.value
    assert isinstance(error, TypeError) and isinstance(error, cairn.InvalidInput)
    assert error.field == "time_zon"
    assert str(error).startswith("time_zon: is not a push option (did you mean time_zone?); the names it takes are ")
    assert "batch, children, concurrency_key" in str(error) and "trace_parent, unique_key, weight" in str(error)
    with pytest.raises(cairn.UnknownOption, match=r"^maxAttempts: is not a push option \(it belongs in retry=Retry\(max_attempts=…\)\); the names it takes are "):
        cairn.push("x", maxAttempts=3)  # type: ignore[call-arg]
    with pytest.raises(cairn.UnknownOption, match=r"^retry\.max_attempt: is not a member of a retry policy \(did "
                                                  r"you mean max_attempts\?\); the names it takes are initial_delay_ms, "):
        cairn.push("x", retry={"max_attempt": 1})  # type: ignore[typeddict-unknown-key]
    with pytest.raises(cairn.UnknownOption, match=r"^states: is not a job filter \(did you mean state\?\)"):
        client.list_jobs(states="failed")  # type: ignore[call-arg]


def test_push_sends_each_option_as_the_server_names_it() -> None:
    from datetime import datetime, timedelta, timezone

    body = cairn.push(
        "report", {"n": 1}, queue="q", priority=3, delay=timedelta(seconds=1.5), run_at=datetime(2030, 1, 2, tzinfo=timezone.utc),
        unique_key="u", tags=["a"], retry=cairn.Retry(max_attempts=1, initial_delay=2), lease_timeout=30, timeout=60,
        weight=2, schedule="0 4 * * *", time_zone="Europe/Berlin", debounce=("d", 1, 2),
        throttle=cairn.Throttle("t", 60, states=["queued"]), concurrency_key="c", concurrency_limit=1, depends_on=(1, 2),
        parent=7, trace_parent="00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", batch=9, children="job",
    )
    assert body == {
        "name": "report", "data": {"n": 1}, "queue": "q", "priority": 3, "delay_ms": 1500,
        "run_at": "2030-01-02T00:00:00+00:00", "unique_key": "u", "tags": ["a"],
        "retry": {"max_attempts": 1, "initial_delay_ms": 2000}, "lease_timeout_ms": 30000, "timeout_ms": 60000,
        "weight": 2, "schedule": "0 4 * * *", "time_zone": "Europe/Berlin",
        "debounce": {"key": "d", "delay_ms": 1000, "max_wait_ms": 2000},
        "throttle": {"key": "t", "period_ms": 60000, "states": ["queued"]},
        "concurrency": {"key": "c", "limit": 1}, "depends_on": [1, 2], "parent": 7,
        "trace_parent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "batch": 9, "children": "job",
    }
    assert cairn.push("x", retry={"max_attempts": 1}, tags=[], priority=None) == {"name": "x", "retry": {"max_attempts": 1}}
    with pytest.raises(cairn.InvalidInput, match=r"^run_at: a datetime must have a time zone"):
        cairn.push("x", run_at=datetime(2030, 1, 2))
    with pytest.raises(cairn.InvalidInput, match=r"^debounce: must be a Debounce or \(key, delay, max_wait\), got \('k', 1\)$"):
        cairn.push("x", debounce=("k", 1))  # type: ignore[typeddict-item]


def test_the_readme_and_this_test_name_the_same_path() -> None:
    # The parity check lives here; the README says so, and points at the one place that lists what is left out.
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    assert "src/cairn/_openapi.py" in readme
