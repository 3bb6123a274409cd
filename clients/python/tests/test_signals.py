"""Signals, against a real server: a handler that waits for a signal gives up its slot (the job is `scheduled` and
shows the key as `awaits_signal`) until `signal` sends it, then completes with the data; a signal sent before the wait
is received at once, by one job only; a short wait times out and answers not received; a key only a cancelled job
waited for refuses a signal, naming the job; and a bad key or timeout is refused, naming the field."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Dict

import pytest

from cairn import (AsyncClient, Client, InvalidInput, InvalidState, Lease, LeaseLost, Signal, SignalSent, SignalWait,
                   Suspended, Worker)

from conftest import Server, eventually, run_until_ended


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_a_handler_waits_for_a_signal_without_holding_its_slot(server: Server, kind: str) -> None:
    """A step, a wait for "packed" with a long timeout, a result from the signal's data. While the job waits, it is
    scheduled with `awaits_signal`, and the worker's one slot runs another job; the signal makes it run again and
    complete, the charge's body having run once."""
    charged = {"n": 0}
    key = "order-1/packed"

    def charge() -> str:
        charged["n"] += 1
        return "ch_1"

    worker = Worker(server.url, f"py-signal-{kind}", max_concurrency=1, wait=1)
    if kind == "sync":

        @worker.handler("order.fulfil")
        def fulfil(job: Any) -> Dict[str, Any]:
            receipt = job.step("charge", charge)
            packed = job.wait_for_signal("packed", key, 3600)
            return {"receipt": receipt, "parcel": packed.data["parcel"]}

    else:

        @worker.handler("order.fulfil")
        async def fulfil_async(job: Any) -> Dict[str, Any]:
            receipt = await job.step("charge", charge)
            packed = await job.wait_for_signal("packed", key, 3600)
            return {"receipt": receipt, "parcel": packed.data["parcel"]}

    @worker.handler("other")
    def other(job: Any) -> str:
        return "ran meanwhile"

    async with AsyncClient(server.url) as client:
        id = (await client.enqueue("order.fulfil")).id
        stop = asyncio.Event()
        running = asyncio.create_task(worker.run_async(stop))
        try:

            async def waits() -> bool:
                job = await client.get(id)
                return job.state == "scheduled" and job.awaits_signal == key

            await eventually("the job waits for its signal", waits)
            [default] = [q for q in await client.queues() if q["queue"] == "default"]
            assert ((await client.get(id)).suspended_at is not None, default["suspended"]) == (True, 1)
            # The worker's only slot is free: another job runs while this one waits.
            other_id = (await client.enqueue("other")).id
            await eventually("the other job completed", lambda: _state_is(client, other_id, "completed"))
            assert (await client.get(id)).state == "scheduled"
            sent = await client.signal(key, {"parcel": "P-981"})
            assert sent == SignalSent(delivered=True, job=id)
            await eventually("the job completed", lambda: _state_is(client, id, "completed"))
        finally:
            stop.set()
        report = await running
        job = await client.get(id)
        events = [e.event for e in (await client.activity(job=id)).events]
    assert job.result == {"receipt": "ch_1", "parcel": "P-981"}
    assert (job.awaits_signal, job.suspended_at) == (None, None)
    assert charged["n"] == 1, "the charge's body ran once"
    assert (report.suspended, report.finished, report.retried, report.failed, report.lost) == (1, 2, 0, 0, 0), \
        "suspended once; finished: the order, and the other job that ran in its slot"
    assert [a.outcome for a in job.history] == ["suspended", "completed"]
    assert [(s.name, s.result) for s in job.steps] == [("charge", "ch_1"), ("packed", {"signal": {"parcel": "P-981"}})]
    assert "suspended" in events and "signal_received" in events


async def _state_is(client: AsyncClient, id: int, state: str) -> bool:
    return (await client.get(id)).state == state


async def test_a_signal_sent_before_the_wait_is_received_at_once_by_one_job(server: Server) -> None:
    """Sent with no data (JSON's null) before any job waits, the signal is kept. The first of two jobs waiting for
    the key receives it without suspending; the second waits, and its 0.3 s run out: received and timed out stay
    apart though the data is None either way."""
    key = "order-2/approved"
    worker = Worker(server.url, "py-signal-early", max_concurrency=1, wait=1)

    @worker.handler("approve")
    def approve(job: Any) -> Dict[str, Any]:
        got = job.wait_for_signal("approved", key, 0.3)
        assert isinstance(got, Signal)
        return {"received": got.received, "data": got.data}

    with Client(server.url) as client:
        assert client.signal(key) == SignalSent(delivered=False, job=None)
        first = client.enqueue("approve").id
        second = client.enqueue("approve").id
        report = await run_until_ended(server, worker, [first, second])
        a, b = client.get(first), client.get(second)
    assert (a.state, a.result) == ("completed", {"received": True, "data": None})
    assert [x.outcome for x in a.history] == ["completed"], "received at once, without suspending"
    assert (b.state, b.result) == ("completed", {"received": False, "data": None})
    assert [x.outcome for x in b.history] == ["suspended", "completed"]
    assert [s.result for s in b.steps] == [{"timed_out": True}]
    assert (report.suspended, report.finished) == (1, 2)


