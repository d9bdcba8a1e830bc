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
            "http": django_asgi_app,
            "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
        }
    )
)
