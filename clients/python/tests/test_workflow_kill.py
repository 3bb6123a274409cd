"""Issue 43's "done when", from Python: a workflow of ten steps (eight bodies, a sleep and a wait for a signal) run by
a worker in a process of its own (`workflow_worker.py`, with a plain-function handler in even rounds and an `async
def` one in odd rounds), which the test SIGKILLs at random moments and starts again, round after round: up to three
kills a round, each a random time up to 0.6 s after that worker took the job, then a last worker that is not killed.
Every round's job completes with the signal's data, every body runs, and only the step in flight at a kill runs its
body twice.

The bodies append their names to a log outside the queue, and the test appends `kill` after each kill, so the log
says which bodies ran around which kill. CAIRN_KILL_SEED replays a run's choices (not its timing)."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, List, Optional

import pytest

from cairn import Client, Job, Retry, SignalSent

from conftest import Server

ROUNDS = 20
# The most kills in a round; then a last worker, not killed, runs the job to its end.
MOST_KILLS = 3
# A worker is killed this long after it took the job, at most: about the time the workflow takes, so that kills land
# all along it rather than mostly while a new worker starts or waits for a killed one's lease to expire.
MOST_LIFE = 0.6
# A worker that has not taken the job by then (it is being started, or waits for a lease) is killed all the same.
TAKE_LIMIT = 3.0
# A killed worker's job comes back when its lease expires.
LEASE = 1.0
# The longest a last worker may take to complete the job.
LAST_WORKER_LIMIT = 30.0
BODIES = ["s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8"]
WORKER_SCRIPT = Path(__file__).resolve().with_name("workflow_worker.py")


def append(log: Path, line: str) -> None:
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{line}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)


class Round:
    """One round's job, and its signal, sent once: early (before the wait, so it is kept), once the job shows that
    it waits, or at the latest before the last worker starts."""

    def __init__(self, client: Client, number: int, early: bool) -> None:
        self.client, self.number = client, number
        self.key = f"round-{number}/approved"
        self.data = {"round": number, "approved_by": "the test"}
        self.id = client.enqueue("flow", {"key": self.key}, lease_timeout=LEASE, retry=Retry(max_attempts=20,
                                                                                             initial_delay=0)).id
        self.sent = False
        if early:
            self.send(expected=SignalSent(delivered=False, job=None))

    def send(self, expected: Optional[SignalSent] = None) -> None:
        sent = self.client.signal(self.key, self.data)
        assert expected is None or sent == expected, f"round {self.number}: {sent}"
        self.sent = True

    def watch(self) -> Job:
        """The job, after sending the signal if it waits for it."""
        job = self.client.get(self.id)
        if not self.sent and job.awaits_signal is not None:
            assert job.awaits_signal == self.key
            self.send(expected=SignalSent(delivered=True, job=self.id))
        return job


def spawn(url: str, log: Path, job: int, kind: str) -> "subprocess.Popen[bytes]":
    return subprocess.Popen([sys.executable, str(WORKER_SCRIPT), url, str(log), str(job), kind])


def check_log(log: Path, number: int) -> int:
    """Every body ran, in order, and one ran again only as the first body after a kill when it was the last before
    it (the step in flight). Returns how many bodies ran again."""
    lines = log.read_text().splitlines()
    ran: List[str] = []
    again = 0
    for at, line in enumerate(lines):
        if line == "kill":
            continue
        if line in ran:
            before = next((earlier for earlier in reversed(lines[:at]) if earlier != "kill"), None)
            assert at > 0 and lines[at - 1] == "kill" and before == line, \
                f"round {number}: step {line} ran again though it was not in flight at a kill: {lines}"
            again += 1
        else:
            ran.append(line)
    assert ran == BODIES, f"round {number}: every body ran, in order: {lines}"
    return again


def test_the_log_check_refuses_a_body_run_again_that_was_not_in_flight(tmp_path: Path) -> None:
    log = tmp_path / "log"
    log.write_text("\n".join(["s1", "s2", "kill", "kill", "s2", "s3", "s4", "s5", "s6", "s7", "s8"]) + "\n")
    assert check_log(log, 0) == 1
    for wrong in (["s1", "s2", "kill", "s1", "s2"], ["s1", "s2", "s2"], ["s1", "s2", "kill", "s3", "s2"]):
        log.write_text("\n".join(wrong + ["s3", "s4", "s5", "s6", "s7", "s8"]) + "\n")
        with pytest.raises(AssertionError, match="ran again though it was not in flight"):
            check_log(log, 0)
    log.write_text("s1\ns2\nkill\ns4\n")
    with pytest.raises(AssertionError, match="every body ran, in order"):
        check_log(log, 0)


def test_a_workflow_completes_whatever_moments_its_worker_process_is_killed_at(server: Server, tmp_path: Path) -> None:
    seed = int(os.environ.get("CAIRN_KILL_SEED") or random.randrange(2**32))
    print(f"\nworkflow under SIGKILL: CAIRN_KILL_SEED={seed}")
    rng = random.Random(seed)
    early = [True, False] * (ROUNDS // 2)
    rng.shuffle(early)
    started = time.monotonic()
    kills = again = in_run = 0
    with Client(server.url) as client:
        for number in range(ROUNDS):
            log = tmp_path / f"round-{number}.log"
            kind = "sync" if number % 2 == 0 else "async"
            flow = Round(client, number, early[number])
            planned, killed = rng.randint(1, MOST_KILLS), 0
            state = "queued"
            while killed < planned and state != "completed":
                worker = spawn(server.url, log, flow.id, kind)
                life, took = rng.uniform(0, MOST_LIFE), None
                give_up, seen = time.monotonic() + TAKE_LIMIT, state
                try:
                    while worker.poll() is None:
                        job = flow.watch()
                        seen = job.state
                        now = time.monotonic()
                        if took is None and (job.worker == f"py-flow-{worker.pid}" or now > give_up):
                            took = now
                        if took is not None and now >= took + life:
                            break
                        time.sleep(0.01)
                    if worker.poll() is None:
                        worker.kill()
                        worker.wait()
                        append(log, "kill")
                        killed += 1
                        in_run += seen == "running"
                    else:
                        assert worker.returncode == 0, f"round {number}: a worker failed"
                finally:
                    if worker.poll() is None:
                        worker.kill()
                        worker.wait()
                state = flow.watch().state
            kills += killed
            if state != "completed":
                if not flow.sent:
                    flow.send()
                worker = spawn(server.url, log, flow.id, kind)
                try:
                    assert worker.wait(timeout=LAST_WORKER_LIMIT) == 0, f"round {number}: the last worker failed"
                finally:
                    if worker.poll() is None:
                        worker.kill()
                        worker.wait()
            job = client.get(flow.id)
            assert job.state == "completed", f"round {number}: {job.state}, {job.error}"
            expected: Any = {"approved": flow.data, "received": True}
            assert job.result == expected, f"round {number}"
            assert [s.name for s in job.steps] == ["s1", "s2", "s3", "nap", "s4", "s5", "s6", "approved", "s7", "s8"]
            again += check_log(log, number)
    took = time.monotonic() - started
    print(f"workflow under SIGKILL: {ROUNDS} rounds, {kills} kills ({in_run} while the job ran), {again} bodies run twice, "
          f"{ROUNDS // 2} signals sent before the wait, in {took:.1f} s")
