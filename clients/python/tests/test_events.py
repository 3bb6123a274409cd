"""Following the activity log (`Client.events`, `AsyncClient.events`) against a real server, through a loopback proxy
that can cut the connection and turn new ones away: every event comes once and in order across a cut, the stream
resumes from the last event it gave (`Last-Event-ID`), waits while the server is out of reach, raises what the
server refuses, and stops when closed."""

from __future__ import annotations

import asyncio
import queue
import socket
import threading
import time
from typing import List, Tuple
from urllib.parse import urlsplit

import pytest

import cairn
from cairn import AsyncClient, Client


class Proxy:
    """Forwards loopback connections to the server; `cut()` ends those open, `refusing` turns new ones away (as a
    server that is down would), and `heads` holds what the clients sent that starts a request (its head)."""

    def __init__(self, target: str) -> None:
        parts = urlsplit(target)
        self.target = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.heads: List[bytes] = []
        self.open: List[Tuple[socket.socket, socket.socket]] = []
        self.refusing = False
        self.turned_away = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.refusing:
                client.close()
                self.turned_away += 1
                continue
            upstream = socket.create_connection(self.target)
            self.open.append((client, upstream))
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, record: bool) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                if record and data.startswith((b"GET ", b"POST ")):
                    self.heads.append(data)
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def cut(self) -> None:
        for pair in self.open:
            for s in pair:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        self.open.clear()

    def close(self) -> None:
        self.listener.close()
        self.cut()

    def event_requests(self) -> List[bytes]:
        return [h for h in self.heads if h.startswith(b"GET /v1/events")]


@pytest.fixture
def proxy(server):
    running = Proxy(server.url)
    yield running
    running.close()


def read_in_thread(stream: cairn.EventStream) -> "queue.Queue[object]":
    """The stream's events, read on a thread of their own; the stream's end puts `StopIteration`."""
    found: "queue.Queue[object]" = queue.Queue()

    def read() -> None:
        try:
            for event in stream:
                found.put(event)
        except Exception as e:  # noqa: BLE001 - the test reads it
            found.put(e)
        found.put(StopIteration)

    threading.Thread(target=read, daemon=True).start()
    return found


def take(found: "queue.Queue[object]", n: int) -> List[cairn.Event]:
    events = [found.get(timeout=20) for _ in range(n)]
    assert all(isinstance(e, cairn.Event) for e in events), events
    return events  # type: ignore[return-value]


def test_the_stream_resumes_after_a_cut_and_a_server_out_of_reach_with_every_event_once(server, proxy):
    with Client(server.url) as client, Client(proxy.url) as through_proxy:
        client.enqueue("before")  # before the stream starts: not in it
        stream = through_proxy.events(kinds=["added"])
        found = read_in_thread(stream)
        while not proxy.event_requests():
            time.sleep(0.02)
        ids = [client.enqueue("job", {"n": n}).id for n in range(3)]
        first = take(found, 3)
        assert [(e.event, e.job, e.name) for e in first] == [("added", i, "job") for i in ids]
        assert stream.last_id == first[-1].id
        # Cut, and turned away for a while: the jobs added meanwhile come once the stream is made again.
        proxy.refusing = True
        proxy.cut()
        ids += [client.enqueue("job", {"n": n}).id for n in range(3, 6)]
        # Until the stream has tried again and been turned away, as by a server that is down.
        deadline = time.monotonic() + 20
        while not proxy.turned_away and time.monotonic() < deadline:
            time.sleep(0.02)
        assert proxy.turned_away, "the stream tried again while the server was out of reach"
        proxy.refusing = False
        second = take(found, 3)
        assert [e.job for e in second] == ids[3:]
        assert [e.id for e in first + second] == sorted({e.id for e in first + second})
        requests = proxy.event_requests()
        assert len(requests) >= 2
        assert f"last-event-id: {first[-1].id}\r\n".encode() in requests[-1].lower()
        stream.close()
        assert found.get(timeout=10) is StopIteration, "close() ends a read waiting on another thread"


def test_a_stream_from_an_id_replays_what_came_after_and_a_refused_one_raises(server):
    with Client(server.url) as client:
        ids = [client.enqueue("r", queue=q).id for q in ("a", "b", "a")]
        with client.events(after=0, queue="a", kinds=["added"]) as stream:
            events = [next(stream), next(stream)]
        assert [e.job for e in events] == [ids[0], ids[2]]
        with pytest.raises(cairn.InvalidInput) as refused:
            next(iter(client.events(after=10**9)))
        assert refused.value.field == "Last-Event-ID"


async def test_the_async_stream_resumes_after_a_cut_and_stops_when_closed(server, proxy):
    async with AsyncClient(server.url) as client, AsyncClient(proxy.url) as through_proxy:
        stream = through_proxy.events(kinds=["added", "finished"])
        first = asyncio.ensure_future(stream.__anext__())
        while not proxy.event_requests():
            await asyncio.sleep(0.02)
        job = (await client.enqueue("async.job")).id
        added = await asyncio.wait_for(first, 20)
        assert (added.event, added.job) == ("added", job)
        proxy.cut()
        [claimed] = await client.dequeue("w")
        await client.finish(claimed.lease)
        event = await asyncio.wait_for(stream.__anext__(), 20)
        assert (event.event, event.job) == ("finished", job)
        requests = proxy.event_requests()
        assert len(requests) == 2 and f"last-event-id: {added.id}\r\n".encode() in requests[1].lower()
        waiting = asyncio.ensure_future(stream.__anext__())
        await asyncio.sleep(0.1)
        await stream.aclose()
        with pytest.raises(StopAsyncIteration):
            await asyncio.wait_for(waiting, 5)
        async with AsyncClient(server.url) as other:
            with pytest.raises(cairn.InvalidInput) as refused:
                await other.events(after=10**9).__anext__()
            assert refused.value.field == "Last-Event-ID"


async def test_a_stream_waiting_for_a_server_out_of_reach_stops_when_closed():
    with Client("http://127.0.0.1:9", timeout=2) as client:
        stream = client.events()
        found = read_in_thread(stream)
        time.sleep(0.3)
        assert found.empty(), "no server, no event, no error: it waits"
        stream.close()
        assert found.get(timeout=5) is StopIteration
    async with AsyncClient("http://127.0.0.1:9", timeout=2) as client:
        events = client.events()
        waiting = asyncio.ensure_future(events.__anext__())
        await asyncio.sleep(0.3)
        assert not waiting.done()
        await events.aclose()
        with pytest.raises(StopAsyncIteration):
            await asyncio.wait_for(waiting, 5)
