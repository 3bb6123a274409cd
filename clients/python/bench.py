"""The Python worker's throughput, as `cairn bench --scenario workers --clients 1` measures the Rust one: a producer
enqueues `--batch-size` jobs per request while one `Worker` of `--slots` slots runs them with a handler that does
nothing; the time is from the start until the worker has reported every job.

    python clients/python/bench.py --server http://127.0.0.1:6670 --jobs 20000 --slots 8 [--sync]
"""

from __future__ import annotations

import argparse
import asyncio
import time

from cairn import AsyncClient, Worker, push


async def main(args: argparse.Namespace) -> None:
    queue = f"bench-python-{int(time.time() * 1000)}"
    worker = Worker(args.server, "bench-python", queues=[queue], max_concurrency=args.slots, wait=1)
    handled = 0
    all_handled = asyncio.Event()
    loop = asyncio.get_running_loop()

    def count() -> None:
        nonlocal handled
        handled += 1
        if handled == args.jobs:
            all_handled.set()

    if args.sync:

        def noop_on_a_thread(job: object) -> None:
            loop.call_soon_threadsafe(count)

        worker.handler("bench.noop", noop_on_a_thread)
    else:

        async def noop(job: object) -> None:
            count()

        worker.handler("bench.noop", noop)

    async def produce() -> None:
        async with AsyncClient(args.server) as client:
            for first in range(0, args.jobs, args.batch_size):
                last = min(args.jobs, first + args.batch_size)
                await client.enqueue_batch([push("bench.noop", {"i": i}, queue=queue) for i in range(first, last)])

    stop = asyncio.Event()
    start = time.monotonic()
    running = asyncio.create_task(worker.run_async(stop))
    await produce()
    await all_handled.wait()
    stop.set()
    report = await running
    elapsed = time.monotonic() - start
    kind = "sync" if args.sync else "async"
    print(f"python worker ({kind} handlers, {args.slots} slots): {report.finished:,} jobs in {elapsed:.2f}s, "
          f"{report.finished / elapsed:,.0f} jobs/s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default="http://127.0.0.1:6670")
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--slots", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--sync", action="store_true", help="plain-function handlers, run on threads")
    asyncio.run(main(parser.parse_args()))
