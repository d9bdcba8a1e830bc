"""The web workers' accept gate (config/accept_gate.py): a worker takes a connection from the shared
listening socket only when it has a free view, so a request waits for whichever worker frees first
instead of queueing behind a busy one.

Each "worker" here is the real uvicorn server with the gate, on its own thread and event loop, on a
copy of one listening socket — as gunicorn's forked workers share theirs.
"""

from __future__ import annotations

import asyncio
import http.client
import shutil
import socket
import ssl
import subprocess
import threading
import time

import pytest
from uvicorn.config import Config
from websockets.sync.client import connect as websocket_connect

from config.accept_gate import AcceptGate, GatedHttpToolsProtocol, GatedServer


class Release:
    """Requests to /slow and /stream wait until the test sets this."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.entered = threading.Semaphore(0)


def make_app(name: str, release: Release, seen: list[str]):
    async def app(scope, receive, send):
        if scope["type"] == "websocket":
            await receive()  # websocket.connect
            await send({"type": "websocket.accept"})
            while (await receive())["type"] != "websocket.disconnect":
                pass
            return
        seen.append(f"{name} {scope['path']}")
        loop = asyncio.get_running_loop()
        if scope["path"] == "/slow":
            release.entered.release()
            await loop.run_in_executor(None, release.event.wait)
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        if scope["path"] == "/stream":
            await send({"type": "http.response.body", "body": b"first ", "more_body": True})
            release.entered.release()
            await loop.run_in_executor(None, release.event.wait)
        await send({"type": "http.response.body", "body": name.encode()})

    return app


class Worker:
    def __init__(self, name: str, listener: socket.socket, release: Release, seen: list[str],
                 first_byte_timeout: float = 10.0, **tls: str) -> None:
        config = Config(make_app(name, release, seen), loop="asyncio", http=GatedHttpToolsProtocol,
                        lifespan="off", log_level="warning", **tls)
        config.load()
        self.gate = AcceptGate(limit=1, first_byte_timeout=first_byte_timeout)
        self.server = GatedServer(config=config, gate=self.gate)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.serving = asyncio.run_coroutine_threadsafe(self.server.serve(sockets=[listener.dup()]), self.loop)
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert not self.serving.done(), self.serving.exception()
            assert time.monotonic() < deadline, "the worker did not start"
            time.sleep(0.01)

    def stop(self) -> None:
        self.server.should_exit = True
        self.serving.result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture
def cluster():
    """Start workers on one listening socket; stop them and release any waiting request afterwards."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=64)
    started: list[Worker] = []
    release = Release()
    seen: list[str] = []

    def start(names: list[str], **kwargs) -> list[Worker]:
        workers = [Worker(name, listener, release, seen, **kwargs) for name in names]
        started.extend(workers)
        return workers

    yield listener.getsockname()[1], start, release, seen
    release.event.set()
    for worker in started:
        worker.stop()
    listener.close()


def get(port: int, path: str, timeout: float = 10) -> http.client.HTTPResponse:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    connection.request("GET", path)
    response = connection.getresponse()
    response.body = response.read()
    connection.close()
    return response


def in_background(function, *args):
    result: dict = {}
    thread = threading.Thread(target=lambda: result.setdefault("value", function(*args)), daemon=True)
    thread.start()
    return thread, result


def test_a_busy_worker_leaves_new_requests_to_a_free_one(cluster):
    port, start, release, seen = cluster
    start(["a", "b"])
    slow, slow_result = in_background(get, port, "/slow")
    assert release.entered.acquire(timeout=10)
    busy = seen[-1].split()[0]
    free = {"a": "b", "b": "a"}[busy]
    # Without the gate the busy worker's loop accepts about half of these and serves them itself.
    answered_by = {get(port, "/fast").body.decode() for _ in range(12)}
    assert answered_by == {free}
    release.event.set()
    slow.join(10)
    assert slow_result["value"].body.decode() == busy


def test_a_request_waits_in_the_queue_until_the_worker_is_free_and_every_answer_closes(cluster):
    port, start, release, seen = cluster
    start(["only"])
    slow, slow_result = in_background(get, port, "/slow")
    assert release.entered.acquire(timeout=10)
    waiting, waiting_result = in_background(get, port, "/next")
    time.sleep(0.3)
    assert seen == ["only /slow"]  # accepted by nobody yet: it waits in the kernel's queue
    release.event.set()
    slow.join(10)
    waiting.join(10)
    assert seen == ["only /slow", "only /next"]
    for response in (slow_result["value"], waiting_result["value"]):
        assert response.status == 200
        assert response.getheader("connection") == "close"  # one request per connection


def test_a_started_stream_no_longer_holds_the_worker(cluster):
    port, start, release, seen = cluster
    start(["only"])
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("GET", "/stream")
    response = connection.getresponse()
    assert release.entered.acquire(timeout=10)  # the answer has started, its body has not ended
    assert get(port, "/fast", timeout=5).body == b"only"
    release.event.set()
    assert response.read() == b"first only"
    connection.close()


def test_an_open_websocket_no_longer_holds_the_worker(cluster):
    port, start, release, seen = cluster
    start(["only"])
    with websocket_connect(f"ws://127.0.0.1:{port}/ws/", open_timeout=10):
        assert get(port, "/fast", timeout=5).body == b"only"
        assert get(port, "/fast", timeout=5).body == b"only"


def test_a_silent_connection_is_closed_and_does_not_block_the_worker(cluster):
    port, start, release, seen = cluster
    start(["only"], first_byte_timeout=0.5)
    silent = socket.create_connection(("127.0.0.1", port), timeout=10)
    time.sleep(0.1)  # accepted: now the worker's only connection
    started = time.monotonic()
    assert get(port, "/fast", timeout=10).body == b"only"
    assert time.monotonic() - started >= 0.3  # it waited for the silent one to be dropped
    assert silent.recv(1) == b""  # closed by the worker
    silent.close()


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command to make a certificate")
def test_tls_given_to_gunicorn_is_served_through_the_gate(cluster, tmp_path):
    port, start, release, seen = cluster
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
                    "-days", "1", "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    start(["only"], ssl_certfile=str(cert), ssl_keyfile=str(key))
    context = ssl.create_default_context(cafile=str(cert))
    context.check_hostname = False
    connection = http.client.HTTPSConnection("127.0.0.1", port, timeout=10, context=context)
    connection.request("GET", "/fast")
    assert connection.getresponse().read() == b"only"
    connection.close()
