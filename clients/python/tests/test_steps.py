"""Steps inside a handler against a real server: recorded once under the lease, read back by every later attempt and
never run again, numbered when a name is used again; a failing step records nothing and its error names it; a `#` in
a name fails the job, and so does a result the server refuses to record; and the low-level `record_step`, fenced by
the lease, keeping its first result."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from cairn import AsyncClient, Client, FailJob, LeaseLost, Retry, RetryLater, Step, Worker

from conftest import Server, eventually, run_until_ended

# Every attempt at once after the last: the tests need not wait for a backoff.
IMMEDIATE = Retry(max_attempts=3, initial_delay=0)




@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_a_recorded_step_is_read_back_by_later_attempts_and_never_run_again(server: Server, kind: str) -> None:
    """As the Rust client's test of the same name: the first attempt charges and then fails; the second reads the
    charge back without charging again, pages through a loop whose turns are steps of their own, and completes. Each
    body ran once, counted outside the queue."""
    counts = {"charges": 0, "pages": 0}

    def charge() -> int:
        counts["charges"] += 1
        return 99 + counts["charges"]

    def page() -> int:
        counts["pages"] += 1
        return counts["pages"] - 1

    worker = Worker(server.url, f"py-steps-{kind}", wait=1)
    if kind == "sync":

        @worker.handler("order")
        def order(job: Any) -> Any:
            receipt = job.step("charge", charge)
            if job.attempt == 1:
                raise RetryLater("the warehouse did not answer")
            pages = [job.step("page", page) for _ in range(3)]
            return {"receipt": receipt, "pages": pages}

    else:

        async def charge_later() -> int:
            await asyncio.sleep(0)
            return charge()

        @worker.handler("order")
        async def order_async(job: Any) -> Any:
            receipt = await job.step("charge", charge_later)  # an async body
            if job.attempt == 1:
                raise RetryLater("the warehouse did not answer")
            pages = [await job.step("page", page) for _ in range(3)]  # a plain one
            return {"receipt": receipt, "pages": pages}

    with Client(server.url) as client:
        id = client.enqueue("order", retry=IMMEDIATE).id
        await run_until_ended(server, worker, [id])
        job = client.get(id)
    assert job.state == "completed", job.error
    assert counts == {"charges": 1, "pages": 3}, "each body ran once"
    assert job.result == {"receipt": 100, "pages": [0, 1, 2]}
    assert [(s.name, s.result, s.attempt) for s in job.steps] == [
        ("charge", 100, 1),
        ("page", 0, 2),
        ("page#2", 1, 2),
        ("page#3", 2, 2),
    ]
    assert all(isinstance(s, Step) and s.recorded_at for s in job.steps)
    assert job.step_count == 4
    # The failed attempt's error names no step: it came after the step.
    assert job.history[0].error == "the warehouse did not answer"


async def test_a_failing_step_records_nothing_and_its_error_names_the_step(server: Server) -> None:
    worker = Worker(server.url, "py-steps-fail", wait=1)

    @worker.handler("flaky")
    def flaky(job: Any) -> None:
        def call() -> str:
            if job.attempt == 1:
                raise RetryLater("timed out")
            return "answered"

        job.step("call", call)

    @worker.handler("crash")
    async def crash(job: Any) -> None:
        async def call() -> str:
            if job.attempt == 1:
                raise ValueError("boom")
            return "answered"

        await job.step("call", call)

    @worker.handler("refuse")
    def refuse(job: Any) -> None:
        def check() -> None:
            raise FailJob("bad-input", "no such card")

        job.step("check", check)

    with Client(server.url) as client:
        ids = [client.enqueue(n, retry=IMMEDIATE).id for n in ("flaky", "crash", "refuse")]
        await run_until_ended(server, worker, ids)
        flaky_job, crash_job, refused = [client.get(i) for i in ids]
    for job in (flaky_job, crash_job):
        assert job.state == "completed", job.error
        assert [(s.name, s.result, s.attempt) for s in job.steps] == [("call", "answered", 2)]
    assert flaky_job.history[0].error == 'step "call": timed out'
    assert crash_job.history[0].error == 'step "call": ValueError: boom'
    # A FailJob stays one: the job fails for good in its group, the message naming the step.
    assert (refused.state, refused.failure_group) == ("failed", "bad-input")
    assert refused.error == 'step "check": no such card'
    assert (refused.step_count, refused.steps, len(refused.history)) == (0, [], 1)


async def test_a_step_name_holding_a_hash_fails_the_job_in_group_step(server: Server) -> None:
    ran = []
    worker = Worker(server.url, "py-steps-hash", wait=1)

    @worker.handler("hashed")
    async def hashed(job: Any) -> None:
        await job.step("page#2", lambda: ran.append(1))

    with Client(server.url) as client:
        id = client.enqueue("hashed", retry=IMMEDIATE).id
        await run_until_ended(server, worker, [id])
        job = client.get(id)
    assert (job.state, job.failure_group, len(job.history)) == ("failed", "step", 1)
    assert job.error == """step "page#2": a step's name must not hold '#', which numbers a name used again"""
    assert ran == [], "the body did not run"


