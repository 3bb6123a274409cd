"""`AsyncClient`'s HTTP/1.1: keep-alive connections on asyncio's own transports (TLS for `https://`), one request at a
time each, each request within one deadline.

A worker makes two requests per round of jobs, a take and the finishes. Through httpx's async transport each took
some 380 µs of Python (httpcore's pool, h11, anyio's locks and cancel scopes, each lock a turn of the event loop),
half of the worker's time; through this, about 80 µs (both with the call's JSON, on the machine of BENCHMARKS.md).
It does no more than the server's API needs: no redirects, cookies, proxies, compression or HTTP/2. A response is
read by its Content-Length, as chunks, or to the connection's end; a stream (the event stream's response, which
does not end) piece by piece as it comes, on a connection of its own (`Connections.stream`).
"""

from __future__ import annotations

import asyncio
import ssl
from collections import deque
from typing import AsyncIterator, Deque, Dict, List, Optional, Tuple
from urllib.parse import urlsplit

# How long an unused connection is kept, as httpx keeps one: the server closes idle ones, later (120 s by default).
KEEP_ALIVE = 5.0
# The most header bytes a response may have.
MAX_HEAD = 64 * 1024


class HTTPError(Exception):
    """The request went unanswered: no connection, a connection lost, a timeout or a response that is not HTTP."""


