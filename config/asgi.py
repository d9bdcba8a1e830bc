"""ASGI entry point: HTTP through Django, websockets through Channels (console consumers)."""

import asyncio
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from scheduler.publish import register_server_loop  # noqa: E402

try:
    from console.routing import websocket_urlpatterns  # noqa: E402
except ImportError:  # the console's consumers are optional for the API-only process
    websocket_urlpatterns = []


class BodySizeLimit:
    """Refuse HTTP bodies past DATA_UPLOAD_MAX_MEMORY_SIZE before Django reads them into memory.

    A declared Content-Length above the cap gets 413 at once; a chunked body that grows past it is
    cut off (the request is treated as disconnected), so no request can make the console buffer GBs.
    """

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        from django.conf import settings

        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        if scope["type"] != "http" or limit is None:
            return await self.app(scope, receive, send)
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > limit):
            body = f'{{"detail": "The request body is larger than {limit} bytes."}}'.encode()
            await send({"type": "http.response.start", "status": 413,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"content-length", str(len(body)).encode()), (b"connection", b"close")]})
            await send({"type": "http.response.body", "body": body})
            return None
        seen = 0

        async def bounded_receive():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    return {"type": "http.disconnect"}
            return message

        return await self.app(scope, bounded_receive, send)


class ConcurrencyLimit:
    """At most TIDEPOOL_WEB_CONCURRENCY HTTP requests inside Django per process; the rest wait here.

    Django runs each ASGI request's sync code in a thread of its own, so a burst of 50 requests makes
    50 threads fight for one GIL and for the process's database connections (a pool of
    TIDEPOOL_DB_POOL_SIZE): requests then time out waiting for a connection. Waiting on an asyncio
    semaphore instead costs nothing and is first come, first served. Websockets are not limited.
    """

    def __init__(self, app):
        self.app = app
        self.semaphore: asyncio.Semaphore | None = None

    async def __call__(self, scope, receive, send):
        from django.conf import settings

        limit = settings.TIDEPOOL_WEB_CONCURRENCY
        if scope["type"] != "http" or not limit:
            return await self.app(scope, receive, send)
        if self.semaphore is None:
            self.semaphore = asyncio.Semaphore(limit)
        async with self.semaphore:
            return await self.app(scope, receive, send)


class RecordServerLoop:
    """Remembers the server's event loop so other threads can publish into the in-memory channel layer."""

    def __init__(self, app):
        self.app = app
        self.registered = False

    async def __call__(self, scope, receive, send):
        if not self.registered:
            register_server_loop(asyncio.get_running_loop())
            self.registered = True
        return await self.app(scope, receive, send)


application = RecordServerLoop(
    ProtocolTypeRouter(
        {
            "http": ConcurrencyLimit(BodySizeLimit(django_asgi_app)),
            "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
        }
    )
)
