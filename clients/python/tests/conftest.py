"""A real `cairn serve` per test, on a fresh SQLite file and a free loopback port.

The binary is `CAIRN_BIN`, or the repository's debug build (`cargo build -p cairn-cli` makes it).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Iterator, Optional, Sequence

import pytest

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
