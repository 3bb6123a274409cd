"""The README's examples, run as they are written, each against a real server of its own.

The examples use the server's default address, `http://127.0.0.1:6670`, as a reader's own server would have it; the
test starts each server on a free port and puts its address in place of that URL, and changes nothing else. (A
fixed port could be taken on the machine that runs the tests, and an environment variable read by the examples would
be one more thing for a reader to skip.) An example that runs a worker (`worker.run()`) runs until every job it made
has ended, then gets SIGTERM, as a deployment stops one, and must exit cleanly. A `print(…)  # text` line must print
that text. The examples are also type-checked against the client's annotations, as a reader's mypy would see them.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import List

import pytest

from cairn import Client

from conftest import Server

README = Path(__file__).resolve().parents[1] / "README.md"
DEFAULT_URL = "http://127.0.0.1:6670"
LIVE = ("queued", "running", "waiting", "scheduled")


def examples() -> List[str]:
    return re.findall(r"^```python\n(.*?)^```$", README.read_text(), re.M | re.S)


def expected_output(example: str) -> List[str]:
    return re.findall(r"^\s*print\(.*\)\s+# (.+)$", example, re.M)


def test_the_readme_has_the_examples_this_test_runs() -> None:
    found = examples()
    assert len(found) >= 6
    assert all(DEFAULT_URL in example for example in found), "each example talks to the server it is given"


def all_jobs_ended(url: str) -> bool:
    # One listing, so that the states seen are of one moment: a job moving between two requests could hide.
    with Client(url) as client:
        jobs = client.list_jobs(limit=1000).jobs
    return bool(jobs) and not any(job.state in LIVE for job in jobs)


def run_worker(script: Path, url: str) -> subprocess.CompletedProcess[str]:
    process = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    try:
        while not all_jobs_ended(url):
            assert process.poll() is None, f"the worker exited early: {process.communicate()}"
            assert time.monotonic() < deadline, "the example's jobs did not all end"
            time.sleep(0.1)
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


@pytest.mark.parametrize("number", range(len(examples())))
def test_each_example_runs_as_written(number: int, tmp_path: Path) -> None:
    example = examples()[number]
    server = Server(tmp_path)
    try:
        script = tmp_path / f"example_{number}.py"
        script.write_text(example.replace(DEFAULT_URL, server.url))
        if "worker.run()" in example:
            done = run_worker(script, server.url)
        else:
            done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    finally:
        server.stop()
    assert done.returncode == 0, f"example {number} failed:\n{done.stderr}"
    for line in expected_output(example):
        assert line in done.stdout, f"example {number} did not print {line!r}:\n{done.stdout}"


@pytest.mark.skipif(shutil.which("mypy") is None and not Path(sys.executable).with_name("mypy").exists(),
                    reason="mypy is in the test extra")
def test_the_examples_type_check(tmp_path: Path) -> None:
    for number, example in enumerate(examples()):
        (tmp_path / f"example_{number}.py").write_text(example)
    # The project's own settings (Python 3.9, anyio's sources skipped), less its strictness: a reader's code has no
    # annotations, and its calls are what is checked.
    config = tmp_path / "mypy.ini"
    config.write_text("[mypy]\npython_version = 3.9\ncheck_untyped_defs = True\n[mypy-anyio.*]\nfollow_imports = skip\n")
    checked = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(config), "--cache-dir", str(tmp_path / ".mypy_cache"),
         *sorted(str(p) for p in tmp_path.glob("example_*.py"))],
        capture_output=True, text=True,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
