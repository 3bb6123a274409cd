"""The client against a real server: each call's effect, and errors that name the field and the rule."""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import timedelta

import pytest

import cairn
from cairn import AsyncClient, Client, Finish, push

from conftest import Server


def test_a_job_goes_in_and_reads_back(server):
    with Client(server.url) as client:
        assert client.health()["status"] == "ok"
        job = client.enqueue("email.send", {"to": "a@example.com"}, queue="mail", priority=5, tags=["welcome"])
        assert (job.state, job.existing) == ("queued", False)
        read = client.get(job.id)
        assert (read.id, read.queue, read.name, read.state) == (job.id, "mail", "email.send", "queued")
        assert read.data == {"to": "a@example.com"}
        assert read.priority == 5
        assert read.raw["tags"] == ["welcome"]
        assert {"queue": "mail"}.items() <= client.queues()[0].items()


def test_a_unique_key_returns_the_live_job_instead_of_a_second(server):
    with Client(server.url) as client:
        first = client.enqueue("report", unique_key="daily")
        again = client.enqueue("report", unique_key="daily")
        assert again.id == first.id and again.existing


def test_debounced_and_throttled_pushes_land_in_one_job(server):
    with Client(server.url) as client:
        first = client.enqueue("reindex", {"n": 1}, debounce=("customer:42", 30, 300))
        again = client.enqueue("reindex", {"n": 2}, debounce=("customer:42", 30, 300))
        assert (again.id, again.existing, first.existing) == (first.id, True, False)
        job = client.get(first.id)
        assert job.data == {"n": 2}
        assert job.raw["debounce_key"] == "customer:42"
        welcome = client.enqueue("welcome", throttle=("welcome:ada", 86400))
        assert client.enqueue("welcome", throttle=("welcome:ada", 86400)).id == welcome.id
        with pytest.raises(cairn.InvalidInput) as refused:
            client.enqueue("x", debounce=("k", 600, 60))
        assert refused.value.field == "debounce.delay_ms"


def test_a_concurrency_key_limits_its_jobs_and_shows_on_them(server):
    with Client(server.url) as client:
        for n in range(3):
            client.enqueue("report", {"n": n}, queue="reports", concurrency_key="customer:42", concurrency_limit=2)
        taken = client.dequeue("w", queues=["reports"], limit=10)
        assert len(taken) == 2
        assert {c.job.raw["concurrency_key"] for c in taken} == {"customer:42"}
        assert taken[0].job.raw["concurrency_limit"] == 2
        with pytest.raises(cairn.InvalidInput) as refused:
            client.enqueue("x", concurrency_key="k", concurrency_limit=0)
        assert refused.value.field == "concurrency.limit"


def test_a_batch_goes_in_whole_or_not_at_all(server):
    with Client(server.url) as client:
        done = client.enqueue_batch([push("a", {"n": 1}), push("b", delay=60)])
        assert [e.state for e in done] == ["queued", "scheduled"]
        with pytest.raises(cairn.InvalidInput) as refused:
            client.enqueue_batch([push("ok"), push("")])
        assert refused.value.field == "jobs[1].name"
        assert refused.value.status == 400
        assert len(client.dequeue("w", limit=10)) == 1, "the refused batch added nothing"


def test_a_worker_takes_heartbeats_and_finishes(server):
    with Client(server.url) as client:
        pushed = client.enqueue("resize", {"w": 100})
        [claimed] = client.dequeue("w1", names=["resize"], limit=5)
        assert claimed.job.id == pushed.id and claimed.job.state == "running"
        assert claimed.lease.worker == "w1" and isinstance(claimed.lease.token, str)
        assert client.heartbeat(claimed.lease, progress={"done": 0.5})
        client.finish(claimed.lease, {"w": 100, "ok": True})
        done = client.get(pushed.id)
        assert (done.state, done.data) == ("completed", {"w": 100, "ok": True})


def test_a_stale_lease_is_refused_as_lease_lost(server):
    with Client(server.url) as client:
        pushed = client.enqueue("x")
        [claimed] = client.dequeue("w")
        client.cancel(pushed.id)
        with pytest.raises(cairn.LeaseLost) as lost:
            client.finish(claimed.lease)
        assert lost.value.kind == "lease_lost" and lost.value.status == 409
        with pytest.raises(cairn.NotFound):
            client.get(999_999)


