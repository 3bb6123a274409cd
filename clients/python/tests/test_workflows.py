"""Issue 42's "done when", from Python against a real server: a cron template with a time zone, a job with
dependencies and a parent, and a batch with callbacks, each created by the client and run by a `Worker` whose
handlers read `job.id`, report progress and set a result. Then what else a handler gets: the job's fields, a
checkpoint a retry starts from, heartbeats, and a lease lost under a call."""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, Dict, List

import cairn
from cairn import AsyncClient, Client, RetryLater, RunningJob, Worker, push

from conftest import eventually



def ended(client: AsyncClient, *ids: int) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        states = [(await client.get(i)).state for i in ids]
        return all(state in ("completed", "failed", "cancelled") for state in states)

    return check


def start(worker: Worker) -> "tuple[asyncio.Event, asyncio.Task[cairn.WorkerReport]]":
    stop = asyncio.Event()
    return stop, asyncio.ensure_future(worker.run_async(stop))


async def test_a_cron_template_in_a_time_zone_makes_jobs_whose_handler_reports_and_sets_a_result(server):
    seen: List[int] = []
    worker = Worker(server.url, "py-cron", wait=1)

    @worker.handler("report.nightly")
    async def nightly(job: RunningJob) -> None:
        seen.append(job.id)
        await job.report_progress({"step": "rendering"})
        job.set_result({"report_for": job.id, "kind": job.data["kind"]})

    async with AsyncClient(server.url) as client:
        template = await client.set_recurring(
            "nightly", "0 4 * * *", push("report.nightly", {"kind": "daily"}, queue="default"),
            time_zone="Europe/Berlin",
        )
        assert (template.time_zone, template.next_run is not None) == ("Europe/Berlin", True)
        # 04:00 in Berlin is 03:00 or 02:00 in UTC, as the season has it.
        assert template.next_run is not None and template.next_run[11:16] in ("02:00", "03:00")
        run = await client.run_recurring("nightly")
        stop, running = start(worker)
        await eventually("the run completed", ended(client, run.id))
        stop.set()
        assert (await running).finished == 1
        job = await client.get(run.id)
        assert (job.state, job.result, job.progress) == (
            "completed", {"report_for": run.id, "kind": "daily"}, {"step": "rendering"})
        assert seen == [run.id]
        read = await client.get_recurring("nightly")
        assert (read.time_zone, read.last_job, read.missed) == ("Europe/Berlin", run.id, "once")
        assert read.job is not None and (read.job["name"], read.job["data"]) == ("report.nightly", {"kind": "daily"})


async def test_a_parent_creates_a_child_that_depends_on_another_job_and_runs_again_once_it_ended(server):
    worker = Worker(server.url, "py-family", wait=1)
    runs: List[Dict[str, Any]] = []

    @worker.handler("fetch")
    def fetch(job: RunningJob) -> Any:
        job.report_progress(1.0)
        return {"fetched_by": job.id}

    @worker.handler("parent")
    def parent(job: RunningJob) -> Any:
        runs.append({"id": job.id, "data": job.data})
        with Client(server.url) as client:
            if "child" not in job.data:
                child = client.enqueue("child", {"n": 1}, parent=job.id, depends_on=[job.data["fetch"]])
                job.set_data({**job.data, "child": child.id})
                job.report_progress({"children": 1})
                return None
            # Run again once its child ended: it finds the child's result.
            [child_job] = client.list_jobs(parent=job.id).jobs
            job.set_result({"parent": job.id, "child_result": child_job.result})
            return None

    @worker.handler("child")
    async def child(job: RunningJob) -> Any:
        await job.report_progress(0.5)
        return {"child": job.id, "parent": job.parent}

    async with AsyncClient(server.url) as client:
        fetched = (await client.enqueue("fetch", delay=1)).id
        pushed = (await client.enqueue("parent", {"fetch": fetched})).id
        stop, running = start(worker)
        await eventually("the parent completed", ended(client, pushed, fetched))
        stop.set()
        await running
        done = await client.get(pushed)
        child_id = done.data["child"]
        child_job = await client.get(child_id)
        assert (child_job.state, child_job.parent, child_job.progress) == ("completed", pushed, 0.5)
        assert child_job.result == {"child": child_id, "parent": pushed}
        assert (done.state, done.result) == ("completed", {"parent": pushed, "child_result": child_job.result})
        assert [r["id"] for r in runs] == [pushed, pushed], "it ran, then ran again once its child ended"
        assert (await client.get(fetched)).result == {"fetched_by": fetched}


