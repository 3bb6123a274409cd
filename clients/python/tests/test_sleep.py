"""Sleeping without holding a worker, against a real server: a handler that sleeps gives up its slot (the worker
neither finishes, retries nor fails the job, and counts it suspended), the job runs again at its time and replays its
steps, and its history says suspended then completed; a sleep's name is numbered with the steps'; and the low-level
`sleep`, fenced by the lease, refuses neither or both of `seconds` and `until` before sending anything."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, Dict, List

import pytest

from cairn import AsyncClient, Client, InvalidInput, Lease, LeaseLost, Slept, Suspended, Worker, WorkerReport

from conftest import Server, eventually, run_until_ended




@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_a_handler_that_sleeps_frees_its_slot_and_finishes_later(server: Server, kind: str) -> None:
    """As the Rust client's test of the same name: a step, a sleep of 0.3 s, a step. The first run ends at the sleep
    with nothing reported; the second replays the first step, finds the sleep's time passed, and completes. Each
    step's body ran once, counted outside the queue."""
    ran: Dict[str, int] = {"before": 0, "after": 0}

    def count(step: str) -> Callable[[], int]:
        def body() -> int:
            ran[step] += 1
            return ran[step]

        return body

    worker = Worker(server.url, f"py-sleep-{kind}", wait=1)
    if kind == "sync":

        @worker.handler("wait-and-see")
        def wait_and_see(job: Any) -> None:
            job.step("before", count("before"))
            job.sleep("nap", 0.3)
            job.step("after", count("after"))

    else:

        @worker.handler("wait-and-see")
        async def wait_and_see_async(job: Any) -> None:
            await job.step("before", count("before"))
            await job.sleep("nap", timedelta(milliseconds=300))
            await job.step("after", count("after"))

    with Client(server.url) as client:
        id = client.enqueue("wait-and-see").id
        report = await run_until_ended(server, worker, [id])
        job = client.get(id)
        events = [e.event for e in client.activity(job=id).events]
    assert job.state == "completed", job.error
    assert (report.finished, report.suspended, report.retried, report.failed, report.lost) == (1, 1, 0, 0, 0)
    assert ran == {"before": 1, "after": 1}, "each step's body once"
    assert [a.outcome for a in job.history] == ["suspended", "completed"]
    assert [s.name for s in job.steps] == ["before", "nap", "after"]
    assert "suspended" in events


async def test_a_sleep_is_numbered_with_the_steps_and_a_past_time_does_not_suspend(server: Server) -> None:
    """`nap` as a step, then as a sleep: the sleep is `nap#2`. A sleep until a time gone by goes on at once. An
    `except Exception:` around a sleep does not catch `Suspended`."""
    caught: List[BaseException] = []
    worker = Worker(server.url, "py-sleep-names", wait=1)

    @worker.handler("named")
    def named(job: Any) -> str:
        job.step("nap", lambda: "a step")
        job.sleep_until("nap", datetime.now(timezone.utc) - timedelta(hours=1))  # nap#2: passed already
        try:
            job.sleep("nap", 0.2)  # nap#3
        except Exception as e:  # noqa: BLE001 - what this test shows does not happen
            caught.append(e)
        return "awake"

    with Client(server.url) as client:
        id = client.enqueue("named").id
        report = await run_until_ended(server, worker, [id])
        job = client.get(id)
    assert (job.state, job.result) == ("completed", "awake")
    assert [s.name for s in job.steps] == ["nap", "nap#2", "nap#3"]
    assert [a.outcome for a in job.history] == ["suspended", "completed"]
    assert (report.suspended, report.finished) == (1, 1)
    assert caught == []


def test_sleep_answers_whether_the_job_sleeps_and_is_fenced_by_the_lease(tmp_path: Path) -> None:
    server = Server(tmp_path)
    try:
        with Client(server.url) as client:
            id = client.enqueue("x").id
            [first] = client.dequeue("w1", names=["x"])
            slept = client.sleep(first.lease, "cool-off", seconds=3600)
            assert isinstance(slept, Slept) and slept.suspended and slept.until
            job = client.get(id)
            assert job.state == "scheduled"
            assert [(a.outcome, s.name) for a, s in zip(job.history, job.steps)] == [("suspended", "cool-off")]
            # The lease is over.
            with pytest.raises(LeaseLost):
                client.sleep(first.lease, "cool-off", seconds=3600)
            with pytest.raises(LeaseLost):
                client.heartbeat(first.lease)
            # Woken early, it sleeps again until the same time; a time gone by answers that it goes on.
            client.requeue(id)
            [second] = client.dequeue("w2", names=["x"])
            assert client.sleep(second.lease, "cool-off", seconds=3600) == slept
            client.requeue(id)
            [third] = client.dequeue("w3", names=["x"])
            gone = datetime.now(timezone.utc) - timedelta(seconds=1)
            assert client.sleep(third.lease, "later", until=gone) == Slept(suspended=False, until=None)
    finally:
        server.stop()


def test_sleep_takes_exactly_one_of_seconds_and_until_before_sending() -> None:
    # Nothing listens there: a request sent would be `Unavailable`, not refused by the client.
    with Client("http://127.0.0.1:9") as client:
        lease = Lease(job=1, token="t", worker="w", expires_at="2030-01-01T00:00:00Z")
        with pytest.raises(InvalidInput, match="exactly one of seconds and until, got neither") as neither:
            client.sleep(lease, "nap")
        with pytest.raises(InvalidInput, match="got both") as both:
            client.sleep(lease, "nap", seconds=1, until="2030-01-01T00:00:00Z")
        with pytest.raises(InvalidInput, match="seconds: must not be negative"):
            client.sleep(lease, "nap", seconds=-1)
        with pytest.raises(InvalidInput, match="until: a datetime must have a time zone"):
            client.sleep(lease, "nap", until=datetime(2030, 1, 1))
    assert neither.value.field == both.value.field == "seconds"


async def test_async_client_sleeps(server: Server) -> None:
    async with AsyncClient(server.url) as client:
        await client.enqueue("y")
        [claimed] = await client.dequeue("w1", names=["y"])
        until = datetime.now(timezone.utc) + timedelta(hours=1)
        slept = await client.sleep(claimed.lease, "s", until=until)
        assert slept.suspended and slept.until
        assert (await client.get(claimed.job.id)).state == "scheduled"
        with pytest.raises(InvalidInput):
            await client.sleep(claimed.lease, "s")


def test_suspended_is_not_an_exception_that_a_handler_catches_by_accident() -> None:
    error = Suspended("nap#2", "2030-01-01T00:00:00Z")
    assert not isinstance(error, Exception)
    assert (error.name, error.until, str(error)) == ("nap#2", "2030-01-01T00:00:00Z",
                                                      'step "nap#2": the job sleeps until 2030-01-01T00:00:00Z')

