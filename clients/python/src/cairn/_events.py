"""Following the activity log's events (`GET /v1/events`, Server-Sent Events): `EventStream` for `Client.events`,
`AsyncEventStream` for `AsyncClient.events`.

Either resumes by itself after the connection drops (the server stopped, the network broke, or the stream went
silent past its keep-alive comments): it connects again with `Last-Event-ID`, the id of the last event it gave, after
a back-off that starts at half a second and doubles up to ten, so that no event is lost or given twice. A stream that
starts from "now" first asks the log where it stands (`GET /v1/activity?limit=1`), so that a reconnection before any
event resumes from there rather than from a later now. What the server refuses (a bad filter, a refused token) is
raised; a server out of reach is waited for. Closing the stream (`close`, `aclose`, leaving its `with` block, or
breaking out of the loop that reads it) ends it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import threading
from typing import TYPE_CHECKING, Any, AsyncIterator, Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple

import httpx

from ._calls import Calls, query
from ._errors import CairnError, Unavailable, error_from_body
from ._http import HTTPError
from ._types import Event

if TYPE_CHECKING:
    from ._async_client import AsyncClient
    from ._client import Client

log = logging.getLogger("cairn.events")

# The server sends a comment every 15 s: a stream silent this long is taken as broken, and made again.
SILENT_STREAM = 45.0
FIRST_BACKOFF = 0.5
MAX_BACKOFF = 10.0
# The most bytes one event may take before the stream is taken for something other than Cairn's.
MAX_EVENT_BYTES = 1 << 20


class Missed(NamedTuple):
    """The server's notice that a resumed stream started past events the log no longer holds (pruned by its
    retention): it asked to resume `after` an id, and went on from `oldest`."""

    after: int
    oldest: int


class _Parser:
    """Server-Sent Events from bytes as they come: each event's id, name and data, comments skipped."""

    def __init__(self) -> None:
        self.pending = bytearray()

    def feed(self, piece: bytes) -> List[Tuple[Optional[str], Optional[str], str]]:
        self.pending += piece.replace(b"\r\n", b"\n")
        blocks = []
        while True:
            end = self.pending.find(b"\n\n")
            if end < 0:
                break
            block = bytes(self.pending[:end]).decode("utf-8", "replace")
            del self.pending[: end + 2]
            fields: Dict[str, List[str]] = {}
            for line in block.split("\n"):
                if not line or line.startswith(":"):
                    continue
                name, _, value = line.partition(":")
                fields.setdefault(name, []).append(value[1:] if value.startswith(" ") else value)
            if "data" in fields:
                ids, names = fields.get("id"), fields.get("event")
                blocks.append((ids[-1] if ids else None, names[-1] if names else None, "\n".join(fields["data"])))
        if len(self.pending) > MAX_EVENT_BYTES:
            raise Unavailable("unavailable", "the event stream sent more than a megabyte without ending an event")
        return blocks


class _Position:
    """Where a stream stands, and what it asks the server for: shared by the blocking and the asyncio stream."""

    def __init__(
        self, after: Optional[int], kinds: Sequence[str], queue: Optional[str], name: Optional[str], job: Optional[int]
    ) -> None:
        params = {"queue": queue, "name": name, "job": job, "kinds": ",".join(kinds) if kinds else None}
        self.path = query("/v1/events", params)
        self.last_id = after
        self.missed: Optional[Missed] = None
        self.backoff = FIRST_BACKOFF
        self.parser = _Parser()

    def headers(self) -> List[Tuple[str, str]]:
        return [("accept", "text/event-stream"), ("last-event-id", str(self.last_id))]

    def start_from(self, newest: List[Event]) -> None:
        self.last_id = newest[0].id if newest else 0

    def connected(self) -> None:
        self.parser = _Parser()

    def events(self, piece: bytes) -> List[Event]:
        """The events in what came, in order; the place to resume from moves past each."""
        found = []
        for event_id, name, data in self.parser.feed(piece):
            try:
                body = json.loads(data)
            except ValueError:
                body = None
            if name == "missed" and isinstance(body, dict):
                self.missed = Missed(int(body.get("after", 0)), int(body.get("oldest", 0)))
                log.warning("the event stream resumed past pruned events: after %s, from %s", *self.missed)
                continue
            if not isinstance(body, dict) or not isinstance(body.get("id"), int):
                # A notice of a newer server this client does not know: passed over, its id kept.
                if event_id is not None and event_id.isdigit():
                    self.last_id = int(event_id)
                continue
            event = Event.from_body(body)
            self.last_id = event.id
            self.backoff = FIRST_BACKOFF
            found.append(event)
        return found

    def wait(self) -> float:
        """How long to wait before connecting again; the next wait doubles, up to `MAX_BACKOFF`."""
        wait, self.backoff = self.backoff, min(self.backoff * 2, MAX_BACKOFF)
        return wait


def _refusal(status: int, content: bytes) -> CairnError:
    try:
        body = json.loads(content) if content else None
    except ValueError:
        body = None
    return error_from_body(body.get("error") if isinstance(body, dict) else None, status)