class _Connection(asyncio.Protocol):
    """One connection: what it has received and not yet read, and whether it has ended."""

    def __init__(self) -> None:
        self.transport: Optional[asyncio.Transport] = None
        self.buffer = bytearray()
        self.ended = False
        self.lost: Optional[BaseException] = None
        self.waiter: Optional[asyncio.Future[None]] = None
        self.writable: Optional[asyncio.Future[None]] = None
        self.idle_since = 0.0
        self.expired = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        self._wake()

    def eof_received(self) -> bool:
        self.ended = True
        self._wake()
        return False  # close it

    def connection_lost(self, exc: Optional[Exception]) -> None:
        self.ended, self.lost = True, exc
        self._wake()
        if self.writable is not None and not self.writable.done():
            self.writable.set_result(None)

    def pause_writing(self) -> None:
        self.writable = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self.writable is not None and not self.writable.done():
            self.writable.set_result(None)
        self.writable = None

    def _wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def _more(self) -> None:
        """Waits for more bytes; an error once the connection has ended."""
        if self.ended:
            raise HTTPError(f"the server closed the connection{f' ({self.lost})' if self.lost else ''}")
        self.waiter = asyncio.get_running_loop().create_future()
        try:
            await self.waiter
        finally:
            self.waiter = None

    def close(self) -> None:
        self.ended = True
        if self.transport is not None:
            self.transport.abort()
        self._wake()

    def expire(self) -> None:
        self.expired = True
        self.close()

    async def exchange(self, request: bytes) -> Tuple[int, bytes, bool]:
        """Sends a request and reads its response: the status, the body, and whether the connection can be reused."""
        assert self.transport is not None
        self.transport.write(request)
        if self.writable is not None:
            await self.writable
        status, headers, reusable = await self._head()
        while status < 200:  # an interim response (1xx): the response follows
            status, headers, reusable = await self._head()
        if status in (204, 304):
            return status, b"", reusable
        coding = headers.get("transfer-encoding")
        if coding is not None:
            if coding.rsplit(",", 1)[-1].strip().lower() != "chunked":
                return status, await self._to_end(), False
            return status, await self._chunked(), reusable
        length = headers.get("content-length")
        if length is None:
            return status, await self._to_end(), False
        try:
            size = int(length)
        except ValueError:
            raise HTTPError(f"a response with a bad Content-Length: {length!r}") from None
        return status, await self._take(size), reusable

    async def start(self, request: bytes) -> Tuple[int, Dict[str, str]]:
        """Sends a request and reads its response's head: the status and the headers (the body is left to read)."""
        assert self.transport is not None
        self.transport.write(request)
        if self.writable is not None:
            await self.writable
        status, headers, _ = await self._head()
        while status < 200:
            status, headers, _ = await self._head()
        return status, headers

    async def pieces(self, headers: Dict[str, str]) -> AsyncIterator[bytes]:
        """The body after `start`, piece by piece as it arrives, however it is framed; it ends with the body."""
        coding = headers.get("transfer-encoding")
        if coding is not None and coding.rsplit(",", 1)[-1].strip().lower() == "chunked":
            while True:
                line = await self._line()
                try:
                    size = int(line.split(b";", 1)[0].strip(), 16)
                except ValueError:
                    raise HTTPError(f"a malformed chunk size: {line[:80]!r}") from None
                if size == 0:
                    return
                async for piece in self._up_to(size):
                    yield piece
                if await self._take(2) != b"\r\n":
                    raise HTTPError("a chunk without its line end")
        length = headers.get("content-length")
        if coding is None and length is not None and length.isdigit():
            async for piece in self._up_to(int(length)):
                yield piece
            return
        while not self.ended or self.buffer:
            if self.buffer:
                piece = bytes(self.buffer)
                self.buffer.clear()
                yield piece
            else:
                await self._more_or_end()

    async def _up_to(self, size: int) -> AsyncIterator[bytes]:
        while size > 0:
            if not self.buffer:
                await self._more()
            piece = bytes(self.buffer[:size])
            del self.buffer[: len(piece)]
            size -= len(piece)
            yield piece

    async def _line(self, limit: int = MAX_HEAD) -> bytes:
        while True:
            end = self.buffer.find(b"\r\n")
            if end >= 0:
                line = bytes(self.buffer[:end])
                del self.buffer[: end + 2]
                return line
            if len(self.buffer) > limit:
                raise HTTPError("a response line too long")
            await self._more()

    async def _head(self) -> Tuple[int, Dict[str, str], bool]:
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end >= 0:
                break
            if len(self.buffer) > MAX_HEAD:
                raise HTTPError("a response head too long")
            await self._more()
        lines = bytes(self.buffer[:end]).decode("latin-1").split("\r\n")
        del self.buffer[: end + 4]
        version, _, rest = lines[0].partition(" ")
        code = rest[:3]
        if not version.startswith("HTTP/1.") or not code.isdigit():
            raise HTTPError(f"a response that is not HTTP/1: {lines[0][:80]!r}")
        headers: Dict[str, str] = {}
        for line in lines[1:]:
            name, colon, value = line.partition(":")
            if not colon:
                raise HTTPError(f"a malformed response header: {line[:80]!r}")
            name = name.strip().lower()
            value = value.strip()
            # Repeated fields join as one list, as RFC 9110 reads them.
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        connection = headers.get("connection", "").lower()
        reusable = "close" not in connection if version == "HTTP/1.1" else "keep-alive" in connection
        return int(code), headers, reusable

    async def _take(self, size: int) -> bytes:
        while len(self.buffer) < size:
            await self._more()
        body = bytes(self.buffer[:size])
        del self.buffer[:size]
        return body

    async def _chunked(self) -> bytes:
        body = bytearray()
        while True:
            line = await self._line()
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise HTTPError(f"a malformed chunk size: {line[:80]!r}") from None
            if size == 0:
                while await self._line():  # trailers, to the empty line
                    pass
                return bytes(body)
            body += await self._take(size)
            if await self._take(2) != b"\r\n":
                raise HTTPError("a chunk without its line end")

    async def _to_end(self) -> bytes:
        while not self.ended:
            await self._more_or_end()
        body = bytes(self.buffer)
        self.buffer.clear()
        return body

    async def _more_or_end(self) -> None:
        try:
            await self._more()
        except HTTPError:
            pass


