"""Python and Node side by side on one server: each language's worker drains jobs pushed by the other language and
by `cairn push`, each started as its README says (`worker.run()`, `await worker.run()`) and stopped with SIGTERM."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cairn import Client

from conftest import REPO, cairn_binary

NODE_CLIENT = REPO / "clients" / "node" / "src" / "index.js"

NODE_WORKER = """
import { Worker } from %(client)s;
const worker = new Worker(process.argv[2], "node-worker", { queues: ["for-node"], wait: 1 })
  .handler("greet", (job) => ({ greeted: job.data.who, by: "node" }));
console.log(JSON.stringify(await worker.run()));
"""

NODE_PUSH = """
import { Client } from %(client)s;
const client = new Client(process.argv[2]);
for (let i = 0; i < 3; i++) await client.enqueue("greet", { who: `from node ${i}` }, { queue: "for-python" });
"""

PYTHON_WORKER = """
import json, sys
from cairn import Worker
worker = Worker(sys.argv[1], "python-worker", queues=["for-python"], wait=1)
worker.handler("greet", lambda job: {"greeted": job.data["who"], "by": "python"})
print(json.dumps(worker.run().__dict__), flush=True)
"""


@pytest.fixture
def node() -> str:
    path = shutil.which("node")
    if path is None:
        pytest.fail("node is not installed: scripts/test-node installs it (scripts/test runs it first)")
    return path


def test_each_languages_worker_drains_what_the_other_and_the_cli_pushed(server, tmp_path: Path, node: str):
    client_url = json.dumps(NODE_CLIENT.as_uri())
    (tmp_path / "push.mjs").write_text(NODE_PUSH % {"client": client_url})
    (tmp_path / "worker.mjs").write_text(NODE_WORKER % {"client": client_url})
    (tmp_path / "worker.py").write_text(PYTHON_WORKER)

    with Client(server.url) as client:
        for i in range(3):
            client.enqueue("greet", {"who": f"from python {i}"}, queue="for-node")
        subprocess.run([node, str(tmp_path / "push.mjs"), server.url], check=True)
        for queue in ("for-node", "for-python"):
            subprocess.run(
                [cairn_binary(), "push", "greet", "--queue", queue, "--data", json.dumps({"who": "from the cli"}),
                 "--server", server.url],
                check=True,
                capture_output=True,
            )
        workers = [
            subprocess.Popen([node, str(tmp_path / "worker.mjs"), server.url], stdout=subprocess.PIPE, text=True),
            subprocess.Popen([sys.executable, str(tmp_path / "worker.py"), server.url], stdout=subprocess.PIPE, text=True),
        ]
        try:
            deadline = time.monotonic() + 30
            while sum(q["completed"] for q in client.queues() if q["queue"].startswith("for-")) < 8:
                assert time.monotonic() < deadline, f"not drained: {client.queues()}"
                time.sleep(0.1)
        finally:
            reports = []
            for worker in workers:
                worker.send_signal(signal.SIGTERM)
                out, _ = worker.communicate(timeout=30)
                assert worker.returncode == 0, out
                reports.append(json.loads(out.strip().splitlines()[-1]))
        assert [r["finished"] for r in reports] == [4, 4]
        done = client.dequeue("nobody", queues=["for-node", "for-python"])
        assert done == [], "nothing left"