async def test_a_step_whose_result_is_refused_fails_the_job_and_its_body_runs_once(server: Server) -> None:
    """As the Rust client's test of the same name: a result the server refuses (2 MiB, over its 1 MiB default) fails
    the job for good, naming the step, since a retry would run the body again only to be refused again. The body's
    runs are counted outside the queue."""
    ran = []
    worker = Worker(server.url, "py-steps-refused", wait=1)

    @worker.handler("big")
    async def big(job: Any) -> None:
        def export() -> str:
            ran.append(1)
            return "x" * (2 * 1024 * 1024)

        await job.step("export", export)

    with Client(server.url) as client:
        id = client.enqueue("big", retry=IMMEDIATE).id
        await run_until_ended(server, worker, [id])
        job = client.get(id)
    assert len(ran) == 1, "the body ran once"
    assert (job.state, job.failure_group, len(job.history)) == ("failed", "step", 1), job.error
    assert job.error is not None and job.error.startswith('step "export": '), job.error
    assert (job.step_count, job.steps) == (0, [])


async def test_a_step_recorded_before_keeps_its_result_which_step_returns(server: Server) -> None:
    """The server's answer stands over what the body just produced (as when a request was sent again after its
    answer was lost)."""
    worker = Worker(server.url, "py-steps-first", wait=1)

    @worker.handler("twice")
    def twice(job: Any) -> Any:
        with Client(server.url) as other:
            other.record_step(job.lease, "fetch", {"v": 1})
        return job.step("fetch", lambda: {"v": 2})

    with Client(server.url) as client:
        id = client.enqueue("twice").id
        await run_until_ended(server, worker, [id])
        job = client.get(id)
    assert (job.state, job.result) == ("completed", {"v": 1})
    assert [(s.name, s.result) for s in job.steps] == [("fetch", {"v": 1})]


def test_record_step_keeps_the_first_result_and_is_fenced_by_the_lease(tmp_path: Path) -> None:
    server = Server(tmp_path)
    try:
        with Client(server.url) as client:
            id = client.enqueue("x", retry=IMMEDIATE).id
            [first] = client.dequeue("w1", names=["x"])
            assert (first.job.steps, first.job.step_count) == ([], 0)
            charge = client.record_step(first.lease, "charge", {"id": "ch_1"})
            assert (charge.name, charge.result, charge.attempt) == ("charge", {"id": "ch_1"}, 1)
            # Sent again with another result: the first stands.
            assert client.record_step(first.lease, "charge", {"id": "ch_2"}) == charge
            client.retry(first.lease, "again")
            with pytest.raises(LeaseLost):
                client.record_step(first.lease, "late", 1)
            # The next claim carries the steps; a listing counts them.
            [second] = client.dequeue("w2", names=["x"])
            assert (second.job.steps, second.job.step_count) == ([charge], 1)
            [listed] = client.list_jobs().jobs
            assert (listed.step_count, listed.steps) == (1, [])
            recorded = [e for e in client.activity(job=id).events if e.event == "step_recorded"]
            assert len(recorded) == 1 and "charge" in (recorded[0].detail or "")
    finally:
        server.stop()


async def test_async_client_records_a_step(server: Server) -> None:
    async with AsyncClient(server.url) as client:
        await client.enqueue("y")
        [claimed] = await client.dequeue("w1", names=["y"])
        step = await client.record_step(claimed.lease, "s", [1, 2])
        assert (step.name, step.result, step.attempt) == ("s", [1, 2], 1)
        assert (await client.get(claimed.job.id)).steps == [step]
