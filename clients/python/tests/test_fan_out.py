"""Fan-out and fan-in, against a real server: a handler spawns three children and joins them, giving up its slot
until they have ended, and completes with the sum of their results; the spawn pushes once (a replay reads its ids
back without a request) and the join answers the same ids in order. A failed child holds the join until it is
cancelled, and the join then says `cancelled`; a spawn naming another parent is refused, naming the field, and
pushes none; a stale lease is refused."""

from __future__ import annotations

import asyncio
from typing import Any, Dict, List

import pytest

from cairn import (AsyncClient, Client, FailJob, InvalidInput, Joined, JoinedChild, Lease, LeaseLost, Spawned,
                   Suspended, Worker, push)

from conftest import Server, eventually, run_until_ended


def count_calls(monkeypatch: pytest.MonkeyPatch, *names: str) -> Dict[str, int]:
    """How many times the worker's client made each of `names` (`spawn`, `join`): a replay answered from the job's
    recorded steps makes none."""
    calls = {name: 0 for name in names}
    for name in names:
        original = getattr(AsyncClient, name)

        def counted(self: AsyncClient, *args: Any, _name: str = name, _original: Any = original) -> Any:
            calls[_name] += 1
            return _original(self, *args)

        monkeypatch.setattr(AsyncClient, name, counted)
    return calls


