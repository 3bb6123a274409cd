"""The Worker against a real server: handlers by name and GLOB, outcomes, slots, heartbeats, lost leases, and
stopping on SIGTERM or dying on SIGKILL."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import cairn
from cairn import AsyncClient, FailJob, RetryLater, Worker, push


async def eventually(what, check, timeout=20.0):
    deadline = time.monotonic() + timeout
    while True:
        if await check():
            return
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        await asyncio.sleep(0.05)


async def states(client, ids):
    return [(await client.get(i)).state for i in ids]


def start(worker):
    stop = asyncio.Event()
    return stop, asyncio.create_task(worker.run_async(stop))


async def test_handlers_by_name_and_glob_run_their_jobs_and_keep_their_results(server):
    async with AsyncClient(server.url) as client:
        names = ["resize", "resize", "email.send", "email.bounce", "resize[1]", "other"]
        ids = [e.id for e in await client.enqueue_batch([push(n, {"n": i}) for i, n in enumerate(names)])]
        worker = Worker(server.url, "py-1", wait=1)

        @worker.handler("resize")
        def resize(job):
            return {"resized": job.data["n"]}

        @worker.glob_handler("email.*")
        async def email(job):
            await asyncio.sleep(0)
            return {"mailed": job.job.name}

        worker.handler("resize[1]", lambda job: None)  # a name with GLOB characters is matched exactly
        stop, running = start(worker)
        await eventually("five jobs completed", lambda: _count(client, ids, "completed", 5))
        stop.set()
        report = await running
        assert (report.finished, report.retried, report.failed, report.lost) == (5, 0, 0, 0)
        assert await states(client, ids) == ["completed"] * 5 + ["queued"]
        [resized, mailed, none] = [await client.get(i) for i in (ids[0], ids[3], ids[4])]
        assert (resized.result, resized.data) == ({"resized": 0}, {"n": 0}), "the result is kept apart from the data"
        assert (mailed.result, mailed.data) == ({"mailed": "email.bounce"}, {"n": 3})
        assert (none.result, none.data) == (None, {"n": 4}), "None is no result"
        assert resized.raw["history"][-1]["result"] == {"resized": 0}


async def test_set_data_replaces_the_data_and_the_return_value_stays_the_result(server):
    async with AsyncClient(server.url) as client:
        sync_job, async_job = [(await client.enqueue(n, {"step": 1})).id for n in ("sync", "async")]
        worker = Worker(server.url, "py-data", wait=1)

        @worker.handler("sync")
        def on_a_thread(job):
            job.set_data({"step": job.data["step"] + 1})
            return {"did": "sync"}

        @worker.handler("async")
        async def on_the_loop(job):
            job.set_data({"step": 10})

        stop, running = start(worker)
        await eventually("both completed", lambda: _count(client, [sync_job, async_job], "completed", 2))
        stop.set()
        assert (await running).finished == 2
        [a, b] = [await client.get(i) for i in (sync_job, async_job)]
        assert (a.data, a.result) == ({"step": 2}, {"did": "sync"})
        assert (b.data, b.result) == ({"step": 10}, None)


async def _count(client, ids, state, n):
    return (await states(client, ids)).count(state) >= n


async def test_exceptions_and_results_that_are_not_json_retry_or_fail_the_job_with_their_text(server):
    async with AsyncClient(server.url) as client:
        names = ("later", "bad", "boom", "not-json", "nan-data")
        later, bad, boom, odd, nan = [(await client.enqueue(n)).id for n in names]
        worker = Worker(server.url, "py-2", wait=1)

        @worker.handler("later")
        def wait_a_minute(job):
            raise RetryLater("rate limited", delay=60)

        @worker.handler("bad")
        def refuse(job):
            raise FailJob("bad-input", "cannot parse")

        @worker.handler("boom")
        async def crash(job):
            raise ValueError("boom")

        worker.handler("not-json", lambda job: object())
        worker.handler("nan-data", lambda job: job.set_data({"x": float("nan")}))

        stop, running = start(worker)
        await eventually("all five handled", lambda: _handled(client, [later, bad, boom, odd, nan]))
        stop.set()
        report = await running
        assert (report.retried, report.failed, report.finished) == (4, 1, 0)
        [a, b, c] = [await client.get(i) for i in (later, bad, boom)]
        assert (a.state, a.error) == ("scheduled", "rate limited")
        assert (b.state, b.error, b.raw["failure_group"]) == ("failed", "cannot parse", "bad-input")
        assert (c.state, c.error) == ("scheduled", "ValueError: boom")
        d = await client.get(odd)
        assert d.state == "scheduled" and d.error.startswith("the handler's result is not JSON: "), d.error
        e = await client.get(nan)
        assert e.state == "scheduled" and e.error.startswith("the handler's data is not JSON: "), e.error


async def _handled(client, ids):
    return all(s != "queued" and s != "running" for s in await states(client, ids))


async def test_no_more_than_max_concurrency_run_at_once(server):
    async with AsyncClient(server.url) as client:
        ids = [e.id for e in await client.enqueue_batch([push("slow") for _ in range(9)])]
        worker = Worker(server.url, "py-3", max_concurrency=3, wait=1)
        now, most = 0, 0

        @worker.handler("slow")
        async def slow(job):
            nonlocal now, most
            now += 1
            most = max(most, now)
            await asyncio.sleep(0.2)
            now -= 1

        stop, running = start(worker)
        await eventually("all nine completed", lambda: _count(client, ids, "completed", 9))
        stop.set()
        await running
        assert most == 3, "three slots, all of them used"


async def test_plain_function_handlers_fill_every_slot_too(server):
    # More slots than the default executor has threads (at most 32): each handler waits until all have started.
    slots = 33
    async with AsyncClient(server.url) as client:
        ids = [e.id for e in await client.enqueue_batch([push("blocking") for _ in range(slots)])]
        worker = Worker(server.url, "py-3b", max_concurrency=slots, wait=1)
        together = threading.Barrier(slots, timeout=10)
        worker.handler("blocking", lambda job: together.wait() and None)
        stop, running = start(worker)
        await eventually("all of them completed", lambda: _count(client, ids, "completed", slots))
        stop.set()
        report = await running
        assert report.finished == slots and report.retried == 0


async def test_heartbeats_keep_a_job_longer_than_its_lease(server):
    async with AsyncClient(server.url) as client:
        job = (await client.enqueue("long", lease_timeout=1)).id
        worker = Worker(server.url, "py-4", wait=1)
        worker.handler("long", lambda job: time.sleep(2.5) or {"ok": True})
        stop, running = start(worker)
        await eventually("the job completed", lambda: _count(client, [job], "completed", 1))
        stop.set()
        report = await running
        done = await client.get(job)
        assert (done.attempt, done.result, report.finished) == (1, {"ok": True}, 1)


async def test_a_lost_lease_drops_the_handlers_result(server):
    async with AsyncClient(server.url) as client:
        job = (await client.enqueue("held", lease_timeout=1)).id
        started, release = asyncio.Event(), asyncio.Event()
        worker = Worker(server.url, "py-5", wait=1)

        @worker.handler("held")
        async def held(ctx):
            started.set()
            await release.wait()
            return {"should not": "be saved"}

        stop, running = start(worker)
        await asyncio.wait_for(started.wait(), 10)
        await client.cancel(job)
        # The next heartbeat (a third of the 1 s lease) finds the lease gone.
        await asyncio.sleep(1.0)
        release.set()
        stop.set()
        report = await running
        assert report.lost == 1 and report.finished == 0
        cancelled = await client.get(job)
        assert (cancelled.state, cancelled.data, cancelled.result) == ("cancelled", {}, None)


WORKER_SCRIPT = """
import json, logging, sys, time
from cairn import Worker
url, marker = sys.argv[1], sys.argv[2]
logging.basicConfig(filename=marker + ".log", level=logging.INFO)
worker = Worker(url, "py-process", wait=1, shutdown_deadline=20)

