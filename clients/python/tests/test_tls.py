"""HTTPS and mutual TLS against a real `cairn serve --tls-cert … --tls-client-ca …`: the blocking client, the
asyncio client and the Worker, with the test CA of `clients/testdata/tls` (test files, keys included)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from cairn import AsyncClient, Client, InvalidInput, Unavailable, Worker

from conftest import Server

TLS = Path(__file__).resolve().parents[2] / "testdata" / "tls"
CA = str(TLS / "ca.crt")
CLIENT_CERT = (str(TLS / "client.crt"), str(TLS / "client.key"))


@pytest.fixture
def https_server(tmp_path: Path):
    flags = ["--tls-cert", str(TLS / "server.crt"), "--tls-key", str(TLS / "server.key"), "--tls-client-ca", CA]
    running = Server(tmp_path, flags=flags)
    assert running.url.startswith("https://127.0.0.1:")
    yield running
    running.stop()


def test_the_blocking_client_trusts_its_ca_file_and_shows_its_certificate(https_server):
    with Client(https_server.url, ca_file=CA, client_cert=CLIENT_CERT) as cairn:
        job = cairn.enqueue("over.https", {"n": 1})
        assert cairn.get(job.id).data == {"n": 1}
    # Without a certificate the server refuses; without the CA the client refuses the server.
    with Client(https_server.url, ca_file=CA) as anonymous, pytest.raises(Unavailable):
        anonymous.health()
    with Client(https_server.url, client_cert=CLIENT_CERT) as trusting_nobody:
        with pytest.raises(Unavailable, match="CERTIFICATE_VERIFY_FAILED"):
            trusting_nobody.health()


async def test_the_asyncio_client_and_a_worker_run_jobs_over_mutual_tls(https_server):
    async with AsyncClient(https_server.url, ca_file=CA, client_cert=CLIENT_CERT) as client:
        job = await client.enqueue("tls.job", {"n": 2})
        worker = Worker(https_server.url, "py-tls", ca_file=CA, client_cert=CLIENT_CERT, wait=1)
        worker.handler("tls.job", lambda j: {"doubled": j.data["n"] * 2})
        stop = asyncio.Event()
        running = asyncio.create_task(worker.run_async(stop))
        for _ in range(400):
            if (await client.get(job.id)).state == "completed":
                break
            await asyncio.sleep(0.05)
        stop.set()
        report = await running
        assert report.finished == 1
        assert (await client.get(job.id)).result == {"doubled": 4}
    async with AsyncClient(https_server.url, ca_file=CA) as anonymous:
        with pytest.raises(Unavailable):
            await anonymous.health()


def test_tls_files_that_cannot_be_used_are_refused_by_name():
    with pytest.raises(InvalidInput, match="ca_file"):
        Client("https://127.0.0.1:1", ca_file="/nonexistent/ca.crt")
    with pytest.raises(InvalidInput, match="client_cert"):
        Client("https://127.0.0.1:1", client_cert=("/nonexistent/c.crt", "/nonexistent/c.key"))