def double(job: Any) -> int:
    return 2 * int(job.data)


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_a_parent_spawns_three_children_joins_them_and_sums_their_results(
    server: Server, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first run spawns and suspends at the join; the last child to end makes the parent ready, and its next run
    reads the spawn's ids back from its recorded steps (no request), joins, and completes with 2 + 4 + 6. One slot:
    the children cannot run before the parent gives it up, so the first join finds them live."""
    calls = count_calls(monkeypatch, "spawn", "join")
    seen: List[Any] = []
    worker = Worker(server.url, f"py-fan-out-{kind}", max_concurrency=1, wait=1)
    worker.handler("double")(double)
    if kind == "sync":

        @worker.handler("sum")
        def total(job: Any) -> int:
            ids = job.spawn("children", [push("double", n) for n in (1, 2, 3)])
            ended = job.join("gather")
            seen.append((ids, ended))
            return sum(child.result for child in ended)

    else:

        @worker.handler("sum")
        async def total_async(job: Any) -> int:
            ids = await job.spawn("children", [push("double", n) for n in (1, 2, 3)])
            ended = await job.join("gather")
            seen.append((ids, ended))
            return sum(child.result for child in ended)

    with Client(server.url) as client:
        id = client.enqueue("sum").id
        report = await run_until_ended(server, worker, [id])
        job = client.get(id)
        everything = client.list_jobs(limit=100).jobs
        children = client.list_jobs(parent=id).jobs
    assert (job.state, job.result) == ("completed", 12), job.error
    assert [a.outcome for a in job.history] == ["suspended", "completed"]
    assert (report.suspended, report.finished, report.retried, report.failed, report.lost) == (1, 4, 0, 0, 0)
    assert len(everything) == 4, "the parent and its three children: nothing pushed twice"
    [(ids, ended)] = seen
    assert [child.id for child in ended] == ids == sorted(c.id for c in children)
    assert ended == [JoinedChild(id=i, state="completed", result=2 * n) for i, n in zip(ids, (1, 2, 3))]
    steps = {s.name: s.result for s in job.steps}
    assert steps["children"] == {"children": ids}
    assert steps["gather"] == {"children": [{"id": c.id, "state": c.state, "result": c.result} for c in ended]}
    # One spawn: the replay read its ids back. Each join not recorded yet asks the server: once suspended, once ended.
    assert calls == {"spawn": 1, "join": 2}


async def test_a_failed_child_holds_the_join_until_it_is_cancelled(server: Server) -> None:
    worker = Worker(server.url, "py-fan-out-failed", max_concurrency=1, wait=1)
    worker.handler("double")(double)

    @worker.handler("broken")
    def broken(job: Any) -> None:
        raise FailJob("broken", "never works")

    @worker.handler("gather")
    async def gather(job: Any) -> List[List[Any]]:
        await job.spawn("children", [push("double", 5), push("broken")])
        ended = await job.join("gather")
        return [[child.state, child.result] for child in ended]

    async with AsyncClient(server.url) as client:
        id = (await client.enqueue("gather")).id
        stop = asyncio.Event()
        running = asyncio.create_task(worker.run_async(stop))
        try:

            async def children_ended() -> bool:
                children = (await client.list_jobs(parent=id)).jobs
                return sorted(c.state for c in children) == ["completed", "failed"]

            await eventually("one child completed and the other failed", children_ended)
            # The failed child holds the join: the parent waits, and stays so.
            assert (await client.get(id)).state == "waiting"
            [failed] = (await client.list_jobs(parent=id, state="failed")).jobs
            await client.cancel(failed.id)

            async def completed() -> bool:
                return (await client.get(id)).state == "completed"

            await eventually("the parent completed", completed)
        finally:
            stop.set()
        report = await running
        job = await client.get(id)
    assert job.result == [["completed", 10], ["cancelled", None]]
    assert (report.suspended, report.failed) == (1, 1)
    assert [a.outcome for a in job.history] == ["suspended", "completed"]


def test_a_spawn_naming_another_parent_is_refused_and_pushes_nothing(server: Server) -> None:
    with Client(server.url) as client:
        other = client.enqueue("other").id
        client.enqueue("p")
        [claimed] = client.dequeue("w1", names=["p"])
        jobs = [push("double", 1), push("double", 2, parent=other)]
        with pytest.raises(InvalidInput) as refused:
            client.spawn(claimed.lease, "children", jobs)
        assert refused.value.field == "jobs[1].parent"
        assert len(client.list_jobs().jobs) == 2, "all or none: nothing was pushed"
        # Refused by the server: the lease still stands, and the step may be spawned yet.
        spawned = client.spawn(claimed.lease, "children", [push("double", 1), push("double", 2, parent=claimed.job.id)])
        assert isinstance(spawned, Spawned) and len(spawned.children) == 2
        # Sent again, the recorded step answers the same ids and pushes nothing.
        assert client.spawn(claimed.lease, "children", [push("double", 3)]) == spawned
        assert len(client.list_jobs().jobs) == 4


def test_a_bad_job_or_unknown_option_is_refused_before_anything_is_sent() -> None:
    # Nothing listens there: a request sent would be `Unavailable`, not refused by the client.
    lease = Lease(job=1, token="t", worker="w", expires_at="2030-01-01T00:00:00Z")
    with Client("http://127.0.0.1:9") as client:
        with pytest.raises(InvalidInput, match=r"^jobs\[1\]: must be a job made by push") as not_a_job:
            client.spawn(lease, "children", [push("a"), "b"])  # type: ignore[list-item]
        with pytest.raises(InvalidInput, match=r"^jobs: must be a list of jobs") as one_job:
            client.spawn(lease, "children", push("a"))  # type: ignore[arg-type]
    assert (not_a_job.value.field, one_job.value.field) == ("jobs[1]", "jobs")
    with pytest.raises(InvalidInput, match=r"^parnt: is not a push option \(did you mean parent\?\)"):
        push("a", parnt=3)  # type: ignore[call-arg]


async def test_a_stale_lease_is_refused_and_a_join_suspends_the_lease(server: Server) -> None:
    async with AsyncClient(server.url) as client:
        id = (await client.enqueue("p")).id
        [first] = await client.dequeue("w1", names=["p"])
        spawned = await client.spawn(first.lease, "children", [push("double", 1)])
        joined = await client.join(first.lease, "gather")
        assert joined == Joined(suspended=True, children=[])
        assert (await client.get(id)).state == "waiting"
        # The join ended the lease: nothing more under it.
        with pytest.raises(LeaseLost):
            await client.spawn(first.lease, "more", [push("double", 2)])
        with pytest.raises(LeaseLost):
            await client.join(first.lease, "gather")
        [child] = await client.dequeue("w1", names=["double"])
        await client.finish(child.lease, result=2)
        [second] = await client.dequeue("w2", names=["p"])
        assert second.job.id == id and [s.name for s in second.job.steps] == ["children"]
        assert (await client.spawn(second.lease, "children", [])).children == spawned.children
        ended = await client.join(second.lease, "gather")
        assert ended == Joined(suspended=False, children=[JoinedChild(id=spawned.children[0], state="completed", result=2)])
        # The first lease stays refused under the second.
        with pytest.raises(LeaseLost):
            await client.join(first.lease, "gather")


def test_suspended_by_a_join_waits_for_no_time() -> None:
    error = Suspended("gather", None)
    assert (error.name, error.until, error.key) == ("gather", None, None)
    assert str(error) == 'step "gather": the job waits for its children'
