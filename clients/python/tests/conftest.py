"""A real `cairn serve` per test, on a fresh SQLite file and a free loopback port.

The binary is `CAIRN_BIN`, or the repository's debug build (`cargo build -p cairn-cli` makes it).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from pathlib import Path
from typing import Awaitable, Callable, Iterator, List, Optional, Sequence

import pytest

from cairn import AsyncClient, Worker, WorkerReport

REPO = Path(__file__).resolve().parents[3]


def cairn_binary() -> str:
    path = os.environ.get("CAIRN_BIN") or str(REPO / "target" / "debug" / "cairn")
    if not Path(path).exists():
        pytest.fail(f"no cairn binary at {path}: build it with `cargo build -p cairn-cli` or set CAIRN_BIN")
    return path


class Server:
    """A running `cairn serve` (with `flags` besides the usual ones); `url` is its HTTP address."""

    def __init__(self, directory: Path, token: Optional[str] = None, flags: Sequence[str] = ()) -> None:
        env = {k: v for k, v in os.environ.items() if k not in ("CAIRN_TOKEN", "CAIRN_CONFIG")}
        env["CAIRN_LOG"] = "warn"
        args = [cairn_binary(), "serve", "--db", str(directory / "cairn.db"), "--http", "127.0.0.1:0"]
        args += ["--bedrock", "off"]
        if token:
            args += ["--token", token]
        args += list(flags)
        self.process = subprocess.Popen(args, cwd=directory, env=env, stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        # The first line says where it listens.
        line = self.process.stdout.readline()
        urls = [word for word in line.split() if word.startswith(("http://", "https://"))]
        if not urls:
            self.stop()
            raise RuntimeError(f"no address in the server's first line: {line!r}")
        self.url = urls[0]

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    running = Server(tmp_path)
    yield running
    running.stop()


@pytest.fixture
def guarded_server(tmp_path: Path) -> Iterator[Server]:
    running = Server(tmp_path, token="s3cret-token-of-16+")
    yield running
    running.stop()


async def eventually(what: str, check: Callable[[], Awaitable[bool]], timeout: float = 30.0) -> None:
    """Polls `check` until it holds, failing the test after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not await check():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        await asyncio.sleep(0.05)


async def run_until_ended(server: Server, worker: Worker, ids: List[int]) -> WorkerReport:
    """Runs `worker` until every job of `ids` ended, then stops it; its report."""
    async with AsyncClient(server.url) as client:
        stop = asyncio.Event()
        running = asyncio.create_task(worker.run_async(stop))

        async def ended() -> bool:
            return all(job.state in ("completed", "failed") for job in [await client.get(i) for i in ids])

        try:
            await eventually(f"jobs {ids} ended", ended)
        finally:
            stop.set()
        return await running
