"""Managing jobs, batches, queues and recurring templates through the client, against a real server: each call's
effect as the server shows it afterwards. `AsyncClient` makes the same calls (`_calls` builds them once); the last
test runs a few of them awaited."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

import cairn
from cairn import AsyncClient, Client, Retry, push


def test_every_push_option_reaches_the_job(server):
    with Client(server.url) as client:
        first = client.enqueue("dep", queue="work")
        trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        pushed = client.enqueue(
            "report", {"n": 1}, queue="work", priority=4, weight=2, tags=["a", "b"], lease_timeout=45,
            timeout=timedelta(minutes=5), retry=Retry(max_attempts=3, initial_delay=2, multiplier=3.0, max_delay=60,
                                                       jitter=0.0),
            depends_on=[first.id], trace_parent=trace, children="job", concurrency_key="c:1", concurrency_limit=2,
        )
        job = client.get(pushed.id)
        assert (job.state, job.queue, job.priority, job.weight, job.tags) == ("waiting", "work", 4, 2, ["a", "b"])
        assert (job.lease_timeout_ms, job.timeout_ms, job.depends_on) == (45_000, 300_000, [first.id])
        assert job.retry == {"max_attempts": 3, "initial_delay_ms": 2000, "multiplier": 3.0, "max_delay_ms": 60000,
                             "jitter": 0.0}
        assert (job.trace_parent, job.children, job.concurrency_key, job.concurrency_limit) == (trace, "job", "c:1", 2)
        recurring = client.enqueue("poll", schedule="0 4 * * *", time_zone="Europe/Berlin",
                                   unique_key="poll-berlin")
        polled = client.get(recurring.id)
        assert (polled.schedule, polled.time_zone, polled.unique_key) == ("0 4 * * *", "Europe/Berlin", "poll-berlin")
        later = client.enqueue("later", run_at=datetime.now(timezone.utc) + timedelta(hours=1))
        assert later.state == "scheduled"


def test_a_partial_retry_policy_takes_the_defaults_for_the_rest(server):
    with Client(server.url) as client:
        once = client.get(client.enqueue("once", retry={"max_attempts": 1}).id)
        assert once.retry is not None and once.retry["max_attempts"] == 1
        [claimed] = client.dequeue("w")
        assert client.retry(claimed.lease, "flaky") == "failed", "one attempt, and it was spent"
        assert client.get(once.id).failure_group == "retries-exhausted"


def test_jobs_are_listed_by_each_filter_a_page_at_a_time(server):
    with Client(server.url) as client:
        ids = [e.id for e in client.enqueue_batch([push("mail.send", {"i": i}, queue="mail", tags=["t"]) for i in range(5)])]
        client.enqueue("other", queue="misc")
        page = client.list_jobs(queue="mail", limit=2)
        assert [j.id for j in page.jobs] == ids[::-1][:2] and page.next is not None
        assert [j.id for j in client.iter_jobs(queue="mail", page_size=2)] == ids[::-1]
        assert {j.name for j in client.list_jobs(name="mail.*").jobs} == {"mail.send"}
        assert len(client.list_jobs(tag="t", state="queued").jobs) == 5
        client.track(ids[0])
        assert [j.id for j in client.list_jobs(tracked=True).jobs] == [ids[0]]
        client.untrack(ids[0])
        assert client.list_jobs(tracked=True).jobs == []
        [claimed] = client.dequeue("w", queues=["mail"])
        client.fail(claimed.lease, "bad-address", "no such mailbox")
        [failed] = client.list_jobs(failure_group="bad-address").jobs
        assert (failed.id, failed.failure_group, failed.error) == (claimed.job.id, "bad-address", "no such mailbox")
        assert [(g.group, g.count) for g in client.failure_groups()] == [("bad-address", 1)]
        assert client.unfail("bad-address") == 1
        assert client.get(failed.id).state == "queued"


def test_a_job_is_changed_moved_requeued_and_deleted(server):
    with Client(server.url) as client:
        job = client.enqueue("x", {"v": 1}, delay=3600).id
        client.set_priority(job, 9)
        client.set_data(job, {"v": 2})
        client.change_tags(job, add=["new"], remove=[])
        client.move(job, "elsewhere")
        assert client.reschedule(job, datetime.now(timezone.utc) + timedelta(hours=2)) == "scheduled"
        got = client.get(job)
        assert (got.priority, got.data, got.tags, got.queue) == (9, {"v": 2}, ["new"], "elsewhere")
        other = client.enqueue("y").id
        assert client.change_dependencies(job, add=[other]) == "waiting"
        assert client.change_dependencies(job, remove=[other]) in ("scheduled", "queued")
        client.cancel(job)
        assert client.requeue(job) == "queued"
        client.delete(job)
        with pytest.raises(cairn.NotFound):
            client.get(job)


def test_bulk_actions_choose_jobs_by_filter_or_by_id(server):
    with Client(server.url) as client:
        ids = [e.id for e in client.enqueue_batch([push("b", queue="bulk") for _ in range(4)])]
        assert client.bulk("move", ids[:2], to_queue="moved") == cairn.BulkResult(matched=2, done=2, skipped=0)
        assert [j.queue for j in map(client.get, ids)] == ["moved", "moved", "bulk", "bulk"]
        assert client.bulk("cancel", queue="bulk").done == 2
        assert client.bulk("retry", state="cancelled").done == 2
        assert client.bulk("delete", ids).done == 4
        with pytest.raises(cairn.InvalidInput, match=r"^ids: give the jobs' ids or at least one filter"):
            client.bulk("delete")
        with pytest.raises(cairn.InvalidInput, match=r"^action: must be one of cancel, delete, retry, move"):
            client.bulk("purge", ids)


def test_a_batch_is_created_added_to_closed_and_read_back(server):
    with Client(server.url) as client:
        created = client.create_batch(
            [push("page", {"p": 1}), push("page", {"p": 2})], on_success=push("book.publish", {"book": 7}),
            on_complete=push("book.report", queue="reports"), open=True, description="book 7",
        )
        assert [e.state for e in created.jobs] == ["queued", "queued"]
        [added] = client.add_to_batch(created.id, [push("page", {"p": 3})])
        client.enqueue("page", {"p": 4}, batch=created.id)
        batch = client.get_batch(created.id)
        assert (batch.state, batch.total, batch.pending, batch.description) == ("open", 4, 4, "book 7")
        assert batch.on_success == cairn.BatchCallback(queue="default", name="book.publish")
        assert batch.on_complete is not None and batch.on_complete.queue == "reports"
        assert {j.id for j in client.list_jobs(batch=created.id).jobs} >= {added.id}
        assert client.close_batch(created.id).state == "running"
        assert [b.id for b in client.list_batches(state="running").batches] == [created.id]
        assert client.list_batches(state="open").batches == []


def test_queues_are_paused_limited_and_peeked(server):
    with Client(server.url) as client:
        ids = [client.enqueue("q", queue="ops", priority=p).id for p in (1, 5)]
        client.pause_queue("ops")
        assert client.dequeue("w", queues=["ops"]) == []
        [ops] = [q for q in client.queues() if q["queue"] == "ops"]
        assert ops["paused"] and ops["queued"] == 2
        client.resume_queue("ops")
        assert [j.id for j in client.peek("ops")] == ids[::-1]
        client.limit_queue("ops", 1)
        client.limit_keys("ops", 3)
        client.weigh_key("ops", "customer:1", 2)
        client.rate_limit_queue("ops", 10, timedelta(minutes=1))
        [ops] = [q for q in client.queues() if q["queue"] == "ops"]
        assert (ops["concurrency"], ops["key_concurrency"], ops["rate_limit"]) == (1, 3, {"jobs": 10, "per_ms": 60000})
        client.limit_queue("ops", None)
        client.rate_limit_queue("ops")
        [ops] = [q for q in client.queues() if q["queue"] == "ops"]
        assert (ops.get("concurrency"), ops.get("rate_limit")) == (None, None)
        # Aging and concurrency keys do not go together: another queue.
        client.enqueue("q", queue="aged")
        client.age_queue("aged", 60)
        [aged] = [q for q in client.queues() if q["queue"] == "aged"]
        assert aged["priority_aging_ms"] == 60000
        with pytest.raises(cairn.InvalidInput, match=r"^per: a rate limit needs both jobs and per"):
            client.rate_limit_queue("ops", 10)


def test_a_recurring_template_is_set_read_paused_run_and_removed(server):
    with Client(server.url) as client:
        job = push("report.nightly", {"kind": "daily"}, queue="reports", priority=2, tags=["nightly"])
        made = client.set_recurring("nightly", "0 4 * * *", job, time_zone="Europe/Berlin", missed="skip",
                                    overlap="skip")
        assert (made.key, made.cron, made.time_zone, made.overlap, made.paused) == (
            "nightly", "0 4 * * *", "Europe/Berlin", "skip", False)
        read = client.get_recurring("nightly")
        assert (read.missed, read.next_run) == ("skip", made.next_run)
        assert read.job is not None
        assert {k: read.job[k] for k in ("name", "data", "queue", "priority", "tags")} == {
            "name": "report.nightly", "data": {"kind": "daily"}, "queue": "reports", "priority": 2, "tags": ["nightly"]}
        assert [r.key for r in client.list_recurring()] == ["nightly"]
        assert client.pause_recurring("nightly").paused
        run = client.run_recurring("nightly")
        assert client.get(run.id).name == "report.nightly"
        assert client.resume_recurring("nightly").paused is False
        assert client.get_recurring("nightly").last_job == run.id
        client.remove_recurring("nightly")
        with pytest.raises(cairn.NotFound):
            client.get_recurring("nightly")


def test_who_am_i_the_workers_and_the_activity_log(guarded_server):
    with Client(guarded_server.url, token="s3cret-token-of-16+") as client:
        assert client.token() == cairn.Token(role="admin", name="token")
        job = client.enqueue("seen").id
        [claimed] = client.dequeue("w-42")
        [worker] = [w for w in client.workers() if w.id == "w-42"]
        assert (worker.jobs, worker.status) == ([job], "live")
        client.finish(claimed.lease)
        page = client.activity(job=job)
        assert [e.event for e in page.events][:2] == ["finished", "started"]
        assert all(isinstance(e, cairn.Event) and e.job == job for e in page.events)


async def test_the_async_client_makes_the_same_calls(server):
    async with AsyncClient(server.url) as client:
        created = await client.create_batch([push("a"), push("b")], on_complete=push("done"))
        assert (await client.get_batch(created.id)).total == 2
        assert [j.name async for j in client.iter_jobs(batch=created.id, page_size=1)] == ["b", "a"]
        assert (await client.bulk("cancel", batch=created.id)).done == 2
        await client.pause_queue("default")
        assert [q["paused"] for q in await client.queues()] == [True]
        made = await client.set_recurring("k", "*/5 * * * *", push("tick"), time_zone="UTC")
        assert made.key == "k" and (await client.list_recurring())[0].key == "k"
        assert (await client.token()).role == "admin"