def test_retry_fail_and_release_report_what_became_of_the_job(server):
    with Client(server.url) as client:
        policy = {"max_attempts": 2, "initial_delay_ms": 30_000, "multiplier": 2.0, "max_delay_ms": 60_000, "jitter": 0}
        ids = [client.enqueue("job", retry=policy).id for _ in range(3)]
        first, second, third = client.dequeue("w", limit=3)
        assert client.retry(first.lease, "flaky", delay=timedelta(seconds=30)) == "scheduled"
        client.fail(second.lease, "bad-input", "cannot parse")
        client.release(third.lease)
        assert [client.get(i).state for i in ids] == ["scheduled", "failed", "queued"]
        assert client.get(ids[1]).error == "cannot parse"


def test_finish_many_answers_each_job_and_finish_and_take_brings_the_next(server):
    with Client(server.url) as client:
        ids = [client.enqueue("n", {"i": i}).id for i in range(4)]
        first, second = client.dequeue("w", limit=2)
        stale = cairn.Lease(job=second.lease.job, token="12345", worker="w", expires_at="")
        errors = client.finish_many([(first.lease, {"r": 1}), stale])
        assert errors[0] is None and isinstance(errors[1], cairn.LeaseLost)
        answer = client.finish_and_take([second.lease], "w", limit=5)
        assert answer.errors == [None] and answer.take_error is None
        assert sorted(c.job.id for c in answer.taken) == ids[2:]
        assert [client.get(i).state for i in ids] == ["completed", "completed", "running", "running"]


def test_a_finish_keeps_its_result_apart_from_the_data(server):
    with Client(server.url) as client:
        ids = [client.enqueue("render", {"n": i}).id for i in range(4)]
        claimed = {c.job.id: c.lease for c in client.dequeue("w", limit=4)}
        client.finish(claimed[ids[0]], result={"pages": 12})
        client.finish(claimed[ids[1]], {"n": "replaced"}, result={"pages": 3})
        assert client.finish_many([Finish(claimed[ids[2]], result=["many"])]) == [None]
        answer = client.finish_and_take([Finish(claimed[ids[3]], data={"n": "new"}, result="took")], "w")
        assert answer.errors == [None] and answer.taken == []
        jobs = [client.get(i) for i in ids]
        assert [(j.state, j.data, j.result) for j in jobs] == [
            ("completed", {"n": 0}, {"pages": 12}),
            ("completed", {"n": "replaced"}, {"pages": 3}),
            ("completed", {"n": 2}, ["many"]),
            ("completed", {"n": "new"}, "took"),
        ]
        assert jobs[0].raw["history"][-1]["result"] == {"pages": 12}, "the attempt keeps its own"


def test_wait_answers_the_moment_another_request_finishes_the_job(server):
    with Client(server.url) as client:
        pushed = client.enqueue("render", {"n": 1})
        [claimed] = client.dequeue("w")
        waited = {}

        def wait() -> None:
            with Client(server.url) as waiter:
                waited["job"] = waiter.wait(pushed.id, 30)
                waited["at"] = time.monotonic()

        waiting = threading.Thread(target=wait)
        waiting.start()
        time.sleep(0.5)
        assert waiting.is_alive(), "the wait holds while the job runs"
        finished_at = time.monotonic()
        client.finish(claimed.lease, result={"pages": 12})
        waiting.join(20)
        assert not waiting.is_alive()
        job = waited["job"]
        assert (job.id, job.state, job.result, job.data) == (pushed.id, "completed", {"pages": 12}, {"n": 1})
        assert waited["at"] - finished_at < 5, "it answered when the job ended, not at its timeout"


def test_a_wait_on_a_job_that_stays_queued_returns_it_at_the_timeout(server):
    with Client(server.url) as client:
        pushed = client.enqueue("later")
        started = time.monotonic()
        job = client.wait(pushed.id, timedelta(seconds=1))
        elapsed = time.monotonic() - started
        assert (job.id, job.state, job.result) == (pushed.id, "queued", None)
        assert 0.9 <= elapsed < 5, elapsed
        with pytest.raises(cairn.NotFound):
            client.wait(999_999, 1)
        with pytest.raises(cairn.InvalidInput) as refused:
            client.wait(pushed.id, -1)
        assert refused.value.field == "timeout"


