"""`Client` and `AsyncClient`: the same calls (see `_calls`), sent blocking with httpx or on asyncio.

`Client` sends through an httpx transport (its connection pool, HTTP/1.1 and TLS) rather than an `httpx.Client`:
the client's layers (base URLs, cookies, redirects, authentication flows, proxies from the environment) are of no
use to a Cairn server's API and cost more than the rest of a request. `AsyncClient`, which a worker's every round of
jobs goes through, sends on connections of its own on asyncio (`_http`), for a fifth of the Python that httpx's async
transport spent per request. So the server is reached directly, whatever HTTP_PROXY says.
"""

from __future__ import annotations

import json
import ssl
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import httpx

from ._calls import Call, Calls, Finishing, Seconds, Waiting, push
from ._errors import CairnError, InvalidInput, Unavailable, error_from_body
from ._http import Connections, HTTPError
from ._types import ClaimedJob, Enqueued, FinishAndTake, Job, Lease

DEFAULT_URL = "http://127.0.0.1:6670"


class _Requests:
    """Builds the requests of one server: its URL, headers and default timeout, computed once."""

    def __init__(self, url: str, token: Optional[str], timeout: float) -> None:
        self.base = url.rstrip("/")
        self.headers: List[Tuple[bytes, bytes]] = [(b"accept", b"application/json")]
        if token:
            if not token.isascii() or not token.isprintable():
                raise InvalidInput("invalid_input", "token: must be printable ASCII", "token")
            self.headers.append((b"authorization", f"Bearer {token}".encode()))
        self.plain_headers = [(name.decode(), value.decode()) for name, value in self.headers]
        self.timeout_seconds = timeout
        self.timeout = httpx.Timeout(timeout).as_dict()
        # Parsed once per path: the worker's few paths are asked for again and again.
        self.urls: Dict[str, httpx.URL] = {}

    def url(self, path: str) -> httpx.URL:
        url = self.urls.get(path)
        if url is None:
            url = httpx.URL(self.base + path)
            if len(self.urls) < 64:  # paths with a job's id in them are many; those are parsed each time
                self.urls[path] = url
        return url

    def build(self, call: Call) -> httpx.Request:
        timeout = httpx.Timeout(call.timeout).as_dict() if call.timeout is not None else self.timeout
        headers = self.headers
        content = b""
        if call.body is not None:
            content = json.dumps(call.body, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()
            headers = headers + [(b"content-type", b"application/json")]
        return httpx.Request(
            call.method, self.url(call.path), headers=headers, content=content, extensions={"timeout": timeout}
        )


# A client certificate: one PEM file holding the certificate and its key, or (certificate file, key file).
ClientCert = Union[str, Tuple[str, str]]


def _ssl_context(ca_file: Optional[str], client_cert: Optional[ClientCert]) -> ssl.SSLContext:
    """How an https:// server is checked, and the certificate shown to one that requires one: the authorities of
    `ca_file` (PEM) if given, else httpx's (certifi's, SSL_CERT_FILE and SSL_CERT_DIR)."""
    try:
        context = ssl.create_default_context(cafile=ca_file) if ca_file else httpx.create_ssl_context()
    except (OSError, ssl.SSLError) as e:
        raise InvalidInput("invalid_input", f"ca_file: cannot use {ca_file!r}: {e}", "ca_file") from None
    if client_cert is not None:
        cert, key = (client_cert, None) if isinstance(client_cert, str) else client_cert
        try:
            context.load_cert_chain(cert, key)
        except (OSError, ssl.SSLError) as e:
            raise InvalidInput("invalid_input", f"client_cert: cannot use {client_cert!r}: {e}", "client_cert") from None
    return context


def _read(call: Call, status: int, content: bytes) -> Any:
    try:
        body = json.loads(content) if content else {}
    except ValueError:
        body = None
    if 200 <= status < 300:
        return call.read(body)
    detail = body.get("error") if isinstance(body, dict) else None
    raise error_from_body(detail, status)


def _unreachable(call: Call, error: Exception) -> CairnError:
    return Unavailable("unavailable", f"{call.method} {call.path}: {error or type(error).__name__}")


class Client:
    """A blocking client of a Cairn server.

    >>> with Client("http://127.0.0.1:6670") as cairn:
    ...     job = cairn.enqueue("email.send", {"to": "a@example.com"})
    """

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        token: Optional[str] = None,
        timeout: float = 30.0,
        ca_file: Optional[str] = None,
        client_cert: Optional[ClientCert] = None,
    ) -> None:
        """`ca_file` (PEM) is the authority an https:// server's certificate must come from, when not one the
        machine trusts; `client_cert` is shown to a server that requires one (`cairn serve --tls-client-ca`)."""
        self._requests = _Requests(url, token, timeout)
        self._http = httpx.HTTPTransport(verify=_ssl_context(ca_file, client_cert))

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()

    def _send(self, call: Call) -> Any:
        try:
            response = self._http.handle_request(self._requests.build(call))
            try:
                response.read()
            finally:
                response.close()
        except httpx.TransportError as e:
            raise _unreachable(call, e) from e
        return _read(call, response.status_code, response.content)

    def health(self) -> Dict[str, Any]:
        """The server's status and version."""
        return self._send(Calls.health())

    def enqueue(self, name: str, data: Any = None, **options: Any) -> Enqueued:
        """Enqueues one job; `options` are `push`'s (queue, priority, delay, run_at, unique_key, tags, …)."""
        return self._send(Calls.enqueue(push(name, data, **options)))

    def enqueue_batch(self, jobs: Sequence[Dict[str, Any]]) -> List[Enqueued]:
        """Enqueues jobs made with `push`, all or none (a bad job's error names its index: `jobs[3].name`)."""
        return self._send(Calls.enqueue_batch(jobs))

    def get(self, job: int) -> Job:
        """The job, as it is now."""
        return self._send(Calls.get(job))

    def wait(self, job: int, timeout: Seconds) -> Job:
        """Waits until the job ends (completed, failed or cancelled), at most `timeout`, and returns it with its result
        or error; at the timeout, as it stands (check its `state`). The server answers the moment the job ends; a wait
        longer than its --max-wait (60 s by default) asks again."""
        waiting = Waiting(job, timeout)
        while True:
            found = self._send(waiting.call())
            if waiting.over(found):
                return found

    def cancel(self, job: int) -> None:
        """Cancels a job that has not finished; its worker, if any, is refused from then on."""
        self._send(Calls.cancel(job))

    def queues(self) -> List[Dict[str, Any]]:
        """Every queue with its jobs counted by state."""
        return self._send(Calls.queues())

    def dequeue(
        self,
        worker: str,
        *,
        queues: Sequence[str] = (),
        names: Sequence[str] = (),
        limit: int = 1,
        wait: Optional[Seconds] = None,
        max_weight: Optional[int] = None,
    ) -> List[ClaimedJob]:
        """Takes up to `limit` ready jobs (of at most `max_weight` in all); with `wait`, a long poll that returns the
        moment one is ready."""
        return self._send(Calls.dequeue(worker, queues, names, limit, wait, max_weight))

    def heartbeat(self, lease: Lease, progress: Any = None) -> str:
        """Extends the lease; returns its new expiry."""
        return self._send(Calls.heartbeat(lease, progress))

    def finish(self, lease: Lease, data: Any = None, *, result: Any = None) -> None:
        """Completes the job with `result` (what it produced, kept apart from its data) when given, replacing its
        data with `data` when given."""
        self._send(Calls.finish(lease, data, result))

    def finish_many(self, finishes: Iterable[Finishing]) -> List[Optional[CairnError]]:
        """Completes many jobs in one request (leases, `(lease, data)` pairs, or `Finish(lease, data=…, result=…)`);
        each one's error (None when done), in order."""
        return self._send(Calls.finish_many(finishes))

    def finish_and_take(
        self,
        finishes: Iterable[Finishing],
        worker: str,
        *,
        queues: Sequence[str] = (),
        names: Sequence[str] = (),
        limit: int = 1,
        max_weight: Optional[int] = None,
    ) -> FinishAndTake:
        """Completes jobs and takes the next ones (without waiting) in one request."""
        return self._send(Calls.finish_and_take(finishes, worker, queues, names, limit, max_weight))

    def retry(self, lease: Lease, error: str, *, delay: Optional[Seconds] = None) -> str:
        """Reports a transient error; returns the job's new state (`queued`, `scheduled`, or `failed`)."""
        return self._send(Calls.retry(lease, error, delay))

    def fail(self, lease: Lease, group: str, message: str) -> None:
        """Fails the job for good, in failure group `group`."""
        self._send(Calls.fail(lease, group, message))

    def release(self, lease: Lease) -> None:
        """Gives the job back unrun; the attempt does not count."""
        self._send(Calls.release(lease))

    def worker_stopped(self, worker: str) -> None:
        """Says the worker stops: the activity log shows it stopped, not lost."""
        self._send(Calls.worker_stopped(worker))


