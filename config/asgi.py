"""ASGI entry point: websockets through Channels (console consumers) and HTTP through Django's stock
ASGI handler. Behind bin/cluster's nginx this process serves the websockets and the open-ended
streams (/api/v1/jobs/watch/, followed logs); every other request goes to the WSGI workers
(config/wsgi.py). Alone (`manage.py serve`, `gunicorn -c python:config.serving`) it serves all."""

import asyncio
import logging
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


class StaticFiles:
    """Collected static files (DEBUG=0) answered before Django, by WhiteNoise (its file index, caching
    headers and compressed variants) through a WSGI adapter for those paths only.

    As Django middleware WhiteNoise is sync-only: in Django's async chain it costs every request,
    API calls included, two more hops between the event loop and a thread (about a third of a
    submission's time under load). With DEBUG=1 Django's runserver serves them itself.
    """

    def __init__(self, app):
        from django.conf import settings

        self.app = app
        self.whitenoise = None
        if not settings.DEBUG:
            from asgiref.wsgi import WsgiToAsgi
            from whitenoise.base import WhiteNoise
            from whitenoise.middleware import WhiteNoiseMiddleware
            from whitenoise.string_utils import decode_path_info

            self.whitenoise = WhiteNoiseMiddleware()  # reads STATIC_ROOT, STATIC_URL and WHITENOISE_*

            def serve_file(environ, start_response):
                static_file = self.whitenoise.files[decode_path_info(environ["PATH_INFO"])]
                return WhiteNoise.serve(static_file, environ, start_response)

            self.serve = WsgiToAsgi(serve_file)

    async def __call__(self, scope, receive, send):
        files = self.whitenoise
        if (files is not None and scope["type"] == "http" and scope["path"].startswith(files.static_prefix)
                and files.files.get(scope["path"]) is not None):
            return await self.serve(scope, receive, send)
        return await self.app(scope, receive, send)


class ConcurrencyLimit:
    """At most TIDEPOOL_WEB_CONCURRENCY HTTP requests inside Django per process; the rest wait here.

    Django runs each ASGI request's sync code in a thread of its own, so a burst of 50 requests makes
    50 threads fight for one GIL and for the process's database connections (a pool of
    TIDEPOOL_DB_POOL_SIZE): requests then time out waiting for a connection. Waiting on an asyncio
    semaphore instead costs nothing and is first come, first served. Websockets are not limited.

    A request holds its place until its response starts: the body of a stream (the event stream
    of /api/v1/watch, a followed log) is sent without one, or one open stream would stop the process.
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
        semaphore = self.semaphore
        await semaphore.acquire()
        held = True

        def release() -> None:
            nonlocal held
            if held:
                held = False
                semaphore.release()

        async def send_then_release(message):
            if message["type"] == "http.response.start":
                release()
            await send(message)

        try:
            return await self.app(scope, receive, send_then_release)
        finally:
            release()


log = logging.getLogger("tidepool.console.live")


class RefuseWhileChannelLayerDown:
    """A websocket handshake that meets an unreachable channel layer (Redis down: joining the
    channel or its groups fails after redis-py's retries) is refused, not answered 500 with a
    traceback: 503 where the server can send an HTTP answer to a handshake (uvicorn), otherwise a
    close before accept (403). The browser reconnects with backoff and gets a snapshot once Redis
    is back."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "websocket":
            return await self.app(scope, receive, send)
        from redis.exceptions import RedisError

        accepted = False

        async def tracking_send(message):
            nonlocal accepted
            if message["type"] == "websocket.accept":
                accepted = True
            await send(message)

        try:
            return await self.app(scope, receive, tracking_send)
        except (RedisError, OSError) as error:
            log.warning("websocket %s refused: the channel layer is unreachable (%s)", scope.get("path"), error)
            if accepted:
                await send({"type": "websocket.close", "code": 1011})
            elif "websocket.http.response" in scope.get("extensions", {}):
                body = b"The live-update service (Redis) is unreachable; the page retries by itself.\n"
                await send({"type": "websocket.http.response.start", "status": 503,
                            "headers": [(b"content-type", b"text/plain"), (b"retry-after", b"5")]})
                await send({"type": "websocket.http.response.body", "body": body})
            else:
                await send({"type": "websocket.close", "code": 1011})
            return None


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
            "http": StaticFiles(ConcurrencyLimit(BodySizeLimit(django_asgi_app))),
            "websocket": RefuseWhileChannelLayerDown(
                AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns)))),
        }
    )
)
