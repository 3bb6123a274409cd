"""`AsyncClient`'s own HTTP/1.1 (`cairn._http`) against scripted servers: the framings a response may have, keep-alive,
and the ways a request goes unanswered. The other tests hold it to a real `cairn serve`."""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess
from pathlib import Path
from typing import Awaitable, Callable, List, Optional

import pytest

from cairn import AsyncClient, Unavailable

Script = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class Scripted:
    """A loopback server that runs `script` on each connection, and records the requests' heads."""

    def __init__(self, script: Script, tls: Optional[ssl.SSLContext] = None) -> None:
        self.script, self.tls = script, tls
        self.connections = 0
        self.heads: List[bytes] = []
        self.tasks: List[asyncio.Task[None]] = []

    async def __aenter__(self) -> "Scripted":
        self.server = await asyncio.start_server(self.accept, "127.0.0.1", 0, ssl=self.tls)
        scheme = "https" if self.tls else "http"
        self.url = f"{scheme}://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"
        return self

    async def __aexit__(self, *_: object) -> None:
        self.server.close()
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)

    async def accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.tasks.append(asyncio.current_task())  # type: ignore[arg-type]
        try:
            await self.script(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            pass
        finally:
            writer.close()

    async def request(self, reader: asyncio.StreamReader) -> bytes:
        """Reads a request (head and body) and records its head."""
        head = await reader.readuntil(b"\r\n\r\n")
        self.heads.append(head)
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                await reader.readexactly(int(line.split(b":")[1]))
        return head


async def test_bodies_by_length_in_chunks_and_to_the_end_and_an_interim_response_skipped():
    async def script(reader, writer):
        await server.request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\n{\"n\": \"len\"}\n")
        await server.request(reader)
        # An interim response, then a chunked body split across chunks, with an extension and a trailer.
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        writer.write(b"5;x=y\r\n{\"n\":\r\n9\r\n \"chunks\"\r\n1\r\n}\r\n0\r\nTrailer: 1\r\n\r\n")
        await writer.drain()
        await server.request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n{\"n\": ")
        await writer.drain()
        await asyncio.sleep(0.05)  # the rest comes later, then the end of the connection
        writer.write(b"\"end\"}")

    async with Scripted(script) as server:
        async with AsyncClient(server.url) as client:
            assert await client.health() == {"n": "len"}
            assert await client.health() == {"n": "chunks"}
            assert await client.health() == {"n": "end"}
            assert server.connections == 1
            # The last response closed its connection: the next request opens another.
            assert await client.health() == {"n": "len"}
            assert server.connections == 2
    assert server.heads[0].startswith(b"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1:")


async def test_a_connection_is_reused_and_one_the_server_closed_is_not():
    async def script(reader, writer):
        for _ in range(2):
            await server.request(reader)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
            await writer.drain()
        # Closed when idle, as the server's idle timeout does.

    async with Scripted(script) as server:
        async with AsyncClient(server.url, token="tok") as client:
            await client.health()
            await client.health()
            assert server.connections == 1
            await asyncio.sleep(0.05)
            await client.health()
            assert server.connections == 2
            # A POST says its body's type and length; one without a body says its length is 0.
            await client.cancel(7)
    assert b"\r\nauthorization: Bearer tok\r\n" in server.heads[0]
    assert server.heads[3].startswith(b"POST /v1/jobs/7/cancel HTTP/1.1\r\n")
    assert b"\r\nContent-Length: 0\r\n" in server.heads[3]


async def test_no_answer_within_the_timeout_and_a_connection_lost_midway_are_unavailable():
    async def silent(reader, writer):
        await server.request(reader)
        await asyncio.sleep(5)

    async with Scripted(silent) as server:
        async with AsyncClient(server.url, timeout=0.2) as client:
            loop = asyncio.get_running_loop()
            started = loop.time()
            with pytest.raises(Unavailable, match="no answer within 0.2 s"):
                await client.health()
            assert loop.time() - started < 2

    async def cut(reader, writer):
        await server.request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"n\":")
        await writer.drain()

    async with Scripted(cut) as server:
        async with AsyncClient(server.url) as client:
            with pytest.raises(Unavailable, match="closed the connection"):
                await client.health()

    async def garbage(reader, writer):
        await server.request(reader)
        writer.write(b"SSH-2.0-OpenSSH\r\n\r\n")
        await writer.drain()

    async with Scripted(garbage) as server:
        async with AsyncClient(server.url) as client:
            with pytest.raises(Unavailable, match="not HTTP"):
                await client.health()


async def test_a_cancelled_request_leaves_its_connection_unused():
    async def script(reader, writer):
        await server.request(reader)
        if server.connections == 1:
            await asyncio.sleep(5)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
        await writer.drain()
        await asyncio.sleep(5)

    async with Scripted(script) as server:
        async with AsyncClient(server.url) as client:
            request = asyncio.ensure_future(client.health())
            await asyncio.sleep(0.05)
            request.cancel()
            with pytest.raises(asyncio.CancelledError):
                await request
            # Its answer might still come on that connection: the next request goes on a new one.
            assert await client.health() == {}
            assert server.connections == 2


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl makes the test's certificate")
async def test_https_checks_the_certificate_as_httpx_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(cert, key)

    async def script(reader, writer):
        while True:
            await server.request(reader)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{\"tls\": 1}")
            await writer.drain()

    async with Scripted(script, tls) as server:
        monkeypatch.delenv("SSL_CERT_FILE", raising=False)
        monkeypatch.delenv("SSL_CERT_DIR", raising=False)
        async with AsyncClient(server.url) as client:
            with pytest.raises(Unavailable, match="CERTIFICATE_VERIFY_FAILED"):
                await client.health()
        # Trusted as httpx trusts an authority: SSL_CERT_FILE names it.
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        async with AsyncClient(server.url) as client:
            assert await client.health() == {"tls": 1}
            assert await client.health() == {"tls": 1}
        # The refused handshake never reached the script; the two requests went on one connection.
        assert server.connections == 1