def test_a_wait_longer_than_the_servers_cap_asks_again(tmp_path):
    capped = Server(tmp_path, flags=["--max-wait", "1s"])
    try:
        with Client(capped.url) as client:
            pushed = client.enqueue("later")
            started = time.monotonic()
            assert client.wait(pushed.id, 2.5).state == "queued"
            elapsed = time.monotonic() - started
            assert 2.4 <= elapsed < 10, f"three requests of at most 1 s each, not one: {elapsed}"
            [claimed] = client.dequeue("w")

            def finish() -> None:
                with Client(capped.url) as other:
                    other.finish(claimed.lease, result="late")

            threading.Timer(1.5, finish).start()
            started = time.monotonic()
            job = client.wait(pushed.id, 30)
            assert (job.state, job.result) == ("completed", "late")
            assert time.monotonic() - started < 10
    finally:
        capped.stop()


def test_a_long_poll_returns_when_a_job_arrives(server):
    with Client(server.url) as client:
        threading.Timer(0.3, lambda: Client(server.url).enqueue("late")).start()
        started = time.monotonic()
        [claimed] = client.dequeue("w", wait=10)
        assert claimed.job.name == "late"
        assert time.monotonic() - started < 9, "it answered when the job came, not when the wait ran out"
        assert client.dequeue("w", wait=0.2) == []


def test_bad_input_names_the_field_and_the_rule(server):
    with Client(server.url) as client:
        with pytest.raises(cairn.InvalidInput) as refused:
            client.enqueue("x", priority=10**12)
        assert refused.value.field == "priority"
        with pytest.raises(cairn.InvalidInput) as refused:
            client.dequeue("w", limit=0)
        assert refused.value.field == "limit" and "limit" in refused.value.message
        with pytest.raises(cairn.InvalidInput) as refused:
            client.enqueue("x", delay=-1)
        assert refused.value.field == "delay"


def test_a_token_is_sent_and_a_missing_one_refused(guarded_server):
    with Client(guarded_server.url) as anonymous:
        with pytest.raises(cairn.Unauthorized):
            anonymous.enqueue("x")
    with Client(guarded_server.url, token="s3cret-token-of-16+") as client:
        assert client.enqueue("x").state == "queued"


async def test_the_async_client_sends_its_token_too(guarded_server):
    async with AsyncClient(guarded_server.url) as anonymous:
        with pytest.raises(cairn.Unauthorized):
            await anonymous.enqueue("x")
    async with AsyncClient(guarded_server.url, token="s3cret-token-of-16+") as client:
        assert (await client.enqueue("x")).state == "queued"


def test_a_server_out_of_reach_is_unavailable():
    with Client("http://127.0.0.1:9", timeout=2) as client:
        with pytest.raises(cairn.Unavailable) as unreachable:
            client.enqueue("x")
        assert unreachable.value.status is None


async def test_a_server_out_of_reach_is_unavailable_to_the_async_client_too():
    async with AsyncClient("http://127.0.0.1:9", timeout=2) as client:
        with pytest.raises(cairn.Unavailable) as unreachable:
            await client.enqueue("x")
        assert unreachable.value.status is None
    with pytest.raises(cairn.InvalidInput) as refused:
        AsyncClient("ftp://127.0.0.1:9")
    assert refused.value.field == "url"


async def test_the_async_client_does_the_same(server):
    async with AsyncClient(server.url) as client:
        pushed = await client.enqueue("async.job", {"n": 1})
        waiting = asyncio.create_task(client.dequeue("w", wait=10))
        [claimed] = await waiting
        assert claimed.job.id == pushed.id
        await client.finish(claimed.lease, {"n": 2})
        assert (await client.get(pushed.id)).data == {"n": 2}
        with pytest.raises(cairn.LeaseLost):
            await client.heartbeat(claimed.lease)


async def test_the_async_wait_answers_when_the_job_ends_or_at_its_timeout(server):
    async with AsyncClient(server.url) as client:
        pushed = await client.enqueue("render", {"n": 1})
        [claimed] = await client.dequeue("w")
        waiting = asyncio.create_task(client.wait(pushed.id, 30))
        await asyncio.sleep(0.5)
        assert not waiting.done(), "the wait holds while the job runs"
        await client.finish(claimed.lease, result={"pages": 12})
        job = await asyncio.wait_for(waiting, 5)
        assert (job.state, job.result, job.data) == ("completed", {"pages": 12}, {"n": 1})
        queued = await client.enqueue("later")
        started = time.monotonic()
        job = await client.wait(queued.id, 1)
        assert job.state == "queued" and 0.9 <= time.monotonic() - started < 5
