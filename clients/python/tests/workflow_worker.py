"""The worker process of `test_workflow_kill.py`, which SIGKILLs it at random moments and starts it again: not a test
of its own. It runs the ten-step workflow `flow` (eight bodies `s1`..`s8`, a sleep after `s3` and a wait for a
signal after `s6`), with a plain-function or an `async def` handler, until job JOB completed, then exits.

    python workflow_worker.py URL LOG JOB sync|async

Each body appends its name to LOG (one write, synced) and then takes a moment, so that kills land inside bodies as
well as between them; the test reads LOG to see which bodies ran around which kill."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from typing import Any, Callable, Dict

from cairn import AsyncClient, Worker

BODIES = ["s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8"]
# No worker lives longer than this, even if the test that started it is gone.
LIFETIME = 60.0


def append(log: str, line: str) -> None:
    """One line, in one write, synced before the body returns."""
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{line}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def body(log: str, name: str) -> Callable[[], str]:
    def run() -> str:
        append(log, name)
        time.sleep(0.015)
        return name

    return run


def make_worker(url: str, log: str, kind: str) -> Worker:
    worker = Worker(url, f"py-flow-{os.getpid()}", max_concurrency=1, wait=1, shutdown_deadline=5)
    if kind == "sync":

        @worker.handler("flow")
        def flow(job: Any) -> Dict[str, Any]:
            for name in BODIES[:3]:
                job.step(name, body(log, name))
            job.sleep("nap", 0.2)
            for name in BODIES[3:6]:
                job.step(name, body(log, name))
            approved = job.wait_for_signal("approved", job.data["key"], 60)
            for name in BODIES[6:]:
                job.step(name, body(log, name))
            return {"approved": approved.data, "received": approved.received}

    else:

        @worker.handler("flow")
        async def flow_async(job: Any) -> Dict[str, Any]:
            for name in BODIES[:3]:
                await job.step(name, body(log, name))
            await job.sleep("nap", 0.2)
            for name in BODIES[3:6]:
                await job.step(name, body(log, name))
            approved = await job.wait_for_signal("approved", job.data["key"], 60)
            for name in BODIES[6:]:
                await job.step(name, body(log, name))
            return {"approved": approved.data, "received": approved.received}

    return worker


async def main(url: str, log: str, job: int, kind: str) -> None:
    worker = make_worker(url, log, kind)
    stop = asyncio.Event()
    running = asyncio.create_task(worker.run_async(stop))
    deadline = time.monotonic() + LIFETIME
    async with AsyncClient(url) as client:
        while (await client.get(job)).state != "completed":
            if time.monotonic() > deadline or running.done():
                print(f"job {job} did not complete in this worker's lifetime", file=sys.stderr)
                os._exit(3)
            await asyncio.sleep(0.05)
    stop.set()
    await running


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]))