async def test_a_short_wait_times_out_and_a_later_signal_is_kept(server: Server) -> None:
    key = "order-3/packed"
    worker = Worker(server.url, "py-signal-timeout", wait=1)
    answers = []

    @worker.handler("patient")
    async def patient(job: Any) -> str:
        got = await job.wait_for_signal("packed", key, 0.3)
        answers.append(got)
        return "refunded" if not got.received else "shipped"

    async with AsyncClient(server.url) as client:
        id = (await client.enqueue("patient")).id
        report = await run_until_ended(server, worker, [id])
        job = await client.get(id)
        # Nobody waits any more: the signal is kept for a later wait.
        assert await client.signal(key, "late") == SignalSent(delivered=False)
    assert (job.state, job.result, job.awaits_signal) == ("completed", "refunded", None)
    assert answers == [Signal(received=False, data=None)]
    assert (report.suspended, report.finished) == (1, 1)


def test_a_signal_to_a_key_only_a_cancelled_job_waited_for_is_refused(server: Server) -> None:
    """Low level: the wait suspends and ends the lease; the job, cancelled, keeps its key, which refuses signals."""
    key = "order-4/packed"
    with Client(server.url) as client:
        id = client.enqueue("x").id
        [claimed] = client.dequeue("w1", names=["x"])
        waited = client.wait_for_signal(claimed.lease, "packed", key, 3600)
        assert isinstance(waited, SignalWait)
        assert (waited.suspended, waited.received, waited.timed_out) == (True, False, False)
        assert waited.until and waited.data is None
        job = client.get(id)
        assert (job.state, job.awaits_signal) == ("scheduled", key)
        with pytest.raises(LeaseLost):
            client.heartbeat(claimed.lease)
        client.cancel(id)
        with pytest.raises(InvalidState) as refused:
            client.signal(key, {"parcel": "P-1"})
    assert refused.value.kind == "invalid_state" and refused.value.status == 409
    assert refused.value.message == f'job {id} waited for signal "{key}" and was cancelled: the signal is refused, not kept'


def test_a_wait_answers_from_its_recorded_step_after_the_signal(server: Server) -> None:
    """Low level, the other way: the signal delivered to the waiting job is its step's result, which the job's next
    claim carries and a wait under the new lease answers with."""
    key = "order-5/packed"
    with Client(server.url) as client:
        id = client.enqueue("y").id
        [first] = client.dequeue("w1", names=["y"])
        assert client.wait_for_signal(first.lease, "packed", key, 3600).suspended
        assert client.signal(key, [1, 2]) == SignalSent(delivered=True, job=id)
        [second] = client.dequeue("w2", names=["y"])
        assert [(s.name, s.result) for s in second.job.steps] == [("packed", {"signal": [1, 2]})]
        again = client.wait_for_signal(second.lease, "packed", key, 3600)
        assert again == SignalWait(suspended=False, received=True, timed_out=False, until=None, data=[1, 2])


async def test_async_client_waits_and_signals(server: Server) -> None:
    async with AsyncClient(server.url) as client:
        await client.enqueue("z")
        [claimed] = await client.dequeue("w1", names=["z"])
        assert (await client.signal("k-z", "early")).delivered is False
        waited = await client.wait_for_signal(claimed.lease, "s", "k-z", 60)
        assert (waited.received, waited.data, waited.suspended) == (True, "early", False)
        # A zero timeout, with nothing kept, times out at once.
        timed_out = await client.wait_for_signal(claimed.lease, "t", "k-nothing", 0)
        assert (timed_out.timed_out, timed_out.received, timed_out.suspended) == (True, False, False)


def test_a_bad_key_or_timeout_is_refused_naming_the_field(server: Server) -> None:
    with Client(server.url) as client:
        client.enqueue("v")
        [claimed] = client.dequeue("w1", names=["v"])
        with pytest.raises(InvalidInput) as empty:
            client.wait_for_signal(claimed.lease, "packed", "", 60)
        with pytest.raises(InvalidInput) as empty_signal:
            client.signal("")
        # Refused by the server: the lease still stands.
        client.heartbeat(claimed.lease)
    assert (empty.value.field, empty_signal.value.field) == ("key", "key")
    assert "must not be empty" in empty.value.message and "must not be empty" in empty_signal.value.message
    # Nothing listens there: a request sent would be `Unavailable`, not refused by the client.
    with Client("http://127.0.0.1:9") as client:
        lease = Lease(job=1, token="t", worker="w", expires_at="2030-01-01T00:00:00Z")
        with pytest.raises(InvalidInput, match="^timeout: must not be negative") as negative:
            client.wait_for_signal(lease, "packed", "k", -1)
        with pytest.raises(InvalidInput, match=r"^timeout: must be at most ten years \(315360000 s\)") as long:
            client.wait_for_signal(lease, "packed", "k", 315_360_001)
    assert negative.value.field == long.value.field == "timeout"


async def test_a_handler_with_a_bad_key_fails_its_job_for_good(server: Server) -> None:
    worker = Worker(server.url, "py-signal-bad-key", wait=1)

    @worker.handler("bad")
    def bad(job: Any) -> None:
        job.wait_for_signal("packed", "a\nb", 60)

    with Client(server.url) as client:
        id = client.enqueue("bad").id
        report = await run_until_ended(server, worker, [id])
        job = client.get(id)
    assert (job.state, report.failed) == ("failed", 1)
    assert job.error is not None and 'step "packed": key: must not contain control characters' in job.error
    assert job.failure_group == "step"


def test_suspended_by_a_wait_names_the_key() -> None:
    error = Suspended("packed", "2030-01-01T00:00:00Z", "order-1/packed")
    assert (error.name, error.key) == ("packed", "order-1/packed")
    assert str(error) == 'step "packed": the job waits for a signal to "order-1/packed" until 2030-01-01T00:00:00Z'
    assert Suspended("nap", "2030-01-01T00:00:00Z").key is None