class AsyncClient:
    """`Client` for asyncio: the same methods, awaited."""

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        token: Optional[str] = None,
        timeout: float = 30.0,
        ca_file: Optional[str] = None,
        client_cert: Optional[ClientCert] = None,
    ) -> None:
        self._requests = _Requests(url, token, timeout)
        # TLS made only for https://: `Client`'s settings.
        tls = _ssl_context(ca_file, client_cert) if url.startswith("https:") else None
        try:
            self._http = Connections(self._requests.base, tls)
        except ValueError as e:
            raise InvalidInput("invalid_input", f"url: {e}", "url") from None
        # Each path's request head, for the worker's few paths asked for again and again.
        self._heads: Dict[Tuple[str, str], bytes] = {}

    async def aclose(self) -> None:
        self._http.close()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *_: Any) -> None:
        await self.aclose()

    def _request(self, call: Call) -> bytes:
        """The request's bytes: its head (each path's made once) and its JSON body."""
        key = (call.method, call.path)
        head = self._heads.get(key)
        if head is None:
            headers = self._requests.plain_headers
            if call.body is not None:
                headers = headers + [("content-type", "application/json")]
            head = self._http.head(call.method, call.path, headers)
            if len(self._heads) < 64:  # paths with a job's id in them are many; those are made each time
                self._heads[key] = head
        if call.body is None:
            # A POST without a body still says so, as httpx does.
            return head + (b"\r\n" if call.method == "GET" else b"Content-Length: 0\r\n\r\n")
        body = json.dumps(call.body, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()
        return b"%sContent-Length: %d\r\n\r\n%s" % (head, len(body), body)

    async def _send(self, call: Call) -> Any:
        request = self._request(call)
        timeout = call.timeout if call.timeout is not None else self._requests.timeout_seconds
        try:
            status, content = await self._http.request(request, timeout)
        except HTTPError as e:
            raise _unreachable(call, e) from e
        return _read(call, status, content)

    async def health(self) -> Dict[str, Any]:
        return await self._send(Calls.health())

    async def enqueue(self, name: str, data: Any = None, **options: Any) -> Enqueued:
        return await self._send(Calls.enqueue(push(name, data, **options)))

    async def enqueue_batch(self, jobs: Sequence[Dict[str, Any]]) -> List[Enqueued]:
        return await self._send(Calls.enqueue_batch(jobs))

    async def get(self, job: int) -> Job:
        return await self._send(Calls.get(job))

    async def wait(self, job: int, timeout: Seconds) -> Job:
        waiting = Waiting(job, timeout)
        while True:
            found = await self._send(waiting.call())
            if waiting.over(found):
                return found

    async def cancel(self, job: int) -> None:
        await self._send(Calls.cancel(job))

    async def queues(self) -> List[Dict[str, Any]]:
        return await self._send(Calls.queues())

    async def dequeue(
        self,
        worker: str,
        *,
        queues: Sequence[str] = (),
        names: Sequence[str] = (),
        limit: int = 1,
        wait: Optional[Seconds] = None,
        max_weight: Optional[int] = None,
    ) -> List[ClaimedJob]:
        return await self._send(Calls.dequeue(worker, queues, names, limit, wait, max_weight))

    async def heartbeat(self, lease: Lease, progress: Any = None) -> str:
        return await self._send(Calls.heartbeat(lease, progress))

    async def finish(self, lease: Lease, data: Any = None, *, result: Any = None) -> None:
        await self._send(Calls.finish(lease, data, result))

    async def finish_many(self, finishes: Iterable[Finishing]) -> List[Optional[CairnError]]:
        return await self._send(Calls.finish_many(finishes))

    async def finish_and_take(
        self,
        finishes: Iterable[Finishing],
        worker: str,
        *,
        queues: Sequence[str] = (),
        names: Sequence[str] = (),
        limit: int = 1,
        max_weight: Optional[int] = None,
    ) -> FinishAndTake:
        return await self._send(Calls.finish_and_take(finishes, worker, queues, names, limit, max_weight))

    async def retry(self, lease: Lease, error: str, *, delay: Optional[Seconds] = None) -> str:
        return await self._send(Calls.retry(lease, error, delay))

    async def fail(self, lease: Lease, group: str, message: str) -> None:
        await self._send(Calls.fail(lease, group, message))

    async def release(self, lease: Lease) -> None:
        await self._send(Calls.release(lease))

    async def worker_stopped(self, worker: str) -> None:
        await self._send(Calls.worker_stopped(worker))