@worker.handler("step")
def step(job):
    with open(marker, "w") as f:
        json.dump({"job": job.lease.job, "token": job.lease.token}, f)
    time.sleep(float(job.data["seconds"]))
    return {"done": True}

report = worker.run()
print(json.dumps(report.__dict__), flush=True)
"""


def run_worker_process(server, tmp_path: Path):
    script = tmp_path / "worker.py"
    script.write_text(WORKER_SCRIPT)
    marker = tmp_path / "started.json"
    process = subprocess.Popen(
        [sys.executable, str(script), server.url, str(marker)], stdout=subprocess.PIPE, text=True
    )
    return process, marker


async def wait_for(path: Path, timeout=20.0):
    await eventually(f"{path.name} exists", lambda: _exists(path), timeout)
    return json.loads(path.read_text())


async def _says(path, words):
    return path.exists() and words in path.read_text()


async def _exists(path):
    return path.exists() and path.stat().st_size > 0


async def test_sigterm_lets_the_running_job_finish_and_takes_no_more(server, tmp_path):
    async with AsyncClient(server.url) as client:
        first = (await client.enqueue("step", {"seconds": 1.0})).id
        process, marker = run_worker_process(server, tmp_path)
        await wait_for(marker)
        process.send_signal(signal.SIGTERM)
        # The second job comes once the worker has seen the signal: one it took before would be its to run.
        await eventually("the worker says it stops", lambda: _says(Path(f"{marker}.log"), "stopping"))
        second = (await client.enqueue("step", {"seconds": 0})).id
        out, _ = await asyncio.to_thread(process.communicate, timeout=30)
        assert process.returncode == 0
        assert json.loads(out.strip().splitlines()[-1])["finished"] == 1
        # The second job ran nowhere. It is queued, unless the server claimed it for the long poll the worker dropped
        # as it stopped and wrote its answer to the closed connection: then it stays leased, unrun, until its lease
        # expires (an answer already on its way cannot be given back over HTTP).
        ran, after = await states(client, [first, second])
        assert ran == "completed"
        assert after in ("queued", "running")
        assert (await client.get(second)).result is None


async def test_sigkill_mid_job_loses_nothing_and_the_dead_workers_finish_is_refused(server, tmp_path):
    async with AsyncClient(server.url) as client:
        job = (await client.enqueue("step", {"seconds": 3600}, lease_timeout=1)).id
        process, marker = run_worker_process(server, tmp_path)
        lease = await wait_for(marker)
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        # Its lease runs out; another worker runs the job again.
        survivor = Worker(server.url, "py-survivor", wait=1)
        survivor.handler("step", lambda job: {"again": True})
        stop, running = start(survivor)
        await eventually("the job ran again", lambda: _count(client, [job], "completed", 1))
        stop.set()
        await running
        done = await client.get(job)
        assert (done.result, done.attempt) == ({"again": True}, 2)
        stale = cairn.Lease(job=lease["job"], token=lease["token"], worker="py-process", expires_at="")
        with pytest.raises(cairn.LeaseLost):
            await client.finish(stale, {"late": True}, result={"late": True})
        late = await client.get(job)
        assert (late.result, late.data) == ({"again": True}, {"seconds": 3600})