class Connections:
    """Keep-alive connections to one server, each carrying one request at a time."""

    def __init__(self, url: str, ssl_context: Optional[ssl.SSLContext] = None) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http:// or https:// URL: {url!r}")
        self.https = parts.scheme == "https"
        self.host = parts.hostname
        self.port = parts.port or (443 if self.https else 80)
        host = f"[{self.host}]" if ":" in self.host else self.host
        default_port = 443 if self.https else 80
        self.authority = host if parts.port in (None, default_port) else f"{host}:{parts.port}"
        # Paths are the API's, after the URL's own path, if any.
        self.prefix = parts.path.rstrip("/")
        self.ssl = ssl_context if self.https else None
        self.idle: Deque[_Connection] = deque()
        self.closed = False

    def head(self, method: str, path: str, headers: List[Tuple[str, str]]) -> bytes:
        """A request's head but its end: each line ends, and the empty line that ends the head is left to add
        (after a Content-Length, when there is a body)."""
        lines = [f"{method} {self.prefix}{path} HTTP/1.1", f"Host: {self.authority}"]
        lines += [f"{name}: {value}" for name, value in headers]
        return ("\r\n".join(lines) + "\r\n").encode("latin-1")

    async def request(self, request: bytes, timeout: Optional[float]) -> Tuple[int, bytes]:
        """Sends `request` (its head and body) and answers its status and body, within `timeout` seconds in all."""
        if self.closed:
            raise HTTPError("the client is closed")
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        connection = self._reuse(loop.time())
        if connection is None:
            connection = await self._connect(loop, timeout)
        # At the deadline the connection is cut, which ends the wait for its answer.
        timer = None if deadline is None else loop.call_at(deadline, connection.expire)
        done = False
        try:
            status, body, reusable = await connection.exchange(request)
            done = True
        except HTTPError:
            if connection.expired:
                raise HTTPError(f"no answer within {timeout} s") from None
            raise
        finally:
            if timer is not None:
                timer.cancel()
            if not done:
                # Cut short (an error, or the caller cancelled): what it would carry next is unknown.
                connection.close()
        if reusable and not connection.ended and not self.closed:
            connection.idle_since = loop.time()
            self.idle.append(connection)
        else:
            connection.close()
        return status, body

    async def stream(self, request: bytes, timeout: Optional[float]) -> Tuple[int, Dict[str, str], _Connection]:
        """Sends `request` on a connection of its own and answers its status, headers and the connection, to read the
        body from (`_Connection.pieces`) and close; the head must come within `timeout` seconds."""
        if self.closed:
            raise HTTPError("the client is closed")
        loop = asyncio.get_running_loop()
        connection = await self._connect(loop, timeout)
        timer = None if timeout is None else loop.call_later(timeout, connection.expire)
        try:
            status, headers = await connection.start(request)
        except BaseException as e:
            connection.close()
            if isinstance(e, HTTPError) and connection.expired:
                raise HTTPError(f"no answer within {timeout} s") from None
            raise
        finally:
            if timer is not None:
                timer.cancel()
        return status, headers, connection

    def _reuse(self, now: float) -> Optional[_Connection]:
        # The most recently used first: the others may expire unused.
        while self.idle:
            connection = self.idle.pop()
            if connection.ended or connection.buffer or now - connection.idle_since > KEEP_ALIVE:
                connection.close()
                continue
            return connection
        return None

    async def _connect(self, loop: asyncio.AbstractEventLoop, timeout: Optional[float]) -> _Connection:
        connection = _Connection()
        connecting = loop.create_connection(
            lambda: connection,
            self.host,
            self.port,
            ssl=self.ssl,
            server_hostname=self.host if self.ssl is not None else None,
        )
        try:
            await asyncio.wait_for(connecting, timeout)
        except asyncio.TimeoutError:
            raise HTTPError(f"no connection within {timeout} s") from None
        except OSError as e:  # refused, unreachable, a name not found, TLS
            raise HTTPError(str(e) or type(e).__name__) from e
        return connection

    def close(self) -> None:
        self.closed = True
        while self.idle:
            self.idle.pop().close()
