"""The ASGI layers in front of Django (config/asgi.py): static files with DEBUG=0, the per-process
request limit that an open stream does not hold."""

from __future__ import annotations

import pytest
from asgiref.testing import ApplicationCommunicator

from config.asgi import StaticFiles


async def get(app, path: str, client: tuple[str, int] = ("127.0.0.1", 5000)) -> dict:
    """GET through the ASGI app; the answer's status, headers and whole body (a last body message
    may leave out "body", as the ASGI spec allows)."""
    scope = {"type": "http", "http_version": "1.1", "method": "GET", "path": path, "raw_path": path.encode(),
             "query_string": b"", "root_path": "", "scheme": "http", "headers": [(b"host", b"127.0.0.1")],
             "server": ("127.0.0.1", 80), "client": client}
    communicator = ApplicationCommunicator(app, scope)
    await communicator.send_input({"type": "http.request", "body": b""})
    start = await communicator.receive_output(5)
    body = b""
    while True:
        message = await communicator.receive_output(5)
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    await communicator.wait(5)
    return {"status": start["status"], "headers": start["headers"], "body": body}


class Recorder:
    """The inner application: answers 204 and remembers the paths it saw."""

    def __init__(self) -> None:
        self.paths: list[str] = []

    async def __call__(self, scope, receive, send):
        self.paths.append(scope["path"])
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})


@pytest.fixture
def served(settings, tmp_path):
    settings.DEBUG = False
    settings.STATIC_ROOT = tmp_path  # collected files would be here; the finders give static/
    inner = Recorder()
    return StaticFiles(inner), inner


async def test_a_static_file_is_served_with_caching_headers_without_reaching_django(served):
    app, inner = served
    response = await get(app, "/static/console/console.css")
    assert response["status"] == 200
    headers = {name.decode().lower(): value.decode() for name, value in response["headers"]}
    assert headers["content-type"].startswith("text/css")
    assert "max-age" in headers.get("cache-control", "")
    assert b"{" in response["body"]
    assert inner.paths == []


@pytest.mark.parametrize("path", ["/api/v1/jobs/", "/static/console/no-such-file.css", "/"])
async def test_other_paths_go_on_to_django(served, path):
    app, inner = served
    response = await get(app, path)
    assert response["status"] == 204
    assert inner.paths == [path]


async def test_with_debug_on_nothing_is_intercepted(settings, tmp_path):
    settings.DEBUG = True
    settings.STATIC_ROOT = tmp_path
    inner = Recorder()
    response = await get(StaticFiles(inner), "/static/console/console.css")
    assert response["status"] == 204 and inner.paths == ["/static/console/console.css"]


async def test_an_open_stream_does_not_hold_the_processes_only_request_slot(settings):
    """TIDEPOOL_WEB_CONCURRENCY=1: a streaming response (an event stream that stays open) gives its
    place up once its response has started, so the next request is served meanwhile."""
    import asyncio

    from config.asgi import ConcurrencyLimit

    settings.TIDEPOOL_WEB_CONCURRENCY = 1
    stream_open = asyncio.Event()
    finish_stream = asyncio.Event()

    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": []})
        if scope["path"] == "/stream":
            await send({"type": "http.response.body", "body": b"data: 1\n\n", "more_body": True})
            stream_open.set()
            await finish_stream.wait()
        await send({"type": "http.response.body", "body": b""})

    limited = ConcurrencyLimit(app)
    stream = asyncio.create_task(get(limited, "/stream"))
    await asyncio.wait_for(stream_open.wait(), 5)
    answer = await asyncio.wait_for(get(limited, "/other"), 5)  # would wait for the stream to end
    assert answer["status"] == 200
    finish_stream.set()
    assert (await asyncio.wait_for(stream, 5))["body"] == b"data: 1\n\n"