async def test_a_batch_pushes_its_callbacks_once_its_jobs_ended(server):
    worker = Worker(server.url, "py-batch", wait=1)
    failed_once: List[int] = []

    @worker.handler("page.render")
    async def render(job: RunningJob) -> Any:
        await job.report_progress({"page": job.data["page"]})
        if job.data["page"] == 3 and not failed_once:
            failed_once.append(job.id)
            raise cairn.FailJob("bad-page", "page 3 cannot render")
        return {"page": job.data["page"], "rendered_by": job.id, "batch": job.batch}

    @worker.glob_handler("book.*")
    def callback(job: RunningJob) -> Any:
        job.set_result({"callback": job.name, "id": job.id, "counts": job.data["batch"]})

    async with AsyncClient(server.url) as client:
        created = await client.create_batch(
            [push("page.render", {"page": p}) for p in (1, 2, 3)],
            on_success=push("book.publish", {"book": 7}), on_complete=push("book.report", {"book": 7}),
            description="book 7",
        )
        stop, running = start(worker)

        async def batch_done() -> bool:
            batch = await client.get_batch(created.id)
            return batch.state == "completed" and batch.on_complete is not None and batch.on_complete.job is not None

        await eventually("the batch completed", batch_done)
        batch = await client.get_batch(created.id)
        assert batch.on_complete is not None and batch.on_complete.job is not None
        await eventually("its on_complete ran", ended(client, batch.on_complete.job))
        pages = [await client.get(e.id) for e in created.jobs]
        assert [p.state for p in pages] == ["completed", "completed", "failed"]
        assert pages[0].result == {"page": 1, "rendered_by": pages[0].id, "batch": created.id}
        assert pages[2].progress == {"page": 3}
        report = await client.get(batch.on_complete.job)
        assert report.result["callback"] == "book.report" and report.result["id"] == report.id
        assert {k: report.result["counts"][k] for k in ("id", "total", "completed", "failed")} == {
            "id": created.id, "total": 3, "completed": 2, "failed": 1}
        assert batch.on_success is not None and batch.on_success.job is None, "a page failed"
        # Run the failed page again: it succeeds now, and on_success follows.
        await client.requeue(pages[2].id)

        async def published() -> bool:
            callback = (await client.get_batch(created.id)).on_success
            return callback is not None and callback.job is not None and await ended(client, callback.job)()

        await eventually("on_success ran", published)
        stop.set()
        await running
        batch = await client.get_batch(created.id)
        assert batch.on_success is not None and batch.on_success.job is not None
        publish = await client.get(batch.on_success.job)
        assert (publish.name, publish.result["id"], publish.result["counts"]["completed"]) == (
            "book.publish", publish.id, 3)


async def test_a_handler_gets_every_field_of_the_job_and_a_retry_starts_from_its_checkpoint(server):
    worker = Worker(server.url, "py-fields", wait=1)
    seen: List[RunningJob] = []

    @worker.handler("steps")
    def steps(job: RunningJob) -> Any:
        seen.append(job)
        if job.attempt == 1:
            job.checkpoint({"done": 2})
            job.heartbeat()
            raise RetryLater("network down", delay=0)
        return {"resumed_from": job.data}

    trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    async with AsyncClient(server.url) as client:
        pushed = (await client.enqueue("steps", {"done": 0}, queue="work", tags=["t"], trace_parent=trace)).id
        worker.queues = ["work"]
        stop, running = start(worker)
        await eventually("it completed", ended(client, pushed))
        stop.set()
        await running
        first, second = seen
        assert (first.id, first.name, first.queue, first.tags, first.trace_parent) == (pushed, "steps", "work", ["t"], trace)
        assert (first.attempt, first.data, second.attempt, second.data) == (1, {"done": 0}, 2, {"done": 2})
        assert first.job is first and first.lease.job == pushed and not first.lost
        assert second.failure_group is None and second.error == "network down"
        assert (await client.get(pushed)).result == {"resumed_from": {"done": 2}}


async def test_a_call_under_a_lost_lease_raises_lease_lost_and_the_job_counts_as_lost(server):
    worker = Worker(server.url, "py-lost", wait=1)
    cancelled = asyncio.Event()
    raised: List[BaseException] = []

    @worker.handler("cancelled")
    async def handler(job: RunningJob) -> Any:
        async with AsyncClient(server.url) as other:
            await other.cancel(job.id)
        try:
            await job.report_progress(0.9)
        except cairn.LeaseLost as e:
            raised.append(e)
        cancelled.set()
        return {"should not": "be kept"}

    async with AsyncClient(server.url) as client:
        pushed = (await client.enqueue("cancelled")).id
        stop, running = start(worker)
        await asyncio.wait_for(cancelled.wait(), 20)
        stop.set()
        report = await running
        assert len(raised) == 1 and (report.lost, report.finished) == (1, 0)
        assert (await client.get(pushed)).result is None