class EventStream:
    """The activity log's events from `Client.events`, one by one: `for event in stream`. It resumes by itself
    after a dropped connection; `close()` (from any thread) ends it."""

    def __init__(self, client: "Client", position: _Position) -> None:
        self._client, self._position = client, position
        self._response: Optional[httpx.Response] = None
        self._body: Optional[Iterator[bytes]] = None
        self._socket: Optional[socket.socket] = None
        self._pending: List[Event] = []
        self._closed = threading.Event()

    @property
    def last_id(self) -> Optional[int]:
        """The id of the last event given: where a new stream would resume (`events(after=…)`)."""
        return self._position.last_id

    @property
    def missed(self) -> Optional[Missed]:
        """Set when the stream resumed past events the log no longer holds."""
        return self._position.missed

    def __iter__(self) -> "EventStream":
        return self

    def __next__(self) -> Event:
        while not self._pending:
            if self._closed.is_set():
                self._disconnect()
                raise StopIteration
            if self._body is None:
                self._connect()
                continue
            try:
                piece = next(self._body, None)
            except (httpx.TransportError, OSError, ValueError) as e:
                piece = None
                if not self._closed.is_set():
                    log.info("the event stream broke (%s); connecting again", e)
            if not piece:
                self._disconnect()
                continue
            self._pending.extend(self._position.events(piece))
        return self._pending.pop(0)

    def _connect(self) -> None:
        position = self._position
        while not self._closed.is_set():
            try:
                if position.last_id is None:
                    position.start_from(self._client._send(Calls.activity({"limit": 1})).events)
                response = self._client._open(position.path, position.headers(), SILENT_STREAM)
            except Unavailable as e:
                wait = position.wait()
                log.info("the event stream is out of reach (%s); trying again in %s s", e, wait)
                self._closed.wait(wait)
                continue
            if response.status_code != 200:
                response.read()
                response.close()
                error = _refusal(response.status_code, response.content)
                if not isinstance(error, Unavailable):
                    raise error
                self._closed.wait(position.wait())
                continue
            network = response.extensions.get("network_stream")
            self._socket = network.get_extra_info("socket") if network is not None else None
            self._response = response
            # One iterator for the response's life: dropping one midway would close the response.
            self._body = iter(response.stream)  # type: ignore[arg-type]
            position.connected()
            return

    def _disconnect(self) -> None:
        response, self._response, self._socket, self._body = self._response, None, None, None
        if response is not None:
            try:
                response.close()
            except (httpx.TransportError, OSError):
                pass

    def close(self) -> None:
        """Ends the stream: a `next` waiting for an event, in another thread, returns at once."""
        self._closed.set()
        sock = self._socket
        if sock is not None:
            try:
                # Wakes a read blocked on the socket, which closing it from this thread would not.
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def __enter__(self) -> "EventStream":
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()
        self._disconnect()


class AsyncEventStream:
    """The activity log's events from `AsyncClient.events`: `async for event in stream`. It resumes by itself after
    a dropped connection; `await aclose()` (or cancelling the task that reads it) ends it."""

    def __init__(self, client: "AsyncClient", position: _Position) -> None:
        self._client, self._position = client, position
        self._pieces: Optional[AsyncIterator[bytes]] = None
        self._connection: Any = None
        self._pending: List[Event] = []
        self._closed = False
        # Set by `aclose`, to end a back-off at once; made on the loop that reads the stream.
        self._closing: Optional[asyncio.Event] = None

    @property
    def last_id(self) -> Optional[int]:
        """The id of the last event given: where a new stream would resume (`events(after=…)`)."""
        return self._position.last_id

    @property
    def missed(self) -> Optional[Missed]:
        """Set when the stream resumed past events the log no longer holds."""
        return self._position.missed

    def __aiter__(self) -> "AsyncEventStream":
        return self

    async def __anext__(self) -> Event:
        while not self._pending:
            if self._closed:
                self._disconnect()
                raise StopAsyncIteration
            if self._pieces is None:
                await self._connect()
                continue
            try:
                piece: Optional[bytes] = await asyncio.wait_for(self._pieces.__anext__(), SILENT_STREAM)
            except (StopAsyncIteration, HTTPError, asyncio.TimeoutError) as e:
                piece = None
                if not self._closed:
                    log.info("the event stream broke (%s); connecting again", e or type(e).__name__)
            if not piece:
                self._disconnect()
                continue
            self._pending.extend(self._position.events(piece))
        return self._pending.pop(0)

    async def _connect(self) -> None:
        position = self._position
        while not self._closed:
            try:
                if position.last_id is None:
                    position.start_from((await self._client._send(Calls.activity({"limit": 1}))).events)
                status, headers, connection = await self._client._open(position.path, position.headers(), SILENT_STREAM)
            except Unavailable as e:
                wait = position.wait()
                log.info("the event stream is out of reach (%s); trying again in %s s", e, wait)
                await self._pause(wait)
                continue
            if status != 200:
                content = b"".join([piece async for piece in connection.pieces(headers)])
                connection.close()
                error = _refusal(status, content)
                if not isinstance(error, Unavailable):
                    raise error
                await self._pause(position.wait())
                continue
            self._connection = connection
            self._pieces = connection.pieces(headers)
            position.connected()
            return

    async def _pause(self, seconds: float) -> None:
        if self._closing is None:
            self._closing = asyncio.Event()
        try:
            await asyncio.wait_for(self._closing.wait(), seconds)
        except asyncio.TimeoutError:
            pass

    def _disconnect(self) -> None:
        connection, self._connection, self._pieces = self._connection, None, None
        if connection is not None:
            connection.close()

    async def aclose(self) -> None:
        """Ends the stream: an `__anext__` waiting for an event, or for the server, returns at once."""
        self._closed = True
        if self._closing is not None:
            self._closing.set()
        self._disconnect()

    async def __aenter__(self) -> "AsyncEventStream":
        return self

    async def __aexit__(self, *_: Any) -> None:
        await self.aclose()

